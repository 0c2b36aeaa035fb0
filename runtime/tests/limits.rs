//! `timeout`, `retries` and `jitter` through the whole scheduler, on tokio's paused clock.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use cronguard::{Clock, Cronguard, Event, EventKind, FailureReason, Job, Lock, Schedule};

fn t0() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .expect("valid")
        .with_timezone(&Utc)
}

fn lock_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("cronguard-limits-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

async fn start(
    job: Job,
    dir: &std::path::Path,
    instance: &str,
    events: &Arc<Mutex<Vec<Event>>>,
) -> Cronguard {
    let sink = Arc::clone(events);
    cronguard::builder()
        .registered_jobs(false)
        .lock_dir(dir)
        .instance(instance)
        .clock(Clock::anchored(t0()))
        .on_event(move |e| sink.lock().expect("lock").push(e.clone()))
        .job(job)
        .start()
        .await
        .expect("starts")
}

#[tokio::test(start_paused = true)]
async fn two_failures_then_a_success_are_three_attempts_of_one_fire_under_one_token() {
    let dir = lock_dir("retries");
    let events = Arc::new(Mutex::new(Vec::new()));
    let calls = Arc::new(AtomicU32::new(0));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (c, s) = (Arc::clone(&calls), Arc::clone(&seen));
    let job = Job::new(
        "flaky",
        Schedule::every(Duration::from_secs(60)).expect("valid"),
    )
    .lock(Lock::File)
    .retries(3)
    .backoff(Duration::from_secs(2))
    .run(move |ctx| {
        let (c, s) = (Arc::clone(&c), Arc::clone(&s));
        async move {
            s.lock()
                .expect("lock")
                .push((ctx.attempt(), ctx.fencing_token(), ctx.fire_time()));
            if c.fetch_add(1, Ordering::SeqCst) < 2 {
                Err("not yet")
            } else {
                Ok(())
            }
        }
    });
    let handle = start(job, &dir, "one", &events).await;
    tokio::time::sleep(Duration::from_secs(70)).await;
    handle.shutdown().await;
    let events = events.lock().expect("lock").clone();
    let fire = t0() + TimeDelta::seconds(60);
    let story: Vec<(&str, Option<u32>)> = events
        .iter()
        .filter(|e| e.fire_time == fire)
        .map(|e| (e.kind.name(), e.attempt))
        .collect();
    assert_eq!(
        story,
        [
            ("started", Some(1)),
            ("failed", Some(1)),
            ("started", Some(2)),
            ("failed", Some(2)),
            ("started", Some(3)),
            ("succeeded", Some(3)),
        ],
        "{events:#?}"
    );
    let tokens: std::collections::BTreeSet<_> = events
        .iter()
        .filter(|e| e.fire_time == fire)
        .map(|e| e.fencing_token)
        .collect();
    assert_eq!(tokens.len(), 1, "one fencing token: {events:#?}");
    let retry_at: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Failed { retry_at, .. } => Some((*retry_at, e.at)),
            _ => None,
        })
        .collect();
    assert_eq!(retry_at[0].0, Some(retry_at[0].1 + TimeDelta::seconds(2)));
    assert_eq!(
        retry_at[1].0,
        Some(retry_at[1].1 + TimeDelta::seconds(4)),
        "doubled"
    );
    let seen = seen.lock().expect("lock").clone();
    assert_eq!(seen.len(), 3);
    assert!(seen
        .iter()
        .all(|(_, token, t)| *token == seen[0].1 && *t == fire));
    assert_eq!(seen.iter().map(|s| s.0).collect::<Vec<_>>(), [1, 2, 3]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(start_paused = true)]
async fn retries_stop_at_the_misfire_deadline_and_the_last_failure_is_the_end() {
    let dir = lock_dir("window");
    let events = Arc::new(Mutex::new(Vec::new()));
    // Grace 10 s: retries at +4 s and +12 s would pass it, so there is one retry only.
    let job = Job::new(
        "broken",
        Schedule::every(Duration::from_secs(60)).expect("valid"),
    )
    .lock(Lock::File)
    .misfire_grace(Duration::from_secs(10))
    .retries(5)
    .backoff(Duration::from_secs(4))
    .run(|_| async { Err::<(), _>("always") });
    let handle = start(job, &dir, "one", &events).await;
    tokio::time::sleep(Duration::from_secs(90)).await;
    handle.shutdown().await;
    let events = events.lock().expect("lock").clone();
    let fire = t0() + TimeDelta::seconds(60);
    let failures: Vec<_> = events
        .iter()
        .filter(|e| e.fire_time == fire)
        .filter_map(|e| match &e.kind {
            EventKind::Failed { retry_at, .. } => Some((e.attempt, retry_at.is_some())),
            _ => None,
        })
        .collect();
    assert_eq!(failures, [(Some(1), true), (Some(2), false)], "{events:#?}");
    let status = handle_status_failed(&events);
    assert_eq!(status, 1, "one run failed, one attempt was retried");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Final failures among the events (what the status and metrics count as failed runs).
fn handle_status_failed(events: &[Event]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Failed { retry_at: None, .. }))
        .count()
}

#[tokio::test(start_paused = true)]
async fn a_run_past_its_timeout_is_cancelled_there_and_reported_as_a_timeout() {
    let dir = lock_dir("timeout");
    let events = Arc::new(Mutex::new(Vec::new()));
    let job = Job::new(
        "slow",
        Schedule::every(Duration::from_secs(60)).expect("valid"),
    )
    .timeout(Duration::from_secs(5))
    .run(|_| async { tokio::time::sleep(Duration::from_secs(3_600)).await });
    let handle = start(job, &dir, "one", &events).await;
    tokio::time::sleep(Duration::from_secs(70)).await;
    handle.shutdown().await;
    let events = events.lock().expect("lock").clone();
    let failed = events
        .iter()
        .find(|e| e.kind.name() == "failed")
        .unwrap_or_else(|| panic!("{events:#?}"));
    assert!(matches!(
        failed.kind,
        EventKind::Failed {
            reason: FailureReason::Timeout,
            retry_at: None,
            ..
        }
    ));
    assert_eq!(failed.duration, Some(Duration::from_secs(5)));
    assert_eq!(failed.at, t0() + TimeDelta::seconds(65));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(start_paused = true)]
async fn a_jittered_fire_runs_once_across_replicas_and_never_before_its_time() {
    let dir = lock_dir("jitter");
    let events = Arc::new(Mutex::new(Vec::new()));
    let job = || {
        Job::new(
            "spread",
            Schedule::every(Duration::from_secs(10)).expect("valid"),
        )
        .lock(Lock::File)
        .jitter(Duration::from_secs(5))
        .run(|_| async {})
    };
    let a = start(job(), &dir, "a", &events).await;
    let b = start(job(), &dir, "b", &events).await;
    tokio::time::sleep(Duration::from_millis(55_500)).await;
    a.shutdown().await;
    b.shutdown().await;
    let events = events.lock().expect("lock").clone();
    let mut delays = std::collections::BTreeSet::new();
    for k in 1..=5 {
        let fire = t0() + TimeDelta::seconds(10 * k);
        let started: Vec<&Event> = events
            .iter()
            .filter(|e| e.fire_time == fire && e.kind.name() == "started")
            .collect();
        assert_eq!(started.len(), 1, "fire {k}: {events:#?}");
        let delay = started[0].at - fire;
        assert!(
            delay >= TimeDelta::zero() && delay < TimeDelta::seconds(5),
            "fire {k}: {delay}"
        );
        assert!(
            started[0].lateness < Some(Duration::from_millis(50)),
            "measured from T + jitter"
        );
        delays.insert(delay);
        let elsewhere = events
            .iter()
            .filter(|e| e.fire_time == fire && e.kind.name() == "claimed_elsewhere")
            .count();
        assert_eq!(elsewhere, 1, "fire {k}: {events:#?}");
    }
    assert!(
        delays.len() > 1,
        "the delay differs across fires: {delays:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
