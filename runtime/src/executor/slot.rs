//! One job inside its shard: its [`JobModel`] and what carries out the model's actions — the
//! guard, the body, the cancel signals of its runs, its status and metrics. No rule lives here.

use smol_str::SmolStr;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::downtime;
use super::errands::{self, Errands};
use super::msg::{JobControl, Msg, Report};
use super::outage::{self, Outage, Say, SUMMARY_EVERY};
use super::run::{self, Claimed, Hold, INLINE_POLL_LIMIT};
use super::Shared;
use crate::cancel::RunCancel;
use crate::clock::after;
use crate::context::JobContext;
use crate::events::EventKind;
use crate::events::Occurrence;
use crate::fire::fmt_time;
use crate::guard::{Claim, DropReport, Guard, GuardError};
use crate::history::{HistoryEntry, Outcome};
use crate::job::Body;
use crate::job::Job;
use crate::metrics::{ClaimSeries, JobMetrics};
use crate::model::limits::Limits;
use crate::model::spread::Owner;
use crate::model::{
    Action, Answer, JobModel, Now, Reported, RunEnd, RunId, Settings, SettingsPool, Spec,
    ABANDON_ATTEMPTS,
};
use crate::status::{JobStatus, StatusRecord};

/// How far ahead of a guard's clock a refused fire shows that this host's clock is wrong: the
/// guards take fires up to 1 s ahead.
const CLOCK_WRONG_BEYOND: Duration = Duration::from_secs(1);

/// The lease of the job's fire claimed ahead, if it holds one; a shard without any (every
/// `local` job's start) does not hash.
fn take_held(cx: &Cx<'_>) -> Option<Claimed> {
    let mut held = cx.held.borrow_mut();
    if held.is_empty() {
        return None;
    }
    held.remove(&cx.idx)
}

/// What a job's handlers need of their shard.
pub(super) struct Cx<'a> {
    /// The job's index in its shard.
    pub(super) idx: u32,
    pub(super) shared: &'a Shared,
    pub(super) tx: &'a mpsc::UnboundedSender<Msg>,
    /// Runs started while the shard holds its lock; the shard launches them once it let go, so
    /// that no job code runs under the lock (a job may read the monitor).
    pub(super) launches: &'a RefCell<Vec<Launch>>,
    /// The lease of a claim just answered, until the job's model starts its run, gives it up or
    /// holds it (it decides at once, in the same call).
    pub(super) lease: &'a RefCell<Option<Claimed>>,
    /// The leases of fires claimed ahead of their start, by job, until the run starts or the
    /// claim is given up.
    pub(super) held: &'a RefCell<HashMap<u32, Claimed>>,
    /// The shard's runs going on as tasks of their own.
    pub(super) going: &'a RefCell<GoingOn>,
    /// Events for the hooks, handed over by the shard once it is idle (or holds many).
    pub(super) for_hooks: &'a RefCell<Vec<crate::events::Event>>,
    /// Claims and lease releases, sent by the shard at the end of its step.
    pub(super) errands: &'a RefCell<Errands>,
}

impl Cx<'_> {
    pub(super) fn now(&self) -> Now {
        self.shared.now()
    }
}

/// A started run, counted as running by the model, waiting for its first poll. It joins its
/// job's runs going on only if it does not finish there (see [`JobSlot::polled`]).
pub(super) struct Launch {
    pub(super) idx: u32,
    pub(super) id: RunId,
    pub(super) start: run::Start,
    /// When it was started: its first poll is measured from here.
    pub(super) claimed: Instant,
    /// For a job with `retries`: where the run learns the number of its next attempt.
    pub(super) next_attempt: Option<mpsc::UnboundedSender<u32>>,
}

/// A run after its first poll, back to its job: how long the poll took (`None`: it was not
/// polled on the shard), and either how it ended, or the run going on.
pub(super) struct Polled {
    pub(super) idx: u32,
    pub(super) id: RunId,
    pub(super) first_poll: Option<Duration>,
    pub(super) outcome: AfterFirstPoll,
}

/// What became of a run at its first poll.
pub(super) enum AfterFirstPoll {
    /// It ended, after running this long, at this instant.
    Ended(RunEnd, Duration, Instant),
    /// It goes on as a task of its own.
    GoesOn {
        cancel: RunCancel,
        started: Instant,
        next_attempt: Option<mpsc::UnboundedSender<u32>>,
    },
}

/// The runs going on as tasks of their own, by job: a job holds nothing for them, and a run that
/// ends at its first poll never gets here (see [`JobSlot::polled`]).
#[derive(Default)]
pub(super) struct GoingOn(HashMap<u32, Vec<Going>>);

impl GoingOn {
    fn find_mut(&mut self, job: u32, id: RunId) -> Option<&mut Going> {
        self.0.get_mut(&job)?.iter_mut().find(|r| r.id == id)
    }

    /// Adds a run of `job`; returns how many of its runs go on.
    fn add(&mut self, job: u32, run: Going) -> usize {
        let runs = self.0.entry(job).or_default();
        runs.push(run);
        runs.len()
    }

    /// Takes run `id` of `job` out; returns it and how many of the job's runs still go on.
    fn remove(&mut self, job: u32, id: RunId) -> Option<(Going, usize)> {
        let runs = self.0.get_mut(&job)?;
        let pos = runs.iter().position(|r| r.id == id)?;
        let run = runs.swap_remove(pos);
        let left = runs.len();
        if left == 0 {
            self.0.remove(&job);
        }
        Some((run, left))
    }
}

/// A run going on: its cancel signal, when its current attempt started, and (for a job with
/// `retries`) where to send the number of its next attempt.
pub(super) struct Going {
    id: RunId,
    cancel: RunCancel,
    started: Instant,
    next_attempt: Option<mpsc::UnboundedSender<u32>>,
}

/// When a job's earliest wake-up in its shard's queue is, in eight bytes (an `Option<Instant>`
/// takes sixteen in every job): nanoseconds from the scheduler's origin, plus one; 0 for none.
/// Instants before the origin are all the origin: such a wake-up is due at once either way.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Armed(u64);

impl Armed {
    pub(super) const NONE: Armed = Armed(0);

    pub(super) fn at(shared: &Shared, at: Instant) -> Armed {
        let ns = u64::try_from(shared.mono(at).as_nanos()).unwrap_or(u64::MAX);
        Armed(ns.saturating_add(1))
    }
}

/// What the health check asks of a job's guard.
pub(crate) enum GuardView {
    /// The in-process model's last started fire, read at once.
    Local(Option<DateTime<Utc>>),
    /// A shared guard, to be asked.
    Shared(Arc<dyn Guard>),
}

/// A first poll this long is blocking code, and is logged at warn level (docs/design/job-model.md,
/// on shards).
const BLOCKING_POLL: std::time::Duration = std::time::Duration::from_millis(10);

/// First polls in a row within [`INLINE_POLL_LIMIT`] on tasks of their own after which a job's
/// runs start on its shard again: the slow polls that moved it were the machine's, not its code's.
const QUICK_POLLS_TO_RETURN: u8 = 8;

/// A job's shared guard, with the series of its claims.
struct SharedGuard {
    guard: Arc<dyn Guard>,
    series: ClaimSeries,
    /// The outage of the guard this job is in, if its last claim failed.
    outage: Option<Box<Outage>>,
    /// Since when the guard refuses this host's claims as lying ahead of its clock, counted like
    /// an outage so that a wrong clock is said once, then summarised (not once per claim).
    clock_ahead: Option<Box<Outage>>,
}

/// One job and what carries out its model's actions.
pub(crate) struct JobSlot {
    model: JobModel,
    body: Body,
    /// Its shared guard and the series its claims update; `None` for a job that only its model
    /// guards (eight bytes either way).
    shared: Option<Box<SharedGuard>>,
    metrics: JobMetrics,
    status: StatusRecord,
    /// The earliest wake-up of this job in its shard's queue.
    pub(super) armed: Armed,
    /// Runs start on a task of their own, not with a first poll on the shard (set once two first
    /// polls in a row took longer than [`INLINE_POLL_LIMIT`]).
    own_task: bool,
    /// The last first poll on the shard took longer than [`INLINE_POLL_LIMIT`]: one more moves
    /// the job's runs to tasks of their own. One alone may be the thread taken off the CPU in
    /// the middle of a poll, which says nothing of the job's code.
    slow_first_poll: bool,
    /// First polls in a row within [`INLINE_POLL_LIMIT`] of the job's runs on tasks of their own:
    /// at [`QUICK_POLLS_TO_RETURN`], its runs start on the shard again.
    quick_on_own_task: u8,
    /// The guard records run ends and reported drops in its history.
    history: bool,
    /// Removed while the scheduler runs: it no longer fires or shows, and its name is free.
    pub(crate) removed: bool,
}

impl JobSlot {
    /// A job with a shared guard, or only the model's in-process exclusion when `guard` is `None`;
    /// its settings are shared with the jobs of `pool` that have the same.
    pub(crate) fn new(
        job: Job,
        body: Body,
        guard: Option<Arc<dyn Guard>>,
        pool: &mut SettingsPool,
    ) -> Self {
        // A shared guard's series register with its handles below.
        let metrics = JobMetrics::new(&job.name, guard.is_none());
        // A claim ahead leaves at least three quarters of the lease for the run's start.
        let claim_ahead = match &guard {
            Some(guard) if guard.claims_ahead() => job.claim_ahead.min(job.lease_or_default() / 4),
            _ => Duration::ZERO,
        };
        let shared = guard.map(|guard| {
            Box::new(SharedGuard {
                guard,
                series: ClaimSeries::new(&job.name, &job.lock),
                outage: None,
                clock_ahead: None,
            })
        });
        // The guard keeps a history when built to (`history`), or always (`redis`, `file`).
        let history = shared.as_ref().is_some_and(|s| s.guard.history().is_some());
        let backoff = job.backoff_or_default();
        let standby = job.standby_or_default();
        let settings = Settings {
            schedule: job.schedule,
            misfire_grace: job.misfire_grace,
            max_instances: job.max_instances,
            lock: job.lock,
            overlap: job.overlap,
            coalesce: job.coalesce,
            enabled: job.enabled,
            limits: Limits {
                timeout: job.timeout,
                retries: job.retries,
                backoff,
                jitter: job.jitter,
            },
            standby,
            claim_ahead,
            overrides: job.overrides,
        };
        let spec = Spec::pooled(job.name, settings, pool);
        JobSlot {
            model: JobModel::new(spec),
            body,
            shared,
            metrics,
            status: StatusRecord::default(),
            armed: Armed::NONE,
            own_task: false,
            slow_first_poll: false,
            quick_on_own_task: 0,
            history,
            removed: false,
        }
    }

    pub(crate) fn name(&self) -> &SmolStr {
        &self.model.spec().name
    }

    fn shared_guard(&self) -> Option<Arc<dyn Guard>> {
        self.shared.as_ref().map(|s| Arc::clone(&s.guard))
    }

    pub(crate) fn model(&self) -> &JobModel {
        &self.model
    }

    pub(crate) fn guard(&self) -> GuardView {
        match &self.shared {
            None => GuardView::Local(self.model.last_started()),
            Some(shared) => GuardView::Shared(Arc::clone(&shared.guard)),
        }
    }

    pub(crate) fn running(&self) -> usize {
        self.model.running()
    }

    pub(crate) fn snapshot(&self, instance: &Arc<str>) -> JobStatus {
        self.status.snapshot(
            self.model.spec(),
            self.model.next_fire_shown(),
            instance,
            self.running(),
            self.model.paused(),
        )
    }

    /// Starts following the schedule from `now`; a job with a shared guard reads the store's fate
    /// point to catch up on the fires before `now` that no process saw (docs/guide/downtime.md).
    pub(super) fn schedule_from(
        &mut self,
        cx: &Cx<'_>,
        now: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        let next = self.model.schedule_from(now);
        self.metrics.next_fire(next);
        let local = cx
            .shared
            .state_dir
            .as_ref()
            .filter(|_| self.shared.is_none());
        if (self.shared.is_some() || local.is_some()) && self.model.await_fate_point(now) {
            if let Some(state_dir) = local {
                let point = state_dir.point(self.name()).unwrap_or_else(|e| {
                    tracing::warn!(job = %self.name(), error = %e, "cannot read the job's fate point from the state dir; the fires it missed while the process was down are not caught up or reported");
                    None
                });
                let _ = cx.tx.send(Msg {
                    job: cx.idx,
                    report: Report::FatePoint(point),
                });
            } else {
                self.ask_fate_point(cx);
            }
        }
        next
    }

    /// Reads the shared guard's fate point of the job for the walk the model awaits.
    fn ask_fate_point(&self, cx: &Cx<'_>) {
        let Some(guard) = self.shared_guard() else {
            return;
        };
        let (tx, job, stop) = (cx.tx.clone(), cx.idx, cx.shared.stop.clone());
        cx.shared.tasks.spawn(async move {
            let failed = |error, kind| {
                let report = Report::FatePointFailed { error, kind };
                let _ = tx.send(Msg { job, report });
            };
            tokio::select! {
                biased;
                () = stop.cancelled() => {}
                point = downtime::read_fate_point(&*guard, failed) => {
                    let _ = tx.send(Msg { job, report: Report::FatePoint(point) });
                }
            }
        });
    }

    /// Who claims the job's fires first, and who owns its partition, as the stores last said
    /// (docs/design/standby.md, docs/design/ownership.md).
    fn hear_turn(&mut self, cx: &Cx<'_>) {
        if self.shared.is_none() {
            return;
        }
        let kind = self.model.spec().lock.as_str();
        let presence = &cx.shared.presence;
        self.model
            .set_first_here(presence.first_here(kind, self.name()));
        if presence.owning() {
            let (owner, renewed) = self.owner(cx);
            self.model.set_owner(owner);
            if let Some(renewed) = renewed {
                self.model.owner_alive_at(renewed);
            }
        }
    }

    /// Who owns the job's partition now, as the store last said, and when another owner last
    /// renewed it (see [`Presence::owner_of`](super::Presence::owner_of)).
    fn owner(&self, cx: &Cx<'_>) -> (Owner, Option<DateTime<Utc>>) {
        match &self.shared {
            Some(_) => cx.shared.presence.owner_of(
                self.model.spec().lock.as_str(),
                self.name(),
                Instant::now(),
                self.model.next_fire(),
            ),
            None => (Owner::Unknown, None),
        }
    }

    /// Takes every fire due now and starts what may start; returns the next fire instant.
    pub(super) fn fire(
        &mut self,
        cx: &Cx<'_>,
        now: Now,
        out: &mut Vec<Action>,
    ) -> Option<DateTime<Utc>> {
        self.hear_turn(cx);
        let next = self.model.on_timer(now, out);
        self.metrics.next_fire(next);
        self.perform(cx, now, out);
        next
    }

    /// When this job next needs its shard without a fire or a message.
    pub(super) fn wake_at(&self, shared: &Shared) -> Option<Instant> {
        self.model.next_wake().map(|t| shared.clock.deadline_for(t))
    }

    /// A wake-up from [`wake_at`](JobSlot::wake_at) came due.
    pub(super) fn on_wake(&mut self, cx: &Cx<'_>, out: &mut Vec<Action>) {
        let now = cx.now();
        self.hear_turn(cx);
        self.model.on_wake(now, out);
        self.perform(cx, now, out);
    }

    pub(super) fn busy(&self) -> bool {
        self.model.busy()
    }

    /// A report from a claim, a run or a drop of this job.
    pub(super) fn on_report(&mut self, cx: &Cx<'_>, report: Report, out: &mut Vec<Action>) {
        let now = cx.now();
        match report {
            Report::Claimed {
                result,
                latency,
                sent,
            } => {
                if let Some(shared) = &self.shared {
                    shared.series.latency.record(latency.as_secs_f64());
                }
                let answer = self.answer(cx, cx.shared.instant(now.mono), result, sent);
                self.model.on_claimed(answer, now, out);
            }
            Report::Reported {
                fire,
                kind,
                reported,
            } => self.model.on_reported(fire, kind, reported, now, out),
            Report::FatePoint(point) => {
                self.guard_answered(cx.shared.instant(now.mono));
                self.model.on_fate_point(point, now, out)
            }
            Report::FatePointFailed { error, kind } => {
                self.guard_failed(cx.shared.instant(now.mono), &error, kind);
                self.model.on_fate_point_failed(error, now, out);
            }
            Report::MissedReported { missed, before } => {
                self.model.on_missed_reported(missed, before, now, out)
            }
            Report::Finished {
                id,
                end,
                first_poll,
            } => {
                if let Some(took) = first_poll {
                    self.polled_on_own_task(took);
                }
                // A failed attempt of a job with retries waits for the model's word.
                let started = if self.model.spec().limits.retries > 0 && end.may_retry() {
                    self.attempt_started(cx, id)
                } else {
                    self.forget_run(cx, id)
                };
                let duration = started.map_or(Duration::ZERO, |started| {
                    cx.shared.instant(now.mono) - started
                });
                self.model.on_run_ended(id, end, duration, now, out);
            }
            Report::Verdict { id, verdict } => self.model.on_verdict(id, verdict, now, out),
            Report::Control(control, done) => {
                match control {
                    JobControl::SetPaused(pause) => self.model.set_paused(pause, now, out),
                    JobControl::Trigger(run) => self.model.on_trigger(run, now, out),
                    JobControl::Remove => {
                        self.removed = true;
                        self.model.remove(now, out);
                    }
                    // Handled by the shard, which files the job under its next fire.
                    JobControl::Schedule => {}
                    JobControl::OwnerChanged => {
                        self.hear_turn(cx);
                        let (owner, _) = self.owner(cx);
                        self.model.on_owner_changed(owner, now, out);
                    }
                }
                if let Some(done) = done {
                    let _ = done.send(());
                }
            }
        }
        self.perform(cx, now, out);
        if let Some(unused) = cx.lease.borrow_mut().take() {
            // The model always starts or gives up an acquired claim; should it not, the lease
            // must still go back.
            cx.errands
                .borrow_mut()
                .release(unused.lease, self.name().clone());
        }
    }

    /// A guard's answer for the model; an acquired lease waits in the slot for the model's word.
    /// `sent` is the monotonic instant and the [`BootClock`](crate::clock::BootClock) reading
    /// taken as the claim went out.
    fn answer(
        &mut self,
        cx: &Cx<'_>,
        now: Instant,
        result: Result<Claim, GuardError>,
        sent: Option<(Instant, Duration)>,
    ) -> Answer {
        if result.is_ok() {
            self.guard_answered(now);
        }
        let clock_fine = matches!(&result, Ok(claim) if !matches!(claim, Claim::TooEarly { ahead } if *ahead > CLOCK_WRONG_BEYOND));
        if clock_fine {
            if let Some(shared) = self.shared.as_deref_mut() {
                shared.clock_ahead = None;
            }
        }
        let job = &self.model.spec().name;
        match result {
            Ok(Claim::Acquired(lease)) => {
                let token = lease.fencing_token();
                let expiry = lease.expiry();
                let boot_sent = expiry.zip(sent).map(|((_, lease_sent), (mono, boot))| {
                    // The guard's own send instant, on the boot clock: its reading before the
                    // claim went out, moved by the monotonic time between the two.
                    match lease_sent.checked_duration_since(mono) {
                        Some(later) => boot + later,
                        None => boot.saturating_sub(mono - lease_sent),
                    }
                });
                let deadline = expiry.map(|(length, lease_sent)| {
                    let suspended_past = boot_sent.is_some_and(|b| {
                        cx.shared
                            .boot
                            .now()
                            .is_some_and(|now| now >= b.saturating_add(length))
                    });
                    // The host was suspended while the claim was out, past the lease: the
                    // server expired it, so the model takes the answer as come too late.
                    if suspended_past {
                        Duration::ZERO
                    } else {
                        cx.shared.mono(lease_sent + length)
                    }
                });
                let claimed = Claimed { lease, boot_sent };
                if let Some(stale) = cx.lease.borrow_mut().replace(claimed) {
                    cx.errands.borrow_mut().release(stale.lease, job.clone());
                }
                Answer::Acquired { token, deadline }
            }
            Ok(Claim::AlreadyRan) => Answer::AlreadyRan,
            Ok(Claim::ClaimedByAnother) => Answer::ClaimedByAnother,
            Ok(Claim::Superseded) => Answer::Superseded,
            Ok(Claim::DroppedByAnother) => Answer::DroppedByAnother,
            Ok(Claim::Busy { first_report }) => Answer::Busy { first_report },
            Ok(Claim::Lapsed) => Answer::Lapsed,
            Ok(Claim::TooLate { late }) => Answer::TooLate(late),
            Ok(Claim::Paused {
                pause,
                first_report,
            }) => Answer::Paused {
                pause,
                first_report,
            },
            // Within a second, the guard only left a busy or paused fire for the claim at its
            // instant (docs/design/standby.md); beyond, this host's clock is wrong.
            Ok(Claim::TooEarly { ahead }) if ahead <= CLOCK_WRONG_BEYOND => {
                tracing::debug!(job = %job, ahead_ms = u64::try_from(ahead.as_millis()).unwrap_or(u64::MAX), "the guard left a fire ahead of its clock for the claim at the fire's instant");
                Answer::TooEarly(ahead)
            }
            Ok(Claim::TooEarly { ahead }) => {
                let ahead_ms = u64::try_from(ahead.as_millis()).unwrap_or(u64::MAX);
                let said = match self.shared.as_deref_mut() {
                    Some(shared) => outage::failed(&mut shared.clock_ahead, now),
                    None => Say::First,
                };
                match said {
                    Say::First => {
                        tracing::error!(job = %job, ahead_ms, "the guard refused a claim: the fire lies ahead of the guard's clock, so this host's clock is ahead; fix the clock (NTP). Retrying until the misfire grace runs out (said again once per {SUMMARY_EVERY:?} while it lasts)")
                    }
                    Say::StillFailing {
                        failures,
                        for_how_long,
                    } => {
                        tracing::error!(job = %job, ahead_ms, refused_claims = failures, for_s = for_how_long.as_secs(), "the guard still refuses claims as lying ahead of its clock: this host's clock is ahead; fix the clock (NTP)")
                    }
                    Say::Nothing => {
                        tracing::debug!(job = %job, ahead_ms, "the guard refused a claim as lying ahead of its clock")
                    }
                }
                Answer::TooEarly(ahead)
            }
            Err(e) => {
                let error = crate::error::Chain(&e).to_string();
                self.guard_failed(now, &error, e.kind().as_str());
                Answer::Failed(error)
            }
        }
    }

    /// Counts and logs a request the guard did not answer: the first of an outage at warn
    /// level, then a summary now and then.
    fn guard_failed(&mut self, now: Instant, error: &str, kind: &'static str) {
        let job = &self.model.spec().name;
        JobMetrics::guard_error(job, kind);
        let said = match self.shared.as_deref_mut() {
            Some(shared) => outage::failed(&mut shared.outage, now),
            None => Say::First, // no claims without a shared guard
        };
        match said {
            Say::First => {
                tracing::warn!(job = %job, error = %error, "guard unavailable; retrying until the misfire grace runs out (said again once per {SUMMARY_EVERY:?} while it lasts)")
            }
            Say::StillFailing {
                failures,
                for_how_long,
            } => {
                tracing::warn!(job = %job, error = %error, failed_requests = failures, outage_s = for_how_long.as_secs(), "guard still unavailable; retrying")
            }
            Say::Nothing => {
                tracing::debug!(job = %job, error = %error, "guard unavailable; retrying")
            }
        }
    }

    /// A request the guard answered: the end of an outage is logged.
    fn guard_answered(&mut self, now: Instant) {
        let job = &self.model.spec().name;
        if let Some((failures, lasted)) = self
            .shared
            .as_deref_mut()
            .and_then(|s| outage::answered(&mut s.outage, now))
        {
            tracing::info!(job = %job, failed_requests = failures, outage_ms = u64::try_from(lasted.as_millis()).unwrap_or(u64::MAX), "guard available again");
        }
    }

    /// When the current attempt of run `id` started.
    fn attempt_started(&self, cx: &Cx<'_>, id: RunId) -> Option<Instant> {
        cx.going
            .borrow_mut()
            .find_mut(cx.idx, id)
            .map(|r| r.started)
    }

    /// Starts attempt `attempt` of run `id`, which waits between attempts.
    fn next_attempt(&mut self, cx: &Cx<'_>, now: Now, id: RunId, attempt: u32) {
        if let Some(run) = cx.going.borrow_mut().find_mut(cx.idx, id) {
            run.started = cx.shared.instant(now.mono);
            if let Some(next) = &run.next_attempt {
                // Fails only when the run's task is gone, and then its end is already reported.
                let _ = next.send(attempt);
            }
        }
    }

    /// Forgets the cancel signal of run `id` (and lets a run waiting between attempts end);
    /// returns when it started.
    fn forget_run(&mut self, cx: &Cx<'_>, id: RunId) -> Option<Instant> {
        let (run, left) = cx.going.borrow_mut().remove(cx.idx, id)?;
        JobMetrics::running(self.name(), left);
        Some(run.started)
    }

    /// A run of the job on a task of its own had its first poll there, which took `took`: after
    /// [`QUICK_POLLS_TO_RETURN`] quick ones in a row, the job's runs start on the shard again.
    /// Code that blocks stays off the shard, as its polls are as slow on a task of its own.
    fn polled_on_own_task(&mut self, took: Duration) {
        if !self.own_task {
            return;
        }
        if took > INLINE_POLL_LIMIT {
            self.quick_on_own_task = 0;
            return;
        }
        self.quick_on_own_task += 1;
        if self.quick_on_own_task >= QUICK_POLLS_TO_RETURN {
            self.own_task = false;
            self.slow_first_poll = false;
            self.quick_on_own_task = 0;
            tracing::debug!(
                job = %self.name(),
                "{QUICK_POLLS_TO_RETURN} first polls of the job in a row on tasks of their own took under 1 ms; its runs start on the scheduler's task again"
            );
        }
    }

    /// Run `id` had its first poll, which took `first_poll` on the shard (`None`: it was not
    /// polled there): a run that goes on joins the runs going on, one that ended is reported.
    pub(super) fn polled(&mut self, cx: &Cx<'_>, polled: Polled, base: Now, out: &mut Vec<Action>) {
        let Polled {
            id,
            first_poll,
            outcome,
            ..
        } = polled;
        let slow = first_poll.filter(|t| *t > INLINE_POLL_LIMIT);
        let again = std::mem::replace(&mut self.slow_first_poll, slow.is_some());
        if let Some(took) = slow.filter(|_| again) {
            if !self.own_task {
                self.own_task = true;
                self.quick_on_own_task = 0;
                // A few milliseconds are a debug build's logging, not blocking code: warn only
                // for what would delay other jobs noticeably.
                if took >= BLOCKING_POLL {
                    tracing::warn!(
                        job = %self.name(),
                        first_poll_ms = took.as_millis() as u64,
                        "the job's code before its first `.await` ran for {} ms on the scheduler's task (over 1 ms twice in a row), which delays other jobs; its runs now start on a task of their own. Move blocking work into `tokio::task::spawn_blocking` or make the job a plain `fn`",
                        took.as_millis()
                    );
                } else {
                    tracing::debug!(
                        job = %self.name(),
                        first_poll_us = took.as_micros() as u64,
                        "two first polls of the job in a row took over 1 ms; its runs now start on a task of their own"
                    );
                }
            }
        }
        let (end, duration, at) = match outcome {
            AfterFirstPoll::GoesOn {
                cancel,
                started,
                next_attempt,
            } => {
                let going = Going {
                    id,
                    cancel,
                    started,
                    next_attempt,
                };
                let runs = cx.going.borrow_mut().add(cx.idx, going);
                JobMetrics::running(self.name(), runs);
                return;
            }
            AfterFirstPoll::Ended(end, duration, at) => (end, duration, at),
        };
        // The wall clock read at the shard's step, moved on by the monotonic time since.
        let mono = cx.shared.mono(at);
        let now = Now {
            wall: after(base.wall, mono.saturating_sub(base.mono)),
            mono,
            random: fastrand::u64(..),
        };
        self.model.on_run_ended(id, end, duration, now, out);
        self.perform(cx, now, out);
    }

    /// The scheduler stopped firing: fires still waiting will not run.
    pub(super) fn stop(&mut self, cx: &Cx<'_>, out: &mut Vec<Action>) {
        let now = cx.now();
        self.model.stop(now, out);
        self.perform(cx, now, out);
    }

    /// The shutdown deadline passed: running jobs are cancelled.
    pub(super) fn cancel_runs(&mut self, cx: &Cx<'_>, out: &mut Vec<Action>) {
        let now = cx.now();
        self.model.cancel_runs(now, out);
        self.perform(cx, now, out);
    }

    /// Runs that ignored cancellation are left behind, loudly.
    pub(super) fn abandon_runs(&self) {
        for fire in self.model.running_fires() {
            tracing::error!(job = %self.name(), fire_time = %fmt_time(fire), "a blocking run ignored cancellation at shutdown and was abandoned; check `ctx.is_cancelled()` in long blocking jobs");
        }
    }

    /// Carries out the model's actions.
    fn perform(&mut self, cx: &Cx<'_>, now: Now, actions: &mut Vec<Action>) {
        for action in actions.drain(..) {
            match action {
                Action::Emit(event) => self.emit(cx, event),
                Action::Start {
                    run,
                    fire,
                    token,
                    manual,
                } => self.start(cx, now, run, fire, token, manual),
                Action::Retry { run, attempt } => self.next_attempt(cx, now, run, attempt),
                Action::Finish(run) => {
                    self.forget_run(cx, run);
                }
                Action::Cancel(run) => {
                    if let Some(going) = cx.going.borrow_mut().find_mut(cx.idx, run) {
                        going.cancel.cancel();
                    } else if let Some(launch) = cx
                        .launches
                        .borrow()
                        .iter()
                        .find(|l| l.idx == cx.idx && l.id == run)
                    {
                        // Started in this step, not yet polled.
                        launch.start.cancel.cancel();
                    }
                }
                Action::Hold => {
                    if let Some(lease) = cx.lease.borrow_mut().take() {
                        if let Some(stale) = cx.held.borrow_mut().insert(cx.idx, lease) {
                            cx.errands
                                .borrow_mut()
                                .release(stale.lease, self.name().clone());
                        }
                    }
                }
                Action::Abandon(fire) => {
                    let lease = cx.lease.borrow_mut().take().or_else(|| take_held(cx));
                    let guard = self.shared_guard();
                    let job = self.name().clone();
                    cx.shared.tasks.spawn(async move {
                        if let Some(claimed) = lease {
                            errands::release(claimed.lease, job.clone()).await;
                        }
                        let Some(guard) = guard.filter(|_| fire.manual().is_none()) else {
                            return;
                        };
                        let fire = fire.t;
                        for attempt in 1..=ABANDON_ATTEMPTS {
                            match guard.abandon(fire).await {
                                Ok(()) => return,
                                Err(e) if attempt == ABANDON_ATTEMPTS => {
                                    tracing::warn!(job = %job, fire_time = %fmt_time(fire), error = %crate::error::Chain(&e), "could not record a claim as not started; until the next fire is claimed, the health check may count this fire as run");
                                }
                                Err(_) => tokio::time::sleep(Duration::from_secs(1)).await,
                            }
                        }
                    });
                }
                Action::Claim(fire) => {
                    if let Some(guard) = self.shared_guard() {
                        cx.errands.borrow_mut().claim(cx.idx, guard, fire);
                    }
                }
                Action::ReportMissed(missed) => {
                    let Some(guard) = self.shared_guard() else {
                        let before = match &cx.shared.state_dir {
                            Some(state_dir) => state_dir
                                .advance(self.name(), missed.last)
                                .map_err(|e| e.to_string()),
                            None => Ok(None),
                        };
                        let report = Report::MissedReported { missed, before };
                        let _ = cx.tx.send(Msg {
                            job: cx.idx,
                            report,
                        });
                        continue;
                    };
                    let (tx, job) = (cx.tx.clone(), cx.idx);
                    cx.shared.tasks.spawn(async move {
                        let before = downtime::record_missed(&*guard, missed).await;
                        let report = Report::MissedReported { missed, before };
                        let _ = tx.send(Msg { job, report });
                    });
                }
                Action::AskReport { fire, kind } => {
                    let Some(guard) = self.shared_guard() else {
                        continue;
                    };
                    let (tx, job) = (cx.tx.clone(), cx.idx);
                    cx.shared.tasks.spawn(async move {
                        let asked =
                            tokio::time::timeout(Duration::from_secs(1), guard.report_drop(fire));
                        let reported = match asked.await {
                            Ok(Ok(DropReport::ReportedElsewhere)) => Reported::ByAnother,
                            Ok(Ok(DropReport::ClaimedElsewhere)) => Reported::ClaimedElsewhere,
                            // When the guard cannot tell, reporting twice beats not reporting.
                            _ => Reported::First,
                        };
                        let report = Report::Reported {
                            fire,
                            kind,
                            reported,
                        };
                        let _ = tx.send(Msg { job, report });
                    });
                }
            }
        }
    }

    fn start(
        &mut self,
        cx: &Cx<'_>,
        now: Now,
        id: RunId,
        fire: DateTime<Utc>,
        token: u64,
        manual: Option<u64>,
    ) {
        let lease = cx.lease.borrow_mut().take().or_else(|| take_held(cx));
        let hold = match lease {
            Some(lease) => Hold::Lease(lease),
            None => {
                if manual.is_none() {
                    self.remember(cx, fire);
                }
                Hold::Local
            }
        };
        let cancel = RunCancel::default();
        let ctx = JobContext {
            job: self.name().clone(),
            fire_time: fire,
            fencing_token: token,
            manual,
            attempt: 1,
            cancel: cancel.clone(),
            states: Arc::clone(&cx.shared.states),
        };
        let now = cx.shared.instant(now.mono);
        let limits = self.model.spec().limits;
        let (tx, next_attempt) = if limits.retries > 0 {
            let (tx, rx) = mpsc::unbounded_channel();
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        let renewals = self
            .shared
            .as_ref()
            .filter(|_| matches!(hold, Hold::Lease(_)))
            .map(|s| s.series.renewals.clone());
        let start = run::Start {
            body: self.body.clone(),
            ctx,
            cancel,
            hold,
            renewals,
            inline: !self.own_task,
            timeout: limits.timeout,
            boot: cx.shared.boot.clone(),
            next_attempt,
        };
        cx.launches.borrow_mut().push(Launch {
            idx: cx.idx,
            id,
            start,
            claimed: now,
            next_attempt: tx,
        });
    }

    /// Records in the state dir, for a `local` job, that `fire` has a fate: before its run
    /// starts, so that a process started again never runs it twice (docs/guide/downtime.md).
    fn remember(&self, cx: &Cx<'_>, fire: DateTime<Utc>) {
        let Some(state_dir) = cx
            .shared
            .state_dir
            .as_ref()
            .filter(|_| self.shared.is_none())
        else {
            return;
        };
        if let Err(e) = state_dir.advance(self.name(), fire) {
            tracing::warn!(job = %self.name(), fire_time = %fmt_time(fire), error = %e, "cannot record the fire in the state dir; if the process stops within the fire's misfire grace, it may run the fire again when it starts");
        }
    }

    /// Writes the end of a run, or a drop this process reports first, to the guard's history.
    fn record_history(&self, cx: &Cx<'_>, event: &Occurrence) {
        let Some(guard) = self.shared_guard() else {
            return;
        };
        if guard.history().is_none() {
            return;
        }
        let (outcome, error) = match &event.kind {
            EventKind::Succeeded => (Outcome::Succeeded, None),
            // A failure that is retried is not the run's end.
            EventKind::Failed {
                error,
                retry_at: None,
                ..
            } => (Outcome::Failed, Some(error.clone())),
            EventKind::Cancelled { reason } => (Outcome::Cancelled, Some(reason.to_string())),
            EventKind::Skipped { reason, .. } if event.first_report => {
                (Outcome::Skipped, Some(reason.clone()))
            }
            EventKind::Misfired {
                reason,
                count,
                first,
            } if event.first_report => {
                let text = if *count > 1 {
                    format!("{reason} ({count} fires from {})", fmt_time(*first))
                } else {
                    reason.clone()
                };
                (Outcome::Misfired, Some(text))
            }
            EventKind::Coalesced { covered_by } if event.first_report => (
                Outcome::Coalesced,
                Some(format!("covered by the fire of {}", fmt_time(*covered_by))),
            ),
            _ => return,
        };
        let mut entry = HistoryEntry::new(
            &**self.name(),
            event.fire_time,
            &*cx.shared.instance,
            outcome,
        );
        entry.fencing_token = event.fencing_token;
        entry.error = error;
        entry.lateness = event.lateness;
        if let Some(duration) = event.duration {
            entry.ended = Some(event.at);
            entry.started = chrono::TimeDelta::from_std(duration)
                .ok()
                .and_then(|d| event.at.checked_sub_signed(d));
        }
        let job = self.name().clone();
        let Some(history) = guard.history() else {
            return;
        };
        let recorded = history.record(entry);
        cx.shared.tasks.spawn(async move {
            if let Err(e) = recorded.await {
                tracing::warn!(job = %job, error = %crate::error::Chain(&e), "could not write the run history");
            }
        });
    }

    /// Counts, keeps and publishes an event; it becomes an [`Event`](crate::Event) only when a
    /// hook, a subscriber or a log subscriber takes it.
    fn emit(&mut self, cx: &Cx<'_>, event: Occurrence) {
        let claims = self.shared.as_deref_mut().map(|s| &mut s.series);
        self.metrics.record(&self.model.spec().name, &event, claims);
        if self.history {
            self.record_history(cx, &event);
        }
        let reported = match &event.kind {
            EventKind::Skipped { .. } | EventKind::Misfired { .. } => event.first_report,
            EventKind::Coalesced { .. } => true,
            _ => false,
        };
        if reported && event.manual.is_none() {
            self.remember(cx, event.fire_time);
        }
        let events = &cx.shared.events;
        if events.wants(&event.kind, event.first_report) {
            let event = event.to_event(self.name(), &cx.shared.instance);
            events.emit(event, &mut cx.for_hooks.borrow_mut());
        }
        self.status.record(event);
    }
}

#[cfg(all(test, target_pointer_width = "64"))]
mod footprint {
    /// What every job holds while idle (BENCHMARKS.md: a million jobs in one process):
    /// a change that makes it bigger must say why here.
    #[test]
    fn an_idle_job_stays_small() {
        let sizes = [
            ("JobSlot", std::mem::size_of::<super::JobSlot>(), 304),
            (
                "JobModel",
                std::mem::size_of::<crate::model::JobModel>(),
                112,
            ),
            (
                "JobMetrics",
                std::mem::size_of::<crate::metrics::JobMetrics>(),
                88,
            ),
            (
                "StatusRecord",
                std::mem::size_of::<crate::status::StatusRecord>(),
                64,
            ),
            ("Fire", std::mem::size_of::<crate::fire::Fire>(), 32),
        ];
        for (what, size, most) in sizes {
            println!("{what}: {size} bytes (at most {most})");
            assert!(size <= most, "{what} grew to {size} bytes (at most {most})");
        }
    }

    /// A name of up to 23 bytes is held in the job itself: a million jobs make no million small
    /// allocations for their names.
    #[test]
    fn a_short_name_costs_no_allocation() {
        let every_second = || {
            cronguard_schedule::Schedule::every(std::time::Duration::from_secs(1))
                .expect("a valid interval")
        };
        let short = crate::job::Job::new("tenant-00001/settle", every_second());
        assert!(!short.name.is_heap_allocated());
        let long = crate::job::Job::new("x".repeat(24), every_second());
        assert!(
            long.name.is_heap_allocated(),
            "a long name is shared, not copied"
        );
    }
}
