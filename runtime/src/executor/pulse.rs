//! Whether each shard still runs.
//!
//! A shard's task is held up only by code that blocks its thread: the first poll of a run — the
//! job's own code — happens on the shard. A shard held up for good neither fires its jobs nor
//! decides their fires, and its process cannot tell anyone from inside it. With partition
//! ownership that would be silent: the process renews its partitions' leases from another task,
//! so the other processes leave those partitions' fires to it for ever (docs/design/ownership.md,
//! "A stalled shard"). So every shard says by when it will run again, and whoever renews the
//! leases, or answers a liveness probe, looks first.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::ShardJobs;

/// A shard that has not run for this long past the instant it was due to has **stalled**: its
/// process leaves its partition groups until it runs again. Below the 2 s by which a renewal of a
/// lease vouches for the fires of its partition (docs/design/ownership.md), so that a stalled
/// owner never vouches for a fire it did not decide.
pub(crate) const STALL_LIMIT: Duration = Duration::from_secs(1);

/// How long a shard may stall before [`Monitor::alive`](crate::Monitor::alive) answers `false`:
/// long enough that a slow first poll now and then does not get the process restarted.
pub(crate) const STALL_NOT_ALIVE: Duration = Duration::from_secs(10);

/// How often the shards' watcher looks at them ([`watch`]); a shard late by this much at two
/// looks gets the runtime woken ([`nudge`]).
const LOOK_EVERY: Duration = Duration::from_millis(250);

/// Each shard's pulse, shared by the shards (which write their own) and the control plane.
pub(crate) struct Pulses {
    origin: Instant,
    shards: Box<[Pulse]>,
}

/// A cache line (two, where the prefetcher pairs them) of its own: each shard writes its own pulse at
/// every run it polls, and shards run on different threads.
#[repr(align(128))]
struct Pulse {
    /// When the shard runs again at the latest, in ms from `origin`: the instant its timer is
    /// armed for while it waits, or when it was woken while it runs. It never lies in the past
    /// for long unless the shard is held up.
    due: AtomicU64,
    /// The job whose run the shard polls (its index in the shard) since the shard last waited,
    /// or [`NOT_POLLING`]: the one that holds it up when it stalls in a first poll.
    polling: AtomicU32,
}

/// [`Pulse::polling`] of a shard that has polled no run since it last waited.
const NOT_POLLING: u32 = u32::MAX;

/// A shard that stalled, for a log line that names what holds it up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stall {
    /// The shard's index.
    pub(crate) shard: usize,
    /// How long past the instant it was due to run.
    pub(crate) late: Duration,
    /// The index, in the shard, of the job whose run it polls; `None`: it was not run at all
    /// (code elsewhere holds up the runtime's threads).
    pub(crate) polling: Option<u32>,
}

impl Pulses {
    /// Pulses for `shards` shards, due to run first within [`STALL_NOT_ALIVE`] of `origin`: a
    /// shard with many jobs first schedules them all, and the shards start one after another.
    pub(crate) fn new(origin: Instant, shards: usize) -> Self {
        let first = u64::try_from(STALL_NOT_ALIVE.as_millis()).unwrap_or(u64::MAX);
        Pulses {
            origin,
            shards: (0..shards)
                .map(|_| Pulse {
                    due: AtomicU64::new(first),
                    polling: AtomicU32::new(NOT_POLLING),
                })
                .collect(),
        }
    }

    /// Shard `shard` waits, and will run again by `until` at the latest.
    pub(crate) fn waits(&self, shard: usize, until: Instant) {
        if let Some(pulse) = self.shards.get(shard) {
            pulse.due.store(self.ms(until), Ordering::Relaxed);
            pulse.polling.store(NOT_POLLING, Ordering::Relaxed);
        }
    }

    /// Shard `shard` was woken at `at` and runs.
    pub(crate) fn woken(&self, shard: usize, at: Instant) {
        if let Some(pulse) = self.shards.get(shard) {
            pulse.due.store(self.ms(at), Ordering::Relaxed);
        }
    }

    /// Shard `shard` polls a run of its job `job`.
    pub(crate) fn polling(&self, shard: usize, job: u32) {
        if let Some(pulse) = self.shards.get(shard) {
            pulse.polling.store(job, Ordering::Relaxed);
        }
    }

    /// The shard that has stalled longest, if one was due to run at least `limit` before `now`
    /// and before `checked`: when the caller last saw this process run. A process that was
    /// frozen itself (a `SIGSTOP`, a suspended host) finds its shards' timers past when it wakes,
    /// before they ran; they are held up only if they are still not running at the next look.
    pub(crate) fn stalled(&self, checked: Instant, now: Instant, limit: Duration) -> Option<Stall> {
        let (checked, now) = (self.ms(checked), self.ms(now));
        let limit = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX);
        self.shards
            .iter()
            .enumerate()
            .filter_map(|(shard, pulse)| {
                let due = pulse.due.load(Ordering::Relaxed);
                (due <= checked && due.saturating_add(limit) <= now).then(|| Stall {
                    shard,
                    late: Duration::from_millis(now - due),
                    polling: Some(pulse.polling.load(Ordering::Relaxed))
                        .filter(|job| *job != NOT_POLLING),
                })
            })
            .max_by_key(|stall| stall.late)
    }

    /// What holds shard `shard` up now, for a log line that names it.
    pub(crate) fn held_up(&self, shards: &[ShardJobs], shard: usize) -> String {
        let polling = self
            .shards
            .get(shard)
            .map(|pulse| pulse.polling.load(Ordering::Relaxed))
            .filter(|job| *job != NOT_POLLING);
        cause(shards, shard, polling)
    }

    fn ms(&self, at: Instant) -> u64 {
        let since = at.saturating_duration_since(self.origin);
        u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
    }
}

/// Says in the log when a shard stalls — what holds it up — and when every shard runs again,
/// looking every [`LOOK_EVERY`]: a stalled shard fires none of its jobs, whatever their guard, and
/// nothing else would say why. It looks from a thread of its own: a thread of the runtime that
/// blocks may be the one that drives its timers, and then no task of it runs — so while a shard
/// is late, and after `stop` while the shards end, it also wakes the runtime at each look
/// ([`nudge`]), and the feed reader goes on to see the stall and leave the partition groups. It
/// ends once every shard task (`loops`) has ended, or once one has ended before `stop` (the
/// runtime was dropped).
pub(crate) fn watch(
    pulses: Arc<Pulses>,
    shards: Arc<[ShardJobs]>,
    loops: Vec<tokio::task::AbortHandle>,
    stop: CancellationToken,
    runtime: tokio::runtime::Handle,
) {
    let looking = move || {
        // The runtime's clock, also when it is paused (tests).
        let _runtime = runtime.enter();
        let mut looked = Instant::now();
        let mut stalled = false;
        let mut nudged = None;
        loop {
            std::thread::sleep(LOOK_EVERY);
            if loops.iter().all(tokio::task::AbortHandle::is_finished) {
                break;
            }
            if stop.is_cancelled() {
                // Stopping: the shards end one by one, and one held up by blocking code does not,
                // while the shutdown waits on the runtime's timers.
                nudge(&runtime, &mut nudged);
                continue;
            }
            if loops.iter().any(tokio::task::AbortHandle::is_finished) {
                // The runtime was dropped.
                break;
            }
            let now = Instant::now();
            let late = pulses.stalled(looked, now, LOOK_EVERY);
            looked = now;
            if late.is_some() {
                nudge(&runtime, &mut nudged);
            }
            match late.filter(|stall| stall.late >= STALL_LIMIT) {
                Some(stall) if !stalled => {
                    stalled = true;
                    tell_stalled(stall, &shards);
                }
                None if stalled => {
                    stalled = false;
                    tracing::info!("every shard of this process runs again");
                }
                _ => {}
            }
        }
    };
    let started = std::thread::Builder::new()
        .name("cronguard-shard-watch".to_owned())
        .spawn(looking);
    if let Err(e) = started {
        tracing::warn!(error = %e, "cannot start the thread that watches the shards: a shard held up by blocking code will not be named in the log");
    }
}

/// Wakes a worker thread of the runtime that sleeps. A worker that runs a shard held up is the
/// one that last drove the runtime's timers and I/O, and the others may sleep until something
/// wakes them: then no timer fires and no task runs — no renewal, no leave of the partition
/// groups, no shutdown timeout, no signal handled. A task spawned from outside wakes one; idle
/// again, it drives the timers and I/O. While the last one (`nudged`) has not run, no thread is
/// free to run another (every one is held up, or the runtime has one thread): nothing is
/// spawned, so that a runtime held up for days does not pile up tasks.
fn nudge(runtime: &tokio::runtime::Handle, nudged: &mut Option<tokio::task::JoinHandle<()>>) {
    if nudged.as_ref().is_some_and(|last| !last.is_finished()) {
        return;
    }
    *nudged = Some(runtime.spawn(async {}));
}

/// What holds shard `shard` up: the run of the job it polls (`polling`, its index in the shard),
/// or nothing of it (the runtime did not run the shard).
fn cause(shards: &[ShardJobs], shard: usize, polling: Option<u32>) -> String {
    // The shard does not hold its jobs while it polls a run: their names can be read.
    let polled = |job: u32| {
        let jobs = shards.get(shard)?.try_lock().ok()?;
        Some(jobs.get(job as usize)?.name().to_string())
    };
    match polling.map(polled) {
        Some(Some(name)) => format!("the run of job `{name}` blocks its thread"),
        Some(None) => "the run of one of its jobs blocks its thread".to_owned(),
        None => "the runtime has not run it since it was due: code that blocks the runtime's threads holds them up, in a job or elsewhere in the application".to_owned(),
    }
}

fn tell_stalled(stall: Stall, shards: &[ShardJobs]) {
    let cause = cause(shards, stall.shard, stall.polling);
    tracing::error!(
        shard = stall.shard,
        late_ms = u64::try_from(stall.late.as_millis()).unwrap_or(u64::MAX),
        "a shard of this process has not run for over a second: {cause} (a blocking call in an `async` task: move it into `tokio::task::spawn_blocking`, or make the job a blocking `fn`). The fires of the shard's jobs wait until it runs again; with partition ownership this process leaves its groups meanwhile, so that the other processes own the partitions and claim or report their fires (docs/design/ownership.md)"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nudge_the_runtime_has_not_run_is_not_repeated() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let alive = || runtime.metrics().num_alive_tasks();
        let mut nudged = None;
        nudge(runtime.handle(), &mut nudged);
        nudge(runtime.handle(), &mut nudged);
        assert_eq!(alive(), 1, "its thread is held up: one nudge waits");
        runtime.block_on(async {
            while tokio::runtime::Handle::current()
                .metrics()
                .num_alive_tasks()
                > 0
            {
                tokio::task::yield_now().await;
            }
        });
        nudge(runtime.handle(), &mut nudged);
        assert_eq!(alive(), 1, "the first ran: another wakes it");
    }

    #[test]
    fn a_shard_is_stalled_once_it_is_late_by_the_limit_at_two_looks() {
        let origin = Instant::now();
        let at = |ms: u64| origin + Duration::from_millis(ms);
        let pulses = Pulses::new(origin, 2);
        // Not started yet: it has time.
        assert_eq!(
            pulses.stalled(at(9_000), at(9_500), Duration::from_secs(1)),
            None
        );
        pulses.waits(0, at(5_000));
        pulses.woken(1, at(1_000));
        pulses.polling(1, 7);
        let limit = Duration::from_secs(1);
        // Due in the future, or late by less than the limit: running.
        assert_eq!(pulses.stalled(at(1_500), at(1_900), limit), None);
        // Late by the limit, but due after the last look: the process itself may have been
        // frozen in between.
        assert_eq!(pulses.stalled(at(900), at(2_100), limit), None);
        assert_eq!(
            pulses.stalled(at(1_100), at(2_100), limit),
            Some(Stall {
                shard: 1,
                late: Duration::from_millis(1_100),
                polling: Some(7)
            })
        );
        // It ran again and waits for its timer.
        pulses.waits(1, at(3_000));
        assert_eq!(pulses.stalled(at(2_100), at(2_500), limit), None);
        // Its timer went off and the runtime did not run it: no run holds it up.
        let stall = pulses.stalled(at(4_500), at(4_500), limit);
        assert_eq!(stall.map(|s| (s.shard, s.polling)), Some((1, None)));
    }

    #[test]
    fn the_longest_stall_is_named() {
        let origin = Instant::now();
        let at = |ms: u64| origin + Duration::from_millis(ms);
        let pulses = Pulses::new(origin, 3);
        pulses.waits(0, at(2_000));
        pulses.waits(1, at(1_000));
        pulses.waits(2, at(9_000));
        let stall = pulses.stalled(at(4_000), at(4_000), Duration::from_secs(1));
        assert_eq!(stall.map(|s| s.shard), Some(1));
    }
}
