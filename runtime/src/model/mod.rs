//! The job model: every rule of one job — overlap, coalescing, misfires, claims, in-process
//! exclusion, leases, reports — as a pure state machine (docs/design/job-model.md).
//!
//! It never touches tokio, I/O or a clock. The executor feeds it what happened (a timer came due,
//! a guard answered, a run ended, the watchdog judged a lease, a stop was asked for) together with
//! the current time ([`Now`]), and carries out the [`Action`]s it returns: ask the guard, start or
//! cancel a run, give a lease back, emit an event, ask who reports a dropped fire. When the model
//! next needs to be woken without any of those is [`JobModel::next_wake`]. The deterministic
//! simulation drives this very code through many replicas and seeded faults.

mod attempts;
mod downtime;
#[cfg(test)]
mod downtime_tests;
pub(crate) mod due;
pub(crate) mod limits;
#[cfg(test)]
mod limits_tests;
mod ownership;
#[cfg(test)]
mod ownership_tests;
pub(crate) mod spread;
#[cfg(test)]
mod tests;
pub(crate) mod window;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use smallvec::SmallVec;
use smol_str::SmolStr;

use crate::clock::{after, since};
use crate::control::{ManualRun, Pause};
use crate::events::{CancelReason, EventKind, FailureReason, Occurrence};
use crate::fire::{fmt_time, human, Fire};
use crate::options::{Lock, Overlap};
use cronguard_schedule::Schedule;
pub(crate) use downtime::{MissedCause, MissedFires};
use due::Due;
use limits::Limits;
use spread::Turn;
use window::FireWindow;

/// A job as the model needs it: its name and its settings. Many jobs share their settings
/// (a million jobs may have a few dozen distinct ones), so they are held behind one pointer
/// that a [`SettingsPool`] hands out once per distinct value (BENCHMARKS.md).
#[derive(Debug, Clone)]
pub(crate) struct Spec {
    /// Inline up to 23 bytes: most names cost a job no allocation of its own.
    pub(crate) name: SmolStr,
    settings: Arc<Settings>,
}

/// A job's settings, as the model needs them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Settings {
    pub(crate) schedule: Schedule,
    pub(crate) misfire_grace: Duration,
    pub(crate) max_instances: u32,
    pub(crate) lock: Lock,
    pub(crate) overlap: Overlap,
    pub(crate) coalesce: bool,
    pub(crate) enabled: bool,
    pub(crate) limits: Limits,
    /// How long a process that did not get the job's last claimed fire waits past a fire's
    /// start before it claims the fire (docs/design/standby.md); zero: every process claims at
    /// once.
    pub(crate) standby: Duration,
    /// How long before a fire's start this process may claim it, when it claims at the instant
    /// and nothing else of the job is going on (docs/design/standby.md); zero: at the start.
    pub(crate) claim_ahead: Duration,
    /// The settings overrides changed at start, for the status only (docs/guide/overrides.md);
    /// jobs with the same overrides still share their settings.
    pub(crate) overrides: crate::overrides::applied::Applied,
}

impl Spec {
    /// A job with settings of its own.
    #[cfg(test)]
    pub(crate) fn new(name: SmolStr, settings: Settings) -> Self {
        Spec {
            name,
            settings: Arc::new(settings),
        }
    }

    /// A job sharing its settings with the pool's jobs that have the same.
    pub(crate) fn pooled(name: SmolStr, settings: Settings, pool: &mut SettingsPool) -> Self {
        let settings = match pool.shared.get(&settings) {
            Some(shared) => Arc::clone(shared),
            None => {
                if pool.shared.len() >= pool.forget_at {
                    // Settings no job holds any more: only the pool's own reference is left.
                    pool.shared.retain(|s| Arc::strong_count(s) > 1);
                    pool.forget_at = (pool.shared.len() * 2).max(64);
                }
                let shared = Arc::new(settings);
                pool.shared.insert(Arc::clone(&shared));
                shared
            }
        };
        Spec { name, settings }
    }
}

impl std::ops::Deref for Spec {
    type Target = Settings;

    fn deref(&self) -> &Settings {
        &self.settings
    }
}

/// The distinct settings of a scheduler's jobs, each held once; settings that no job holds any
/// more are forgotten as new ones come (jobs added and removed at runtime).
#[derive(Debug, Default)]
pub(crate) struct SettingsPool {
    shared: std::collections::HashSet<Arc<Settings>>,
    /// The pool forgets unused settings when it grows to this many.
    forget_at: usize,
}

/// The current time, as the executor read it: the wall clock, and the monotonic clock as the
/// time elapsed since an origin of the executor's choice; with a random number for the jitter of
/// claim retries, so that the model draws none of its own (and keeps no generator per job).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Now {
    pub(crate) wall: DateTime<Utc>,
    pub(crate) mono: Duration,
    pub(crate) random: u64,
}

/// Identifies one run of a job.
pub(crate) type RunId = u32;

/// Why a fire is reported when this process's claim of it got no answer and the guard, asked
/// again, no longer knows who claimed it (docs/design/guarantees.md).
pub(crate) const UNKNOWN_CLAIMANT: &str = "an earlier claim of this fire by this process got no answer, and the guard no longer knows whose claim it took (this process was paused or its clock jumped back): the fire ran elsewhere or did not run at all";

/// A shared guard's answer to a report of a dropped fire, as the model sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reported {
    /// This process reports the drop (the guard recorded it, or could not be asked).
    First,
    /// Another process reported the drop first.
    ByAnother,
    /// Another claimant's claim of the fire took effect: the fire ran there, or that claimant
    /// reports it.
    ClaimedElsewhere,
}

/// A shared guard's answer to a claim, as the model sees it.
#[derive(Debug)]
pub(crate) enum Answer {
    /// The fire is this process's, with this fencing token. `deadline` (monotonic) is when the
    /// lease runs out unless renewed: the instant the claim was sent plus the lease.
    Acquired {
        token: u64,
        deadline: Option<Duration>,
    },
    AlreadyRan,
    /// The guard recorded that another claimant took this very fire: it ran elsewhere, also
    /// when this process's earlier claim of it got no reply.
    ClaimedByAnother,
    /// Nobody claimed the fire, and a later one has been claimed.
    Superseded,
    /// Another claimant dropped the fire and reported it (busy or paused there, or too late).
    DroppedByAnother,
    Busy {
        first_report: bool,
    },
    /// This process's own claim took effect earlier (its reply was lost) and its lease ran out.
    Lapsed,
    /// The fire lies ahead of the guard's clock by this much.
    TooEarly(Duration),
    /// A manual run nobody claimed was asked for this long ago by the guard's clock, more than
    /// the misfire grace.
    TooLate(Duration),
    /// The job is paused in the guard's store.
    Paused {
        pause: Pause,
        first_report: bool,
    },
    /// The guard could not answer.
    Failed(String),
}

/// How a run's body ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RunEnd {
    Ok,
    Failed(String),
    Panicked(String),
    /// The attempt passed the job's `timeout` and was stopped there.
    TimedOut,
    Cancelled,
    /// The run's local lease deadline passed before its next poll: it was stopped there.
    LeaseExpired,
}

impl RunEnd {
    /// Whether the end is a failure that `retries` may try again (not a cancellation or a lost
    /// lease). After such an end, a job with retries waits for [`Action::Retry`] or
    /// [`Action::Finish`] before it gives its lease back.
    pub(crate) fn may_retry(&self) -> bool {
        matches!(
            self,
            RunEnd::Failed(_) | RunEnd::Panicked(_) | RunEnd::TimedOut
        )
    }
}

/// The watchdog's word on a running lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The lease is lost; the run must stop.
    Lost(String),
    /// Another process asked this run to stop (`overlap = "replace"`); the lease is still held
    /// and kept renewed until the body has returned.
    CancelRequested,
}

/// What the executor must do.
#[derive(Debug)]
pub(crate) enum Action {
    /// Ask the shared guard to claim the fire; answer with [`JobModel::on_claimed`].
    Claim(Fire),
    /// Give up a fire this process may hold a claim of: the lease acquired by the last claim if
    /// there is one, and whatever claim of the fire took effect although its reply was lost. The
    /// guard then records the fire as not started (docs/design/guarantees.md). For a manual run
    /// only the lease is given back: an unseen manual claim frees itself when its lease runs out.
    Abandon(Fire),
    /// Start the run of `fire` under the lease acquired by the last claim (shared guard) or under
    /// the in-process guard. Report its end with [`JobModel::on_run_ended`].
    Start {
        run: RunId,
        fire: DateTime<Utc>,
        token: u64,
        /// The id of a manual run.
        manual: Option<u64>,
    },
    /// Signal the run to stop (through its `JobContext`).
    Cancel(RunId),
    /// Start attempt `attempt` of a run whose last attempt failed, under the same fire, lease
    /// and fencing token.
    Retry { run: RunId, attempt: u32 },
    /// A run waiting between attempts is over: no further attempt; its lease goes back.
    Finish(RunId),
    /// Keep the lease of the claim just answered: the fire was claimed ahead of its start, which
    /// [`Start`](Action::Start) or [`Abandon`](Action::Abandon) of it follows.
    Hold,
    /// Ask the shared guard whether this process is the first to report this dropped fire, then
    /// answer with [`JobModel::on_reported`].
    AskReport {
        fire: DateTime<Utc>,
        kind: EventKind,
    },
    /// Ask the shared guard to record fires missed while no process ran the job, then answer
    /// with [`JobModel::on_missed_reported`] (docs/guide/downtime.md).
    ReportMissed(MissedFires),
    /// Publish an event.
    Emit(Occurrence),
}

/// How often the executor asks the guard to record an abandoned claim before it gives up.
pub(crate) const ABANDON_ATTEMPTS: u32 = 5;

/// Fires walked one by one after a pause before the rest are only skipped over: the aggregated
/// misfire then gives its count as a lower bound.
const MISSED_WALK_LIMIT: u32 = 100_000;

struct Run {
    id: RunId,
    fire: DateTime<Utc>,
    token: u64,
    lateness: Duration,
    cancel_reason: Option<CancelReason>,
    lease_lost: bool,
    manual: Option<u64>,
    /// 1 for the first attempt, one more for every retry.
    attempt: u32,
    /// The fire's misfire deadline: no retry starts at or after it.
    deadline: DateTime<Utc>,
    /// Set while the run waits between a failed attempt and the next.
    backoff: Option<Box<Backoff>>,
}

/// A run between a failed attempt and its retry.
struct Backoff {
    until: DateTime<Utc>,
    /// The failure of the last attempt, reported again if no further attempt starts.
    error: String,
    reason: FailureReason,
}

impl Run {
    /// An event of this run, at `at`, after running for `duration` if it ended.
    fn event(&self, kind: EventKind, at: DateTime<Utc>, duration: Option<Duration>) -> Occurrence {
        Occurrence {
            fire_time: self.fire,
            fencing_token: Some(self.token),
            at,
            first_report: true,
            lateness: Some(self.lateness),
            duration,
            attempt: Some(self.attempt),
            kind,
            manual: self.manual,
        }
    }
}

/// How many manual run ids a job remembers at least, so that a request seen twice (asked for
/// here, then read back from the control feed) runs once; ids whose grace has not passed are
/// kept beyond it.
const SEEN_MANUAL_RUNS: usize = 32;

/// What a job carries only once an operator touched it: its pause, and runs asked for outside
/// the schedule. Kept out of line: most jobs are never paused or run by hand.
#[derive(Debug, Default)]
struct Controls {
    paused: Option<Pause>,
    /// Manual runs waiting to start, oldest first.
    manual: VecDeque<Fire>,
    /// The ids of the last manual runs taken, with their deadlines.
    seen: VecDeque<(u64, DateTime<Utc>)>,
}

/// Fires that were missed after a pause, reported as one.
#[derive(Debug)]
struct Missed {
    first: DateTime<Utc>,
    last: DateTime<Utc>,
    count: u32,
    walked_all: bool,
}

/// The policy of one job.
pub(crate) struct JobModel {
    spec: Spec,
    next_fire: Option<DateTime<Utc>>,
    /// What it holds only while it handles a fire, claims, or was touched by an operator, in
    /// one box; `None` for an idle job.
    busy: Option<Box<Busy>>,
    next_run_id: RunId,
    /// The latest fire this process started, and its fencing token.
    last_started: Option<DateTime<Utc>>,
    last_token: u64,
    window: FireWindow,
    stopping: bool,
    /// Stopping keeps a fire claimed ahead, to start it at its instant (a shutdown, not a
    /// removal).
    keep_held: bool,
    /// The front fire waits for its start: its jitter, or the standby (see
    /// [`start_of`](Self::start_of)).
    front_waits: bool,
    /// When this process claims the job's fires: at their instant, or only after the standby
    /// (see [`start_of`](Self::start_of)).
    turn: Turn,
}

/// What a job holds out of line, made when a fire comes due (or a claim, a pause, a manual run
/// begins) and let go when both parts are gone: an idle job carries one pointer for all of it.
#[derive(Default)]
struct Busy {
    /// `None` while nothing is due and nothing runs.
    flight: Option<Flight>,
    /// `None` while it does not claim and no operator's control is in use; boxed, as a job
    /// guarded in-process never claims, and its every fire would otherwise make room for it.
    extra: Option<Box<Extra>>,
}

/// What a job holds only while it handles a fire: the fires due and waiting to start, and the runs
/// going on.
#[derive(Default)]
struct Flight {
    due: Due,
    /// One run inline: most jobs never run twice at once, and a fire then allocates only this box.
    running: SmallVec<[Run; 1]>,
}

/// What a job carries only while it claims through a shared guard, or once an operator touched
/// it.
#[derive(Debug, Default)]
struct Extra {
    /// The fire being claimed.
    claiming: Option<Fire>,
    /// The claim in flight was sent ahead of its fire's start (docs/design/standby.md); not
    /// told from the clock when the answer comes, which may have stepped back since.
    claiming_ahead: bool,
    /// A fire claimed ahead of its start, waiting for it.
    held: Option<Held>,
    /// Dropped fires waiting for the shared guard's word on who reports them.
    pending_reports: u32,
    /// Where the schedule was started from, while the store's fate point is awaited: the fires
    /// up to it were not seen here (docs/guide/downtime.md).
    catching_up: Option<DateTime<Utc>>,
    /// The first fire left to another owner since the last walk of them
    /// (docs/design/ownership.md): the fires before it were this process's own.
    left_first: Option<DateTime<Utc>>,
    /// Reports of missed fires waiting for the guard's answer (counted in `pending_reports`
    /// too).
    reporting_missed: u32,
    /// Drop reports held back while the walk after downtime is not done (counted in
    /// `pending_reports` too): asked once it is (see `walking`).
    deferred_reports: Vec<(DateTime<Utc>, EventKind)>,
    /// The last read of the fate point failed: while the walk waits for the store, drops are
    /// reported on this process's word.
    point_failing: bool,
    /// Reports of missed fires held back, in fire order: while the fate point is awaited
    /// (`catching_up`), so that they do not move it past the fires the walk from it decides, and
    /// while another report is not answered (one in flight at a time).
    held_missed: Vec<MissedFires>,
    /// The newest last fire of the missed fires this process asked the guard to record: the
    /// job's fate point lies at it or past it, so a stop reports the fires still open before it
    /// through the guard rather than leaving them to the next start's walk, which begins after
    /// the point. Kept while a fire before it waits here.
    missed_through: Option<DateTime<Utc>>,
    /// The first fire of the oldest report of missed fires not answered yet: a drop of an
    /// earlier fire is asked at once, as it cannot move the fate point past them.
    missed_from: Option<DateTime<Utc>>,
    trouble: Trouble,
    controls: Controls,
}

impl Extra {
    /// The drop reports held back for the walk, no longer counted as pending.
    fn take_deferred_reports(&mut self) -> Vec<(DateTime<Utc>, EventKind)> {
        let deferred = std::mem::take(&mut self.deferred_reports);
        let n = u32::try_from(deferred.len()).unwrap_or(u32::MAX);
        self.pending_reports = self.pending_reports.saturating_sub(n);
        deferred
    }

    /// A report of missed fires goes out: counted until the guard answers it.
    fn count_missed_report(&mut self, missed: &MissedFires) {
        self.pending_reports += 1;
        self.reporting_missed += 1;
        self.missed_through = self.missed_through.max(Some(missed.last));
        self.missed_from = Some(
            self.missed_from
                .map_or(missed.first, |f| f.min(missed.first)),
        );
    }
}

/// A fire the guard granted ahead of its start: its run starts at the start, under this claim.
#[derive(Debug, Clone, Copy)]
struct Held {
    fire: Fire,
    token: u64,
    /// When the lease runs out unless renewed (monotonic), as in [`Answer::Acquired`].
    deadline: Option<Duration>,
}

impl Extra {
    fn is_empty(&self) -> bool {
        self.claiming.is_none()
            && self.held.is_none()
            && self.pending_reports == 0
            && self.catching_up.is_none()
            && self.left_first.is_none()
            && self.held_missed.is_empty()
            && self.reporting_missed == 0
            && self.trouble == Trouble::default()
            && self.controls.is_empty()
    }
}

impl Controls {
    fn is_empty(&self) -> bool {
        self.paused.is_none() && self.manual.is_empty() && self.seen.is_empty()
    }
}

/// Retries and errors of claims; all default while the guard answers.
#[derive(Debug, Default, PartialEq)]
struct Trouble {
    retry_at: Option<DateTime<Utc>>,
    retries: u32,
    last_guard_error: Option<Box<str>>,
    /// A fire whose claim failed without an answer: the claim may have taken effect.
    uncertain: Option<DateTime<Utc>>,
    /// The last answer for the fire at the front was `TooEarly`: this host's clock is ahead.
    too_early: bool,
}

impl JobModel {
    fn flight(&self) -> Option<&Flight> {
        self.busy.as_deref()?.flight.as_ref()
    }

    fn flight_mut(&mut self) -> Option<&mut Flight> {
        self.busy.as_deref_mut()?.flight.as_mut()
    }

    fn open_flight(&mut self) -> &mut Flight {
        let busy = self.busy.get_or_insert_with(Box::default);
        busy.flight.get_or_insert_with(Flight::default)
    }

    fn extra(&self) -> Option<&Extra> {
        self.busy.as_deref()?.extra.as_deref()
    }

    fn extra_if_mut(&mut self) -> Option<&mut Extra> {
        self.busy.as_deref_mut()?.extra.as_deref_mut()
    }

    /// Lets go of the box once neither part is left.
    fn let_go(&mut self) {
        if self
            .busy
            .as_deref()
            .is_some_and(|b| b.flight.is_none() && b.extra.is_none())
        {
            self.busy = None;
        }
    }

    fn due(&self) -> &Due {
        static NONE: Due = Due::EMPTY;
        self.flight().map_or(&NONE, |f| &f.due)
    }

    fn due_mut(&mut self) -> &mut Due {
        &mut self.open_flight().due
    }

    /// Takes the oldest due fire; the flight stays (see [`land`](Self::land)).
    fn pop_due(&mut self) -> Option<Fire> {
        self.flight_mut()?.due.pop_front()
    }

    /// The fires due and not started (for the simulation: a shard that stalls holds them).
    #[cfg(test)]
    pub(crate) fn due_fires(&self) -> Vec<DateTime<Utc>> {
        self.due().iter().map(|f| f.t).collect()
    }

    /// Takes every due fire; the flight stays (see [`land`](Self::land)).
    fn take_due(&mut self) -> Vec<Fire> {
        self.flight_mut()
            .map(|f| f.due.take_all())
            .unwrap_or_default()
    }

    fn runs(&self) -> &[Run] {
        self.flight().map_or(&[], |f| &f.running)
    }

    fn runs_mut(&mut self) -> &mut [Run] {
        self.flight_mut().map_or(&mut [], |f| &mut f.running)
    }

    fn start_running(&mut self, run: Run) {
        self.open_flight().running.push(run);
    }

    /// Takes the run at `pos` out of the runs going on.
    fn end_running(&mut self, pos: usize) -> Option<Run> {
        let flight = self.flight_mut()?;
        if pos >= flight.running.len() {
            return None;
        }
        let run = flight.running.swap_remove(pos);
        self.land();
        Some(run)
    }

    /// Lets go of the flight once nothing is due and nothing runs. Called where a handling ends
    /// (a start, a run's end, a halt), not where a fire is taken: a fire taken to start keeps the
    /// flight for its run.
    fn land(&mut self) {
        if self
            .flight()
            .is_some_and(|f| f.due.len() == 0 && f.running.is_empty())
        {
            if let Some(busy) = self.busy.as_deref_mut() {
                busy.flight = None;
            }
            self.let_go();
        }
    }

    fn extra_mut(&mut self) -> &mut Extra {
        let busy = self.busy.get_or_insert_with(Box::default);
        busy.extra.get_or_insert_with(Box::default)
    }

    fn trouble(&self) -> Option<&Trouble> {
        self.extra().map(|e| &e.trouble)
    }

    fn retry_at(&self) -> Option<DateTime<Utc>> {
        self.trouble().and_then(|t| t.retry_at)
    }

    fn uncertain(&self) -> Option<DateTime<Utc>> {
        self.trouble().and_then(|t| t.uncertain)
    }

    fn last_guard_error(&self) -> Option<&str> {
        self.trouble().and_then(|t| t.last_guard_error.as_deref())
    }

    fn trouble_mut(&mut self) -> &mut Trouble {
        &mut self.extra_mut().trouble
    }

    /// Changes the trouble, if there is any.
    fn if_trouble(&mut self, change: impl FnOnce(&mut Trouble)) {
        if let Some(e) = self.extra_if_mut() {
            change(&mut e.trouble);
        }
    }

    fn controls(&self) -> Option<&Controls> {
        self.extra().map(|e| &e.controls)
    }

    fn controls_mut(&mut self) -> &mut Controls {
        &mut self.extra_mut().controls
    }

    fn if_controls(&mut self) -> Option<&mut Controls> {
        self.extra_if_mut().map(|e| &mut e.controls)
    }

    pub(crate) fn claiming(&self) -> Option<&Fire> {
        self.extra().and_then(|e| e.claiming.as_ref())
    }

    /// The fire claimed ahead and waiting for its start, if there is one.
    #[cfg(test)]
    pub(crate) fn held_fire(&self) -> Option<DateTime<Utc>> {
        self.held().map(|h| h.fire.t)
    }

    fn held(&self) -> Option<&Held> {
        self.extra().and_then(|e| e.held.as_ref())
    }

    fn take_held(&mut self) -> Option<Held> {
        self.extra_if_mut().and_then(|e| e.held.take())
    }

    /// Lets go of what the job no longer carries: a claim answered, a trouble over, controls
    /// no longer in use.
    fn tidy(&mut self) {
        // Kept while a fire before the missed fires this process recorded still waits here: a
        // stop must report it through the guard.
        let behind_the_point = |e: &Extra| {
            e.missed_through
                .is_some_and(|m| self.due().iter().any(|f| f.t <= m))
        };
        if self
            .extra()
            .is_some_and(|e| e.is_empty() && !behind_the_point(e))
        {
            if let Some(busy) = self.busy.as_deref_mut() {
                busy.extra = None;
            }
            self.let_go();
        }
    }

    pub(crate) fn new(spec: Spec) -> Self {
        JobModel {
            spec,
            next_fire: None,
            busy: None,
            next_run_id: 0,
            last_started: None,
            last_token: 0,
            window: FireWindow::default(),
            stopping: false,
            keep_held: false,
            front_waits: false,
            turn: Turn::default(),
        }
    }

    /// Who paused the job, as far as this process knows (its own pause, the last word of the
    /// guard or of the control feed).
    pub(crate) fn paused(&self) -> Option<&Pause> {
        self.controls().and_then(|c| c.paused.as_ref())
    }

    /// The job was paused (`Some`) or resumed (`None`): by this process, or another one said so
    /// through the control feed. With a shared guard this is only this process's view: the
    /// guard's store decides at every claim.
    pub(crate) fn set_paused(&mut self, pause: Option<Pause>, now: Now, out: &mut Vec<Action>) {
        if pause.is_none() && self.controls().is_none() {
            return;
        }
        if let Some(pause) = &pause {
            // A fire claimed ahead is not started once the job is paused here: the pause came
            // before its start (docs/design/standby.md).
            if let Some(held) = self.take_held() {
                out.push(Action::Abandon(held.fire));
                let kind = EventKind::Skipped {
                    reason: format!("the job is {pause}"),
                    paused: true,
                };
                self.emit_drop_of(&held.fire, kind, true, now, out);
            }
        }
        self.controls_mut().paused = pause;
        self.tidy();
        self.try_start(now, out);
    }

    /// A run was asked for outside the schedule; it starts as soon as a slot is free, within the
    /// misfire grace. A request this job already took is ignored.
    pub(crate) fn on_trigger(&mut self, run: ManualRun, now: Now, out: &mut Vec<Action>) {
        if self.stopping || !self.spec.enabled {
            // A job this replica only watches runs on the replicas that run it.
            return;
        }
        let fire = Fire::requested(run, now.wall, self.spec.misfire_grace);
        let controls = self.controls_mut();
        if controls.seen.iter().any(|(id, _)| *id == run.id) {
            return;
        }
        while controls.seen.len() >= SEEN_MANUAL_RUNS
            && controls.seen.front().is_some_and(|(_, d)| *d <= now.wall)
        {
            controls.seen.pop_front();
        }
        controls.seen.push_back((run.id, fire.deadline()));
        controls.manual.push_back(fire);
        self.try_start(now, out);
    }

    fn manual_front(&self) -> Option<Fire> {
        self.controls().and_then(|c| c.manual.front().copied())
    }

    pub(crate) fn spec(&self) -> &Spec {
        &self.spec
    }

    /// The next fire instant the executor's timer must wait for.
    pub(crate) fn next_fire(&self) -> Option<DateTime<Utc>> {
        self.next_fire
    }

    /// The next fire as the status shows it: a fire claimed ahead and not started yet, or else
    /// the next fire instant (docs/design/standby.md).
    pub(crate) fn next_fire_shown(&self) -> Option<DateTime<Utc>> {
        let ahead = self.extra().and_then(|e| {
            e.held
                .map(|h| h.fire.t)
                .or_else(|| e.claiming.filter(|_| e.claiming_ahead).map(|f| f.t))
        });
        ahead.or(self.next_fire)
    }

    /// Runs going on in this process.
    pub(crate) fn running(&self) -> usize {
        self.runs().len()
    }

    /// The latest fire started in this process.
    pub(crate) fn last_started(&self) -> Option<DateTime<Utc>> {
        self.last_started
    }

    /// The newest fire that should have started by `now` (its grace has passed), for the health
    /// check: among the fires the timer took, and the fires it has not taken yet (a process that
    /// was frozen answers for the fires it slept through before its timer catches up).
    pub(crate) fn due_by(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let grace = self.due_grace();
        let mut due = self.window.due_by(now, grace);
        let mut next = self.next_fire;
        let mut walked = 0;
        while let Some(t) = next.filter(|t| after(*t, grace) <= now) {
            due = Some(t);
            walked += 1;
            next = if walked < MISSED_WALK_LIMIT {
                self.spec.schedule.next_after(t)
            } else {
                None
            };
        }
        due
    }

    /// How long after its fire time a fire must have started: the misfire grace plus the whole
    /// jitter, so that no fire is overdue because its start was spread.
    pub(crate) fn due_grace(&self) -> Duration {
        self.spec.misfire_grace + self.spec.limits.jitter.unwrap_or_default()
    }

    /// The fire at `t`, with its jittered start and its misfire deadline. The start always lies
    /// before the next fire's instant: the jitter is shorter than the schedule's shortest gap
    /// ([`Schedule::shortest_gap`]), but near a change of UTC offset two fires of a cron schedule
    /// can come closer, and the delay is then cut short so that fires never swap places.
    fn fire_at(&self, t: DateTime<Utc>) -> Fire {
        let mut delay = limits::jitter_delay(&self.spec.name, t, self.spec.limits.jitter);
        if !delay.is_zero() {
            if let Some(next) = self.spec.schedule.next_after(t) {
                delay = delay.min(since(t, next).saturating_sub(Duration::from_millis(1)));
            }
        }
        Fire::delayed(t, delay, self.spec.misfire_grace)
    }

    /// When the scheduled `fire` is claimed or started here: at its jittered start, or, while this
    /// process stands by (another got the job's last claimed fire), the standby later — at most
    /// half the misfire grace and half the time from the jittered start to the next fire's
    /// instant, so that a fire the others did not take still starts well within its grace, and
    /// never waits into the next fire (which would coalesce it here while another process runs
    /// it), however late in its jitter it starts.
    ///
    /// While the job is paused (as far as this process knows) nobody stands by: every process
    /// claims at the instant and hears that the fire is paused, so that a resume cannot let a
    /// process standing by run a fire that was already reported as paused.
    ///
    /// Once the processes present at the store are known ([`spread`]), the one they name first
    /// for the job never stands by, and the others always do — unless one of them got the last
    /// fire after standing by for it, which shows that the one named does not claim it. So the
    /// jobs spread evenly over the processes instead of staying with whichever claimed first.
    fn start_of(&self, fire: &Fire) -> DateTime<Utc> {
        if !self.turn.stands_by()
            || !self.shared()
            || self.spec.standby.is_zero()
            || self.paused().is_some()
        {
            return fire.start();
        }
        let to_next = self
            .next_fire
            .map_or(Duration::MAX, |next| since(fire.start(), next));
        let wait = self
            .spec
            .standby
            .min(self.spec.misfire_grace / 2)
            .min(to_next / 2);
        after(fire.start(), wait)
    }

    /// When the claim of `fire` is sent: at its start (see [`start_of`](Self::start_of)), or up
    /// to `claim_ahead` before it while this process claims at the instant and nothing else of
    /// the job is going on here (docs/design/standby.md).
    fn claim_from(&self, fire: &Fire) -> DateTime<Utc> {
        let start = self.start_of(fire);
        let lead = self.lead();
        if lead.is_zero()
            || fire.manual().is_some()
            || start != fire.start()
            || !self.may_claim_ahead()
        {
            return start;
        }
        start - chrono::TimeDelta::from_std(lead).unwrap_or_default()
    }

    /// The lead of claims ahead: zero for a job without a shared guard.
    fn lead(&self) -> Duration {
        if self.shared() {
            self.spec.claim_ahead
        } else {
            Duration::ZERO
        }
    }

    /// Whether nothing of the job is going on that a claim ahead could decide too early: no run,
    /// no other claim, no retry or trouble, no pause known, no run asked for by hand.
    fn may_claim_ahead(&self) -> bool {
        !self.stopping
            && self.spec.enabled
            && self.runs().is_empty()
            && self.extra().is_none_or(|e| {
                e.claiming.is_none()
                    && e.held.is_none()
                    && e.trouble.retry_at.is_none()
                    && e.trouble.uncertain.is_none()
                    && e.controls.paused.is_none()
                    && e.controls.manual.is_empty()
            })
    }

    /// When the next fire is taken ahead of its instant, to be claimed ahead: only while nothing
    /// of the job is due or going on, and this process does not stand by for the fire.
    fn take_ahead_at(&self) -> Option<DateTime<Utc>> {
        let lead = self.lead();
        let next = self.next_fire?;
        if self.leaves_fires() {
            return None;
        }
        let stands_by = self.turn.stands_by() && !self.spec.standby.is_zero();
        if lead.is_zero() || self.flight().is_some() || stands_by || !self.may_claim_ahead() {
            return None;
        }
        Some(next - chrono::TimeDelta::from_std(lead).unwrap_or_default())
    }

    /// Takes the next fire ahead of its instant (see [`take_ahead_at`](Self::take_ahead_at)).
    fn take_ahead(&mut self, now: Now) {
        let Some(t) = self.next_fire else {
            return;
        };
        let fire = self.fire_at(t);
        self.window.observe(t, now.wall, self.spec.misfire_grace);
        self.due_mut().push_back(fire);
        self.next_fire = self.spec.schedule.next_after(t);
    }

    /// Whether claims, runs or reports are still outstanding.
    pub(crate) fn busy(&self) -> bool {
        self.claiming().is_some()
            || self.held().is_some()
            || !self.runs().is_empty()
            || self.extra().is_some_and(|e| e.pending_reports > 0)
    }

    fn shared(&self) -> bool {
        self.spec.lock != Lock::Local
    }

    /// Whether the processes present at the job's shared store name this one to claim its fires
    /// first ([`spread::Present::first_here`]), for the fires that come due from now on; `None`:
    /// not known.
    pub(crate) fn set_first_here(&mut self, first: Option<bool>) {
        self.turn.set_first_here(first);
    }

    /// Who owns the job's partition, for the fires that come due from now on
    /// (docs/design/ownership.md).
    pub(crate) fn set_owner(&mut self, owner: spread::Owner) {
        self.turn.set_owner(owner);
    }

    /// Starts following the schedule: the first fire after `now`.
    pub(crate) fn schedule_from(&mut self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.next_fire = self.spec.schedule.next_after(now);
        self.next_fire
    }

    /// When the model needs a wake-up without a fire or an answer: the misfire deadline of its
    /// oldest waiting fire, or its claim retry.
    pub(crate) fn next_wake(&self) -> Option<DateTime<Utc>> {
        if self.busy.is_none() {
            // Nothing due, running, held, retried or asked for by hand: only a claim ahead.
            return self.take_ahead_at();
        }
        let manual = self
            .controls()
            .into_iter()
            .flat_map(|c| c.manual.iter().copied());
        let misfire = self.due().iter().chain(manual).map(|f| f.deadline()).min();
        let attempts = self
            .runs()
            .iter()
            .filter_map(|r| r.backoff.as_ref().map(|b| b.until));
        let start = self
            .due()
            .front()
            .filter(|_| self.front_waits)
            .map(|f| self.claim_from(&f));
        let held = self.held().map(|h| h.fire.start());
        [misfire, self.retry_at(), start, held, self.take_ahead_at()]
            .into_iter()
            .flatten()
            .chain(attempts)
            .min()
    }

    /// The timer reached `now`: every fire up to it comes due, and what may start starts.
    /// Returns the next fire instant.
    pub(crate) fn on_timer(&mut self, now: Now, out: &mut Vec<Action>) -> Option<DateTime<Utc>> {
        self.walk_left(now, out);
        self.take_fires(now, false, out);
        self.try_start(now, out);
        self.next_fire
    }

    /// Takes every fire up to `now` into the waiting fires. Fires already past their grace are
    /// misfires, reported together as one event (a pause of days is one report, not thousands);
    /// `halting`: the last take of a stop.
    fn take_fires(&mut self, now: Now, halting: bool, out: &mut Vec<Action>) {
        if self.stopping {
            return;
        }
        let grace = self.spec.misfire_grace;
        let mut missed: Option<Missed> = None;
        let mut next = self.next_fire;
        while let Some(t) = next.filter(|t| *t <= now.wall) {
            if self.leaves_fires() {
                // The partition's owner claims it, or reports it; whoever owns the partition
                // next walks it if it has no fate by then (docs/design/ownership.md).
                self.report_missed(missed.take(), halting, now, out);
                self.window.observe(t, now.wall, grace);
                if !self.turn.left() {
                    self.turn.set_left(true);
                    self.extra_mut().left_first = Some(t);
                }
                next = self.spec.schedule.next_after(t);
                continue;
            }
            let fire = self.fire_at(t);
            if now.wall < fire.deadline() {
                self.report_missed(missed.take(), halting, now, out);
                self.window.observe(t, now.wall, grace);
                if self.spec.enabled {
                    self.due_mut().push_back(fire);
                    self.coalesce(now, out);
                }
                next = self.spec.schedule.next_after(t);
                continue;
            }
            next = self.count_missed(&mut missed, t, now.wall, now);
        }
        self.report_missed(missed, halting, now, out);
        self.next_fire = next;
    }

    /// Counts fire `t` as missed and answers the next fire to look at: after
    /// [`MISSED_WALK_LIMIT`] fires, the first one still inside its grace (no later than `until`),
    /// and the count becomes a lower bound.
    fn count_missed(
        &self,
        missed: &mut Option<Missed>,
        t: DateTime<Utc>,
        until: DateTime<Utc>,
        now: Now,
    ) -> Option<DateTime<Utc>> {
        let m = missed.get_or_insert(Missed {
            first: t,
            last: t,
            count: 0,
            walked_all: true,
        });
        m.last = t;
        m.count += 1;
        let next = self.spec.schedule.next_after(t);
        if m.count < MISSED_WALK_LIMIT {
            return next;
        }
        m.walked_all = false;
        let grace = chrono::TimeDelta::from_std(self.spec.misfire_grace).unwrap_or_default();
        let edge = (now.wall - grace).min(until);
        if let Some(n) = next.filter(|n| *n < edge) {
            let jumped = self.spec.schedule.next_after(edge);
            if jumped.is_some_and(|j| j > n) {
                m.last = edge.min(now.wall);
                return jumped;
            }
        }
        next
    }

    fn report_missed(
        &mut self,
        missed: Option<Missed>,
        halting: bool,
        now: Now,
        out: &mut Vec<Action>,
    ) {
        let Some(m) = missed else {
            return;
        };
        self.window
            .observe(m.last, now.wall, self.spec.misfire_grace);
        if !self.spec.enabled {
            return;
        }
        if m.count > 1 && self.shared() && !halting {
            // Recorded through the guard, as after downtime: the fires after the store's fate
            // point had no fate, and this process reports them; of the ones up to it the newest
            // are asked one by one (`on_missed_reported`), the older taken as decided
            // (docs/design/guarantees.md).
            self.record_missed(m, MissedCause::TimerWoke, out);
            return;
        }
        let kind = self.slept_through(m.first, m.last, m.count, m.walked_all, now);
        if m.count == 1 {
            self.report_drop(m.last, kind, now, out);
        } else if self.shared() {
            self.tell_slept_through_at_stop(m.last, kind, now, out);
        } else {
            // A local job: this process is the only one that knows of it.
            self.emit_drop(m.last, kind, true, now, out);
        }
    }

    /// The misfire of `count` fires from `first` to `last` that the timer woke past.
    fn slept_through(
        &self,
        first: DateTime<Utc>,
        last: DateTime<Utc>,
        count: u32,
        walked_all: bool,
        now: Now,
    ) -> EventKind {
        let late = (now.wall - last).to_std().unwrap_or_default();
        let what = if count == 1 {
            "the timer woke".to_owned()
        } else {
            format!(
                "{}{count} fires from {} to {} were missed: the timer woke",
                if walked_all { "" } else { "at least " },
                fmt_time(first),
                fmt_time(last)
            )
        };
        let reason = format!(
            "{what} {} after the fire time (the process was paused, suspended or overloaded, or the clock jumped), past the misfire grace of {}",
            human(late),
            human(self.spec.misfire_grace)
        );
        EventKind::Misfired {
            reason,
            count,
            first,
        }
    }

    /// A stop records nothing past the fires it leaves open (docs/guide/downtime.md), so it
    /// tells the fires it slept through on its own word; the next start's walk may tell them
    /// again.
    fn tell_slept_through_at_stop(
        &mut self,
        last: DateTime<Utc>,
        kind: EventKind,
        now: Now,
        out: &mut Vec<Action>,
    ) {
        let kind = kind.with_reason_note(
            "told on this process's own word: it is shutting down, so the guard is not asked, and the next start may report them too",
        );
        self.emit_drop(last, kind, true, now, out);
    }

    /// A wake-up from [`next_wake`](JobModel::next_wake) came due.
    pub(crate) fn on_wake(&mut self, now: Now, out: &mut Vec<Action>) {
        self.walk_left(now, out);
        if self.retry_at().is_some_and(|at| at <= now.wall) {
            self.if_trouble(|t| t.retry_at = None);
        }
        if self
            .due()
            .front()
            .is_none_or(|f| self.claim_from(&f) <= now.wall)
        {
            self.front_waits = false;
        }
        if self.take_ahead_at().is_some_and(|at| at <= now.wall) {
            self.take_ahead(now);
        }
        self.start_attempts(now, out);
        self.drop_misfires(now, out);
        self.try_start(now, out);
        self.tidy();
    }

    /// With `coalesce`, only the latest waiting fire is kept.
    fn coalesce(&mut self, now: Now, out: &mut Vec<Action>) {
        if !self.spec.coalesce {
            return;
        }
        while self.due().len() > 1 {
            let Some(old) = self.pop_due() else {
                break;
            };
            let covered_by = self.due().back().map_or(old.t, |f| f.t);
            self.give_up(old, out);
            self.emit_drop(old.t, EventKind::Coalesced { covered_by }, true, now, out);
        }
    }

    fn drop_misfires(&mut self, now: Now, out: &mut Vec<Action>) {
        self.drop_manual_misfires(now, out);
        if self.due().iter().all(|f| now.wall < f.deadline()) {
            return;
        }
        // Usually only the front is late, but a fire put back after a failed claim may not be.
        let grace = human(self.spec.misfire_grace);
        for fire in self.take_due() {
            if now.wall < fire.deadline() {
                self.due_mut().push_back(fire);
                continue;
            }
            let reason = match self.last_guard_error() {
                Some(e) => format!(
                    "not started within the misfire grace of {grace}: the guard could not be asked ({e})"
                ),
                None => format!(
                    "not started within the misfire grace of {grace}: no instance slot became free"
                ),
            };
            self.give_up(fire, out);
            let too_early = self
                .extra_if_mut()
                .is_some_and(|e| std::mem::take(&mut e.trouble.too_early));
            let reason = match too_early && !reason.contains("clock is ahead") {
                true => format!("{reason}; the guard refused a claim of it as too early, so this host's clock is ahead"),
                false => reason,
            };
            let kind = EventKind::misfired(reason, fire.t);
            if too_early {
                // Only this process's clock is wrong: the other processes may still run the
                // fire, and must be free to report it if they cannot.
                self.emit_drop(fire.t, kind, true, now, out);
            } else {
                // Also when this process's own claim may have taken effect unseen: the guard
                // knows whose claim took the fire, and answers `ClaimedElsewhere` for another's.
                self.report_drop(fire.t, kind, now, out);
            }
        }
    }

    /// Manual runs that could not start within their grace are reported, each by this process
    /// alone (it alone saw the request, or every replica that read it reports its own view).
    fn drop_manual_misfires(&mut self, now: Now, out: &mut Vec<Action>) {
        let Some(controls) = self.extra_if_mut().map(|e| &mut e.controls) else {
            return;
        };
        if controls.manual.iter().all(|f| now.wall < f.deadline()) {
            return;
        }
        let mut late = Vec::new();
        controls.manual.retain(|f| {
            let keep = now.wall < f.deadline();
            if !keep {
                late.push(*f);
            }
            keep
        });
        let grace = human(self.spec.misfire_grace);
        let reason = match self.last_guard_error() {
            Some(e) => format!("the run asked for was not started within the misfire grace of {grace}: the guard could not be asked ({e})"),
            None => format!("the run asked for was not started within the misfire grace of {grace}: no instance slot became free"),
        };
        for fire in late {
            self.emit_drop_of(
                &fire,
                EventKind::misfired(reason.clone(), fire.t),
                true,
                now,
                out,
            );
        }
    }

    /// Starts the manual run at the front if a slot is free: `true` when it claimed or started
    /// it.
    fn try_start_manual(&mut self, now: Now, out: &mut Vec<Action>) -> bool {
        let Some(fire) = self.manual_front() else {
            return false;
        };
        if now.wall >= fire.deadline() {
            self.drop_manual_misfires(now, out);
            return false;
        }
        // A claim of the fire at the front may have taken effect unseen: then this process holds
        // the lock, and the manual run would be answered busy until that lease ran out while the
        // fire's claim lapsed. Its retry goes first.
        let unseen = self
            .uncertain()
            .is_some_and(|u| self.due().front().is_some_and(|f| f.t == u));
        if self.runs().len() >= self.spec.max_instances as usize
            || self.retry_at().is_some_and(|at| at > now.wall)
            || unseen
        {
            return false;
        }
        if let Some(c) = self.if_controls() {
            c.manual.pop_front();
        }
        if self.shared() {
            self.extra_mut().claiming = Some(fire);
            out.push(Action::Claim(fire));
        } else {
            let token = self.last_token + 1;
            self.start_run(fire, token, now, out);
        }
        true
    }

    fn try_start(&mut self, now: Now, out: &mut Vec<Action>) {
        self.walk_left(now, out);
        self.start_what_may(now, out);
        self.land();
    }

    fn start_what_may(&mut self, now: Now, out: &mut Vec<Action>) {
        loop {
            if let Some(held) = self.held() {
                // Also while stopping: a shutdown waits for a fire claimed ahead as for a run.
                if now.wall < held.fire.start() {
                    return;
                }
                if let Some(held) = self.take_held() {
                    self.start_claimed(held.fire, held.token, held.deadline, now, out);
                }
                continue;
            }
            if self.claiming().is_some() || self.stopping {
                return;
            }
            if self.try_start_manual(now, out) {
                continue;
            }
            if self.walking() {
                // No scheduled fire is claimed until the fires missed before the start have their
                // fate in the store: a claim would move the fate point past them unreported.
                return;
            }
            let Some(fire) = self.due().front() else {
                return;
            };
            if now.wall >= fire.deadline() {
                // Never claimed or started once its grace has passed (the process may have been
                // frozen with the fire waiting).
                self.drop_misfires(now, out);
                continue;
            }
            if let Some(pause) = self.paused().filter(|_| !self.shared()) {
                // A shared guard's store decides at the claim, for every process at once.
                let kind = EventKind::Skipped {
                    reason: format!("the job is {pause}"),
                    paused: true,
                };
                self.pop_due();
                self.emit_drop(fire.t, kind, true, now, out);
                continue;
            }
            if self.last_started.is_some_and(|last| last >= fire.t) {
                // Only a fire already started here: never twice.
                self.pop_due();
                self.emit_drop(fire.t, EventKind::ClaimedElsewhere, true, now, out);
                continue;
            }
            if self.claim_from(&fire) > now.wall {
                // Not before its start (or its claim ahead): every decision about the fire is
                // taken then.
                self.front_waits = true;
                return;
            }
            if self.runs().len() >= self.spec.max_instances as usize {
                match self.spec.overlap {
                    // A shared guard is asked even though no slot is free here, so that it
                    // records the skip once for every process.
                    Overlap::Skip if self.shared() => {}
                    Overlap::Skip => {
                        self.pop_due();
                        let reason = self.busy_here_reason();
                        self.emit_drop(fire.t, EventKind::skipped(reason), true, now, out);
                        continue;
                    }
                    Overlap::Queue => return,
                    Overlap::Replace => {
                        self.replace_oldest(now, out);
                        return;
                    }
                }
            }
            if self.retry_at().is_some_and(|at| at > now.wall) {
                return;
            }
            self.pop_due();
            if self.shared() {
                let waited = self.start_of(&fire) > fire.start();
                self.turn.claim_sent(waited);
                let ahead = now.wall < fire.start() && !self.lead().is_zero();
                let extra = self.extra_mut();
                extra.claiming = Some(fire);
                extra.claiming_ahead = ahead;
                out.push(Action::Claim(fire));
                return;
            }
            let token = self.last_token + 1;
            self.start_run(fire, token, now, out);
        }
    }

    fn busy_here_reason(&self) -> String {
        match self.runs().first() {
            Some(r) => format!(
                "the run of {} is still going (max_instances = {})",
                fmt_time(r.fire),
                self.spec.max_instances
            ),
            None => "no instance slot is free".to_owned(),
        }
    }

    fn replace_oldest(&mut self, now: Now, out: &mut Vec<Action>) {
        if self.runs().iter().any(|r| r.cancel_reason.is_some()) {
            return;
        }
        let oldest = self.runs().iter().min_by_key(|r| r.fire).map(|r| r.id);
        if let Some(id) = oldest.filter(|id| self.waiting(*id)) {
            let kind = EventKind::Cancelled {
                reason: CancelReason::Replaced,
            };
            self.end_waiting(id, kind, now, out);
            self.try_start(now, out);
            return;
        }
        if let Some(oldest) = self.runs_mut().iter_mut().min_by_key(|r| r.fire) {
            oldest.cancel_reason = Some(CancelReason::Replaced);
            out.push(Action::Cancel(oldest.id));
        }
    }

    /// The shared guard answered the claim of the fire in flight.
    pub(crate) fn on_claimed(&mut self, answer: Answer, now: Now, out: &mut Vec<Action>) {
        let Some((fire, ahead)) = self
            .extra_if_mut()
            .and_then(|e| Some((e.claiming.take()?, std::mem::take(&mut e.claiming_ahead))))
        else {
            return;
        };
        self.apply_claim(fire, ahead, answer, now, out);
        self.try_start(now, out);
        self.tidy();
    }

    /// The answer to the claim of `fire`, sent `ahead` of its start or not.
    fn apply_claim(
        &mut self,
        fire: Fire,
        ahead: bool,
        answer: Answer,
        now: Now,
        out: &mut Vec<Action>,
    ) {
        let scheduled = fire.manual().is_none();
        if self.stopping {
            if let (true, true, Answer::Acquired { token, deadline }) =
                (ahead, self.keep_held, &answer)
            {
                // Granted ahead: the shutdown waits for its instant, as for a run.
                self.hold(fire, *token, *deadline, out);
                return;
            }
            let open = match &answer {
                Answer::Acquired { .. } | Answer::Failed(_) | Answer::TooEarly(_) => true,
                Answer::Busy { .. } => self.spec.overlap != Overlap::Skip,
                _ => false,
            };
            if open {
                self.apply_claim_stopping(fire, ahead, answer, now, out);
                return;
            }
        }
        let was_uncertain = scheduled && self.uncertain() == Some(fire.t);
        if scheduled && self.shared() {
            // The guard's store answered for the job: it is paused only if it said so.
            match &answer {
                Answer::Paused { pause, .. } => {
                    self.controls_mut().paused = Some(pause.clone());
                }
                Answer::Failed(_) | Answer::TooEarly(_) => {}
                _ => {
                    if let Some(c) = self.if_controls() {
                        c.paused = None;
                    }
                }
            }
        }
        if scheduled {
            // Who got this fire decides who claims the next one first, while the processes
            // present are not known (see `start_of`).
            match answer {
                Answer::Acquired { .. } => self.turn.won(),
                Answer::AlreadyRan | Answer::ClaimedByAnother => self.turn.lost(),
                _ => {}
            }
        }
        // A guard refuses a fire too far ahead of its clock before it looks up who claimed it:
        // the earlier claim may still have taken effect. A fire left waiting (busy under `queue`
        // or `replace`) says nothing of a drop the earlier claim may have recorded for this
        // process to report (the job was paused then): the fire stays this process's to report
        // if it never starts.
        let waits = matches!(answer, Answer::Busy { .. }) && self.spec.overlap != Overlap::Skip;
        if !matches!(answer, Answer::Failed(_) | Answer::TooEarly(_)) && !waits && was_uncertain {
            self.if_trouble(|t| t.uncertain = None);
        }
        if matches!(answer, Answer::TooEarly(_)) && !ahead {
            self.trouble_mut().too_early = true;
        } else {
            self.if_trouble(|t| t.too_early = false);
        }
        match answer {
            Answer::Acquired { token, deadline } => {
                self.if_trouble(|t| {
                    t.retries = 0;
                    t.last_guard_error = None;
                });
                if ahead {
                    self.hold(fire, token, deadline, out);
                } else {
                    self.start_claimed(fire, token, deadline, now, out);
                }
            }
            Answer::AlreadyRan if was_uncertain => {
                // A claim of this fire may have taken effect without its reply, so long ago that
                // the guard no longer knows who made it (this process was frozen, or its clock
                // jumped back): whether the fire ran cannot be told, so it is reported.
                self.if_trouble(|t| t.retries = 0);
                let reason = UNKNOWN_CLAIMANT.to_owned();
                self.emit_drop(fire.t, EventKind::misfired(reason, fire.t), true, now, out);
            }
            Answer::AlreadyRan | Answer::ClaimedByAnother => {
                self.if_trouble(|t| t.retries = 0);
                self.emit_drop_of(&fire, EventKind::ClaimedElsewhere, true, now, out);
            }
            Answer::Superseded => {
                self.if_trouble(|t| t.retries = 0);
                let reason = "no process claimed this fire before a later fire was claimed (every process was late or busy)".to_owned();
                self.report_drop_of(&fire, EventKind::skipped(reason), now, out);
            }
            Answer::DroppedByAnother => {
                self.if_trouble(|t| t.retries = 0);
                let reason = "another process dropped this fire and reported it (the job was busy or paused there, or the fire came too late)".to_owned();
                self.emit_drop_of(&fire, EventKind::skipped(reason), false, now, out);
            }
            Answer::Paused {
                pause,
                first_report,
            } => {
                self.if_trouble(|t| t.retries = 0);
                let kind = EventKind::Skipped {
                    reason: format!("the job is {pause}"),
                    paused: true,
                };
                self.emit_drop_of(&fire, kind, first_report, now, out);
            }
            // A manual run waits for the run that holds the lease, whatever `overlap` says.
            Answer::Busy { .. } if !scheduled => self.wait_and_retry(fire, now, out),
            Answer::Busy { first_report } => match self.spec.overlap {
                Overlap::Skip => {
                    let reason = match self.runs().first() {
                        Some(r) => format!(
                            "the run of {} in this process is still going",
                            fmt_time(r.fire)
                        ),
                        None => "another process is running this job".to_owned(),
                    };
                    self.emit_drop(fire.t, EventKind::skipped(reason), first_report, now, out);
                }
                Overlap::Queue | Overlap::Replace => self.wait_and_retry(fire, now, out),
            },
            Answer::Lapsed => {
                let reason = "this process's claim took effect but its reply was lost, and the lease ran out before the claim was retried".to_owned();
                self.emit_drop_of(&fire, EventKind::misfired(reason, fire.t), true, now, out);
            }
            Answer::TooLate(late) => {
                self.if_trouble(|t| t.retries = 0);
                let reason = format!(
                    "the run was asked for {} ago by the guard's clock, more than the misfire grace of {}; no process started it",
                    human(late),
                    human(self.spec.misfire_grace)
                );
                self.emit_drop_of(&fire, EventKind::misfired(reason, fire.t), true, now, out);
            }
            Answer::TooEarly(_) if ahead => {
                // The job is busy or paused at the guard, or its clock is behind: the claim at
                // the fire's start decides.
                self.due_mut().push_front(fire);
                self.trouble_mut().retry_at = Some(fire.start());
            }
            Answer::TooEarly(ahead) => {
                self.trouble_mut().last_guard_error = Some(
                    format!(
                        "the guard refused the claim: the fire lies {} ahead of the guard's clock, so this host's clock is ahead",
                        human(ahead)
                    )
                    .into(),
                );
                self.wait_and_retry(fire, now, out);
            }
            Answer::Failed(e) => {
                let t = self.trouble_mut();
                if scheduled {
                    t.uncertain = Some(fire.t);
                }
                t.last_guard_error = Some(e.into());
                self.wait_and_retry(fire, now, out);
            }
        }
    }

    /// The answer to a claim that came while the scheduler stops and left the fire open here: it
    /// starts here only when granted at its instant during a shutdown.
    /// A fire this process holds a claim of (granted, or perhaps granted unseen) is given back
    /// and reported through the guard; a fire the guard decided elsewhere is reported as it
    /// decided; a fire still open (busy under `queue` or `replace`) is left to the processes
    /// that go on, and to the walk of the next start when none does (docs/guide/downtime.md).
    fn apply_claim_stopping(
        &mut self,
        fire: Fire,
        ahead: bool,
        answer: Answer,
        now: Now,
        out: &mut Vec<Action>,
    ) {
        let why = "the scheduler shut down, or the job was removed, before the fire could start";
        match answer {
            Answer::Acquired { token, deadline } if self.keep_held && !ahead => {
                // Granted to this process at its instant while the scheduler stops: the others
                // take the fire as claimed, so it runs here, and the shutdown waits for it as
                // for a run (a fire given back now would be lost).
                self.if_trouble(|t| {
                    t.uncertain = None;
                    t.retries = 0;
                    t.last_guard_error = None;
                });
                self.start_claimed(fire, token, deadline, now, out);
            }
            Answer::Acquired { .. } => {
                // Granted to this process: nobody else runs or reports it.
                self.if_trouble(|t| t.uncertain = None);
                out.push(Action::Abandon(fire));
                let kind = EventKind::misfired(why.to_owned(), fire.t);
                self.emit_drop_of(&fire, kind, true, now, out);
            }
            Answer::Failed(_) => {
                // Perhaps granted unseen: the guard says whose claim took the fire.
                self.if_trouble(|t| t.uncertain = None);
                out.push(Action::Abandon(fire));
                let kind = EventKind::misfired(why.to_owned(), fire.t);
                self.report_drop_of(&fire, kind, now, out);
            }
            Answer::TooEarly(_) if ahead => {
                // Nothing was decided and its instant has not come: the processes that go on
                // claim and report it.
            }
            Answer::Busy { .. } => {
                let reason = format!("{why}; it waited for the running job, and the processes that go on run or report it");
                self.emit_drop_of(&fire, EventKind::misfired(reason, fire.t), false, now, out);
            }
            Answer::TooEarly(ahead) => {
                let reason = format!(
                    "{why}; the guard refused its claim: the fire lies {} ahead of the guard's clock, so this host's clock is ahead",
                    human(ahead)
                );
                self.emit_drop_of(&fire, EventKind::misfired(reason, fire.t), true, now, out);
            }
            _ => {}
        }
    }

    /// Keeps a fire the guard granted ahead of its start, with its lease, until the start.
    fn hold(&mut self, fire: Fire, token: u64, deadline: Option<Duration>, out: &mut Vec<Action>) {
        self.extra_mut().held = Some(Held {
            fire,
            token,
            deadline,
        });
        out.push(Action::Hold);
    }

    /// Starts the run of a fire the guard granted, unless the grant came too late or this process
    /// must not run it.
    fn start_claimed(
        &mut self,
        fire: Fire,
        token: u64,
        deadline: Option<Duration>,
        now: Now,
        out: &mut Vec<Action>,
    ) {
        // A claim granted too late: the fire is this process's, and the others saw it as
        // claimed (debug level), so this process reports it, on its own word: the guard may no
        // longer tell its claim from a fire reported missed long after (docs/guide/downtime.md).
        let late = if deadline.is_some_and(|d| now.mono >= d) {
            Some(
                "the guard's answer came only after the lease had run out; the run was not started"
                    .to_owned(),
            )
        } else if now.wall >= fire.deadline() {
            Some(format!(
                "claimed only after the misfire grace of {} had passed",
                human(self.spec.misfire_grace)
            ))
        } else {
            None
        };
        if let Some(reason) = late {
            out.push(Action::Abandon(fire));
            self.emit_drop_of(&fire, EventKind::misfired(reason, fire.t), true, now, out);
            return;
        }
        // A claim this process must not run: the fire is its alone, nobody else reports it.
        let refusal = if self.runs().len() >= self.spec.max_instances as usize {
            Some(EventKind::skipped(format!(
                "{} (the guard granted the claim, but this process never runs more than max_instances at once)",
                self.busy_here_reason()
            )))
        } else if token <= self.last_token {
            Some(EventKind::misfired(
                format!(
                    "the guard handed out fencing token {token}, not above {} of an earlier run here; the run was not started (check the guard's store)",
                    self.last_token
                ),
                fire.t,
            ))
        } else {
            None
        };
        match refusal {
            Some(kind) => {
                out.push(Action::Abandon(fire));
                self.emit_drop_of(&fire, kind, true, now, out);
            }
            None => self.start_run(fire, token, now, out),
        }
    }

    /// A fire leaves this process without a run: a claim of it that may have taken effect
    /// unseen is given up, so that the guard does not count it as started.
    fn give_up(&mut self, fire: Fire, out: &mut Vec<Action>) {
        if fire.manual().is_none() && self.uncertain() == Some(fire.t) {
            self.if_trouble(|t| t.uncertain = None);
            out.push(Action::Abandon(fire));
        }
    }

    /// Keeps `fire` due and asks the guard again after a jittered, growing pause.
    fn wait_and_retry(&mut self, fire: Fire, now: Now, out: &mut Vec<Action>) {
        if fire.manual().is_some() {
            self.controls_mut().manual.push_front(fire);
        } else {
            self.due_mut().push_front(fire);
            self.coalesce(now, out);
        }
        let base = Duration::from_millis(50)
            .saturating_mul(1 << self.trouble().map_or(0, |t| t.retries).min(5))
            .min(Duration::from_secs(1));
        let quarter = u64::try_from(base.as_millis() / 4).unwrap_or(0);
        let jitter = Duration::from_millis(fastrand::Rng::with_seed(now.random).u64(0..=quarter));
        let t = self.trouble_mut();
        t.retry_at = Some(after(now.wall, base + jitter));
        t.retries = t.retries.saturating_add(1);
        self.drop_misfires(now, out);
    }

    fn start_run(&mut self, fire: Fire, token: u64, now: Now, out: &mut Vec<Action>) {
        let id = self.next_run_id;
        self.next_run_id = self.next_run_id.wrapping_add(1);
        // Measured from the jittered start: the jitter is not lateness.
        let lateness = since(fire.start(), now.wall);
        if fire.manual().is_none() {
            // A manual run is no fire of the schedule: the fires before it may still run.
            self.last_started = Some(fire.t);
        }
        self.last_token = token;
        let run = Run {
            id,
            fire: fire.t,
            token,
            lateness,
            cancel_reason: None,
            lease_lost: false,
            manual: fire.manual(),
            attempt: 1,
            deadline: fire.deadline(),
            backoff: None,
        };
        out.push(Action::Emit(run.event(EventKind::Started, now.wall, None)));
        self.start_running(run);
        out.push(Action::Start {
            run: id,
            fire: fire.t,
            token,
            manual: fire.manual(),
        });
    }

    /// The watchdog judged the lease of run `id`.
    pub(crate) fn on_verdict(
        &mut self,
        id: RunId,
        verdict: Verdict,
        now: Now,
        out: &mut Vec<Action>,
    ) {
        if self.waiting(id) {
            self.verdict_between_attempts(id, verdict, now, out);
            return;
        }
        let Some(run) = self.runs_mut().iter_mut().find(|r| r.id == id) else {
            return;
        };
        match verdict {
            Verdict::Lost(reason) => {
                if run.lease_lost {
                    return;
                }
                run.lease_lost = true;
                run.cancel_reason = Some(CancelReason::LeaseLost);
                let event = run.event(EventKind::LeaseLost { reason }, now.wall, None);
                out.push(Action::Cancel(id));
                out.push(Action::Emit(event));
            }
            Verdict::CancelRequested => {
                run.cancel_reason.get_or_insert(CancelReason::Replaced);
                out.push(Action::Cancel(id));
            }
        }
    }

    /// Run `id` ended after running for `duration`. A run holds its slot until this is called,
    /// which the executor does only once the body has really returned.
    pub(crate) fn on_run_ended(
        &mut self,
        id: RunId,
        end: RunEnd,
        duration: Duration,
        now: Now,
        out: &mut Vec<Action>,
    ) {
        let Some(pos) = self.runs().iter().position(|r| r.id == id) else {
            return;
        };
        if self.retry_later(pos, &end, duration, now, out) {
            return;
        }
        let retrying = self.spec.limits.retries > 0 && end.may_retry();
        let Some(run) = self.end_running(pos) else {
            return;
        };
        if end == RunEnd::LeaseExpired && !run.lease_lost {
            let reason = "the lease's local deadline passed before the run's next step (the process was paused, or renewals failed); the run was stopped there".to_owned();
            out.push(Action::Emit(run.event(
                EventKind::LeaseLost { reason },
                now.wall,
                None,
            )));
        }
        let kind = match (end, run.cancel_reason) {
            (RunEnd::LeaseExpired, _) => EventKind::Cancelled {
                reason: CancelReason::LeaseLost,
            },
            (RunEnd::Cancelled, reason) | (_, reason @ Some(_)) => EventKind::Cancelled {
                reason: reason.unwrap_or(CancelReason::Shutdown),
            },
            (RunEnd::Ok, None) => EventKind::Succeeded,
            (end, None) => {
                let (error, reason) = self.failure(end);
                EventKind::Failed {
                    error,
                    reason,
                    retry_at: None,
                }
            }
        };
        if retrying {
            out.push(Action::Finish(run.id));
        }
        out.push(Action::Emit(run.event(kind, now.wall, Some(duration))));
        self.try_start(now, out);
    }

    /// The shared guard said who reports a dropped fire.
    pub(crate) fn on_reported(
        &mut self,
        fire: DateTime<Utc>,
        kind: EventKind,
        reported: Reported,
        now: Now,
        out: &mut Vec<Action>,
    ) {
        if let Some(e) = self.extra_if_mut() {
            e.pending_reports = e.pending_reports.saturating_sub(1);
        }
        match reported {
            Reported::First => self.emit_drop(fire, kind, true, now, out),
            Reported::ByAnother => self.emit_drop(fire, kind, false, now, out),
            Reported::ClaimedElsewhere => {
                self.emit_drop(fire, EventKind::ClaimedElsewhere, true, now, out)
            }
        }
        self.tidy();
    }

    /// The scheduler stops firing: fires still waiting will not run.
    pub(crate) fn stop(&mut self, now: Now, out: &mut Vec<Action>) {
        self.halt(
            "the scheduler shut down before the fire could start",
            true,
            now,
            out,
        );
    }

    /// The job was removed while the scheduler runs: like [`stop`](Self::stop), for this job.
    pub(crate) fn remove(&mut self, now: Now, out: &mut Vec<Action>) {
        self.halt(
            "the job was removed before the fire could start",
            false,
            now,
            out,
        );
    }

    /// Stops taking fires. A fire claimed ahead still starts at its instant when `keep_held` (a
    /// shutdown waits for it as for a run; docs/design/standby.md); otherwise its claim is given
    /// back and the fire reported.
    fn halt(&mut self, why: &str, keep_held: bool, now: Now, out: &mut Vec<Action>) {
        if self.stopping {
            return;
        }
        let before = out.len();
        self.take_fires(now, true, out);
        // The newest fire whose drop this stop asks the guard about (taken late, or whose own
        // claim got no answer): it moves the job's fate point, so the open fires before it are
        // asked about too, or the next start's walk would take them as decided
        // (docs/guide/downtime.md).
        let asked_through = out[before..]
            .iter()
            .filter_map(|a| match a {
                Action::AskReport { fire, .. } => Some(*fire),
                _ => None,
            })
            .chain(self.uncertain())
            .chain(self.extra().and_then(|e| e.missed_through))
            .max();
        // Fires this process only stands by for and never asked the guard about: the process
        // that claims first (named first, or that got the last fire) claims them, and reports
        // them if it cannot run them. A fire this process claimed before (a retry is pending, or
        // its claim got no answer) is its own to report.
        let asked = self.retry_at().is_some();
        let standing_by: Vec<DateTime<Utc>> = self
            .due()
            .iter()
            .filter(|f| {
                !asked
                    && self.uncertain() != Some(f.t)
                    && self.start_of(f) > now.wall.max(f.start())
            })
            .map(|f| f.t)
            .collect();
        // Drop reports held back for the walk are not asked any more. Nothing was recorded, so
        // the processes that go on decide those fires, or the next start's walk reports them.
        if let Some(extra) = self.extra_if_mut() {
            let deferred = extra.take_deferred_reports();
            let recorded_past = extra.missed_through;
            for (fire, kind) in deferred {
                if recorded_past.is_some_and(|m| fire < m) {
                    // Missed fires this process asked the guard to record lie past it: they
                    // move the fate point past it, and the next start's walk would not see it.
                    let kind = kind.with_reason_note(&format!(
                        "told on this process's own word: {why} before the guard could be asked"
                    ));
                    self.emit_drop(fire, kind, true, now, out);
                    continue;
                }
                let kind = match kind {
                    EventKind::Misfired { reason, count, first } => EventKind::Misfired {
                        reason: format!("{reason}; {why} before the guard could be asked, so the processes that go on claim it, or the next start reports it"),
                        count,
                        first,
                    },
                    kind => kind,
                };
                self.emit_drop(fire, kind, false, now, out);
            }
        }
        // Fires slept through whose report waits for an earlier one: not recorded any more.
        let held = self
            .extra_if_mut()
            .map(|e| std::mem::take(&mut e.held_missed))
            .unwrap_or_default();
        for m in held.iter().filter(|m| m.cause == MissedCause::TimerWoke) {
            let kind = self.slept_through(m.first, m.last, m.count, m.walked_all, now);
            self.tell_slept_through_at_stop(m.last, kind, now, out);
        }
        self.stopping = true;
        self.keep_held = keep_held;
        self.next_fire = None;
        self.front_waits = false;
        self.if_trouble(|t| t.retry_at = None);
        self.end_all_waiting(now, out);
        if !keep_held {
            self.give_back_held(why, now, out);
        }
        let manual = self
            .if_controls()
            .map(|c| std::mem::take(&mut c.manual))
            .unwrap_or_default();
        for fire in self.take_due().into_iter().chain(manual) {
            let uncertain = fire.manual().is_none()
                && asked_through.is_some_and(|u| fire.t <= u)
                && self.shared();
            if fire.manual().is_none() && now.wall < fire.t && !uncertain {
                // Taken ahead of its instant, and no claim of it took effect: the processes that
                // go on claim and report it.
                continue;
            }
            self.give_up(fire, out);
            if uncertain {
                // A claim of it may have taken effect unseen: this process gave it back, and the
                // guard says who reports it.
                let kind = EventKind::misfired(why.to_owned(), fire.t);
                self.report_drop(fire.t, kind, now, out);
                continue;
            }
            // A shared guard's other processes have the same fire (and manual run) waiting: they
            // claim it, and report it if it cannot run; when none goes on, the next start walks
            // it from the store's fate point (docs/guide/downtime.md). Nothing was recorded
            // here, so the guard still lets them run it.
            let left = self.shared();
            let first_report = !left && !standing_by.contains(&fire.t);
            let reason = if left {
                format!("{why}; the processes that go on claim it, or the next start reports it")
            } else if first_report {
                why.to_owned()
            } else {
                format!("{why}, while this process stood by for it (the process that claims the job first claims it)")
            };
            self.emit_drop_of(
                &fire,
                EventKind::misfired(reason, fire.t),
                first_report,
                now,
                out,
            );
        }
        self.land();
    }

    /// A fire claimed ahead and not started gives its claim back and is reported: the claim is
    /// this process's, so nobody else runs or reports the fire (docs/design/standby.md).
    fn give_back_held(&mut self, why: &str, now: Now, out: &mut Vec<Action>) {
        if let Some(held) = self.take_held() {
            out.push(Action::Abandon(held.fire));
            let kind = EventKind::misfired(why.to_owned(), held.fire.t);
            self.emit_drop_of(&held.fire, kind, true, now, out);
        }
    }

    /// The shutdown deadline passed: running jobs are cancelled, and a fire claimed ahead that
    /// has not started yet is given up.
    pub(crate) fn cancel_runs(&mut self, now: Now, out: &mut Vec<Action>) {
        self.give_back_held(
            "the scheduler's shutdown deadline passed before the fire's instant",
            now,
            out,
        );
        for run in self.runs_mut().iter_mut().filter(|r| r.backoff.is_none()) {
            run.cancel_reason.get_or_insert(CancelReason::Shutdown);
            out.push(Action::Cancel(run.id));
        }
    }

    /// The fires of runs still going on (for the log line of runs abandoned at shutdown).
    pub(crate) fn running_fires(&self) -> impl Iterator<Item = DateTime<Utc>> + '_ {
        self.runs().iter().map(|r| r.fire)
    }

    /// Reports a dropped fire. A shared guard is asked first whether another process already
    /// reported it, so that it is reported at warn level once.
    fn report_drop(
        &mut self,
        fire: DateTime<Utc>,
        kind: EventKind,
        now: Now,
        out: &mut Vec<Action>,
    ) {
        if !self.shared() {
            self.emit_drop(fire, kind, true, now, out);
        } else if self.walking() && self.extra().is_some_and(|e| e.point_failing) {
            // The store does not answer: the walk waits, and the drop is told now, on this
            // process's word, rather than after an outage of unknown length.
            let error = self
                .last_guard_error()
                .map(|e| e.to_string())
                .unwrap_or_default();
            let kind = kind.with_reason_note(&format!(
                "told on this process's own word: the guard could not be asked ({error})"
            ));
            self.emit_drop(fire, kind, true, now, out);
        } else if self.walking() && !self.before_missed_in_flight(fire) {
            // While the walk after downtime is not done, a report recorded in the guard would
            // move the fate point past the fires it walks (see `walking`): it is asked after.
            let extra = self.extra_mut();
            extra.pending_reports += 1;
            extra.deferred_reports.push((fire, kind));
        } else {
            self.extra_mut().pending_reports += 1;
            out.push(Action::AskReport { fire, kind });
        }
    }

    /// Whether `fire` comes before the missed fires being recorded, while the fate point is
    /// known: its report cannot move the point past them, and waiting would leave it to a stop
    /// that the record moves the point past.
    fn before_missed_in_flight(&self, fire: DateTime<Utc>) -> bool {
        self.extra().is_some_and(|e| {
            let first = e
                .missed_from
                .into_iter()
                .chain(e.held_missed.iter().map(|m| m.first))
                .min();
            e.catching_up.is_none() && first.is_some_and(|first| fire < first)
        })
    }

    /// Asks the guard about the drop reports held back during the walk, once it is done. A fire
    /// inside `covered` (after the fate point, up to the last missed fire, that this process's
    /// report of missed fires just recorded) is this process's to report: the record decided it.
    pub(super) fn ask_deferred_reports(
        &mut self,
        covered: Option<(Option<DateTime<Utc>>, DateTime<Utc>)>,
        now: Now,
        out: &mut Vec<Action>,
    ) {
        // Asked once no report of missed fires is in flight; those after a report held back
        // next are held again by `report_drop`.
        let Some(extra) = self
            .extra_if_mut()
            .filter(|e| e.catching_up.is_none() && e.reporting_missed == 0)
        else {
            return;
        };
        let deferred = extra.take_deferred_reports();
        for (fire, kind) in deferred {
            let ours =
                covered.is_some_and(|(point, last)| point.is_none_or(|p| p < fire) && fire <= last);
            if ours {
                self.emit_drop(fire, kind, true, now, out);
            } else {
                self.report_drop(fire, kind, now, out);
            }
        }
    }

    /// [`report_drop`](Self::report_drop) of a fire that may be a manual run: a manual run's
    /// drop is reported by the process that saw it, without asking the guard.
    fn report_drop_of(&mut self, fire: &Fire, kind: EventKind, now: Now, out: &mut Vec<Action>) {
        match fire.manual() {
            None => self.report_drop(fire.t, kind, now, out),
            Some(_) => self.emit_drop_of(fire, kind, true, now, out),
        }
    }

    /// [`emit_drop`](Self::emit_drop) of a fire that may be a manual run.
    fn emit_drop_of(
        &mut self,
        fire: &Fire,
        kind: EventKind,
        first_report: bool,
        now: Now,
        out: &mut Vec<Action>,
    ) {
        out.push(Action::Emit(
            Occurrence::drop(fire.t, now.wall, kind, first_report).of_manual(fire.manual()),
        ));
    }

    fn emit_drop(
        &mut self,
        fire: DateTime<Utc>,
        kind: EventKind,
        first_report: bool,
        now: Now,
        out: &mut Vec<Action>,
    ) {
        out.push(Action::Emit(Occurrence::drop(
            fire,
            now.wall,
            kind,
            first_report,
        )));
    }
}
