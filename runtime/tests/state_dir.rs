//! `local` jobs across a restart of their process (docs/guide/downtime.md), on tokio's paused
//! clock: with a state dir, the fires missed while the process was down are caught up within their
//! grace and reported once beyond it, and no fire runs twice; a job that never ran has nothing to
//! catch up; without a state dir the start says what a `local` job cannot know.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use cronguard::{Clock, Event, EventKind, Job, Schedule};
use cronguard_testkit::Logs;

fn t0() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .expect("a valid instant")
        .with_timezone(&Utc)
}

/// Seconds after `t0`.
fn secs(t: DateTime<Utc>) -> i64 {
    (t - t0()).num_seconds()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cronguard-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// One life of the process: starts at `t0 + at_s` with the state dir `dir`, runs for `run_s`
/// (plus half a second, so that no step meets a fire instant), shuts down; answers its events.
async fn life(dir: &PathBuf, at_s: i64, run_s: u64) -> Vec<Event> {
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&events);
    let job = Job::new(
        "nightly",
        Schedule::every(Duration::from_secs(1)).expect("valid"),
    )
    .misfire_grace(Duration::from_secs(2))
    .coalesce(true)
    .run(|_ctx| async {});
    let handle = cronguard::builder()
        .registered_jobs(false)
        .clock(Clock::anchored(t0() + TimeDelta::seconds(at_s)))
        .state_dir(dir)
        .on_event(move |e| sink.lock().expect("lock").push(e.clone()))
        .job(job)
        .start()
        .await
        .expect("starts");
    tokio::time::sleep(Duration::from_secs(run_s) + Duration::from_millis(500)).await;
    handle.shutdown().await;
    tokio::time::sleep(Duration::from_millis(1)).await;
    let events = events.lock().expect("lock").clone();
    events
}

fn started(events: &[Event]) -> Vec<i64> {
    events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Started))
        .map(|e| secs(e.fire_time))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_restarted_process_catches_up_and_reports_what_it_missed() {
    let dir = scratch("state-dir-restart");
    // A first start: the job never ran, so nothing is caught up or reported.
    let first = life(&dir, 0, 3).await;
    assert_eq!(started(&first), [1, 2, 3]);
    assert!(
        first
            .iter()
            .all(|e| !matches!(e.kind, EventKind::Misfired { .. })),
        "no false alarm for a job that never ran: {first:?}"
    );

    // Down from second 3.5 to second 10: fires 4 to 8 are past their grace of 2 s, 9 and 10
    // within it (10 is the start's own instant).
    let second = life(&dir, 10, 2).await;
    let misfires: Vec<(i64, i64, u32, bool)> = second
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Misfired { first, count, .. } => {
                Some((secs(*first), secs(e.fire_time), *count, e.first_report))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        misfires,
        [(4, 8, 5, true)],
        "one report of the missed fires"
    );
    let coalesced: Vec<i64> = second
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Coalesced { .. }))
        .map(|e| secs(e.fire_time))
        .collect();
    assert_eq!(coalesced, [9], "with coalesce only the latest fire runs");
    assert_eq!(started(&second), [10, 11, 12]);

    // Started again at once: the fate point is fire 12, so nothing is missed, nothing repeated.
    let third = life(&dir, 12, 1).await;
    assert_eq!(started(&third), [13]);
    assert!(
        third.iter().all(|e| !matches!(
            e.kind,
            EventKind::Misfired { .. } | EventKind::Coalesced { .. }
        )),
        "{third:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(start_paused = true)]
async fn without_a_state_dir_the_start_says_what_a_local_job_cannot_know() {
    let logs = Logs::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter("cronguard=info")
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let job = Job::new(
        "local",
        Schedule::every(Duration::from_secs(60)).expect("valid"),
    )
    .run(|_ctx| async {});
    let handle = cronguard::builder()
        .registered_jobs(false)
        .job(job)
        .start()
        .await
        .expect("starts");
    handle.shutdown().await;
    let text = logs.text();
    let said = text
        .lines()
        .filter(|l| l.contains("CRONGUARD_STATE_DIR") && l.contains("INFO"))
        .count();
    assert_eq!(said, 1, "{text}");
}
