//! The metrics every job reports through the `metrics` facade, read back with a debugging
//! recorder.

use std::time::Duration;

use chrono::{DateTime, Utc};
use cronguard::{Clock, Job, Schedule};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use metrics_util::MetricKind;

#[tokio::test(start_paused = true)]
async fn runs_drops_durations_and_lateness_are_counted() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder
        .install()
        .expect("the only recorder of this test binary");

    let t0 = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .expect("valid")
        .with_timezone(&Utc);
    let slow = Job::new(
        "slow",
        Schedule::every(Duration::from_secs(5)).expect("valid"),
    )
    .run(|_| async { tokio::time::sleep(Duration::from_secs(7)).await });
    let failing = Job::new(
        "failing",
        Schedule::every(Duration::from_secs(5)).expect("valid"),
    )
    .run(|_| async { Err::<(), _>("no") });
    let handle = cronguard::builder()
        .registered_jobs(false)
        .clock(Clock::anchored(t0))
        .job(slow)
        .job(failing)
        .start()
        .await
        .expect("starts");
    tokio::time::sleep(Duration::from_millis(15_500)).await;
    handle.shutdown_within(Duration::ZERO).await;

    let mut counters = std::collections::BTreeMap::new();
    let mut histograms = std::collections::BTreeMap::new();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let (kind, key) = key.into_parts();
        let mut labels: Vec<String> = key
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        labels.sort();
        let name = format!("{}{{{}}}", key.name(), labels.join(","));
        match (kind, value) {
            (MetricKind::Counter, DebugValue::Counter(n)) => {
                counters.insert(name, n);
            }
            (MetricKind::Histogram, DebugValue::Histogram(values)) => {
                histograms.insert(name, values.len());
            }
            _ => {}
        }
    }
    let c = |name: &str| counters.get(name).copied().unwrap_or(0);
    // slow: 5→12 and 15→(cancelled at shutdown); fire 10 skipped.
    assert_eq!(
        c("cronguard_runs_total{cronguard_job=slow,outcome=succeeded}"),
        1,
        "{counters:#?}"
    );
    assert_eq!(
        c("cronguard_runs_total{cronguard_job=slow,outcome=cancelled}"),
        1
    );
    assert_eq!(
        c("cronguard_dropped_fires_total{cronguard_job=slow,reason=skipped}"),
        1
    );
    assert_eq!(
        c("cronguard_runs_total{cronguard_job=failing,outcome=failed}"),
        3
    );
    assert_eq!(
        histograms.get("cronguard_fire_lateness_seconds{cronguard_job=failing}"),
        Some(&3)
    );
    assert_eq!(
        histograms.get("cronguard_run_duration_seconds{cronguard_job=slow}"),
        Some(&2)
    );
    assert_eq!(
        histograms
            .get("cronguard_claim_latency_seconds{cronguard_job=slow,guard=local}")
            .copied()
            .unwrap_or(0),
        0,
        "in-process claims are the job model's own decision, not a guard's round trip"
    );
}
