//! The operator's controls as values: who paused a job, and a run asked for outside the schedule
//! (docs/guide/controls.md). A leaf module: the model, the guards and the
//! handle all name these.

use std::fmt;

use chrono::{DateTime, Utc};

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
            self.at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        )
    }
}

/// A run asked for outside the schedule ("run now"): its identity `job@manual:<id>` never
/// equals a scheduled fire's `job@T`, and its claim goes through the job's guard like a fire's,
/// so one run happens across the cluster however many replicas see the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
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
