//! The model's rules as plain unit tests: inputs in, actions out, no runtime.

use smol_str::SmolStr;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

use super::*;

pub(super) fn t(s: i64) -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp(1_767_225_600 + s, 0).expect("in range")
}

pub(super) fn now(s: i64) -> Now {
    now_ms(s * 1_000)
}

fn now_ms(ms: i64) -> Now {
    Now {
        wall: t(0) + TimeDelta::milliseconds(ms),
        mono: Duration::from_millis(ms as u64),
        random: 7,
    }
}

pub(super) fn spec(lock: Lock, overlap: Overlap) -> Spec {
    Spec::new(
        SmolStr::from("job"),
        Settings {
            schedule: Schedule::every(Duration::from_secs(10)).expect("valid"),
            misfire_grace: Duration::from_secs(5),
            max_instances: 1,
            lock,
            overlap,
            coalesce: false,
            enabled: true,
            limits: Limits::default(),
            standby: Duration::ZERO,
            claim_ahead: Duration::ZERO,
            overrides: None,
        },
    )
}

/// A model that follows its schedule from second 0.
fn model(lock: Lock, overlap: Overlap) -> JobModel {
    let mut m = JobModel::new(spec(lock, overlap));
    m.schedule_from(t(0));
    m
}

/// What the actions say, in a form a test can compare.
pub(super) fn said(out: &mut Vec<Action>) -> Vec<String> {
    out.drain(..)
        .map(|a| match a {
            Action::Claim(f) => format!("claim {}", (f.t - t(0)).num_seconds()),
            Action::Abandon(f) => format!("abandon {}", (f.t - t(0)).num_seconds()),
            Action::Start { fire, token, .. } => {
                format!("start {} token {token}", (fire - t(0)).num_seconds())
            }
            Action::Hold => "hold".to_owned(),
            Action::Cancel(run) => format!("cancel run {run}"),
            Action::Retry { run, attempt } => format!("retry run {run} attempt {attempt}"),
            Action::Finish(run) => format!("finish run {run}"),
            Action::AskReport { fire, kind } => {
                format!("ask report {} {}", (fire - t(0)).num_seconds(), kind.name())
            }
            Action::ReportMissed(m) => format!(
                "report missed {}..{} ({})",
                (m.first - t(0)).num_seconds(),
                (m.last - t(0)).num_seconds(),
                m.count
            ),
            Action::Emit(e) => format!(
                "{} {}{}",
                e.kind.name(),
                (e.fire_time - t(0)).num_seconds(),
                if e.first_report {
                    ""
                } else {
                    " (reported elsewhere)"
                }
            ),
        })
        .collect()
}

pub(super) fn acquired(token: u64) -> Answer {
    Answer::Acquired {
        token,
        deadline: Some(Duration::from_secs(3_600)),
    }
}

#[test]
fn an_in_process_job_starts_each_fire_once_with_rising_tokens() {
    let mut m = model(Lock::Local, Overlap::Skip);
    let mut out = Vec::new();
    m.on_timer(now(10), &mut out);
    assert_eq!(said(&mut out), ["started 10", "start 10 token 1"]);
    m.on_timer(now(20), &mut out);
    assert_eq!(said(&mut out), ["skipped 20"], "max_instances = 1 is busy");
    m.on_run_ended(0, RunEnd::Ok, Duration::ZERO, now(21), &mut out);
    assert_eq!(said(&mut out), ["succeeded 10"]);
    m.on_timer(now(30), &mut out);
    assert_eq!(said(&mut out), ["started 30", "start 30 token 2"]);
}

#[test]
fn a_shared_guard_is_asked_and_its_token_used() {
    let mut m = model(Lock::Redis, Overlap::Skip);
    let mut out = Vec::new();
    m.on_timer(now(10), &mut out);
    assert_eq!(said(&mut out), ["claim 10"]);
    m.on_claimed(acquired(500), now(10), &mut out);
    assert_eq!(said(&mut out), ["started 10", "start 10 token 500"]);
}

#[test]
fn a_claim_answered_after_its_lease_ran_out_does_not_start() {
    let mut m = model(Lock::Redis, Overlap::Skip);
    let mut out = Vec::new();
    m.on_timer(now(10), &mut out);
    said(&mut out);
    let late = Answer::Acquired {
        token: 9,
        deadline: Some(Duration::from_secs(12)),
    };
    m.on_claimed(late, now(13), &mut out);
    assert_eq!(said(&mut out), ["abandon 10", "misfired 10"]);
    assert_eq!(m.running(), 0);
}

#[test]
fn no_run_starts_beyond_max_instances_whatever_the_guard_says() {
    let mut m = model(Lock::File, Overlap::Skip);
    let mut out = Vec::new();
    m.on_timer(now(10), &mut out);
    m.on_claimed(acquired(1), now(10), &mut out);
    said(&mut out);
    // The run of 10 goes on; the guard (its lock file replaced) grants 20 as well.
    m.on_timer(now(20), &mut out);
    assert_eq!(said(&mut out), ["claim 20"]);
    m.on_claimed(acquired(2), now(20), &mut out);
    assert_eq!(said(&mut out), ["abandon 20", "skipped 20"]);
    assert_eq!(m.running(), 1);
}

#[test]
fn a_fencing_token_that_does_not_rise_is_refused() {
    let mut m = model(Lock::Redis, Overlap::Skip);
    let mut out = Vec::new();
    m.on_timer(now(10), &mut out);
    m.on_claimed(acquired(100), now(10), &mut out);
    m.on_run_ended(0, RunEnd::Ok, Duration::ZERO, now(11), &mut out);
    said(&mut out);
    m.on_timer(now(20), &mut out);
    m.on_claimed(acquired(100), now(20), &mut out);
    assert_eq!(said(&mut out), ["claim 20", "abandon 20", "misfired 20"]);
}

#[test]
fn a_failed_claim_is_retried_and_given_up_when_its_grace_ends() {
    let mut m = model(Lock::Redis, Overlap::Skip);
    let mut out = Vec::new();
    m.on_timer(now(10), &mut out);
    m.on_claimed(Answer::Failed("timeout".into()), now(12), &mut out);
    assert_eq!(said(&mut out), ["claim 10"]);
    let retry = m.next_wake().expect("a retry is armed");
    assert!(retry > now(12).wall && retry < now(14).wall, "{retry}");
    m.on_wake(now(13), &mut out);
    assert_eq!(said(&mut out), ["claim 10"]);
    m.on_claimed(Answer::Failed("timeout".into()), now(15), &mut out);
    // The claim may have taken effect unseen: it is given up, and the guard says who reports
    // it — this process when its claim took the fire or none did, nobody at warn level when
    // another's did (the fire ran there).
    assert_eq!(said(&mut out), ["abandon 10", "ask report 10 misfired"]);
    m.on_reported(
        t(10),
        EventKind::misfired("x".into(), t(10)),
        crate::model::Reported::ClaimedElsewhere,
        now(15),
        &mut out,
    );
    assert_eq!(said(&mut out), ["claimed_elsewhere 10"]);
}

/// A claim whose reply was lost may have recorded a drop for this process to report (the job
/// was paused then); a retry answered busy under `queue` says nothing of it: a stop before the
/// fire starts asks the guard who reports it, rather than leaving it to a walk that the recorded
/// drop keeps from walking it.
#[test]
fn a_waiting_fire_whose_first_claim_got_no_answer_is_asked_about_at_a_stop() {
    let mut m = model(Lock::Redis, Overlap::Queue);
    let mut out = Vec::new();
    m.on_timer(now(10), &mut out);
    m.on_claimed(Answer::Failed("timeout".into()), now(12), &mut out);
    m.on_wake(now(13), &mut out);
    assert_eq!(said(&mut out), ["claim 10", "claim 10"]);
    m.on_claimed(
        Answer::Busy {
            first_report: false,
        },
        now(13),
        &mut out,
    );
    said(&mut out);
    m.stop(now(14), &mut out);
    let said = said(&mut out);
    assert!(
        said.iter().any(|s| s == "ask report 10 misfired"),
        "the guard says who reports the fire: {said:?}"
    );
}

/// The answer to a claim of fire 10 asked again at second 13, after the first claim got no
/// answer (it may have taken effect): what the model then says.
fn retried_after_a_lost_reply(answer: Answer) -> Vec<String> {
    let mut m = model(Lock::Redis, Overlap::Skip);
    let mut out = Vec::new();
    m.on_timer(now(10), &mut out);
    m.on_claimed(Answer::Failed("timeout".into()), now(12), &mut out);
    m.on_wake(now(13), &mut out);
    said(&mut out);
    m.on_claimed(answer, now(13), &mut out);
    said(&mut out)
}

#[test]
fn a_retried_claim_recognised_as_lapsed_is_a_warned_misfire() {
    assert_eq!(retried_after_a_lost_reply(Answer::Lapsed), ["misfired 10"]);
}

#[test]
fn a_retried_claim_of_a_fire_the_guard_knows_another_took_stays_quiet() {
    assert_eq!(
        retried_after_a_lost_reply(Answer::ClaimedByAnother),
        ["claimed_elsewhere 10"],
        "it ran elsewhere"
    );
}

#[test]
fn a_retried_claim_of_a_fire_the_guard_no_longer_knows_is_a_warned_misfire() {
    assert_eq!(
        retried_after_a_lost_reply(Answer::AlreadyRan),
        ["misfired 10"],
        "it ran elsewhere or not at all"
    );
}

#[test]
fn a_fire_passed_over_by_a_later_claim_is_reported() {
    let mut m = model(Lock::Redis, Overlap::Skip);
    let mut out = Vec::new();
    m.on_timer(now(10), &mut out);
    m.on_claimed(Answer::Superseded, now(10), &mut out);
    assert_eq!(said(&mut out), ["claim 10", "ask report 10 skipped"]);
    m.on_reported(
        t(10),
        EventKind::Skipped {
            reason: "x".into(),
            paused: false,
        },
        crate::model::Reported::ByAnother,
        now(11),
        &mut out,
    );
    assert_eq!(said(&mut out), ["skipped 10 (reported elsewhere)"]);
    assert!(!m.busy());
}

#[test]
fn a_host_clock_ahead_is_reported_here_without_taking_the_clusters_report() {
    let mut m = model(Lock::Redis, Overlap::Skip);
    let mut out = Vec::new();
    m.on_timer(now(10), &mut out);
    m.on_claimed(
        Answer::TooEarly(Duration::from_secs(3_600)),
        now(10),
        &mut out,
    );
    assert_eq!(said(&mut out), ["claim 10"]);
    m.on_wake(now(16), &mut out);
    assert_eq!(
        said(&mut out),
        ["misfired 10"],
        "emitted at once, first report"
    );
}

#[test]
fn a_busy_fire_waits_with_queue_and_is_skipped_with_skip() {
    let mut m = model(Lock::Redis, Overlap::Queue);
    let mut out = Vec::new();
    m.on_timer(now(10), &mut out);
    m.on_claimed(Answer::Busy { first_report: true }, now(10), &mut out);
    assert_eq!(said(&mut out), ["claim 10"]);
    assert!(m.next_wake().is_some());
    let mut m = model(Lock::Redis, Overlap::Skip);
    m.on_timer(now(10), &mut out);
    m.on_claimed(
        Answer::Busy {
            first_report: false,
        },
        now(10),
        &mut out,
    );
    assert_eq!(
        said(&mut out),
        ["claim 10", "skipped 10 (reported elsewhere)"]
    );
}

#[test]
fn a_fire_dropped_by_another_is_dropped_here_whatever_the_overlap() {
    for overlap in [Overlap::Skip, Overlap::Queue, Overlap::Replace] {
        let mut m = model(Lock::Redis, overlap);
        let mut out = Vec::new();
        m.on_timer(now(10), &mut out);
        m.on_claimed(Answer::DroppedByAnother, now(10), &mut out);
        assert_eq!(
            said(&mut out),
            ["claim 10", "skipped 10 (reported elsewhere)"],
            "{overlap:?}: not retried, not reported at warn level"
        );
        m.on_wake(now_ms(10_500), &mut out);
        assert!(said(&mut out).is_empty(), "{overlap:?}: asked again");
    }
}

#[test]
fn a_long_pause_is_one_aggregated_misfire() {
    // Three days later: every fire but the last (still within its grace) was missed.
    let resumed = 3 * 86_400 + 2;
    let mut m = model(Lock::Local, Overlap::Skip);
    let mut out = Vec::new();
    m.on_timer(now(resumed), &mut out);
    let missed: Vec<_> = out
        .iter()
        .filter_map(|a| match a {
            Action::Emit(Occurrence {
                kind: EventKind::Misfired { count, first, .. },
                fire_time,
                ..
            }) => Some((*count, *first, *fire_time)),
            _ => None,
        })
        .collect();
    assert_eq!(missed, [(25_919, t(10), t(resumed - 12))]);
    assert_eq!(said(&mut out).len(), 3, "one misfire, the due fire's start");
    // With a shared guard the range is recorded through the guard first, and no later fire is
    // claimed until it is: a claim would move the fate point past the range.
    let mut m = model(Lock::Redis, Overlap::Skip);
    m.on_timer(now(resumed), &mut out);
    assert_eq!(
        said(&mut out),
        [format!("report missed 10..{} (25919)", resumed - 12)]
    );
    let missed = MissedFires {
        first: t(10),
        last: t(resumed - 12),
        count: 25_919,
        walked_all: true,
        cause: MissedCause::TimerWoke,
    };
    m.on_missed_reported(missed, Ok(Some(t(0))), now(resumed), &mut out);
    assert_eq!(
        said(&mut out),
        [
            format!("misfired {}", resumed - 12),
            format!("claim {}", resumed - 2)
        ]
    );
}

/// A stop records no missed fires: recorded, they would move the job's fate point past the fires
/// it leaves open, and the next start's walk would not see those. It tells them on its own word.
#[test]
fn a_stop_tells_the_fires_it_slept_through_on_its_own_word() {
    let mut m = model(Lock::Redis, Overlap::Skip);
    let mut out = Vec::new();
    m.on_timer(now(10), &mut out);
    m.on_claimed(acquired(1), now(10), &mut out);
    m.on_run_ended(0, RunEnd::Ok, Duration::ZERO, now(11), &mut out);
    said(&mut out);
    // Frozen from 11 to 72, and asked to stop as it wakes.
    m.stop(now(72), &mut out);
    let told: Vec<_> = out
        .iter()
        .filter_map(|a| match a {
            Action::Emit(Occurrence {
                kind: EventKind::Misfired { count, reason, .. },
                first_report: true,
                ..
            }) => Some((*count, reason.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!(told[0].0, 5);
    assert!(told[0].1.contains("own word"), "{}", told[0].1);
    let said = said(&mut out);
    assert!(
        !said.iter().any(|a| a.starts_with("report missed")),
        "{said:?}"
    );
}

/// While missed fires are being recorded, a drop of an earlier fire is asked at once: it cannot
/// move the fate point past them, and held back it could be left to a stop that the record
/// moves the point past.
#[test]
fn a_drop_before_the_missed_fires_in_flight_is_asked_at_once() {
    let mut m = model(Lock::Redis, Overlap::Queue);
    let mut out = Vec::new();
    m.on_timer(now(10), &mut out);
    m.on_claimed(acquired(1), now(10), &mut out);
    said(&mut out);
    // Fire 20 waits behind the run; the process is frozen until 72.
    m.on_timer(now(20), &mut out);
    said(&mut out);
    m.on_timer(now(72), &mut out);
    let asked = said(&mut out);
    assert!(
        asked.contains(&"report missed 30..60 (4)".to_owned()),
        "{asked:?}"
    );
    m.on_wake(now(72), &mut out);
    m.on_run_ended(0, RunEnd::Ok, Duration::ZERO, now(72), &mut out);
    let asked: Vec<String> = said(&mut out);
    assert!(
        asked.iter().any(|a| a.starts_with("ask report 20")),
        "fire 20 is asked before the range is answered: {asked:?}"
    );
}

/// A process that slept through fires others ran reports none of them on its own: the store's
/// fate point says they may have had a fate, and each is asked through the guard (which knows
/// who claimed it, or that it was passed over); those after the point are its to report, at
/// warn level, once.
#[test]
fn a_pause_reports_only_the_fires_after_the_stores_fate_point() {
    let mut m = model(Lock::Redis, Overlap::Skip);
    let mut out = Vec::new();
    m.on_timer(now(10), &mut out);
    said(&mut out);
    m.on_claimed(acquired(1), now(10), &mut out);
    m.on_run_ended(0, RunEnd::Ok, Duration::ZERO, now(11), &mut out);
    said(&mut out);
    // Frozen from 11 to 72: the fires from 20 to 60 passed their grace.
    m.on_timer(now(72), &mut out);
    assert_eq!(said(&mut out), ["report missed 20..60 (5)"]);
    let missed = |count| MissedFires {
        first: t(20),
        last: t(60),
        count,
        walked_all: true,
        cause: MissedCause::TimerWoke,
    };
    // Others ran every one: each is asked through the guard, nothing is told at warn level on
    // this process's word, and fire 70 is claimed.
    m.on_missed_reported(missed(5), Ok(Some(t(70))), now(72), &mut out);
    assert_eq!(
        said(&mut out),
        [
            "ask report 20 misfired",
            "ask report 30 misfired",
            "ask report 40 misfired",
            "ask report 50 misfired",
            "ask report 60 misfired",
            "claim 70"
        ]
    );
    // Others ran up to 40: 50 and 60 are this process's to report, as one range.
    let mut m = model(Lock::Redis, Overlap::Skip);
    m.on_timer(now(10), &mut out);
    m.on_claimed(acquired(1), now(10), &mut out);
    m.on_run_ended(0, RunEnd::Ok, Duration::ZERO, now(11), &mut out);
    m.on_timer(now(72), &mut out);
    said(&mut out);
    m.on_missed_reported(missed(5), Ok(Some(t(40))), now(72), &mut out);
    let told: Vec<_> = out
        .iter()
        .filter_map(|a| match a {
            Action::Emit(Occurrence {
                kind:
                    EventKind::Misfired {
                        count,
                        first,
                        reason,
                    },
                fire_time,
                first_report: true,
                ..
            }) => Some((*count, *first, *fire_time, reason.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!((told[0].0, told[0].1, told[0].2), (2, t(50), t(60)));
    assert!(told[0].3.contains("the timer woke"), "{}", told[0].3);
    let asked: Vec<String> = said(&mut out)
        .into_iter()
        .filter(|a| a.starts_with("ask report"))
        .collect();
    assert_eq!(
        asked,
        [
            "ask report 20 misfired",
            "ask report 30 misfired",
            "ask report 40 misfired"
        ]
    );
}

#[test]
fn replace_cancels_the_oldest_run_once() {
    let mut m = model(Lock::Local, Overlap::Replace);
    let mut out = Vec::new();
    m.on_timer(now(10), &mut out);
    said(&mut out);
    m.on_timer(now(20), &mut out);
    assert_eq!(said(&mut out), ["cancel run 0"]);
    m.on_wake(now(21), &mut out);
    assert_eq!(said(&mut out), Vec::<String>::new(), "asked once");
    m.on_run_ended(0, RunEnd::Cancelled, Duration::ZERO, now(22), &mut out);
    assert_eq!(
        said(&mut out),
        ["cancelled 10", "started 20", "start 20 token 2"]
    );
}

#[test]
fn a_run_stopped_at_its_lease_deadline_is_a_lost_lease() {
    let mut m = model(Lock::Redis, Overlap::Skip);
    let mut out = Vec::new();
    m.on_timer(now(10), &mut out);
    m.on_claimed(acquired(1), now(10), &mut out);
    said(&mut out);
    m.on_run_ended(0, RunEnd::LeaseExpired, Duration::ZERO, now(20), &mut out);
    assert_eq!(said(&mut out), ["lease_lost 10", "cancelled 10"]);
}

/// A claim in flight when the scheduler stops runs if it is granted: the other processes take
/// the fire as claimed, so giving it back would lose it; the shutdown waits for the run. When
/// the job is removed, it is given back and reported.
#[test]
fn a_claim_granted_while_stopping_runs_and_one_granted_after_a_removal_is_given_back() {
    let mut m = model(Lock::Redis, Overlap::Skip);
    let mut out = Vec::new();
    m.on_timer(now(10), &mut out);
    said(&mut out);
    m.stop(now(11), &mut out);
    assert_eq!(said(&mut out), Vec::<String>::new());
    assert!(m.busy(), "the claim is still in flight");
    m.on_claimed(acquired(1), now(11), &mut out);
    assert_eq!(said(&mut out), ["started 10", "start 10 token 1"]);
    assert!(m.busy(), "the shutdown waits for the run");

    let mut m = model(Lock::Redis, Overlap::Skip);
    m.on_timer(now(10), &mut out);
    said(&mut out);
    m.remove(now(11), &mut out);
    m.on_claimed(acquired(1), now(11), &mut out);
    assert_eq!(said(&mut out), ["abandon 10", "misfired 10"]);
    assert!(!m.busy());
    // A claim answered after the grace while running is given up and reported through the guard.
}

#[test]
fn a_waiting_fire_past_its_grace_is_never_claimed() {
    let mut m = model(Lock::Redis, Overlap::Queue);
    let mut out = Vec::new();
    m.on_timer(now(10), &mut out);
    m.on_claimed(acquired(1), now(10), &mut out);
    m.on_timer(now(20), &mut out);
    said(&mut out);
    // The run of 10 ends long after fire 20's grace (the process was frozen meanwhile).
    m.on_run_ended(0, RunEnd::Ok, Duration::ZERO, now(40), &mut out);
    assert_eq!(said(&mut out), ["succeeded 10", "ask report 20 misfired"]);
}

#[test]
fn every_queued_fire_that_waits_past_its_grace_is_reported() {
    let mut m = model(Lock::Local, Overlap::Queue);
    let mut out = Vec::new();
    m.on_timer(now(10), &mut out);
    assert_eq!(said(&mut out), ["started 10", "start 10 token 1"]);
    m.on_timer(now(20), &mut out);
    assert_eq!(said(&mut out), Vec::<String>::new(), "fire 20 waits");
    m.on_wake(now(25), &mut out);
    assert_eq!(said(&mut out), ["misfired 20"]);
    m.on_timer(now(30), &mut out);
    assert_eq!(said(&mut out), Vec::<String>::new(), "fire 30 waits");
    m.on_wake(now(35), &mut out);
    assert_eq!(said(&mut out), ["misfired 30"]);
}

fn pause() -> Pause {
    Pause::new("ops", t(5))
}

fn manual(id: u64, at: i64) -> ManualRun {
    ManualRun {
        id,
        requested_at: t(at),
    }
}

#[test]
fn a_paused_in_process_job_skips_its_fires_as_paused_until_resumed() {
    let mut m = model(Lock::Local, Overlap::Skip);
    let mut out = Vec::new();
    m.set_paused(Some(pause()), now(5), &mut out);
    assert_eq!(m.paused(), Some(&pause()));
    m.on_timer(now(10), &mut out);
    let events: Vec<_> = out
        .drain(..)
        .filter_map(|a| match a {
            Action::Emit(e) => Some(e.kind),
            _ => None,
        })
        .collect();
    assert!(
        matches!(&events[..], [EventKind::Skipped { paused: true, reason }] if reason.contains("paused by ops")),
        "{events:?}"
    );
    m.set_paused(None, now(15), &mut out);
    assert_eq!(m.paused(), None);
    m.on_timer(now(20), &mut out);
    assert_eq!(said(&mut out), ["started 20", "start 20 token 1"]);
}

#[test]
fn a_shared_job_asks_its_guard_which_answers_for_the_pause() {
    let mut m = model(Lock::Redis, Overlap::Skip);
    let mut out = Vec::new();
    m.on_timer(now(10), &mut out);
    assert_eq!(said(&mut out), ["claim 10"]);
    let answer = Answer::Paused {
        pause: pause(),
        first_report: false,
    };
    m.on_claimed(answer, now(10), &mut out);
    assert_eq!(said(&mut out), ["skipped 10 (reported elsewhere)"]);
    assert_eq!(m.paused(), Some(&pause()), "learned from the guard");
    m.on_timer(now(20), &mut out);
    assert_eq!(
        said(&mut out),
        ["claim 20"],
        "the guard decides, not this view"
    );
    m.on_claimed(acquired(7), now(20), &mut out);
    assert_eq!(said(&mut out), ["started 20", "start 20 token 7"]);
    assert_eq!(m.paused(), None, "resumed elsewhere");
}

#[test]
fn a_manual_run_has_its_own_identity_and_leaves_the_schedule_alone() {
    let mut m = model(Lock::Local, Overlap::Skip);
    let mut out = Vec::new();
    m.set_paused(Some(pause()), now(1), &mut out);
    m.on_trigger(manual(0xab, 2), now(2), &mut out);
    let start = out.iter().find_map(|a| match a {
        Action::Start { manual, token, .. } => Some((*manual, *token)),
        _ => None,
    });
    assert_eq!(start, Some((Some(0xab), 1)), "runs although paused");
    out.clear();
    m.on_trigger(manual(0xab, 2), now(3), &mut out);
    assert!(out.is_empty(), "the same request runs once");
    m.on_run_ended(0, RunEnd::Ok, Duration::ZERO, now(4), &mut out);
    out.clear();
    m.set_paused(None, now(5), &mut out);
    m.on_timer(now(10), &mut out);
    assert_eq!(
        said(&mut out),
        ["started 10", "start 10 token 2"],
        "the schedule goes on, with a token above the manual run's"
    );
}

#[test]
fn a_manual_run_waits_for_a_busy_lease_and_misfires_after_its_grace() {
    let mut m = model(Lock::Redis, Overlap::Skip);
    let mut out = Vec::new();
    m.on_trigger(manual(1, 0), now(0), &mut out);
    assert_eq!(said(&mut out), ["claim 0"]);
    m.on_claimed(Answer::Busy { first_report: true }, now(0), &mut out);
    assert!(said(&mut out).is_empty(), "waits, whatever overlap says");
    let wake = m.next_wake().expect("a retry");
    assert!(wake <= t(1));
    m.on_wake(now(1), &mut out);
    assert_eq!(said(&mut out), ["claim 0"]);
    m.on_claimed(Answer::Busy { first_report: true }, now(5), &mut out);
    let late: Vec<_> = out
        .drain(..)
        .filter_map(|a| match a {
            Action::Emit(e) => Some((e.kind.name(), e.manual)),
            _ => None,
        })
        .collect();
    assert_eq!(late, [("misfired", Some(1))], "reported with its identity");
}

#[test]
fn a_claim_that_may_have_taken_effect_unseen_is_retried_before_a_manual_run() {
    let mut m = model(Lock::Redis, Overlap::Skip);
    let mut out = Vec::new();
    m.on_timer(now(10), &mut out);
    assert_eq!(said(&mut out), ["claim 10"]);
    // The claim's reply is lost: if it took effect, this process holds the lock unseen.
    m.on_claimed(Answer::Failed("timeout".into()), now_ms(10_500), &mut out);
    m.on_trigger(manual(1, 11), now(11), &mut out);
    // Claimed first, the manual run would find the lock this process's own claim holds, and
    // wait for its lease while the fire's claim lapses.
    assert_eq!(said(&mut out), ["claim 10"]);
    let token = Answer::Acquired {
        token: 7,
        deadline: None,
    };
    m.on_claimed(token, now(12), &mut out);
    assert_eq!(said(&mut out), ["started 10", "start 10 token 7"]);
}

#[test]
fn a_too_early_answer_says_nothing_of_a_claim_that_may_have_taken_effect_unseen() {
    let mut m = model(Lock::Redis, Overlap::Skip);
    let mut out = Vec::new();
    m.on_timer(now(10), &mut out);
    said(&mut out);
    m.on_claimed(Answer::Failed("timeout".into()), now_ms(10_500), &mut out);
    m.on_wake(now(11), &mut out);
    assert_eq!(said(&mut out), ["claim 10"]);
    // The guard's clock went back: it refuses the retry before it looks up who claimed the fire.
    let ahead = Answer::TooEarly(Duration::from_millis(1_500));
    m.on_claimed(ahead, now_ms(11_100), &mut out);
    assert_eq!(said(&mut out), Vec::<String>::new());
    m.on_trigger(manual(1, 12), now(12), &mut out);
    assert_eq!(said(&mut out), ["claim 10"], "the fire's retry goes first");
    // Given up past its grace, the claim that may have taken effect is abandoned.
    m.on_claimed(Answer::Failed("timeout".into()), now(15), &mut out);
    assert!(said(&mut out).contains(&"abandon 10".to_owned()));
}

#[test]
fn a_manual_run_stamped_by_a_clock_an_hour_ahead_still_waits_one_grace_at_most() {
    let mut m = model(Lock::Redis, Overlap::Skip);
    let mut out = Vec::new();
    m.on_trigger(manual(2, 3_600), now(0), &mut out);
    assert_eq!(
        said(&mut out),
        ["claim 0"],
        "asked for at once, stamped with this clock"
    );
    m.on_claimed(Answer::Busy { first_report: true }, now(0), &mut out);
    let wake = m.next_wake().expect("a retry or the deadline");
    assert!(wake <= t(5), "within the grace of 5 s, not an hour: {wake}");
    m.on_wake(now(5), &mut out);
    let misfired = out
        .iter()
        .filter(
            |a| matches!(a, Action::Emit(e) if e.kind.name() == "misfired" && e.manual == Some(2)),
        )
        .count();
    assert_eq!(misfired, 1, "reported after one grace");
}

/// The manual runs reported, as `(kind, id)`.
fn manual_reports(out: &mut Vec<Action>) -> Vec<(&'static str, Option<u64>)> {
    out.drain(..)
        .filter_map(|a| match a {
            Action::Emit(e) => Some((e.kind.name(), e.manual)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_manual_run_read_late_may_start_only_within_the_grace_from_its_request() {
    let mut m = model(Lock::Redis, Overlap::Skip);
    let mut out = Vec::new();
    // Asked for at 0, read at 6: the grace of 5 s has passed, whenever this process read it.
    m.on_trigger(manual(3, 0), now(6), &mut out);
    assert_eq!(manual_reports(&mut out), [("misfired", Some(3))]);
    // Asked for at 2, read at 4: it may wait for the lease until 7, not until 9.
    m.on_trigger(manual(4, 2), now(4), &mut out);
    assert_eq!(said(&mut out), ["claim 2"]);
    m.on_claimed(Answer::Busy { first_report: true }, now(4), &mut out);
    assert!(out.is_empty(), "waits for the lease");
    let wake = m.next_wake().expect("a retry");
    assert!(wake <= t(5), "{wake}");
    m.on_wake(now(7), &mut out);
    assert_eq!(manual_reports(&mut out), [("misfired", Some(4))]);
    assert_eq!(m.next_wake(), None, "nothing left to claim");
}

#[test]
fn a_manual_run_the_guard_finds_too_late_is_reported_as_misfired() {
    let mut m = model(Lock::Redis, Overlap::Skip);
    let mut out = Vec::new();
    m.on_trigger(manual(5, 0), now(1), &mut out);
    assert_eq!(said(&mut out), ["claim 0"]);
    m.on_claimed(Answer::TooLate(Duration::from_secs(6)), now(1), &mut out);
    let reasons: Vec<String> = out
        .drain(..)
        .filter_map(|a| match a {
            Action::Emit(e) if e.manual == Some(5) => Some(format!("{:?}", e.kind)),
            _ => None,
        })
        .collect();
    assert!(
        matches!(&reasons[..], [r] if r.contains("Misfired") && r.contains("guard's clock")),
        "{reasons:?}"
    );
}

#[test]
fn a_burst_of_manual_runs_read_again_from_the_feed_runs_each_once() {
    let mut m = model(Lock::Local, Overlap::Skip);
    let mut out = Vec::new();
    for id in 1..=40 {
        m.on_trigger(manual(id, 0), now(0), &mut out);
    }
    let waiting = m.controls().map_or(0, |c| c.manual.len());
    assert_eq!(waiting, 39, "one runs, the others wait");
    // The feed hands the first requests back after more than 32 others, within their grace.
    for id in 1..=8 {
        m.on_trigger(manual(id, 0), now(1), &mut out);
    }
    assert_eq!(m.controls().map_or(0, |c| c.manual.len()), 39);
}

/// Jobs with equal settings share one copy; a copy no job holds any more is forgotten once the
/// pool grows, so jobs added and removed at runtime do not pile settings up.
#[test]
fn jobs_alike_share_their_settings_and_unused_ones_are_forgotten() {
    let every = |s: u64| Settings {
        schedule: Schedule::every(Duration::from_secs(s)).expect("valid"),
        ..(*spec(Lock::Local, Overlap::Skip)).clone()
    };
    let mut pool = SettingsPool::default();
    let a = Spec::pooled(SmolStr::from("a"), every(10), &mut pool);
    let b = Spec::pooled(SmolStr::from("b"), every(10), &mut pool);
    let c = Spec::pooled(SmolStr::from("c"), every(11), &mut pool);
    assert!(Arc::ptr_eq(&a.settings, &b.settings));
    assert!(!Arc::ptr_eq(&a.settings, &c.settings));
    assert_eq!(pool.shared.len(), 2);

    drop((a, b));
    let kept: Vec<Spec> = (100..300)
        .map(|s| Spec::pooled(SmolStr::from("x"), every(s), &mut pool))
        .collect();
    assert!(
        !pool.shared.contains(&every(10)),
        "settings no job holds are forgotten"
    );
    assert!(
        pool.shared.contains(&every(11)),
        "c still holds its settings"
    );
    assert!(kept.iter().all(|s| pool.shared.contains(&**s)));
    assert!(pool.shared.len() <= 2 * (kept.len() + 1));
}

/// Whether the job holds nothing out of line: what an idle job keeps (BENCHMARKS.md).
fn holds_nothing(m: &JobModel) -> bool {
    m.busy.is_none()
}

#[test]
fn a_job_between_fires_holds_nothing_out_of_line() {
    for lock in [Lock::Local, Lock::Redis] {
        let mut m = model(lock.clone(), Overlap::Skip);
        let mut out = Vec::new();
        assert!(holds_nothing(&m));
        m.on_timer(now(10), &mut out);
        if lock == Lock::Redis {
            assert!(!holds_nothing(&m), "the claim in flight is held");
            m.on_claimed(acquired(1), now(10), &mut out);
        }
        assert!(!holds_nothing(&m), "the run is held");
        m.on_run_ended(0, RunEnd::Ok, Duration::ZERO, now(11), &mut out);
        assert!(
            holds_nothing(&m),
            "{lock:?}: a run that ended leaves nothing behind"
        );

        // A fire skipped while a run goes on, and a claim the guard gives to another process.
        m.on_timer(now(20), &mut out);
        if lock == Lock::Redis {
            m.on_claimed(acquired(2), now(20), &mut out);
        }
        m.on_timer(now(30), &mut out);
        m.on_run_ended(1, RunEnd::Ok, Duration::ZERO, now(31), &mut out);
        if lock == Lock::Redis {
            m.on_claimed(Answer::ClaimedByAnother, now(31), &mut out);
        }
        said(&mut out);
        assert!(holds_nothing(&m), "{lock:?}: {:?}", m.runs().len());
    }
}

/// A job firing every 10 s with a misfire grace of `grace_s` and a standby of `standby_ms`.
fn with_standby(lock: Lock, grace_s: u64, standby_ms: u64) -> JobModel {
    let mut spec = spec(lock, Overlap::Skip);
    let mut settings = (*spec).clone();
    settings.misfire_grace = Duration::from_secs(grace_s);
    settings.standby = Duration::from_millis(standby_ms);
    spec = Spec::new(spec.name.clone(), settings);
    let mut m = JobModel::new(spec);
    m.schedule_from(t(0));
    m
}

/// A Redis job [`with_standby`].
fn standing_by(grace_s: u64, standby_ms: u64) -> JobModel {
    with_standby(Lock::Redis, grace_s, standby_ms)
}

/// [`standing_by`], after another process got fire 10 (what was said of it is drained).
fn lost_fire_10(grace_s: u64, standby_ms: u64) -> (JobModel, Vec<Action>) {
    lost_fire_10_as(Answer::ClaimedByAnother, grace_s, standby_ms)
}

/// [`lost_fire_10`], the guard answering `answer`.
fn lost_fire_10_as(answer: Answer, grace_s: u64, standby_ms: u64) -> (JobModel, Vec<Action>) {
    let mut m = standing_by(grace_s, standby_ms);
    let mut out = Vec::new();
    m.on_timer(now(10), &mut out);
    m.on_claimed(answer, now(10), &mut out);
    assert_eq!(said(&mut out), ["claim 10", "claimed_elsewhere 10"]);
    (m, out)
}

#[test]
fn a_process_that_lost_the_last_fire_claims_the_next_only_after_the_standby() {
    let mut m = standing_by(5, 2_000);
    let mut out = Vec::new();
    // Knowing nothing yet, it claims at the instant.
    m.on_timer(now(10), &mut out);
    assert_eq!(said(&mut out), ["claim 10"]);
    m.on_claimed(Answer::ClaimedByAnother, now(10), &mut out);
    assert_eq!(said(&mut out), ["claimed_elsewhere 10"]);
    m.on_timer(now(20), &mut out);
    assert!(said(&mut out).is_empty(), "another process claims first");
    assert_eq!(m.next_wake(), Some(now(22).wall));
    m.on_wake(now_ms(21_999), &mut out);
    assert!(said(&mut out).is_empty());
    m.on_wake(now(22), &mut out);
    assert_eq!(said(&mut out), ["claim 20"]);
    // That process did not take it (it died): this one runs it, late by the standby, and from
    // then on claims at the instant.
    m.on_claimed(acquired(7), now(22), &mut out);
    assert_eq!(said(&mut out), ["started 20", "start 20 token 7"]);
    m.on_run_ended(0, RunEnd::Ok, Duration::ZERO, now(23), &mut out);
    said(&mut out);
    m.on_timer(now(30), &mut out);
    assert_eq!(said(&mut out), ["claim 30"]);
}

#[test]
fn the_process_named_first_for_a_job_claims_at_the_instant_even_after_losing_a_fire() {
    let (mut m, mut out) = lost_fire_10(5, 2_000);
    m.set_first_here(Some(true));
    m.on_timer(now(20), &mut out);
    assert_eq!(said(&mut out), ["claim 20"], "named first: no standby");
    m.on_claimed(Answer::ClaimedByAnother, now(20), &mut out);
    said(&mut out);
    m.on_timer(now(30), &mut out);
    assert_eq!(
        said(&mut out),
        ["claim 30"],
        "still first, whoever got the last"
    );
    // Named for another, it stands by once it loses a fire, as without word of the others.
    m.on_claimed(Answer::AlreadyRan, now(30), &mut out);
    said(&mut out);
    m.set_first_here(Some(false));
    m.on_timer(now(40), &mut out);
    assert!(said(&mut out).is_empty(), "another is named first");
    assert_eq!(m.next_wake(), Some(now(42).wall));
}

#[test]
fn a_process_not_named_first_stands_by_until_it_gets_a_fire_after_standing_by() {
    let mut m = standing_by(5, 2_000);
    m.set_first_here(Some(false));
    let mut out = Vec::new();
    // Even knowing nothing of the job's claims yet, it lets the process named first claim.
    m.on_timer(now(10), &mut out);
    assert!(said(&mut out).is_empty(), "another process is named first");
    m.on_wake(now(12), &mut out);
    assert_eq!(said(&mut out), ["claim 10"]);
    // Nobody claimed it before: the process named first does not run this job. This one
    // claims at the instant from now on, until it loses a fire.
    m.on_claimed(acquired(3), now(12), &mut out);
    said(&mut out);
    m.on_run_ended(0, RunEnd::Ok, Duration::ZERO, now(13), &mut out);
    said(&mut out);
    m.on_timer(now(20), &mut out);
    assert_eq!(said(&mut out), ["claim 20"]);
    m.on_claimed(Answer::ClaimedByAnother, now(20), &mut out);
    said(&mut out);
    m.on_timer(now(30), &mut out);
    assert!(said(&mut out).is_empty(), "lost a fire: stands by again");
    assert_eq!(m.next_wake(), Some(now(32).wall));
}

#[test]
fn a_process_not_named_first_that_won_the_race_at_the_instant_stands_by_next() {
    let mut m = standing_by(5, 2_000);
    let mut out = Vec::new();
    m.on_timer(now(10), &mut out);
    assert_eq!(
        said(&mut out),
        ["claim 10"],
        "nothing known: claims at the instant"
    );
    m.set_first_here(Some(false));
    m.on_claimed(acquired(3), now(10), &mut out);
    said(&mut out);
    m.on_run_ended(0, RunEnd::Ok, Duration::ZERO, now(11), &mut out);
    said(&mut out);
    // It got the fire at the instant, which says nothing of the process named first.
    m.on_timer(now(20), &mut out);
    assert!(
        said(&mut out).is_empty(),
        "leaves the instant to the process named first"
    );
    assert_eq!(m.next_wake(), Some(now(22).wall));
}

#[test]
fn a_fire_already_run_elsewhere_keeps_the_process_standing_by() {
    let (mut m, mut out) = lost_fire_10_as(Answer::AlreadyRan, 5, 2_000);
    m.on_timer(now(20), &mut out);
    m.on_wake(now(22), &mut out);
    assert_eq!(said(&mut out), ["claim 20"]);
    // A busy answer says nothing of who got the last fire.
    m.on_claimed(
        Answer::Busy {
            first_report: false,
        },
        now(22),
        &mut out,
    );
    said(&mut out);
    m.on_timer(now(30), &mut out);
    assert!(said(&mut out).is_empty(), "still standing by");
    assert_eq!(m.next_wake(), Some(now(32).wall));
}

#[test]
fn the_standby_never_waits_past_half_the_grace_or_half_the_time_to_the_next_fire() {
    let waited = |grace_s: u64, standby_ms: u64| {
        let (mut m, mut out) = lost_fire_10(grace_s, standby_ms);
        m.on_timer(now(20), &mut out);
        (m.next_wake().expect("a wake-up for the claim") - now(20).wall).num_milliseconds()
    };
    assert_eq!(waited(5, 2_000), 2_000);
    assert_eq!(waited(5, 60_000), 2_500, "half the grace of 5 s");
    assert_eq!(waited(60, 60_000), 5_000, "half the 10 s to the next fire");
}

/// A Redis job firing every 10 s with a jitter of 8 s, a misfire grace and a standby of a
/// minute.
fn jittered_standing_by() -> JobModel {
    let mut settings = (*spec(Lock::Redis, Overlap::Skip)).clone();
    settings.misfire_grace = Duration::from_secs(60);
    settings.standby = Duration::from_secs(60);
    settings.limits.jitter = Some(Duration::from_secs(8));
    let mut m = JobModel::new(Spec::new(SmolStr::from("job"), settings));
    m.schedule_from(t(0));
    m
}

#[test]
fn a_process_standing_by_claims_a_jittered_fire_before_the_next_fire_is_due() {
    let mut m = jittered_standing_by();
    let mut out = Vec::new();
    let mut late_in_its_jitter = false;
    for k in 1..=8 {
        let fire = t(k * 10);
        m.on_timer(now(k * 10), &mut out);
        let claim_at = m.next_wake().expect("a wake-up for the claim");
        assert!(
            claim_at < t(k * 10 + 10),
            "fire {}: claimed at {claim_at}, after the next fire",
            k * 10
        );
        // From the second fire on this process stands by, a standby cut to half the time left.
        let delay = limits::jitter_delay("job", fire, Some(Duration::from_secs(8)));
        late_in_its_jitter |= k > 1 && delay > Duration::from_secs(5);
        let at = Now {
            wall: claim_at,
            mono: (claim_at - t(0)).to_std().expect("after the start"),
            random: 7,
        };
        m.on_wake(at, &mut out);
        assert_eq!(said(&mut out), [format!("claim {}", k * 10)]);
        m.on_claimed(Answer::ClaimedByAnother, at, &mut out);
        said(&mut out);
    }
    assert!(
        late_in_its_jitter,
        "a fire starts more than half the gap into its jitter"
    );
}

#[test]
fn a_jittered_start_stays_before_the_next_fire_where_an_offset_change_brings_fires_closer() {
    // 2026-03-29 in Berlin: 01:59 CET, then 03:00 CEST for the 02:59 that does not exist.
    let schedule = Schedule::cron("59 1,2 * * *", "Europe/Berlin").expect("valid");
    let jitter = Duration::from_secs(30 * 60);
    assert!(jitter < schedule.shortest_gap(), "a valid jitter");
    let mut settings = (*spec(Lock::Redis, Overlap::Skip)).clone();
    settings.schedule = schedule;
    settings.limits.jitter = Some(jitter);
    // Named so that the jitter of the 01:59 fire is longer than the minute to the next one.
    let name = (0..)
        .map(|i| format!("job-{i}"))
        .find(|name| {
            let first = DateTime::parse_from_rfc3339("2026-03-29T00:59:00Z").expect("valid");
            limits::jitter_delay(name, first.to_utc(), Some(jitter)) > Duration::from_secs(60)
        })
        .expect("a name");
    let m = JobModel::new(Spec::new(SmolStr::from(name), settings));
    let first = DateTime::parse_from_rfc3339("2026-03-29T00:59:00Z").expect("valid");
    let next = DateTime::parse_from_rfc3339("2026-03-29T01:00:00Z").expect("valid");
    assert_eq!(
        m.spec.schedule.next_after(first.to_utc()),
        Some(next.to_utc())
    );
    let fire = m.fire_at(first.to_utc());
    assert!(fire.start() < next.to_utc(), "starts at {}", fire.start());
    assert!(fire.start() > first.to_utc(), "still jittered");
}

#[test]
fn without_a_standby_or_a_shared_guard_every_fire_is_taken_at_its_instant() {
    let (mut m, mut out) = lost_fire_10(5, 0);
    m.on_timer(now(20), &mut out);
    assert_eq!(said(&mut out), ["claim 20"]);
    // A local job has its standby too, but never claims, so never waits.
    let mut m = with_standby(Lock::Local, 5, 2_000);
    m.on_timer(now(10), &mut out);
    assert_eq!(said(&mut out), ["started 10", "start 10 token 1"]);
}

#[test]
fn a_shutdown_while_standing_by_leaves_the_report_to_the_process_that_got_the_last_fire() {
    let (mut m, mut out) = lost_fire_10(5, 2_000);
    m.on_timer(now(20), &mut out);
    said(&mut out);
    m.stop(now_ms(20_500), &mut out);
    assert_eq!(said(&mut out), ["misfired 20 (reported elsewhere)"]);

    // Once the standby has passed the fire is this process's to claim, and to report.
    let (mut m, mut out) = lost_fire_10(5, 2_000);
    m.on_timer(now(20), &mut out);
    m.on_wake(now(22), &mut out);
    m.on_claimed(Answer::Failed("timeout".into()), now(23), &mut out);
    said(&mut out);
    m.stop(now_ms(23_100), &mut out);
    assert_eq!(said(&mut out), ["abandon 20", "ask report 20 misfired"]);
}

/// A shutdown leaves a due fire this process never claimed to the processes that go on (and to
/// the next start's walk): reported at info level, nothing recorded, so that another process
/// still runs it (docs/design/guarantees.md).
#[test]
fn a_shutdown_leaves_a_fire_it_never_claimed_to_the_processes_that_go_on() {
    let mut m = model(Lock::Redis, Overlap::Queue);
    let mut out = Vec::new();
    m.on_timer(now(10), &mut out);
    m.on_claimed(
        Answer::Busy {
            first_report: false,
        },
        now(10),
        &mut out,
    );
    said(&mut out);
    m.stop(now_ms(10_100), &mut out);
    let told = said(&mut out);
    assert_eq!(told, ["misfired 10 (reported elsewhere)"], "{told:?}");
}

/// Answers that come while stopping are reported as the guard decided: a fire another process
/// claimed is not reported as misfired at warn level.
#[test]
fn a_claim_answered_while_stopping_is_reported_as_the_guard_decided() {
    for (answer, expected) in [
        (Answer::ClaimedByAnother, "claimed_elsewhere 10"),
        (Answer::AlreadyRan, "claimed_elsewhere 10"),
        (Answer::DroppedByAnother, "skipped 10 (reported elsewhere)"),
        (
            Answer::Busy {
                first_report: false,
            },
            "misfired 10 (reported elsewhere)",
        ),
    ] {
        let mut m = model(Lock::Redis, Overlap::Queue);
        let mut out = Vec::new();
        m.on_timer(now(10), &mut out);
        assert_eq!(said(&mut out), ["claim 10"]);
        m.stop(now_ms(10_050), &mut out);
        said(&mut out);
        m.on_claimed(answer, now_ms(10_100), &mut out);
        assert_eq!(said(&mut out), [expected]);
    }
}

#[test]
fn nobody_stands_by_while_the_job_is_paused() {
    let (mut m, mut out) = lost_fire_10(5, 2_000);
    // The control feed says the job is paused: the claim goes out at the instant, so that the
    // store's answer (paused) is heard before a resume could let this process run the fire.
    m.set_paused(Some(Pause::new("ops", t(15))), now(15), &mut out);
    m.on_timer(now(20), &mut out);
    assert_eq!(said(&mut out), ["claim 20"]);
    m.on_claimed(
        Answer::Paused {
            pause: Pause::new("ops", t(15)),
            first_report: false,
        },
        now(20),
        &mut out,
    );
    said(&mut out);
    m.set_paused(None, now(25), &mut out);
    m.on_timer(now(30), &mut out);
    assert!(
        said(&mut out).is_empty(),
        "standing by again after the resume"
    );
}

/// A model of a `redis` job that may claim its fires 250 ms ahead.
fn ahead_model(overlap: Overlap) -> JobModel {
    let settings = Settings {
        claim_ahead: Duration::from_millis(250),
        ..(*spec(Lock::Redis, overlap)).clone()
    };
    let mut m = JobModel::new(Spec::new(SmolStr::from("job"), settings));
    m.schedule_from(t(0));
    m
}

/// A job of [`ahead_model`] whose claim of the fire at 10 s went out at 9.75 s and got `answer`.
fn claimed_ahead(answer: Answer) -> JobModel {
    let mut m = ahead_model(Overlap::Skip);
    let mut out = Vec::new();
    m.on_wake(now_ms(9_750), &mut out);
    m.on_claimed(answer, now_ms(9_760), &mut out);
    m
}

/// docs/design/standby.md: the claim goes out ahead, the run starts at the instant, once.
#[test]
fn a_fire_claimed_ahead_starts_at_its_instant_and_only_then() {
    for timer_first in [true, false] {
        let mut m = ahead_model(Overlap::Skip);
        let mut out = Vec::new();
        assert_eq!(m.next_wake(), Some(t(10) - TimeDelta::milliseconds(250)));
        m.on_wake(now_ms(9_750), &mut out);
        assert_eq!(said(&mut out), ["claim 10"]);
        assert_eq!(
            m.next_fire_shown(),
            Some(t(10)),
            "the status shows the fire claimed"
        );
        m.on_claimed(acquired(5), now_ms(9_760), &mut out);
        assert_eq!(said(&mut out), ["hold"], "not started before its instant");
        assert_eq!(m.next_fire(), Some(t(20)));
        assert_eq!(m.next_fire_shown(), Some(t(10)), "and the fire held");
        assert!(m.busy(), "a held claim is outstanding");
        assert_eq!(m.next_wake(), Some(t(10)));
        m.on_wake(now_ms(9_900), &mut out);
        m.on_timer(now_ms(9_900), &mut out);
        assert_eq!(said(&mut out), Vec::<String>::new());
        if timer_first {
            m.on_timer(now(10), &mut out);
            m.on_wake(now(10), &mut out);
        } else {
            m.on_wake(now(10), &mut out);
            m.on_timer(now(10), &mut out);
        }
        assert_eq!(said(&mut out), ["started 10", "start 10 token 5"]);
        assert_eq!(m.next_fire(), Some(t(20)));
        assert_eq!(m.next_fire_shown(), Some(t(20)));
    }
}

/// A busy job at the guard is not skipped ahead of the fire: the claim at the instant decides,
/// and no error about the clock is kept.
#[test]
fn a_claim_refused_ahead_is_made_again_at_the_instant() {
    let mut m = ahead_model(Overlap::Skip);
    let mut out = Vec::new();
    m.on_wake(now_ms(9_750), &mut out);
    said(&mut out);
    m.on_claimed(
        Answer::TooEarly(Duration::from_millis(240)),
        now_ms(9_760),
        &mut out,
    );
    assert_eq!(
        said(&mut out),
        Vec::<String>::new(),
        "nothing decided ahead"
    );
    assert_eq!(m.next_wake(), Some(t(10)));
    m.on_wake(now_ms(9_900), &mut out);
    assert_eq!(
        said(&mut out),
        Vec::<String>::new(),
        "no second claim ahead"
    );
    m.on_wake(now(10), &mut out);
    m.on_timer(now(10), &mut out);
    assert_eq!(said(&mut out), ["claim 10"]);
    m.on_claimed(Answer::Busy { first_report: true }, now(10), &mut out);
    assert_eq!(said(&mut out), ["skipped 10"]);
    assert_eq!(
        m.last_guard_error(),
        None,
        "a refusal ahead is no clock trouble"
    );
}

/// Nothing is claimed ahead while the job runs here: the claim at the instant decides its
/// overlap.
#[test]
fn nothing_is_claimed_ahead_while_a_run_goes_on() {
    let mut m = ahead_model(Overlap::Queue);
    let mut out = Vec::new();
    m.on_wake(now_ms(9_750), &mut out);
    m.on_claimed(acquired(5), now_ms(9_760), &mut out);
    m.on_timer(now(10), &mut out);
    assert_eq!(
        said(&mut out),
        ["claim 10", "hold", "started 10", "start 10 token 5"]
    );
    assert_eq!(
        m.next_wake(),
        None,
        "the run of 10 goes on: no claim ahead of 20"
    );
    m.on_timer(now(20), &mut out);
    assert_eq!(
        said(&mut out),
        Vec::<String>::new(),
        "queued behind the run here"
    );
    m.on_run_ended(0, RunEnd::Ok, Duration::ZERO, now(21), &mut out);
    assert_eq!(said(&mut out), ["succeeded 10", "claim 20"]);
}

/// A shutdown waits for a fire claimed ahead and starts it at its instant, as it waits for a run;
/// past the shutdown deadline, or when the job is removed, the claim is given back and the fire
/// reported (nobody else will run it: the guard recorded the claim). A fire only taken ahead,
/// with no claim in effect, is left to the processes that go on, without a word.
#[test]
fn a_stop_before_the_instant_starts_a_held_fire_at_its_instant() {
    let held = || claimed_ahead(acquired(5));
    let mut out = Vec::new();
    let mut m = held();
    m.stop(now_ms(9_800), &mut out);
    assert_eq!(said(&mut out), Vec::<String>::new());
    assert!(m.busy(), "the shutdown waits for the held fire");
    assert_eq!(m.next_wake(), Some(t(10)));
    m.on_wake(now(10), &mut out);
    assert_eq!(said(&mut out), ["started 10", "start 10 token 5"]);

    let mut m = held();
    m.stop(now_ms(9_800), &mut out);
    m.cancel_runs(now_ms(9_900), &mut out);
    assert_eq!(said(&mut out), ["abandon 10", "misfired 10"]);
    assert!(!m.busy());

    let mut m = held();
    m.remove(now_ms(9_800), &mut out);
    assert_eq!(said(&mut out), ["abandon 10", "misfired 10"]);
    assert!(!m.busy());
    m.on_wake(now(10), &mut out);
    assert_eq!(said(&mut out), Vec::<String>::new());

    let mut m = claimed_ahead(Answer::TooEarly(Duration::from_millis(240)));
    m.stop(now_ms(9_800), &mut out);
    assert_eq!(said(&mut out), Vec::<String>::new());
    assert!(!m.busy());

    // A claim ahead in flight at the stop: a refusal ahead is forgotten, a grant held to its
    // instant (at a removal, given back), a busy answer (the server's instant had come) reported.
    for (answer, removed, expected) in [
        (Answer::TooEarly(Duration::from_millis(200)), false, vec![]),
        (
            Answer::Busy { first_report: true },
            false,
            vec!["skipped 10"],
        ),
        (acquired(5), false, vec!["hold"]),
        (acquired(5), true, vec!["abandon 10", "misfired 10"]),
    ] {
        let mut m = ahead_model(Overlap::Skip);
        m.on_wake(now_ms(9_750), &mut out);
        said(&mut out);
        if removed {
            m.remove(now_ms(9_760), &mut out);
        } else {
            m.stop(now_ms(9_760), &mut out);
        }
        assert_eq!(said(&mut out), Vec::<String>::new());
        m.on_claimed(answer, now_ms(9_770), &mut out);
        assert_eq!(said(&mut out), expected);
        m.on_wake(now(10), &mut out);
        let started = expected == ["hold"];
        assert_eq!(said(&mut out).len(), if started { 2 } else { 0 });
        assert_eq!(m.busy(), started, "only the started run is outstanding");
    }
}

/// A pause here before the instant drops the held fire: it was paused before it started.
#[test]
fn a_pause_before_the_instant_drops_a_held_fire() {
    let mut m = claimed_ahead(acquired(5));
    let mut out = Vec::new();
    m.set_paused(Some(pause()), now_ms(9_800), &mut out);
    assert_eq!(said(&mut out), ["abandon 10", "skipped 10"]);
    m.on_timer(now(10), &mut out);
    assert_eq!(
        said(&mut out),
        Vec::<String>::new(),
        "not started at the instant"
    );
}

/// Only shared guards claim: a local job ignores the lead.
#[test]
fn a_local_job_never_claims_ahead() {
    let settings = Settings {
        claim_ahead: Duration::from_millis(250),
        ..(*spec(Lock::Local, Overlap::Skip)).clone()
    };
    let mut m = JobModel::new(Spec::new(SmolStr::from("job"), settings));
    m.schedule_from(t(0));
    assert_eq!(m.next_wake(), None);
}

/// Whether a claim went out ahead is decided when it is sent, not from the clock when its answer
/// comes: a claim sent at the instant starts at once even if the clock stepped back meanwhile,
/// and a refusal of it is no claim ahead to make again later.
#[test]
fn a_claim_sent_at_the_instant_is_not_taken_for_one_ahead_after_the_clock_stepped_back() {
    let mut m = ahead_model(Overlap::Skip);
    let mut out = Vec::new();
    m.on_wake(now_ms(9_750), &mut out);
    m.on_claimed(
        Answer::Failed("timeout".to_owned()),
        now_ms(9_760),
        &mut out,
    );
    said(&mut out);
    m.on_wake(now(10), &mut out);
    assert_eq!(
        said(&mut out),
        ["claim 10"],
        "the retry goes at the instant"
    );
    m.on_claimed(acquired(5), now_ms(8_000), &mut out);
    assert_eq!(said(&mut out), ["started 10", "start 10 token 5"]);

    let mut m = claimed_ahead(Answer::TooEarly(Duration::from_millis(240)));
    m.on_wake(now(10), &mut out);
    assert_eq!(said(&mut out), ["claim 10"]);
    m.stop(now_ms(8_000), &mut out);
    m.on_claimed(Answer::Busy { first_report: true }, now_ms(8_000), &mut out);
    assert_eq!(
        said(&mut out),
        ["skipped 10"],
        "a busy skip at the stop is reported as the guard decided, whatever the clock says"
    );
}

/// A process frozen between a grant ahead and the fire's instant, past the lease or the grace:
/// the held claim is not started on waking, but given back and reported through the guard, like
/// any claim granted too late.
#[test]
fn a_held_fire_whose_lease_or_grace_ran_out_is_given_back_not_started() {
    let held = |deadline_s: u64| {
        claimed_ahead(Answer::Acquired {
            token: 5,
            deadline: Some(Duration::from_secs(deadline_s)),
        })
    };
    let mut out = Vec::new();
    let mut m = held(12);
    m.on_wake(now(13), &mut out);
    assert_eq!(said(&mut out), ["abandon 10", "misfired 10"]);
    assert_eq!(m.running(), 0);

    let mut m = held(3_600);
    m.on_wake(now(16), &mut out);
    m.on_timer(now(16), &mut out);
    let said = said(&mut out);
    assert!(
        said.starts_with(&["abandon 10".to_owned(), "misfired 10".to_owned()]),
        "{said:?}"
    );
    assert_eq!(m.running(), 0);
}

/// After a downtime, no later fire is claimed before the fires missed before the start have
/// their fate in the store: the fate point is the newest fire with a fate, so a claim granted
/// first would move it past the missed fires, and every process reporting them would be told
/// that another one had (docs/guide/downtime.md).
#[test]
fn no_fire_is_claimed_before_the_missed_ones_are_recorded() {
    let mut m = JobModel::new(spec(Lock::Redis, Overlap::Skip));
    m.schedule_from(t(100));
    assert!(m.await_fate_point(t(100)));
    let mut out = Vec::new();
    // The store answers late: the timer takes fire 110 while the fate point is awaited.
    m.on_timer(now(110), &mut out);
    assert!(
        said(&mut out).is_empty(),
        "held until the fate point is known"
    );
    m.on_fate_point(Some(t(50)), now(111), &mut out);
    assert_eq!(said(&mut out), ["report missed 60..100 (5)"]);
    assert!(m.busy());
    let missed = MissedFires {
        first: t(60),
        last: t(100),
        count: 5,
        walked_all: true,
        cause: MissedCause::NoProcess,
    };
    m.on_missed_reported(missed, Ok(Some(t(50))), now(111), &mut out);
    assert_eq!(said(&mut out), ["misfired 100", "claim 110"]);
}
