//! The replicas read a store's URL from the file that `CRONGUARD_REDIS_URL_FILE` names (the
//! `_FILE` convention of Docker secrets), and their key prefix from `CRONGUARD_REDIS_PREFIX`; a
//! file that cannot be read, or a URL set twice, is a start error of the jobs of that guard that
//! names the variable, unless `Builder::redis_url` gives the URL.
//!
//! One test in its own binary (its own process): it sets the variables one scenario after the
//! other, and nothing else reads them meanwhile.
#![cfg(feature = "redis")]

use std::time::Duration;

use cronguard::{Error, Job, Lock, ProblemKind, Schedule};
use cronguard_testkit::RedisServer;

const VARS: &[&str] = &[
    "CRONGUARD_REDIS_URL",
    "CRONGUARD_REDIS_URL_FILE",
    "REDIS_URL",
    "CRONGUARD_REDIS_PREFIX",
];

fn set(vars: &[(&str, &str)]) {
    for var in VARS {
        std::env::remove_var(var);
    }
    for (var, value) in vars {
        std::env::set_var(var, value);
    }
}

fn job() -> Job {
    Job::new(
        "from-file",
        Schedule::every(Duration::from_secs(1)).expect("valid"),
    )
    .lock(Lock::Redis)
    .run(|_| async {})
}

async fn start() -> Result<cronguard::Cronguard, Error> {
    cronguard::builder()
        .registered_jobs(false)
        .instance("replica-a")
        .job(job())
        .start()
        .await
}

/// The message of the one problem of a start error, which must be a missing URL.
fn missing_url(started: Result<cronguard::Cronguard, Error>) -> String {
    let Err(Error::Config { problems }) = started else {
        panic!("the start did not fail with a configuration error");
    };
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].kind(), ProblemKind::MissingUrl, "{problems:?}");
    problems[0].message().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_url_comes_from_a_secret_file_and_the_prefix_from_the_environment() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("cronguard-url-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let secret = dir.join("redis-url");
    std::fs::write(&secret, format!("{}\n", redis.url())).expect("writes the secret");
    let secret = secret.display().to_string();

    set(&[
        ("CRONGUARD_REDIS_URL_FILE", &secret),
        ("REDIS_URL", "redis://127.0.0.1:1"),
        ("CRONGUARD_REDIS_PREFIX", "from-env"),
    ]);
    let handle = start().await.expect("starts with the URL of the file");
    let mut events = handle.monitor().subscribe();
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match events.recv().await {
                Ok(e) if e.kind.name() == "started" => break,
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(e) => panic!("events ended: {e}"),
            }
        }
    })
    .await
    .expect("the job runs");
    // Announced under the prefix of the environment, where the tool looks with it.
    let store = cronguard::admin::Store::redis(&redis.url(), "from-env")
        .await
        .expect("opens");
    let jobs = store.jobs().await.expect("lists");
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert_eq!(jobs[0].name, "from-file");
    handle.shutdown().await;

    set(&[("CRONGUARD_REDIS_URL_FILE", "/nonexistent/redis-url")]);
    let why = missing_url(start().await);
    assert!(
        why.contains(
            "cannot read the URL file `/nonexistent/redis-url` of `CRONGUARD_REDIS_URL_FILE`"
        ),
        "{why}"
    );
    // The builder's URL wins over what the environment could not give.
    let handle = cronguard::builder()
        .registered_jobs(false)
        .redis_url(redis.url())
        .job(job())
        .start()
        .await
        .expect("starts with the builder's URL");
    handle.shutdown().await;

    set(&[
        ("CRONGUARD_REDIS_URL", &redis.url()),
        ("CRONGUARD_REDIS_URL_FILE", &secret),
    ]);
    let why = missing_url(start().await);
    assert!(
        why.contains("both `CRONGUARD_REDIS_URL` and `CRONGUARD_REDIS_URL_FILE` are set"),
        "{why}"
    );
    set(&[]);
    let _ = std::fs::remove_dir_all(&dir);
}
