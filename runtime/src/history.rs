//! Run history: one record per claimed run and per reported dropped fire, kept by guards that
//! store it (the `postgres` guard) and read back with
//! [`Monitor::history`](crate::Monitor::history). A leaf module: guards and the handle name it.

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, Utc};

/// How many entries one history query returns at most.
pub const HISTORY_LIMIT: usize = 10_000;

/// What became of one fire, as the history records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(rename_all = "snake_case")
)]
#[non_exhaustive]
pub enum Outcome {
    /// Claimed and started; not ended yet (or its process ended without a word: see
    /// [`Outcome::Lost`]).
    Running,
    /// The run returned `Ok` or `()`.
    Succeeded,
    /// The run returned `Err` or panicked.
    Failed,
    /// The run was cancelled (replaced, lease lost, shutdown).
    Cancelled,
    /// The run was recorded as running when a later fire of the job was claimed: its process
    /// died or froze before it could record the end.
    Lost,
    /// The claim took effect but the run never started (its reply came too late).
    Abandoned,
    /// The fire was dropped because no slot was free (`overlap = "skip"`).
    Skipped,
    /// The fire could not start within its misfire grace.
    Misfired,
    /// The fire was covered by a later one (`coalesce`).
    Coalesced,
}

impl Outcome {
    /// The name stored in the history: `running`, `succeeded`, `failed`, `cancelled`, `lost`,
    /// `abandoned`, `skipped`, `misfired` or `coalesced`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Outcome::Running => "running",
            Outcome::Succeeded => "succeeded",
            Outcome::Failed => "failed",
            Outcome::Cancelled => "cancelled",
            Outcome::Lost => "lost",
            Outcome::Abandoned => "abandoned",
            Outcome::Skipped => "skipped",
            Outcome::Misfired => "misfired",
            Outcome::Coalesced => "coalesced",
        }
    }

    /// The outcome named `name` (see [`as_str`](Outcome::as_str)).
    pub fn from_name(name: &str) -> Option<Outcome> {
        [
            Outcome::Running,
            Outcome::Succeeded,
            Outcome::Failed,
            Outcome::Cancelled,
            Outcome::Lost,
            Outcome::Abandoned,
            Outcome::Skipped,
            Outcome::Misfired,
            Outcome::Coalesced,
        ]
        .into_iter()
        .find(|o| o.as_str() == name)
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One fire of one job in the history.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct HistoryEntry {
    /// The job's name.
    pub job: String,
    /// The fire `T`.
    pub fire_time: DateTime<Utc>,
    /// The process that ran it, or that reported the drop.
    pub instance: String,
    /// The run's fencing token (runs only).
    pub fencing_token: Option<u64>,
    /// When the claim was granted, on the guard's clock (runs only).
    pub started: Option<DateTime<Utc>>,
    /// When the end was recorded, on the guard's clock.
    pub ended: Option<DateTime<Utc>>,
    /// What became of the fire.
    pub outcome: Outcome,
    /// The error of a failed run with its causes, or why a fire was dropped.
    pub error: Option<String>,
    /// The start minus the fire time (runs only).
    pub lateness: Option<Duration>,
}

impl HistoryEntry {
    /// An entry with only the fire, the process and the outcome set.
    pub fn new(
        job: impl Into<String>,
        fire_time: DateTime<Utc>,
        instance: impl Into<String>,
        outcome: Outcome,
    ) -> Self {
        HistoryEntry {
            job: job.into(),
            fire_time,
            instance: instance.into(),
            fencing_token: None,
            started: None,
            ended: None,
            outcome,
            error: None,
            lateness: None,
        }
    }
}
