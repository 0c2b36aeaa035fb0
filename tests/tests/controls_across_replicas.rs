//! Pause, resume and run now across replica processes sharing one real `redis-server` or
//! PostgreSQL: a controller process (this test, which runs no job itself) pauses the job, asks
//! for a run and resumes it; the replicas honour the pause at their next claim, report each
//! paused fire once, and run the requested run exactly once among them. A burst of requests read
//! late by a replica that was frozen meanwhile runs each request once too.

use std::time::Duration;

use cronguard::{Cronguard, Job, Lock, Schedule};
use cronguard_testkit::{PostgresServer, RedisServer};
use cronguard_tests::replicas::{assert_each_fire_once, now_ms, Replicas, Settings};
use cronguard_tests::{manual_id, Entry};

const WORKER: &str = env!("CARGO_BIN_EXE_shared_worker");

static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const SETTINGS: Settings = Settings {
    lease_ms: 3000,
    grace_ms: 5_000,
    work_ms: 50,
    run_for_ms: 14_000,
};

/// [`Replicas::wait_for`] without holding up the controller's tasks on this thread.
fn wait(replicas: &Replicas, timeout: Duration, what: &str, cond: impl Fn(&[Entry]) -> bool) {
    tokio::task::block_in_place(|| replicas.wait_for(timeout, what, cond));
}

fn count(record: &[Entry], what: &str) -> usize {
    record.iter().filter(|e| e.what == what).count()
}

/// This process as an operator's tool: it knows the job but runs it nowhere (`select_jobs`).
async fn controller(builder: cronguard::Builder, lock: Lock) -> Cronguard {
    builder
        .registered_jobs(false)
        .select_jobs("!*")
        .job(
            Job::new(
                "fault_job",
                Schedule::every(Duration::from_secs(1)).expect("valid"),
            )
            .lock(lock)
            .run(|_| async {}),
        )
        .start()
        .await
        .expect("the controller starts")
}

async fn scenario(name: &str, env: &[(&str, String)], control: Cronguard) {
    let replicas = Replicas::start(WORKER, name, env, SETTINGS, &[0, 0, 0]);
    wait(&replicas, Duration::from_secs(10), "two runs", |r| {
        count(r, "start") >= 2
    });

    let paused_at = now_ms();
    control
        .monitor()
        .pause("fault_job", "test")
        .await
        .expect("paused");
    wait(
        &replicas,
        Duration::from_secs(10),
        "two paused fires",
        |r| {
            r.iter()
                .filter(|e| e.what == "ev:paused" && e.token == 1)
                .count()
                >= 2
        },
    );

    let asked_at = now_ms();
    let key = control.monitor().trigger("fault_job").expect("asked");
    assert!(key.starts_with("fault_job@manual:"), "{key}");
    wait(
        &replicas,
        Duration::from_secs(10),
        "the requested run",
        |r| count(r, "mstart") >= 1,
    );

    let resumed_at = now_ms();
    control
        .monitor()
        .resume("fault_job", "test")
        .await
        .expect("resumed");
    wait(
        &replicas,
        Duration::from_secs(10),
        "runs after the resume",
        |r| {
            r.iter()
                .any(|e| e.what == "start" && e.fire_ms > resumed_at)
        },
    );
    control.shutdown().await;
    let record = tokio::task::block_in_place(|| replicas.finish(None));

    assert_eq!(
        count(&record, "mstart"),
        1,
        "one run among the replicas: {record:?}"
    );
    let while_paused: Vec<i64> = record
        .iter()
        .filter(|e| e.what == "start" && e.fire_ms >= paused_at + 1000 && e.fire_ms < resumed_at)
        .map(|e| e.fire_ms)
        .collect();
    assert!(
        while_paused.is_empty(),
        "fires ran while paused: {while_paused:?}"
    );
    let mut paused_fires: Vec<i64> = record
        .iter()
        .filter(|e| e.what == "ev:paused")
        .map(|e| e.fire_ms)
        .collect();
    paused_fires.sort_unstable();
    paused_fires.dedup();
    for fire in &paused_fires {
        let first = record
            .iter()
            .filter(|e| e.what == "ev:paused" && e.fire_ms == *fire && e.token == 1)
            .count();
        assert_eq!(
            first, 1,
            "paused fire {fire} reported first once: {record:?}"
        );
    }
    assert_each_fire_once(&record);
    let first_at = |what: &str| {
        record
            .iter()
            .filter(|e| e.what == what)
            .map(|e| e.at_ms)
            .min()
            .unwrap_or(0)
    };
    eprintln!(
        "{name}: the first paused fire was reported {} ms after the pause returned; the requested run started {} ms after it was asked for (through the control feed, read every second)",
        first_at("ev:paused") - paused_at,
        first_at("mstart") - asked_at
    );
}

/// A grace long enough that the frozen replica reads every request within it.
const BURST: Settings = Settings {
    lease_ms: 3000,
    grace_ms: 30_000,
    work_ms: 50,
    run_for_ms: 60_000,
};

/// Twenty requests while one of two replicas is frozen (SIGSTOP): the other runs them; the
/// frozen one, resumed, reads all twenty late and runs none of them again, however few the
/// guard's store would keep in a ring of recent runs.
async fn burst_scenario(name: &str, env: &[(&str, String)], control: Cronguard) {
    let mut replicas = Replicas::start(WORKER, name, env, BURST, &[0, 0]);
    let (running, frozen) = (replicas.pid(0), replicas.pid(1));
    wait(
        &replicas,
        Duration::from_secs(15),
        "both replicas at work",
        |r| {
            [running, frozen]
                .iter()
                .all(|pid| r.iter().any(|e| e.pid == *pid))
        },
    );
    Replicas::signal(frozen, "-STOP");
    let ids: Vec<i64> = (0..20)
        .map(|_| {
            let key = control.monitor().trigger("fault_job").expect("asked");
            manual_id(&key).expect("a run key of a manual run")
        })
        .collect();
    let accounted = |r: &[Entry], pid: Option<u32>, id: i64| {
        r.iter().any(|e| {
            e.fire_ms == id
                && pid.is_none_or(|pid| e.pid == pid)
                && (e.what == "mrun" || e.what.starts_with("mev:"))
        })
    };
    wait(
        &replicas,
        Duration::from_secs(20),
        "the requests run on the replica at work",
        |r| {
            ids.iter()
                .all(|id| r.iter().any(|e| e.what == "mrun" && e.fire_ms == *id))
        },
    );
    Replicas::signal(frozen, "-CONT");
    wait(
        &replicas,
        Duration::from_secs(20),
        "the resumed replica reads every request",
        |r| ids.iter().all(|id| accounted(r, Some(frozen), *id)),
    );
    control.shutdown().await;
    replicas.stop_all("-TERM");
    let record = tokio::task::block_in_place(|| replicas.finish(None));

    for id in &ids {
        let runs: Vec<&Entry> = record
            .iter()
            .filter(|e| e.what == "mrun" && e.fire_ms == *id)
            .collect();
        assert_eq!(
            runs.len(),
            1,
            "request {id:x} ran {} times: {runs:?}",
            runs.len()
        );
    }
    assert_each_fire_once(&record);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_replicas_run_each_request_of_a_burst_once_also_when_read_late() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let control = controller(cronguard::builder().redis_url(redis.url()), Lock::Redis).await;
    burst_scenario(
        "burst-redis",
        &[("CRONGUARD_REDIS_URL", redis.url())],
        control,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_replicas_run_each_request_of_a_burst_once_also_when_read_late() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(db) = PostgresServer::start() else {
        return;
    };
    let control = controller(cronguard::builder().postgres_url(db.url()), Lock::Postgres).await;
    burst_scenario(
        "burst-postgres",
        &[
            ("LOCK", "postgres".to_owned()),
            ("CRONGUARD_POSTGRES_URL", db.url()),
        ],
        control,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_replicas_honour_pause_resume_and_run_now() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let control = controller(cronguard::builder().redis_url(redis.url()), Lock::Redis).await;
    scenario(
        "controls-redis",
        &[("CRONGUARD_REDIS_URL", redis.url())],
        control,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_replicas_honour_pause_resume_and_run_now() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(db) = PostgresServer::start() else {
        return;
    };
    let control = controller(cronguard::builder().postgres_url(db.url()), Lock::Postgres).await;
    scenario(
        "controls-postgres",
        &[
            ("LOCK", "postgres".to_owned()),
            ("CRONGUARD_POSTGRES_URL", db.url()),
        ],
        control,
    )
    .await;
}
