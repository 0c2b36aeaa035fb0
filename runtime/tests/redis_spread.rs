//! Three schedulers against one real `redis-server`, started one after another: the first up
//! claims every job alone at first, and once all three attend the store each job is claimed by
//! the one named first for it (docs/design/standby.md).

#![cfg(feature = "redis")]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cronguard::{Cronguard, Job, Lock, Schedule};
use cronguard_testkit::RedisServer;

/// (fire ms, job) -> the instances that started it.
type Starts = Arc<Mutex<BTreeMap<(i64, String), Vec<String>>>>;

const JOBS: usize = 45;

async fn scheduler(url: String, name: &str, starts: &Starts) -> Cronguard {
    let sink = Arc::clone(starts);
    let mut builder = cronguard::builder()
        .registered_jobs(false)
        .redis_url(url)
        .redis_prefix("spread-test")
        .instance(name)
        .on_event(move |e| {
            if e.kind.name() == "started" {
                sink.lock()
                    .expect("lock")
                    .entry((e.fire_time.timestamp_millis(), e.job.to_string()))
                    .or_default()
                    .push(e.instance.to_string());
            }
        });
    for i in 0..JOBS {
        builder = builder.job(
            Job::new(
                format!("spread-{i}"),
                Schedule::every(Duration::from_secs(1)).expect("valid"),
            )
            .lock(Lock::Redis)
            .run(|_| async {}),
        );
    }
    builder.start().await.expect("starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_jobs_spread_over_the_schedulers_present() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let starts: Starts = Arc::default();
    let first_fire = |starts: &Starts| starts.lock().expect("lock").keys().next().map(|k| k.0);
    let a = scheduler(redis.url(), "a", &starts).await;
    let until = Instant::now() + Duration::from_secs(10);
    while first_fire(&starts).is_none() {
        assert!(Instant::now() < until, "the first scheduler ran nothing");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let b = scheduler(redis.url(), "b", &starts).await;
    let c = scheduler(redis.url(), "c", &starts).await;
    let joined = chrono::Utc::now().timestamp_millis();
    // Every scheduler attends the store about once a second: four seconds after the last
    // joined, each has heard the others, and the fires after that show where the jobs went.
    let settled = (joined / 1000 + 4) * 1000;
    let last = settled + 2000;
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let done = starts
            .lock()
            .expect("lock")
            .keys()
            .filter(|(t, _)| *t == last)
            .count();
        if done == JOBS {
            break;
        }
        assert!(
            Instant::now() < until,
            "fire {last} ran {done} of {JOBS} jobs"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for h in [a, b, c] {
        h.shutdown().await;
    }
    let starts = starts.lock().expect("lock").clone();
    let alone = first_fire_of(&starts);
    assert!(
        alone.iter().all(|who| who == "a"),
        "the first fire ran in the only scheduler up: {alone:?}"
    );
    let owners = |t: i64| -> Vec<String> {
        (0..JOBS)
            .map(|i| {
                let who = starts
                    .get(&(t, format!("spread-{i}")))
                    .cloned()
                    .unwrap_or_default();
                assert_eq!(who.len(), 1, "job {i} at {t}: {who:?}");
                who[0].clone()
            })
            .collect()
    };
    let at_settled = owners(settled);
    // A third each on average; the ids are random, so a share is binomial (45, 1/3): 2 to 28
    // is over 4 standard deviations either side.
    for who in ["a", "b", "c"] {
        let mine = at_settled.iter().filter(|w| *w == who).count();
        assert!(
            (2..=28).contains(&mine),
            "{who} ran {mine} of {JOBS} jobs: {at_settled:?}"
        );
    }
    for t in [settled + 1000, last] {
        assert_eq!(owners(t), at_settled, "the jobs stay where they are");
    }
}

/// Who started the jobs of the earliest fire recorded.
fn first_fire_of(starts: &BTreeMap<(i64, String), Vec<String>>) -> Vec<String> {
    let Some(first) = starts.keys().next().map(|k| k.0) else {
        return Vec::new();
    };
    starts
        .iter()
        .filter(|((t, _), _)| *t == first)
        .flat_map(|(_, who)| who.clone())
        .collect()
}
