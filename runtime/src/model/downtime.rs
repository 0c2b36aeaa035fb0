//! Fires due while no process ran the job (a deploy that stopped every replica, a crash loop): a
//! process that starts a job walks the fires between the store's fate point and its own start
//! (docs/guide/downtime.md). Those still inside their misfire grace come due here and are claimed
//! the normal way; the older ones are reported missed once across the cluster, through the guard.

use chrono::{DateTime, Utc};

use super::{Action, JobModel, Missed, Now, MISSED_WALK_LIMIT};
use crate::events::EventKind;
use crate::fire::{fmt_time, human, Fire};

/// What the walk from the fate point found: missed fires, and the fires still inside their grace.
pub(super) struct Walk {
    pub(super) missed: Option<Missed>,
    pub(super) caught: Vec<Fire>,
}

impl JobModel {
    /// Marks the fires up to `since` (where the schedule was started from) as not seen here, until
    /// the fate point is known ([`on_fate_point`](Self::on_fate_point)); `true` when the executor
    /// must read it. The executor asks only for a job whose fires are remembered outside the
    /// process: a shared guard's store, or the state dir of a `local` job.
    pub(crate) fn await_fate_point(&mut self, since: DateTime<Utc>) -> bool {
        if !self.spec.enabled || self.stopping {
            return false;
        }
        self.extra_mut().catching_up = Some(since);
        true
    }

    /// The store's fate point came: the fires after it that this process did not see come due
    /// (inside their grace) or are reported missed. `None`: the store knows nothing of the job (a
    /// new job, a renamed one, a store that lost its data), so there is nothing to catch up.
    pub(crate) fn on_fate_point(
        &mut self,
        point: Option<DateTime<Utc>>,
        now: Now,
        out: &mut Vec<Action>,
    ) {
        if let Some(e) = self.extra_if_mut() {
            e.point_failing = false;
        }
        let since = self.extra_if_mut().and_then(|e| e.catching_up.take());
        let (Some(since), Some(point)) = (since, point) else {
            // The fires taken meanwhile were held back for the walk.
            self.record_held_missed(out);
            self.ask_deferred_reports(None, now, out);
            self.try_start(now, out);
            self.tidy();
            return;
        };
        if self.stopping || !self.spec.enabled {
            self.record_held_missed(out);
            self.ask_deferred_reports(None, now, out);
            self.try_start(now, out);
            self.tidy();
            return;
        }
        let walk = self.walk_from(point, since, now);
        // The point, and the newest fire up to it whose grace has passed, count for the health
        // check too: another process may have reported them missed, and then they did not run.
        // The fires after it up to the point, still inside their grace, too: the process that
        // moved the point past them may have reported them missed.
        let due = self.due_up_to(point, now);
        let mut open = Vec::new();
        let mut next = due.and_then(|d| self.spec.schedule.next_after(d));
        while let Some(t) = next.filter(|t| *t < point && open.len() < 64) {
            open.push(t);
            next = self.spec.schedule.next_after(t);
        }
        let walked: Vec<DateTime<Utc>> = due
            .into_iter()
            .chain(open)
            .chain(Some(point))
            .filter(|p| *p <= since)
            .chain(walk.missed.iter().map(|m| m.last))
            .chain(walk.caught.iter().map(|f| f.t))
            .collect();
        self.observe_walked(&walked, now);
        if let Some(m) = walk.missed {
            self.record_missed(m, out);
        }
        self.record_held_missed(out);
        self.come_due(walk.caught, now, out);
        self.ask_deferred_reports(None, now, out);
        self.try_start(now, out);
        self.tidy();
    }

    /// Records the missed fires held back while the fate point was awaited, after those of the
    /// walk from it (none while stopping: the fate point stays where it was, and the next
    /// start's walk finds them).
    fn record_held_missed(&mut self, out: &mut Vec<Action>) {
        let held = self
            .extra_if_mut()
            .map(|e| std::mem::take(&mut e.held_missed))
            .unwrap_or_default();
        if self.stopping {
            return;
        }
        for m in held {
            self.record_missed(m, out);
        }
    }

    /// The newest fire up to `point` that should have started by `now` (its grace, and its
    /// jitter, have passed).
    fn due_up_to(&self, point: DateTime<Utc>, now: Now) -> Option<DateTime<Utc>> {
        let grace = chrono::TimeDelta::from_std(self.due_grace()).ok()?;
        let edge = now.wall.checked_sub_signed(grace)?;
        if point <= edge {
            return Some(point);
        }
        // `previous_before` is strictly before: a fire exactly at the edge is due.
        let just_after = edge.checked_add_signed(chrono::TimeDelta::nanoseconds(1))?;
        self.spec.schedule.previous_before(just_after)
    }

    /// Asks the guard to record missed fires; no fire is claimed until they are (see
    /// [`walking`](Self::walking)).
    pub(super) fn record_missed(&mut self, m: Missed, out: &mut Vec<Action>) {
        // While the fate point is awaited, these fires (after the start: left to an owner) would
        // move it past the fires the walk from it has yet to decide: they wait for it.
        if let Some(e) = self.extra_if_mut().filter(|e| e.catching_up.is_some()) {
            e.held_missed.push(m);
            return;
        }
        let extra = self.extra_mut();
        extra.pending_reports += 1;
        extra.reporting_missed += 1;
        out.push(Action::ReportMissed(MissedFires {
            first: m.first,
            last: m.last,
            count: m.count,
            walked_all: m.walked_all,
        }));
    }

    /// Fires caught up after downtime come due, in fire order with the ones already due.
    pub(super) fn come_due(&mut self, caught: Vec<Fire>, now: Now, out: &mut Vec<Action>) {
        if caught.is_empty() {
            return;
        }
        // In fire order: after downtime the fires taken since the start are all later, but a
        // walk of fires left to an owner may find fires this process took before it left them
        // (docs/design/ownership.md).
        let mut all: Vec<Fire> = self.take_due().into_iter().chain(caught).collect();
        all.sort_by_key(|f| f.t);
        all.dedup_by_key(|f| f.t);
        for fire in all {
            self.due_mut().push_back(fire);
        }
        self.coalesce(now, out);
    }

    /// The fate point could not be read (it is asked again): the fires that wait for the walk
    /// and pass their grace meanwhile are reported as not claimed because of this, at once.
    pub(crate) fn on_fate_point_failed(&mut self, error: String, now: Now, out: &mut Vec<Action>) {
        if !self.walking() {
            return;
        }
        let told =
            format!("told on this process's own word: the guard could not be asked ({error})");
        self.trouble_mut().last_guard_error = Some(error.into());
        // The drops held back for the walk are told now, on this process's word: the store does
        // not answer, for how long nobody knows.
        let extra = self.extra_mut();
        extra.point_failing = true;
        let deferred = extra.take_deferred_reports();
        for (fire, kind) in deferred {
            let kind = kind.with_reason_note(&told);
            self.emit_drop(fire, kind, true, now, out);
        }
        self.tidy();
    }

    /// The fires after `point` up to `since`: missed while older than their grace, caught up from
    /// the first one still inside it on (a later fire is never reported missed before an earlier
    /// one that may still run).
    pub(super) fn walk_from(&self, point: DateTime<Utc>, since: DateTime<Utc>, now: Now) -> Walk {
        let mut walk = Walk {
            missed: None,
            caught: Vec::new(),
        };
        let mut next = self.spec.schedule.next_after(point);
        while let Some(t) = next.filter(|t| *t <= since) {
            let fire = self.fire_at(t);
            if !walk.caught.is_empty() || now.wall < fire.deadline() {
                walk.caught.push(fire);
                next = self.spec.schedule.next_after(t);
                continue;
            }
            next = self.count_missed(&mut walk.missed, t, since, now);
        }
        walk
    }

    /// Observes the walked fires (ascending) for the health check: before the fires the timer
    /// took since the start, when the fate point came after them.
    fn observe_walked(&mut self, fires: &[DateTime<Utc>], now: Now) {
        if self.window.newest().is_none() {
            for fire in fires {
                self.window
                    .observe(*fire, now.wall, self.spec.misfire_grace);
            }
        } else {
            for fire in fires.iter().rev() {
                self.window.observe_before(*fire);
            }
        }
    }

    /// The guard recorded the missed fires from `first` to `last` (`count` of them; a lower
    /// bound unless `walked_all`): `before` is the fate point it found, so the fires up to it had
    /// a fate already (another process reported them, or claimed one). `None` with `failed`: the
    /// guard could not record them, and this process reports them all (twice beats never).
    pub(crate) fn on_missed_reported(
        &mut self,
        missed: MissedFires,
        before: Result<Option<DateTime<Utc>>, String>,
        now: Now,
        out: &mut Vec<Action>,
    ) {
        if let Some(e) = self.extra_if_mut() {
            e.pending_reports = e.pending_reports.saturating_sub(1);
            e.reporting_missed = e.reporting_missed.saturating_sub(1);
        }
        let MissedFires {
            first,
            last,
            count,
            walked_all,
        } = missed;
        let covered = match &before {
            Ok(p) if p.is_none_or(|p| p < last) => Some((*p, last)),
            _ => None,
        };
        let (first, count, first_report, failure) = match before {
            Ok(Some(p)) if p >= last => (first, count, false, None),
            Ok(Some(p)) if p >= first => {
                let (first, count) = self.fires_after(p, last);
                (first, count, true, None)
            }
            Ok(_) => (first, count, true, None),
            Err(e) => (first, count, true, Some(e)),
        };
        let what = if count == 1 {
            format!("the fire of {} was missed", fmt_time(last))
        } else {
            format!(
                "{}{count} fires from {} to {} were missed",
                if walked_all { "" } else { "at least " },
                fmt_time(first),
                fmt_time(last)
            )
        };
        let late = (now.wall - last).to_std().unwrap_or_default();
        let came = if count == 1 { "it" } else { "they" };
        let mut reason = format!(
            "{what}: no process ran the job when {came} came due (every process was stopped, or none could reach the guard's store); this process found {} {} after the fire time, past the misfire grace of {}",
            if count == 1 { "it" } else { "them" },
            human(late),
            human(self.spec.misfire_grace)
        );
        if let Some(e) = failure {
            reason.push_str(&format!(
                " (the guard could not record them, so another process may report them too: {e})"
            ));
        }
        let kind = EventKind::Misfired {
            reason,
            count,
            first,
        };
        self.emit_drop(last, kind, first_report, now, out);
        self.ask_deferred_reports(covered, now, out);
        // The fires held back for the report may be claimed now.
        self.try_start(now, out);
        self.tidy();
    }

    /// Whether the walk from the fate point is not done: the point is awaited, or the fires it
    /// found missed are being recorded. The fate point is the newest fire with a fate in the
    /// store, so a later fire claimed meanwhile would move it past the missed ones, and every
    /// process would take them as reported by another.
    pub(super) fn walking(&self) -> bool {
        self.extra()
            .is_some_and(|e| e.catching_up.is_some() || e.reporting_missed > 0)
    }

    /// The first fire after `point` and how many there are up to `last`.
    fn fires_after(&self, point: DateTime<Utc>, last: DateTime<Utc>) -> (DateTime<Utc>, u32) {
        let mut first = last;
        let mut count = 0u32;
        let mut next = self.spec.schedule.next_after(point);
        while let Some(t) = next.filter(|t| *t <= last) {
            if count == 0 {
                first = t;
            }
            count += 1;
            if count >= MISSED_WALK_LIMIT {
                break;
            }
            next = self.spec.schedule.next_after(t);
        }
        (first, count.max(1))
    }
}

/// Fires reported missed together: from `first` to `last`, `count` of them (a lower bound unless
/// `walked_all`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MissedFires {
    pub(crate) first: DateTime<Utc>,
    pub(crate) last: DateTime<Utc>,
    pub(crate) count: u32,
    pub(crate) walked_all: bool,
}
