//! `Builder::redis_wait_for_replicas` against a real primary and its replica: while the replica
//! does not acknowledge, no fire starts and every fire is reported; once it is back, fires run.

#![cfg(feature = "redis")]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cronguard::{EventKind, Job, Lock, Schedule};
use cronguard_testkit::RedisServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_no_replica_acknowledged_does_not_start_and_is_reported() {
    let Some(primary) = RedisServer::start() else {
        return;
    };
    let Some(replica) = RedisServer::start_replica_of(&primary) else {
        return;
    };
    replica.pause();
    let started: Arc<Mutex<Vec<i64>>> = Arc::default();
    let misfired: Arc<Mutex<Vec<(i64, String)>>> = Arc::default();
    let runs = Arc::clone(&started);
    let job = Job::new(
        "replicated",
        Schedule::every(Duration::from_secs(1)).expect("valid"),
    )
    .lock(Lock::Redis)
    .misfire_grace(Duration::from_millis(1500))
    .run(move |ctx| {
        let runs = Arc::clone(&runs);
        async move {
            runs.lock()
                .expect("lock")
                .push(ctx.fire_time().timestamp_millis());
        }
    });
    let reports = Arc::clone(&misfired);
    let handle = cronguard::builder()
        .registered_jobs(false)
        .redis_url(primary.url())
        .redis_prefix("wait-test")
        .redis_wait_for_replicas(1, Duration::from_millis(200))
        .on_event(move |e| {
            if let EventKind::Misfired { reason, .. } = &e.kind {
                reports
                    .lock()
                    .expect("lock")
                    .push((e.fire_time.timestamp_millis(), reason.clone()));
            }
        })
        .job(job)
        .start()
        .await
        .expect("starts");
    let until = Instant::now() + Duration::from_secs(15);
    while misfired.lock().expect("lock").len() < 2 {
        assert!(Instant::now() < until, "no misfire reported");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        started.lock().expect("lock").is_empty(),
        "a claim no replica acknowledged started: {:?}",
        started.lock().expect("lock")
    );
    let reason = misfired.lock().expect("lock")[0].1.clone();
    assert!(reason.contains("replicas"), "{reason}");
    replica.resume();
    while started.lock().expect("lock").is_empty() {
        assert!(
            Instant::now() < until,
            "no fire ran after the replica came back"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    handle.shutdown_within(Duration::from_secs(3)).await;
    let misfired: Vec<i64> = misfired.lock().expect("lock").iter().map(|m| m.0).collect();
    for fire in started.lock().expect("lock").iter() {
        assert!(
            !misfired.contains(fire),
            "fire {fire} both ran and misfired"
        );
    }
}

#[tokio::test]
async fn a_wait_setting_out_of_range_is_a_start_error() {
    for (replicas, timeout, says) in [
        (0, Duration::from_millis(100), "at least 1 replica"),
        (1, Duration::ZERO, "from 1ms to 1s"),
        (1, Duration::from_secs(2), "from 1ms to 1s"),
    ] {
        let job = Job::new("w", Schedule::every(Duration::from_secs(1)).expect("valid"))
            .lock(Lock::Redis)
            .run(|_ctx| async {});
        let err = cronguard::builder()
            .registered_jobs(false)
            .redis_url("redis://127.0.0.1:1/")
            .redis_wait_for_replicas(replicas, timeout)
            .job(job)
            .start()
            .await
            .err()
            .expect("a start error")
            .to_string();
        assert!(err.contains(says), "{err}");
    }
}
