//! The classic overlap case, with no Redis: a report every 5 s that sometimes takes 12 s.
//!
//! Run it with `cargo run --example quickstart` and watch the log:
//!
//! - `report` uses the default `overlap = "skip"`: while a slow run goes on, the fires that find
//!   it running are dropped and each drop is logged as `fire skipped` with the reason.
//! - `sync_inventory` has the same rhythm with `overlap = "queue"` and `coalesce`: fires wait for
//!   the slot, and of several waiting fires only the latest runs (`fire coalesced into a later one`).
//!
//! Stop it with Ctrl-C: running jobs get the shutdown timeout to finish.

use std::time::Duration;

use cronguard::{scheduled, JobContext};

/// Every 5 s; every third fire is slow (12 s), so the next two fires find it running.
#[scheduled(every = "5s")]
async fn report(ctx: JobContext) -> anyhow::Result<()> {
    let slow = (ctx.fire_time().timestamp() / 5) % 3 == 0;
    let took = if slow { 12 } else { 1 };
    tracing::info!(run_key = %ctx.run_key(), "report: working for {took}s");
    tokio::select! {
        _ = tokio::time::sleep(Duration::from_secs(took)) => Ok(()),
        _ = ctx.cancelled() => Ok(()),
    }
}

/// The same rhythm, but late fires wait and collapse into the latest one.
#[scheduled(every = "5s", overlap = "queue", coalesce, misfire_grace = "30s")]
async fn sync_inventory(ctx: JobContext) {
    let slow = (ctx.fire_time().timestamp() / 5) % 3 == 0;
    let took = if slow { 12 } else { 1 };
    tracing::info!(run_key = %ctx.run_key(), "sync_inventory: working for {took}s");
    tokio::time::sleep(Duration::from_secs(took)).await;
}

#[tokio::main]
async fn main() -> Result<(), cronguard::Error> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let handle = cronguard::start().await?;
    for job in handle.monitor().jobs() {
        tracing::info!(job = %job.name, schedule = %job.schedule, next_fire = ?job.next_fire, "scheduled");
    }
    handle.run_until_shutdown_signal().await
}
