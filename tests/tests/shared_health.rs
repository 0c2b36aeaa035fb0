//! Health across replicas: a replica that does not run a job itself can tell from Redis, or from
//! PostgreSQL, whether any replica does.

use std::time::{Duration, Instant};

use cronguard::{Builder, HealthState, Job, Lock, Schedule};
use cronguard_testkit::{PostgresServer, RedisServer};

fn job(lock: Lock, enabled: bool) -> Job {
    Job::new(
        "billing::settle",
        Schedule::every(Duration::from_secs(1)).expect("valid"),
    )
    .lock(lock)
    .lease(Duration::from_secs(3))
    .misfire_grace(Duration::from_secs(1))
    .enabled(enabled)
    .run(|_| async {})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_replica_sees_when_no_replica_runs_the_job() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let url = redis.url();
    watcher_sees_when_no_replica_runs_the_job(Lock::Redis, move |b| b.redis_url(url.clone())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_replica_sees_from_postgres_when_no_replica_runs_the_job() {
    let Some(db) = PostgresServer::start() else {
        return;
    };
    let url = db.url();
    watcher_sees_when_no_replica_runs_the_job(Lock::Postgres, move |b| b.postgres_url(url.clone()))
        .await;
}

async fn watcher_sees_when_no_replica_runs_the_job(lock: Lock, store: impl Fn(Builder) -> Builder) {
    let start = |enabled: bool, name: &'static str| {
        store(cronguard::builder())
            .registered_jobs(false)
            .instance(name)
            .job(job(lock.clone(), enabled))
            .start()
    };
    let a = start(true, "replica-a").await.expect("A starts");
    let b = start(false, "replica-b").await.expect("B starts");
    // Long enough for fires to pass their grace: B sees that A claimed them.
    let until = Instant::now() + Duration::from_millis(3500);
    let mut checks = 0;
    while Instant::now() < until {
        let health = b.monitor().health().await;
        assert!(
            health.healthy,
            "A runs the job, so B reports on time: {health:?}"
        );
        checks += 1;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(checks > 5);
    assert!(
        b.monitor().jobs()[0].counts.started == 0,
        "B itself runs nothing"
    );

    a.shutdown().await;
    let stopped = Instant::now();
    let overdue_after = loop {
        let health = b.monitor().health().await;
        if let HealthState::Overdue { .. } = health.jobs[0].state {
            break stopped.elapsed();
        }
        assert!(
            stopped.elapsed() < Duration::from_secs(5),
            "B never noticed: {health:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // One period (1 s) plus the grace (1 s), plus the test's polling.
    assert!(
        overdue_after <= Duration::from_millis(2300),
        "noticed after {overdue_after:?}"
    );
    eprintln!("the watcher reported overdue {overdue_after:?} after the last runner stopped");
    b.shutdown().await;
}
