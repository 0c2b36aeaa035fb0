//! Starting while the guard's server is down, against a real `redis-server` and a real
//! PostgreSQL: `start()` succeeds, the jobs report their fires as misfires and their health as
//! `unknown`, each job says once that its guard is unavailable (not once per retry), and
//! everything resumes without a restart when the server comes up. A wrong password or a URL that
//! does not parse is still a start error.

#![cfg(any(feature = "redis", feature = "postgres"))]

use std::collections::BTreeSet;
use std::time::Duration;

use cronguard::{Builder, EventKind, HealthState, Job, Lock, Schedule};
use cronguard_testkit::Logs;
use tokio::time::Instant;

const JOBS: usize = 20;

fn job(lock: Lock, n: usize) -> Job {
    Job::new(
        format!("down-{n:02}"),
        Schedule::every(Duration::from_secs(1)).expect("valid"),
    )
    .lock(lock)
    .misfire_grace(Duration::from_secs(2))
    .run(|_| async {})
}

/// Waits for events until every job has one that `matches`, or the deadline passes.
async fn every_job_has(
    events: &mut tokio::sync::broadcast::Receiver<cronguard::Event>,
    within: Duration,
    what: &str,
    matches: impl Fn(&EventKind) -> bool,
) {
    let deadline = Instant::now() + within;
    let mut seen = BTreeSet::new();
    while seen.len() < JOBS {
        match tokio::time::timeout_at(deadline, events.recv()).await {
            Ok(Ok(event)) if matches(&event.kind) => {
                seen.insert(event.job.to_string());
            }
            Ok(Ok(_)) | Ok(Err(tokio::sync::broadcast::error::RecvError::Lagged(_))) => {}
            Ok(Err(e)) => panic!("the event stream ended: {e}"),
            Err(_) => panic!(
                "within {within:?} only {} of {JOBS} jobs had a {what} event: {seen:?}",
                seen.len()
            ),
        }
    }
}

/// Starts `JOBS` jobs of `lock` through `builder` while their server is down, checks what they
/// report, brings the server up with `up`, and checks that they resume.
/// How many jobs the store's roster lists (`None`: it cannot be read).
async fn listed(
    store: Result<cronguard::admin::Store, cronguard::admin::AdminError>,
) -> Option<usize> {
    store.ok()?.jobs().await.ok().map(|jobs| jobs.len())
}

async fn starts_down_and_resumes(
    builder: Builder,
    lock: Lock,
    up: impl FnOnce(),
    said: &str,
    roster: impl AsyncFn() -> Option<usize>,
) {
    let logs = Logs::default();
    let writer = logs.clone();
    // The shards run on this (current-thread) runtime, so a thread-local subscriber sees them.
    let _subscriber = tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .finish(),
    );
    let mut builder = builder.registered_jobs(false);
    for n in 0..JOBS {
        builder = builder.job(job(lock.clone(), n));
    }
    let handle = builder
        .start()
        .await
        .expect("an unreachable server is not a start error");
    assert_eq!(logs.count(said), 1);
    let mut events = handle.monitor().subscribe();

    every_job_has(&mut events, Duration::from_secs(10), "misfired", |k| {
        matches!(k, EventKind::Misfired { reason, .. } if reason.contains("could not be asked"))
    })
    .await;
    let health = handle.monitor().health().await;
    assert!(!health.healthy);
    for job in &health.jobs {
        assert!(
            matches!(job.state, HealthState::Unknown { .. }),
            "{}: {:?}",
            job.name,
            job.state
        );
    }
    // Each job retried its claims many times by now, and said so once.
    assert_eq!(
        logs.count("guard unavailable; retrying until the misfire grace runs out"),
        JOBS
    );
    assert_eq!(logs.count("guard still unavailable"), 0);

    up();
    every_job_has(&mut events, Duration::from_secs(15), "succeeded", |k| {
        matches!(k, EventKind::Succeeded)
    })
    .await;
    assert_eq!(logs.count("guard available again"), JOBS);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let health = handle.monitor().health().await;
        if health.healthy {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not healthy 10 s after the server came back: {health:?}"
        );
        let _ = tokio::time::timeout(Duration::from_millis(100), events.recv()).await;
    }
    // The jobs are announced in the store's roster once it answers, for the command-line tool.
    let deadline = Instant::now() + Duration::from_secs(10);
    while roster().await != Some(JOBS) {
        assert!(
            Instant::now() < deadline,
            "the roster does not list the {JOBS} jobs 10 s after the server came back"
        );
        let _ = tokio::time::timeout(Duration::from_millis(100), events.recv()).await;
    }
    handle.shutdown().await;
}

#[cfg(feature = "redis")]
#[tokio::test]
async fn a_scheduler_started_while_redis_is_down_reports_misfires_and_resumes_when_it_is_up() {
    let Some(mut server) = cronguard_testkit::RedisServer::start() else {
        return;
    };
    server.kill();
    let url = server.url();
    let builder = cronguard::builder()
        .redis_url(url.clone())
        .redis_prefix("start-down");
    starts_down_and_resumes(
        builder,
        Lock::Redis,
        || server.restart(),
        "Redis cannot be reached at start",
        async || listed(cronguard::admin::Store::redis(&url, "start-down").await).await,
    )
    .await;
}

/// The server is killed before cronguard ever reached it, so its tables are made at the first
/// statement after it comes up.
#[cfg(feature = "postgres")]
#[tokio::test]
async fn a_scheduler_started_while_postgres_is_down_makes_its_tables_and_resumes_when_it_is_up() {
    let Some(mut server) = cronguard_testkit::PostgresServer::start() else {
        return;
    };
    server.kill();
    let url = server.url();
    let builder = cronguard::builder().postgres_url(url.clone());
    starts_down_and_resumes(
        builder,
        Lock::Postgres,
        || server.restart(),
        "PostgreSQL cannot be reached at start",
        async || {
            listed(
                cronguard::admin::Store::postgres(&url, cronguard::DEFAULT_POSTGRES_SCHEMA).await,
            )
            .await
        },
    )
    .await;
}

#[cfg(feature = "redis")]
async fn start_error(url: String) -> cronguard::Error {
    cronguard::builder()
        .registered_jobs(false)
        .redis_url(url)
        .job(job(Lock::Redis, 0))
        .start()
        .await
        .err()
        .expect("a misconfigured Redis is a start error")
}

#[cfg(feature = "redis")]
#[tokio::test]
async fn a_wrong_redis_password_or_a_bad_url_is_still_a_start_error() {
    let Some(server) = cronguard_testkit::RedisServer::start() else {
        return;
    };
    let wrong_password = start_error(format!(
        "redis://nobody:s3cret@127.0.0.1:{}/",
        server.port()
    ))
    .await;
    let text = wrong_password.to_string();
    assert!(text.contains("cannot be used"), "{text}");
    assert!(text.contains("password"), "says what to check: {text}");
    assert!(!text.contains("s3cret"), "{text}");
    assert_eq!(
        kinds(&wrong_password),
        [cronguard::ProblemKind::GuardRefused]
    );

    let bad_url = start_error("redis://127.0.0.1:notaport/".to_owned()).await;
    assert_eq!(kinds(&bad_url), [cronguard::ProblemKind::GuardRefused]);
    assert!(bad_url.to_string().contains("URL"), "{bad_url}");
}

#[cfg(feature = "redis")]
fn kinds(err: &cronguard::Error) -> Vec<cronguard::ProblemKind> {
    match err {
        cronguard::Error::Config { problems } => problems.iter().map(|p| p.kind()).collect(),
        other => panic!("not a configuration error: {other}"),
    }
}
