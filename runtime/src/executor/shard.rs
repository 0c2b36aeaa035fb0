//! A shard: one task, one timer and one inbox for a group of jobs.
//!
//! Jobs wait in buckets keyed by their next fire instant; the timer is armed for the earliest
//! bucket or the earliest wake-up (a misfire deadline or a claim retry). When a bucket comes due,
//! its jobs are handled in chunks, with a yield between chunks so that the runs just started, the
//! other shards and the monitor get their turn during a burst of fires.

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::mpsc;
use tokio::time::{sleep_until, Instant};

use super::errands::Errands;
use super::msg::{JobControl, Msg, Report};
use super::run::{self, Claimed, ReportTo, Started};
use super::slot::{AfterFirstPoll, Armed, Cx, GoingOn, Launch, Polled};
use super::{lock, Pulses, ShardJobs, Shared};
use crate::clock::MAX_TIMER_WAIT;
use crate::events::Event;
use crate::model::{Action, Now};

/// Jobs handled between two yields during a burst of fires.
const CHUNK: usize = 64;
/// Events a shard keeps for the hooks at most before it hands them over while still busy.
const HOOK_HANDOFF: usize = 1024;
/// Events wait at most this long for the next hand-over to the hooks once the shard is idle:
/// in a burst the hooks' thread is woken about every this long, not at every idle moment (each
/// wake-up is a system call and a thread switch, once per claim answer in a burst otherwise).
const HOOK_LINGER: Duration = Duration::from_millis(10);
/// Messages handled per batch.
const INBOX_BATCH: usize = 256;
/// How long runs cancelled at the shutdown deadline get to stop before they are abandoned.
const CANCEL_GRACE: Duration = Duration::from_secs(5);

struct Shard {
    jobs: ShardJobs,
    links: Links,
    rx: mpsc::UnboundedReceiver<Msg>,
    /// Jobs by their next fire instant.
    fires: BTreeMap<DateTime<Utc>, Vec<u32>>,
    /// Misfire deadlines and claim retries; an entry is stale unless it equals its job's `armed`.
    wakeups: BinaryHeap<Reverse<(Instant, u32)>>,
    /// Jobs whose fire came due and that have not been handled yet.
    backlog: VecDeque<u32>,
    /// Buffers of [`launch`](Shard::launch), kept so that a fire allocates none.
    launching: Vec<Launch>,
    /// Runs after their first poll whose jobs have not heard of it yet (see [`Shard::settle`]),
    /// and the clocks read before the first of them started.
    polled: Vec<Polled>,
    polled_base: Option<Now>,
    /// When the last first poll on this shard ended: the next one is timed from there, not from
    /// its claim, so that the runs polled before it in a burst do not count as its own.
    last_poll_end: Instant,
    /// The job models' actions, carried out at once; kept so that a fire allocates none.
    actions: Vec<Action>,
    /// Where in a bucket of jobs due together this process starts (see [`Shard::take_due`]).
    rotation: fastrand::Rng,
    /// When the hooks last got events.
    handed_at: Instant,
    /// When the events waiting for the hooks are handed over at the latest, if any wait.
    hooks_at: Option<Instant>,
    /// Where this shard says by when it runs again, and the index it says it under.
    pulses: Arc<Pulses>,
    index: usize,
}

/// What a job's handlers reach of their shard (see [`Cx`]).
struct Links {
    shared: Shared,
    tx: mpsc::UnboundedSender<Msg>,
    /// Runs claimed under the lock, started by [`launch`](Shard::launch) after it.
    launches: RefCell<Vec<Launch>>,
    /// See [`Cx::lease`].
    lease: RefCell<Option<Claimed>>,
    /// See [`Cx::held`].
    held: RefCell<HashMap<u32, Claimed>>,
    /// See [`Cx::going`].
    going: RefCell<GoingOn>,
    /// See [`Cx::for_hooks`].
    for_hooks: RefCell<Vec<Event>>,
    /// See [`Cx::errands`].
    errands: RefCell<Errands>,
}

impl Links {
    fn cx(&self, idx: u32) -> Cx<'_> {
        Cx {
            idx,
            shared: &self.shared,
            tx: &self.tx,
            launches: &self.launches,
            lease: &self.lease,
            held: &self.held,
            going: &self.going,
            for_hooks: &self.for_hooks,
            errands: &self.errands,
        }
    }
}

/// Runs the shard until the scheduler stops, then drains it.
pub(super) async fn run(
    jobs: ShardJobs,
    shared: Shared,
    (tx, rx): (mpsc::UnboundedSender<Msg>, mpsc::UnboundedReceiver<Msg>),
    (pulses, index): (Arc<Pulses>, usize),
) {
    let mut shard = Shard {
        jobs,
        links: Links {
            shared,
            tx,
            launches: RefCell::default(),
            lease: RefCell::default(),
            held: RefCell::default(),
            going: RefCell::default(),
            for_hooks: RefCell::default(),
            errands: RefCell::default(),
        },
        rx,
        fires: BTreeMap::new(),
        wakeups: BinaryHeap::new(),
        backlog: VecDeque::new(),
        launching: Vec::new(),
        polled: Vec::new(),
        polled_base: None,
        last_poll_end: Instant::now(),
        actions: Vec::new(),
        rotation: fastrand::Rng::new(),
        handed_at: Instant::now(),
        hooks_at: None,
        pulses,
        index,
    };
    shard.schedule_all();
    shard.fire_loop().await;
    shard.drain().await;
}

impl Drop for Shard {
    /// Whatever way the shard ends, the events it emitted last reach the hooks.
    fn drop(&mut self) {
        self.hand_to_hooks();
    }
}

impl Shard {
    fn schedule_all(&mut self) {
        let now = self.links.shared.clock.now();
        let mut jobs = lock(&self.jobs);
        for (idx, slot) in (0u32..).zip(jobs.iter_mut()) {
            if let Some(next) = slot.schedule_from(&self.links.cx(idx), now) {
                self.fires.entry(next).or_default().push(idx);
            }
        }
    }

    async fn fire_loop(&mut self) {
        let stop = self.links.shared.stop.clone();
        let stopped = stop.cancelled();
        tokio::pin!(stopped);
        let far = || Instant::now() + MAX_TIMER_WAIT;
        let timer = sleep_until(far());
        tokio::pin!(timer);
        // What the timer is armed for: the first bucket and the first wake-up.
        let mut armed_for = None;
        let mut inbox = Vec::with_capacity(INBOX_BATCH);
        loop {
            if !self.backlog.is_empty() {
                self.fire_chunk();
                self.pulses.waits(self.index, Instant::now());
                tokio::task::yield_now().await;
                if stop.is_cancelled() {
                    return;
                }
                while let Ok(msg) = self.rx.try_recv() {
                    inbox.push(msg);
                    if inbox.len() == INBOX_BATCH {
                        self.handle(&mut inbox);
                    }
                }
                self.handle(&mut inbox);
                self.launch();
                self.send_errands();
                self.hand_to_hooks_when_idle();
                continue;
            }
            let first_fire = self.fires.first_key_value().map(|(t, _)| *t);
            let first_wake = self.wakeups.peek().map(|w| w.0 .0).into_iter();
            let first_wake = first_wake.chain(self.hooks_at).min();
            if armed_for != Some((first_fire, first_wake)) {
                let fire_at = first_fire.map(|t| self.links.shared.clock.deadline_for(t));
                let at = fire_at.into_iter().chain(first_wake).min();
                timer.as_mut().reset(at.unwrap_or_else(far).min(far()));
                armed_for = Some((first_fire, first_wake));
            }
            self.pulses.waits(self.index, timer.deadline());
            tokio::select! {
                biased;
                _ = &mut stopped => return,
                n = self.rx.recv_many(&mut inbox, INBOX_BATCH) => {
                    if n > 0 {
                        self.handle(&mut inbox);
                    }
                }
                _ = &mut timer => {
                    armed_for = None;
                    self.take_due();
                }
            }
            self.pulses.woken(self.index, Instant::now());
            self.launch();
            self.send_errands();
            self.hand_to_hooks_when_idle();
        }
    }

    /// Sends the step's claims and lease releases to their guards.
    fn send_errands(&self) {
        let links = &self.links;
        links
            .errands
            .borrow_mut()
            .send(&links.tx, &links.shared.tasks, &links.shared.boot);
    }

    /// Hands the events of the steps so far to the hooks, in one message.
    fn hand_to_hooks(&self) {
        let mut events = self.links.for_hooks.borrow_mut();
        self.links.shared.events.hand_to_hooks(&mut events);
    }

    /// Hands the events over when many wait, or once the shard has nothing more to do at once
    /// and the last hand-over is [`HOOK_LINGER`] ago (else the timer comes back for them then):
    /// in a burst, the hooks' thread is woken a few times, not once per step.
    fn hand_to_hooks_when_idle(&mut self) {
        let waiting = self.links.for_hooks.borrow().len();
        if waiting == 0 {
            self.hooks_at = None;
            return;
        }
        let idle = self.rx.is_empty() && self.backlog.is_empty();
        let now = Instant::now();
        let due = self.handed_at + HOOK_LINGER;
        if waiting >= HOOK_HANDOFF || (idle && now >= due) {
            self.hand_to_hooks();
            self.handed_at = now;
            self.hooks_at = None;
        } else {
            self.hooks_at = Some(due);
        }
    }

    /// Moves the jobs of every bucket that came due to the backlog, and handles due wake-ups.
    fn take_due(&mut self) {
        let now = self.links.shared.clock.now();
        while let Some(entry) = self.fires.first_entry() {
            if *entry.key() > now {
                break;
            }
            // Every replica holds the jobs of a bucket in the same order: each starts at a place
            // of its own, so that their first claims are mostly of different jobs rather than all
            // of the same ones in turn, and no job is always the last of a burst (BENCHMARKS.md).
            let due = entry.remove();
            let start = self.rotation.usize(..due.len().max(1));
            self.backlog.extend(&due[start..]);
            self.backlog.extend(&due[..start]);
        }
        self.wake_due();
    }

    /// Handles the wake-ups that came due.
    fn wake_due(&mut self) {
        let now = Instant::now();
        let mut jobs = lock(&self.jobs);
        while let Some(&Reverse((at, idx))) = self.wakeups.peek() {
            if at > now {
                break;
            }
            self.wakeups.pop();
            let Some(slot) = jobs.get_mut(idx as usize) else {
                continue;
            };
            if slot.armed != Armed::at(&self.links.shared, at) {
                continue; // stale
            }
            slot.armed = Armed::NONE;
            let cx = self.links.cx(idx);
            slot.on_wake(&cx, &mut self.actions);
            arm(&mut self.wakeups, &self.links.shared, slot, idx);
        }
    }

    /// Handles the fires of up to [`CHUNK`] jobs of the backlog, one job at a time: its fires
    /// under the lock, then its run's first poll without it, while the job is still in cache.
    fn fire_chunk(&mut self) {
        // One reading of the clocks for the chunk: its jobs fire within microseconds.
        let now = self.links.shared.now();
        for _ in 0..CHUNK {
            let Some(idx) = self.backlog.pop_front() else {
                break;
            };
            {
                let mut jobs = lock(&self.jobs);
                let Some(slot) = jobs.get_mut(idx as usize) else {
                    continue;
                };
                let cx = self.links.cx(idx);
                if let Some(next) = slot.fire(&cx, now, &mut self.actions) {
                    self.fires.entry(next).or_default().push(idx);
                }
                arm(&mut self.wakeups, &self.links.shared, slot, idx);
            }
            // The job's end is counted at once, while it is still in the cache: during a burst,
            // counting the ends of a chunk of jobs later costs more than it saves.
            self.launch_from(now);
            self.settle();
        }
        self.send_errands();
    }

    /// Starts the runs claimed under the lock, then tells their jobs how the first polls went
    /// (see [`settle`](Shard::settle)).
    fn launch(&mut self) {
        if self.links.launches.borrow().is_empty() {
            return;
        }
        let now = self.links.shared.now();
        self.launch_from(now);
        self.settle();
    }

    /// Starts the runs claimed under the lock: each is polled once here, without the lock, and
    /// goes on as a task of its own unless it finished. `base` is the clocks read shortly before:
    /// a run that ends at its first poll ends at `base` plus the monotonic time since.
    fn launch_from(&mut self, base: Now) {
        std::mem::swap(&mut *self.links.launches.borrow_mut(), &mut self.launching);
        if self.launching.is_empty() {
            return;
        }
        self.polled_base.get_or_insert(base);
        for launch in self.launching.drain(..) {
            let Launch {
                idx,
                id,
                start,
                claimed,
                next_attempt,
            } = launch;
            let to = ReportTo {
                tx: &self.links.tx,
                job: idx,
                id,
                tasks: &self.links.shared.tasks,
                errands: &self.links.errands,
            };
            let polled_from = claimed.max(self.last_poll_end);
            self.pulses.polling(self.index, idx);
            let (first_poll, outcome) = match run::start(start, polled_from, to) {
                Started::Finished { end, ended } => {
                    self.last_poll_end = ended;
                    let took = ended.saturating_duration_since(claimed);
                    (
                        Some(ended.saturating_duration_since(polled_from)),
                        AfterFirstPoll::Ended(end, took, ended),
                    )
                }
                Started::Spawned { first_poll, cancel } => (
                    first_poll.inspect(|took| self.last_poll_end = polled_from + *took),
                    AfterFirstPoll::GoesOn {
                        cancel,
                        started: claimed,
                        next_attempt,
                    },
                ),
            };
            self.polled.push(Polled {
                idx,
                id,
                first_poll,
                outcome,
            });
        }
    }

    /// Tells each job how the first polls of its runs went: a run that ended frees its slot,
    /// which may start a waiting fire, so this repeats until no run is left to start.
    fn settle(&mut self) {
        while let Some(base) = self.polled_base.take() {
            {
                let mut jobs = lock(&self.jobs);
                for polled in self.polled.drain(..) {
                    let idx = polled.idx;
                    let Some(slot) = jobs.get_mut(idx as usize) else {
                        continue;
                    };
                    let cx = self.links.cx(idx);
                    slot.polled(&cx, polled, base, &mut self.actions);
                    arm(&mut self.wakeups, &self.links.shared, slot, idx);
                }
            }
            if !self.links.launches.borrow().is_empty() {
                let now = self.links.shared.now();
                self.launch_from(now);
            }
        }
    }

    fn handle(&mut self, inbox: &mut Vec<Msg>) {
        if inbox.is_empty() {
            return;
        }
        let mut jobs = lock(&self.jobs);
        for msg in inbox.drain(..) {
            let Some(slot) = jobs.get_mut(msg.job as usize) else {
                continue;
            };
            if matches!(msg.report, Report::Control(JobControl::Schedule, _)) {
                // Unless this shard's start already scheduled it.
                if slot.model().next_fire().is_none() {
                    let now = self.links.shared.clock.now();
                    if let Some(next) = slot.schedule_from(&self.links.cx(msg.job), now) {
                        self.fires.entry(next).or_default().push(msg.job);
                    }
                }
                continue;
            }
            let cx = self.links.cx(msg.job);
            slot.on_report(&cx, msg.report, &mut self.actions);
            arm(&mut self.wakeups, &self.links.shared, slot, msg.job);
        }
    }

    /// After the scheduler stopped firing: report fires that will not run, let running jobs
    /// finish until the deadline, then cancel them.
    async fn drain(mut self) {
        // What the last step asked of the guards goes out: its answers may be waited for below.
        self.send_errands();
        let mut busy: Vec<u32> = Vec::new();
        {
            let mut jobs = lock(&self.jobs);
            // Fires that came due but were not handled yet are reported with the waiting ones.
            self.backlog.clear();
            for (idx, slot) in (0u32..).zip(jobs.iter_mut()) {
                let cx = self.links.cx(idx);
                slot.stop(&cx, &mut self.actions);
                if slot.busy() {
                    busy.push(idx);
                }
            }
        }
        if !self.links.launches.borrow().is_empty() {
            self.launch();
            let jobs = lock(&self.jobs);
            busy.retain(|&idx| jobs.get(idx as usize).is_some_and(|s| s.busy()));
        }
        self.send_errands();
        self.hand_to_hooks();
        let deadline = self
            .links
            .shared
            .deadline
            .get()
            .copied()
            .unwrap_or_else(Instant::now);
        let mut cancelled_at: Option<Instant> = None;
        let mut inbox = Vec::with_capacity(INBOX_BATCH);
        while !busy.is_empty() {
            let wake = match cancelled_at {
                None => deadline,
                Some(at) => at + CANCEL_GRACE,
            };
            // A fire claimed ahead starts at its instant during the shutdown, as a run goes on.
            let next_wakeup = self.wakeups.peek().map(|Reverse((at, _))| *at);
            tokio::select! {
                _ = sleep_until(next_wakeup.unwrap_or(wake)), if next_wakeup.is_some_and(|at| at < wake) => {
                    self.wake_due();
                    self.launch();
                    self.send_errands();
                    self.hand_to_hooks();
                    let jobs = lock(&self.jobs);
                    busy.retain(|&idx| jobs.get(idx as usize).is_some_and(|s| s.busy()));
                }
                n = self.rx.recv_many(&mut inbox, INBOX_BATCH) => {
                    if n == 0 {
                        return;
                    }
                    self.handle(&mut inbox);
                    self.launch();
                    self.send_errands();
                    self.hand_to_hooks();
                    let jobs = lock(&self.jobs);
                    busy.retain(|&idx| jobs.get(idx as usize).is_some_and(|s| s.busy()));
                }
                _ = sleep_until(wake) => {
                    let mut jobs = lock(&self.jobs);
                    if cancelled_at.is_some() {
                        for &idx in &busy {
                            if let Some(slot) = jobs.get(idx as usize) {
                                slot.abandon_runs();
                            }
                        }
                        return;
                    }
                    for &idx in &busy {
                        if let Some(slot) = jobs.get_mut(idx as usize) {
                            let cx = self.links.cx(idx);
                            slot.cancel_runs(&cx, &mut self.actions);
                        }
                    }
                    drop(jobs);
                    self.send_errands();
                    cancelled_at = Some(Instant::now());
                }
            }
        }
    }
}

/// Queues the next wake-up of job `idx` when it needs one earlier than the one it has.
fn arm(
    wakeups: &mut BinaryHeap<Reverse<(Instant, u32)>>,
    shared: &Shared,
    slot: &mut super::JobSlot,
    idx: u32,
) {
    if let Some(at) = slot.wake_at(shared) {
        let armed = Armed::at(shared, at);
        if slot.armed == Armed::NONE || armed < slot.armed {
            wakeups.push(Reverse((at, idx)));
            slot.armed = armed;
        }
    }
}
