//! Events, hooks, the event stream and the health check, on tokio's paused clock.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use cronguard::{Clock, Cronguard, Event, EventKind, HealthState, Job, Lock, Overlap, Schedule};
use fs2::FileExt;

fn t0() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .expect("valid")
        .with_timezone(&Utc)
}

fn every(s: u64) -> Schedule {
    Schedule::every(Duration::from_secs(s)).expect("valid")
}

async fn start(
    jobs: Vec<Job>,
    dir: Option<&std::path::Path>,
    events: &Arc<Mutex<Vec<Event>>>,
) -> Cronguard {
    let sink = Arc::clone(events);
    let mut b = cronguard::builder()
        .registered_jobs(false)
        .instance("test-instance")
        .clock(Clock::anchored(t0()))
        .on_event(move |e| sink.lock().expect("lock").push(e.clone()));
    if let Some(dir) = dir {
        b = b.lock_dir(dir);
    }
    for job in jobs {
        b = b.job(job);
    }
    b.start().await.expect("starts")
}

async fn sleep_s(s: f64) {
    tokio::time::sleep(Duration::from_secs_f64(s)).await;
}

#[tokio::test(start_paused = true)]
async fn events_carry_the_fire_its_run_key_token_instance_and_timings() {
    let events = Arc::new(Mutex::new(Vec::new()));
    let job = Job::new("fields", every(5))
        .run(|_| async { tokio::time::sleep(Duration::from_secs(12)).await });
    let handle = start(vec![job], None, &events).await;
    sleep_s(17.5).await;
    handle.shutdown().await;
    let events = events.lock().expect("lock").clone();
    let names: Vec<(i64, &str)> = events
        .iter()
        .map(|e| ((e.fire_time - t0()).num_seconds(), e.kind.name()))
        .collect();
    assert_eq!(
        names,
        vec![
            (5, "started"),
            (10, "skipped"),
            (15, "skipped"),
            (5, "succeeded")
        ],
        "each outcome once, in order"
    );
    for e in &events {
        assert_eq!(&*e.job, "fields");
        assert_eq!(&*e.instance, "test-instance");
        assert_eq!(
            &*e.run_key,
            format!(
                "fields@{}",
                e.fire_time
                    .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
            )
        );
    }
    let (started, skipped, done) = (&events[0], &events[1], &events[3]);
    assert_eq!(started.lateness, Some(Duration::ZERO));
    assert!(started.fencing_token.is_some());
    assert_eq!(skipped.fencing_token, None, "a dropped fire has no token");
    assert_eq!(skipped.lateness, None);
    assert_eq!(done.duration, Some(Duration::from_secs(12)));
    assert_eq!(
        done.lateness,
        Some(Duration::ZERO),
        "a finished run carries its lateness too"
    );
    assert_eq!(done.fencing_token, started.fencing_token);
    assert_eq!(done.at, t0() + TimeDelta::seconds(17));
}

#[tokio::test(start_paused = true)]
async fn a_blocked_or_panicking_hook_never_delays_the_jobs() {
    let (gate_tx, gate_rx) = std::sync::mpsc::channel::<()>();
    let gate = Mutex::new(gate_rx);
    let ran = Arc::new(Mutex::new(Vec::new()));
    let ran_in_job = Arc::clone(&ran);
    let seen = Arc::new(Mutex::new(0usize));
    let seen_by_hook = Arc::clone(&seen);
    let job = Job::new("hooked", every(1)).run(move |ctx| {
        let ran = Arc::clone(&ran_in_job);
        async move { ran.lock().expect("lock").push(ctx.fire_time()) }
    });
    let handle = cronguard::builder()
        .registered_jobs(false)
        .clock(Clock::anchored(t0()))
        // Blocks on its first event until the test opens the gate.
        .on_event(move |_| {
            let _ = gate.lock().expect("lock").recv();
        })
        .on_event(|_| panic!("a broken hook"))
        .on_event(move |_| *seen_by_hook.lock().expect("lock") += 1)
        .job(job)
        .start()
        .await
        .expect("starts");
    let mut stream = handle.monitor().subscribe();
    sleep_s(5.5).await;
    assert_eq!(
        ran.lock().expect("lock").len(),
        5,
        "every fire ran while the hooks were stuck"
    );
    let mut streamed = Vec::new();
    while let Ok(e) = stream.try_recv() {
        streamed.push(e.kind.name());
    }
    assert_eq!(
        streamed.len(),
        10,
        "the stream is not held up by hooks: {streamed:?}"
    );
    drop(gate_tx); // opens the gate for good
    handle.shutdown().await;
    assert_eq!(
        *seen.lock().expect("lock"),
        10,
        "after shutdown every event reached every hook"
    );
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("cronguard-obs-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch");
    dir
}

#[tokio::test(start_paused = true)]
async fn health_turns_overdue_while_another_process_holds_the_lock_and_recovers_after_a_run() {
    let dir = scratch("held");
    let events = Arc::new(Mutex::new(Vec::new()));
    let job = Job::new("held", every(5))
        .lock(Lock::File)
        .misfire_grace(Duration::from_secs(3))
        .run(|_| async {});
    let handle = start(vec![job], Some(&dir), &events).await;
    sleep_s(5.5).await;
    assert!(handle.monitor().health().await.healthy, "fire 5 ran");
    // Another process takes the run lock and never lets go.
    let held = std::fs::File::create(dir.join("held.lock")).expect("lock file");
    held.lock_exclusive().expect("flock");
    sleep_s(7.0).await; // 12.5 s: fire 10 was skipped, and its grace ran out at 13
    assert!(
        handle.monitor().health().await.healthy,
        "fire 10's grace has not passed yet"
    );
    sleep_s(1.0).await; // 13.5 s
    let health = handle.monitor().health().await;
    assert!(!health.healthy);
    assert_eq!(
        health.jobs[0].state,
        HealthState::Overdue {
            missed: t0() + TimeDelta::seconds(10),
            deadline: t0() + TimeDelta::seconds(13)
        }
    );
    assert_eq!(
        health.jobs[0].last_claimed,
        Some(t0() + TimeDelta::seconds(5))
    );
    FileExt::unlock(&held).expect("unlock");
    sleep_s(2.0).await; // 15.5 s: fire 15 ran
    let health = handle.monitor().health().await;
    assert!(health.healthy, "{health:?}");
    handle.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(start_paused = true)]
async fn health_turns_overdue_when_every_fire_misfires() {
    let events = Arc::new(Mutex::new(Vec::new()));
    // The first run never ends; later fires wait in the queue until their grace passes.
    let job = Job::new("stuck", every(5))
        .overlap(Overlap::Queue)
        .misfire_grace(Duration::from_secs(2))
        .run(|_| std::future::pending::<()>());
    let handle = start(vec![job], None, &events).await;
    sleep_s(11.5).await;
    assert!(handle.monitor().health().await.healthy);
    sleep_s(1.0).await; // 12.5 s: fire 10 misfired at 12
    let health = handle.monitor().health().await;
    assert!(
        matches!(health.jobs[0].state, HealthState::Overdue { missed, .. } if missed == t0() + TimeDelta::seconds(10))
    );
    handle.shutdown_within(Duration::ZERO).await;
    assert!(events
        .lock()
        .expect("lock")
        .iter()
        .any(|e| matches!(e.kind, EventKind::Misfired { .. })));
}

#[tokio::test(start_paused = true)]
async fn a_disabled_job_runs_nothing_but_is_watched_by_health() {
    let events = Arc::new(Mutex::new(Vec::new()));
    let job = Job::new("watched", every(5))
        .enabled(false)
        .misfire_grace(Duration::from_secs(1))
        .run(|_| async {});
    let handle = start(vec![job], None, &events).await;
    sleep_s(6.5).await;
    let health = handle.monitor().health().await;
    assert!(
        matches!(health.jobs[0].state, HealthState::Overdue { .. }),
        "nothing here claimed fire 5: {health:?}"
    );
    assert!(!handle.monitor().jobs()[0].enabled);
    handle.shutdown().await;
    assert!(
        events.lock().expect("lock").is_empty(),
        "a disabled job neither runs nor reports drops"
    );
}

#[cfg(feature = "serde")]
#[tokio::test(start_paused = true)]
async fn status_and_health_serialize_to_json() {
    let events = Arc::new(Mutex::new(Vec::new()));
    let job = Job::new("json", every(5)).run(|_| async {});
    let handle = start(vec![job], None, &events).await;
    sleep_s(5.5).await;
    let status = serde_json::to_value(handle.monitor().jobs()).expect("serializes");
    assert_eq!(status[0]["name"], "json");
    assert_eq!(status[0]["lock"], "local");
    assert_eq!(status[0]["counts"]["succeeded"], 1);
    assert_eq!(status[0]["last_run"]["outcome"]["kind"], "succeeded");
    let health = serde_json::to_value(handle.monitor().health().await).expect("serializes");
    assert_eq!(health["healthy"], true);
    assert_eq!(health["jobs"][0]["state"]["state"], "on_time");
    handle.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_hook_that_never_returns_cannot_hang_shutdown() {
    let job = Job::new("stuck-hook", every(1)).run(|_| async {});
    let handle = cronguard::builder()
        .registered_jobs(false)
        .clock(Clock::anchored(t0()))
        .on_event(|_| loop {
            std::thread::park();
        })
        .job(job)
        .start()
        .await
        .expect("starts");
    sleep_s(2.5).await;
    // Returns after the shutdown timeout (virtual time), although the hook never will.
    handle.shutdown_within(Duration::from_secs(2)).await;
}

#[tokio::test(start_paused = true)]
async fn a_hook_that_cannot_keep_up_misses_events_but_never_holds_memory_or_jobs() {
    let (gate_tx, gate_rx) = std::sync::mpsc::channel::<()>();
    let gate = Mutex::new(gate_rx);
    let seen = Arc::new(Mutex::new(0usize));
    let seen_by_hook = Arc::clone(&seen);
    let ran = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut builder = cronguard::builder()
        .registered_jobs(false)
        .clock(Clock::anchored(t0()))
        .on_event(move |_| {
            let _ = gate.lock().expect("lock").recv();
            *seen_by_hook.lock().expect("lock") += 1;
        });
    for i in 0..100 {
        let ran = Arc::clone(&ran);
        builder = builder.job(Job::new(format!("busy-{i}"), every(1)).run(move |_| {
            ran.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            async {}
        }));
    }
    let handle = builder.start().await.expect("starts");
    // 100 jobs for 100 s: 20,000 events, more than the hooks' queue holds.
    sleep_s(100.5).await;
    assert_eq!(ran.load(std::sync::atomic::Ordering::Relaxed), 10_000);
    drop(gate_tx);
    handle.shutdown().await;
    let seen = *seen.lock().expect("lock");
    assert!(
        seen <= cronguard::HOOK_QUEUE_CAPACITY + 1,
        "the hooks' queue is bounded: {seen}"
    );
    assert!(
        seen >= cronguard::HOOK_QUEUE_CAPACITY,
        "the queue was filled: {seen}"
    );
}

#[tokio::test(start_paused = true)]
async fn shutdown_with_an_endless_timeout_does_not_overflow() {
    let job = Job::new("endless", every(1)).run(|_| async {});
    let handle = cronguard::builder()
        .registered_jobs(false)
        .clock(Clock::anchored(t0()))
        .job(job)
        .start()
        .await
        .expect("starts");
    sleep_s(2.5).await;
    handle.shutdown_within(Duration::MAX).await;
}
