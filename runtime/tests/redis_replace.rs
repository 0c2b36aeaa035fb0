//! `overlap = "replace"` across two replicas against a real `redis-server`, with a blocking job
//! that ignores the cancel request: the holder keeps its lease renewed until its body has really
//! returned, so the other replica never starts while it still runs.

#![cfg(feature = "redis")]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cronguard::{Job, Lock, Overlap, Schedule};
use cronguard_testkit::RedisServer;

/// (replica, fire ms, started, ended) of every run.
type Runs = Arc<Mutex<Vec<(&'static str, i64, Instant, Instant)>>>;

fn replica(name: &'static str, runs: &Runs) -> Job {
    let runs = Arc::clone(runs);
    Job::new(
        "replaced",
        Schedule::every(Duration::from_secs(1)).expect("valid"),
    )
    .lock(Lock::Redis)
    .lease(Duration::from_millis(600))
    .overlap(Overlap::Replace)
    .misfire_grace(Duration::from_secs(10))
    .run_blocking(move |ctx| {
        let started = Instant::now();
        // Ignores `ctx.is_cancelled()` on purpose, as a careless blocking job would.
        std::thread::sleep(Duration::from_millis(2_500));
        let ended = Instant::now();
        runs.lock()
            .expect("lock")
            .push((name, ctx.fire_time().timestamp_millis(), started, ended));
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replaced_blocking_run_keeps_its_lease_until_it_returns() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let runs: Runs = Arc::default();
    let mut handles = Vec::new();
    for name in ["a", "b"] {
        let handle = cronguard::builder()
            .registered_jobs(false)
            .redis_url(server.url())
            .redis_prefix("replace-test")
            .instance(name)
            .job(replica(name, &runs))
            .start()
            .await
            .expect("starts");
        handles.push(handle);
    }
    // Long enough for several replace requests while a run blocks: 2.5 s runs, fires every 1 s,
    // a lease of 0.6 s that would expire four times over if the holder stopped renewing.
    tokio::time::sleep(Duration::from_secs(9)).await;
    for handle in handles {
        handle.shutdown_within(Duration::from_secs(5)).await;
    }
    let mut runs = runs.lock().expect("lock").clone();
    runs.sort_by_key(|r| r.2);
    assert!(runs.len() >= 2, "several runs happened: {runs:?}");
    for pair in runs.windows(2) {
        let (earlier, later) = (&pair[0], &pair[1]);
        assert!(
            later.2 >= earlier.3,
            "run of fire {} on {} started {:?} before the run of fire {} on {} returned",
            later.1,
            later.0,
            earlier.3 - later.2,
            earlier.1,
            earlier.0
        );
    }
}
