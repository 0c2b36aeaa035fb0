//! The control feed of the `postgres` guard after its table was truncated (`RESTART IDENTITY`)
//! or dropped and made again by the guard: a job paused through the feed, then a run asked for
//! with the command-line tool's API, which a running scheduler must see and run once
//! (docs/guide/controls.md).

#![cfg(feature = "postgres")]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cronguard::admin::Store;
use cronguard::{EventKind, Job, Lock, Monitor, Schedule};
use cronguard_testkit::PostgresServer;

/// (run key, what happened) of every event.
type Seen = Arc<Mutex<Vec<(String, &'static str)>>>;

/// Polls `done` every 20 ms until it holds; panics with `what` after 15 s.
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !done() {
        assert!(Instant::now() < deadline, "{what} within 15 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn paused(monitor: &Monitor) -> bool {
    monitor.job("nightly").is_some_and(|j| j.paused.is_some())
}

/// Pauses the job through the feed, runs `reset` on the database, asks for a run, and checks
/// that it runs once.
async fn a_run_asked_for_after(reset: &str) {
    let Some(db) = PostgresServer::start() else {
        return;
    };
    let seen: Seen = Arc::default();
    let sink = Arc::clone(&seen);
    // Once a year: only the run asked for runs during the test.
    let job = Job::new(
        "nightly",
        Schedule::cron("0 0 1 1 *", "UTC").expect("valid"),
    )
    .lock(Lock::Postgres)
    .misfire_grace(Duration::from_secs(30))
    .run(|_ctx| async {});
    let handle = cronguard::builder()
        .registered_jobs(false)
        .postgres_url(db.url())
        .on_event(move |e| {
            let what = match e.kind {
                EventKind::Started => "started",
                EventKind::Succeeded => "succeeded",
                EventKind::Misfired { .. } => "misfired",
                _ => "other",
            };
            sink.lock()
                .expect("lock")
                .push((e.run_key.to_string(), what));
        })
        .job(job)
        .start()
        .await
        .expect("starts");
    let monitor = handle.monitor();
    let store = Store::postgres(&db.url(), "cronguard")
        .await
        .expect("opens the store");
    // The scheduler announces the job, then reads the feed once a second.
    let deadline = Instant::now() + Duration::from_secs(15);
    while let Err(e) = store.pause("nightly", "ops").await {
        assert!(Instant::now() < deadline, "{e}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    until("the pause read from the feed", || paused(&monitor)).await;

    let (client, conn) = tokio_postgres::connect(&db.url(), tokio_postgres::NoTls)
        .await
        .expect("connects");
    tokio::spawn(conn);
    client.batch_execute(reset).await.expect("resets the feed");

    // A dropped table is made again by the first statement that misses it.
    let deadline = Instant::now() + Duration::from_secs(15);
    let key = loop {
        match store.trigger("nightly").await {
            Ok(key) => break key,
            Err(e) => assert!(Instant::now() < deadline, "{e}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let ran = |what: &'static str| {
        let seen = Arc::clone(&seen);
        let key = key.clone();
        move || {
            seen.lock()
                .expect("lock")
                .iter()
                .filter(|(k, w)| *k == key && *w == what)
                .count()
        }
    };
    let (started, succeeded) = (ran("started"), ran("succeeded"));
    until("the run asked for after the reset ran", || succeeded() == 1).await;
    // Published after the run asked for: once the scheduler has read it, it has read past the
    // request again.
    store.resume("nightly", "ops").await.expect("resumes");
    until("the resume read from the feed", || !paused(&monitor)).await;
    handle.shutdown_within(Duration::from_secs(3)).await;
    assert_eq!(started(), 1, "{:?}", seen.lock().expect("lock"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_asked_for_after_the_feed_table_was_truncated_runs_once() {
    a_run_asked_for_after("TRUNCATE cronguard.controls RESTART IDENTITY").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_asked_for_after_the_feed_table_was_dropped_runs_once() {
    a_run_asked_for_after("DROP TABLE cronguard.controls").await;
}
