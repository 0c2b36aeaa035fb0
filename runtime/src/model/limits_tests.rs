//! The rules of `timeout`, `retries` and `jitter` as plain unit tests of the model.

use smol_str::SmolStr;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

use super::*;

fn t(s: i64) -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp(1_767_225_600 + s, 0).expect("in range")
}

fn at_ms(ms: i64) -> Now {
    Now {
        wall: t(0) + TimeDelta::milliseconds(ms),
        mono: Duration::from_millis(ms as u64),
        random: 7,
    }
}

fn ms_of(at: DateTime<Utc>) -> i64 {
    (at - t(0)).num_milliseconds()
}

/// Every 10 s, 5 s of grace, in-process guard, with these limits.
fn model(limits: Limits, grace_s: u64) -> JobModel {
    let spec = Spec::new(
        SmolStr::from("job"),
        Settings {
            schedule: Schedule::every(Duration::from_secs(10)).expect("valid"),
            misfire_grace: Duration::from_secs(grace_s),
            max_instances: 1,
            lock: Lock::Local,
            overlap: Overlap::Skip,
            coalesce: false,
            enabled: true,
            limits,
            standby: Duration::ZERO,
            claim_ahead: Duration::ZERO,
            overrides: None,
        },
    );
    let mut m = JobModel::new(spec);
    m.schedule_from(t(0));
    m
}

fn retrying(retries: u32, backoff_s: u64) -> Limits {
    Limits {
        retries,
        backoff: Duration::from_secs(backoff_s),
        ..Limits::default()
    }
}

/// The actions, with what the limits add to events: the attempt, the token, when a retry starts.
fn said(out: &mut Vec<Action>) -> Vec<String> {
    out.drain(..)
        .map(|a| match a {
            Action::Start { fire, token, .. } => format!("start {} token {token}", ms_of(fire)),
            Action::Retry { run, attempt } => format!("retry run {run} attempt {attempt}"),
            Action::Finish(run) => format!("finish run {run}"),
            Action::Emit(e) => {
                let mut text = format!(
                    "{} {} attempt {} token {}",
                    e.kind.name(),
                    ms_of(e.fire_time),
                    e.attempt.unwrap_or(0),
                    e.fencing_token.unwrap_or(0)
                );
                if let EventKind::Failed {
                    reason, retry_at, ..
                } = &e.kind
                {
                    text.push_str(&format!(" ({reason}"));
                    if let Some(at) = retry_at {
                        text.push_str(&format!(", again at {}", ms_of(*at)));
                    }
                    text.push(')');
                }
                text
            }
            other => format!("{other:?}"),
        })
        .collect()
}

fn failed() -> RunEnd {
    RunEnd::Failed("boom".to_owned())
}

#[test]
fn a_failed_run_is_retried_under_the_same_fire_and_token_until_it_succeeds() {
    let mut m = model(retrying(3, 1), 5);
    let mut out = Vec::new();
    m.on_timer(at_ms(10_000), &mut out);
    assert_eq!(
        said(&mut out),
        ["started 10000 attempt 1 token 1", "start 10000 token 1"]
    );
    m.on_run_ended(0, failed(), Duration::ZERO, at_ms(10_500), &mut out);
    assert_eq!(
        said(&mut out),
        ["failed 10000 attempt 1 token 1 (error, again at 11500)"]
    );
    assert_eq!(m.running(), 1, "the run keeps its slot between attempts");
    assert_eq!(m.next_wake(), Some(at_ms(11_500).wall));
    m.on_wake(at_ms(11_499), &mut out);
    assert_eq!(said(&mut out), Vec::<String>::new(), "not before its time");
    m.on_wake(at_ms(11_500), &mut out);
    assert_eq!(
        said(&mut out),
        ["started 10000 attempt 2 token 1", "retry run 0 attempt 2"]
    );
    m.on_run_ended(
        0,
        RunEnd::Panicked("oops".to_owned()),
        Duration::ZERO,
        at_ms(12_000),
        &mut out,
    );
    assert_eq!(
        said(&mut out),
        ["failed 10000 attempt 2 token 1 (panic, again at 14000)"],
        "the pause doubles"
    );
    m.on_wake(at_ms(14_000), &mut out);
    assert_eq!(
        said(&mut out),
        ["started 10000 attempt 3 token 1", "retry run 0 attempt 3"]
    );
    m.on_run_ended(0, RunEnd::Ok, Duration::ZERO, at_ms(14_100), &mut out);
    assert_eq!(said(&mut out), ["succeeded 10000 attempt 3 token 1"]);
    assert_eq!(m.running(), 0);
    m.on_timer(at_ms(20_000), &mut out);
    assert_eq!(
        said(&mut out),
        ["started 20000 attempt 1 token 2", "start 20000 token 2"],
        "the next fire starts over at attempt 1"
    );
}

#[test]
fn no_retry_starts_at_or_after_the_misfire_deadline() {
    // Deadline 15 s: the retry at 12.5 fits, the next one (13 + 4 = 17) does not.
    let mut m = model(retrying(5, 2), 5);
    let mut out = Vec::new();
    m.on_timer(at_ms(10_000), &mut out);
    said(&mut out);
    m.on_run_ended(0, failed(), Duration::ZERO, at_ms(10_500), &mut out);
    m.on_wake(at_ms(12_500), &mut out);
    said(&mut out);
    m.on_run_ended(0, RunEnd::TimedOut, Duration::ZERO, at_ms(13_000), &mut out);
    assert_eq!(
        said(&mut out),
        ["finish run 0", "failed 10000 attempt 2 token 1 (timeout)"],
        "the last failure is the run's end"
    );
    assert_eq!(m.running(), 0);
    assert_eq!(m.next_wake(), None);
}

#[test]
fn no_retry_starts_at_or_after_the_next_fire() {
    // 30 s of grace, but the next fire at 20 s closes the window: 19.5 + 16 is past it.
    let mut m = model(retrying(5, 8), 30);
    let mut out = Vec::new();
    m.on_timer(at_ms(10_000), &mut out);
    said(&mut out);
    m.on_run_ended(0, failed(), Duration::ZERO, at_ms(11_000), &mut out);
    assert_eq!(
        said(&mut out),
        ["failed 10000 attempt 1 token 1 (error, again at 19000)"]
    );
    m.on_wake(at_ms(19_000), &mut out);
    said(&mut out);
    m.on_run_ended(0, failed(), Duration::ZERO, at_ms(19_500), &mut out);
    assert_eq!(
        said(&mut out),
        ["finish run 0", "failed 10000 attempt 2 token 1 (error)"]
    );
}

#[test]
fn cancellations_and_lost_leases_are_not_retried() {
    let mut m = model(retrying(3, 1), 5);
    let mut out = Vec::new();
    m.on_timer(at_ms(10_000), &mut out);
    said(&mut out);
    m.on_run_ended(
        0,
        RunEnd::Cancelled,
        Duration::ZERO,
        at_ms(10_500),
        &mut out,
    );
    assert_eq!(said(&mut out), ["cancelled 10000 attempt 1 token 1"]);
    assert_eq!(m.running(), 0);
}

#[test]
fn a_shutdown_between_attempts_ends_the_run_with_its_last_failure() {
    let mut m = model(retrying(3, 1), 5);
    let mut out = Vec::new();
    m.on_timer(at_ms(10_000), &mut out);
    m.on_run_ended(0, failed(), Duration::ZERO, at_ms(10_500), &mut out);
    said(&mut out);
    m.stop(at_ms(11_000), &mut out);
    assert_eq!(
        said(&mut out),
        ["finish run 0", "failed 10000 attempt 1 token 1 (error)"]
    );
    m.on_wake(at_ms(11_500), &mut out);
    assert_eq!(said(&mut out), Vec::<String>::new(), "no further attempt");
    assert!(!m.busy());
}

#[test]
fn a_lease_lost_between_attempts_ends_the_run() {
    let mut m = model(retrying(3, 1), 5);
    let mut out = Vec::new();
    m.on_timer(at_ms(10_000), &mut out);
    m.on_run_ended(0, failed(), Duration::ZERO, at_ms(10_500), &mut out);
    said(&mut out);
    m.on_verdict(0, Verdict::Lost("gone".to_owned()), at_ms(11_000), &mut out);
    assert_eq!(
        said(&mut out),
        [
            "lease_lost 10000 attempt 1 token 1",
            "finish run 0",
            "cancelled 10000 attempt 1 token 1"
        ]
    );
}

#[test]
fn a_timeout_is_a_failure_with_its_reason() {
    let limits = Limits {
        timeout: Some(Duration::from_secs(2)),
        ..Limits::default()
    };
    let mut m = model(limits, 5);
    let mut out = Vec::new();
    m.on_timer(at_ms(10_000), &mut out);
    said(&mut out);
    m.on_run_ended(
        0,
        RunEnd::TimedOut,
        Duration::from_secs(2),
        at_ms(12_000),
        &mut out,
    );
    let Some(Action::Emit(event)) = out.pop() else {
        panic!("an event")
    };
    assert_eq!(
        event.kind,
        EventKind::Failed {
            error: "the run did not finish within its timeout of 2s".to_owned(),
            reason: FailureReason::Timeout,
            retry_at: None,
        }
    );
}

fn jittered(name: &str) -> JobModel {
    let mut m = model(
        Limits {
            jitter: Some(Duration::from_secs(8)),
            ..Limits::default()
        },
        5,
    );
    m.spec.name = SmolStr::from(name);
    m
}

#[test]
fn replicas_agree_on_the_jitter_and_never_start_before_it() {
    let delay = |s: i64| limits::jitter_delay("job", t(s), Some(Duration::from_secs(8)));
    let (d10, d20) = (delay(10), delay(20));
    assert_ne!(d10, d20, "the delay differs across fires");
    let start = 10_000 + d10.as_millis() as i64;
    for mut replica in [jittered("job"), jittered("job")] {
        let mut out = Vec::new();
        replica.on_timer(at_ms(10_000), &mut out);
        assert_eq!(said(&mut out), Vec::<String>::new(), "never at T itself");
        assert_eq!(replica.next_wake(), Some(at_ms(start).wall));
        replica.on_wake(at_ms(start - 1), &mut out);
        assert_eq!(said(&mut out), Vec::<String>::new());
        replica.on_wake(at_ms(start + 250), &mut out);
        let Some(Action::Emit(started)) = out.first() else {
            panic!("a start: {out:?}")
        };
        assert_eq!(started.fire_time, t(10), "the fire keeps its identity T");
        assert_eq!(
            started.lateness,
            Some(Duration::from_millis(250)),
            "lateness counts from T + jitter"
        );
        assert_eq!(said(&mut out)[1], "start 10000 token 1");
    }
}

#[test]
fn a_jittered_fire_misfires_only_after_its_delayed_start_plus_the_grace() {
    let mut m = jittered("job");
    let d = limits::jitter_delay("job", t(10), Some(Duration::from_secs(8)));
    let deadline = 10_000 + d.as_millis() as i64 + 5_000;
    let mut out = Vec::new();
    m.on_timer(at_ms(10_000), &mut out);
    assert_eq!(
        m.due_by(at_ms(deadline).wall),
        None,
        "the health check allows the whole jitter"
    );
    m.on_wake(at_ms(deadline), &mut out);
    assert_eq!(said(&mut out)[0], "misfired 10000 attempt 0 token 0");
    assert_eq!(m.due_by(at_ms(10_000 + 8_000 + 5_000).wall), Some(t(10)));
}
