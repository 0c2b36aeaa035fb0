//! One runner per fire across replicas, with the `redis` guard.
//!
//! Start three copies against one Redis (each in its own terminal):
//!
//! ```text
//! CRONGUARD_REDIS_URL=redis://127.0.0.1:6379/ cargo run --example cluster
//! ```
//!
//! Every 3 s exactly one copy prints that it runs the fire, with a fencing token that only rises;
//! the others log (at debug level) that another process claimed it. The copy that ran the last
//! fire claims the next one at its instant; the others stand by and claim it half a second later
//! (`standby`), so the guard is asked once per fire while all is well. Freeze the runner with
//! `kill -STOP <pid>` for longer than the lease (6 s) and resume it with `kill -CONT <pid>`: the
//! others take the next fires (half a second late, the first of them), and the frozen run reports
//! `lease lost` and is cancelled.
//!
//! The copies claim each fire 200 ms ahead of its instant (`claim_ahead`, docs/design/standby.md)
//! and start it at the instant: the fencing token, never below Redis's clock in µs, then
//! lies below the fire's instant.

use std::time::Duration;

use cronguard::{scheduled, JobContext};

#[scheduled(
    every = "3s",
    lock = "redis",
    lease = "6s",
    standby = "500ms",
    name = "example::cluster::rebuild_index"
)]
async fn rebuild_index(ctx: JobContext) -> anyhow::Result<()> {
    println!(
        "pid {} runs {} with fencing token {}",
        std::process::id(),
        ctx.run_key(),
        ctx.fencing_token()
    );
    // Long enough that a renewal happens (every lease/3 = 2 s).
    tokio::time::sleep(Duration::from_millis(2500)).await;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), cronguard::Error> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,cronguard=debug")),
        )
        .init();
    cronguard::builder()
        .claim_ahead(Duration::from_millis(200))
        .start()
        .await?
        .run_until_shutdown_signal()
        .await
}
