//! A claim whose reply is lost, against a real `redis-server` and a real PostgreSQL: scheduler A
//! reaches the store through a proxy that the test stalls for longer than the response timeout, so A's claims of the fires
//! in that window fail without an answer (they may have taken effect), while scheduler B, with a
//! direct connection, claims and runs them. Once the proxy flows again, A asks again and learns
//! that another claimant took each fire: it logs them as claimed elsewhere and reports no
//! misfire — a fire that ran is never reported as "maybe not run" while the guard knows who
//! claimed it (docs/design/guarantees.md). Both schedulers claim every fire, as without partition
//! ownership (`Builder::partition_ownership(false)`: the claims that remain where no owner is
//! known, docs/design/ownership.md).

#![cfg(any(feature = "redis", feature = "postgres"))]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use cronguard::{Builder, Event, EventKind, Job, Lock, Schedule};
use cronguard_testkit::StallProxy;
use tokio::sync::Notify;
use tokio::time::Instant;

/// Every event of both schedulers, tagged with the scheduler that emitted it.
#[derive(Clone, Default)]
struct Seen {
    events: Arc<Mutex<Vec<(char, Event)>>>,
    changed: Arc<Notify>,
}

impl Seen {
    fn follow(&self, side: char, mut events: tokio::sync::broadcast::Receiver<Event>) {
        let seen = self.clone();
        tokio::spawn(async move {
            while let Ok(event) = events.recv().await {
                seen.events.lock().expect("events").push((side, event));
                seen.changed.notify_waiters();
            }
        });
    }

    fn count(&self, matches: impl Fn(char, &Event) -> bool) -> usize {
        let events = self.events.lock().expect("events");
        events.iter().filter(|(s, e)| matches(*s, e)).count()
    }

    /// Waits until `matches` holds for at least `n` events.
    async fn wait_for(&self, n: usize, what: &str, matches: impl Fn(char, &Event) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let changed = self.changed.notified();
            if self.count(&matches) >= n {
                return;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                panic!("within 30 s fewer than {n} events: {what}");
            }
        }
    }
}

/// Every start: the scheduler that ran it and its fire.
type Starts = Arc<Mutex<Vec<(char, DateTime<Utc>)>>>;

fn job(starts: Starts, side: char, lock: Lock) -> Job {
    Job::new(
        "lost-reply",
        Schedule::every(Duration::from_secs(1)).expect("valid"),
    )
    .lock(lock)
    // Short, so that a release held in the stalled proxy keeps B busy for two fires at most.
    .lease(Duration::from_secs(2))
    .misfire_grace(Duration::from_secs(30))
    .run(move |ctx| {
        let starts = Arc::clone(&starts);
        async move {
            starts.lock().expect("starts").push((side, ctx.fire_time()));
        }
    })
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_a_retried_claim_of_a_fire_another_scheduler_ran_reports_no_misfire() {
    let Some(server) = cronguard_testkit::RedisServer::start() else {
        return;
    };
    let proxy = StallProxy::start(server.port());
    let store = |port: u16| {
        cronguard::builder()
            .redis_url(format!("redis://127.0.0.1:{port}"))
            .redis_prefix("lost-reply")
    };
    a_retried_claim_reports_no_misfire(
        store(proxy.port()),
        store(server.port()),
        Lock::Redis,
        &proxy,
    )
    .await;
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_retried_claim_of_a_fire_another_scheduler_ran_reports_no_misfire() {
    let Some(server) = cronguard_testkit::PostgresServer::start() else {
        return;
    };
    let proxy = StallProxy::start(server.port());
    let store = |port: u16| {
        cronguard::builder().postgres_url(format!("postgres://postgres@127.0.0.1:{port}/postgres"))
    };
    a_retried_claim_reports_no_misfire(
        store(proxy.port()),
        store(server.port()),
        Lock::Postgres,
        &proxy,
    )
    .await;
}

/// A reaches the store through `proxy`, B directly.
async fn a_retried_claim_reports_no_misfire(
    a: Builder,
    b: Builder,
    lock: Lock,
    proxy: &StallProxy,
) {
    let starts: Starts = Arc::default();
    let a = a
        .partition_ownership(false)
        .registered_jobs(false)
        .job(job(Arc::clone(&starts), 'A', lock.clone()))
        .start()
        .await
        .expect("A starts");
    let b = b
        .partition_ownership(false)
        .registered_jobs(false)
        .job(job(Arc::clone(&starts), 'B', lock))
        .start()
        .await
        .expect("B starts");
    let seen = Seen::default();
    seen.follow('A', a.monitor().subscribe());
    seen.follow('B', b.monitor().subscribe());
    let settled = |side: char| {
        move |s: char, e: &Event| {
            s == side && matches!(e.kind, EventKind::Started | EventKind::ClaimedElsewhere)
        }
    };
    seen.wait_for(2, "A settled", settled('A')).await;
    seen.wait_for(2, "B settled", settled('B')).await;

    // Longer than the response timeout (2 s): A's claims get no answer, B runs the fires.
    proxy.stall();
    let stalled_at = Utc::now();
    let b_started_since = |at: DateTime<Utc>| {
        move |s: char, e: &Event| {
            s == 'B' && matches!(e.kind, EventKind::Started) && e.fire_time > at
        }
    };
    seen.wait_for(
        4,
        "B ran the fires of the stall",
        b_started_since(stalled_at),
    )
    .await;
    proxy.flow();
    let flowed_at = Utc::now();
    // A catches up: it hears about a fire after the stall.
    seen.wait_for(1, "A settled after the stall", move |s, e| {
        s == 'A'
            && matches!(e.kind, EventKind::Started | EventKind::ClaimedElsewhere)
            && e.fire_time > flowed_at
    })
    .await;
    // A fire due while the schedulers shut down is reported as a misfire: not checked.
    let stopping_at = Utc::now() - chrono::TimeDelta::seconds(1);
    a.shutdown().await;
    b.shutdown().await;

    let events = seen.events.lock().expect("events").clone();
    let misfired: Vec<String> = events
        .iter()
        .filter(|(_, e)| matches!(e.kind, EventKind::Misfired { .. }) && e.fire_time < stopping_at)
        .map(|(s, e)| format!("{s}: {} {:?}", e.fire_time, e.kind))
        .collect();
    assert!(
        misfired.is_empty(),
        "a fire that ran was reported as a misfire: {misfired:?}"
    );
    let mut per_fire: BTreeMap<DateTime<Utc>, Vec<char>> = BTreeMap::new();
    for (side, fire) in starts.lock().expect("starts").iter() {
        per_fire.entry(*fire).or_default().push(*side);
    }
    for (fire, sides) in &per_fire {
        assert_eq!(sides.len(), 1, "fire {fire} started on {sides:?}");
    }
    // The scenario happened: fires of the stall that B ran were claimed elsewhere for A.
    let in_stall = events
        .iter()
        .filter(|(s, e)| {
            *s == 'A'
                && matches!(e.kind, EventKind::ClaimedElsewhere)
                && e.fire_time > stalled_at
                && e.fire_time < flowed_at
        })
        .count();
    assert!(
        in_stall >= 2,
        "A heard that B took the fires of the stall ({in_stall} of them)"
    );
}
