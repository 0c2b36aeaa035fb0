//! Guards answer one question per fire: may this process run fire `T` of this job now?
//!
//! Every backend implements [`Guard`], so the scheduler does not know which one it talks to; a new
//! backend is one new module.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::registry::BoxFuture;

pub(crate) mod file;
pub(crate) mod local;

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
}

/// A claimed run's hold on its guard.
pub(crate) trait Lease: Send + 'static {
    /// The fencing token of the run: strictly greater than every earlier token of the job.
    fn fencing_token(&self) -> u64;

    /// How long the lease lasts without renewal, for guards whose leases expire.
    #[allow(dead_code)] // used by the watchdog of expiring guards
    fn ttl(&self) -> Option<Duration> {
        None
    }

    /// Gives the slot back. Use-once: consumes the lease.
    fn release(self: Box<Self>) -> BoxFuture<Result<(), GuardError>>;
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
    /// A blocking guard operation could not run (the runtime is shutting down).
    #[error("guard task failed: {0}")]
    Task(String),
}
