//! Pause, resume, run now, add and remove (docs/guide/controls.md), on
//! tokio's paused clock: in one process with the in-process guard, and across two schedulers
//! that share a lock dir, where a pause made on one holds for the other and a run asked for on
//! both runs once.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use cronguard::{
    Clock, ControlError, Cronguard, Event, EventKind, HealthState, Job, Lock, Schedule,
};

fn t0() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .expect("valid")
        .with_timezone(&Utc)
}

type Events = Arc<Mutex<Vec<Event>>>;

fn job(name: &str, lock: Lock) -> Job {
    Job::new(
        name,
        Schedule::every(Duration::from_secs(10)).expect("valid"),
    )
    .lock(lock)
    .run(|_| async { tokio::time::sleep(Duration::from_millis(100)).await })
}

async fn scheduler(
    instance: &str,
    dir: &std::path::Path,
    jobs: Vec<Job>,
    events: &Events,
) -> Cronguard {
    scheduler_at(t0(), instance, dir, jobs, events).await
}

/// [`scheduler`], its clock reading `now` at its start.
async fn scheduler_at(
    now: DateTime<Utc>,
    instance: &str,
    dir: &std::path::Path,
    jobs: Vec<Job>,
    events: &Events,
) -> Cronguard {
    let handle = cronguard::builder()
        .registered_jobs(false)
        .lock_dir(dir)
        .instance(instance)
        .clock(Clock::anchored(now))
        .jobs(jobs)
        .start()
        .await
        .expect("starts");
    // The event stream, read on the test's runtime: every event is in `events` before the
    // paused clock moves on.
    let mut stream = handle.monitor().subscribe();
    let sink = Arc::clone(events);
    tokio::spawn(async move {
        while let Ok(e) = stream.recv().await {
            sink.lock().expect("lock").push(e);
        }
    });
    handle
}

fn lock_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("cronguard-ctl-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Lets the scheduler run for `s` seconds of the paused clock (plus half a second, so that no
/// step coincides with a fire).
async fn run_for(s: u64) {
    tokio::time::sleep(Duration::from_millis(s * 1000 + 500)).await;
}

/// (instance, fire second, event) of job `job`.
fn seen(events: &Events, job: &str) -> Vec<(String, i64, String)> {
    events
        .lock()
        .expect("lock")
        .iter()
        .filter(|e| &*e.job == job)
        .map(|e| {
            let what = match &e.kind {
                EventKind::Skipped { paused: true, .. } if e.first_report => "paused".to_owned(),
                EventKind::Skipped { paused: true, .. } => "paused (reported elsewhere)".to_owned(),
                other => other.name().to_owned(),
            };
            (
                e.instance.to_string(),
                (e.fire_time - t0()).num_seconds(),
                what,
            )
        })
        .collect()
}

fn count(events: &[(String, i64, String)], what: &str) -> usize {
    events.iter().filter(|(_, _, w)| w == what).count()
}

#[tokio::test(start_paused = true)]
async fn a_paused_job_skips_its_fires_until_resumed_and_runs_when_asked() {
    let dir = lock_dir("local");
    let events: Events = Arc::default();
    let handle = scheduler("a", &dir, vec![job("report", Lock::Local)], &events).await;
    handle
        .monitor()
        .pause("report", "ops@example")
        .await
        .expect("paused");
    let status = handle.monitor().job("report").expect("listed");
    let pause = status.paused.expect("shown as paused");
    assert_eq!(pause.by, "ops@example");
    run_for(20).await;
    assert_eq!(
        seen(&events, "report")
            .iter()
            .map(|(_, t, w)| (*t, w.as_str()))
            .collect::<Vec<_>>(),
        [(10, "paused"), (20, "paused")]
    );
    let health = handle.monitor().health().await;
    assert!(health.healthy, "a paused job is not overdue: {health:?}");
    assert!(matches!(&health.jobs[0].state, HealthState::Paused { by, .. } if by == "ops@example"));

    let key = handle
        .monitor()
        .trigger("report")
        .expect("runs now although paused");
    assert!(key.starts_with("report@manual:"), "{key}");
    run_for(0).await;
    let manual: Vec<_> = events
        .lock()
        .expect("lock")
        .iter()
        .filter(|e| e.manual.is_some())
        .map(|e| (e.run_key.to_string(), e.kind.name()))
        .collect();
    assert_eq!(
        manual,
        [(key.clone(), "started"), (key, "succeeded")],
        "its own identity, never a fire's"
    );

    handle
        .monitor()
        .resume("report", "ops@example")
        .await
        .expect("resumed");
    assert!(handle
        .monitor()
        .job("report")
        .expect("listed")
        .paused
        .is_none());
    run_for(10).await;
    let after: Vec<_> = seen(&events, "report").into_iter().skip(4).collect();
    assert_eq!(count(&after, "started"), 1, "{after:?}");
    handle.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn controls_name_what_is_wrong() {
    let dir = lock_dir("errors");
    let events: Events = Arc::default();
    let handle = scheduler("a", &dir, vec![job("report", Lock::Local)], &events).await;
    assert!(matches!(
        handle.monitor().pause("nope", "me").await,
        Err(ControlError::UnknownJob(name)) if name == "nope"
    ));
    assert!(matches!(
        handle.monitor().trigger("nope"),
        Err(ControlError::UnknownJob(_))
    ));
    let twice = handle.monitor().add(job("report", Lock::Local));
    assert!(
        matches!(twice, Err(ControlError::DuplicateName(_))),
        "{twice:?}"
    );
    let bodiless = handle.monitor().add(Job::new(
        "empty",
        Schedule::every(Duration::from_secs(1)).expect("valid"),
    ));
    let Err(ControlError::InvalidJob { problem, .. }) = bodiless else {
        panic!("a job without a body is refused: {bodiless:?}");
    };
    assert!(problem.contains("no body"), "{problem}");
    let monitor = handle.monitor();
    handle.shutdown().await;
    assert!(matches!(
        monitor.trigger("report"),
        Err(ControlError::Stopped)
    ));
}

#[tokio::test(start_paused = true)]
async fn jobs_are_added_and_removed_while_the_scheduler_runs() {
    let dir = lock_dir("add");
    let events: Events = Arc::default();
    let handle = scheduler("a", &dir, vec![job("first", Lock::Local)], &events).await;
    handle
        .monitor()
        .add(job("second", Lock::Local))
        .expect("added");
    assert_eq!(handle.monitor().job_count(), 2);
    run_for(10).await;
    assert_eq!(count(&seen(&events, "second"), "succeeded"), 1);
    handle.monitor().remove("first").expect("removed");
    assert!(
        handle.monitor().job("first").is_none(),
        "gone from the status at once"
    );
    assert_eq!(handle.monitor().job_count(), 1);
    run_for(10).await;
    assert_eq!(
        count(&seen(&events, "first"), "started"),
        1,
        "no fire after the removal"
    );
    assert_eq!(count(&seen(&events, "second"), "succeeded"), 2);
    handle
        .monitor()
        .add(job("first", Lock::Local))
        .expect("its name is free again");
    handle.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_pause_on_one_scheduler_holds_for_every_scheduler_of_the_lock_dir() {
    let dir = lock_dir("shared");
    let events: Events = Arc::default();
    let a = scheduler("a", &dir, vec![job("settle", Lock::File)], &events).await;
    let b = scheduler("b", &dir, vec![job("settle", Lock::File)], &events).await;
    a.monitor().pause("settle", "ops").await.expect("paused");
    run_for(20).await;
    let both = seen(&events, "settle");
    assert_eq!(count(&both, "started"), 0, "{both:?}");
    assert_eq!(
        count(&both, "paused"),
        2,
        "each fire reported once: {both:?}"
    );
    assert_eq!(count(&both, "paused (reported elsewhere)"), 2, "{both:?}");
    let b_view = b.monitor().job("settle").expect("listed").paused;
    assert_eq!(b_view.map(|p| p.by), Some("ops".to_owned()), "b knows too");

    // Asked for on both: every scheduler that reads the request claims it; one run happens.
    let key = b.monitor().trigger("settle").expect("asked");
    run_for(2).await;
    let runs: Vec<_> = events
        .lock()
        .expect("lock")
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Started) && *e.run_key == *key)
        .map(|e| e.instance.to_string())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");

    b.monitor().resume("settle", "ops").await.expect("resumed");
    run_for(10).await;
    let after = seen(&events, "settle");
    let scheduled_runs = after
        .iter()
        .filter(|(_, t, w)| w == "started" && *t == 30)
        .count();
    assert_eq!(scheduled_runs, 1, "{after:?}");
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_replica_runs_only_the_jobs_its_selection_names_and_watches_the_rest() {
    let events: Events = Arc::default();
    let handle = cronguard::builder()
        .registered_jobs(false)
        .clock(Clock::anchored(t0()))
        .select_jobs("billing::*, !billing::slow_*")
        .jobs([
            job("billing::settle", Lock::Local),
            job("billing::slow_export", Lock::Local),
            job("reports::daily", Lock::Local),
        ])
        .start()
        .await
        .expect("starts");
    let mut stream = handle.monitor().subscribe();
    let sink = Arc::clone(&events);
    tokio::spawn(async move {
        while let Ok(e) = stream.recv().await {
            sink.lock().expect("lock").push(e);
        }
    });
    run_for(10).await;
    assert_eq!(count(&seen(&events, "billing::settle"), "succeeded"), 1);
    for watched in ["billing::slow_export", "reports::daily"] {
        assert!(
            seen(&events, watched).is_empty(),
            "{watched} never runs here"
        );
        assert!(!handle.monitor().job(watched).expect("still listed").enabled);
    }
    handle.shutdown().await;

    let bad = cronguard::builder()
        .registered_jobs(false)
        .select_jobs("billing::*,,x")
        .job(job("a", Lock::Local))
        .start()
        .await;
    let Err(e) = bad else {
        panic!("an empty pattern is a start error");
    };
    assert!(e.to_string().contains("billing::*,!billing::slow_*"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_control_from_a_thread_of_the_application_reaches_the_job() {
    let dir = lock_dir("thread");
    let events: Events = Arc::default();
    let handle = scheduler("a", &dir, vec![job("report", Lock::File)], &events).await;
    let mut stream = handle.monitor().subscribe();
    let monitor = handle.monitor();
    let key = std::thread::spawn(move || monitor.trigger("report"))
        .join()
        .expect("the thread ends")
        .expect("asked from a plain thread, outside the runtime");
    let succeeded = tokio::time::timeout(Duration::from_secs(10), async {
        while let Ok(e) = stream.recv().await {
            if *e.run_key == *key && matches!(e.kind, EventKind::Succeeded) {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(succeeded, Ok(true), "the requested run {key} succeeded");
    handle.shutdown().await;
}

/// A lock dir whose control feed is restored from an older copy: the replicas read it again from
/// its start, run what was asked for since, and neither run nor report again a run asked for
/// before whose grace has passed.
#[tokio::test(start_paused = true)]
async fn a_feed_restored_from_a_copy_is_read_again_without_reporting_old_runs() {
    let dir = lock_dir("restored");
    let feed = dir.join(".cronguard-controls");
    let events: Events = Arc::default();
    let started = tokio::time::Instant::now();
    let a = scheduler("a", &dir, vec![job("settle", Lock::File)], &events).await;
    let old = a.monitor().trigger("settle").expect("asked");
    run_for(2).await;
    let copy = std::fs::read(&feed).expect("the feed holds the request");
    a.monitor().pause("settle", "ops").await.expect("paused");
    a.monitor().resume("settle", "ops").await.expect("resumed");
    // The run asked for is past its grace (60 s) when `b` starts, which reads from the end.
    run_for(120).await;
    let now = t0() + started.elapsed();
    let b = scheduler_at(now, "b", &dir, vec![job("settle", Lock::File)], &events).await;
    run_for(2).await;
    std::fs::write(&feed, copy).expect("restores the copy");
    let new = a.monitor().trigger("settle").expect("asked");
    run_for(3).await;
    let of = |key: &str, what: &str| {
        events
            .lock()
            .expect("lock")
            .iter()
            .filter(|e| *e.run_key == *key && e.kind.name() == what)
            .map(|e| e.instance.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(of(&old, "started"), ["a"]);
    assert_eq!(of(&old, "misfired"), Vec::<String>::new(), "reported again");
    assert_eq!(of(&new, "started").len(), 1);
    assert_eq!(of(&new, "misfired"), Vec::<String>::new());
    a.shutdown().await;
    b.shutdown().await;
}
