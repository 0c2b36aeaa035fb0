//! Retries: a failed attempt of a run is tried again under the same fire, lease and fencing
//! token while the next attempt can still start inside the fire's window
//! (docs/guide/timeouts-retries-jitter.md). The rule itself is [`limits::next_attempt`]; this is
//! its bookkeeping.

use std::time::Duration;

use super::limits;
use super::{Action, Backoff, JobModel, Now, RunEnd, RunId, Verdict};
use crate::events::{CancelReason, EventKind, FailureReason};
use crate::fire::human;

impl JobModel {
    /// Whether run `id` waits between two attempts.
    pub(super) fn waiting(&self, id: RunId) -> bool {
        self.runs()
            .iter()
            .any(|r| r.id == id && r.backoff.is_some())
    }

    /// The text and kind of a failed attempt's end.
    pub(super) fn failure(&self, end: RunEnd) -> (String, FailureReason) {
        match end {
            RunEnd::Panicked(error) => (error, FailureReason::Panic),
            RunEnd::TimedOut => {
                let limit = self.spec.limits.timeout.unwrap_or_default();
                (
                    format!(
                        "the run did not finish within its timeout of {}",
                        human(limit)
                    ),
                    FailureReason::Timeout,
                )
            }
            RunEnd::Failed(error) => (error, FailureReason::Error),
            // Not failures; the caller never asks about them.
            RunEnd::Ok | RunEnd::Cancelled | RunEnd::LeaseExpired => {
                (String::new(), FailureReason::Error)
            }
        }
    }

    /// After a failed attempt of the run at `pos`: when another attempt may start, reports the
    /// failure with the time of the next attempt and waits for it (`true`).
    pub(super) fn retry_later(
        &mut self,
        pos: usize,
        end: &RunEnd,
        duration: Duration,
        now: Now,
        out: &mut Vec<Action>,
    ) -> bool {
        let run = &self.runs()[pos];
        if !end.may_retry() || self.stopping || run.cancel_reason.is_some() || run.lease_lost {
            return false;
        }
        let next_fire = self.spec.schedule.next_after(run.fire);
        let Some(at) = limits::next_attempt(
            &self.spec.limits,
            run.attempt,
            now.wall,
            run.deadline,
            next_fire,
        ) else {
            return false;
        };
        let (error, reason) = self.failure(end.clone());
        let kind = EventKind::Failed {
            error: error.clone(),
            reason,
            retry_at: Some(at),
        };
        let run = &mut self.runs_mut()[pos];
        out.push(Action::Emit(run.event(kind, now.wall, Some(duration))));
        run.backoff = Some(Box::new(Backoff {
            until: at,
            error,
            reason,
        }));
        true
    }

    /// Starts every attempt whose pause is over, or ends the run if its window closed meanwhile
    /// (the process was paused past it).
    pub(super) fn start_attempts(&mut self, now: Now, out: &mut Vec<Action>) {
        let due: Vec<RunId> = self
            .runs()
            .iter()
            .filter(|r| r.backoff.as_ref().is_some_and(|b| b.until <= now.wall))
            .map(|r| r.id)
            .collect();
        for id in due {
            let Some((fire, deadline)) = self
                .runs()
                .iter()
                .find(|r| r.id == id)
                .map(|r| (r.fire, r.deadline))
            else {
                continue;
            };
            let next_fire = self.spec.schedule.next_after(fire);
            if now.wall >= deadline || next_fire.is_some_and(|n| now.wall >= n) {
                self.end_with_last_failure(id, now, out);
                continue;
            }
            let Some(run) = self.runs_mut().iter_mut().find(|r| r.id == id) else {
                continue;
            };
            run.backoff = None;
            run.attempt += 1;
            let attempt = run.attempt;
            out.push(Action::Emit(run.event(EventKind::Started, now.wall, None)));
            out.push(Action::Retry { run: id, attempt });
        }
    }

    /// Ends a run waiting between attempts with `kind`; its lease goes back.
    pub(super) fn end_waiting(
        &mut self,
        id: RunId,
        kind: EventKind,
        now: Now,
        out: &mut Vec<Action>,
    ) {
        let Some(pos) = self.runs().iter().position(|r| r.id == id) else {
            return;
        };
        let Some(run) = self.end_running(pos) else {
            return;
        };
        out.push(Action::Finish(id));
        out.push(Action::Emit(run.event(kind, now.wall, None)));
    }

    /// No further attempt: the last failure is the run's end.
    fn end_with_last_failure(&mut self, id: RunId, now: Now, out: &mut Vec<Action>) {
        let Some(run) = self.runs_mut().iter_mut().find(|r| r.id == id) else {
            return;
        };
        let Some(backoff) = run.backoff.take() else {
            return;
        };
        let kind = EventKind::Failed {
            error: backoff.error,
            reason: backoff.reason,
            retry_at: None,
        };
        self.end_waiting(id, kind, now, out);
    }

    /// The scheduler stops: runs waiting between attempts end with their last failure.
    pub(super) fn end_all_waiting(&mut self, now: Now, out: &mut Vec<Action>) {
        let waiting: Vec<RunId> = self
            .runs()
            .iter()
            .filter(|r| r.backoff.is_some())
            .map(|r| r.id)
            .collect();
        for id in waiting {
            self.end_with_last_failure(id, now, out);
        }
    }

    /// The watchdog's word on the lease of a run waiting between attempts: it ends there.
    pub(super) fn verdict_between_attempts(
        &mut self,
        id: RunId,
        verdict: Verdict,
        now: Now,
        out: &mut Vec<Action>,
    ) {
        let reason = match verdict {
            Verdict::Lost(reason) => {
                if let Some(run) = self.runs().iter().find(|r| r.id == id) {
                    let lost = EventKind::LeaseLost { reason };
                    out.push(Action::Emit(run.event(lost, now.wall, None)));
                }
                CancelReason::LeaseLost
            }
            Verdict::CancelRequested => CancelReason::Replaced,
        };
        self.end_waiting(id, EventKind::Cancelled { reason }, now, out);
        self.try_start(now, out);
    }
}
