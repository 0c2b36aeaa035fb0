//! The strip of each job's last fires: a bounded ring per job, fed from the scheduler's event
//! stream by one task that ends with the dashboard or the scheduler.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use chrono::{DateTime, Utc};
use cronguard::history::{HistoryEntry, Outcome};
use cronguard::{Event, EventKind};
use tokio::sync::broadcast::{error::RecvError, Receiver};

/// The longest detail (an error, a reason) kept with a mark, in characters.
const DETAIL_CHARS: usize = 200;

/// What became of one fire, as the strip colours it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fate {
    /// Started here and still running.
    Running,
    /// Ran here and succeeded.
    Ran,
    /// Ran here and failed (an error or a panic).
    Failed,
    /// Ran here and was cancelled (replaced, shutdown, lease lost).
    Cancelled,
    /// Dropped: no slot was free, or the job was paused.
    Skipped,
    /// Could not start within its misfire grace.
    Misfired,
    /// Covered by a later fire.
    Coalesced,
    /// Another process claimed it.
    Elsewhere,
    /// Its process died or froze before it recorded the end (the store's history only).
    Lost,
}

impl Fate {
    /// The fates of the store's history, in the legend's order.
    pub(crate) const STORED: [Fate; 8] = [
        Fate::Ran,
        Fate::Running,
        Fate::Failed,
        Fate::Cancelled,
        Fate::Lost,
        Fate::Skipped,
        Fate::Misfired,
        Fate::Coalesced,
    ];

    /// The fates of this process's events, in the legend's order.
    pub(crate) const ALL: [Fate; 8] = [
        Fate::Ran,
        Fate::Running,
        Fate::Failed,
        Fate::Cancelled,
        Fate::Skipped,
        Fate::Misfired,
        Fate::Coalesced,
        Fate::Elsewhere,
    ];

    /// The `data-fate` attribute.
    pub(crate) fn id(self) -> &'static str {
        match self {
            Fate::Running => "running",
            Fate::Ran => "ran",
            Fate::Failed => "failed",
            Fate::Cancelled => "cancelled",
            Fate::Skipped => "skipped",
            Fate::Misfired => "misfired",
            Fate::Coalesced => "coalesced",
            Fate::Elsewhere => "elsewhere",
            Fate::Lost => "lost",
        }
    }

    /// The legend's words.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Fate::Running => "running",
            Fate::Ran => "ran",
            Fate::Failed => "failed",
            Fate::Cancelled => "cancelled",
            Fate::Skipped => "skipped",
            Fate::Misfired => "misfired",
            Fate::Coalesced => "coalesced",
            Fate::Elsewhere => "ran elsewhere",
            Fate::Lost => "lost",
        }
    }

    /// The fill colour; distinct in lightness too, for colour-blind readers.
    pub(crate) fn colour(self) -> &'static str {
        match self {
            Fate::Running => "#f2c94c",
            Fate::Ran => "#2e8b57",
            Fate::Failed => "#c62828",
            Fate::Cancelled => "#ef6c00",
            Fate::Skipped => "#9e9e9e",
            Fate::Misfired => "#6a1b9a",
            Fate::Coalesced => "#64b5f6",
            Fate::Elsewhere => "#a5d6a7",
            Fate::Lost => "#5d4037",
        }
    }
}

/// One fire in a strip.
#[derive(Debug, Clone)]
pub(crate) struct Mark {
    pub(crate) fate: Fate,
    pub(crate) fire_time: DateTime<Utc>,
    pub(crate) run_key: Arc<str>,
    pub(crate) instance: Arc<str>,
    /// The error, the reason, or how many fires a misfire stands for; may be empty.
    pub(crate) detail: String,
}

impl Mark {
    /// The mark of a fire as the store's history recorded it.
    pub(crate) fn of_entry(entry: &HistoryEntry) -> Mark {
        let error = entry.error.clone().unwrap_or_default();
        let (fate, detail) = match entry.outcome {
            Outcome::Running => (Fate::Running, error),
            Outcome::Succeeded => (Fate::Ran, error),
            Outcome::Failed => (Fate::Failed, error),
            Outcome::Cancelled => (Fate::Cancelled, error),
            Outcome::Lost => (
                Fate::Lost,
                "its process ended without recording the end".to_owned(),
            ),
            Outcome::Abandoned => (
                Fate::Cancelled,
                "abandoned: the claim took effect but the run never started".to_owned(),
            ),
            Outcome::Skipped => (Fate::Skipped, error),
            Outcome::Misfired => (Fate::Misfired, error),
            Outcome::Coalesced => (Fate::Coalesced, error),
            other => (Fate::Lost, format!("{other}: {error}")),
        };
        Mark {
            fate,
            fire_time: entry.fire_time,
            run_key: entry.fencing_token.map_or_else(
                || Arc::from(""),
                |t| Arc::from(format!("fencing token {t}")),
            ),
            instance: Arc::from(entry.instance.as_str()),
            detail: detail.chars().take(DETAIL_CHARS).collect(),
        }
    }
}

/// The strips of every job seen, bounded in jobs and in marks per job.
#[derive(Debug)]
pub(crate) struct Strips {
    inner: Mutex<Inner>,
    len: usize,
    max_jobs: usize,
}

#[derive(Debug, Default)]
struct Inner {
    jobs: HashMap<Arc<str>, VecDeque<Mark>>,
    /// Events the reader missed because it fell behind the stream.
    missed: u64,
    /// Events of jobs not tracked because `max_jobs` strips are kept already.
    untracked: u64,
}

/// What the page shows of the strips besides the marks.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Gaps {
    pub(crate) missed: u64,
    pub(crate) untracked: u64,
}

impl Strips {
    pub(crate) fn new(len: usize, max_jobs: usize) -> Self {
        Strips {
            inner: Mutex::new(Inner::default()),
            len: len.max(1),
            max_jobs,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves at worst a mark half-updated: keep going.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds what `event` says about its fire.
    pub(crate) fn record(&self, event: &Event) {
        let (fate, detail) = match &event.kind {
            EventKind::Started => (Fate::Running, String::new()),
            EventKind::Succeeded => (Fate::Ran, String::new()),
            // A failed attempt that will be retried: the run goes on.
            EventKind::Failed {
                error,
                retry_at: Some(at),
                ..
            } => (
                Fate::Running,
                format!(
                    "attempt {} failed, retrying at {}: {error}",
                    event.attempt.unwrap_or(1),
                    time(*at)
                ),
            ),
            EventKind::Failed { error, .. } => (Fate::Failed, error.clone()),
            EventKind::Cancelled { reason } => (Fate::Cancelled, reason.to_string()),
            EventKind::Skipped { reason, paused } => (
                Fate::Skipped,
                if *paused {
                    format!("paused: {reason}")
                } else {
                    reason.clone()
                },
            ),
            EventKind::Misfired { reason, count, .. } if *count > 1 => {
                (Fate::Misfired, format!("{count} fires: {reason}"))
            }
            EventKind::Misfired { reason, .. } => (Fate::Misfired, reason.clone()),
            EventKind::Coalesced { covered_by } => (
                Fate::Coalesced,
                format!("covered by the fire of {}", time(*covered_by)),
            ),
            EventKind::ClaimedElsewhere => (Fate::Elsewhere, String::new()),
            // A cancelled event follows; the strip shows that one.
            EventKind::LeaseLost { .. } => return,
            _ => return,
        };
        let detail: String = detail.chars().take(DETAIL_CHARS).collect();
        let mut inner = self.lock();
        let Inner {
            jobs, untracked, ..
        } = &mut *inner;
        let full = jobs.len() >= self.max_jobs;
        let strip = match jobs.get_mut(&event.job) {
            Some(strip) => strip,
            None if full => {
                *untracked += 1;
                return;
            }
            None => jobs
                .entry(Arc::clone(&event.job))
                .or_insert_with(|| VecDeque::with_capacity(self.len.min(8))),
        };
        // The end of a run replaces its start.
        if !matches!(fate, Fate::Running) {
            if let Some(mark) = strip
                .iter_mut()
                .rev()
                .find(|m| m.fate == Fate::Running && m.run_key == event.run_key)
            {
                mark.fate = fate;
                mark.detail = detail;
                return;
            }
        }
        if strip.len() >= self.len {
            strip.pop_front();
        }
        strip.push_back(Mark {
            fate,
            fire_time: event.fire_time,
            run_key: Arc::clone(&event.run_key),
            instance: Arc::clone(&event.instance),
            detail,
        });
    }

    fn missed(&self, n: u64) {
        let mut inner = self.lock();
        inner.missed = inner.missed.saturating_add(n);
    }

    /// The marks of job `name`, oldest first.
    pub(crate) fn of(&self, name: &str) -> Vec<Mark> {
        self.lock()
            .jobs
            .get(name)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    pub(crate) fn gaps(&self) -> Gaps {
        let inner = self.lock();
        Gaps {
            missed: inner.missed,
            untracked: inner.untracked,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

/// Feeds `strips` from `events` until the dashboard is dropped or the scheduler's stream closes.
/// A reader that falls behind misses the oldest events and counts them; it never stops for it.
pub(crate) async fn follow(strips: Weak<Strips>, mut events: Receiver<Event>) {
    loop {
        let got = events.recv().await;
        let Some(strips) = strips.upgrade() else {
            return;
        };
        match got {
            Ok(event) => strips.record(&event),
            Err(RecvError::Lagged(n)) => strips.missed(n),
            Err(RecvError::Closed) => return,
        }
    }
}

/// An instant as the page writes it.
pub(crate) fn time(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}
