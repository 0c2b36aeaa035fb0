//! Fires due while no process ran the job (a deploy that stopped every replica, a crash loop): a
//! process that starts a job walks the fires between the store's fate point and its own start
//! (docs/guide/downtime.md). Those still inside their misfire grace come due here and are claimed
//! the normal way; the older ones are reported missed once across the cluster, through the guard.

use chrono::{DateTime, Utc};

use super::{Action, JobModel, Missed, Now, MISSED_WALK_LIMIT};
use crate::events::EventKind;
use crate::fire::{fmt_time, human, Fire};

/// How many of the fires a process slept through, that the store's fate point passed, are
/// asked one by one: as many as the guard remembers claims of (eight).
const ONE_BY_ONE: usize = 8;

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
            self.record_missed(m, MissedCause::NoProcess, out);
        }
        self.record_held_missed(out);
        self.come_due(walk.caught, now, out);
        self.ask_deferred_reports(None, now, out);
        self.try_start(now, out);
        self.tidy();
    }

    /// Sends the oldest report of missed fires held back (while the fate point was awaited, or
    /// while another report was not answered yet) once none is in flight; none while stopping:
    /// the fate point stays where it was, and the next start's walk finds them.
    pub(super) fn record_held_missed(&mut self, out: &mut Vec<Action>) {
        if self.stopping {
            if let Some(e) = self.extra_if_mut() {
                e.held_missed.clear();
            }
            return;
        }
        let Some(e) = self.extra_if_mut() else {
            return;
        };
        if e.catching_up.is_some() || e.reporting_missed > 0 || e.held_missed.is_empty() {
            return;
        }
        let missed = e.held_missed.remove(0);
        e.count_missed_report(&missed);
        out.push(Action::ReportMissed(missed));
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
    pub(super) fn record_missed(&mut self, m: Missed, cause: MissedCause, out: &mut Vec<Action>) {
        let missed = MissedFires {
            first: m.first,
            last: m.last,
            count: m.count,
            walked_all: m.walked_all,
            cause,
        };
        // While the fate point is awaited, these fires (after the start: left to an owner, or
        // slept through) would move it past the fires the walk from it has yet to decide: they
        // wait for it. While another report is not answered, they wait for it too: one report
        // at a time, in fire order, with the drops between them asked in between, so that no
        // report moves the point past fires an earlier one, or a drop held back, has yet to
        // decide.
        let held = &mut self.extra_mut().held_missed;
        held.push(missed);
        held.sort_by_key(|m| m.first);
        self.record_held_missed(out);
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
            if e.reporting_missed == 0 {
                e.missed_from = None;
            }
        }
        let MissedFires {
            first,
            last,
            count,
            walked_all,
            cause,
        } = missed;
        // The store recorded the fires after its point from `first` on: a fire before `first`
        // is not decided by this record.
        let from_first = first.checked_sub_signed(chrono::TimeDelta::nanoseconds(1));
        let covered = match &before {
            Ok(p) if p.is_none_or(|p| p < last) => Some(((*p).max(from_first), last)),
            _ => None,
        };
        // Fires this process slept through that the store's point passed: the newest of them are
        // asked one by one, as the fires left to an owner are (the guard knows who claimed
        // them, or that nobody did and a later fire was claimed: passed over, this process
        // reports them); the point is trusted for the older ones only.
        let one_by_one = match &before {
            Ok(Some(p)) if cause == MissedCause::TimerWoke && *p >= first => {
                self.newest_fires(first, (*p).min(last))
            }
            _ => Vec::new(),
        };
        let before_one_by_one = one_by_one
            .first()
            .and_then(|f| self.spec.schedule.previous_before(*f))
            .filter(|f| *f >= first);
        // The range told here: the fires after the point, or, when the point passed them all,
        // those older than the ones asked one by one (at debug level: they had a fate).
        let range = match before {
            Ok(Some(p)) if p >= last => match (one_by_one.is_empty(), before_one_by_one) {
                (true, _) => Some((first, last, count, false, None)),
                (false, Some(older)) => {
                    let (first, count) = self.fires_after(from_first.unwrap_or(first), older);
                    Some((first, older, count, false, None))
                }
                (false, None) => None,
            },
            Ok(Some(p)) if p >= first => {
                let (first, count) = self.fires_after(p, last);
                Some((first, last, count, true, None))
            }
            Ok(_) => Some((first, last, count, true, None)),
            Err(e) => Some((first, last, count, true, Some(e))),
        };
        if let Some((first, last, count, first_report, failure)) = range {
            let told = MissedFires {
                first,
                last,
                count,
                walked_all,
                cause,
            };
            self.tell_missed(told, first_report, failure, now, out);
        }
        self.decide_one_by_one(one_by_one, now, out);
        self.ask_deferred_reports(covered, now, out);
        self.record_held_missed(out);
        // The fires held back for the report may be claimed now.
        self.try_start(now, out);
        self.tidy();
    }

    /// Tells the missed fires, at warn level when `first_report`; `failure`: why the guard could
    /// not record them.
    fn tell_missed(
        &mut self,
        missed: MissedFires,
        first_report: bool,
        failure: Option<String>,
        now: Now,
        out: &mut Vec<Action>,
    ) {
        let (first, last, count) = (missed.first, missed.last, missed.count);
        let what = if count == 1 {
            format!("the fire of {} was missed", fmt_time(last))
        } else {
            format!(
                "{}{count} fires from {} to {} were missed",
                if missed.walked_all { "" } else { "at least " },
                fmt_time(first),
                fmt_time(last)
            )
        };
        let late = human((now.wall - last).to_std().unwrap_or_default());
        let grace = human(self.spec.misfire_grace);
        let (came, them, were) = if count == 1 {
            ("it", "it", "was")
        } else {
            ("they", "them", "were")
        };
        let mut reason = match missed.cause {
            MissedCause::NoProcess => format!(
                "{what}: no process ran the job when {came} came due (every process was stopped, or none could reach the guard's store); this process found {them} {late} after the fire time, past the misfire grace of {grace}"
            ),
            MissedCause::LeftToOwner => format!(
                "{what}: {came} {were} left to the owner of the job's partition, which did not decide {them} (it was killed, froze or lost the guard's store); this process found {them} {late} after the fire time, past the misfire grace of {grace}"
            ),
            MissedCause::TimerWoke => format!(
                "{what}: the timer woke {late} after the fire time (the process was paused, suspended or overloaded, or the clock jumped), past the misfire grace of {grace}, and no other process had run or reported {them}"
            ),
        };
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
    }

    /// Whether the walk from the fate point is not done: the point is awaited, or the fires it
    /// found missed are being recorded. The fate point is the newest fire with a fate in the
    /// store, so a later fire claimed meanwhile would move it past the missed ones, and every
    /// process would take them as reported by another.
    pub(super) fn walking(&self) -> bool {
        self.extra().is_some_and(|e| {
            e.catching_up.is_some() || e.reporting_missed > 0 || !e.held_missed.is_empty()
        })
    }

    /// The newest fires from `first` to `last`, at most [`ONE_BY_ONE`], oldest first.
    fn newest_fires(&self, first: DateTime<Utc>, last: DateTime<Utc>) -> Vec<DateTime<Utc>> {
        let mut fires = Vec::new();
        // The newest fire at `last` or before it (`previous_before` is strictly before).
        let mut t = last
            .checked_add_signed(chrono::TimeDelta::nanoseconds(1))
            .and_then(|l| self.spec.schedule.previous_before(l));
        while let Some(f) = t.filter(|f| *f >= first && fires.len() < ONE_BY_ONE) {
            fires.push(f);
            t = self.spec.schedule.previous_before(f);
        }
        fires.reverse();
        fires
    }

    /// Reports fires this process slept through one by one, through the guard.
    fn decide_one_by_one(&mut self, fires: Vec<DateTime<Utc>>, now: Now, out: &mut Vec<Action>) {
        for t in fires {
            let kind = self.slept_through(t, t, 1, true, now);
            self.report_drop(t, kind, now, out);
        }
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
    pub(crate) cause: MissedCause,
}

/// Why fires were missed, for the report's text: the guard records them the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MissedCause {
    /// Due while no process ran the job (the walk from the fate point after a start).
    NoProcess,
    /// Left to the owner of the job's partition, which did not decide them (the older fires of
    /// a walk of fires left: docs/design/ownership.md).
    LeftToOwner,
    /// Slept through: the process's timer woke past their grace (a pause, a suspend, an
    /// overload, a clock that jumped).
    TimerWoke,
}
