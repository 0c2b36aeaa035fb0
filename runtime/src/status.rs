//! The status snapshot of each job: what the handle's [`Cronguard::jobs`](crate::Cronguard::jobs)
//! returns.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::events::{Event, EventKind, Occurrence};
use crate::options::Lock;

/// A snapshot of one job.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct JobStatus {
    /// The job's name.
    pub name: String,
    /// Its schedule, as text (`cron `0 */5 * * * *` in Europe/Berlin`, `every 30s`).
    pub schedule: String,
    /// Its schedule in words, for dashboards and logs (`every 5 minutes (Europe/Berlin)`,
    /// `at 02:30 every day (UTC)`); see [`Schedule::describe`](crate::Schedule::describe).
    pub description: String,
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
    pub instance: Arc<str>,
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

/// What the scheduler keeps of one job for its status and health, built into a [`JobStatus`]
/// only when someone asks.
#[derive(Debug, Default)]
pub(crate) struct StatusRecord {
    last_run: Option<LastRun>,
    last_event: Option<Occurrence>,
    counts: Counts,
}

#[derive(Debug)]
struct LastRun {
    fire_time: DateTime<Utc>,
    started_at: DateTime<Utc>,
    finished_at: Option<DateTime<Utc>>,
    outcome: Option<EventKind>,
    fencing_token: u64,
}

impl StatusRecord {
    /// Counts `event` and keeps it as the last event.
    pub(crate) fn record(&mut self, event: Occurrence) {
        let c = &mut self.counts;
        match &event.kind {
            EventKind::Started => {
                c.started += 1;
                self.last_run = Some(LastRun {
                    fire_time: event.fire_time,
                    started_at: event.at,
                    finished_at: None,
                    outcome: None,
                    fencing_token: event.fencing_token.unwrap_or_default(),
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
            if let Some(run) = self
                .last_run
                .as_mut()
                .filter(|r| r.fire_time == event.fire_time)
            {
                run.finished_at = Some(event.at);
                run.outcome = Some(event.kind.clone());
            }
        }
        self.last_event = Some(event);
    }

    pub(crate) fn snapshot(
        &self,
        job: &crate::model::Spec,
        next_fire: Option<DateTime<Utc>>,
        instance: &Arc<str>,
        running: usize,
    ) -> JobStatus {
        JobStatus {
            name: job.name.to_string(),
            schedule: job.schedule.to_string(),
            description: job.schedule.describe(),
            lock: job.lock.clone(),
            enabled: job.enabled,
            next_fire,
            last_run: self.last_run.as_ref().map(|r| RunRecord {
                fire_time: r.fire_time,
                started_at: r.started_at,
                finished_at: r.finished_at,
                outcome: r.outcome.clone(),
                fencing_token: r.fencing_token,
                instance: Arc::clone(instance),
            }),
            last_event: self
                .last_event
                .as_ref()
                .map(|e| e.to_event(&job.name, instance)),
            running,
            counts: self.counts,
        }
    }
}
