//! A replica with many Redis-guarded jobs, for the rolling-restart test: `JOBS` jobs
//! (`fleet_0` …), each due every second, each run appending `start <job> <fire ms> <pid>` to the
//! shared record, and every drop reported at warn level (the first report of a skip or a misfire)
//! appending `warn <job> <last fire ms> <pid> <first fire ms> <when reported, ms>`, and every claim that lost to
//! another replica `lost <job> <fire ms> <pid>`. SIGTERM shuts the replica down gracefully, as a
//! deploy stops it.
//!
//! Settings (environment): `RECORD`, `CRONGUARD_REDIS_URL`, `JOBS` (300), `WORK_MS` (20),
//! `GRACE_MS` (2000), `LEASE_MS` (5000), `RUN_FOR_MS` (60000), `STANDBY_MS` (the default
//! standby when unset; 0: every replica claims every fire at its instant), `OWNERSHIP` (`0`:
//! partition ownership off; on by default, as in the library), `BLOCK_AT_MS` (the first run
//! of a fire at or after this Unix ms blocks its thread for an hour after its `start` line,
//! before its first await: an `async` job that calls blocking code, which holds up its shard).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cronguard::{EventKind, Job, Lock, Schedule};
use cronguard_tests::{append_line, env_u64};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter("cronguard=warn")
        .with_writer(std::io::stderr)
        .init();
    let record = std::env::var("RECORD")?;
    let jobs = env_u64("JOBS", 300);
    let work = Duration::from_millis(env_u64("WORK_MS", 20));
    let grace = Duration::from_millis(env_u64("GRACE_MS", 2000));
    let lease = Duration::from_millis(env_u64("LEASE_MS", 5000));
    let run_for = Duration::from_millis(env_u64("RUN_FOR_MS", 60_000));
    let standby = std::env::var("STANDBY_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map(Duration::from_millis);
    let pid = std::process::id();
    let ownership = std::env::var("OWNERSHIP").map_or(true, |v| v != "0");
    let block_at = std::env::var("BLOCK_AT_MS")
        .ok()
        .and_then(|v| v.parse::<i64>().ok());
    static BLOCKED: AtomicBool = AtomicBool::new(false);
    let mut builder = cronguard::builder()
        .registered_jobs(false)
        .partition_ownership(ownership);
    for i in 0..jobs {
        let record = record.clone();
        let job = Job::new(
            format!("fleet_{i}"),
            Schedule::every(Duration::from_secs(1))?,
        )
        .lock(Lock::Redis)
        .lease(lease)
        .misfire_grace(grace);
        let job = match standby {
            Some(standby) => job.standby(standby),
            None => job,
        };
        let job = job.run(move |ctx| {
            let record = record.clone();
            async move {
                let t = ctx.fire_time().timestamp_millis();
                append_line(&record, &format!("start {i} {t} {pid}"))?;
                if block_at.is_some_and(|at| t >= at) && !BLOCKED.swap(true, Ordering::SeqCst) {
                    append_line(&record, &format!("block {i} {t} {pid}"))?;
                    std::thread::sleep(Duration::from_secs(3600));
                }
                tokio::time::sleep(work).await;
                Ok::<(), std::io::Error>(())
            }
        });
        builder = builder.job(job);
    }
    let events = record.clone();
    let handle = builder
        .on_event(move |e| {
            let job = e.job.trim_start_matches("fleet_");
            if matches!(e.kind, EventKind::ClaimedElsewhere) {
                let t = e.fire_time.timestamp_millis();
                let _ = append_line(&events, &format!("lost {job} {t} {pid}"));
                return;
            }
            if !e.first_report {
                return;
            }
            let first = match &e.kind {
                EventKind::Misfired { first, .. } => *first,
                EventKind::Skipped { .. } => e.fire_time,
                _ => return,
            };
            let line = format!(
                "warn {job} {} {pid} {} {}",
                e.fire_time.timestamp_millis(),
                first.timestamp_millis(),
                chrono::Utc::now().timestamp_millis()
            );
            let _ = append_line(&events, &line);
        })
        .start()
        .await?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        () = tokio::time::sleep(run_for) => {}
        _ = term.recv() => {}
    }
    handle.shutdown_within(Duration::from_secs(5)).await;
    Ok(())
}
