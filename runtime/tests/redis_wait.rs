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

/// (run key, what happened, the reason of a misfire or a lost lease) of every event.
type Seen = Arc<Mutex<Vec<(String, String, String)>>>;

fn record(seen: &Seen) -> impl Fn(&cronguard::Event) + Send + Sync + 'static {
    let seen = Arc::clone(seen);
    move |e| {
        let (what, reason) = match &e.kind {
            EventKind::Started => ("started", String::new()),
            EventKind::Misfired { reason, .. } => ("misfired", reason.clone()),
            EventKind::LeaseLost { reason } => ("lease_lost", reason.clone()),
            EventKind::Cancelled { .. } => ("cancelled", String::new()),
            _ => ("other", String::new()),
        };
        seen.lock()
            .expect("lock")
            .push((e.run_key.to_string(), what.to_owned(), reason));
    }
}

/// The first event `what` of run `key`, waiting for it until `until`; `None` if none came.
async fn wait_for(seen: &Seen, key: &str, what: &str, until: Instant) -> Option<String> {
    loop {
        let found = seen
            .lock()
            .expect("lock")
            .iter()
            .find(|(k, w, _)| k == key && w == what)
            .map(|(_, _, reason)| reason.clone());
        if found.is_some() || Instant::now() >= until {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_run_no_replica_acknowledged_does_not_start_and_is_reported() {
    let Some(primary) = RedisServer::start() else {
        return;
    };
    let Some(replica) = RedisServer::start_replica_of(&primary) else {
        return;
    };
    let seen: Seen = Arc::default();
    // Once a year: only the runs asked for run during the test.
    let job = Job::new("asked", Schedule::cron("0 0 1 1 *", "UTC").expect("valid"))
        .lock(Lock::Redis)
        .misfire_grace(Duration::from_millis(1500))
        .run(|_ctx| async {});
    let handle = cronguard::builder()
        .registered_jobs(false)
        .redis_url(primary.url())
        .redis_prefix("wait-manual-test")
        .redis_wait_for_replicas(1, Duration::from_millis(200))
        .on_event(record(&seen))
        .job(job)
        .start()
        .await
        .expect("starts");
    replica.pause();
    let key = handle.monitor().trigger("asked").expect("asked for");
    let until = Instant::now() + Duration::from_secs(15);
    let reason = wait_for(&seen, &key, "misfired", until).await;
    let events = seen.lock().expect("lock").clone();
    assert!(
        !events.iter().any(|(k, w, _)| *k == key && w == "started"),
        "a manual run no replica acknowledged started: {events:?}"
    );
    let reason = reason.unwrap_or_else(|| panic!("the manual run was not reported: {events:?}"));
    assert!(
        reason.contains("reached 0 of the 1 Redis replicas"),
        "{reason}"
    );
    replica.resume();
    // Once the replica acknowledges again (it may take a few runs asked for), a run starts.
    let until = Instant::now() + Duration::from_secs(15);
    let again = loop {
        let key = handle.monitor().trigger("asked").expect("asked for");
        let grace = Instant::now() + Duration::from_secs(2);
        if wait_for(&seen, &key, "started", grace).await.is_some() {
            break key;
        }
        assert!(
            Instant::now() < until,
            "no run asked for ran after the replica came back: {:?}",
            seen.lock().expect("lock")
        );
    };
    handle.shutdown_within(Duration::from_secs(3)).await;
    let events = seen.lock().expect("lock").clone();
    assert!(
        !events
            .iter()
            .any(|(k, w, _)| *k == again && w == "misfired"),
        "{events:?}"
    );
    let starts = events
        .iter()
        .filter(|(k, w, _)| *k == again && w == "started")
        .count();
    assert_eq!(starts, 1, "{events:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_renewals_no_replica_acknowledges_stops_within_its_lease() {
    let Some(primary) = RedisServer::start() else {
        return;
    };
    let Some(replica) = RedisServer::start_replica_of(&primary) else {
        return;
    };
    let seen: Seen = Arc::default();
    let lease = Duration::from_millis(600);
    let job = Job::new(
        "renewed",
        Schedule::every(Duration::from_secs(1)).expect("valid"),
    )
    .lock(Lock::Redis)
    .lease(lease)
    .misfire_grace(Duration::from_millis(1500))
    // Runs until it is told to stop.
    .run(|ctx| async move { ctx.cancelled().await });
    let handle = cronguard::builder()
        .registered_jobs(false)
        .redis_url(primary.url())
        .redis_prefix("wait-renew-test")
        .redis_wait_for_replicas(1, Duration::from_millis(100))
        .on_event(record(&seen))
        .job(job)
        .start()
        .await
        .expect("starts");
    let until = Instant::now() + Duration::from_secs(15);
    let key = loop {
        let first = seen
            .lock()
            .expect("lock")
            .iter()
            .find(|(_, w, _)| w == "started")
            .map(|(k, ..)| k.clone());
        if let Some(key) = first {
            break key;
        }
        assert!(Instant::now() < until, "no run started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // Renewals are acknowledged while the replica answers: the run goes on past its lease.
    let going = Instant::now() + lease * 2;
    assert_eq!(wait_for(&seen, &key, "lease_lost", going).await, None);
    replica.pause();
    let paused = Instant::now();
    // The last renewal the replica acknowledged was sent before the pause: the run must stop
    // within a lease of it (and a renewal period, the watchdog's wake-up, some scheduling).
    let lost = wait_for(&seen, &key, "lease_lost", paused + Duration::from_secs(10)).await;
    let after = paused.elapsed();
    replica.resume();
    handle.shutdown_within(Duration::from_secs(3)).await;
    let events = seen.lock().expect("lock").clone();
    let reason = lost.unwrap_or_else(|| {
        panic!("the run went on for 10 s while no replica acknowledged its renewals: {events:?}")
    });
    assert!(after < lease + Duration::from_secs(1), "{after:?}");
    // The watchdog's reason names the last failed renewal; the run's own check of the
    // deadline, when it comes first, says that renewals failed.
    assert!(reason.contains("renewal"), "{reason}");
}
