//! The status snapshot of each job: what the handle's [`Cronguard::jobs`](crate::Cronguard::jobs)
//! returns.

use std::sync::{Mutex, PoisonError};

use chrono::{DateTime, Utc};

use std::time::Duration;

use crate::events::{Event, EventKind};
use crate::health::FireWindow;
use crate::Lock;

/// A snapshot of one job.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct JobStatus {
    /// The job's name.
    pub name: String,
    /// Its schedule, as text (`cron `0 */5 * * * *` in Europe/Berlin`, `every 30s`).
    pub schedule: String,
    /// Its guard.
    pub lock: Lock,
    /// Whether this process fires it (see [`Job::enabled`](crate::Job::enabled)).
    pub enabled: bool,
    /// The next fire instant, `None` when the schedule never fires again or the scheduler stopped.
    pub next_fire: Option<DateTime<Utc>>,
    /// The latest run that started in this process.
    pub last_run: Option<RunRecord>,
    /// The latest event of any kind.
    pub last_event: Option<Event>,
    /// Runs of this job going on in this process now.
    pub running: usize,
    /// How many events of each kind this process saw since start.
    pub counts: Counts,
}

/// One run, as the status keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct RunRecord {
    /// The fire it ran.
    pub fire_time: DateTime<Utc>,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// When it ended; `None` while it runs.
    pub finished_at: Option<DateTime<Utc>>,
    /// `succeeded`, `failed` or `cancelled`; `None` while it runs.
    pub outcome: Option<EventKind>,
    /// Its fencing token.
    pub fencing_token: u64,
    /// The process that ran it.
    pub instance: std::sync::Arc<str>,
}

/// Counts of events by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Counts {
    /// Runs started.
    pub started: u64,
    /// Runs that succeeded.
    pub succeeded: u64,
    /// Runs that failed (an `Err` or a panic).
    pub failed: u64,
    /// Runs cancelled (replace, shutdown, lost lease).
    pub cancelled: u64,
    /// Fires skipped because no slot was free.
    pub skipped: u64,
    /// Fires that could not start within their grace.
    pub misfired: u64,
    /// Fires covered by a later fire.
    pub coalesced: u64,
    /// Fires claimed by another process.
    pub claimed_elsewhere: u64,
    /// Runs that lost their lease.
    pub lease_lost: u64,
}

pub(crate) struct StatusCell {
    status: Mutex<JobStatus>,
    window: Mutex<FireWindow>,
}

impl StatusCell {
    pub(crate) fn new(name: &str, schedule: String, lock: Lock, enabled: bool) -> Self {
        let status = Mutex::new(JobStatus {
            name: name.to_owned(),
            schedule,
            lock,
            enabled,
            next_fire: None,
            last_run: None,
            last_event: None,
            running: 0,
            counts: Counts::default(),
        });
        StatusCell {
            status,
            window: Mutex::new(FireWindow::default()),
        }
    }

    /// Notes that the timer reached fire `fire` (for the health check).
    pub(crate) fn observe_fire(&self, fire: DateTime<Utc>, now: DateTime<Utc>, grace: Duration) {
        self.window
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .observe(fire, now, grace);
    }

    /// The newest fire the timer reached whose grace had passed at `now`.
    pub(crate) fn due_by(&self, now: DateTime<Utc>, grace: Duration) -> Option<DateTime<Utc>> {
        self.window
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .due_by(now, grace)
    }

    pub(crate) fn snapshot(&self) -> JobStatus {
        self.status
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn update(&self, f: impl FnOnce(&mut JobStatus)) {
        f(&mut self.status.lock().unwrap_or_else(PoisonError::into_inner));
    }

    /// Counts `event` and keeps it as the last event.
    pub(crate) fn record(&self, event: Event, running: usize) {
        self.update(|s| {
            Self::count(s, &event, running);
            s.last_event = Some(event);
        });
    }

    fn count(s: &mut JobStatus, event: &Event, running: usize) {
        let c = &mut s.counts;
        match &event.kind {
            EventKind::Started => {
                c.started += 1;
                s.last_run = Some(RunRecord {
                    fire_time: event.fire_time,
                    started_at: event.at,
                    finished_at: None,
                    outcome: None,
                    fencing_token: event.fencing_token.unwrap_or_default(),
                    instance: std::sync::Arc::clone(&event.instance),
                });
            }
            EventKind::Succeeded => c.succeeded += 1,
            EventKind::Failed { .. } => c.failed += 1,
            EventKind::Cancelled { .. } => c.cancelled += 1,
            EventKind::Skipped { .. } => c.skipped += 1,
            EventKind::Misfired { .. } => c.misfired += 1,
            EventKind::Coalesced { .. } => c.coalesced += 1,
            EventKind::ClaimedElsewhere => c.claimed_elsewhere += 1,
            EventKind::LeaseLost { .. } => c.lease_lost += 1,
        }
        if matches!(
            event.kind,
            EventKind::Succeeded | EventKind::Failed { .. } | EventKind::Cancelled { .. }
        ) {
            if let Some(run) = s
                .last_run
                .as_mut()
                .filter(|r| r.fire_time == event.fire_time)
            {
                run.finished_at = Some(event.at);
                run.outcome = Some(event.kind.clone());
            }
        }
        s.running = running;
    }
}
