//! The two faces of a started scheduler: [`Cronguard`] runs it and shuts it down; [`Monitor`]
//! observes it (status, health, history, events) and operates it (pause, resume, run now, add,
//! remove).

use smol_str::SmolStr;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use crate::control::Pause;
use crate::error::Error;
use crate::events::Event;
use crate::executor::{lock, GuardView, ShardJobs, Shards, Shared};
use crate::guard::GuardError;
use crate::health::{judge, Health, HealthState, JobHealth};
use crate::history::HistoryEntry;
use crate::job::{Job, JobDefaults};
use crate::operate::{ControlError, ControlPlane, Feeds, GuardMaker};
use crate::status::JobStatus;

/// The longest shutdown waits for leases to be given back after the runs ended.
const RELEASE_WAIT: Duration = Duration::from_secs(5);

/// How long past the shutdown timeout a shard may take to end: its runs are cancelled at the
/// timeout, so one that takes longer is held up by code that blocks its thread.
const SHARD_END_WAIT: Duration = Duration::from_secs(1);

/// `now + d`, or an instant about thirty years ahead when that overflows (`Duration::MAX`).
fn far_instant(d: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(d)
        .or_else(|| now.checked_add(Duration::from_secs(86_400 * 365 * 30)))
        .unwrap_or(now)
}

/// Why [`Monitor::history`] has no answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HistoryError {
    /// No job of this scheduler has this name.
    #[error("no job is named `{0}`")]
    UnknownJob(String),
    /// The job's guard keeps no history, or history is off for the job.
    #[error("job `{0}` keeps no run history: `local` jobs keep none, `redis` and `file` jobs keep their newest entries unless `Builder::recent_history(0)` turned it off, and `postgres` jobs need `history` (or `Builder::history(true)`)")]
    NotKept(String),
    /// The guard could not answer.
    #[error("the run history of job `{job}` cannot be read")]
    Guard {
        /// The job.
        job: String,
        /// What failed.
        #[source]
        source: GuardError,
    },
}

/// One page of [`Monitor::jobs_page`].
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct JobsPage {
    /// The jobs of the page, sorted by name.
    pub jobs: Vec<JobStatus>,
    /// The name to pass as `after` for the next page; `None` on the last page.
    pub next: Option<String>,
}

/// The face of a started scheduler that observes and operates it: the jobs' status, health,
/// history and events, and the operator's controls (pause, resume, run now, add, remove).
///
/// Get it with [`Cronguard::monitor`] and hand clones to HTTP handlers, probes or an admin
/// endpoint; it stays valid after shutdown (then it reports the last state, and controls answer
/// [`ControlError::Stopped`]). Running and stopping the scheduler is [`Cronguard`]'s.
#[derive(Clone)]
pub struct Monitor {
    shards: Arc<[ShardJobs]>,
    clock: crate::clock::Clock,
    instance: Arc<str>,
    plane: Arc<ControlPlane>,
    /// The shard tasks, to tell whether they still run.
    loops: Arc<[tokio::task::AbortHandle]>,
    stop: tokio_util::sync::CancellationToken,
    events: crate::events::EventSink,
}

impl Monitor {
    /// A stream of every event from now on. A receiver that falls more than
    /// [`EVENT_STREAM_CAPACITY`](crate::EVENT_STREAM_CAPACITY) events behind misses the oldest and
    /// is told how many (`RecvError::Lagged`); the scheduler never waits for it.
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<Event> {
        self.events.subscribe()
    }

    /// Pauses job `job` (docs/guide/controls.md): its fires are reported as
    /// `skipped` with reason `paused` instead of running, until [`resume`](Monitor::resume). For
    /// `file`, `redis` and `postgres` guards the pause is stored where the guard keeps its state
    /// and holds for every process that shares it, from its next claim on; for `local` it holds in
    /// this process. A run going on is not stopped. `by` names who paused it, for status, logs
    /// and the command-line tool.
    ///
    /// # Errors
    ///
    /// [`ControlError`]: no such job, the guard's store could not store it (nothing changed),
    /// a custom guard without pauses, or the scheduler has shut down.
    pub async fn pause(&self, job: &str, by: &str) -> Result<(), ControlError> {
        let pause = Pause::new(by, self.clock.now());
        self.plane.set_pause(job, Some(pause), by).await
    }

    /// Resumes a paused job: its next fire runs. See [`pause`](Monitor::pause).
    ///
    /// # Errors
    ///
    /// As [`pause`](Monitor::pause).
    pub async fn resume(&self, job: &str, by: &str) -> Result<(), ControlError> {
        self.plane.set_pause(job, None, by).await
    }

    /// Runs job `job` now, outside its schedule, also when it is paused; returns the run's key
    /// `job@manual:<id>`, which never equals a scheduled fire's. The run goes through the job's
    /// guard like a fire (one run across the processes that share it, with a fencing token of
    /// its own), waits for a run going on to end, and is reported as `misfired` if it cannot
    /// start within the job's misfire grace.
    ///
    /// # Errors
    ///
    /// [`ControlError`]: no such job, a custom guard without manual runs, or the scheduler has
    /// shut down.
    pub fn trigger(&self, job: &str) -> Result<String, ControlError> {
        self.plane.trigger(job)
    }

    /// Adds a job while the scheduler runs; it follows its schedule from now on. Its guard uses
    /// the stores connected at start (a `redis` or `postgres` job needs a job of that guard at
    /// start, or the store's URL given to the builder).
    ///
    /// # Errors
    ///
    /// [`ControlError::DuplicateName`], [`ControlError::InvalidJob`] (its settings, missing
    /// state, a store that is not connected), or the scheduler has shut down.
    pub fn add(&self, job: Job) -> Result<(), ControlError> {
        self.plane.add(job)
    }

    /// Removes a job: it fires no more, fires waiting for it are reported, and a run going on
    /// finishes. Its name is free for [`add`](Monitor::add) at once.
    ///
    /// # Errors
    ///
    /// [`ControlError::UnknownJob`], or the scheduler has shut down.
    pub fn remove(&self, job: &str) -> Result<(), ControlError> {
        self.plane.remove(job)
    }

    /// Whether the scheduler's own loop is alive: it was not shut down, none of its shard tasks
    /// ended (a shard task ends only by a bug that panicked), and none has been held up for more
    /// than 10 s past the instant it was due to run (code that blocks the shard's thread — a
    /// blocking call in an `async` job's first poll — holds up every job of the shard; a restart
    /// frees it). Reads a few flags, asks no guard and looks at no job, so it is the check for a
    /// **liveness** (or readiness) probe: a Redis outage or an overdue job never turns it
    /// `false`, and restarting the process would not fix those. Use [`health`](Monitor::health)
    /// for alerting instead.
    pub fn alive(&self) -> bool {
        let now = tokio::time::Instant::now();
        !self.stop.is_cancelled()
            && self.loops.iter().all(|task| !task.is_finished())
            && self
                .plane
                .pulses
                .stalled(now, now, crate::executor::STALL_NOT_ALIVE)
                .is_none()
    }

    /// A snapshot of every job, sorted by name: next fire, last run, running now, counts.
    ///
    /// With many jobs prefer [`jobs_page`](Monitor::jobs_page) or [`job`](Monitor::job): this
    /// copies the status of every one.
    pub fn jobs(&self) -> Vec<JobStatus> {
        let mut all = Vec::new();
        for shard in self.shards.iter() {
            all.extend(
                lock(shard)
                    .iter()
                    .filter(|j| !j.removed)
                    .map(|j| j.snapshot(&self.instance)),
            );
        }
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }

    /// How many jobs run here.
    pub fn job_count(&self) -> usize {
        self.shards
            .iter()
            .map(|s| lock(s).iter().filter(|j| !j.removed).count())
            .sum()
    }

    /// The status of job `name`, if it runs here.
    pub fn job(&self, name: &str) -> Option<JobStatus> {
        self.shards.iter().find_map(|shard| {
            lock(shard)
                .iter()
                .find(|j| !j.removed && &**j.name() == name)
                .map(|j| j.snapshot(&self.instance))
        })
    }

    /// Up to `limit` jobs sorted by name, the first after `after` (`None`: from the first job).
    /// Only the page's jobs are copied, so a dashboard can list a million jobs page by page: pass
    /// the page's [`next`](JobsPage::next) as `after` to get the following page.
    pub fn jobs_page(&self, after: Option<&str>, limit: usize) -> JobsPage {
        // The `limit + 1` smallest names after `after` (one more tells whether a page follows).
        let keep = limit.saturating_add(1);
        let mut smallest: BinaryHeap<(SmolStr, usize, usize)> = BinaryHeap::new();
        for (s, shard) in self.shards.iter().enumerate() {
            for (i, job) in lock(shard).iter().enumerate() {
                if job.removed {
                    continue;
                }
                let name = job.name();
                if after.is_some_and(|after| &**name <= after) {
                    continue;
                }
                if smallest.len() == keep {
                    match smallest.peek() {
                        Some((largest, ..)) if name < largest => {
                            smallest.pop();
                        }
                        _ => continue,
                    }
                }
                smallest.push((name.clone(), s, i));
            }
        }
        let mut page = smallest.into_sorted_vec();
        let more = page.len() > limit;
        page.truncate(limit);
        let jobs: Vec<JobStatus> = page
            .iter()
            .filter_map(|(_, s, i)| {
                let shard = lock(self.shards.get(*s)?);
                shard.get(*i).map(|j| j.snapshot(&self.instance))
            })
            .collect();
        JobsPage {
            next: more.then(|| jobs.last().map(|j| j.name.clone())).flatten(),
            jobs,
        }
    }

    /// The run history of job `job` from fire `since` on, oldest first (at most
    /// [`HISTORY_LIMIT`](crate::history::HISTORY_LIMIT) entries): every run with its outcome,
    /// and every fire reported as dropped, across every replica that shares the guard. The
    /// `redis` and `file` guards keep the newest entries of every job
    /// ([`Builder::recent_history`](crate::Builder::recent_history)); `postgres` keeps every
    /// entry for jobs with `history`.
    ///
    /// # Errors
    ///
    /// [`HistoryError`]: no such job, no history kept for it, or the guard failed (a 5 s limit).
    pub async fn history(
        &self,
        job: &str,
        since: DateTime<Utc>,
    ) -> Result<Vec<HistoryEntry>, HistoryError> {
        let view = self
            .shards
            .iter()
            .find_map(|shard| {
                lock(shard)
                    .iter()
                    .find(|j| !j.removed && &**j.name() == job)
                    .map(|j| j.guard())
            })
            .ok_or_else(|| HistoryError::UnknownJob(job.to_owned()))?;
        let GuardView::Shared(guard) = view else {
            return Err(HistoryError::NotKept(job.to_owned()));
        };
        let guard_err = |source| HistoryError::Guard {
            job: job.to_owned(),
            source,
        };
        let Some(history) = guard.history() else {
            return Err(HistoryError::NotKept(job.to_owned()));
        };
        match tokio::time::timeout(Duration::from_secs(5), history.read(since)).await {
            Ok(Ok(entries)) => Ok(entries),
            Ok(Err(e)) => Err(guard_err(e)),
            Err(_) => Err(guard_err(GuardError::new(
                crate::guard::GuardErrorKind::Timeout,
                "the guard did not answer within 5 s",
            ))),
        }
    }

    /// Runs going on now, over all jobs.
    fn running(&self) -> usize {
        self.shards
            .iter()
            .map(|s| lock(s).iter().map(|j| j.running()).sum::<usize>())
            .sum()
    }

    /// Whether every job is on time (see [`Health`] for the rule). Shared guards are asked for the
    /// last claimed fire, each with a 2 s timeout; a guard that cannot answer makes the job's
    /// state [`HealthState::Unknown`] and the whole report unhealthy.
    pub async fn health(&self) -> Health {
        self.health_where(None).await
    }

    /// [`health`](Monitor::health) of the jobs named in `jobs` only (names of no job are left
    /// out), so that a dashboard showing a page of jobs asks the guards about that page only.
    pub async fn health_of(&self, jobs: &[&str]) -> Health {
        self.health_where(Some(jobs)).await
    }

    async fn health_where(&self, only: Option<&[&str]>) -> Health {
        let now = self.clock.now();
        let mut asks = Vec::new();
        let wanted = |name: &str| only.is_none_or(|names| names.contains(&name));
        for shard in self.shards.iter() {
            for job in lock(shard)
                .iter()
                .filter(|j| !j.removed && wanted(j.name()))
            {
                let grace = job.model().due_grace();
                let due = job.model().due_by(now);
                let paused = job.model().paused().cloned();
                asks.push((job.name().to_string(), due, job.guard(), grace, paused));
            }
        }
        let checks = asks
            .into_iter()
            .map(|(name, due, guard, grace, paused)| async move {
                if let Some(p) = paused {
                    return JobHealth {
                        name,
                        state: HealthState::Paused { by: p.by, at: p.at },
                        last_claimed: None,
                    };
                }
                let asked = match guard {
                    GuardView::Local(last) => Ok(Ok(last)),
                    GuardView::Shared(guard) => {
                        tokio::time::timeout(Duration::from_secs(2), guard.last_claimed()).await
                    }
                };
                match asked {
                    Ok(Ok(last_claimed)) => JobHealth {
                        name,
                        state: judge(due, last_claimed, grace, now),
                        last_claimed,
                    },
                    Ok(Err(e)) => JobHealth {
                        name,
                        state: HealthState::Unknown {
                            reason: e.to_string(),
                        },
                        last_claimed: None,
                    },
                    Err(_) => JobHealth {
                        name,
                        state: HealthState::Unknown {
                            reason: "the guard did not answer within 2 s".to_owned(),
                        },
                        last_claimed: None,
                    },
                }
            });
        let mut jobs = futures_util::future::join_all(checks).await;
        jobs.sort_by(|a, b| a.name.cmp(&b.name));
        Health {
            healthy: jobs
                .iter()
                .all(|j| matches!(j.state, HealthState::OnTime | HealthState::Paused { .. })),
            checked_at: now,
            jobs,
        }
    }
}

impl std::fmt::Debug for Monitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Monitor")
            .field("shards", &self.shards.len())
            .finish()
    }
}

/// The running scheduler, returned by [`start`](crate::start): it runs until
/// [`shutdown`](Cronguard::shutdown) or a shutdown signal. Everything else — status, health,
/// history, events and controls — is on its [`Monitor`].
///
/// Dropping it does not stop the jobs; call [`shutdown`](Cronguard::shutdown) or
/// [`run_until_shutdown_signal`](Cronguard::run_until_shutdown_signal).
#[must_use = "the scheduler runs until it is shut down; keep the handle and shut it down"]
pub struct Cronguard {
    tasks: Vec<tokio::task::JoinHandle<()>>,
    monitor: Monitor,
    shared: Shared,
    shutdown_timeout: Duration,
}

impl Cronguard {
    pub(crate) fn new(
        shards: Shards,
        shared: Shared,
        shutdown_timeout: Duration,
        feeds: Feeds,
        maker: Box<dyn GuardMaker>,
        defaults: JobDefaults,
    ) -> Self {
        let loops = shards.tasks.iter().map(|t| t.abort_handle()).collect();
        let jobs: Arc<[ShardJobs]> = shards.jobs.into();
        let plane = Arc::new(ControlPlane {
            shards: Arc::clone(&jobs),
            inboxes: shards.inboxes.into(),
            pulses: shards.pulses,
            clock: shared.clock.clone(),
            instance: Arc::clone(&shared.instance),
            feeds,
            presence: Arc::clone(&shared.presence),
            maker,
            defaults,
            stop: shared.stop.clone(),
            runtime: tokio::runtime::Handle::current(),
            tasks: shared.tasks.clone(),
            adding: std::sync::Mutex::new(shards.settings),
        });
        crate::operate::spawn_feed_readers(&plane);
        crate::executor::watch_shards(
            Arc::clone(&plane.pulses),
            Arc::clone(&jobs),
            shards.tasks.iter().map(|t| t.abort_handle()).collect(),
            plane.stop.clone(),
            plane.runtime.clone(),
        );
        Cronguard {
            tasks: shards.tasks,
            monitor: Monitor {
                shards: jobs,
                clock: shared.clock.clone(),
                instance: Arc::clone(&shared.instance),
                plane,
                loops,
                stop: shared.stop.clone(),
                events: shared.events.clone(),
            },
            shared,
            shutdown_timeout,
        }
    }

    /// The face that observes and operates this scheduler (status, health, history, events,
    /// pause, resume, run now, add, remove): cloneable, for HTTP handlers, probes and tests.
    pub fn monitor(&self) -> Monitor {
        self.monitor.clone()
    }

    /// Stops firing, lets running jobs finish within the shutdown timeout (30 s unless set with
    /// [`Builder::shutdown_timeout`](crate::Builder::shutdown_timeout)), then cancels the rest and
    /// releases every guard. With partition ownership, it returns once the process has left its
    /// partition groups (at most 5 s for a store that does not answer), so that the processes
    /// that go on own its partitions at once (docs/design/ownership.md). A shard held up by code
    /// that blocks its thread is not waited for past the timeout and a second: an error names the
    /// job whose run holds it up (the process then cannot exit while that thread is blocked).
    pub async fn shutdown(self) {
        let timeout = self.shutdown_timeout;
        self.shutdown_within(timeout).await
    }

    /// [`shutdown`](Cronguard::shutdown) with an explicit timeout.
    pub async fn shutdown_within(self, timeout: Duration) {
        let running = self.monitor.running();
        if running > 0 {
            tracing::info!(
                running,
                timeout_ms = timeout.as_millis() as u64,
                "stopping: waiting for running jobs to finish"
            );
        }
        let deadline = far_instant(timeout);
        let _ = self.shared.deadline.set(deadline);
        self.shared.stop.cancel();
        // A shard ends once its runs have ended or been cancelled at the deadline, unless code
        // that blocks its thread holds it up: that one never ends, and shutdown goes on without it.
        let given_up = deadline.checked_add(SHARD_END_WAIT).unwrap_or(deadline);
        for (shard, task) in self.tasks.into_iter().enumerate() {
            match tokio::time::timeout_at(given_up, task).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::error!(error = %e, "a scheduler task ended abnormally during shutdown");
                }
                Err(_) => {
                    let plane = &self.monitor.plane;
                    tracing::error!(
                        shard,
                        "stopping without a shard of this process that is still held up: {}. Its jobs' fires from then on stay undecided in this process (with a shared guard, the others run or report them). The process cannot exit on its own while that thread is blocked: tokio waits for its threads when the runtime is dropped, so end it from outside (the orchestrator's kill after its grace period) or with `std::process::exit` after shutdown returns (docs/design/ownership.md)",
                        plane.pulses.held_up(&plane.shards, shard)
                    );
                }
            }
        }
        // Leases given back on tasks of their own (and claims still in flight) are waited for,
        // so that a replica that stops frees its locks at once instead of after a lease.
        let tasks = &self.shared.tasks;
        tasks.close();
        let release_wait = timeout.clamp(Duration::from_secs(1), RELEASE_WAIT);
        if tokio::time::timeout(release_wait, tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                waited_ms = release_wait.as_millis() as u64,
                "some lease releases or partition hand-overs (or runs that ignored cancellation) did not finish in time; leases free themselves when they expire"
            );
        }
        // Every event, up to the last run's end, reaches the hooks before shutdown returns —
        // unless a hook is stuck: then shutdown does not hang on it for longer than the timeout.
        let hooks_wait = timeout.max(Duration::from_secs(1));
        if !self.shared.events.flush(hooks_wait).await {
            tracing::warn!(
                waited_ms = hooks_wait.as_millis() as u64,
                "event hooks are still busy; shutting down without waiting for them to catch up"
            );
        }
        tracing::info!("cronguard stopped");
    }

    /// Runs until SIGINT (Ctrl-C) or SIGTERM, then shuts down gracefully.
    ///
    /// # Errors
    ///
    /// [`Error::Signal`] when the signal handlers cannot be installed.
    pub async fn run_until_shutdown_signal(self) -> Result<(), Error> {
        wait_for_signal().await.map_err(Error::Signal)?;
        tracing::info!("shutdown signal received; stopping");
        self.shutdown().await;
        Ok(())
    }
}

#[cfg(unix)]
async fn wait_for_signal() -> std::io::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    Ok(())
}

#[cfg(not(unix))]
async fn wait_for_signal() -> std::io::Result<()> {
    tokio::signal::ctrl_c().await
}
