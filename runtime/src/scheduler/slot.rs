//! One job inside its shard: the due-fire model of DESIGN §3 (slots, overlap, coalescing,
//! misfires), its claims, its runs, and what it reports.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;

use crate::cancel::RunCancel;
use chrono::{DateTime, Utc};
use futures_util::FutureExt;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::due::Due;
use super::run::{self, panic_message, release_soon, Hold, RunEnd, INLINE_POLL_LIMIT};
use super::shard::{Msg, Report};
use super::{fmt_time, human, Shared};
use crate::clock::after;
use crate::events::{CancelReason, EventKind, Occurrence};
use crate::guard::local::{LocalClaim, LocalGuard};
use crate::guard::{Claim, Guard, GuardError};
use crate::job::Body;
use crate::metrics::JobMetrics;
use crate::status::{JobStatus, StatusRecord};
use crate::watchdog::Verdict;
use crate::{Job, JobContext, Lock, Overlap, Schedule};

/// What a job's handlers need of their shard.
pub(super) struct Cx<'a> {
    /// The job's index in its shard.
    pub(super) idx: u32,
    pub(super) shared: &'a Shared,
    pub(super) tx: &'a mpsc::UnboundedSender<Msg>,
    /// Runs claimed while the shard holds its lock; the shard starts them once it let go, so
    /// that no job code runs under the lock (a job may read the monitor).
    pub(super) launches: &'a RefCell<Vec<Launch>>,
}

/// A claimed run, counted as running, waiting for its first poll.
pub(super) struct Launch {
    pub(super) idx: u32,
    pub(super) id: u32,
    pub(super) start: run::Start,
    /// When it was claimed: its first poll is measured from here.
    pub(super) claimed: Instant,
}

struct Running {
    id: u32,
    fire: DateTime<Utc>,
    token: u64,
    started: Instant,
    lateness: Duration,
    cancel: RunCancel,
    cancel_reason: Option<CancelReason>,
}

/// A job's settings, as the scheduler needs them (the guard keeps its lease).
pub(crate) struct JobSpec {
    pub(crate) name: Arc<str>,
    pub(crate) schedule: Schedule,
    pub(crate) misfire_grace: Duration,
    pub(crate) max_instances: u32,
    pub(crate) lock: Lock,
    pub(crate) overlap: Overlap,
    pub(crate) coalesce: bool,
    pub(crate) enabled: bool,
}

/// The guard of a job: the in-process one inline, a shared one behind its trait.
enum SlotGuard {
    Local(LocalGuard),
    Shared(Arc<dyn Guard>),
}

/// What the health check asks of a job's guard.
pub(crate) enum GuardView {
    /// The in-process guard's last claimed fire, read at once.
    Local(Option<DateTime<Utc>>),
    /// A shared guard, to be asked.
    Shared(Arc<dyn Guard>),
}

/// A guard's answer, whichever guard gave it.
enum Answer {
    Acquired(Hold),
    AlreadyRan,
    Busy { first_report: bool },
    Lapsed,
    TooEarly(Duration),
}

impl From<Claim> for Answer {
    fn from(claim: Claim) -> Self {
        match claim {
            Claim::Acquired(lease) => Answer::Acquired(Hold::Lease(lease)),
            Claim::AlreadyRan => Answer::AlreadyRan,
            Claim::Busy { first_report } => Answer::Busy { first_report },
            Claim::Lapsed => Answer::Lapsed,
            Claim::TooEarly { ahead } => Answer::TooEarly(ahead),
        }
    }
}

/// One job and its state.
pub(crate) struct JobSlot {
    job: JobSpec,
    body: Body,
    guard: SlotGuard,
    metrics: JobMetrics,
    status: StatusRecord,
    due: Due,
    claiming: Option<DateTime<Utc>>,
    running: Vec<Running>,
    next_run_id: u32,
    retry: Option<Instant>,
    retries: u32,
    last_guard_error: Option<String>,
    /// Dropped fires waiting for the shared guard's word on who reports them.
    pending_reports: u32,
    /// The earliest wake-up of this job in its shard's queue.
    pub(super) armed: Option<Instant>,
    /// Runs start on a task of their own, not with a first poll on the shard (set once a first
    /// poll took longer than [`INLINE_POLL_LIMIT`]).
    own_task: bool,
}

impl JobSlot {
    /// A job with a shared guard, or the in-process guard when `guard` is `None`.
    pub(super) fn new(job: Job, body: Body, guard: Option<Arc<dyn Guard>>) -> Self {
        let metrics = JobMetrics::new(&job.name, job.lock);
        let guard = match guard {
            Some(shared) => SlotGuard::Shared(shared),
            None => SlotGuard::Local(LocalGuard::new(job.max_instances)),
        };
        JobSlot {
            job: JobSpec {
                name: job.name,
                schedule: job.schedule,
                misfire_grace: job.misfire_grace,
                max_instances: job.max_instances,
                lock: job.lock,
                overlap: job.overlap,
                coalesce: job.coalesce,
                enabled: job.enabled,
            },
            body,
            guard,
            metrics,
            status: StatusRecord::default(),
            due: Due::default(),
            claiming: None,
            running: Vec::new(),
            next_run_id: 0,
            retry: None,
            retries: 0,
            last_guard_error: None,
            pending_reports: 0,
            armed: None,
            own_task: false,
        }
    }

    pub(crate) fn name(&self) -> &Arc<str> {
        &self.job.name
    }

    pub(crate) fn guard(&self) -> GuardView {
        match &self.guard {
            SlotGuard::Local(local) => GuardView::Local(local.last_claimed()),
            SlotGuard::Shared(shared) => GuardView::Shared(Arc::clone(shared)),
        }
    }

    pub(crate) fn misfire_grace(&self) -> Duration {
        self.job.misfire_grace
    }

    pub(crate) fn running(&self) -> usize {
        self.running.len()
    }

    pub(crate) fn status(&self) -> &StatusRecord {
        &self.status
    }

    pub(crate) fn snapshot(&self, instance: &Arc<str>) -> JobStatus {
        self.status
            .snapshot(&self.job, instance, self.running.len())
    }

    /// The first fire after `now`.
    pub(super) fn schedule_from(&mut self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.status.next_fire = self.job.schedule.next_after(now);
        self.status.next_fire
    }

    /// Takes every fire due at `now` and starts what may start; returns the next fire instant.
    pub(super) fn fire(&mut self, cx: &Cx<'_>, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let next = self.take_fires(cx, now);
        self.try_start(cx);
        next
    }

    /// Takes every fire due at `now` into the waiting fires; returns the next fire instant.
    pub(super) fn take_fires(&mut self, cx: &Cx<'_>, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let mut next = self.status.next_fire;
        while let Some(t) = next.filter(|t| *t <= now) {
            self.status.window.observe(t, now, self.job.misfire_grace);
            if self.job.enabled {
                self.on_due(cx, t, now);
            }
            next = self.job.schedule.next_after(t);
        }
        self.status.next_fire = next;
        next
    }

    /// When this job next needs its shard without a fire or a message: the misfire deadline of
    /// its oldest waiting fire, or its claim retry.
    pub(super) fn wake_at(&self, shared: &Shared) -> Option<Instant> {
        let misfire = self
            .due
            .iter()
            .map(|t| self.grace_end(t))
            .min()
            .map(|t| shared.clock.deadline_for(t));
        match (misfire, self.retry) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// A wake-up from [`wake_at`](JobSlot::wake_at) came due.
    pub(super) fn on_wake(&mut self, cx: &Cx<'_>) {
        if self.retry.is_some_and(|at| at <= Instant::now()) {
            self.retry = None;
        }
        self.drop_misfires(cx);
        self.try_start(cx);
    }

    /// Whether claims, runs or reports of this job are still outstanding.
    pub(super) fn busy(&self) -> bool {
        self.claiming.is_some() || !self.running.is_empty() || self.pending_reports > 0
    }

    /// The instant by which fire `t` must have started.
    fn grace_end(&self, t: DateTime<Utc>) -> DateTime<Utc> {
        after(t, self.job.misfire_grace)
    }

    /// Fire `t` is due at `now` (normally `now` is `t`; later after a pause).
    fn on_due(&mut self, cx: &Cx<'_>, t: DateTime<Utc>, now: DateTime<Utc>) {
        if now >= self.grace_end(t) {
            let late = (now - t).to_std().unwrap_or_default();
            self.report_drop(
                cx,
                t,
                EventKind::Misfired {
                    reason: format!(
                        "the timer woke {} after the fire time (the process was paused, suspended or overloaded), past the misfire grace of {}",
                        human(late),
                        human(self.job.misfire_grace)
                    ),
                },
            );
            return;
        }
        self.due.push_back(t);
        self.coalesce(cx);
    }

    /// With `coalesce`, only the latest waiting fire is kept.
    fn coalesce(&mut self, cx: &Cx<'_>) {
        if !self.job.coalesce {
            return;
        }
        while self.due.len() > 1 {
            let Some(old) = self.due.pop_front() else {
                break;
            };
            let covered_by = self.due.back().unwrap_or(old);
            self.emit_drop(cx, old, EventKind::Coalesced { covered_by }, true);
        }
    }

    fn drop_misfires(&mut self, cx: &Cx<'_>) {
        let now = cx.shared.clock.now();
        let grace = self.job.misfire_grace;
        if self.due.iter().all(|t| now < after(t, grace)) {
            return;
        }
        // Usually only the front is late, but a fire put back after a failed claim may not be.
        let mut late = Vec::new();
        for t in self.due.take_all() {
            if now < after(t, grace) {
                self.due.push_back(t);
            } else {
                late.push(t);
            }
        }
        for t in late {
            let reason = match &self.last_guard_error {
                Some(e) => format!(
                    "not started within the misfire grace of {}: the guard could not be asked ({e})",
                    human(grace)
                ),
                None => format!(
                    "not started within the misfire grace of {}: no instance slot became free",
                    human(grace)
                ),
            };
            self.report_drop(cx, t, EventKind::Misfired { reason });
        }
    }

    /// Reports a dropped fire. A shared guard is asked first whether another process already
    /// reported it, so that it is reported at warn level once.
    fn report_drop(&mut self, cx: &Cx<'_>, fire: DateTime<Utc>, kind: EventKind) {
        let SlotGuard::Shared(guard) = &self.guard else {
            self.emit_drop(cx, fire, kind, true);
            return;
        };
        self.pending_reports += 1;
        let guard = Arc::clone(guard);
        let (tx, job) = (cx.tx.clone(), cx.idx);
        tokio::spawn(async move {
            let asked = tokio::time::timeout(Duration::from_secs(1), guard.first_report(fire));
            // When the guard cannot tell, reporting twice beats not reporting.
            let first_report = !matches!(asked.await, Ok(Ok(false)));
            let report = Report::Dropped {
                fire,
                kind,
                first_report,
            };
            let _ = tx.send(Msg { job, report });
        });
    }

    fn try_start(&mut self, cx: &Cx<'_>) {
        loop {
            if self.claiming.is_some() {
                return;
            }
            let Some(fire) = self.due.front() else {
                return;
            };
            // A shared guard is asked even when this process holds the slot, so that it records
            // the skip once for every process.
            let shared_guard = self.job.lock != Lock::Local;
            if self.running.len() >= self.job.max_instances as usize {
                match self.job.overlap {
                    Overlap::Skip if shared_guard => {}
                    Overlap::Skip => {
                        self.due.pop_front();
                        let reason = match self.running.first() {
                            Some(r) => format!(
                                "the run of {} is still going (max_instances = {})",
                                fmt_time(r.fire),
                                self.job.max_instances
                            ),
                            None => "no instance slot is free".to_owned(),
                        };
                        self.emit_drop(cx, fire, EventKind::Skipped { reason }, true);
                        continue;
                    }
                    Overlap::Queue => return,
                    Overlap::Replace => {
                        if self.running.iter().all(|r| r.cancel_reason.is_none()) {
                            if let Some(oldest) = self.running.iter_mut().min_by_key(|r| r.fire) {
                                oldest.cancel_reason = Some(CancelReason::Replaced);
                                oldest.cancel.cancel();
                            }
                        }
                        return;
                    }
                }
            }
            if self.retry.is_some_and(|at| at > Instant::now()) {
                return;
            }
            self.due.pop_front();
            let guard = match &mut self.guard {
                // The in-process guard answers at once: no task, no message.
                SlotGuard::Local(local) => {
                    let sent = Instant::now();
                    let answer = match local.claim(fire, self.running.len()) {
                        LocalClaim::Acquired { token } => Answer::Acquired(Hold::Local { token }),
                        LocalClaim::AlreadyRan => Answer::AlreadyRan,
                        LocalClaim::Busy => Answer::Busy { first_report: true },
                    };
                    let claimed = Instant::now();
                    self.metrics
                        .claim_latency
                        .record((claimed - sent).as_secs_f64());
                    self.on_claimed(cx, fire, Ok(answer), claimed);
                    continue;
                }
                SlotGuard::Shared(shared) => Arc::clone(shared),
            };
            self.claiming = Some(fire);
            let (tx, job) = (cx.tx.clone(), cx.idx);
            tokio::spawn(async move {
                let sent = Instant::now();
                // A report must come back whatever happens, or the job would wait forever.
                let result = std::panic::AssertUnwindSafe(guard.claim(fire))
                    .catch_unwind()
                    .await
                    .unwrap_or_else(|p| {
                        Err(GuardError::Task(format!(
                            "the guard panicked: {}",
                            panic_message(&*p)
                        )))
                    });
                let report = Report::Claimed {
                    fire,
                    result,
                    latency: sent.elapsed(),
                };
                let _ = tx.send(Msg { job, report });
            });
            return;
        }
    }

    /// A report from a claim, a run or a drop of this job.
    pub(super) fn on_report(&mut self, cx: &Cx<'_>, report: Report) {
        self.apply(cx, report);
        self.try_start(cx);
    }

    fn apply(&mut self, cx: &Cx<'_>, report: Report) {
        match report {
            Report::Claimed {
                fire,
                result,
                latency,
            } => {
                self.metrics.claim_latency.record(latency.as_secs_f64());
                self.on_claimed(cx, fire, result.map(Answer::from), Instant::now())
            }
            Report::Dropped {
                fire,
                kind,
                first_report,
            } => {
                self.pending_reports = self.pending_reports.saturating_sub(1);
                self.emit_drop(cx, fire, kind, first_report)
            }
            Report::Finished { id, end } => self.on_finished(cx, id, end),
            Report::Stopped { id, verdict } => self.on_stopped(cx, id, verdict),
        }
    }

    fn on_stopped(&mut self, cx: &Cx<'_>, id: u32, verdict: Verdict) {
        let Some(run) = self.running.iter_mut().find(|r| r.id == id) else {
            return;
        };
        match verdict {
            Verdict::Lost(reason) => {
                run.cancel_reason = Some(CancelReason::LeaseLost);
                run.cancel.cancel();
                let (fire, token, lateness) = (run.fire, run.token, run.lateness);
                let event = Occurrence {
                    fire_time: fire,
                    fencing_token: Some(token),
                    at: cx.shared.clock.now(),
                    first_report: true,
                    lateness: Some(lateness),
                    duration: None,
                    kind: EventKind::LeaseLost { reason },
                };
                self.emit(cx, event);
            }
            Verdict::CancelRequested => {
                run.cancel_reason.get_or_insert(CancelReason::Replaced);
                run.cancel.cancel();
            }
        }
    }

    /// The guard answered at `claimed` for fire `fire`.
    fn on_claimed(
        &mut self,
        cx: &Cx<'_>,
        fire: DateTime<Utc>,
        result: Result<Answer, GuardError>,
        claimed: Instant,
    ) {
        self.claiming = None;
        match result {
            Ok(Answer::Acquired(hold)) => {
                self.retries = 0;
                self.last_guard_error = None;
                let now = cx.shared.clock.now();
                if now >= self.grace_end(fire) {
                    if let Hold::Lease(lease) = hold {
                        release_soon(lease, Arc::clone(&self.job.name));
                    }
                    let reason = format!(
                        "claimed only after the misfire grace of {} had passed",
                        human(self.job.misfire_grace)
                    );
                    self.report_drop(cx, fire, EventKind::Misfired { reason });
                } else {
                    self.start_run(cx, fire, hold, (now, claimed));
                }
            }
            Ok(Answer::AlreadyRan) => {
                self.retries = 0;
                self.emit_drop(cx, fire, EventKind::ClaimedElsewhere, true);
            }
            Ok(Answer::Busy { first_report }) => match self.job.overlap {
                Overlap::Skip => {
                    let reason = match self.running.first() {
                        Some(r) => format!(
                            "the run of {} in this process is still going",
                            fmt_time(r.fire)
                        ),
                        None => "another process is running this job".to_owned(),
                    };
                    self.emit_drop(cx, fire, EventKind::Skipped { reason }, first_report);
                }
                Overlap::Queue | Overlap::Replace => self.wait_and_retry(cx, fire),
            },
            Ok(Answer::Lapsed) => {
                let reason = "this process's claim took effect but its reply was lost, and its lease ran out before the claim was retried".to_owned();
                self.report_drop(cx, fire, EventKind::Misfired { reason });
            }
            Ok(Answer::TooEarly(ahead)) => {
                tracing::error!(job = %self.job.name, fire_time = %fmt_time(fire), ahead_ms = ahead.as_millis() as u64, "the guard refused a claim of a fire that lies ahead of its clock: this host's clock is ahead; retrying until the misfire grace runs out");
                self.last_guard_error = Some(format!(
                    "the fire lies {} ahead of the guard's clock (this host's clock is ahead)",
                    human(ahead)
                ));
                self.wait_and_retry(cx, fire);
            }
            Err(e) => {
                tracing::warn!(job = %self.job.name, fire_time = %fmt_time(fire), error = %e, "guard unavailable; retrying until the misfire grace runs out");
                self.last_guard_error = Some(e.to_string());
                self.wait_and_retry(cx, fire);
            }
        }
    }

    /// Keeps `fire` due and asks the guard again after a jittered, growing pause.
    fn wait_and_retry(&mut self, cx: &Cx<'_>, fire: DateTime<Utc>) {
        self.due.push_front(fire);
        self.coalesce(cx);
        let base = Duration::from_millis(50).saturating_mul(1 << self.retries.min(5));
        let jitter = Duration::from_millis(fastrand::u64(0..=base.as_millis() as u64 / 4));
        self.retry = Some(Instant::now() + base.min(Duration::from_secs(1)) + jitter);
        self.retries = self.retries.saturating_add(1);
    }

    /// Starts the run of `fire`, claimed at `now` (wall clock) and `claimed` (monotonic).
    fn start_run(
        &mut self,
        cx: &Cx<'_>,
        fire: DateTime<Utc>,
        hold: Hold,
        (now, claimed): (DateTime<Utc>, Instant),
    ) {
        let token = hold.fencing_token();
        let cancel = RunCancel::default();
        let ctx = JobContext {
            job: Arc::clone(&self.job.name),
            fire_time: fire,
            fencing_token: token,
            cancel: cancel.clone(),
        };
        let id = self.next_run_id;
        self.next_run_id = self.next_run_id.wrapping_add(1);
        let lateness = (now - fire).to_std().unwrap_or_default();
        self.running.reserve_exact(1); // most jobs never run twice at once
        self.running.push(Running {
            id,
            fire,
            token,
            started: claimed,
            lateness,
            cancel: cancel.clone(),
            cancel_reason: None,
        });
        self.metrics.running.set(self.running.len() as f64);
        let started = Occurrence {
            fire_time: fire,
            fencing_token: Some(token),
            at: now,
            first_report: true,
            lateness: Some(lateness),
            duration: None,
            kind: EventKind::Started,
        };
        self.emit(cx, started);
        let start = run::Start {
            body: self.body.clone(),
            ctx,
            cancel,
            hold,
            renewals: self.metrics.renewals.clone(),
            inline: !self.own_task,
        };
        cx.launches.borrow_mut().push(Launch {
            idx: cx.idx,
            id,
            start,
            claimed,
        });
    }

    /// Run `id` had its first poll, which took `first_poll` on the shard (`None`: it was not
    /// polled there), and ended at `ended` if it finished.
    pub(super) fn polled(
        &mut self,
        cx: &Cx<'_>,
        id: u32,
        first_poll: Option<Duration>,
        ended: Option<(RunEnd, Instant)>,
    ) {
        if let Some(took) = first_poll.filter(|t| *t > INLINE_POLL_LIMIT) {
            if !self.own_task {
                self.own_task = true;
                tracing::warn!(
                    job = %self.job.name,
                    first_poll_ms = took.as_millis() as u64,
                    "the job's code before its first `.await` ran for {} ms on the scheduler's task, which delays other jobs; its runs now start on a task of their own. Move blocking work into `tokio::task::spawn_blocking` or make the job a plain `fn`",
                    took.as_millis()
                );
            }
        }
        let Some((end, ended)) = ended else {
            return;
        };
        let Some(pos) = self.running.iter().position(|r| r.id == id) else {
            return;
        };
        let run = self.running.swap_remove(pos);
        let duration = ended.saturating_duration_since(run.started);
        self.finish(cx, run, end, (cx.shared.clock.now(), duration));
        self.try_start(cx);
    }

    fn on_finished(&mut self, cx: &Cx<'_>, id: u32, end: RunEnd) {
        let Some(pos) = self.running.iter().position(|r| r.id == id) else {
            return;
        };
        let run = self.running.swap_remove(pos);
        let duration = run.started.elapsed();
        self.finish(cx, run, end, (cx.shared.clock.now(), duration));
    }

    /// Reports the end of `run`, at `at` after running for `duration`.
    fn finish(
        &mut self,
        cx: &Cx<'_>,
        run: Running,
        end: RunEnd,
        (at, duration): (DateTime<Utc>, Duration),
    ) {
        self.metrics.running.set(self.running.len() as f64);
        let kind = match (end, run.cancel_reason) {
            (RunEnd::Cancelled, reason) | (_, reason @ Some(_)) => EventKind::Cancelled {
                reason: reason.unwrap_or(CancelReason::Shutdown),
            },
            (RunEnd::Ok, None) => EventKind::Succeeded,
            (RunEnd::Failed(error), None) => EventKind::Failed { error },
        };
        let ended = Occurrence {
            fire_time: run.fire,
            fencing_token: Some(run.token),
            at,
            first_report: true,
            lateness: Some(run.lateness),
            duration: Some(duration),
            kind,
        };
        self.emit(cx, ended);
    }

    /// The scheduler stopped firing: fires still waiting will not run.
    pub(super) fn stop_firing(&mut self, cx: &Cx<'_>) {
        self.status.next_fire = None;
        for t in self.due.take_all() {
            let reason = "the scheduler shut down before the fire could start".to_owned();
            self.emit_drop(cx, t, EventKind::Misfired { reason }, true);
        }
    }

    /// A report that arrives after the scheduler stopped firing: claims are given back.
    pub(super) fn on_report_stopping(&mut self, cx: &Cx<'_>, report: Report) {
        match report {
            Report::Claimed { fire, result, .. } => {
                self.claiming = None;
                if let Ok(Claim::Acquired(lease)) = result {
                    release_soon(lease, Arc::clone(&self.job.name));
                }
                let reason = "the scheduler shut down before the fire could start".to_owned();
                self.emit_drop(cx, fire, EventKind::Misfired { reason }, true);
            }
            other => self.apply(cx, other),
        }
    }

    /// The shutdown deadline passed: running jobs are cancelled.
    pub(super) fn cancel_runs(&mut self) {
        for run in &mut self.running {
            run.cancel_reason.get_or_insert(CancelReason::Shutdown);
            run.cancel.cancel();
        }
    }

    /// Runs that ignored cancellation are left behind, loudly.
    pub(super) fn abandon_runs(&self) {
        for run in &self.running {
            tracing::error!(job = %self.job.name, fire_time = %fmt_time(run.fire), "a blocking run ignored cancellation at shutdown and was abandoned; check `ctx.is_cancelled()` in long blocking jobs");
        }
    }

    /// Reports a dropped fire.
    fn emit_drop(&mut self, cx: &Cx<'_>, fire: DateTime<Utc>, kind: EventKind, first: bool) {
        let event = Occurrence::drop(fire, cx.shared.clock.now(), kind, first);
        self.emit(cx, event);
    }

    /// Counts, keeps and publishes an event; it becomes an [`Event`](crate::Event) only when a
    /// hook, a subscriber or a log subscriber takes it.
    fn emit(&mut self, cx: &Cx<'_>, event: Occurrence) {
        self.metrics.record(&event);
        let events = &cx.shared.events;
        if events.wants(&event.kind, event.first_report) {
            events.emit(&event.to_event(&self.job.name, &cx.shared.instance));
        }
        self.status.record(event);
    }
}
