//! What the tasks of a shard (claims, reports, runs, watchdogs) send back to it.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::control::{ManualRun, Pause};
use crate::events::EventKind;
use crate::guard::{Claim, GuardError};
use crate::model::{MissedFires, Reported, RunEnd, RunId, Verdict};

/// A report to a shard about one of its jobs.
pub(crate) struct Msg {
    /// The job's index in its shard.
    pub(crate) job: u32,
    pub(crate) report: Report,
}

pub(crate) enum Report {
    /// The shared guard answered the job's claim in flight.
    Claimed {
        result: Result<Claim, GuardError>,
        latency: Duration,
        /// The monotonic instant and the [`BootClock`](crate::clock::BootClock) reading taken
        /// together just before the claim went to the guard (`None`: that clock could not be
        /// read).
        sent: Option<(tokio::time::Instant, Duration)>,
    },
    /// The shared guard said who reports a dropped fire.
    Reported {
        fire: DateTime<Utc>,
        kind: EventKind,
        reported: Reported,
    },
    /// The shared guard's fate point of the job, read when it started following its schedule.
    FatePoint(Option<DateTime<Utc>>),
    /// A read of the fate point failed (it is asked again): what failed, and its kind.
    FatePointFailed { error: String, kind: &'static str },
    /// The shared guard recorded fires missed while no process ran the job: the fate point it
    /// found before (or why it could not record them).
    MissedReported {
        missed: MissedFires,
        before: Result<Option<DateTime<Utc>>, String>,
    },
    /// A run's body returned (or was stopped at its lease deadline); for a run of a job whose
    /// runs start on tasks of their own, how long the first poll there took.
    Finished {
        id: RunId,
        end: RunEnd,
        first_poll: Option<Duration>,
    },
    /// The watchdog judged a run's lease.
    Verdict { id: RunId, verdict: Verdict },
    /// An operator's control, and who waits until the job has taken it.
    Control(JobControl, Option<tokio::sync::oneshot::Sender<()>>),
}

/// An operator's control of one job, from the handle or the control feed.
pub(crate) enum JobControl {
    /// The job was paused (`Some`) or resumed (`None`).
    SetPaused(Option<Pause>),
    /// Run the job now.
    Trigger(ManualRun),
    /// A job added while the scheduler runs: start following its schedule.
    Schedule,
    /// Stop the job for good: no more fires; runs going on finish.
    Remove,
    /// The owner of the job's partition changed (docs/design/ownership.md): walk the fires it
    /// left to the owner before.
    OwnerChanged,
}
