//! A replica for the Redis and PostgreSQL fault tests: runs one job guarded by `LOCK` (`redis`,
//! the default, or `postgres`) every second and appends to a shared record
//! `start <fire ms> <pid> <token>`, `write …` every 100 ms while it runs, `end …` when it
//! finishes, and `ev:<event> …` for every event of the job (for `ev:misfired` the token field
//! holds the first fire the event reports). A run asked for with "run now" records
//! `mstart <asked at ms> <pid> <token>` instead of `start`, and a fire skipped because the job is
//! paused `ev:paused <fire ms> <pid> <1 if reported first, else 0>`.
//!
//! A run asked for also records `mrun <id> <pid> <token>`, and every event of one
//! `mev:<event> <id> <pid> <1 if reported first, else 0>`, with `<id>` the request's id without its
//! last hex digit ([`cronguard_tests::manual_id`]), so that a test can tell the requests apart.
//!
//! A misfire also records `missed:<count>:<1 if reported first, else 0>:<1 if on the process's
//! own word, else 0> <last fire ms> <pid> <first fire ms>` (own word: its text says the guard did
//! not decide it, docs/design/guarantees.md), and a skip `skipped:<1 if reported first, else 0> <fire ms> <pid> 0`, so
//! that a test can tell which fires they report and whether at warn level.
//! SIGTERM shuts the replica down gracefully, as a deploy stops it.
//!
//! Settings (environment): `RECORD`, `LOCK` (`redis`, `postgres`, `file` or `local`),
//! `CRONGUARD_REDIS_URL`, `CRONGUARD_POSTGRES_URL`, `CRONGUARD_LOCK_DIR` or
//! `CRONGUARD_STATE_DIR`, `LEASE_MS`,
//! `GRACE_MS`, `WORK_MS`, `RUN_FOR_MS`, `CLOCK_OFFSET_MS`, `COALESCE` (set: on).

use std::time::Duration;

use cronguard::{Job, Lock, Schedule};
use cronguard_tests::{append_line, env_u64, manual_id, replica_setup};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let (record, clock) = replica_setup()?;
    let lease = Duration::from_millis(env_u64("LEASE_MS", 3000));
    let grace = Duration::from_millis(env_u64("GRACE_MS", 60_000));
    let work = Duration::from_millis(env_u64("WORK_MS", 50));
    let run_for = Duration::from_millis(env_u64("RUN_FOR_MS", 10_000));
    let pid = std::process::id();
    let job_record = record.clone();
    let lock = match std::env::var("LOCK").as_deref() {
        Ok("postgres") => Lock::Postgres,
        Ok("file") => Lock::File,
        Ok("local") => Lock::Local,
        _ => Lock::Redis,
    };
    let leased = matches!(lock, Lock::Redis | Lock::Postgres);
    let mut job = Job::new("fault_job", Schedule::every(Duration::from_secs(1))?)
        .lock(lock)
        .history(std::env::var_os("HISTORY").is_some());
    if leased {
        job = job.lease(lease);
    }
    let job = job
        .misfire_grace(grace)
        .coalesce(std::env::var_os("COALESCE").is_some())
        .run(move |ctx| {
            let record = job_record.clone();
            async move {
                let t = ctx.fire_time().timestamp_millis();
                let token = ctx.fencing_token();
                let start = if ctx.is_manual() { "mstart" } else { "start" };
                append_line(&record, &format!("{start} {t} {pid} {token}"))?;
                if let Some(id) = manual_id(&ctx.run_key()) {
                    append_line(&record, &format!("mrun {id} {pid} {token}"))?;
                }
                let until = tokio::time::Instant::now() + work;
                while tokio::time::Instant::now() < until {
                    tokio::time::sleep(Duration::from_millis(100).min(work)).await;
                    // A real job would pass the fencing token with each write to its store.
                    append_line(&record, &format!("write {t} {pid} {token}"))?;
                }
                append_line(&record, &format!("end {t} {pid} {token}"))
            }
        });
    let handle = cronguard::builder()
        .registered_jobs(false)
        .clock(clock)
        .on_event(move |e| {
            let t = e.fire_time.timestamp_millis();
            if let Some(id) = e.manual {
                let line = format!(
                    "mev:{} {} {pid} {}",
                    e.kind.name(),
                    id >> 4,
                    u8::from(e.first_report)
                );
                let _ = append_line(&record, &line);
            }
            // A misfire carries no token: its slot holds the first fire it reports (a pause
            // reports every fire it missed in one event).
            match &e.kind {
                cronguard::EventKind::Misfired {
                    first,
                    count,
                    reason,
                } => {
                    let line = format!(
                        "missed:{count}:{}:{} {t} {pid} {}",
                        u8::from(e.first_report),
                        u8::from(on_own_word(reason)),
                        first.timestamp_millis()
                    );
                    let _ = append_line(&record, &line);
                }
                cronguard::EventKind::Skipped { .. } => {
                    let line = format!("skipped:{} {t} {pid} 0", u8::from(e.first_report));
                    let _ = append_line(&record, &line);
                }
                _ => {}
            }
            let (name, token) = match &e.kind {
                cronguard::EventKind::Misfired { first, .. } => (
                    "misfired",
                    u64::try_from(first.timestamp_millis()).unwrap_or(0),
                ),
                cronguard::EventKind::Skipped { paused: true, .. } => {
                    ("paused", u64::from(e.first_report))
                }
                kind => (kind.name(), e.fencing_token.unwrap_or(0)),
            };
            let _ = append_line(&record, &format!("ev:{name} {t} {pid} {token}"));
        })
        .job(job)
        .start()
        .await?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        () = tokio::time::sleep(run_for) => {}
        _ = term.recv() => {}
    }
    handle.shutdown_within(Duration::from_secs(3)).await;
    Ok(())
}

/// Whether a misfire is reported on the process's own word, as its text says: the guard could
/// not be asked or could not record it. Such a report may repeat another's
/// (docs/design/guarantees.md, 11 and 12).
fn on_own_word(reason: &str) -> bool {
    reason.contains("told on this process's own word")
        || reason.contains("the guard could not record them")
        || reason.contains("clock is ahead")
}
