//! Every run and every dropped fire is an [`Event`]: logged through `tracing`, kept in the status,
//! and handed to the hooks a user adds.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::mpsc;

/// One thing that happened to one fire of one job.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Event {
    /// The job's name.
    pub job: Arc<str>,
    /// The fire instant `T` the event is about.
    pub fire_time: DateTime<Utc>,
    /// `job@T`, the fire's identity in every process.
    pub run_key: String,
    /// The fencing token of the run, for events of a claimed run.
    pub fencing_token: Option<u64>,
    /// The process that observed it (`CRONGUARD_INSTANCE`, default `hostname:pid`).
    pub instance: Arc<str>,
    /// When it was observed (the scheduler's clock).
    pub at: DateTime<Utc>,
    /// `false` when another process has already reported this same dropped fire (a skip seen by
    /// several processes of one host): such events are logged at debug level, not warn, so a
    /// drop is reported once.
    pub first_report: bool,
    /// What happened.
    pub kind: EventKind,
}

/// What happened to a fire.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EventKind {
    /// The run started, `lateness` after its fire time.
    Started {
        /// Start minus fire time.
        lateness: Duration,
    },
    /// The run returned `Ok` or `()`.
    Succeeded {
        /// How long it ran.
        duration: Duration,
    },
    /// The run returned `Err` or panicked.
    Failed {
        /// The error's `Display` text, or the panic message.
        error: String,
        /// How long it ran.
        duration: Duration,
    },
    /// The run was cancelled before it finished.
    Cancelled {
        /// Why.
        reason: CancelReason,
        /// How long it ran.
        duration: Duration,
    },
    /// The fire was dropped because no instance slot was free (`overlap = "skip"`).
    Skipped {
        /// Why no slot was free.
        reason: String,
    },
    /// The fire was dropped because it could not start within its misfire grace.
    Misfired {
        /// Why it could not start.
        reason: String,
    },
    /// The fire was dropped because a later fire was waiting too (`coalesce`).
    Coalesced {
        /// The fire that covers it.
        covered_by: DateTime<Utc>,
    },
    /// Another process claimed this fire (or a later one) first.
    ClaimedElsewhere,
    /// The run lost its lease and was cancelled.
    LeaseLost {
        /// Why the lease was lost.
        reason: String,
    },
}

/// Why a run was cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CancelReason {
    /// A newer fire replaced it (`overlap = "replace"`).
    Replaced,
    /// The scheduler shut down and the run did not finish within the shutdown deadline.
    Shutdown,
    /// The run lost its lease.
    LeaseLost,
}

impl fmt::Display for CancelReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CancelReason::Replaced => "replaced by a newer fire",
            CancelReason::Shutdown => "shutdown deadline passed",
            CancelReason::LeaseLost => "lease lost",
        })
    }
}

impl EventKind {
    /// The event's name as used in logs and metrics: `started`, `succeeded`, `failed`, `cancelled`,
    /// `skipped`, `misfired`, `coalesced`, `claimed_elsewhere` or `lease_lost`.
    pub fn name(&self) -> &'static str {
        match self {
            EventKind::Started { .. } => "started",
            EventKind::Succeeded { .. } => "succeeded",
            EventKind::Failed { .. } => "failed",
            EventKind::Cancelled { .. } => "cancelled",
            EventKind::Skipped { .. } => "skipped",
            EventKind::Misfired { .. } => "misfired",
            EventKind::Coalesced { .. } => "coalesced",
            EventKind::ClaimedElsewhere => "claimed_elsewhere",
            EventKind::LeaseLost { .. } => "lease_lost",
        }
    }
}

/// A user's event hook.
pub(crate) type Hook = Arc<dyn Fn(&Event) + Send + Sync>;

/// Where the scheduler sends events: logged at once, handed to hooks on a task of their own so
/// that a slow or panicking hook never delays a timer or a job.
#[derive(Clone)]
pub(crate) struct EventSink {
    hooks: Option<mpsc::UnboundedSender<Event>>,
}

impl EventSink {
    pub(crate) fn new(hooks: Vec<Hook>) -> Self {
        if hooks.is_empty() {
            return EventSink { hooks: None };
        }
        let (tx, mut rx) = mpsc::unbounded_channel::<Event>();
        tokio::spawn(async move {
            while let Some(event) = rx.recv().await {
                for hook in &hooks {
                    let call = std::panic::AssertUnwindSafe(|| hook(&event));
                    if std::panic::catch_unwind(call).is_err() {
                        tracing::error!(job = %event.job, event = event.kind.name(), "an event hook panicked; the event was still delivered to the other hooks");
                    }
                }
            }
        });
        EventSink { hooks: Some(tx) }
    }

    pub(crate) fn emit(&self, event: Event) {
        log(&event);
        if let Some(tx) = &self.hooks {
            // The receiver lives as long as the runtime; a send after shutdown has nobody to tell.
            let _ = tx.send(event);
        }
    }
}

fn log(e: &Event) {
    let t = e
        .fire_time
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let token = e.fencing_token.map(|t| t.to_string()).unwrap_or_default();
    match &e.kind {
        EventKind::Started { lateness } => {
            tracing::info!(job = %e.job, fire_time = %t, fencing_token = %token, lateness_ms = lateness.as_millis() as u64, "run started")
        }
        EventKind::Succeeded { duration } => {
            tracing::info!(job = %e.job, fire_time = %t, fencing_token = %token, duration_ms = duration.as_millis() as u64, "run succeeded")
        }
        EventKind::Failed { error, duration } => {
            tracing::error!(job = %e.job, fire_time = %t, fencing_token = %token, duration_ms = duration.as_millis() as u64, error = %error, "run failed")
        }
        EventKind::Cancelled { reason, duration } => {
            tracing::warn!(job = %e.job, fire_time = %t, fencing_token = %token, duration_ms = duration.as_millis() as u64, reason = %reason, "run cancelled")
        }
        EventKind::Skipped { reason } if e.first_report => {
            tracing::warn!(job = %e.job, fire_time = %t, reason = %reason, "fire skipped")
        }
        EventKind::Skipped { reason } => {
            tracing::debug!(job = %e.job, fire_time = %t, reason = %reason, "fire skipped (already reported by another process)")
        }
        EventKind::Misfired { reason } => {
            tracing::warn!(job = %e.job, fire_time = %t, reason = %reason, "fire misfired")
        }
        EventKind::Coalesced { covered_by } => {
            tracing::info!(job = %e.job, fire_time = %t, covered_by = %covered_by.to_rfc3339_opts(chrono::SecondsFormat::Millis, true), "fire coalesced into a later one")
        }
        EventKind::ClaimedElsewhere => {
            tracing::debug!(job = %e.job, fire_time = %t, "fire claimed by another process")
        }
        EventKind::LeaseLost { reason } => {
            tracing::error!(job = %e.job, fire_time = %t, fencing_token = %token, reason = %reason, "lease lost; run cancelled")
        }
    }
}
