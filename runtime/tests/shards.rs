//! The scheduler groups jobs into shards (one task and one timer per shard) and polls a run once
//! on its shard before giving it a task of its own. These tests hold it to the same contract as
//! one job alone: every fire of every job once, in order; and a job whose code blocks before its
//! first `.await` is moved off the shard so that it cannot delay its neighbours again.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use cronguard::{Clock, EventKind, Job, Schedule};
use cronguard_testkit::Logs;

fn t0() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .expect("a valid instant")
        .with_timezone(&Utc)
}

#[tokio::test(start_paused = true)]
async fn thousands_of_jobs_in_several_shards_run_every_fire_once_in_order() {
    const JOBS: usize = 3_000; // three shards of at most 1,024 jobs
    const SECONDS: i64 = 12;
    let runs: Arc<Mutex<BTreeMap<usize, Vec<DateTime<Utc>>>>> = Arc::default();
    let mut builder = cronguard::builder()
        .registered_jobs(false)
        .clock(Clock::anchored(t0()))
        .shutdown_timeout(Duration::from_secs(5));
    for i in 0..JOBS {
        let period = 1 + (i % 3) as u64;
        let runs = Arc::clone(&runs);
        let schedule = Schedule::every(Duration::from_secs(period)).expect("valid");
        builder = builder.job(Job::new(format!("job{i}"), schedule).run(move |ctx| {
            let runs = Arc::clone(&runs);
            async move {
                runs.lock()
                    .expect("lock")
                    .entry(i)
                    .or_default()
                    .push(ctx.fire_time());
                // Every other job waits once: its run goes on as a task of its own.
                if i % 2 == 0 {
                    tokio::task::yield_now().await;
                }
            }
        }));
    }
    let handle = builder.start().await.expect("starts");
    tokio::time::sleep(Duration::from_millis(SECONDS as u64 * 1000 + 500)).await;
    let jobs = handle.monitor().jobs();
    handle.shutdown().await;

    let runs = runs.lock().expect("lock");
    for i in 0..JOBS {
        let period = 1 + (i % 3) as i64;
        let expected: Vec<_> = (1..=SECONDS)
            .filter(|s| s % period == 0)
            .map(|s| t0() + TimeDelta::seconds(s))
            .collect();
        assert_eq!(runs.get(&i), Some(&expected), "job{i}");
    }
    let started: u64 = jobs.iter().map(|j| j.counts.started).sum();
    let succeeded: u64 = jobs.iter().map(|j| j.counts.succeeded).sum();
    let expected: u64 = (0..JOBS).map(|i| 12 / (1 + (i % 3) as u64)).sum();
    assert_eq!((started, succeeded), (expected, expected));
    assert!(jobs.iter().all(|j| j.running == 0 && j.counts.skipped == 0));
}

/// Waits up to 20 s for `n` runs to succeed, of job `job` or of any job with `None`; whether
/// they did. Counts from the call on.
async fn successes(monitor: &cronguard::Monitor, job: Option<&str>, n: usize) -> bool {
    let mut events = monitor.subscribe();
    let mut seen = 0;
    tokio::time::timeout(Duration::from_secs(20), async {
        while seen < n {
            let event = events.recv().await.expect("the event stream stays open");
            if job.is_none_or(|j| *event.job == *j) && event.kind == EventKind::Succeeded {
                seen += 1;
            }
        }
    })
    .await
    .is_ok()
}

/// The id of the task a run's first poll happened on.
type Polls = Arc<Mutex<Vec<(&'static str, tokio::task::Id)>>>;

fn recording(name: &'static str, polls: &Polls, block: Duration) -> Job {
    let polls = Arc::clone(polls);
    Job::new(
        name,
        Schedule::every(Duration::from_millis(100)).expect("valid"),
    )
    .run(move |_ctx| {
        let polls = Arc::clone(&polls);
        async move {
            polls.lock().expect("lock").push((name, tokio::task::id()));
            // Blocking code before the first `.await`: what a job must not do, and what the
            // scheduler must survive.
            std::thread::sleep(block);
            tokio::task::yield_now().await;
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_blocks_before_its_first_await_gets_a_task_of_its_own() {
    let polls: Polls = Arc::default();
    let handle = cronguard::builder()
        .registered_jobs(false)
        .job(recording("blocker", &polls, Duration::from_millis(20)))
        .job(recording("quick", &polls, Duration::ZERO))
        .start()
        .await
        .expect("starts");
    let waited = successes(&handle.monitor(), Some("blocker"), 4).await;
    handle.shutdown().await;
    assert!(waited, "four runs of `blocker` within 20 s");

    let polls = polls.lock().expect("lock").clone();
    let first = |name| polls.iter().position(|(n, _)| *n == name).expect("it ran");
    let blocker: Vec<_> = polls.iter().filter(|(n, _)| *n == "blocker").collect();
    // Its first two runs were polled on the shard, the task that quick runs are polled on: one
    // slow first poll alone may be the thread taken off the CPU.
    let shard = blocker[0].1;
    assert!(
        polls.iter().any(|(n, id)| *n == "quick" && *id == shard),
        "quick runs share the shard's task: {polls:?} (first blocker poll at {})",
        first("blocker")
    );
    assert_eq!(blocker[1].1, shard, "{polls:?}");
    // Every later run of `blocker` has a task of its own.
    for (_, id) in &blocker[2..] {
        assert_ne!(*id, shard, "{polls:?}");
    }
    let later: std::collections::HashSet<_> = blocker[2..].iter().map(|(_, id)| *id).collect();
    assert_eq!(
        later.len(),
        blocker.len() - 2,
        "a new task per run: {polls:?}"
    );
}

/// A job every 100 ms whose first `slow_runs` runs block for 5 ms before they end: what a
/// thread taken off the CPU in the middle of a poll looks like to the shard.
fn slow_at_first(name: &'static str, polls: &Polls, slow_runs: usize) -> Job {
    let polls = Arc::clone(polls);
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    Job::new(
        name,
        Schedule::every(Duration::from_millis(100)).expect("valid"),
    )
    .run(move |_ctx| {
        let (polls, runs) = (Arc::clone(&polls), Arc::clone(&runs));
        async move {
            polls.lock().expect("lock").push((name, tokio::task::id()));
            if runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < slow_runs {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    })
}

/// A job moved to tasks of its own by two slow first polls comes back to the shard once its
/// first polls there are quick again: slow polls that were the machine's, not the job's code,
/// do not cost it a task per run for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_whose_first_polls_are_quick_again_comes_back_to_the_shard() {
    const SLOW_RUNS: usize = 2;
    const RUNS: usize = 24;
    let polls: Polls = Arc::default();
    let slow_then_quick = slow_at_first("slow-then-quick", &polls, SLOW_RUNS);
    let handle = cronguard::builder()
        .registered_jobs(false)
        .job(slow_then_quick)
        .start()
        .await
        .expect("starts");
    let waited = successes(&handle.monitor(), Some("slow-then-quick"), RUNS).await;
    handle.shutdown().await;
    assert!(waited, "{RUNS} runs of `slow-then-quick` within 20 s");
    let ids: Vec<_> = polls
        .lock()
        .expect("lock")
        .iter()
        .map(|(_, id)| *id)
        .collect();
    let shard = ids[0];
    assert_eq!(ids[1], shard, "the second slow run on the shard: {ids:?}");
    let away = ids
        .iter()
        .skip(SLOW_RUNS)
        .take_while(|id| **id != shard)
        .count();
    assert!(
        away >= 8,
        "runs on tasks of their own until 8 quick first polls there: {away} ({ids:?})"
    );
    assert!(
        away < RUNS - SLOW_RUNS,
        "back on the shard after its quick first polls: {ids:?}"
    );
    assert!(
        ids[SLOW_RUNS + away..].iter().all(|id| *id == shard),
        "every later run on the shard: {ids:?}"
    );
}

/// A job whose first poll was slow once (a thread taken off the CPU, a cold cache) stays on the
/// shard.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_slow_first_poll_keeps_the_job_on_the_shard() {
    let polls: Polls = Arc::default();
    let slow_once = slow_at_first("slow-once", &polls, 1);
    let handle = cronguard::builder()
        .registered_jobs(false)
        .job(slow_once)
        .job(recording("quick", &polls, Duration::ZERO))
        .start()
        .await
        .expect("starts");
    let waited = successes(&handle.monitor(), Some("slow-once"), 4).await;
    handle.shutdown().await;
    assert!(waited, "four runs of `slow-once` within 20 s");
    let polls = polls.lock().expect("lock").clone();
    let ids: Vec<_> = polls
        .iter()
        .filter(|(n, _)| *n == "slow-once")
        .map(|(_, id)| *id)
        .collect();
    assert!(
        ids.iter().all(|id| *id == ids[0]),
        "every run on the shard's task: {polls:?}"
    );
}

/// Jobs that each run a little synchronous code (well under the 1 ms a first poll may take on
/// the shard) stay on the shard when many come due at once: a first poll is timed from its own
/// start, not from the claims of the runs polled before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_polled_after_others_in_a_burst_are_not_taken_for_blocking_code() {
    const JOBS: usize = 30;
    const FIRES: usize = 3;
    // 200 µs each: 6 ms for the burst, over the limit for every job but the first five when
    // timed from the claim.
    const WORK: Duration = Duration::from_micros(200);
    let polls: Arc<Mutex<BTreeMap<usize, Vec<tokio::task::Id>>>> = Arc::default();
    let mut builder = cronguard::builder().registered_jobs(false);
    for i in 0..JOBS {
        let polls = Arc::clone(&polls);
        let schedule = Schedule::every(Duration::from_millis(200)).expect("valid");
        builder = builder.job(Job::new(format!("job{i}"), schedule).run(move |_ctx| {
            let polls = Arc::clone(&polls);
            async move {
                polls
                    .lock()
                    .expect("lock")
                    .entry(i)
                    .or_default()
                    .push(tokio::task::id());
                let began = std::time::Instant::now();
                while began.elapsed() < WORK {
                    std::hint::spin_loop();
                }
            }
        }));
    }
    let handle = builder.start().await.expect("starts");
    let waited = successes(&handle.monitor(), None, JOBS * FIRES).await;
    handle.shutdown().await;
    assert!(waited, "{FIRES} runs of each of {JOBS} jobs within 20 s");

    let polls = polls.lock().expect("lock");
    let shard = polls[&0][0];
    let moved: Vec<usize> = polls
        .iter()
        .filter(|(_, ids)| ids.iter().any(|id| *id != shard))
        .map(|(i, _)| *i)
        .collect();
    // Timed from their claims, all but about five would move. A thread taken off the CPU for
    // over a millisecond during a poll (a loaded machine) may move a few.
    assert!(
        moved.len() <= JOBS / 3,
        "jobs moved to tasks of their own: {moved:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_may_read_the_monitor_from_its_own_body() {
    let monitor: Arc<std::sync::OnceLock<cronguard::Monitor>> = Arc::default();
    let seen: Arc<Mutex<Vec<(usize, bool)>>> = Arc::default();
    let (job_monitor, job_seen) = (Arc::clone(&monitor), Arc::clone(&seen));
    let job = Job::new(
        "reporter",
        Schedule::every(Duration::from_millis(100)).expect("valid"),
    )
    .run(move |_ctx| {
        let (monitor, seen) = (Arc::clone(&job_monitor), Arc::clone(&job_seen));
        async move {
            // Before its first `.await`: the run is being polled by its shard.
            if let Some(monitor) = monitor.get() {
                let jobs = monitor.jobs().len();
                let healthy = monitor.health().await.healthy;
                seen.lock().expect("lock").push((jobs, healthy));
            }
        }
    });
    let handle = cronguard::builder()
        .registered_jobs(false)
        .job(job)
        .start()
        .await
        .expect("starts");
    let _ = monitor.set(handle.monitor());
    let mut events = handle.monitor().subscribe();
    let waited = tokio::time::timeout(Duration::from_secs(20), async {
        while seen.lock().expect("lock").len() < 3 {
            let _ = events.recv().await;
        }
    })
    .await;
    assert!(waited.is_ok(), "the job read the monitor three times");
    handle.shutdown().await;
    assert!(seen
        .lock()
        .expect("lock")
        .iter()
        .all(|&(jobs, healthy)| jobs == 1 && healthy));
}

/// Jobs due at the same instant start in registration order turned to a random place, a new one
/// at every burst: every replica holds them in the same order, and starting each at a place of
/// its own keeps them from all claiming the same jobs first, and any job from always being the
/// last of its burst.
#[tokio::test(start_paused = true)]
async fn a_burst_starts_at_a_random_place_and_runs_every_job_once() {
    const JOBS: usize = 100; // one shard
    const SECONDS: i64 = 10;
    let order: Arc<Mutex<BTreeMap<DateTime<Utc>, Vec<usize>>>> = Arc::default();
    let mut builder = cronguard::builder()
        .registered_jobs(false)
        .clock(Clock::anchored(t0()))
        .shutdown_timeout(Duration::from_secs(5));
    for i in 0..JOBS {
        let order = Arc::clone(&order);
        let schedule = Schedule::every(Duration::from_secs(1)).expect("valid");
        builder = builder.job(Job::new(format!("job{i}"), schedule).run(move |ctx| {
            order
                .lock()
                .expect("lock")
                .entry(ctx.fire_time())
                .or_default()
                .push(i);
            async {}
        }));
    }
    let handle = builder.start().await.expect("starts");
    tokio::time::sleep(Duration::from_millis(SECONDS as u64 * 1000 + 500)).await;
    handle.shutdown().await;

    let order = order.lock().expect("lock");
    assert_eq!(order.len(), SECONDS as usize, "a burst every second");
    let mut firsts = Vec::new();
    for (fire, started) in order.iter() {
        let first = started[0];
        let rotated: Vec<usize> = (0..JOBS).map(|k| (first + k) % JOBS).collect();
        assert_eq!(started, &rotated, "{fire}: every job once, in turned order");
        firsts.push(first);
    }
    assert!(
        firsts.iter().any(|f| *f != firsts[0]),
        "every burst started at job{}: the start does not move",
        firsts[0]
    );
}

/// A run whose code blocks its thread for good in its first poll holds up its shard, and every
/// job in it: an error names the job a second or two later, the scheduler is no longer alive
/// once the shard is 10 s late, so that a liveness probe restarts the process
/// (docs/operations/probes.md), and alive again once it runs. Held up again, the shard does not
/// hold up a shutdown: it returns a second after its timeout, with an error that names the job.
/// The test waits on its own thread: with one of the runtime's two threads blocked, the other
/// may sleep without driving the runtime's timers until the scheduler wakes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_held_up_by_blocking_code_is_not_alive_until_it_runs_again() {
    let logs = Logs::default();
    let writer = logs.clone();
    // The shards' watcher logs on the runtime's threads: only a global subscriber sees it.
    tracing::subscriber::set_global_default(
        tracing_subscriber::fmt()
            .with_env_filter("cronguard=info")
            .with_writer(move || writer.clone())
            .finish(),
    )
    .expect("the only global subscriber of this test binary");
    let (release, blocked) = std::sync::mpsc::channel::<()>();
    let blocked = Arc::new(Mutex::new(Some(blocked)));
    let (started_tx, started) = std::sync::mpsc::channel::<std::time::Instant>();
    let job = Job::new(
        "blocks",
        Schedule::every(Duration::from_secs(1)).expect("valid"),
    )
    .run(move |_| {
        let blocked = blocked.lock().expect("lock").take();
        let started_tx = started_tx.clone();
        async move {
            if let Some(blocked) = blocked {
                let _ = started_tx.send(std::time::Instant::now());
                // Blocks the shard's thread, before any `.await`, until the test frees it.
                let _ = blocked.recv();
            }
        }
    });
    let handle = cronguard::builder()
        .registered_jobs(false)
        .job(job)
        .start()
        .await
        .expect("starts");
    let monitor = handle.monitor();
    assert!(monitor.alive());
    let began = started
        .recv_timeout(Duration::from_secs(10))
        .expect("the run starts");
    while monitor.alive() {
        assert!(
            began.elapsed() < Duration::from_secs(30),
            "still alive 30 s after its shard was held up"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let held = began.elapsed();
    assert!(
        held >= Duration::from_secs(9),
        "not alive after only {held:?} of the shard held up"
    );
    let told = logs.text();
    assert!(
        told.contains("a shard of this process has not run for over a second: the run of job `blocks` blocks its thread"),
        "the error names the job that holds the shard up: {told}"
    );
    release.send(()).expect("the run waits");
    let freed = std::time::Instant::now();
    while !monitor.alive()
        || !logs
            .text()
            .contains("every shard of this process runs again")
    {
        assert!(
            freed.elapsed() < Duration::from_secs(10),
            "not alive again, or not said so, 10 s after the shard ran again: {}",
            logs.text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // A job of its own, added now, blocks in its very first run: a job whose first polls were
    // slow may have been moved to tasks of its own, off the shard.
    let (release_again, blocked_again) = std::sync::mpsc::channel::<()>();
    let blocked_again = Mutex::new(Some(blocked_again));
    let (started_tx, started) = std::sync::mpsc::channel::<std::time::Instant>();
    monitor
        .add(
            Job::new(
                "blocks-at-stop",
                Schedule::every(Duration::from_secs(1)).expect("valid"),
            )
            .run(move |_| {
                let blocked = blocked_again.lock().expect("lock").take();
                let _ = started_tx.send(std::time::Instant::now());
                async move {
                    if let Some(blocked) = blocked {
                        let _ = blocked.recv();
                    }
                }
            }),
        )
        .expect("adds the job");
    let began = started
        .recv_timeout(Duration::from_secs(10))
        .expect("the run starts");
    while logs.text().matches("blocks its thread").count() < 2 {
        assert!(
            began.elapsed() < Duration::from_secs(10),
            "no error 10 s after the shard was held up again: {}",
            logs.text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let stopping = std::time::Instant::now();
    handle.shutdown_within(Duration::from_secs(1)).await;
    let stopped = stopping.elapsed();
    assert!(
        stopped < Duration::from_secs(5),
        "shutdown took {stopped:?} with a shard held up"
    );
    let told = logs.text();
    assert!(
        told.contains("stopping without a shard of this process that is still held up: the run of job `blocks-at-stop` blocks its thread"),
        "shutdown names the job that holds the shard up: {told}"
    );
    // The runtime cannot be dropped while its thread is blocked.
    release_again.send(()).expect("the run waits");
}
