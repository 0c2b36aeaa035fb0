//! What a job records: the handles every run updates are registered once per job at start, the
//! others looked up when used. [`describe`] gives every metric its help text and unit.

use chrono::{DateTime, Utc};
use smol_str::SmolStr;
use std::sync::Arc;

use metrics::{
    counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram, Counter,
    Gauge, Histogram, SharedString, Unit,
};

use super::{
    CLAIM_LATENCY_SECONDS, CLOCK_SKEW_SECONDS, DROPPED_FIRES_TOTAL, FIRE_LATENESS_SECONDS,
    GUARD_ERRORS_TOTAL, JOBS_RUNNING, JOB_LABEL, JOB_OVERDUE, LAST_SUCCESS_TIMESTAMP_SECONDS,
    LEASE_LOST_TOTAL, LEASE_RENEWALS_TOTAL, NEXT_FIRE_TIMESTAMP_SECONDS, RUNS_TOTAL,
    RUN_DURATION_SECONDS,
};
use crate::events::{EventKind, Occurrence};
use crate::options::Lock;

/// Gives every metric its help text and unit in the installed recorder; called by every start.
pub(crate) fn describe() {
    describe_counter!(RUNS_TOTAL, Unit::Count, "Runs that ended, by outcome.");
    describe_counter!(
        DROPPED_FIRES_TOTAL,
        Unit::Count,
        "Fires that did not start here, by reason."
    );
    describe_histogram!(
        RUN_DURATION_SECONDS,
        Unit::Seconds,
        "How long runs took, from start to end."
    );
    describe_histogram!(
        FIRE_LATENESS_SECONDS,
        Unit::Seconds,
        "How late runs started: start minus the fire time."
    );
    describe_histogram!(
        CLAIM_LATENCY_SECONDS,
        Unit::Seconds,
        "Round trip of one claim to a shared guard."
    );
    describe_counter!(
        LEASE_RENEWALS_TOTAL,
        Unit::Count,
        "Lease renewals of running jobs."
    );
    describe_counter!(
        LEASE_LOST_TOTAL,
        Unit::Count,
        "Runs whose lease was lost (expired or taken)."
    );
    describe_counter!(
        GUARD_ERRORS_TOTAL,
        Unit::Count,
        "Claims a shared guard could not answer, by kind (every retry counts)."
    );
    describe_gauge!(
        JOBS_RUNNING,
        Unit::Count,
        "Runs of the job going on in this process as tasks of their own."
    );
    describe_gauge!(
        LAST_SUCCESS_TIMESTAMP_SECONDS,
        Unit::Seconds,
        "Unix time at which the job's last successful run in this process ended."
    );
    describe_gauge!(
        NEXT_FIRE_TIMESTAMP_SECONDS,
        Unit::Seconds,
        "Unix time of the job's next fire."
    );
    describe_gauge!(
        JOB_OVERDUE,
        "1 when the job's newest fire was dropped (misfired or skipped) and no later fire was claimed since, else 0."
    );
    describe_gauge!(
        CLOCK_SKEW_SECONDS,
        Unit::Seconds,
        "The shared guard's clock minus this host's."
    );
}

/// A time as Unix seconds, with its milliseconds.
fn unix_seconds(t: DateTime<Utc>) -> f64 {
    t.timestamp_millis() as f64 / 1000.0
}

/// What a job keeps for its metrics: the handles of the series every run updates (a lookup per
/// update would cost every fire more than the rest of its bookkeeping), and what decides
/// `cronguard_job_overdue`. Every other series is looked up by name and the job's name when
/// updated (a million jobs do not each hold a dozen handles; docs/operations/metrics.md).
pub(crate) struct JobMetrics {
    succeeded: Counter,
    duration: Histogram,
    lateness: Histogram,
    next_fire: Gauge,
    /// Registered at the first success in this process (see [`Marks::succeeded`]).
    last_success: Gauge,
    marks: Marks,
}

/// The newest fire claimed and two flags, in eight bytes: whether the job is overdue, and whether
/// it succeeded in this process (a process that never ran the job shows no time of a last
/// success, so that series is registered at the first).
#[derive(Clone, Copy)]
struct Marks(i64);

impl Marks {
    /// No fire claimed yet, not overdue, no success.
    const NEW: Marks = Marks(i64::MIN);
    const OVERDUE: i64 = 1;
    const SUCCEEDED: i64 = 2;
    const FLAGS: i64 = Self::OVERDUE | Self::SUCCEEDED;

    fn claimed_ms(self) -> i64 {
        self.0 >> 2
    }

    fn overdue(self) -> bool {
        self.0 & Self::OVERDUE != 0
    }

    fn succeeded(self) -> bool {
        self.0 & Self::SUCCEEDED != 0
    }

    fn with_claimed_ms(self, claimed_ms: i64) -> Marks {
        // Unix milliseconds need 42 bits; `i64::MIN >> 2` stays the smallest value.
        Marks((claimed_ms.max(i64::MIN >> 2) << 2) | (self.0 & Self::FLAGS))
    }

    fn with_overdue(self, overdue: bool) -> Marks {
        Marks((self.0 & !Self::OVERDUE) | if overdue { Self::OVERDUE } else { 0 })
    }

    fn with_success(self) -> Marks {
        Marks(self.0 | Self::SUCCEEDED)
    }
}

fn label(job: &SmolStr) -> SharedString {
    SharedString::from(Arc::<str>::from(job.clone()))
}

impl JobMetrics {
    /// Registers the series every run updates, so that they show (at zero) from the start, and
    /// keeps the handles of those every fire updates: at 10,000 jobs due together, every lookup
    /// (a label and a key built, a hash map searched) counts. `claimed_elsewhere`: register that
    /// series here (a job with a shared guard holds its handle in its [`ClaimSeries`]).
    pub(crate) fn new(job: &SmolStr, claimed_elsewhere: bool) -> Self {
        let job = label(job);
        if claimed_elsewhere {
            let _ = counter!(DROPPED_FIRES_TOTAL, JOB_LABEL => job.clone(), "reason" => "claimed_elsewhere");
        }
        let _ = gauge!(JOBS_RUNNING, JOB_LABEL => job.clone());
        JobMetrics {
            succeeded: counter!(RUNS_TOTAL, JOB_LABEL => job.clone(), "outcome" => "succeeded"),
            duration: histogram!(RUN_DURATION_SECONDS, JOB_LABEL => job.clone()),
            lateness: histogram!(FIRE_LATENESS_SECONDS, JOB_LABEL => job.clone()),
            next_fire: gauge!(NEXT_FIRE_TIMESTAMP_SECONDS, JOB_LABEL => job),
            last_success: Gauge::noop(),
            marks: Marks::NEW,
        }
    }

    /// Sets the job's next fire time, when it has one.
    pub(crate) fn next_fire(&self, next: Option<DateTime<Utc>>) {
        if let Some(t) = next {
            self.next_fire.set(unix_seconds(t));
        }
    }

    /// Sets how many runs of the job go on in this process on a task of their own; looked up,
    /// as only such runs change it (a run that ends at its first poll is not counted).
    pub(crate) fn running(job: &SmolStr, runs: usize) {
        gauge!(JOBS_RUNNING, JOB_LABEL => label(job)).set(runs as f64);
    }

    /// Counts a claim the guard could not answer, by the kind of failure (`GuardError::kind`).
    pub(crate) fn guard_error(job: &SmolStr, kind: &'static str) {
        counter!(GUARD_ERRORS_TOTAL, JOB_LABEL => label(job), "kind" => kind).increment(1);
    }

    fn set_overdue(&mut self, job: &SmolStr, overdue: bool) {
        if self.marks.overdue() != overdue {
            self.marks = self.marks.with_overdue(overdue);
            gauge!(JOB_OVERDUE, JOB_LABEL => label(job)).set(if overdue { 1.0 } else { 0.0 });
        }
    }

    /// Fire `fire` was claimed (started here or claimed elsewhere): the job is on time.
    fn claimed(&mut self, job: &SmolStr, fire: DateTime<Utc>) {
        let newest = self.marks.claimed_ms().max(fire.timestamp_millis());
        self.marks = self.marks.with_claimed_ms(newest);
        self.set_overdue(job, false);
    }

    /// Fire `fire` will not run: the job is overdue unless a later fire was claimed.
    fn not_run(&mut self, job: &SmolStr, fire: DateTime<Utc>) {
        if fire.timestamp_millis() > self.marks.claimed_ms() {
            self.set_overdue(job, true);
        }
    }

    /// Looked up (and so registered) at the first success only: a process that never ran the
    /// job shows no time of a last success.
    fn last_success(job: &SmolStr) -> Gauge {
        gauge!(LAST_SUCCESS_TIMESTAMP_SECONDS, JOB_LABEL => label(job))
    }

    fn runs(job: &SmolStr, outcome: &'static str) -> Counter {
        counter!(RUNS_TOTAL, JOB_LABEL => label(job), "outcome" => outcome)
    }

    fn dropped(job: &SmolStr, reason: &'static str) -> Counter {
        counter!(DROPPED_FIRES_TOTAL, JOB_LABEL => label(job), "reason" => reason)
    }

    /// Counts, times and judges an event of job `job`; `claims` are its shared guard's series.
    pub(crate) fn record(
        &mut self,
        job: &SmolStr,
        event: &Occurrence,
        claims: Option<&mut ClaimSeries>,
    ) {
        match &event.kind {
            // A retry's start is not a fire's start: its lateness was recorded once.
            EventKind::Started if event.attempt.unwrap_or(1) > 1 => {}
            EventKind::Started => {
                if let Some(l) = event.lateness {
                    self.lateness.record(l.as_secs_f64());
                }
                self.claimed(job, event.fire_time);
            }
            EventKind::Succeeded => {
                self.succeeded.increment(1);
                if !self.marks.succeeded() {
                    self.last_success = Self::last_success(job);
                    self.marks = self.marks.with_success();
                }
                self.last_success.set(unix_seconds(event.at));
            }
            EventKind::Failed {
                retry_at: Some(_), ..
            } => Self::runs(job, "retried").increment(1),
            EventKind::Failed { .. } => Self::runs(job, "failed").increment(1),
            EventKind::Cancelled { .. } => Self::runs(job, "cancelled").increment(1),
            EventKind::Skipped { paused: true, .. } => {
                // Skipped on purpose: a paused job is not overdue.
                Self::dropped(job, "paused").increment(1);
                self.set_overdue(job, false);
            }
            EventKind::Skipped { .. } => {
                Self::dropped(job, "skipped").increment(1);
                self.not_run(job, event.fire_time);
            }
            EventKind::Misfired { .. } => {
                Self::dropped(job, "misfired").increment(1);
                self.not_run(job, event.fire_time);
            }
            EventKind::Coalesced { .. } => Self::dropped(job, "coalesced").increment(1),
            EventKind::ClaimedElsewhere => {
                match claims {
                    Some(c) => c.claimed_elsewhere.increment(1),
                    None => Self::dropped(job, "claimed_elsewhere").increment(1),
                }
                self.claimed(job, event.fire_time);
            }
            EventKind::LeaseLost { .. } => {
                counter!(LEASE_LOST_TOTAL, JOB_LABEL => label(job)).increment(1)
            }
        }
        if let Some(d) = event.duration {
            self.duration.record(d.as_secs_f64());
        }
    }
}

/// The series a job with a shared guard updates on every fire (its claim, a fire claimed
/// elsewhere, its lease renewals), registered once with the job rather than looked up each time.
/// Only such jobs hold them, out of line, so that a local job does not grow.
pub(crate) struct ClaimSeries {
    pub(crate) latency: Histogram,
    pub(crate) claimed_elsewhere: Counter,
    pub(crate) renewals: Counter,
}

impl ClaimSeries {
    pub(crate) fn new(job: &SmolStr, lock: &Lock) -> Self {
        let job = label(job);
        ClaimSeries {
            latency: histogram!(CLAIM_LATENCY_SECONDS, JOB_LABEL => job.clone(), "guard" => lock.as_str()),
            claimed_elsewhere: counter!(DROPPED_FIRES_TOTAL, JOB_LABEL => job.clone(), "reason" => "claimed_elsewhere"),
            renewals: counter!(LEASE_RENEWALS_TOTAL, JOB_LABEL => job),
        }
    }
}

/// The clock skew against a guard's store, in seconds (its clock minus this host's).
pub(crate) fn clock_skew(guard: &'static str, seconds: f64) {
    gauge!(CLOCK_SKEW_SECONDS, "guard" => guard).set(seconds);
}

#[cfg(test)]
mod tests {
    use super::Marks;

    #[test]
    fn the_flags_and_the_newest_claim_share_eight_bytes_without_mixing() {
        let new = Marks::NEW;
        assert!(!new.overdue() && !new.succeeded());
        assert!(new.claimed_ms() < 0, "no claim is older than every fire");
        let ms = 1_767_225_600_000; // 2026-01-01 in Unix milliseconds
        for overdue in [false, true] {
            for succeeded in [false, true] {
                let mut m = new.with_claimed_ms(ms).with_overdue(overdue);
                if succeeded {
                    m = m.with_success();
                }
                assert_eq!(
                    (m.claimed_ms(), m.overdue(), m.succeeded()),
                    (ms, overdue, succeeded)
                );
                let later = m.with_claimed_ms(ms + 1);
                assert_eq!(
                    (later.claimed_ms(), later.overdue(), later.succeeded()),
                    (ms + 1, overdue, succeeded)
                );
                let cleared = m.with_overdue(false);
                assert_eq!(
                    (cleared.claimed_ms(), cleared.overdue(), cleared.succeeded()),
                    (ms, false, succeeded)
                );
            }
        }
        let from_none = new.with_overdue(true);
        assert_eq!(
            (from_none.claimed_ms(), from_none.overdue()),
            (new.claimed_ms(), true)
        );
    }
}
