//! `Builder::claim_ahead` against a real `redis-server` (docs/design/standby.md): two replicas
//! claim each fire ahead of its instant and run it once, never before the instant, under the lease
//! of the claim made ahead. Redis hands out fencing tokens never below its own clock in µs, so a
//! token below the fire's instant shows that the claim was made ahead of it.

#![cfg(feature = "redis")]

use std::time::Duration;

use chrono::{DateTime, Utc};
use cronguard::{Job, Lock, Schedule};
use cronguard_testkit::RedisServer;
use tokio::sync::mpsc;

/// (replica, fire, fencing token, when the body started) of a run.
type Ran = (&'static str, DateTime<Utc>, u64, DateTime<Utc>);

/// A `redis` job every second (lease 2 s) that sends what it ran to `tx`.
fn job(name: &'static str, replica: &'static str, tx: &mpsc::UnboundedSender<Ran>) -> Job {
    let tx = tx.clone();
    Job::new(
        name,
        Schedule::every(Duration::from_secs(1)).expect("valid"),
    )
    .lock(Lock::Redis)
    .lease(Duration::from_secs(2))
    .run(move |ctx| {
        let ran = (replica, ctx.fire_time(), ctx.fencing_token(), Utc::now());
        let tx = tx.clone();
        async move {
            let _ = tx.send(ran);
        }
    })
}

async fn runs_with(lead: Duration, prefix: &str, server: &RedisServer) -> Vec<Ran> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Ran>();
    let mut handles = Vec::new();
    for name in ["a", "b"] {
        let handle = cronguard::builder()
            .registered_jobs(false)
            .redis_url(server.url())
            .redis_prefix(prefix)
            .instance(name)
            .claim_ahead(lead)
            .job(job("ahead", name, &tx))
            .start()
            .await
            .expect("starts");
        handles.push(handle);
    }
    let mut runs = Vec::new();
    while runs.len() < 6 {
        let ran = tokio::time::timeout(Duration::from_secs(20), rx.recv())
            .await
            .expect("a run every second")
            .expect("the replicas are running");
        runs.push(ran);
    }
    for handle in handles {
        handle.shutdown_within(Duration::from_secs(5)).await;
    }
    runs
}

fn claimed_ahead(runs: &[Ran]) -> usize {
    runs.iter()
        .filter(|(_, fire, token, _)| (*token as i64) < fire.timestamp_micros())
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fires_claimed_ahead_run_once_at_their_instant() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let runs = runs_with(Duration::from_millis(300), "ahead-test", &server).await;
    let mut fires: Vec<_> = runs.iter().map(|r| r.1).collect();
    fires.sort();
    fires.dedup();
    assert_eq!(fires.len(), runs.len(), "each fire ran once: {runs:?}");
    for (replica, fire, _, started) in &runs {
        assert!(
            started >= fire,
            "{replica} started fire {fire} at {started}, before its instant"
        );
    }
    assert!(
        claimed_ahead(&runs) >= runs.len() / 2,
        "most fires were claimed ahead of their instant (token below the fire in µs): {runs:?}"
    );

    // The same without the lead: no claim is made before the instant.
    let runs = runs_with(Duration::ZERO, "at-instant-test", &server).await;
    assert_eq!(claimed_ahead(&runs), 0, "{runs:?}");
}

#[tokio::test]
async fn a_lead_over_the_most_is_a_start_error() {
    let Err(error) = cronguard::builder()
        .registered_jobs(false)
        .claim_ahead(Duration::from_secs(2))
        .start()
        .await
    else {
        panic!("a lead of 2 s must be refused");
    };
    let text = error.to_string();
    assert!(text.contains("claim_ahead"), "{text}");
    assert!(text.contains("500ms"), "{text}");
}

/// A shutdown that comes between a claim made ahead and the fire's instant waits for the instant
/// and runs the fire, as it waits for a run going on, instead of giving the claim back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_runs_a_fire_claimed_ahead_at_its_instant() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let (tx, mut rx) = mpsc::unbounded_channel::<Ran>();
    let handle = cronguard::builder()
        .registered_jobs(false)
        .redis_url(server.url())
        .redis_prefix("ahead-shutdown-test")
        .instance("a")
        .claim_ahead(Duration::from_millis(450))
        .job(job("ahead-at-shutdown", "a", &tx))
        .start()
        .await
        .expect("starts");
    let first = tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("a run every second")
        .expect("running");
    // 250 ms before the next fire: its claim went out 450 ms before it and was granted.
    let next = first.1 + chrono::TimeDelta::seconds(1);
    let stop_at = next - chrono::TimeDelta::milliseconds(250);
    let wait = (stop_at - Utc::now()).to_std().unwrap_or_default();
    tokio::time::sleep(wait).await;
    handle.shutdown_within(Duration::from_secs(5)).await;
    let mut fires = vec![first.1];
    while let Ok(ran) = rx.try_recv() {
        assert!(ran.3 >= ran.1, "started before its instant: {ran:?}");
        fires.push(ran.1);
    }
    assert!(
        fires.contains(&next),
        "the fire claimed ahead before the shutdown ran at its instant: {fires:?}"
    );
}
