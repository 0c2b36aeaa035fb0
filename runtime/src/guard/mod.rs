//! Guards answer one question per fire: may this process run fire `T` of this job now?
//!
//! Every backend implements [`Guard`], so the scheduler does not know which one it talks to; a new
//! backend is one new module.

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use crate::registry::BoxFuture;

pub(crate) mod file;
pub(crate) mod local;
#[cfg(feature = "redis")]
pub(crate) mod redis;

#[cfg(test)]
mod conformance;

/// A guard's answer to a claim.
pub(crate) enum Claim {
    /// This process may run the fire; the lease must be released when the run ends.
    Acquired(Box<dyn Lease>),
    /// This fire, or a later one, was already claimed (by another process or earlier here).
    AlreadyRan,
    /// An instance of the job is running, so no slot is free.
    Busy {
        /// `false` when another process already reported this fire as busy.
        first_report: bool,
    },
}

/// Mutual exclusion and per-fire uniqueness for one job.
pub(crate) trait Guard: Send + Sync + 'static {
    /// Claims fire `fire_time`.
    fn claim(&self, fire_time: DateTime<Utc>) -> BoxFuture<Result<Claim, GuardError>>;

    /// Records that fire `fire_time` was dropped; `true` when no process recorded it before,
    /// so that a drop seen by several processes is reported at warn level once.
    fn first_report(&self, fire_time: DateTime<Utc>) -> BoxFuture<Result<bool, GuardError>> {
        let _ = fire_time;
        Box::pin(async { Ok(true) })
    }

    /// The latest fire claimed anywhere this guard reaches (this process, this host, the cluster).
    fn last_claimed(&self) -> BoxFuture<Result<Option<DateTime<Utc>>, GuardError>>;
}

/// A claimed run's hold on its guard.
pub(crate) trait Lease: Send + Sync + 'static {
    /// The fencing token of the run: strictly greater than every earlier token of the job.
    fn fencing_token(&self) -> u64;

    /// For a lease that expires: its length, and the instant the acquire request was sent
    /// (the holder's local deadline is that instant plus the length).
    fn expiry(&self) -> Option<(Duration, Instant)> {
        None
    }

    /// Extends an expiring lease by its length.
    fn renew(&self) -> BoxFuture<Result<Renewal, GuardError>> {
        Box::pin(async { Ok(Renewal::Renewed) })
    }

    /// Gives the slot back. Use-once: consumes the lease.
    fn release(self: Box<Self>) -> BoxFuture<Result<(), GuardError>>;
}

/// The answer to a renewal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
pub(crate) enum Renewal {
    /// The lease was extended.
    Renewed,
    /// The lease was extended, and another process asked this run to stop (`overlap = "replace"`).
    CancelRequested,
    /// The lease is gone: it expired, or another holder has it.
    Lost,
}

/// A guard could not answer (its backing store failed). The scheduler retries until the fire's
/// grace runs out and then reports a misfire with this reason.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GuardError {
    /// A lock file could not be opened, locked, read or written.
    #[error("lock file `{path}`: {source}")]
    File {
        /// The file.
        path: std::path::PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Redis did not answer or answered with an error.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    #[error("redis: {0}")]
    Redis(String),
    /// A blocking guard operation could not run (the runtime is shutting down).
    #[error("guard task failed: {0}")]
    Task(String),
}
