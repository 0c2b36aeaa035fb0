//! The `file` guard between schedulers that share a lock dir, on tokio's paused clock: one run
//! per fire even when their clocks disagree, and a busy job is reported as skipped once.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use cronguard::{Clock, Cronguard, Event, Job, Lock, Schedule};

fn t0() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .expect("valid")
        .with_timezone(&Utc)
}

fn lock_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("cronguard-fg-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

async fn replica(
    dir: &std::path::Path,
    offset_ms: i64,
    work: Duration,
    events: &Arc<Mutex<Vec<Event>>>,
) -> Cronguard {
    let sink = Arc::clone(events);
    let job = Job::new(
        "shared",
        Schedule::every(Duration::from_secs(1)).expect("valid"),
    )
    .lock(Lock::File)
    .run(move |_| async move { tokio::time::sleep(work).await });
    cronguard::builder()
        .registered_jobs(false)
        .lock_dir(dir)
        .instance(format!("replica{offset_ms}"))
        .clock(Clock::anchored(t0()).with_offset(TimeDelta::milliseconds(offset_ms)))
        .on_event(move |e| sink.lock().expect("lock").push(e.clone()))
        .job(job)
        .start()
        .await
        .expect("starts")
}

#[tokio::test(start_paused = true)]
async fn replicas_with_skewed_clocks_run_each_fire_once() {
    let dir = lock_dir("skew");
    let events = Arc::new(Mutex::new(Vec::new()));
    // The fast run (10 ms) is over long before the late replicas wake.
    let a = replica(&dir, 0, Duration::from_millis(10), &events).await;
    let b = replica(&dir, -300, Duration::from_millis(10), &events).await;
    let c = replica(&dir, -400, Duration::from_millis(10), &events).await;
    tokio::time::sleep(Duration::from_millis(5500)).await;
    for h in [a, b, c] {
        h.shutdown().await;
    }
    tokio::time::sleep(Duration::from_millis(1)).await;
    let events = events.lock().expect("lock").clone();
    for second in 1..=5 {
        let fire = t0() + TimeDelta::seconds(second);
        let of = |kind: &str| {
            events
                .iter()
                .filter(|e| e.fire_time == fire && e.kind.name() == kind)
                .count()
        };
        assert_eq!(of("started"), 1, "fire {second}: {events:#?}");
        assert_eq!(of("claimed_elsewhere"), 2, "fire {second}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(start_paused = true)]
async fn a_busy_job_is_reported_as_skipped_once_across_replicas() {
    let dir = lock_dir("busy");
    let events = Arc::new(Mutex::new(Vec::new()));
    // Runs take 2.5 s: fires 2 and 3 find fire 1's run still holding the lock.
    let a = replica(&dir, 0, Duration::from_millis(2500), &events).await;
    let b = replica(&dir, -50, Duration::from_millis(2500), &events).await;
    tokio::time::sleep(Duration::from_millis(3500)).await;
    a.shutdown().await;
    b.shutdown().await;
    tokio::time::sleep(Duration::from_millis(1)).await;
    let events = events.lock().expect("lock").clone();
    let fire2 = t0() + TimeDelta::seconds(2);
    let skips: Vec<_> = events
        .iter()
        .filter(|e| e.fire_time == fire2 && e.kind.name() == "skipped")
        .collect();
    assert_eq!(skips.len(), 2, "each replica records the skip: {events:#?}");
    assert_eq!(
        skips.iter().filter(|e| e.first_report).count(),
        1,
        "but only one reports it first"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
