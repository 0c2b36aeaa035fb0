//! The operator's controls as values: who paused a job, a run asked for outside the schedule,
//! and why a control could not be carried out (README, "Controls: pause, resume, run now").
//! A leaf module: the model, the guards and the handle all name these.

use std::fmt;

use chrono::{DateTime, Utc};

use crate::guard::GuardError;

/// Who paused a job, and when. A paused job's fires are reported as `skipped` (reason
/// `paused`) instead of running, on every replica that shares its guard, until it is resumed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Pause {
    /// Whoever paused it, as they gave their name (an operator, a tool, an instance).
    pub by: String,
    /// When it was paused (the clock of the process that paused it).
    pub at: DateTime<Utc>,
}

impl Pause {
    /// A pause by `by` at `at`.
    pub fn new(by: impl Into<String>, at: DateTime<Utc>) -> Self {
        Pause { by: by.into(), at }
    }
}

impl fmt::Display for Pause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "paused by {} at {}",
            self.by,
            crate::fire::fmt_time(self.at)
        )
    }
}

/// A run asked for outside the schedule ("run now"): its identity `job@manual:<id>` never
/// equals a scheduled fire's `job@T`, and its claim goes through the job's guard like a fire's,
/// so one run happens across the cluster however many replicas see the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ManualRun {
    /// The request's identity, random and unique: every replica that claims the run uses it.
    pub id: u64,
    /// When the run was asked for; it must start within the job's misfire grace from then.
    pub requested_at: DateTime<Utc>,
}

impl ManualRun {
    /// The run's identity as run keys write it: `manual:<16 hex digits>`.
    pub fn label(&self) -> String {
        format!("manual:{:016x}", self.id)
    }

    /// Reads `manual:<16 hex digits>` back into an id.
    pub fn parse_label(label: &str) -> Option<u64> {
        let hex = label.strip_prefix("manual:")?;
        if hex.len() != 16 {
            return None;
        }
        u64::from_str_radix(hex, 16).ok()
    }
}

/// Why a control ([`Cronguard::pause`](crate::Cronguard::pause), `resume`, `trigger`, `add`,
/// `remove`) was not carried out.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ControlError {
    /// No job of this scheduler has this name.
    #[error("no job is named `{0}`; `Cronguard::jobs` lists the jobs this process runs")]
    UnknownJob(String),
    /// A job of this name already runs here.
    #[error(
        "a job named `{0}` already runs here; remove it first or give the new one another `name`"
    )]
    DuplicateName(String),
    /// The job's settings are wrong; the message says what to change.
    #[error("job `{job}` cannot be added: {problem}")]
    InvalidJob {
        /// The job.
        job: String,
        /// What is wrong.
        problem: String,
    },
    /// The job's guard does not keep pauses or manual runs (a custom guard that does not
    /// implement [`Guard::set_pause`](crate::guard::Guard::set_pause) and
    /// [`Guard::claim_manual`](crate::guard::Guard::claim_manual)).
    #[error("the guard of job `{0}` does not support this control; implement `Guard::set_pause` and `Guard::claim_manual` in it")]
    Unsupported(String),
    /// The guard's store could not be reached or refused the request; nothing changed.
    #[error("the guard of job `{job}` could not store the control; nothing changed, try again")]
    Guard {
        /// The job.
        job: String,
        /// What failed.
        #[source]
        source: GuardError,
    },
    /// The scheduler has shut down.
    #[error("the scheduler has shut down")]
    Stopped,
}
