//! The walk after downtime (docs/guide/downtime.md): fires due while no process ran the job.

use std::time::Duration;

use super::tests::{acquired, now, said, spec, t};
use super::*;

/// A job every 10 s with a grace of 5 s, started at second 100, whose store's fate point is the
/// fire of second 50.
fn started_after_downtime(lock: Lock, coalesce: bool, grace: u64) -> (JobModel, Vec<Action>) {
    let mut spec = spec(lock, Overlap::Skip);
    let mut settings = (*spec).clone();
    settings.coalesce = coalesce;
    settings.misfire_grace = Duration::from_secs(grace);
    spec = Spec::new(spec.name.clone(), settings);
    let mut m = JobModel::new(spec);
    m.schedule_from(t(100));
    (m, Vec::new())
}

fn missed(first: i64, last: i64, count: u32) -> MissedFires {
    MissedFires {
        first: t(first),
        last: t(last),
        count,
        walked_all: true,
        cause: MissedCause::NoProcess,
    }
}

#[test]
fn fires_within_their_grace_are_claimed_and_older_ones_reported_once() {
    let (mut m, mut out) = started_after_downtime(Lock::Redis, false, 5);
    assert!(m.await_fate_point(t(100)));
    m.on_fate_point(Some(t(50)), now(102), &mut out);
    // Fire 100 is claimed only once the missed ones are recorded: its claim would move the
    // fate point past them, and another process would take them for reported.
    assert_eq!(said(&mut out), ["report missed 60..90 (4)"]);
    assert!(m.busy(), "the report is awaited, as a drop report is");
    m.on_missed_reported(missed(60, 90, 4), Ok(Some(t(50))), now(102), &mut out);
    let mut others = Vec::new();
    let events: Vec<Occurrence> = out
        .drain(..)
        .filter_map(|a| match a {
            Action::Emit(e) => Some(e),
            other => {
                others.push(other);
                None
            }
        })
        .collect();
    assert_eq!(said(&mut others), ["claim 100"]);
    let [event] = &events[..] else {
        panic!("one aggregated report, got {events:?}");
    };
    assert!(event.first_report, "reported at warn level");
    let EventKind::Misfired {
        reason,
        count,
        first,
    } = &event.kind
    else {
        panic!("a misfire, got {event:?}");
    };
    assert_eq!((*count, *first, event.fire_time), (4, t(60), t(90)));
    assert!(
        reason.starts_with("4 fires from ") && reason.contains("no process ran the job"),
        "{reason}"
    );
    m.on_claimed(acquired(7), now(102), &mut out);
    assert_eq!(said(&mut out), ["started 100", "start 100 token 7"]);
}

#[test]
fn fires_another_process_decided_are_not_reported_again() {
    let (mut m, mut out) = started_after_downtime(Lock::Redis, false, 5);
    m.await_fate_point(t(100));
    m.on_fate_point(Some(t(50)), now(102), &mut out);
    said(&mut out);
    // Another process starting at the same moment reported up to 70 (its clock was behind).
    m.on_missed_reported(missed(60, 90, 4), Ok(Some(t(70))), now(102), &mut out);
    let said_now = said(&mut out);
    assert_eq!(said_now, ["misfired 90", "claim 100"]);
    m.on_fate_point(None, now(103), &mut out);
    assert!(out.is_empty(), "the fate point is read once");

    let (mut m, mut out) = started_after_downtime(Lock::Redis, false, 5);
    m.await_fate_point(t(100));
    m.on_fate_point(Some(t(50)), now(102), &mut out);
    said(&mut out);
    m.on_missed_reported(missed(60, 90, 4), Ok(Some(t(90))), now(102), &mut out);
    assert_eq!(
        said(&mut out),
        ["misfired 90 (reported elsewhere)", "claim 100"]
    );
}

#[test]
fn only_the_fires_after_the_point_found_are_counted() {
    let (mut m, mut out) = started_after_downtime(Lock::Redis, false, 5);
    m.await_fate_point(t(100));
    m.on_fate_point(Some(t(50)), now(102), &mut out);
    out.clear();
    m.on_missed_reported(missed(60, 90, 4), Ok(Some(t(70))), now(102), &mut out);
    let Some(Action::Emit(e)) = out.first() else {
        panic!("an event, got {out:?}");
    };
    let EventKind::Misfired { count, first, .. } = &e.kind else {
        panic!("a misfire, got {e:?}");
    };
    assert_eq!((*count, *first, e.first_report), (2, t(80), true));
}

#[test]
fn a_guard_that_cannot_record_them_still_gets_them_reported() {
    let (mut m, mut out) = started_after_downtime(Lock::Redis, false, 5);
    m.await_fate_point(t(100));
    m.on_fate_point(Some(t(50)), now(102), &mut out);
    said(&mut out);
    m.on_missed_reported(
        missed(60, 90, 4),
        Err("no answer".to_owned()),
        now(104),
        &mut out,
    );
    let Some(Action::Emit(e)) = out.first() else {
        panic!("an event, got {out:?}");
    };
    assert!(e.first_report);
    let EventKind::Misfired { reason, count, .. } = &e.kind else {
        panic!("a misfire, got {e:?}");
    };
    assert_eq!(*count, 4);
    assert!(reason.contains("could not record them"), "{reason}");
}

#[test]
fn with_coalesce_only_the_latest_fire_within_the_grace_runs() {
    let (mut m, mut out) = started_after_downtime(Lock::Redis, true, 25);
    m.await_fate_point(t(100));
    m.on_fate_point(Some(t(50)), now(102), &mut out);
    assert_eq!(
        said(&mut out),
        ["report missed 60..70 (2)", "coalesced 80", "coalesced 90"]
    );
    m.on_missed_reported(missed(60, 70, 2), Ok(Some(t(50))), now(102), &mut out);
    assert_eq!(said(&mut out), ["misfired 70", "claim 100"]);
}

#[test]
fn fires_taken_since_the_start_stay_after_the_caught_up_ones() {
    let (mut m, mut out) = started_after_downtime(Lock::Redis, false, 25);
    m.await_fate_point(t(100));
    // The store answered late: the timer took fire 110 first; it waits for the walk.
    m.on_timer(now(110), &mut out);
    assert!(said(&mut out).is_empty(), "no claim before the walk");
    m.on_fate_point(Some(t(80)), now(111), &mut out);
    assert_eq!(said(&mut out), ["claim 90"]);
    m.on_claimed(acquired(3), now(111), &mut out);
    // Fire 100 is claimed while 90 runs: the guard records its skip once for every process.
    assert_eq!(
        said(&mut out),
        ["started 90", "start 90 token 3", "claim 100"]
    );
    m.on_claimed(Answer::Busy { first_report: true }, now(111), &mut out);
    assert_eq!(said(&mut out), ["skipped 100", "claim 110"]);
}

/// While the walk is not done, a drop of a later fire is held back: recorded, it would move the
/// fate point past the fires being walked. The guard is asked once the walk is done, so that a
/// fire another process ran is not reported at warn level.
#[test]
fn a_drop_during_the_walk_is_asked_about_after_it() {
    let (mut m, mut out) = started_after_downtime(Lock::Redis, false, 5);
    m.await_fate_point(t(100));
    m.on_timer(now(110), &mut out);
    m.on_wake(now(116), &mut out);
    assert_eq!(said(&mut out), Vec::<String>::new());
    assert!(m.busy(), "the held report keeps the job busy");
    m.on_fate_point(Some(t(110)), now(117), &mut out);
    assert_eq!(said(&mut out), ["ask report 110 misfired"]);
}

/// A drop held back for the walk that the walk's own record of missed fires covers is this
/// process's to report: the record decided it.
#[test]
fn a_drop_the_walk_recorded_is_reported_by_this_process() {
    let (mut m, mut out) = started_after_downtime(Lock::Redis, false, 5);
    m.await_fate_point(t(100));
    m.on_timer(now(110), &mut out);
    m.on_wake(now(116), &mut out);
    said(&mut out);
    m.on_fate_point(Some(t(50)), now(117), &mut out);
    let asked = said(&mut out);
    assert!(
        asked.iter().any(|a| a.starts_with("report missed")),
        "{asked:?}"
    );
    let missed = MissedFires {
        first: t(60),
        last: t(110),
        count: 6,
        walked_all: true,
        cause: MissedCause::NoProcess,
    };
    m.on_missed_reported(missed, Ok(Some(t(50))), now(118), &mut out);
    let told = said(&mut out);
    assert!(told.contains(&"misfired 110".to_owned()), "{told:?}");
    assert!(
        !told.iter().any(|a| a.starts_with("ask report")),
        "{told:?}"
    );
}

#[test]
fn a_job_the_store_knows_nothing_of_has_nothing_to_catch_up() {
    let (mut m, mut out) = started_after_downtime(Lock::Redis, false, 5);
    m.await_fate_point(t(100));
    m.on_fate_point(None, now(102), &mut out);
    assert!(
        out.is_empty(),
        "no false alarm for a new job: {:?}",
        said(&mut out)
    );
    assert_eq!(m.due_by(now(102).wall), None);
}

#[test]
fn health_counts_the_missed_fires_before_the_start() {
    let (mut m, mut out) = started_after_downtime(Lock::Redis, false, 5);
    m.await_fate_point(t(100));
    assert_eq!(m.due_by(now(102).wall), None, "before the point is known");
    m.on_fate_point(Some(t(50)), now(102), &mut out);
    assert_eq!(
        m.due_by(now(102).wall),
        Some(t(90)),
        "overdue until a fire runs"
    );
}

#[test]
fn a_local_job_catches_up_and_reports_on_its_own_word() {
    let (mut m, mut out) = started_after_downtime(Lock::Local, false, 5);
    assert!(m.await_fate_point(t(100)), "with a state dir");
    m.on_fate_point(Some(t(50)), now(102), &mut out);
    assert_eq!(said(&mut out), ["report missed 60..90 (4)"]);
    m.on_missed_reported(missed(60, 90, 4), Ok(Some(t(50))), now(102), &mut out);
    assert_eq!(
        said(&mut out),
        ["misfired 90", "started 100", "start 100 token 1"]
    );
}

#[test]
fn a_disabled_job_and_a_stopping_one_read_no_fate_point() {
    let (m, _) = started_after_downtime(Lock::Redis, false, 5);
    let mut settings = (**m.spec()).clone();
    settings.enabled = false;
    let mut m = JobModel::new(Spec::new(m.spec().name.clone(), settings));
    assert!(
        !m.await_fate_point(t(100)),
        "a job this process only watches"
    );
    let (mut m, mut out) = started_after_downtime(Lock::Redis, false, 5);
    m.await_fate_point(t(100));
    m.stop(now(101), &mut out);
    said(&mut out);
    m.on_fate_point(Some(t(50)), now(102), &mut out);
    assert!(out.is_empty(), "the processes that go on walk the gap");
    // Stopping while the missed fires are being recorded: the ones caught up are not claimed.
    let (mut m, mut out) = started_after_downtime(Lock::Redis, false, 5);
    m.await_fate_point(t(100));
    m.on_fate_point(Some(t(50)), now(102), &mut out);
    said(&mut out);
    m.stop(now(102), &mut out);
    said(&mut out);
    m.on_missed_reported(missed(60, 90, 4), Ok(Some(t(50))), now(103), &mut out);
    assert_eq!(said(&mut out), ["misfired 90"]);
    assert!(!m.busy());
}

#[test]
fn a_point_years_old_is_walked_with_a_bound() {
    let (mut m, mut out) = started_after_downtime(Lock::Redis, false, 5);
    m.await_fate_point(t(100));
    let long_ago = t(100) - chrono::TimeDelta::days(3_650);
    m.on_fate_point(Some(long_ago), now(102), &mut out);
    let said_now = said(&mut out);
    assert_eq!(said_now.len(), 1, "{said_now:?}");
    assert!(
        said_now[0].starts_with("report missed ") && said_now[0].ends_with("(100000)"),
        "{said_now:?}"
    );
}
