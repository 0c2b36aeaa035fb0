//! The gauges and counters the alert rules read (`docs/operations/alerts.md`) — last success, next
//! fire, overdue, guard errors — read back with a debugging recorder local to each test (the
//! runtime is current-thread, so every task of the scheduler records into it).

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use cronguard::guard::{Claim, Guard, GuardError, GuardErrorKind};
use cronguard::{Clock, Job, Lock, Overlap, Schedule};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};

type BoxFuture<T> = Pin<Box<dyn std::future::Future<Output = T> + Send + 'static>>;

fn t0() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .expect("valid")
        .with_timezone(&Utc)
}

/// Unix seconds of `t0() + s`.
fn at(s: i64) -> f64 {
    (t0().timestamp() + s) as f64
}

/// Every series as `name{label=value,...}` (labels sorted) with its value: the last value of a
/// gauge, the total of a counter, the number of values of a histogram.
fn read(snapshotter: &Snapshotter) -> BTreeMap<String, f64> {
    let mut all = BTreeMap::new();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let (_, key) = key.into_parts();
        let mut labels: Vec<String> = key
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        labels.sort();
        let name = format!("{}{{{}}}", key.name(), labels.join(","));
        let value = match value {
            DebugValue::Gauge(g) => g.into_inner(),
            DebugValue::Counter(n) => n as f64,
            DebugValue::Histogram(values) => values.len() as f64,
        };
        all.insert(name, value);
    }
    all
}

#[tokio::test(start_paused = true)]
async fn last_success_next_fire_and_overdue_follow_the_job() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);

    // Fires at 5, 10, 15, 20 s. The first run takes 12 s: fire 10 waits for its slot and misfires
    // when its grace of 1 s runs out (at 11); fire 20 starts at once.
    let first = Arc::new(AtomicBool::new(true));
    let job = Job::new(
        "slow_once",
        Schedule::every(Duration::from_secs(5)).expect("valid"),
    )
    .overlap(Overlap::Queue)
    .misfire_grace(Duration::from_secs(1))
    .run(move |_| {
        let first = first.swap(false, Ordering::SeqCst);
        async move {
            if first {
                tokio::time::sleep(Duration::from_secs(12)).await;
            }
        }
    });
    let handle = cronguard::builder()
        .registered_jobs(false)
        .clock(Clock::anchored(t0()))
        .job(job)
        .start()
        .await
        .expect("starts");
    let get = |all: &BTreeMap<String, f64>, name: &str| {
        all.get(&format!("{name}{{cronguard_job=slow_once}}"))
            .copied()
    };

    tokio::time::sleep(Duration::from_millis(100)).await; // the shard schedules its jobs
    let all = read(&snapshotter);
    assert_eq!(
        get(&all, "cronguard_next_fire_timestamp_seconds"),
        Some(at(5)),
        "set when the job is scheduled: {all:#?}"
    );
    assert_eq!(
        get(&all, "cronguard_job_overdue"),
        None,
        "registered on first use"
    );

    tokio::time::sleep(Duration::from_millis(11_500)).await;
    let all = read(&snapshotter);
    assert_eq!(
        get(&all, "cronguard_job_overdue"),
        Some(1.0),
        "fire 10 passed its grace unclaimed: {all:#?}"
    );
    assert_eq!(get(&all, "cronguard_last_success_timestamp_seconds"), None);
    assert_eq!(
        get(&all, "cronguard_next_fire_timestamp_seconds"),
        Some(at(15))
    );

    tokio::time::sleep(Duration::from_secs(9)).await; // 20.5 s
    let all = read(&snapshotter);
    assert_eq!(
        get(&all, "cronguard_job_overdue"),
        Some(0.0),
        "fire 20 started: {all:#?}"
    );
    assert_eq!(
        get(&all, "cronguard_last_success_timestamp_seconds"),
        Some(at(20)),
        "the end of the last successful run (fire 20 ends as it starts)"
    );
    assert_eq!(
        get(&all, "cronguard_next_fire_timestamp_seconds"),
        Some(at(25))
    );
    assert!(
        all.get("cronguard_dropped_fires_total{cronguard_job=slow_once,reason=misfired}")
            >= Some(&1.0),
        "{all:#?}"
    );
    handle.shutdown_within(Duration::ZERO).await;
}

/// A store that is down: every claim fails with the error `fail` makes.
struct Down(fn() -> GuardError);

impl Guard for Down {
    fn claim(&self, _: DateTime<Utc>) -> BoxFuture<Result<Claim, GuardError>> {
        let error = (self.0)();
        Box::pin(async move { Err(error) })
    }

    fn last_claimed(&self) -> BoxFuture<Result<Option<DateTime<Utc>>, GuardError>> {
        Box::pin(async { Ok(None) })
    }
}

#[tokio::test(start_paused = true)]
async fn guard_errors_are_counted_by_kind_and_the_job_turns_overdue() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);

    let job = |name: &str, guard: &str| {
        Job::new(
            name,
            Schedule::every(Duration::from_secs(5)).expect("valid"),
        )
        .lock(Lock::custom(guard))
        .misfire_grace(Duration::from_secs(2))
        .run(|_| async {})
    };
    let handle = cronguard::builder()
        .registered_jobs(false)
        .clock(Clock::anchored(t0()))
        .custom_guard("broken", |_| {
            Arc::new(Down(|| GuardError::other("disk full")))
        })
        .custom_guard("confused", |_| {
            Arc::new(Down(|| {
                GuardError::new(GuardErrorKind::Invalid, "an answer of a newer version")
            }))
        })
        .job(job("broken_store", "broken"))
        .job(job("confused_store", "confused"))
        .start()
        .await
        .expect("starts");
    // Fire 5 is claimed and retried until its grace runs out at 7.
    tokio::time::sleep(Duration::from_millis(7_500)).await;
    let all = read(&snapshotter);
    let errors = |job: &str, kind: &str| {
        all.get(&format!(
            "cronguard_guard_errors_total{{cronguard_job={job},kind={kind}}}"
        ))
        .copied()
        .unwrap_or(0.0)
    };
    assert!(errors("broken_store", "other") >= 1.0, "{all:#?}");
    assert!(errors("confused_store", "invalid") >= 1.0, "{all:#?}");
    assert_eq!(errors("broken_store", "invalid"), 0.0);
    assert_eq!(
        all.get("cronguard_job_overdue{cronguard_job=broken_store}"),
        Some(&1.0),
        "{all:#?}"
    );
    handle.shutdown_within(Duration::ZERO).await;
}

#[tokio::test(start_paused = true)]
async fn the_loop_is_alive_while_running_and_not_after_shutdown() {
    let job = Job::new(
        "tick",
        Schedule::every(Duration::from_secs(1)).expect("valid"),
    )
    .run(|_| async {});
    let handle = cronguard::builder()
        .registered_jobs(false)
        .job(job)
        .start()
        .await
        .expect("starts");
    let monitor = handle.monitor();
    assert!(handle.monitor().alive());
    assert!(monitor.alive());
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(monitor.alive(), "still alive after a few fires");
    handle.shutdown_within(Duration::ZERO).await;
    assert!(!monitor.alive(), "a monitor kept after shutdown says so");
}
