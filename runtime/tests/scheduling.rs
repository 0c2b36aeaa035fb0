//! The due-fire model of DESIGN §3 on tokio's paused clock: every combination of overlap,
//! coalescing, max_instances and grace against a slow job, a process pause and a burst of due
//! fires, asserting which fires ran, when, and which events were reported.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use cronguard::{CancelReason, Clock, Event, EventKind, Job, Lock, Overlap, Schedule};

fn t0() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .expect("a valid instant")
        .with_timezone(&Utc)
}

/// Seconds after `t0`.
fn secs(t: DateTime<Utc>) -> f64 {
    (t - t0()).num_milliseconds() as f64 / 1000.0
}

#[derive(Clone)]
struct Case {
    name: &'static str,
    every_s: u64,
    work_s: u64,
    overlap: Overlap,
    coalesce: bool,
    max_instances: u32,
    grace_s: u64,
    /// A pause of the whole process: (at second, for seconds).
    pause: Option<(u64, u64)>,
    /// How long the scheduler runs before shutdown.
    run_s: u64,
    lock: Lock,
}

const BASE: Case = Case {
    name: "",
    every_s: 5,
    work_s: 12,
    overlap: Overlap::Skip,
    coalesce: false,
    max_instances: 1,
    grace_s: 60,
    pause: None,
    run_s: 40,
    lock: Lock::Local,
};

struct Outcome {
    /// (fire second, start second) of each run, in start order.
    runs: Vec<(f64, f64)>,
    /// (fire second, event name) in the order reported.
    events: Vec<(f64, &'static str)>,
    raw: Vec<Event>,
}

impl Outcome {
    fn of(&self, kind: &str) -> Vec<f64> {
        self.events
            .iter()
            .filter(|(_, k)| *k == kind)
            .map(|(t, _)| *t)
            .collect()
    }
}

async fn run_case(case: Case) -> Outcome {
    let clock = Clock::anchored(t0());
    let runs = Arc::new(Mutex::new(Vec::new()));
    let events = Arc::new(Mutex::new(Vec::new()));
    let job_runs = Arc::clone(&runs);
    let job_clock = clock.clone();
    let work = Duration::from_secs(case.work_s);
    let job = Job::new(
        case.name,
        Schedule::every(Duration::from_secs(case.every_s)).expect("valid"),
    )
    .overlap(case.overlap)
    .coalesce(case.coalesce)
    .max_instances(case.max_instances)
    .misfire_grace(Duration::from_secs(case.grace_s))
    .lock(case.lock.clone())
    .run(move |ctx| {
        let runs = Arc::clone(&job_runs);
        let clock = job_clock.clone();
        async move {
            runs.lock()
                .expect("lock")
                .push((secs(ctx.fire_time()), secs(clock.now())));
            tokio::time::sleep(work).await;
        }
    });
    let sink = Arc::clone(&events);
    let lock_dir = std::env::temp_dir().join(format!(
        "cronguard-sched-{}-{}",
        case.name,
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&lock_dir);
    let handle = cronguard::builder()
        .registered_jobs(false)
        .lock_dir(&lock_dir)
        .clock(clock)
        .on_event(move |e| sink.lock().expect("lock").push(e.clone()))
        .shutdown_timeout(Duration::ZERO)
        .job(job)
        .start()
        .await
        .expect("starts");
    // Everything happens half a second after whole seconds, so that no step of the test
    // coincides with a fire instant (whose order against the test's own timer is arbitrary).
    let half = Duration::from_millis(500);
    match case.pause {
        Some((at, len)) => {
            tokio::time::sleep(Duration::from_secs(at) + half).await;
            tokio::time::advance(Duration::from_secs(len)).await;
            tokio::time::sleep(Duration::from_secs(case.run_s.saturating_sub(at + len))).await;
        }
        None => tokio::time::sleep(Duration::from_secs(case.run_s) + half).await,
    }
    handle.shutdown().await;
    // Let the hook task deliver the last events.
    tokio::time::sleep(Duration::from_millis(1)).await;
    let raw = events.lock().expect("lock").clone();
    let runs = runs.lock().expect("lock").clone();
    Outcome {
        runs,
        // An aggregated misfire stands for every fire it covers.
        events: raw
            .iter()
            .flat_map(|e| match &e.kind {
                EventKind::Misfired { count, first, .. } => (0..*count)
                    .map(|k| {
                        (
                            secs(*first) + (u64::from(k) * case.every_s) as f64,
                            "misfired",
                        )
                    })
                    .collect::<Vec<_>>(),
                _ => vec![(secs(e.fire_time), e.kind.name())],
            })
            .collect(),
        raw,
    }
}

#[tokio::test(start_paused = true)]
async fn skip_drops_fires_while_the_slow_run_goes_on() {
    let out = run_case(Case {
        name: "skip",
        ..BASE
    })
    .await;
    // Runs 5→17, 20→32, 35→47 (cancelled at shutdown at 40).
    assert_eq!(out.runs, vec![(5.0, 5.0), (20.0, 20.0), (35.0, 35.0)]);
    assert_eq!(out.of("skipped"), vec![10.0, 15.0, 25.0, 30.0, 40.0]);
    assert_eq!(out.of("succeeded"), vec![5.0, 20.0]);
    assert_eq!(out.of("cancelled"), vec![35.0]);
    assert!(out.of("misfired").is_empty());
    let skipped = out
        .raw
        .iter()
        .find(|e| e.kind.name() == "skipped")
        .expect("a skip");
    assert!(
        matches!(&skipped.kind, EventKind::Skipped { reason, .. } if reason.contains("still going"))
    );
}

#[tokio::test(start_paused = true)]
async fn queue_runs_every_fire_late_until_grace_runs_out() {
    let out = run_case(Case {
        name: "queue",
        overlap: Overlap::Queue,
        ..BASE
    })
    .await;
    // Each run takes 12 s, fires come every 5 s: runs start back to back.
    assert_eq!(out.runs, vec![(5.0, 5.0), (10.0, 17.0), (15.0, 29.0)]);
    assert!(out.of("skipped").is_empty());
    // At shutdown the waiting fires are reported, not lost.
    let waiting_at_shutdown = out.of("misfired");
    assert_eq!(waiting_at_shutdown, vec![20.0, 25.0, 30.0, 35.0, 40.0]);
}

#[tokio::test(start_paused = true)]
async fn queue_with_a_short_grace_misfires_fires_that_wait_too_long() {
    let out = run_case(Case {
        name: "queue-grace",
        overlap: Overlap::Queue,
        grace_s: 8,
        ..BASE
    })
    .await;
    // 10 starts at 17 (7 s late, within 8 s); 15 and 20 cannot start before 23 and 28.
    assert_eq!(out.runs[..2], [(5.0, 5.0), (10.0, 17.0)]);
    let misfired = out.of("misfired");
    assert!(misfired.starts_with(&[15.0, 20.0]), "{misfired:?}");
    // 25 is due at 25 and starts when 10 ends at 29 (4 s late).
    assert_eq!(out.runs[2], (25.0, 29.0));
}

#[tokio::test(start_paused = true)]
async fn queue_with_coalesce_runs_only_the_latest_waiting_fire() {
    let out = run_case(Case {
        name: "coalesce",
        overlap: Overlap::Queue,
        coalesce: true,
        ..BASE
    })
    .await;
    assert_eq!(out.runs, vec![(5.0, 5.0), (15.0, 17.0), (25.0, 29.0)]);
    // 35 is covered by 40, which is still waiting at shutdown (reported as misfired).
    assert_eq!(out.of("coalesced"), vec![10.0, 20.0, 30.0, 35.0]);
    assert_eq!(out.of("misfired"), vec![40.0]);
    let c = out
        .raw
        .iter()
        .find(|e| e.kind.name() == "coalesced")
        .expect("coalesced");
    assert_eq!(
        c.kind,
        EventKind::Coalesced {
            covered_by: t0() + TimeDelta::seconds(15)
        }
    );
}

#[tokio::test(start_paused = true)]
async fn replace_cancels_the_running_instance_and_starts_the_new_fire() {
    let out = run_case(Case {
        name: "replace",
        overlap: Overlap::Replace,
        run_s: 22,
        ..BASE
    })
    .await;
    assert_eq!(
        out.runs,
        vec![(5.0, 5.0), (10.0, 10.0), (15.0, 15.0), (20.0, 20.0)]
    );
    let cancelled: Vec<_> = out
        .raw
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Cancelled { reason } => Some((
                secs(e.fire_time),
                *reason,
                e.duration.expect("a run's duration").as_secs(),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        cancelled,
        vec![
            (5.0, CancelReason::Replaced, 5),
            (10.0, CancelReason::Replaced, 5),
            (15.0, CancelReason::Replaced, 5),
            (20.0, CancelReason::Shutdown, 2),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn max_instances_allows_that_many_runs_at_once() {
    let out = run_case(Case {
        name: "two",
        max_instances: 2,
        run_s: 30,
        ..BASE
    })
    .await;
    // 5→17 and 10→22 overlap; 15 finds both slots taken; 20 takes the slot freed at 17.
    assert_eq!(
        out.runs,
        vec![(5.0, 5.0), (10.0, 10.0), (20.0, 20.0), (25.0, 25.0)]
    );
    assert_eq!(out.of("skipped"), vec![15.0, 30.0]);
}

#[tokio::test(start_paused = true)]
async fn a_pause_misfires_old_fires_and_catches_up_recent_ones() {
    // Every second, fast job, 3 s grace; the process freezes from 10 s to 20 s.
    let case = Case {
        name: "pause",
        every_s: 1,
        work_s: 0,
        grace_s: 3,
        pause: Some((10, 10)),
        run_s: 25,
        ..BASE
    };
    let out = run_case(case.clone()).await;
    let started: Vec<f64> = out.runs.iter().map(|r| r.0).collect();
    // The process freezes from 10.5 s to 20.5 s. Fires 11..=17 are 3 s old or more when it
    // wakes: misfired.
    assert_eq!(
        out.of("misfired"),
        vec![11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0]
    );
    let misfired: Vec<&Event> = out
        .raw
        .iter()
        .filter(|e| e.kind.name() == "misfired")
        .collect();
    assert_eq!(
        misfired.len(),
        1,
        "the fires missed during the pause are reported as one event: {misfired:?}"
    );
    // 18, 19 and 20 are within grace and due at once: 18 runs at 20.5, and with
    // `overlap = "skip"` the other two find its slot taken (a run holds its slot from its claim
    // until its end is handled, even when the job takes no time).
    assert!(out.runs.contains(&(18.0, 20.5)), "{:?}", out.runs);
    assert_eq!(out.of("skipped"), vec![19.0, 20.0]);
    assert_eq!(
        started,
        (1..=25)
            .filter(|s| !(11..=17).contains(s) && *s != 19 && *s != 20)
            .map(|s| s as f64)
            .collect::<Vec<_>>()
    );
    let m = out
        .raw
        .iter()
        .find(|e| e.kind.name() == "misfired")
        .expect("misfired");
    assert!(
        matches!(&m.kind, EventKind::Misfired { reason, count: 7, first } if reason.contains("paused") && secs(*first) == 11.0),
        "{m:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_pause_with_coalesce_runs_the_latest_due_fire_once() {
    let case = Case {
        name: "pause-coalesce",
        every_s: 1,
        work_s: 0,
        grace_s: 3,
        coalesce: true,
        pause: Some((10, 10)),
        run_s: 22,
        ..BASE
    };
    let out = run_case(case.clone()).await;
    assert_eq!(out.of("coalesced"), vec![18.0, 19.0]);
    assert!(out.runs.contains(&(20.0, 20.5)));
    assert!(!out.runs.iter().any(|r| r.0 > 10.0 && r.0 < 20.0));
}

const BURST: Case = Case {
    name: "burst",
    every_s: 2,
    work_s: 1,
    grace_s: 5,
    pause: Some((10, 6)),
    run_s: 22,
    ..BASE
};

#[tokio::test(start_paused = true)]
async fn a_burst_of_due_fires_with_skip_runs_the_first_and_skips_the_rest() {
    // Frozen from 10.5 s to 16.5 s: fires 12, 14 and 16 are due at once, all within grace.
    let out = run_case(BURST).await;
    assert!(out.runs.contains(&(12.0, 16.5)), "{:?}", out.runs);
    assert_eq!(out.of("skipped"), vec![14.0, 16.0]);
    assert!(out.runs.contains(&(18.0, 18.0)));
}

#[tokio::test(start_paused = true)]
async fn a_burst_of_due_fires_with_queue_runs_them_back_to_back_in_order() {
    let out = run_case(Case {
        name: "burst-queue",
        overlap: Overlap::Queue,
        ..BURST
    })
    .await;
    let after: Vec<_> = out.runs.iter().filter(|r| r.0 > 10.0).copied().collect();
    assert_eq!(
        after,
        vec![
            (12.0, 16.5),
            (14.0, 17.5),
            (16.0, 18.5),
            (18.0, 19.5),
            (20.0, 20.5),
            (22.0, 22.0)
        ]
    );
    assert!(out.of("skipped").is_empty() && out.of("misfired").is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_burst_of_due_fires_with_replace_ends_on_the_latest() {
    let out = run_case(Case {
        name: "burst-replace",
        overlap: Overlap::Replace,
        ..BURST
    })
    .await;
    // 12 starts, 14 replaces it, 16 replaces 14: all at the same instant.
    assert!(out.runs.contains(&(16.0, 16.5)), "{:?}", out.runs);
    let cancelled = out.of("cancelled");
    assert!(cancelled.starts_with(&[12.0, 14.0]), "{cancelled:?}");
}

const TABLE: [Case; 10] = [
    Case { name: "a", ..BASE },
    Case {
        name: "b",
        overlap: Overlap::Queue,
        ..BASE
    },
    Case {
        name: "c",
        overlap: Overlap::Queue,
        coalesce: true,
        ..BASE
    },
    Case {
        name: "d",
        overlap: Overlap::Replace,
        ..BASE
    },
    Case {
        name: "e",
        max_instances: 3,
        overlap: Overlap::Queue,
        grace_s: 9,
        ..BASE
    },
    Case {
        name: "f",
        every_s: 1,
        work_s: 0,
        grace_s: 3,
        pause: Some((10, 10)),
        run_s: 25,
        ..BASE
    },
    Case {
        name: "g",
        coalesce: true,
        ..BURST
    },
    Case {
        name: "h",
        overlap: Overlap::Queue,
        ..BURST
    },
    Case {
        name: "i",
        overlap: Overlap::Replace,
        ..BURST
    },
    Case {
        name: "j",
        overlap: Overlap::Replace,
        coalesce: true,
        max_instances: 2,
        ..BASE
    },
];

#[tokio::test(start_paused = true)]
async fn every_outcome_of_a_fire_is_reported_exactly_once() {
    for case in TABLE {
        let out = run_case(case.clone()).await;
        // Every fire 5, 10, ... up to the end has exactly one final fate.
        let finals = [
            "succeeded",
            "failed",
            "cancelled",
            "skipped",
            "misfired",
            "coalesced",
            "claimed_elsewhere",
        ];
        let mut fires: Vec<f64> = out
            .events
            .iter()
            .filter(|(_, k)| finals.contains(k))
            .map(|(t, _)| *t)
            .collect();
        let n = fires.len();
        fires.sort_by(|a, b| a.total_cmp(b));
        fires.dedup();
        assert_eq!(
            fires.len(),
            n,
            "case {}: a fire had two fates: {:?}",
            case.name,
            out.events
        );
        let expected: Vec<f64> = (1..)
            .map(|k| (k * case.every_s) as f64)
            .take_while(|t| *t <= case.run_s as f64)
            .collect();
        assert_eq!(fires, expected, "case {}: {:?}", case.name, out.events);
        // Every started run ends with one of succeeded / failed / cancelled.
        let started = out.of("started").len();
        let ended = out.of("succeeded").len() + out.of("failed").len() + out.of("cancelled").len();
        assert_eq!(started, ended, "case {}", case.name);
    }
}

async fn single_run(job: Job, run_s: u64) -> Vec<Event> {
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&events);
    let handle = paused_builder()
        .on_event(move |e| sink.lock().expect("lock").push(e.clone()))
        .job(job)
        .start()
        .await
        .expect("starts");
    tokio::time::sleep(Duration::from_secs(run_s) + Duration::from_millis(500)).await;
    handle.shutdown().await;
    tokio::time::sleep(Duration::from_millis(1)).await;
    let out = events.lock().expect("lock").clone();
    out
}

/// A builder with no `#[scheduled]` jobs whose clock follows tokio's paused clock from `t0`.
fn paused_builder() -> cronguard::Builder {
    cronguard::builder()
        .registered_jobs(false)
        .clock(Clock::anchored(t0()))
}

fn every(s: u64) -> Schedule {
    Schedule::every(Duration::from_secs(s)).expect("valid")
}

#[tokio::test(start_paused = true)]
async fn a_panicking_job_is_a_failed_run_and_keeps_its_schedule() {
    let job = Job::new("panics", every(1)).run(|ctx| async move {
        if ctx.fire_time().timestamp() % 2 == 0 {
            panic!("boom at {}", ctx.fire_time().timestamp());
        }
    });
    let events = single_run(job, 4).await;
    let failed: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Failed { error, .. } => Some(error.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(failed.len(), 2, "{events:?}");
    assert!(
        failed[0].contains("panicked") && failed[0].contains("boom"),
        "{failed:?}"
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| e.kind.name() == "succeeded")
            .count(),
        2
    );
}

#[tokio::test(start_paused = true)]
async fn an_err_is_a_failed_run_with_its_message() {
    let job = Job::new("errs", every(1)).run(|_| async { Err::<(), _>("the ledger is locked") });
    let events = single_run(job, 2).await;
    let failed: Vec<_> = events
        .iter()
        .filter(|e| e.kind.name() == "failed")
        .collect();
    assert_eq!(failed.len(), 2);
    assert!(
        matches!(&failed[0].kind, EventKind::Failed { error, .. } if error == "the ledger is locked")
    );
    assert!(failed[0].fencing_token.is_some());
    assert!(failed[0].run_key.starts_with("errs@2026-01-01T00:00:01"));
}

#[tokio::test(start_paused = true)]
async fn a_blocking_job_runs_on_the_blocking_pool() {
    let job = Job::new("blocking", every(1)).run_blocking(|ctx| {
        assert!(!ctx.is_cancelled());
        Ok::<(), String>(())
    });
    let events = single_run(job, 3).await;
    assert_eq!(
        events
            .iter()
            .filter(|e| e.kind.name() == "succeeded")
            .count(),
        3,
        "{events:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn fencing_tokens_increase_and_context_carries_the_fire() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = Arc::clone(&seen);
    let job = Job::new("tokens", every(1)).run(move |ctx| {
        let s = Arc::clone(&s);
        async move {
            s.lock().expect("lock").push((
                ctx.fire_time(),
                ctx.fencing_token(),
                ctx.run_key(),
                ctx.job_name().to_owned(),
            ));
        }
    });
    single_run(job, 3).await;
    let seen = seen.lock().expect("lock").clone();
    assert_eq!(seen.len(), 3);
    assert!(seen.windows(2).all(|w| w[0].1 < w[1].1));
    assert_eq!(seen[0].0, t0() + TimeDelta::seconds(1));
    assert_eq!(seen[0].2, "tokens@2026-01-01T00:00:01.000Z");
    assert_eq!(seen[0].3, "tokens");
}

#[tokio::test(start_paused = true)]
async fn shutdown_lets_a_run_finish_within_the_timeout() {
    let job = Job::new("finishes", every(10))
        .run(|_| async { tokio::time::sleep(Duration::from_secs(3)).await });
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&events);
    let handle = paused_builder()
        .on_event(move |e| sink.lock().expect("lock").push(e.kind.name()))
        .job(job)
        .start()
        .await
        .expect("starts");
    tokio::time::sleep(Duration::from_secs(11)).await;
    assert_eq!(handle.monitor().jobs()[0].running, 1);
    handle.shutdown_within(Duration::from_secs(5)).await;
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(*events.lock().expect("lock"), vec!["started", "succeeded"]);
}

#[tokio::test(start_paused = true)]
async fn status_lists_next_fire_last_run_and_counts() {
    let job = Job::new("status", every(5)).run(|_| async {});
    let handle = paused_builder().job(job).start().await.expect("starts");
    tokio::time::sleep(Duration::from_secs(11)).await;
    let status = handle.monitor().jobs();
    assert_eq!(status.len(), 1);
    let s = &status[0];
    assert_eq!(s.name, "status");
    assert_eq!(s.schedule, "every 5s");
    assert_eq!(s.description, "every 5 seconds");
    assert_eq!(s.next_fire, Some(t0() + TimeDelta::seconds(15)));
    assert_eq!(s.counts.succeeded, 2);
    let last = s.last_run.as_ref().expect("a run");
    assert_eq!(last.fire_time, t0() + TimeDelta::seconds(10));
    assert_eq!(
        last.outcome.as_ref().map(EventKind::name),
        Some("succeeded")
    );
    handle.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn start_reports_every_problem_at_once() {
    let err = cronguard::builder()
        .registered_jobs(false)
        .job(Job::new("dup", every(1)).run(|_| async {}))
        .job(Job::new("dup", every(2)).run(|_| async {}))
        .job(
            Job::new("zero", every(1))
                .max_instances(0)
                .run(|_| async {}),
        )
        .job(
            Job::new("filemany", every(1))
                .lock(cronguard::Lock::File)
                .max_instances(2)
                .run(|_| async {}),
        )
        .job(Job::new("nobody", every(1)))
        .job(Job::new("bad name", every(1)).run(|_| async {}))
        .start()
        .await
        .err()
        .expect("fails");
    let text = err.to_string();
    assert!(text.starts_with("cronguard cannot start:"), "{text}");
    for needle in [
        "2 jobs are named `dup`",
        "job `zero`: `max_instances` is 0",
        "job `filemany`: `max_instances = 2` needs `lock = \"local\"`",
        "job `nobody` has no body",
        "invalid job name `bad name`: it contains whitespace",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
}

#[tokio::test(start_paused = true)]
async fn an_unusable_lock_dir_is_a_clear_start_error() {
    let file = std::env::temp_dir().join(format!("cronguard-not-a-dir-{}", std::process::id()));
    std::fs::write(&file, b"x").expect("write");
    let err = cronguard::builder()
        .registered_jobs(false)
        .lock_dir(file.join("sub"))
        .job(
            Job::new("f", every(1))
                .lock(cronguard::Lock::File)
                .run(|_| async {}),
        )
        .start()
        .await
        .err()
        .expect("fails");
    let _ = std::fs::remove_file(&file);
    assert!(err.to_string().contains("CRONGUARD_LOCK_DIR"), "{err}");
}

#[tokio::test(start_paused = true)]
async fn the_file_guard_follows_the_same_model_as_the_local_one() {
    // A run that takes no time races with the file guard's claims (which run on real threads),
    // so only cases whose runs take time are compared.
    for case in TABLE
        .into_iter()
        .filter(|c| c.max_instances == 1 && c.work_s > 0)
    {
        let local = run_case(case.clone()).await;
        let file = run_case(Case {
            lock: Lock::File,
            ..case
        })
        .await;
        assert_eq!(local.runs, file.runs, "case {}", case.name);
        assert_eq!(local.events, file.events, "case {}", case.name);
    }
}

#[tokio::test(start_paused = true)]
async fn a_huge_grace_or_interval_neither_overflows_nor_panics() {
    let job = Job::new("forever-grace", every(1))
        .overlap(Overlap::Queue)
        .misfire_grace(Duration::MAX)
        .run(|_| async { tokio::time::sleep(Duration::from_millis(1500)).await });
    let never = Job::new("never", Schedule::every(Duration::MAX).expect("valid")).run(|_| async {});
    let events = single_run(job, 4).await;
    assert!(events.iter().any(|e| e.kind.name() == "succeeded"));
    let handle = paused_builder().job(never).start().await.expect("starts");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        handle.monitor().jobs()[0].next_fire,
        None,
        "an interval beyond the calendar never fires"
    );
    assert!(handle.monitor().health().await.healthy);
    handle.shutdown().await;
}
