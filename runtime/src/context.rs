//! What a running job knows about its run.

use crate::cancel::RunCancel;
use chrono::{DateTime, Utc};

/// What a running job knows about its run: which fire it is, its fencing token, and whether it
/// should stop.
#[derive(Debug, Clone)]
pub struct JobContext {
    pub(crate) job: std::sync::Arc<str>,
    pub(crate) fire_time: DateTime<Utc>,
    pub(crate) fencing_token: u64,
    pub(crate) cancel: RunCancel,
}

impl JobContext {
    /// The job's name.
    pub fn job_name(&self) -> &str {
        &self.job
    }

    /// The scheduled fire instant `T` this run belongs to (not the time the timer woke).
    pub fn fire_time(&self) -> DateTime<Utc> {
        self.fire_time
    }

    /// A token that strictly increases with every claimed run of this job.
    pub fn fencing_token(&self) -> u64 {
        self.fencing_token
    }

    /// `job@T`, a natural unique key for idempotent writes.
    pub fn run_key(&self) -> String {
        crate::fire::run_key(&self.job, self.fire_time)
    }

    /// Resolves when the run is cancelled.
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await
    }

    /// Whether the run is cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }
}
