//! A replica for the multi-process tests: runs one `file`-guarded job every second for a while
//! and appends `start|end <fire ms> <pid> <fencing token>` to a shared record.
//!
//! Settings (environment): `RECORD` (the record file), `WORK_MS` (how long each run takes),
//! `RUN_FOR_MS` (how long the process runs), `CLOCK_OFFSET_MS` (skews this replica's clock),
//! `CRONGUARD_LOCK_DIR`.

use std::time::Duration;

use cronguard::{Job, Lock, Schedule};
use cronguard_tests::{append_line, env_u64, replica_setup};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let (record, clock) = replica_setup()?;
    let work = Duration::from_millis(env_u64("WORK_MS", 50));
    let run_for = Duration::from_millis(env_u64("RUN_FOR_MS", 6000));
    let pid = std::process::id();
    let job = Job::new(
        "multi_process_job",
        Schedule::every(Duration::from_secs(1))?,
    )
    .lock(Lock::File)
    .run(move |ctx| {
        let record = record.clone();
        async move {
            let t = ctx.fire_time().timestamp_millis();
            let token = ctx.fencing_token();
            append_line(&record, &format!("start {t} {pid} {token}"))?;
            tokio::time::sleep(work).await;
            append_line(&record, &format!("end {t} {pid} {token}"))
        }
    });
    let handle = cronguard::builder()
        .registered_jobs(false)
        .clock(clock)
        .job(job)
        .start()
        .await?;
    tokio::time::sleep(run_for).await;
    handle.shutdown_within(Duration::from_secs(5)).await;
    Ok(())
}
