//! Metrics through the `metrics` facade, so users plug in the exporter they already use. Handles
//! are registered once per job at start; with no recorder installed every update is a no-op.
//!
//! | name | kind | labels |
//! | --- | --- | --- |
//! | `cronguard_runs_total` | counter | `job`, `outcome` = `succeeded` \| `failed` \| `cancelled` |
//! | `cronguard_dropped_fires_total` | counter | `job`, `reason` = `skipped` \| `misfired` \| `coalesced` \| `claimed_elsewhere` |
//! | `cronguard_run_duration_seconds` | histogram | `job` |
//! | `cronguard_fire_lateness_seconds` | histogram | `job` |
//! | `cronguard_claim_latency_seconds` | histogram | `job`, `guard` (shared guards: `file`, `redis`, `postgres`, `custom`) |
//! | `cronguard_lease_renewals_total` | counter | `job` |
//! | `cronguard_lease_lost_total` | counter | `job` |
//! | `cronguard_jobs_running` | gauge | `job` |
//! | `cronguard_clock_skew_seconds` | gauge | `guard` (`redis`, `postgres`, `custom`: the guard's clock minus this host's) |

use metrics::{counter, gauge, histogram, Counter, Gauge, Histogram};

use crate::events::{EventKind, Occurrence};
use crate::options::Lock;

pub(crate) struct JobMetrics {
    succeeded: Counter,
    failed: Counter,
    cancelled: Counter,
    skipped: Counter,
    misfired: Counter,
    coalesced: Counter,
    claimed_elsewhere: Counter,
    lease_lost: Counter,
    duration: Histogram,
    lateness: Histogram,
    pub(crate) claim_latency: Histogram,
    pub(crate) renewals: Counter,
    pub(crate) running: Gauge,
}

impl JobMetrics {
    pub(crate) fn new(job: &std::sync::Arc<str>, lock: &Lock) -> Self {
        // One shared label value for all of the job's metrics (no copy of the name per metric).
        let job = metrics::SharedString::from(std::sync::Arc::clone(job));
        let runs = |outcome: &'static str| counter!("cronguard_runs_total", "job" => job.clone(), "outcome" => outcome);
        let dropped = |reason: &'static str| counter!("cronguard_dropped_fires_total", "job" => job.clone(), "reason" => reason);
        JobMetrics {
            succeeded: runs("succeeded"),
            failed: runs("failed"),
            cancelled: runs("cancelled"),
            skipped: dropped("skipped"),
            misfired: dropped("misfired"),
            coalesced: dropped("coalesced"),
            claimed_elsewhere: dropped("claimed_elsewhere"),
            lease_lost: counter!("cronguard_lease_lost_total", "job" => job.clone()),
            duration: histogram!("cronguard_run_duration_seconds", "job" => job.clone()),
            lateness: histogram!("cronguard_fire_lateness_seconds", "job" => job.clone()),
            claim_latency: histogram!("cronguard_claim_latency_seconds", "job" => job.clone(), "guard" => lock.as_str()),
            renewals: counter!("cronguard_lease_renewals_total", "job" => job.clone()),
            running: gauge!("cronguard_jobs_running", "job" => job),
        }
    }

    pub(crate) fn record(&self, event: &Occurrence) {
        match &event.kind {
            EventKind::Started => {
                if let Some(l) = event.lateness {
                    self.lateness.record(l.as_secs_f64());
                }
            }
            EventKind::Succeeded => self.succeeded.increment(1),
            EventKind::Failed { .. } => self.failed.increment(1),
            EventKind::Cancelled { .. } => self.cancelled.increment(1),
            EventKind::Skipped { .. } => self.skipped.increment(1),
            EventKind::Misfired { .. } => self.misfired.increment(1),
            EventKind::Coalesced { .. } => self.coalesced.increment(1),
            EventKind::ClaimedElsewhere => self.claimed_elsewhere.increment(1),
            EventKind::LeaseLost { .. } => self.lease_lost.increment(1),
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
