//! The guard written against the public trait passes the conformance suite of the built-in
//! guards, and runs a job's fires once each when two schedulers share it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use cronguard::{Clock, Job, Lock, Schedule};
use cronguard_examples::memory_guard::MemoryGuards;

#[tokio::test]
async fn the_memory_guard_passes_the_conformance_suite() {
    let guards = MemoryGuards::new();
    let report = cronguard::guard::conformance::check(|spec| guards.guard(spec))
        .await
        .unwrap_or_else(|failure| panic!("{failure}"));
    eprintln!("{report}");
    assert_eq!(
        report.skipped.len(),
        7,
        "the clock checks (the guard has no clock of its own, so it does not claim ahead), pauses and manual runs are skipped: {report}"
    );
}

#[tokio::test(start_paused = true)]
async fn two_schedulers_sharing_the_guard_run_each_fire_once() {
    let guards = MemoryGuards::new();
    let t0 = DateTime::<Utc>::from_timestamp(1_767_225_600, 0).expect("in range");
    let runs = Arc::new(Mutex::new(Vec::new()));
    let mut handles = Vec::new();
    for replica in 0..2 {
        let (guards, runs) = (guards.clone(), Arc::clone(&runs));
        let job = Job::new(
            "inventory",
            Schedule::every(Duration::from_secs(1)).expect("valid"),
        )
        .lock(Lock::custom("memory"))
        .run(move |ctx| {
            let runs = Arc::clone(&runs);
            async move {
                runs.lock().expect("lock").push((ctx.fire_time(), replica));
            }
        });
        handles.push(
            cronguard::builder()
                .registered_jobs(false)
                .clock(Clock::anchored(t0))
                .custom_guard("memory", move |spec| guards.guard(spec))
                .job(job)
                .start()
                .await
                .expect("starts"),
        );
    }
    tokio::time::sleep(Duration::from_millis(10_500)).await;
    for handle in handles {
        handle.shutdown().await;
    }
    let runs = runs.lock().expect("lock").clone();
    let mut fires: Vec<_> = runs.iter().map(|(t, _)| *t).collect();
    fires.sort();
    let count = fires.len();
    fires.dedup();
    assert!(count >= 9, "{runs:?}");
    assert_eq!(fires.len(), count, "a fire ran twice: {runs:?}");
}

#[tokio::test]
async fn a_job_naming_a_guard_that_was_not_registered_does_not_start() {
    let job = Job::new(
        "inventory",
        Schedule::every(Duration::from_secs(1)).expect("valid"),
    )
    .lock(Lock::custom("etcd"))
    .run(|_| async {});
    let err = cronguard::builder()
        .registered_jobs(false)
        .job(job)
        .start()
        .await
        .err()
        .expect("refused")
        .to_string();
    assert!(
        err.contains("no guard is registered under `etcd`")
            && err.contains("Builder::custom_guard(\"etcd\""),
        "{err}"
    );
}
