//! Metrics through the `metrics` facade, so users plug in the exporter they already use. The
//! handles every run updates are registered once per job at start, the others when first used;
//! with no recorder installed every update is a no-op.
//!
//! | name | kind | labels |
//! | --- | --- | --- |
//! | `cronguard_runs_total` | counter | `job`, `outcome` = `succeeded` \| `failed` \| `cancelled` \| `retried` (a failed attempt tried again) |
//! | `cronguard_dropped_fires_total` | counter | `job`, `reason` = `skipped` \| `misfired` \| `coalesced` \| `claimed_elsewhere` |
//! | `cronguard_run_duration_seconds` | histogram | `job` |
//! | `cronguard_fire_lateness_seconds` | histogram | `job` |
//! | `cronguard_claim_latency_seconds` | histogram | `job`, `guard` (shared guards: `file`, `redis`, `postgres`, `custom`) |
//! | `cronguard_lease_renewals_total` | counter | `job` |
//! | `cronguard_lease_lost_total` | counter | `job` |
//! | `cronguard_jobs_running` | gauge | `job` |
//! | `cronguard_clock_skew_seconds` | gauge | `guard` (`redis`, `postgres`, `custom`: the guard's clock minus this host's) |

use metrics::{counter, gauge, histogram, Counter, Gauge, Histogram, SharedString};

use crate::events::{EventKind, Occurrence};
use crate::options::Lock;

/// A job's metric handles. The series every run updates are registered once, at start; the
/// others (failures, drops, leases, claims) when first needed, so that a million jobs do not each
/// hold a dozen handles they may never use.
pub(crate) struct JobMetrics {
    /// The job's name as a label value, shared by all its series.
    job: SharedString,
    succeeded: Counter,
    claimed_elsewhere: Counter,
    duration: Histogram,
    lateness: Histogram,
    pub(crate) running: Gauge,
}

impl JobMetrics {
    pub(crate) fn new(job: &std::sync::Arc<str>) -> Self {
        // One shared label value for all of the job's metrics (no copy of the name per metric).
        let job = SharedString::from(std::sync::Arc::clone(job));
        JobMetrics {
            succeeded: counter!("cronguard_runs_total", "job" => job.clone(), "outcome" => "succeeded"),
            claimed_elsewhere: counter!("cronguard_dropped_fires_total", "job" => job.clone(), "reason" => "claimed_elsewhere"),
            duration: histogram!("cronguard_run_duration_seconds", "job" => job.clone()),
            lateness: histogram!("cronguard_fire_lateness_seconds", "job" => job.clone()),
            running: gauge!("cronguard_jobs_running", "job" => job.clone()),
            job,
        }
    }

    fn runs(&self, outcome: &'static str) -> Counter {
        counter!("cronguard_runs_total", "job" => self.job.clone(), "outcome" => outcome)
    }

    fn dropped(&self, reason: &'static str) -> Counter {
        counter!("cronguard_dropped_fires_total", "job" => self.job.clone(), "reason" => reason)
    }

    /// The claim latency series of this job's guard.
    pub(crate) fn claim_latency(&self, lock: &Lock) -> Histogram {
        histogram!("cronguard_claim_latency_seconds", "job" => self.job.clone(), "guard" => lock.as_str())
    }

    /// The lease renewals series of this job.
    pub(crate) fn renewals(&self) -> Counter {
        counter!("cronguard_lease_renewals_total", "job" => self.job.clone())
    }

    pub(crate) fn record(&self, event: &Occurrence) {
        match &event.kind {
            // A retry's start is not a fire's start: its lateness was recorded once.
            EventKind::Started if event.attempt.unwrap_or(1) > 1 => {}
            EventKind::Started => {
                if let Some(l) = event.lateness {
                    self.lateness.record(l.as_secs_f64());
                }
            }
            EventKind::Succeeded => self.succeeded.increment(1),
            EventKind::Failed {
                retry_at: Some(_), ..
            } => self.runs("retried").increment(1),
            EventKind::Failed { .. } => self.runs("failed").increment(1),
            EventKind::Cancelled { .. } => self.runs("cancelled").increment(1),
            EventKind::Skipped { .. } => self.dropped("skipped").increment(1),
            EventKind::Misfired { .. } => self.dropped("misfired").increment(1),
            EventKind::Coalesced { .. } => self.dropped("coalesced").increment(1),
            EventKind::ClaimedElsewhere => self.claimed_elsewhere.increment(1),
            EventKind::LeaseLost { .. } => {
                counter!("cronguard_lease_lost_total", "job" => self.job.clone()).increment(1)
            }
        }
        if let Some(d) = event.duration {
            self.duration.record(d.as_secs_f64());
        }
    }
}

/// The clock skew against a guard's store, in seconds (its clock minus this host's).
pub(crate) fn clock_skew(guard: &'static str, seconds: f64) {
    gauge!("cronguard_clock_skew_seconds", "guard" => guard).set(seconds);
}
