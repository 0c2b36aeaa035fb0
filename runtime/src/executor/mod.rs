//! The executor: carries out what each job's [`JobModel`](crate::model::JobModel) decides.
//!
//! Jobs are split into shards; a shard is one task with one timer for all of its jobs, so a
//! process with 100,000 jobs has a handful of timers, not 100,000. The claims of a shard's step
//! go to their guards together, on one task; a run is polled once by its shard (outside the
//! shard's lock) and becomes a task of its own unless it finished there. Tasks report back to
//! their shard by message, so a shard never waits for a job or a guard. Nothing here decides what
//! happens to a fire.

mod downtime;
mod errands;
pub(crate) mod msg;
mod outage;
mod presence;
mod pulse;
mod run;
mod shard;
mod slot;
#[cfg(test)]
mod suspend_tests;

use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::clock::{BootClock, Clock};
use crate::events::EventSink;
use crate::guard::Guard;
use crate::job::Job;
use crate::model::{Now, SettingsPool};

#[cfg(test)]
pub(crate) use downtime::REPORT_TRIES;
pub(crate) use msg::JobControl;
use msg::{Msg, Report};
pub(crate) use presence::{Presence, OWNER_CLOCK_TOLERANCE};
pub(crate) use pulse::{watch as watch_shards, Pulses, STALL_LIMIT, STALL_NOT_ALIVE};
pub(crate) use slot::{GuardView, JobSlot};

/// What every shard shares.
#[derive(Clone)]
pub(crate) struct Shared {
    pub(crate) clock: Clock,
    /// The clock that counts a suspend of the host: `clock`'s (see [`Clock::boot`]).
    pub(crate) boot: BootClock,
    pub(crate) events: EventSink,
    pub(crate) instance: Arc<str>,
    /// Cancelled when the scheduler stops firing.
    pub(crate) stop: CancellationToken,
    /// Set before `stop` is cancelled: when running jobs are cancelled.
    pub(crate) deadline: Arc<OnceLock<Instant>>,
    /// Claims, reports, runs and lease releases on tasks of their own, so that shutdown can wait
    /// for every one of them.
    pub(crate) tasks: TaskTracker,
    /// The origin of the monotonic time the job models see.
    pub(crate) origin: Instant,
    /// The application's state, handed to every run.
    pub(crate) states: Arc<crate::state::States>,
    /// Who is present at the shared stores: which process claims a shared job's fires first.
    pub(crate) presence: Arc<Presence>,
    /// Where `local` jobs keep their fate point across restarts, when set (docs/guide/downtime.md).
    pub(crate) state_dir: Option<Arc<crate::state_dir::StateDir>>,
}

impl Shared {
    /// The current time, as the job models take it.
    pub(crate) fn now(&self) -> Now {
        Now {
            wall: self.clock.now(),
            mono: self.mono(Instant::now()),
            random: fastrand::u64(..),
        }
    }

    /// The instant of a monotonic time the job models saw.
    pub(crate) fn instant(&self, mono: Duration) -> Instant {
        self.origin + mono
    }

    /// A monotonic instant as the job models see it.
    pub(crate) fn mono(&self, at: Instant) -> Duration {
        at.saturating_duration_since(self.origin)
    }
}

/// The jobs of one shard. The shard task holds the lock while it handles a batch of fires or
/// messages (never across an await); the monitor takes it to read status and health.
pub(crate) type ShardJobs = Arc<Mutex<Vec<JobSlot>>>;

pub(crate) fn lock(jobs: &ShardJobs) -> std::sync::MutexGuard<'_, Vec<JobSlot>> {
    jobs.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A shard takes this many jobs before another shard is started.
const JOBS_PER_SHARD: usize = 1024;
/// Shards per CPU at most: enough to spread a burst of fires over every worker thread.
const SHARDS_PER_CPU: usize = 4;

/// The running shards.
pub(crate) struct Shards {
    pub(crate) tasks: Vec<tokio::task::JoinHandle<()>>,
    pub(crate) jobs: Vec<ShardJobs>,
    /// Each shard's inbox, for controls.
    pub(crate) inboxes: Vec<Inbox>,
    /// Whether each shard still runs.
    pub(crate) pulses: Arc<Pulses>,
    /// The settings the jobs share, for the jobs added later.
    pub(crate) settings: SettingsPool,
}

/// A shard's inbox: controls reach its jobs through it.
#[derive(Clone)]
pub(crate) struct Inbox(mpsc::UnboundedSender<Msg>);

impl Inbox {
    /// Hands `control` to job `idx` of the shard; `false` when the shard has stopped.
    pub(crate) fn send(&self, idx: u32, control: JobControl) -> bool {
        self.0
            .send(Msg {
                job: idx,
                report: Report::Control(control, None),
            })
            .is_ok()
    }

    /// [`send`](Inbox::send), and waits until the job has taken it; `false` when the shard has
    /// stopped.
    pub(crate) async fn apply(&self, idx: u32, control: JobControl) -> bool {
        let (done, taken) = tokio::sync::oneshot::channel();
        let sent = self
            .0
            .send(Msg {
                job: idx,
                report: Report::Control(control, Some(done)),
            })
            .is_ok();
        sent && taken.await.is_ok()
    }
}

/// Jobs ready to run, last first (they are taken from the back), each with a body.
pub(crate) struct Ready {
    pub(crate) jobs: Vec<Job>,
    /// The shared guard of the job at the same index; `None` for the in-process guard.
    pub(crate) guards: Vec<Option<Arc<dyn Guard>>>,
}

/// Gives back the room of the items taken from the back of a long list, every few thousand of
/// them, so that while a million jobs move from one list to the next they are not held twice
/// (BENCHMARKS.md). A list that large lives in pages of its own, which shrink in place.
pub(crate) fn release_taken<T>(list: &mut Vec<T>) {
    const STEP: usize = 4096;
    if list.capacity() - list.len() >= STEP {
        list.shrink_to_fit();
    }
}

/// Starts the shards that run the jobs.
pub(crate) fn start(ready: Ready, shared: &Shared) -> Shards {
    let Ready {
        mut jobs,
        mut guards,
    } = ready;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let count = jobs
        .len()
        .div_ceil(JOBS_PER_SHARD)
        .clamp(1, cpus * SHARDS_PER_CPU);
    let mut split: Vec<Vec<JobSlot>> = (0..count)
        .map(|_| Vec::with_capacity(jobs.len() / count + 1))
        .collect();
    // Taken from the back, giving back the room of those taken as it goes: with a million jobs
    // the jobs as given and the jobs as slots are never all held at once.
    let mut i = 0;
    let mut pool = SettingsPool::default();
    while let (Some(mut job), Some(guard)) = (jobs.pop(), guards.pop()) {
        release_taken(&mut jobs);
        release_taken(&mut guards);
        let Some(body) = job.body.take() else {
            continue;
        };
        let slot = JobSlot::new(job, body, guard, &mut pool);
        split[i % count].push(slot);
        i += 1;
    }
    let pulses = Arc::new(Pulses::new(shared.origin, count));
    let mut shards = Shards {
        tasks: Vec::with_capacity(count),
        jobs: Vec::with_capacity(count),
        inboxes: Vec::with_capacity(count),
        pulses: Arc::clone(&pulses),
        settings: pool,
    };
    // An empty shard too: jobs added later go to it.
    for (index, slots) in split.into_iter().enumerate() {
        let jobs: ShardJobs = Arc::new(Mutex::new(slots));
        let (tx, rx) = mpsc::unbounded_channel();
        // Each shard hands its runs a copy of the state values of its own, so that the reference
        // count every run takes is not one cache line all worker threads write to.
        let mut own = shared.clone();
        own.states = Arc::new((*shared.states).clone());
        shards.tasks.push(tokio::spawn(shard::run(
            Arc::clone(&jobs),
            own,
            (tx.clone(), rx),
            (Arc::clone(&pulses), index),
        )));
        shards.jobs.push(jobs);
        shards.inboxes.push(Inbox(tx));
    }
    shards
}
