//! Partition ownership in the job model (docs/design/ownership.md): a shared job whose partition
//! another live process owns leaves its fires to that owner, and walks the fires it left once the
//! owner changes, or before it claims a later fire itself.

use chrono::{DateTime, TimeDelta, Utc};

use super::spread::Owner;
use super::{Action, JobModel, MissedCause, Now};
use crate::events::EventKind;
use crate::fire::human;

/// How many of the newest fires left are each decided by the guard on their own, a claim inside
/// their grace or a drop report after it: the fires an owner that went away may have left open,
/// one lease and a read of the feed long, and no more than the guard's record of recent claims.
/// Older fires left are reported missed as one range, which the guard answers with the fate
/// point, as after downtime.
const LEFT_ONE_BY_ONE: usize = 8;

/// How long after a fire's misfire deadline its owner must have been seen alive for the fire to
/// count as decided by it: the owner's clock may be off this one's by up to a second (a process
/// further off owns nothing), and its shard may take a moment to report the fire.
const ALIVE_MARGIN: std::time::Duration = std::time::Duration::from_secs(2);

impl JobModel {
    /// Whether the fires that come due now are left to another process, which owns the job's
    /// partition: only for a shared job this process runs.
    pub(super) fn leaves_fires(&self) -> bool {
        self.turn.watching() && self.shared() && self.spec.enabled
    }

    /// Walks the fires this process left to another owner before it takes a fire it claims
    /// itself (nobody owns the partition now, as far as it knows, or it owns it): a claim of a
    /// later fire first would pass them over.
    pub(super) fn walk_left(&mut self, now: Now, out: &mut Vec<Action>) {
        if !self.leaves_fires() {
            self.walk_left_now(now, out);
        }
    }

    /// The owner of the job's partition, the same that this process left its fires to, renewed
    /// its lease at `renewed` (this process's clock): it was alive then, so it decided every fire
    /// it owned whose misfire deadline had passed by then — claimed or reported it. Those are no
    /// longer walked when the owner changes; only the fires whose deadline came after the owner
    /// was last seen alive are.
    pub(crate) fn owner_alive_at(&mut self, renewed: DateTime<Utc>) {
        if !self.turn.left() {
            return;
        }
        let (Some(mut first), Some(newest)) = (
            self.extra().and_then(|e| e.left_first),
            self.window.newest(),
        ) else {
            return;
        };
        let margin = TimeDelta::from_std(ALIVE_MARGIN).unwrap_or_default();
        while self.fire_at(first).deadline() + margin < renewed {
            match self.spec.schedule.next_after(first) {
                Some(next) if next <= newest => first = next,
                _ => {
                    self.turn.set_left(false);
                    self.extra_mut().left_first = None;
                    self.tidy();
                    return;
                }
            }
        }
        self.extra_mut().left_first = Some(first);
    }

    /// The owner of the job's partition changed: another process, or this one, owns it now, or
    /// nobody does. The fires this process left to the owner before are walked now, whoever owns
    /// it: a new owner walks only the fires it left itself, and nobody else knows of these.
    pub(crate) fn on_owner_changed(&mut self, owner: Owner, now: Now, out: &mut Vec<Action>) {
        self.turn.set_owner(owner);
        self.walk_left_now(now, out);
        self.try_start(now, out);
    }

    /// The walk of the fires left since the last walk, from the first to the newest: each of the
    /// newest [`LEFT_ONE_BY_ONE`] is claimed while inside its grace (the guard answers whether
    /// the owner claimed it, or passed it over) or reported through the guard after it; older
    /// ones are claimed inside their grace or reported missed as one range.
    fn walk_left_now(&mut self, now: Now, out: &mut Vec<Action>) {
        if !self.turn.left() || self.stopping || !self.spec.enabled {
            return;
        }
        self.turn.set_left(false);
        let first = self.extra_if_mut().and_then(|e| e.left_first.take());
        let (Some(first), Some(newest)) = (first, self.window.newest()) else {
            self.tidy();
            return;
        };
        let mut recent = Vec::new();
        let mut t = Some(newest);
        while let Some(f) = t.filter(|f| *f >= first && recent.len() < LEFT_ONE_BY_ONE) {
            recent.push(f);
            t = self.spec.schedule.previous_before(f);
        }
        recent.reverse();
        let older = t.filter(|t| *t >= first);
        let mut caught = Vec::new();
        if let (Some(last), Some(before)) =
            (older, first.checked_sub_signed(TimeDelta::nanoseconds(1)))
        {
            let walk = self.walk_from(before, last, now);
            if let Some(m) = walk.missed {
                self.record_missed(m, MissedCause::LeftToOwner, out);
            }
            caught = walk.caught;
        }
        for t in recent {
            let fire = self.fire_at(t);
            if now.wall < fire.deadline() {
                caught.push(fire);
            } else {
                let kind = self.left_misfire(t, now);
                self.report_drop(t, kind, now, out);
            }
        }
        self.come_due(caught, now, out);
        self.tidy();
    }

    /// The fires left to an owner and not walked yet (for the simulation: they are lost with a
    /// process that crashes before it walks them while their owner is gone too).
    #[cfg(test)]
    pub(crate) fn left_fires(&self) -> Vec<DateTime<Utc>> {
        let mut fires = Vec::new();
        let (Some(mut t), Some(newest)) = (
            self.extra()
                .and_then(|e| e.left_first)
                .filter(|_| self.turn.left()),
            self.window.newest(),
        ) else {
            return fires;
        };
        while t <= newest && fires.len() < 10_000 {
            fires.push(t);
            match self.spec.schedule.next_after(t) {
                Some(next) => t = next,
                None => break,
            }
        }
        fires
    }

    /// The misfire of fire `t`, left to an owner that did not run it, past its grace at `now`.
    fn left_misfire(&self, t: DateTime<Utc>, now: Now) -> EventKind {
        let late = (now.wall - t).to_std().unwrap_or_default();
        EventKind::Misfired {
            reason: format!(
                "the fire was left to the process that owned the job's partition, which did not run it (it stopped, froze, crashed or lost the guard's store); this process found it {} after the fire time, past the misfire grace of {}",
                human(late),
                human(self.spec.misfire_grace)
            ),
            count: 1,
            first: t,
        }
    }
}
