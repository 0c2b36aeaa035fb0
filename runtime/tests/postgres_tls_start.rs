//! `start()` with the `postgres` guard over TLS and with the application's pool: a job claims and
//! runs through a `verify-full` connection with the CA given to the builder, or through the
//! application's own pool; a certificate that is not trusted, a pool of no connections, and a
//! pool given with a URL are start errors that say what to do.
#![cfg(feature = "postgres-tls")]

use std::time::Duration;

use cronguard::deadpool_postgres::tokio_postgres::NoTls;
use cronguard::deadpool_postgres::{Config, Pool, Runtime};
use cronguard::{Error, Job, Lock, Problem, ProblemKind, Schedule};
use cronguard_testkit::{ClientAuth, PostgresServer, PostgresTls};
use tokio::sync::mpsc;

/// A `postgres` job every second that sends on `ran` each time it runs.
fn job(ran: mpsc::Sender<()>) -> Job {
    Job::new(
        "tls",
        Schedule::every(Duration::from_secs(1)).expect("valid"),
    )
    .lock(Lock::Postgres)
    .run(move |_| {
        let ran = ran.clone();
        async move {
            let _ = ran.send(()).await;
        }
    })
}

/// Waits for the job's first run; a scheduler that never runs it fails the test instead of
/// hanging it.
async fn first_run(ran: &mut mpsc::Receiver<()>) {
    tokio::time::timeout(Duration::from_secs(60), ran.recv())
        .await
        .expect("the job ran")
        .expect("the job's sender is alive");
}

fn start_problems(result: Result<cronguard::Cronguard, Error>) -> (Vec<Problem>, String) {
    let err = result.err().expect("a start error");
    let text = err.to_string();
    match err {
        Error::Config { problems } => (problems, text),
        other => panic!("{other:?}"),
    }
}

fn pool(url: &str) -> Pool {
    let mut config = Config::new();
    config.url = Some(url.to_owned());
    config
        .create_pool(Some(Runtime::Tokio1), NoTls)
        .expect("a pool")
}

#[tokio::test]
async fn a_job_runs_over_verify_full_with_the_ca_of_the_builder_and_an_untrusted_certificate_is_refused(
) {
    let Some(server) = PostgresTls::start(ClientAuth::No) else {
        return;
    };
    let (sender, mut ran) = mpsc::channel(16);
    let handle = cronguard::builder()
        .registered_jobs(false)
        .postgres_url(server.url("verify-full"))
        .postgres_tls_ca(server.ca_file())
        .postgres_pool_size(2)
        .require_guards_at_start(true)
        .job(job(sender))
        .start()
        .await
        .expect("starts over TLS with the test CA");
    first_run(&mut ran).await;
    handle.shutdown().await;

    let url = server
        .url("verify-full")
        .replace("postgres@", "postgres:s3cret@");
    let (sender, _ran) = mpsc::channel(16);
    let (problems, text) = start_problems(
        cronguard::builder()
            .registered_jobs(false)
            .postgres_url(url)
            .postgres_tls_ca(server.other_ca_file())
            .job(job(sender))
            .start()
            .await,
    );
    assert_eq!(problems.len(), 1, "{text}");
    assert_eq!(problems[0].kind(), ProblemKind::GuardRefused, "{text}");
    assert!(text.contains("not trusted"), "{text}");
    assert!(text.contains("postgres_tls_ca"), "{text}");
    assert!(!text.contains("s3cret"), "{text}");
}

#[tokio::test]
async fn a_job_runs_through_the_applications_pool() {
    let Some(server) = PostgresServer::start() else {
        return;
    };
    let pool = pool(&server.url());
    let (sender, mut ran) = mpsc::channel(16);
    let handle = cronguard::builder()
        .registered_jobs(false)
        .postgres_pool(pool.clone())
        .postgres_pool_wait_timeout(Duration::from_secs(5))
        .require_guards_at_start(true)
        .job(job(sender))
        .start()
        .await
        .expect("starts on the application's pool");
    first_run(&mut ran).await;
    handle.shutdown().await;
    // The application's pool still serves the application.
    let client = pool.get().await.expect("a connection of the pool");
    let claimed: i64 = client
        .query_one("SELECT count(*) FROM cronguard.jobs WHERE job = 'tls'", &[])
        .await
        .expect("answers")
        .get(0);
    assert_eq!(claimed, 1);
}

#[tokio::test]
async fn a_pool_of_no_connections_and_a_pool_with_a_url_are_start_errors() {
    let (sender, _ran) = mpsc::channel(16);
    let (problems, text) = start_problems(
        cronguard::builder()
            .registered_jobs(false)
            .postgres_url("postgres://app@127.0.0.1:1/db")
            .postgres_pool_size(0)
            .postgres_connect_timeout(Duration::ZERO)
            .job(job(sender.clone()))
            .start()
            .await,
    );
    assert_eq!(problems.len(), 2, "{text}");
    assert!(text.contains("pool size is 0"), "{text}");
    assert!(text.contains("give 1 or more connections"), "{text}");
    assert!(text.contains("postgres_connect_timeout"), "{text}");

    // Making a pool connects to nothing: its first connection is made when asked for.
    let (problems, text) = start_problems(
        cronguard::builder()
            .registered_jobs(false)
            .postgres_pool(pool("postgres://app@127.0.0.1:1/db"))
            .postgres_url("postgres://app@127.0.0.1:1/db")
            .postgres_pool_size(4)
            .job(job(sender))
            .start()
            .await,
    );
    assert_eq!(problems.len(), 1, "{text}");
    assert!(
        text.contains("`Builder::postgres_url`, `Builder::postgres_pool_size` are set too"),
        "{text}"
    );
}
