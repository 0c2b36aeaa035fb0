//! Partition ownership in the model (docs/design/ownership.md): fires left to another owner, and
//! the walk of them when the owner changes or before this process claims a later fire.

use std::time::Duration;

use super::spread::Owner;
use super::tests::{acquired, now, said, spec, t};
use super::*;

/// A Redis job every 10 s with a grace of `grace_s` and a standby of 2 s, from second 0.
fn job(grace_s: u64) -> (JobModel, Vec<Action>) {
    let spec = spec(Lock::Redis, Overlap::Skip);
    let mut settings = (*spec).clone();
    settings.misfire_grace = Duration::from_secs(grace_s);
    settings.standby = Duration::from_secs(2);
    let mut m = JobModel::new(Spec::new(spec.name.clone(), settings));
    m.schedule_from(t(0));
    (m, Vec::new())
}

#[test]
fn an_owner_claims_at_the_instant_and_a_watcher_sends_no_claim() {
    let (mut m, mut out) = job(5);
    m.set_owner(Owner::Elsewhere);
    m.on_timer(now(10), &mut out);
    assert!(
        said(&mut out).is_empty(),
        "left to the owner: no claim, no report"
    );
    assert_eq!(m.next_wake(), None, "and no standby wait either");
    assert!(!m.busy());

    // Owner now, even named for another: the fire it left is claimed (the guard tells whether
    // the owner before claimed it), and later fires at the instant.
    m.set_first_here(Some(false));
    m.on_owner_changed(Owner::Here, now(11), &mut out);
    assert_eq!(said(&mut out), ["claim 10"]);
    m.on_claimed(super::Answer::ClaimedByAnother, now(11), &mut out);
    assert_eq!(said(&mut out), ["claimed_elsewhere 10"], "the owner ran it");
    m.on_owner_changed(Owner::Here, now(12), &mut out);
    assert!(said(&mut out).is_empty(), "one walk");
    m.on_timer(now(20), &mut out);
    assert_eq!(said(&mut out), ["claim 20"]);
    m.on_claimed(super::Answer::ClaimedByAnother, now(20), &mut out);
    said(&mut out);
    m.on_timer(now(30), &mut out);
    assert_eq!(said(&mut out), ["claim 30"], "the owner never stands by");
}

#[test]
fn without_a_live_owner_the_standby_rule_holds() {
    let (mut m, mut out) = job(5);
    m.set_owner(Owner::Unknown);
    m.on_timer(now(10), &mut out);
    assert_eq!(said(&mut out), ["claim 10"]);
    m.on_claimed(super::Answer::ClaimedByAnother, now(10), &mut out);
    said(&mut out);
    m.on_timer(now(20), &mut out);
    assert!(said(&mut out).is_empty(), "stands by");
    m.on_wake(now(22), &mut out);
    assert_eq!(said(&mut out), ["claim 20"], "claimed a standby late");
}

#[test]
fn a_new_owner_claims_the_left_fires_inside_their_grace_and_reports_the_older_through_the_guard() {
    let (mut m, mut out) = job(15);
    m.set_owner(Owner::Elsewhere);
    for s in [10, 20, 30, 40] {
        m.on_timer(now(s), &mut out);
    }
    assert!(said(&mut out).is_empty());
    // At second 41 the owner is gone and this process owns the partition: 10 and 20 are past
    // their grace, 30 and 40 are not. Each is decided by the guard on its own: the old owner may
    // have run some, and a later fire claimed meanwhile must not hide the others.
    m.on_owner_changed(Owner::Here, now(41), &mut out);
    assert_eq!(
        said(&mut out),
        [
            "ask report 10 misfired",
            "ask report 20 misfired",
            "claim 30"
        ]
    );
    m.on_claimed(acquired(9), now(41), &mut out);
    assert_eq!(
        said(&mut out),
        ["started 30", "start 30 token 9", "claim 40"],
        "each left fire inside its grace is claimed"
    );
}

#[test]
fn fires_left_are_walked_before_a_later_fire_is_claimed_whoever_owns_the_partition() {
    // The owner's lease ran out and nobody owns the partition yet: this process claims the next
    // fire as without ownership, but first walks what it left.
    let (mut m, mut out) = job(15);
    m.set_owner(Owner::Elsewhere);
    m.on_timer(now(10), &mut out);
    m.on_timer(now(20), &mut out);
    assert!(said(&mut out).is_empty());
    m.set_owner(Owner::Unknown);
    m.on_timer(now(30), &mut out);
    assert_eq!(
        said(&mut out),
        ["ask report 10 misfired", "claim 20"],
        "10 and 20 before 30"
    );
}

#[test]
fn older_fires_left_are_reported_missed_as_one_range() {
    let (mut m, mut out) = job(15);
    m.set_owner(Owner::Elsewhere);
    for s in (10..=120).step_by(10) {
        m.on_timer(now(s), &mut out);
    }
    assert!(said(&mut out).is_empty());
    m.on_owner_changed(Owner::Unknown, now(121), &mut out);
    // 10 to 40 as one range, answered with the fate point; the newest eight each on its own once
    // the range is recorded (a claim or report first would move the fate point past the range).
    assert_eq!(said(&mut out), ["report missed 10..40 (4)"]);
    m.on_missed_reported(
        MissedFires {
            first: t(10),
            last: t(40),
            count: 4,
            walked_all: true,
            cause: MissedCause::LeftToOwner,
        },
        Ok(Some(t(0))),
        now(121),
        &mut out,
    );
    let told = said(&mut out);
    assert_eq!(
        told.first().map(String::as_str),
        Some("misfired 40"),
        "{told:?}"
    );
    for s in [50, 60, 70, 80, 90, 100] {
        assert!(
            told.contains(&format!("ask report {s} misfired")),
            "{told:?}"
        );
    }
    assert_eq!(
        told.last().map(String::as_str),
        Some("claim 110"),
        "{told:?}"
    );
}

#[test]
fn a_process_that_left_nothing_does_not_walk() {
    let (mut m, mut out) = job(15);
    m.on_owner_changed(Owner::Here, now(1), &mut out);
    m.on_timer(now(10), &mut out);
    assert_eq!(said(&mut out), ["claim 10"]);
}

#[test]
fn a_watcher_neither_claims_ahead_nor_reports_a_late_timer() {
    let spec = spec(Lock::Redis, Overlap::Skip);
    let mut settings = (*spec).clone();
    settings.claim_ahead = Duration::from_millis(250);
    let mut m = JobModel::new(Spec::new(spec.name.clone(), settings));
    m.schedule_from(t(0));
    let mut out = Vec::new();
    m.set_owner(Owner::Elsewhere);
    assert_eq!(m.next_wake(), None, "no claim ahead");
    // The timer wakes a minute late (a frozen process): the fires are the owner's to report.
    m.on_timer(now(60), &mut out);
    assert!(said(&mut out).is_empty());
    m.set_owner(Owner::Here);
    assert!(m.next_wake().is_some(), "the owner claims ahead");
}

#[test]
fn fires_whose_owner_was_seen_alive_past_their_deadline_are_not_walked() {
    let (mut m, mut out) = job(5);
    m.set_owner(Owner::Elsewhere);
    for s in [10, 20, 30] {
        m.on_timer(now(s), &mut out);
    }
    // The owner renewed its lease at second 33: fire 10 (deadline 15) and 20 (deadline 25) were
    // its to decide, and it was alive well after; fire 30 (deadline 35) may still be open.
    m.owner_alive_at(t(33));
    m.on_owner_changed(Owner::Unknown, now(34), &mut out);
    assert_eq!(said(&mut out), ["claim 30"]);
}

#[test]
fn an_owner_seen_alive_past_every_fire_left_leaves_nothing_to_walk() {
    let (mut m, mut out) = job(5);
    m.set_owner(Owner::Elsewhere);
    m.on_timer(now(10), &mut out);
    m.on_timer(now(20), &mut out);
    m.owner_alive_at(t(40));
    assert!(!m.busy());
    m.on_owner_changed(Owner::Here, now(41), &mut out);
    assert!(said(&mut out).is_empty());
}

#[test]
fn fires_left_while_the_fate_point_is_awaited_are_recorded_missed_after_the_walk_from_it() {
    let (mut m, mut out) = job(15);
    m.schedule_from(t(100));
    assert!(m.await_fate_point(t(100)));
    // The read of the fate point fails and is asked again; meanwhile the fires are left to an
    // owner, which goes away.
    m.set_owner(Owner::Elsewhere);
    for s in (110..=220).step_by(10) {
        m.on_timer(now(s), &mut out);
    }
    m.on_owner_changed(Owner::Unknown, now(221), &mut out);
    let told = said(&mut out);
    assert!(
        !told.iter().any(|s| s.starts_with("report missed")),
        "recorded now, the range would move the fate point past 60 to 100: {told:?}"
    );
    m.on_fate_point(Some(t(50)), now(222), &mut out);
    let missed_reports = |told: Vec<String>| -> Vec<String> {
        told.into_iter()
            .filter(|s| s.starts_with("report missed"))
            .collect()
    };
    // One report at a time, in fire order: the walk's first.
    assert_eq!(
        missed_reports(said(&mut out)),
        ["report missed 60..100 (5)"]
    );
    let walked = MissedFires {
        first: t(60),
        last: t(100),
        count: 5,
        walked_all: true,
        cause: MissedCause::NoProcess,
    };
    m.on_missed_reported(walked, Ok(Some(t(50))), now(223), &mut out);
    assert_eq!(
        missed_reports(said(&mut out)),
        ["report missed 110..140 (4)"]
    );
}
