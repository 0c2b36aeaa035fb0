//! Whether every job is on time: the check that catches a job that silently stopped.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::clock::after;

/// How far ahead of this process's clock a recorded claim may lie and still count: further ahead,
/// it was written by a process whose clock is ahead, and it proves nothing about the fires due now.
pub(crate) const CLAIM_AHEAD_TOLERANCE: Duration = Duration::from_secs(1);

/// The health of every job, from [`Monitor::health`](crate::Monitor::health).
///
/// A job is **overdue** when the newest fire that should have started by now (its `T` plus
/// `misfire_grace` lies in the past, and `T` came after the scheduler started) has not been claimed
/// anywhere the job's guard reaches: this process (`local`), this host (`file`), or the cluster
/// (`redis`, read from the last claimed fire in Redis, so a replica can tell that *no* replica ran
/// it). A skipped or misfired fire counts as not run, so a job whose lock is held forever, whose
/// runs never end, or whose fires all misfire turns overdue after one period plus its grace, and
/// back to on time with the next claimed run.
///
/// This is for alerting and dashboards, not for a liveness or readiness probe: a guard that
/// cannot be asked (a Redis blip) makes the report unhealthy, and restarting the process, or
/// taking it out of a load balancer, fixes neither that nor an overdue job. Probe
/// [`Monitor::alive`](crate::Monitor::alive) instead.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Health {
    /// `true` when every job is on time.
    pub healthy: bool,
    /// When the check ran (the scheduler's clock).
    pub checked_at: DateTime<Utc>,
    /// Each job, sorted by name.
    pub jobs: Vec<JobHealth>,
}

/// The health of one job.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct JobHealth {
    /// The job's name.
    pub name: String,
    /// On time, overdue, or unknown.
    pub state: HealthState,
    /// The latest fire claimed anywhere the guard reaches.
    pub last_claimed: Option<DateTime<Utc>>,
}

/// Whether a job is on time.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(tag = "state", rename_all = "snake_case")
)]
#[non_exhaustive]
pub enum HealthState {
    /// Every fire that should have started has been claimed (or none was due yet).
    OnTime,
    /// Fire `missed` should have started by `deadline` and was not claimed anywhere.
    Overdue {
        /// The newest fire that should have started.
        missed: DateTime<Utc>,
        /// `missed` plus the misfire grace.
        deadline: DateTime<Utc>,
    },
    /// The job is paused (docs/guide/controls.md): its fires are skipped on
    /// purpose, so it is not overdue.
    Paused {
        /// Who paused it.
        by: String,
        /// When.
        at: DateTime<Utc>,
    },
    /// The guard could not be asked (for example Redis is unreachable).
    Unknown {
        /// Why.
        reason: String,
    },
}

pub(crate) fn judge(
    due: Option<DateTime<Utc>>,
    last_claimed: Option<DateTime<Utc>>,
    grace: Duration,
    now: DateTime<Utc>,
) -> HealthState {
    let last_claimed = last_claimed.filter(|last| *last <= after(now, CLAIM_AHEAD_TOLERANCE));
    match due {
        Some(missed) if last_claimed.is_none_or(|last| last < missed) => HealthState::Overdue {
            missed,
            deadline: after(missed, grace),
        },
        _ => HealthState::OnTime,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> DateTime<Utc> {
        DateTime::<Utc>::from_timestamp(1_767_225_600 + s, 0).expect("in range")
    }

    #[test]
    fn a_claim_recorded_far_in_the_future_proves_nothing() {
        let grace = Duration::from_secs(60);
        let now = at(1_000);
        assert_eq!(
            judge(Some(at(900)), Some(at(900)), grace, now),
            HealthState::OnTime
        );
        // Written by a replica whose clock was an hour ahead: the job is not on time for it.
        assert_eq!(
            judge(Some(at(900)), Some(at(4_600)), grace, now),
            HealthState::Overdue {
                missed: at(900),
                deadline: at(960)
            }
        );
        // Within the tolerance a replica's slightly fast clock is fine.
        assert_eq!(
            judge(Some(at(900)), Some(at(1_000)), grace, now),
            HealthState::OnTime
        );
    }
}
