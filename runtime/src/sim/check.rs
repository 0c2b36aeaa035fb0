//! The invariants every seed must keep (docs/design/guarantees.md):
//!
//! 1. no fire starts twice, outside a declared data-loss window (the server restarted without its
//!    data after the earlier of the two claims was sent and before the later run started);
//! 2. no two runs of the job take steps at the same time: every step of a run happens before any
//!    later run starts (outside a data-loss window);
//! 3. every fire has at most one fate in each process, and every fire of the checked window either
//!    started somewhere or was reported at warn level (a first report of a skip or a misfire) or
//!    coalesced into a later fire by some process — also the fires whose instant came while every
//!    replica was down, which the replicas that start again walk from the store's fate point
//!    (docs/guide/downtime.md) — unless a claim or report of it by a process that then crashed (or
//!    exited) was never answered (the server may apply it after the crash), or the guard recorded
//!    it as missed for a process that went down before it heard the answer (decided, and told
//!    nowhere), or a process that claimed it ahead crashed before its instant
//!    (docs/design/standby.md), or the server lost its data while the fire was open and before any
//!    later fire was claimed, or every replica was down at its instant before the store held any
//!    record of the job (no claim or report yet, or none since a data loss: the store cannot tell
//!    such fires from those before a new job was deployed, which must not be reported);
//! 4. fencing tokens rise in start order (outside a data-loss window: a claim answered before the
//!    loss may start after a claim answered after it);
//! 5. health never says "on time" while the newest fire whose grace has passed, and every later
//!    one, never started (a run counts from the moment its claim was sent; a claim whose reply
//!    was lost may count for up to [`HEALTH_LAG`] after it was sent — after its claimant woke up,
//!    if it was frozen — or after an outage of the server, until its claimant gave it up): the
//!    newest such fire the model knows of, and, once the model has the store's fate point, the
//!    newest fire whose instant came while every replica was down (before the point is known a
//!    process knows of no fire before its start: a new job is not overdue at its start; a data
//!    loss since the fire makes the store forget it);
//! 6. a fire that started is never reported as "ran elsewhere or did not run at all" by a process
//!    whose claim of it got no answer, while the guard still knew who claimed it (fewer than eight
//!    later fires were claimed; outside a data-loss window);
//! 7. a fire that a process reported as skipped at warn level (its first report: the job was
//!    busy, or no process claimed the fire before a later one) never starts anywhere: a skip
//!    drops the fire for every process, not only for the one that found the job busy (unless the
//!    server lost its data after the fire could first be claimed and before the start);
//! 8. no run starts before its fire's instant on the clock of the process that starts it, also
//!    when the fire was claimed ahead (docs/design/standby.md) — unless that clock was set back
//!    between the claim and the start;
//! 9. the guard never finds a fire busy before the fire's instant on its own clock: a claim sent
//!    ahead (or from a clock that is ahead) only takes a free fire, and leaves the busy decision
//!    to the claim at the instant;
//! 10. a fire the guard recorded as missed after a downtime (a process reported it at warn level
//!     as the fate point it was answered allowed) never starts anywhere, before or after the
//!     report (outside a data-loss window). A report the guard did not record (every try failed,
//!     or it was refused: the fires lie ahead of the server's clock) is the process's own word,
//!     as its text says, and is not checked;
//! 11. where the guard decided who reports a dropped fire — a busy skip, a drop report it
//!     answered, missed fires it recorded — one process reports it at warn level (outside a
//!     data-loss window). Reports on a process's own word may repeat one of these, as their text
//!     says: a drop report or a report of missed fires the guard did not answer (twice beats
//!     never), a fire a stopping process had waiting (the stop does not ask the guard, and the
//!     processes starting after it walk the fire again), a misfire of a process whose clock is
//!     wrong or whose own claim of the fire may have taken effect unseen;
//! 12. one fate per fire across the cluster: a fire that started is never reported at warn level
//!     by any process, unless the report says it is the process's own word;
//! 13. a run asked for ("run now", read from the control feed) starts at most once anywhere
//!     (outside a data-loss window), and starts somewhere or is reported at warn level by some
//!     process — unless it reached no process before the end of the run (each was down or
//!     stopping when it was published: a process started later reads the feed from its end), the
//!     store lost its data (and the feed with it) before it was decided, a claim of it was in
//!     flight or unanswered when its claimant went down, or each process that read it went down
//!     before deciding it, still had it waiting at the end of the run (frozen through its
//!     deadline, or its clock set back), or has a clock behind the request by more than the grace
//!     (the guard takes its claim for one of a run asked for long ago and forgotten);
//! 14. no scheduled fire starts from a claim the server granted while its state said the job was
//!     paused (claims are decided at the server, whatever a replica read from the feed), and a
//!     fire dropped as paused is reported as a first report (at info level: the pause is on
//!     purpose) by at most one process (outside a data-loss window). Invariant 3 counts a paused
//!     skip as the fire's fate, and health is `paused`, not judged, while the model knows of a
//!     pause.

use std::collections::{BTreeMap, BTreeSet};

use super::server::Ms;
use super::{ms_of, Record, RunKey, Scenario};
use crate::events::EventKind;
use crate::health::HealthState;
use crate::model::UNKNOWN_CLAIMANT;

/// How long before the shutdown a fire must lie, beyond its grace, to be checked by invariant 3.
const MARGIN: Ms = 5_000;
/// How long health may still count a claim that will not start (docs/design/guarantees.md): the
/// claimant's response timeout, plus the delivery of its abandon.
pub(super) const HEALTH_LAG: Ms = 10_000;
/// Replicas start within the first two seconds; fires before this are not checked.
const WARM_UP: Ms = 3_000;

pub(super) fn check(sc: &Scenario, rec: &Record) -> Result<(), String> {
    let mut broken = Vec::new();
    // Manual runs have invariant 13 of their own; the others are about scheduled fires (2 and 4
    // hold for every run).
    let scheduled: Vec<super::Start> = rec
        .starts
        .iter()
        .filter(|s| s.manual.is_none())
        .copied()
        .collect();
    let events: Vec<&(Ms, usize, u32, crate::events::Occurrence)> = rec
        .events
        .iter()
        .filter(|(_, _, _, e)| e.manual.is_none())
        .collect();
    let loss_between = |a: Ms, b: Ms| rec.data_losses.iter().any(|l| a < *l && *l <= b);
    // Two runs are excused when the server lost its data after the earlier of their claims and
    // before the later of their starts.
    let loss_around =
        |x: &super::Start, y: &super::Start| loss_between(x.claimed.min(y.claimed), x.at.max(y.at));

    // 1. Each fire starts once.
    let mut by_fire: BTreeMap<Ms, Vec<&super::Start>> = BTreeMap::new();
    for s in &scheduled {
        by_fire.entry(s.fire).or_default().push(s);
    }
    for (fire, starts) in &by_fire {
        for pair in starts.windows(2) {
            if !loss_around(pair[0], pair[1]) {
                broken.push(format!(
                    "1: fire {fire} started twice: at {} ms by {:?} and at {} ms by {:?}",
                    pair[0].at, pair[0].key, pair[1].at, pair[1].key
                ));
            }
        }
    }

    // The server's clock stepped forward after `a` was claimed and before `b` started: Redis
    // expires keys on its wall clock (docs/operations/redis.md), so `a`'s lease ended early.
    let stepped_forward = |a: &super::Start, b: &super::Start| {
        rec.server_steps
            .iter()
            .any(|(t, by)| *by > 0 && a.claimed.min(b.claimed) <= *t && *t <= a.at.max(b.at))
    };

    // 2. No step of a run after a later run started.
    let mut last_step: BTreeMap<RunKey, Ms> = BTreeMap::new();
    for (at, key) in &rec.steps {
        last_step.insert(*key, *at);
    }
    for (i, a) in rec.starts.iter().enumerate() {
        let Some(a_last) = last_step.get(&a.key) else {
            continue;
        };
        for b in &rec.starts[i + 1..] {
            if b.key != a.key && *a_last > b.at && !loss_around(a, b) && !stepped_forward(a, b) {
                broken.push(format!(
                    "2: run {:?} (fire {}) took a step at {a_last} ms, after run {:?} (fire {}) started at {} ms",
                    a.key, a.fire, b.key, b.fire, b.at
                ));
            }
        }
    }

    // Whether the fire's instant came while every replica was down.
    let in_gap = |fire: Ms| {
        rec.all_down
            .iter()
            .any(|(from, until)| *from <= fire && fire < *until)
    };

    // 3. One fate per fire in each process; every fire run or reported somewhere.
    let mut fates: BTreeMap<(usize, u32, Ms), Vec<&'static str>> = BTreeMap::new();
    let mut covered: BTreeSet<Ms> = BTreeSet::new();
    for s in &scheduled {
        covered.insert(s.fire);
    }
    for (_, r, inc, e) in &events {
        let fires: Vec<Ms> = match &e.kind {
            EventKind::Misfired { count, first, .. } => (0..*count as i64)
                .map(|k| ms_of(*first) + k * sc.period)
                .collect(),
            EventKind::Started
            | EventKind::Skipped { .. }
            | EventKind::Coalesced { .. }
            | EventKind::ClaimedElsewhere => vec![ms_of(e.fire_time)],
            _ => continue,
        };
        let reported_here = match &e.kind {
            EventKind::Misfired { .. } | EventKind::Skipped { .. } => e.first_report,
            EventKind::Coalesced { .. } => true,
            _ => false,
        };
        for f in fires {
            fates.entry((*r, *inc, f)).or_default().push(e.kind.name());
            if reported_here {
                covered.insert(f);
            }
        }
    }
    for ((r, inc, fire), kinds) in &fates {
        if kinds.len() > 1 {
            broken.push(format!(
                "3: fire {fire} had {} fates in replica {r} (incarnation {inc}): {kinds:?}",
                kinds.len()
            ));
        }
    }
    // A store that lost its data forgets which recent fires were claimed: a fire still open at
    // the loss and older than every claim made after it may be passed over unreported.
    let forgotten = |fire: Ms| {
        rec.data_losses.iter().any(|loss| {
            let first_after = scheduled
                .iter()
                .filter(|s| s.claimed >= *loss)
                .map(|s| s.fire)
                .min();
            *loss <= fire + sc.grace + MARGIN && first_after.is_none_or(|f| fire < f)
        })
    };
    // Fires the guard recorded as missed for a process that went down before it heard the
    // answer, or that heard it only after the store lost its data (and with it the answer it
    // kept for a retry): decided, and told nowhere.
    let unheard: BTreeSet<Ms> = rec
        .missed_applied
        .iter()
        .filter(|(at, r, inc, _, _, last)| {
            // A process may walk more than once (fires it left to a partition's owner), so the
            // answer heard is that of the same report, after it was applied.
            !rec.missed_heard.iter().any(|h| {
                h.replica == *r
                    && h.incarnation == *inc
                    && h.last == *last
                    && h.at >= *at
                    && !loss_between(*at, h.at)
            })
        })
        .flat_map(|(_, _, _, before, first, last)| {
            fires_through((*before).max(Some(first - 1)), *last, sc.period)
        })
        .collect();
    // A fire of a downtime gap that came before the store held any record of the job (no claim
    // or report yet, or none since a data loss): the store cannot tell such fires from those
    // before a new job was deployed, which must not be reported.
    // So is a fire of a gap during which (or right after which, while the replicas read the
    // point) the store lost its data: it forgot the fate point; and one that a claim of a later
    // fire passed over before any replica that knew of it ran again.
    let unrecorded = |fire: Ms| {
        let recorded = rec.first_records.iter().filter(|t| **t <= fire).max();
        let lost = rec.data_losses.iter().filter(|t| **t <= fire).max();
        // Each span the fire was still open (inside its grace) when it began, or came before it
        // ended on the clock of the replica that ended it (ahead by up to a claim's tolerance):
        // a fire a walk took after one span may be left open again by the next.
        let excused_by = |end: Ms| {
            // Up to a few seconds after the gap, while the replicas read the point and walk.
            let forgot = rec
                .data_losses
                .iter()
                .any(|l| fire < *l && *l <= end + HEALTH_LAG);
            // Passed over: a later fire was taken or reported dropped before the span ended (by
            // a replica whose clock is ahead), so the fate point lies past the fire and no walk
            // sees it.
            let passed_over = rec
                .taken
                .iter()
                .chain(&rec.reports_applied)
                .any(|(at, f)| *f > fire && *at < end);
            // Nobody walked before the end of the run: the next start would.
            let unwalked = end >= rec.stop_at;
            forgot
                || passed_over
                || unwalked
                || recorded.is_none_or(|r| lost.is_some_and(|l| l >= r))
        };
        rec.unattended
            .iter()
            .filter(|(from, until)| {
                *from <= fire + sc.grace && fire <= *until + super::server::AHEAD_TOLERANCE
            })
            .any(|(_, until)| excused_by(*until))
    };
    // Taken early: while the server's clock was ahead, a replica whose clock was ahead too
    // claimed, dropped or reported missed a later fire more than a claim's tolerance before its
    // instant, while this one was still open, and the other replicas took this one as past
    // (docs/design/guarantees.md, "What does not hold"): nothing can tell two clocks wrong the
    // same way.
    let taken_early = |fire: Ms| {
        let early = |at: Ms, f: Ms| {
            f > fire && at + super::server::AHEAD_TOLERANCE < f && at <= fire + sc.grace
        };
        rec.taken.iter().any(|(at, f)| early(*at, *f))
            || rec.decided.iter().any(|(_, f, at)| early(*at, *f))
            || rec.reports_applied.iter().any(|(at, f)| early(*at, *f))
            || rec
                .missed_applied
                .iter()
                .any(|(at, _, _, _, _, last)| early(*at, *last))
    };
    // Left open at the end: no process decided the fire before the run ended, each frozen from
    // before the fire's deadline (on its clock) to the end, or with a clock so far behind that it
    // had not reached the deadline by then. They decide it when they run again, or when their
    // clock gets there; a shutdown at the end leaves it to the next start's walk.
    let left_open = |fire: Ms| {
        let decided_before_end = events
            .iter()
            .any(|(at, _, _, e)| *at < rec.stop_at && ms_of(e.fire_time) == fire);
        !decided_before_end
            && (0..sc.replicas).all(|r| {
                let offset = clock_offset(sc, r, rec.stop_at);
                let deadline = fire + sc.grace - offset;
                deadline >= rec.stop_at || frozen_from(rec, r, deadline)
            })
    };
    // Replica `r` could not decide `fire` before the end: its clock had not reached the fire's
    // deadline, or it was gone from before the deadline to the end, or frozen from then on.
    let could_not_decide = |r: usize, fire: Ms| {
        let deadline = fire + sc.grace - clock_offset(sc, r, rec.stop_at);
        let gone_since = rec
            .ends
            .iter()
            .filter(|(_, er, _)| *er == r)
            .map(|(at, _, _)| *at)
            .max();
        deadline >= rec.stop_at
            || (rec.down_at_stop.contains(&r) && gone_since.is_some_and(|at| at <= deadline))
            || frozen_from(rec, r, deadline)
    };
    // Left to a partition's owner that went away without deciding it, and still left at the
    // stop — by a process frozen until then, or one that woke too shortly before it to hear
    // that the owner had gone — or waiting in a process when it stopped (held back for a report
    // of missed fires before it, say), while no other process could decide it: a stopping
    // process does not decide them, and the next start's walk reports them, as they lie after
    // the job's fate point (docs/guide/downtime.md).
    let left_at_stop = |fire: Ms| {
        let left_by = |r: usize| {
            rec.left_at_stop
                .iter()
                .any(|(lr, left)| *lr == r && left.contains(&fire))
        };
        rec.fate_point_at_stop.is_none_or(|point| point < fire)
            && (0..sc.replicas).any(left_by)
            && (0..sc.replicas).all(|r| left_by(r) || could_not_decide(r, fire))
    };
    // Waiting in a shard that stalled for good, while no other process could decide it: it is
    // held up with the shard (docs/design/guarantees.md, "A shard held up by blocking code").
    let stalled_with = |fire: Ms| {
        rec.stalled_open.iter().any(|(stalled, f)| {
            *f == fire && (0..sc.replicas).all(|r| r == *stalled || could_not_decide(r, fire))
        })
    };
    let first = (WARM_UP / sc.period + 1) * sc.period;
    let last = rec.stop_at - sc.grace - MARGIN;
    let mut fire = first;
    while fire <= last {
        if !covered.contains(&fire)
            && !rec.crash_lost.contains(&fire)
            && !unheard.contains(&fire)
            && !forgotten(fire)
            && !unrecorded(fire)
            && !taken_early(fire)
            && !left_open(fire)
            && !left_at_stop(fire)
            && !stalled_with(fire)
        {
            broken.push(format!(
                "3: fire {fire} neither started nor was reported at warn level by any replica"
            ));
        }
        fire += sc.period;
    }

    // 4. Fencing tokens rise in start order (outside a data-loss window, and unless the
    // server's clock stepped forward between the two claims and the later start: the earlier
    // lease expired early, as for invariant 2).
    for pair in rec.starts.windows(2) {
        if pair[1].token <= pair[0].token
            && !loss_around(&pair[0], &pair[1])
            && !stepped_forward(&pair[1], &pair[0])
        {
            broken.push(format!(
                "4: fencing token {} (fire {}, at {} ms) is not above {} (fire {}, at {} ms)",
                pair[1].token, pair[1].fire, pair[1].at, pair[0].token, pair[0].fire, pair[0].at
            ));
        }
    }

    // 5. Health is never "on time" for a fire that nobody started: the newest fire the model
    // says should have started, or, once the model has the store's fate point, the newest fire
    // whose grace passed on the replica's clock when its instant came while every replica was
    // down (a fire of a downtime gap, which the model did not see itself).
    // A claim whose reply was lost counts until the claimant gave it up: that takes up to a
    // response timeout and the delivery of the abandon. While the server cannot be reached,
    // nothing can be corrected. A frozen claimant gives its claim up only once it runs again.
    let excused = |at: Ms, due: Ms| {
        let woke = |r: usize, sent: Ms| {
            rec.pauses
                .iter()
                .filter(|(p, from, until)| *p == r && *until > sent && *from <= at)
                .map(|(_, _, until)| *until)
                .max()
                .unwrap_or(sent)
                .max(sent)
        };
        let in_flight = rec.claims.iter().any(|(sent, fire, r)| {
            *fire >= due && *sent <= at && at < woke(*r, *sent) + HEALTH_LAG
        });
        let outage = rec
            .outages
            .iter()
            .any(|(from, until)| *from <= at && at < until + HEALTH_LAG);
        let started = scheduled.iter().any(|s| s.fire >= due && s.claimed <= at);
        let lost_to_crash = rec.crash_lost.iter().any(|f| *f >= due);
        in_flight || outage || started || lost_to_crash
    };
    for h in rec
        .health
        .iter()
        .filter(|h| matches!(h.state, HealthState::OnTime))
    {
        let (at, r) = (h.at, h.replica);
        // The newest fire whose grace passed on the replica's clock and in true time.
        let newest = (h.local.min(at) - sc.grace).div_euclid(sc.period) * sc.period;
        // A replica whose clock is far off judges on its own time (see `Sim::honest`).
        let skew = h.local - at;
        let sane = skew <= super::server::AHEAD_TOLERANCE && skew > -sc.grace;
        let gap_fire = (sane && h.point_known && newest >= WARM_UP && in_gap(newest))
            .then_some(newest)
            // A store that lost its data since knows of no fire before its loss, and one that
            // held no record of the job then cannot tell the fire from one before a first deploy.
            .filter(|d| !loss_between(*d, at) && !unrecorded(*d));
        // Fires before every replica had started are not checked.
        let due = h.due.filter(|d| *d >= WARM_UP);
        for (due, what) in [(due, "fire"), (gap_fire, "gap fire")] {
            let Some(due) = due else {
                continue;
            };
            if !excused(at, due) {
                broken.push(format!(
                    "5: at {at} ms replica {r} reported on time, but {what} {due} (past its grace) and every later fire never started"
                ));
                break;
            }
        }
    }

    // 6. A fire that started elsewhere is not reported as "maybe not run" while the guard still
    // knows who claimed it: fewer than eight later fires were claimed before the report.
    for (at, r, _, e) in &events {
        let EventKind::Misfired { reason, .. } = &e.kind else {
            continue;
        };
        if reason != UNKNOWN_CLAIMANT {
            continue;
        }
        let fire = ms_of(e.fire_time);
        let Some(start) = scheduled.iter().find(|s| s.fire == fire) else {
            continue;
        };
        let later_claims = rec
            .taken
            .iter()
            .filter(|(granted, f)| *f > fire && granted <= at)
            .map(|(_, f)| f)
            .collect::<BTreeSet<_>>()
            .len();
        if later_claims < 8 && !loss_between(start.claimed, *at) {
            broken.push(format!(
                "6: at {at} ms replica {r} reported fire {fire} as maybe not run, but {:?} started it and the guard knew its claimant ({later_claims} later claims)",
                start.key
            ));
        }
    }

    // 7. A fire reported skipped is never started, before or after the report.
    for (at, r, inc, e) in &events {
        if !(e.first_report && matches!(e.kind, EventKind::Skipped { .. })) {
            continue;
        }
        // Answered without a record (the fire lay ahead of the server's clock), or not answered
        // at all: the reporter's own word, as for invariant 11.
        let key = (*r, *inc, ms_of(e.fire_time));
        if rec.unrecorded.contains(&key) || rec.own_word.contains(&key) {
            continue;
        }
        let fire = ms_of(e.fire_time);
        // The report may have been recorded as soon as the fire could be claimed, long before
        // the process heard of it (it was frozen, or the answer was slow).
        let recordable = fire - super::server::AHEAD_TOLERANCE - 1;
        for s in scheduled.iter().filter(|s| s.fire == fire) {
            // A report made after eight later fires were claimed: the guard no longer knew who
            // claimed the fire (as for invariant 12). The ring keeps the newest fires, so later
            // fires claimed before this one count too (a clock ahead took them early).
            let since = rec
                .data_losses
                .iter()
                .filter(|l| **l <= *at)
                .max()
                .copied()
                .unwrap_or(Ms::MIN);
            let forgot = rec
                .taken
                .iter()
                .filter(|(t, f)| since <= *t && *t <= *at && *f > fire)
                .count()
                >= 8;
            // The guard decided the skip up to a response timeout before the process heard it.
            if !forgot && !loss_between(recordable.min(s.claimed).min(*at - 2_000), s.at.max(*at)) {
                broken.push(format!(
                    "7: at {at} ms replica {r} reported fire {fire} as skipped, and {:?} started it at {} ms",
                    s.key, s.at
                ));
            }
        }
    }

    // 8. No start before the fire's instant, on the starter's clock, unless that clock was set
    // back after the claim was sent (the instant had come when it was sent).
    let set_back = |s: &super::Start| {
        sc.faults.iter().any(|(at, f)| {
            matches!(f, super::Fault::ClockStep { replica, by } if *replica == s.key.replica && *by < 0)
                && s.claimed <= *at
                && *at <= s.at
        })
    };
    for s in scheduled
        .iter()
        .filter(|s| s.local < s.fire && !set_back(s))
    {
        broken.push(format!(
            "8: {:?} started fire {} at {} ms, its clock at {} ms: before the fire's instant",
            s.key, s.fire, s.at, s.local
        ));
    }

    // 9. No busy answer before the fire's instant on the server's clock.
    for (at, fire, _) in rec.decided.iter().filter(|(at, fire, _)| at < fire) {
        broken.push(format!(
            "9: the server answered a claim of fire {fire} as busy at {at} ms, before the fire's instant"
        ));
    }

    // 10. A fire the guard recorded as missed after a downtime, and that a process therefore
    // reported at warn level, never starts anywhere, before or after the report.
    let mut missed_by: BTreeMap<Ms, Vec<(Ms, usize, u32)>> = BTreeMap::new();
    for h in &rec.missed_heard {
        let Ok(before) = h.before else {
            continue;
        };
        for fire in fires_through(before.max(Some(h.first - 1)), h.last, sc.period) {
            missed_by
                .entry(fire)
                .or_default()
                .push((h.at, h.replica, h.incarnation));
            for s in scheduled.iter().filter(|s| s.fire == fire) {
                // The guard recorded them up to three tries (of 2 s each) before the answer.
                let recorded = h.at - 7_000;
                if !loss_between(s.claimed.min(recorded), s.at.max(h.at)) {
                    broken.push(format!(
                        "10: at {} ms replica {} reported fire {fire} missed, and {:?} started it at {} ms",
                        h.at, h.replica, s.key, s.at
                    ));
                }
            }
        }
    }

    // 11. Where the guard decided who reports a dropped fire (a busy skip, a drop report it
    // answered, missed fires it recorded), one process reports it at warn level (outside a
    // data-loss window).
    for (at, r, inc, fire) in &rec.guard_reports {
        missed_by.entry(*fire).or_default().push((*at, *r, *inc));
    }
    for (fire, reports) in &missed_by {
        for (i, a) in reports.iter().enumerate() {
            for b in &reports[i + 1..] {
                let other = (a.1, a.2) != (b.1, b.2);
                // A report may be recorded as soon as the fire can be claimed, or earlier by a
                // process whose clock is ahead, up to three tries before it was heard.
                let recordable = (fire - super::server::AHEAD_TOLERANCE).min(a.0.min(b.0) - 7_000);
                if other && !loss_between(recordable - 1, a.0.max(b.0)) {
                    broken.push(format!(
                        "11: fire {fire} was reported at warn level by replica {} (incarnation {}) at {} ms and by replica {} (incarnation {}) at {} ms, both as the guard decided",
                        a.1, a.2, a.0, b.1, b.2, b.0
                    ));
                }
            }
        }
    }

    // 12. One fate per fire across the cluster: a fire that started is never reported at warn
    // level (a first report of a skip or a misfire) by any process (outside a data-loss window),
    // unless the report is the process's own word, as its text says: the guard did not answer
    // the report (or could not record missed fires), the process's clock is ahead of the
    // server's, or its own claim of the fire may have taken effect unseen. A timer woken past
    // several fires records them through the guard as any missed fires: its report is checked.
    for (at, r, inc, e) in &events {
        if !e.first_report || rec.own_word.contains(&(*r, *inc, ms_of(e.fire_time))) {
            continue;
        }
        let own_word = |reason: &str| {
            reason.contains("the guard could not record them")
                || reason.contains("told on this process's own word")
                || reason.contains("clock is ahead")
                || reason == UNKNOWN_CLAIMANT
        };
        match &e.kind {
            EventKind::Misfired { reason, .. } | EventKind::Skipped { reason, .. }
                if own_word(reason) =>
            {
                continue
            }
            _ => {}
        }
        let (first, last) = match &e.kind {
            EventKind::Misfired { count, first, .. } if *count > 1 => {
                (ms_of(*first), ms_of(e.fire_time))
            }
            EventKind::Misfired { .. } | EventKind::Skipped { .. } => {
                (ms_of(e.fire_time), ms_of(e.fire_time))
            }
            _ => continue,
        };
        // The guard knows who claimed a fire while fewer than eight later fires were claimed
        // (as invariant 6); after that a report is the process's word on a fire it lost track of.
        let forgotten = |fire: Ms| {
            rec.taken
                .iter()
                .filter(|(t, f)| *t <= *at && *f > fire)
                .count()
                >= 8
        };
        for s in scheduled
            .iter()
            .filter(|s| first <= s.fire && s.fire <= last && !forgotten(s.fire))
        {
            let recordable = s.fire - super::server::AHEAD_TOLERANCE - 1;
            // Any grant of the fire before the loss counts too (the reporter's own claim, say).
            let granted = rec
                .taken
                .iter()
                .filter(|(_, f)| *f == s.fire)
                .map(|(t, _)| *t)
                .min()
                .unwrap_or(s.claimed);
            if !loss_between(
                recordable.min(s.claimed).min(*at - 2_000).min(granted),
                s.at.max(*at),
            ) {
                broken.push(format!(
                    "12: at {at} ms replica {r} reported fire {} at warn level ({:?}), and {:?} started it at {} ms",
                    s.fire, e.kind, s.key, s.at
                ));
            }
        }
    }

    // 13. A run asked for starts at most once, and starts somewhere or is reported at warn
    // level by some process.
    let mut manual_starts: BTreeMap<u64, Vec<&super::Start>> = BTreeMap::new();
    for s in &rec.starts {
        if let Some(id) = s.manual {
            manual_starts.entry(id).or_default().push(s);
        }
    }
    for (id, starts) in &manual_starts {
        for pair in starts.windows(2) {
            if !loss_around(pair[0], pair[1]) {
                broken.push(format!(
                    "13: run {id:016x} asked for started twice: at {} ms by {:?} (token {}) and at {} ms by {:?} (token {})",
                    pair[0].at, pair[0].key, pair[0].token, pair[1].at, pair[1].key, pair[1].token
                ));
            }
        }
    }
    // Whether incarnation `inc` of replica `r` told anything of the run: a start, a report, or
    // that another claimant took it (`claimed_elsewhere`: that claimant's fate is checked). A
    // stopping process leaves the run to the others without a first report.
    let decided = |r: usize, inc: u32, id: u64| {
        rec.events
            .iter()
            .any(|(_, er, ei, e)| (*er, *ei) == (r, inc) && e.manual == Some(id) && e.first_report)
    };
    for (published, id) in &rec.requests {
        // Decided after the end of the run (a replica's clock behind by up to the grace waits up
        // to a grace longer).
        if published + 2 * sc.grace + MARGIN > rec.stop_at || manual_starts.contains_key(id) {
            continue;
        }
        let reported = rec.events.iter().any(|(_, _, _, e)| {
            e.manual == Some(*id)
                && e.first_report
                && matches!(
                    e.kind,
                    EventKind::Misfired { .. } | EventKind::Skipped { .. }
                )
        });
        if reported {
            continue;
        }
        let takers: Vec<(usize, u32)> = rec
            .triggered
            .iter()
            .filter(|(_, _, _, t)| t == id)
            .map(|(_, r, inc, _)| (*r, *inc))
            .collect();
        // The request reached no process before the end of the run: each was down or stopping
        // when it was published (a process started later reads the feed from its end), or read it
        // only after the end.
        let unread = takers.is_empty();
        // The store lost its data (the feed with it, and the run's claim) before the run was
        // decided.
        let lost = loss_between(*published, published + 2 * sc.grace + HEALTH_LAG);
        // A claim of it was in flight, or never answered, when its claimant went down: it may
        // have taken the run, which nobody can report.
        let crashed = rec.manual_crash_lost.contains(id);
        // The events of the run in one process.
        let told = |r: usize, inc: u32| {
            rec.events
                .iter()
                .filter(move |(_, er, ei, e)| (*er, *ei) == (r, inc) && e.manual == Some(*id))
        };
        // Each process that read it either went down (crashed, or stopped and left it to the
        // processes that go on) before it decided the run — nobody else knows of it
        // (docs/design/guarantees.md, "What does not hold") —, or still had it waiting at the end
        // of the run: frozen through its deadline, or its clock, set back, had not reached it.
        // Or its clock was behind the request's stamp by more than the grace: it stamped the run
        // with its own clock, which the guard takes for a run asked for long ago and forgotten
        // (`claimed_elsewhere`), as it takes every fire of such a clock.
        let excused_reader = |(r, inc): &(usize, u32)| {
            let gone =
                rec.ends.iter().any(|(_, er, ei)| (er, ei) == (r, inc)) && !decided(*r, *inc, *id);
            let waiting = told(*r, *inc).any(|(at, _, _, e)| {
                let skew = ms_of(e.at) - at;
                let deadline = ms_of(e.fire_time) + sc.grace - skew;
                let frozen = rec
                    .pauses
                    .iter()
                    .any(|(p, from, until)| p == r && *from <= deadline && *until >= rec.stop_at);
                !e.first_report && *at >= rec.stop_at && (deadline >= rec.stop_at || frozen)
            });
            let behind = told(*r, *inc).any(|(_, _, _, e)| {
                matches!(e.kind, EventKind::ClaimedElsewhere)
                    && ms_of(e.fire_time) < published - sc.grace
            });
            gone || waiting || behind
        };
        let readers_gone = takers.iter().all(excused_reader);
        // The server's clock stepped forward within the run's grace: the store forgets runs by
        // its clock, so it forgot this one early, and a claimant's retry of it is answered
        // "already ran" (docs/design/guarantees.md, "What does not hold").
        let forgotten_early = rec
            .server_steps
            .iter()
            .any(|(t, by)| *by > 0 && *published <= *t && *t <= published + sc.grace);
        if !(unread || lost || crashed || readers_gone || forgotten_early) {
            broken.push(format!(
                "13: run {id:016x} asked for at {published} ms neither started nor was reported at warn level by any replica (read by {takers:?})"
            ));
        }
    }

    // 14. No scheduled fire starts from a claim the server granted while its state said the job
    // was paused, and a fire dropped as paused is reported once (a first report, logged at info
    // level: the pause is on purpose) by at most one process (outside a data-loss window).
    for (at, fire) in &rec.paused_grants {
        for s in scheduled.iter().filter(|s| s.fire == *fire) {
            broken.push(format!(
                "14: the server granted fire {fire} at {at} ms while the job was paused, and {:?} started it at {} ms",
                s.key, s.at
            ));
        }
    }
    let mut paused_reports: BTreeMap<Ms, Vec<(Ms, usize, u32)>> = BTreeMap::new();
    for (at, r, inc, e) in &events {
        if e.first_report && matches!(e.kind, EventKind::Skipped { paused: true, .. }) {
            paused_reports
                .entry(ms_of(e.fire_time))
                .or_default()
                .push((*at, *r, *inc));
        }
    }
    for (fire, reports) in &paused_reports {
        for (i, a) in reports.iter().enumerate() {
            for b in &reports[i + 1..] {
                let recordable = (fire - super::server::AHEAD_TOLERANCE).min(a.0.min(b.0) - 7_000);
                if (a.1, a.2) != (b.1, b.2) && !loss_between(recordable - 1, a.0.max(b.0)) {
                    broken.push(format!(
                        "14: fire {fire} was reported as paused by replica {} (incarnation {}) at {} ms and by replica {} (incarnation {}) at {} ms",
                        a.1, a.2, a.0, b.1, b.2, b.0
                    ));
                }
            }
        }
    }

    if broken.is_empty() {
        return Ok(());
    }
    broken.truncate(8);
    Err(broken.join("\n"))
}

/// The fires after `after` (all when `None`) up to `last`.
fn fires_through(after: Option<Ms>, last: Ms, period: Ms) -> impl Iterator<Item = Ms> {
    let first = match after {
        Some(a) => (a.div_euclid(period) + 1) * period,
        None => 0,
    };
    (first..=last).step_by(period as usize)
}

/// With every replica up and no message lost, after the first fires (which every replica claims
/// at once, knowing nothing yet): only one replica claims each fire before its standby has
/// passed — the one named first, when one is. Checked by the quiet-cluster test, not for every
/// seed: faults move the ownership.
pub(super) fn one_claim_at_each_instant(sc: &Scenario, rec: &Record) -> Result<(), String> {
    let standby = sc.standby.min(sc.grace / 2).min(sc.period / 2);
    let skew = sc.skew.iter().map(|s| s.abs()).max().unwrap_or(0);
    let early = |fire: Ms| fire + standby - skew - sc.delay_max;
    let mut broken = Vec::new();
    let mut fire = (WARM_UP / sc.period + 3) * sc.period;
    while fire + sc.period < rec.stop_at {
        let at_instant: BTreeSet<usize> = rec
            .claims
            .iter()
            .filter(|(sent, f, _)| *f == fire && *sent < early(fire))
            .map(|(_, _, r)| *r)
            .collect();
        if at_instant.len() != 1 {
            broken.push(format!(
                "fire {fire} was claimed before its standby ({standby} ms) by replicas {at_instant:?}"
            ));
        } else if let Some(named) = sc.named.filter(|n| !at_instant.contains(n)) {
            broken.push(format!(
                "fire {fire} was claimed before its standby by replicas {at_instant:?}, not by replica {named}, which is named first"
            ));
        }
        fire += sc.period;
    }
    if broken.is_empty() {
        return Ok(());
    }
    broken.truncate(8);
    Err(broken.join("\n"))
}

/// With partition ownership on, every replica up and no message lost: once the members know
/// each other and the partition has an owner (a few renewals after the start), each fire is
/// claimed by one replica only — the owner — and the others send no claim at all, not even a
/// standby later (docs/design/ownership.md).
pub(super) fn only_the_owner_claims(sc: &Scenario, rec: &Record) -> Result<(), String> {
    let settled = WARM_UP + 6 * super::OWN_EVERY;
    let mut broken = Vec::new();
    let mut fire = (settled / sc.period + 1) * sc.period;
    while fire + sc.period < rec.stop_at {
        let claimants: BTreeSet<usize> = rec
            .claims
            .iter()
            .filter(|(_, f, _)| *f == fire)
            .map(|(_, _, r)| *r)
            .collect();
        if claimants.len() != 1 {
            broken.push(format!(
                "fire {fire} was claimed by replicas {claimants:?}, not by its owner alone"
            ));
        }
        fire += sc.period;
    }
    if broken.is_empty() {
        return Ok(());
    }
    broken.truncate(8);
    Err(broken.join("\n"))
}

/// How far replica `r`'s clock is off true time at `at`: its skew and its clock's steps so far.
fn clock_offset(sc: &Scenario, r: usize, at: Ms) -> Ms {
    let steps: Ms = sc
        .faults
        .iter()
        .filter_map(|(t, f)| match f {
            super::Fault::ClockStep { replica, by } if *replica == r && *t <= at => Some(*by),
            _ => None,
        })
        .sum();
    sc.skew.get(r).copied().unwrap_or(0) + steps
}

/// Whether replica `r` was frozen without a break from `from` or earlier to the end of the run.
fn frozen_from(rec: &Record, r: usize, from: Ms) -> bool {
    let mut spans: Vec<(Ms, Ms)> = rec
        .pauses
        .iter()
        .filter(|(p, _, _)| *p == r)
        .map(|(_, a, b)| (*a, *b))
        .collect();
    spans.sort_unstable();
    let mut reach: Option<(Ms, Ms)> = None;
    for (a, b) in spans {
        reach = match reach {
            Some((start, end)) if a <= end => Some((start, end.max(b))),
            _ if b < from => None,
            _ => Some((a, b)),
        };
        if let Some((start, end)) = reach {
            if start <= from && end >= rec.stop_at {
                return true;
            }
        }
    }
    false
}
