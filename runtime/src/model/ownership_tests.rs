//! Partition ownership in the model (docs/design/ownership.md): fires left to another owner, and
//! the walk of them before this process claims any later fire.

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

    // Owner now, even named for another and after losing a fire: at the instant, once the fire
    // it left is walked.
    m.set_first_here(Some(false));
    m.on_owner_changed(Owner::Here, &mut out);
    assert_eq!(said(&mut out), ["read fate point"]);
    m.on_fate_point(Some(t(10)), now(11), &mut out);
    assert!(said(&mut out).is_empty(), "the owner claimed it");
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
fn a_new_owner_claims_the_left_fires_inside_their_grace_and_reports_the_older_once() {
    let (mut m, mut out) = job(15);
    m.set_owner(Owner::Elsewhere);
    for s in [10, 20, 30, 40] {
        m.on_timer(now(s), &mut out);
    }
    assert!(said(&mut out).is_empty());
    // At second 41 the owner is gone and this process owns the partition: the store's fate
    // point is fire 10 (the old owner ran it); 20 is past its grace, 30 and 40 are not.
    m.on_owner_changed(Owner::Here, &mut out);
    assert_eq!(said(&mut out), ["read fate point"]);
    m.on_owner_changed(Owner::Here, &mut out);
    assert!(said(&mut out).is_empty(), "one walk");
    m.on_fate_point(Some(t(10)), now(41), &mut out);
    assert_eq!(said(&mut out), ["report missed 20..20 (1)"]);
    m.on_missed_reported(
        MissedFires {
            first: t(20),
            last: t(20),
            count: 1,
            walked_all: true,
        },
        Ok(Some(t(10))),
        now(41),
        &mut out,
    );
    assert_eq!(said(&mut out), ["misfired 20", "claim 30"]);
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
    // fire as without ownership, but first walks what it left, since that claim would move the
    // fate point past the fires left.
    let (mut m, mut out) = job(15);
    m.set_owner(Owner::Elsewhere);
    m.on_timer(now(10), &mut out);
    m.on_timer(now(20), &mut out);
    assert!(said(&mut out).is_empty());
    m.set_owner(Owner::Unknown);
    m.on_timer(now(30), &mut out);
    assert_eq!(said(&mut out), ["read fate point"], "no claim of 30 yet");
    m.on_fate_point(Some(t(10)), now(30), &mut out);
    assert_eq!(said(&mut out), ["claim 20"], "20 first, then 30");
}

#[test]
fn a_job_whose_owner_never_claimed_walks_from_the_oldest_fire_it_kept() {
    let (mut m, mut out) = job(15);
    m.set_owner(Owner::Elsewhere);
    m.on_timer(now(10), &mut out);
    m.on_timer(now(20), &mut out);
    m.on_owner_changed(Owner::Here, &mut out);
    assert_eq!(said(&mut out), ["read fate point"]);
    // The store knows nothing of the job: at start that means nothing to catch up, but these
    // fires were left to an owner that never claimed one.
    m.on_fate_point(None, now(21), &mut out);
    assert_eq!(said(&mut out), ["claim 10"]);
}

#[test]
fn a_process_that_left_nothing_does_not_walk() {
    let (mut m, mut out) = job(15);
    m.on_owner_changed(Owner::Here, &mut out);
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
