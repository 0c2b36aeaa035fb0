//! Application state reaches jobs at their fires, a missing value is a start error naming the job
//! and the type, and a job's error is recorded with its whole chain.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use cronguard::{
    scheduled, Clock, Error, Event, EventKind, Job, JobContext, ProblemKind, Schedule, State,
};

/// Where the job writes, as a database pool would be.
struct Ledger {
    rows: Arc<Mutex<Vec<String>>>,
}

struct Prefix(&'static str);

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap()
}

#[scheduled(every = "1s", name = "state::settle")]
async fn settle(prefix: State<Prefix>, ctx: JobContext, ledger: State<Ledger>) {
    let row = format!(
        "{}{}",
        prefix.0,
        ctx.fire_time().timestamp() - t0().timestamp()
    );
    if let Ok(mut rows) = ledger.rows.lock() {
        rows.push(row);
    }
}

async fn run_for(builder: cronguard::Builder, seconds: u64) -> Vec<Event> {
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&events);
    let handle = builder
        .clock(Clock::anchored(t0()))
        .shutdown_timeout(Duration::ZERO)
        .on_event(move |e| sink.lock().expect("lock").push(e.clone()))
        .start()
        .await
        .expect("starts");
    tokio::time::sleep(Duration::from_secs(seconds) + Duration::from_millis(500)).await;
    handle.shutdown().await;
    tokio::time::sleep(Duration::from_millis(1)).await;
    let out = events.lock().expect("lock").clone();
    out
}

#[tokio::test(start_paused = true)]
async fn the_state_value_is_shared_with_the_application() {
    let rows = Arc::new(Mutex::new(Vec::new()));
    struct Shared(Arc<Mutex<Vec<String>>>);
    let seen = Arc::clone(&rows);
    let job = Job::new(
        "state::code",
        Schedule::every(Duration::from_secs(1)).expect("valid"),
    )
    .needs_state::<Shared>()
    .run(|ctx| async move {
        let shared = ctx.state::<Shared>()?;
        shared.0.lock().expect("lock").push(ctx.run_key());
        Ok::<(), cronguard::MissingState>(())
    });
    let events = run_for(
        cronguard::builder()
            .registered_jobs(false)
            .state(Shared(seen))
            .job(job),
        2,
    )
    .await;
    assert_eq!(
        *rows.lock().expect("lock"),
        [
            "state::code@2026-01-01T00:00:01.000Z",
            "state::code@2026-01-01T00:00:02.000Z"
        ],
        "{events:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_scheduled_function_receives_its_state_at_every_fire() {
    let rows = Arc::new(Mutex::new(Vec::new()));
    let events = run_for(
        cronguard::builder()
            .state(Prefix("fire "))
            .state(Ledger {
                rows: Arc::clone(&rows),
            })
            // Values are found by their type: this one is not a `Ledger`.
            .state(Arc::new(Mutex::new(Vec::<String>::new()))),
        3,
    )
    .await;
    assert_eq!(
        *rows.lock().expect("lock"),
        ["fire 1", "fire 2", "fire 3"],
        "{events:?}"
    );
}

#[tokio::test]
async fn a_missing_state_is_a_start_error_naming_the_job_and_the_type() {
    let result = cronguard::builder().state(Prefix("x")).start().await;
    let Err(Error::Config { problems }) = result else {
        panic!("starts without a `Ledger`");
    };
    assert_eq!(problems.len(), 1, "{problems:?}");
    let problem = &problems[0];
    assert_eq!(problem.kind(), ProblemKind::MissingState);
    assert_eq!(problem.job(), Some("state::settle"));
    assert!(
        problem
            .message()
            .starts_with("job `state::settle` needs state of type `state::Ledger`"),
        "{problem}"
    );
    assert!(problem.message().contains("Builder::state"), "{problem}");
}

#[tokio::test]
async fn a_job_built_in_code_declares_its_state() {
    struct Mailer;
    let job = Job::new(
        "mail",
        Schedule::every(Duration::from_secs(60)).expect("valid"),
    )
    .needs_state::<Mailer>()
    .run(|_| async {});
    let result = cronguard::builder()
        .registered_jobs(false)
        .job(job)
        .start()
        .await;
    let Err(Error::Config { problems }) = result else {
        panic!("starts without a `Mailer`");
    };
    assert_eq!(
        problems
            .iter()
            .map(|p| (p.kind(), p.job()))
            .collect::<Vec<_>>(),
        [(ProblemKind::MissingState, Some("mail"))]
    );
    assert!(problems[0].message().contains("Mailer"), "{}", problems[0]);
}

#[tokio::test(start_paused = true)]
async fn a_failed_run_keeps_the_whole_error_chain() {
    let job = Job::new(
        "chain",
        Schedule::every(Duration::from_secs(1)).expect("valid"),
    )
    .run(|_| async {
        let root = std::io::Error::other("connection refused");
        Err::<(), _>(anyhow::Error::new(root).context("cannot settle the ledger"))
    });
    let events = run_for(cronguard::builder().registered_jobs(false).job(job), 1).await;
    let errors: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Failed { error, .. } => Some(error.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        errors,
        ["cannot settle the ledger: connection refused"],
        "{events:?}"
    );
}
