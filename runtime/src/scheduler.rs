//! One task per job: a timer that waits for the next fire instant, and the due-fire model of
//! DESIGN §3 (slots, overlap, coalescing, misfires). The task never waits for a job or a guard:
//! claims and runs are tasks of their own that report back by message.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::FutureExt;
use tokio::sync::mpsc;
use tokio::time::{sleep_until, Instant};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::clock::after;
use crate::events::{CancelReason, Event, EventKind, EventSink};
use crate::guard::{Claim, Guard, GuardError, Lease};
use crate::job::Body;
use crate::metrics::JobMetrics;
use crate::status::StatusCell;
use crate::watchdog::{watch, Verdict};
use crate::{Clock, Job, JobContext, Overlap};

/// How long runs cancelled at the shutdown deadline get to stop before they are abandoned.
const CANCEL_GRACE: Duration = Duration::from_secs(5);

/// What every job task shares.
#[derive(Clone)]
pub(crate) struct Shared {
    pub(crate) clock: Clock,
    pub(crate) events: EventSink,
    pub(crate) instance: Arc<str>,
    /// Cancelled when the scheduler stops firing.
    pub(crate) stop: CancellationToken,
    /// Set before `stop` is cancelled: when running jobs are cancelled.
    pub(crate) deadline: Arc<OnceLock<Instant>>,
}

enum Msg {
    Claimed {
        fire: DateTime<Utc>,
        result: Result<Claim, GuardError>,
        latency: Duration,
    },
    /// A dropped fire, once the shared guard said whether this process reports it first.
    Dropped {
        fire: DateTime<Utc>,
        kind: EventKind,
        first_report: bool,
    },
    Finished {
        id: u64,
        end: RunEnd,
    },
    /// The watchdog stopped a run.
    Stopped {
        id: u64,
        verdict: Verdict,
    },
}

enum RunEnd {
    Ok,
    Failed(String),
    Cancelled,
}

struct Running {
    id: u64,
    run_key: Arc<str>,
    fire: DateTime<Utc>,
    token: u64,
    started: Instant,
    lateness: Duration,
    cancel: CancellationToken,
    cancel_reason: Option<CancelReason>,
}

pub(crate) struct JobTask {
    job: Job,
    body: Body,
    guard: Arc<dyn Guard>,
    shared: Shared,
    status: Arc<StatusCell>,
    metrics: JobMetrics,
    /// Messages are boxed: a channel allocates a block of slots up front, and an unboxed `Msg`
    /// would make that block kilobytes per job.
    tx: mpsc::UnboundedSender<Box<Msg>>,
    due: VecDeque<DateTime<Utc>>,
    claiming: Option<DateTime<Utc>>,
    running: Vec<Running>,
    next_id: u64,
    retry: Option<Instant>,
    retries: u32,
    last_guard_error: Option<String>,
    /// Dropped fires waiting for the shared guard's word on who reports them.
    pending_reports: usize,
}

/// Starts the task of one job.
pub(crate) fn spawn(
    job: Job,
    body: Body,
    guard: Arc<dyn Guard>,
    shared: Shared,
    status: Arc<StatusCell>,
) -> tokio::task::JoinHandle<()> {
    let (tx, rx) = mpsc::unbounded_channel();
    let metrics = JobMetrics::new(&job.name, job.lock);
    let task = JobTask {
        job,
        body,
        guard,
        shared,
        status,
        metrics,
        tx,
        due: VecDeque::new(),
        claiming: None,
        running: Vec::with_capacity(1),
        next_id: 0,
        retry: None,
        retries: 0,
        last_guard_error: None,
        pending_reports: 0,
    };
    tokio::spawn(task.run(rx))
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => sleep_until(d).await,
        None => std::future::pending().await,
    }
}

impl JobTask {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Box<Msg>>) {
        // One registration with the shared stop token for the task's life, and one timer that
        // is reset in place only when the next fire changes: both are per-fire costs otherwise.
        let stop = self.shared.stop.clone();
        let stopped = stop.cancelled();
        tokio::pin!(stopped);
        let far = || Instant::now() + crate::clock::MAX_TIMER_WAIT;
        let timer = sleep_until(far());
        tokio::pin!(timer);
        let mut armed_for: Option<Option<DateTime<Utc>>> = None;
        let mut next_fire = self.job.schedule.next_after(self.shared.clock.now());
        self.set_next_fire(next_fire);
        loop {
            if armed_for != Some(next_fire) {
                let d = next_fire
                    .map(|t| self.shared.clock.deadline_for(t))
                    .unwrap_or_else(far);
                timer.as_mut().reset(d);
                armed_for = Some(next_fire);
            }
            let misfire_at = self
                .due
                .iter()
                .map(|t| self.shared.clock.deadline_for(self.grace_end(*t)))
                .min();
            tokio::select! {
                biased;
                _ = &mut stopped => break,
                Some(msg) = rx.recv() => self.on_msg(*msg),
                _ = &mut timer => {
                    armed_for = None;
                    let now = self.shared.clock.now();
                    while let Some(t) = next_fire.filter(|t| *t <= now) {
                        self.status.observe_fire(t, now, self.job.misfire_grace);
                        if self.job.enabled {
                            self.on_due(t, now);
                        }
                        next_fire = self.job.schedule.next_after(t);
                    }
                    self.set_next_fire(next_fire);
                }
                _ = sleep_until_opt(misfire_at) => self.drop_misfires(),
                _ = sleep_until_opt(self.retry) => self.retry = None,
            }
            self.try_start();
        }
        self.set_next_fire(None);
        Box::pin(self.drain(rx)).await;
    }

    /// The instant by which fire `t` must have started.
    fn grace_end(&self, t: DateTime<Utc>) -> DateTime<Utc> {
        after(t, self.job.misfire_grace)
    }

    fn set_next_fire(&self, next: Option<DateTime<Utc>>) {
        self.status.update(|s| s.next_fire = next);
    }

    /// Fire `t` is due at `now` (normally `now` is `t`; later after a pause).
    fn on_due(&mut self, t: DateTime<Utc>, now: DateTime<Utc>) {
        if now >= self.grace_end(t) {
            let late = (now - t).to_std().unwrap_or_default();
            self.report_drop(
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
        self.coalesce();
    }

    /// With `coalesce`, only the latest waiting fire is kept.
    fn coalesce(&mut self) {
        if !self.job.coalesce {
            return;
        }
        while self.due.len() > 1 {
            let Some(old) = self.due.pop_front() else {
                break;
            };
            let covered_by = self.due.back().copied().unwrap_or(old);
            self.emit(old, EventKind::Coalesced { covered_by });
        }
    }

    fn drop_misfires(&mut self) {
        let now = self.shared.clock.now();
        let grace = self.job.misfire_grace;
        // Usually only the front is late, but a fire put back after a failed claim may not be.
        let (keep, late): (VecDeque<_>, VecDeque<_>) =
            self.due.drain(..).partition(|t| now < after(*t, grace));
        self.due = keep;
        for t in late {
            let reason = match &self.last_guard_error {
                Some(e) => format!(
                    "not started within the misfire grace of {}: the guard could not be asked ({e})",
                    human(self.job.misfire_grace)
                ),
                None => format!(
                    "not started within the misfire grace of {}: no instance slot became free",
                    human(self.job.misfire_grace)
                ),
            };
            self.report_drop(t, EventKind::Misfired { reason });
        }
    }

    /// Reports a dropped fire. A shared guard is asked first whether another process already
    /// reported it, so that it is reported at warn level once.
    fn report_drop(&mut self, fire: DateTime<Utc>, kind: EventKind) {
        if self.job.lock == crate::Lock::Local {
            self.emit(fire, kind);
            return;
        }
        self.pending_reports += 1;
        let guard = Arc::clone(&self.guard);
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let asked = tokio::time::timeout(Duration::from_secs(1), guard.first_report(fire));
            // When the guard cannot tell, reporting twice beats not reporting.
            let first_report = !matches!(asked.await, Ok(Ok(false)));
            let _ = tx.send(Box::new(Msg::Dropped {
                fire,
                kind,
                first_report,
            }));
        });
    }

    fn try_start(&mut self) {
        loop {
            if self.claiming.is_some() {
                return;
            }
            let Some(&fire) = self.due.front() else {
                return;
            };
            // A shared guard is asked even when this process holds the slot, so that it records
            // the skip once for every process.
            let shared_guard = self.job.lock != crate::Lock::Local;
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
                        self.emit(fire, EventKind::Skipped { reason });
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
            // An in-memory guard answers at once: no task, no message.
            let sent = Instant::now();
            if let Some(result) = self.guard.claim_now(fire) {
                self.metrics
                    .claim_latency
                    .record(sent.elapsed().as_secs_f64());
                self.on_claimed(fire, result);
                continue;
            }
            self.claiming = Some(fire);
            let guard = Arc::clone(&self.guard);
            let tx = self.tx.clone();
            tokio::spawn(async move {
                let sent = Instant::now();
                // A message must come back whatever happens, or the job would wait forever.
                let result = std::panic::AssertUnwindSafe(guard.claim(fire))
                    .catch_unwind()
                    .await
                    .unwrap_or_else(|p| {
                        Err(GuardError::Task(format!(
                            "the guard panicked: {}",
                            panic_message(&*p)
                        )))
                    });
                let latency = sent.elapsed();
                let _ = tx.send(Box::new(Msg::Claimed {
                    fire,
                    result,
                    latency,
                }));
            });
            return;
        }
    }

    fn on_msg(&mut self, msg: Msg) {
        match msg {
            Msg::Claimed {
                fire,
                result,
                latency,
            } => {
                self.metrics.claim_latency.record(latency.as_secs_f64());
                self.on_claimed(fire, result)
            }
            Msg::Dropped {
                fire,
                kind,
                first_report,
            } => {
                self.pending_reports -= 1;
                self.emit_with(fire, kind, first_report)
            }
            Msg::Finished { id, end } => self.on_finished(id, end),
            Msg::Stopped { id, verdict } => self.on_stopped(id, verdict),
        }
    }

    fn on_stopped(&mut self, id: u64, verdict: Verdict) {
        let Some(run) = self.running.iter_mut().find(|r| r.id == id) else {
            return;
        };
        match verdict {
            Verdict::Lost(reason) => {
                run.cancel_reason = Some(CancelReason::LeaseLost);
                run.cancel.cancel();
                let facts = RunFacts::of(run, None);
                self.emit_run(facts, EventKind::LeaseLost { reason });
            }
            Verdict::CancelRequested => {
                run.cancel_reason.get_or_insert(CancelReason::Replaced);
                run.cancel.cancel();
            }
        }
    }

    fn on_claimed(&mut self, fire: DateTime<Utc>, result: Result<Claim, GuardError>) {
        self.claiming = None;
        match result {
            Ok(Claim::Acquired(lease)) => {
                self.retries = 0;
                self.last_guard_error = None;
                if self.shared.clock.now() >= self.grace_end(fire) {
                    release_soon(lease, Arc::clone(&self.job.name));
                    let reason = format!(
                        "claimed only after the misfire grace of {} had passed",
                        human(self.job.misfire_grace)
                    );
                    self.report_drop(fire, EventKind::Misfired { reason });
                } else {
                    self.start_run(fire, lease);
                }
            }
            Ok(Claim::AlreadyRan) => {
                self.retries = 0;
                self.emit(fire, EventKind::ClaimedElsewhere);
            }
            Ok(Claim::Busy { first_report }) => match self.job.overlap {
                Overlap::Skip => {
                    let reason = match self.running.first() {
                        Some(r) => format!(
                            "the run of {} in this process is still going",
                            fmt_time(r.fire)
                        ),
                        None => "another process is running this job".to_owned(),
                    };
                    self.emit_with(fire, EventKind::Skipped { reason }, first_report);
                }
                Overlap::Queue | Overlap::Replace => self.wait_and_retry(fire),
            },
            Err(e) => {
                tracing::warn!(job = %self.job.name, fire_time = %fmt_time(fire), error = %e, "guard unavailable; retrying until the misfire grace runs out");
                self.last_guard_error = Some(e.to_string());
                self.wait_and_retry(fire);
            }
        }
    }

    /// Keeps `fire` due and asks the guard again after a jittered, growing pause.
    fn wait_and_retry(&mut self, fire: DateTime<Utc>) {
        self.due.push_front(fire);
        self.coalesce();
        let base = Duration::from_millis(50).saturating_mul(1 << self.retries.min(5));
        let jitter = Duration::from_millis(fastrand::u64(0..=base.as_millis() as u64 / 4));
        self.retry = Some(Instant::now() + base.min(Duration::from_secs(1)) + jitter);
        self.retries = self.retries.saturating_add(1);
    }

    fn start_run(&mut self, fire: DateTime<Utc>, lease: Box<dyn Lease>) {
        let token = lease.fencing_token();
        let cancel = CancellationToken::new();
        let ctx = JobContext {
            job: Arc::clone(&self.job.name),
            fire_time: fire,
            fencing_token: token,
            cancel: cancel.clone(),
        };
        let id = self.next_id;
        self.next_id += 1;
        let lateness = (self.shared.clock.now() - fire)
            .to_std()
            .unwrap_or_default();
        let key: Arc<str> = Arc::from(run_key(&self.job.name, fire));
        self.running.push(Running {
            id,
            run_key: Arc::clone(&key),
            fire,
            token,
            started: Instant::now(),
            lateness,
            cancel: cancel.clone(),
            cancel_reason: None,
        });
        self.metrics.running.set(self.running.len() as f64);
        self.emit_run(
            RunFacts {
                fire,
                key,
                token,
                lateness,
                duration: None,
            },
            EventKind::Started,
        );
        let job = Arc::clone(&self.job.name);
        let span = tracing::info_span!("cronguard.run", job = %job, fire_time = %fmt_time(fire), fencing_token = token);
        let inline = lease.expiry().is_none() && matches!(self.body, Body::Async(_));
        let mut run = Box::pin(run_body(self.body.clone(), ctx, cancel));
        if inline {
            // A lease that never expires and an async body: poll the run once here, and spawn
            // it only if it does not finish at once (most runs of a quick job never need a task
            // of their own). Its code up to its first await runs on this job's task, which
            // delays nothing but this job's own bookkeeping.
            let mut cx = Context::from_waker(Waker::noop());
            if let Poll::Ready(end) = span.in_scope(|| run.as_mut().poll(&mut cx)) {
                release_soon(lease, job);
                self.on_finished(id, end);
                return;
            }
        }
        let tx = self.tx.clone();
        let renewals = self.metrics.renewals.clone();
        let task = async move {
            let end = if lease.expiry().is_some() {
                let watchdog = async {
                    let verdict = watch(&*lease, &renewals).await;
                    let _ = tx.send(Box::new(Msg::Stopped { id, verdict }));
                    // The run now ends at its next await point (or, if blocking, when it returns).
                    std::future::pending::<()>().await;
                };
                tokio::select! {
                    biased;
                    end = &mut run => end,
                    _ = watchdog => RunEnd::Cancelled,
                }
            } else {
                run.await
            };
            release(lease, job).await;
            let _ = tx.send(Box::new(Msg::Finished { id, end }));
        };
        if span.is_disabled() {
            tokio::spawn(task);
        } else {
            tokio::spawn(task.instrument(span));
        }
    }

    fn on_finished(&mut self, id: u64, end: RunEnd) {
        let Some(pos) = self.running.iter().position(|r| r.id == id) else {
            return;
        };
        let run = self.running.remove(pos);
        self.metrics.running.set(self.running.len() as f64);
        let kind = match (end, run.cancel_reason) {
            (RunEnd::Cancelled, reason) | (_, reason @ Some(_)) => EventKind::Cancelled {
                reason: reason.unwrap_or(CancelReason::Shutdown),
            },
            (RunEnd::Ok, None) => EventKind::Succeeded,
            (RunEnd::Failed(error), None) => EventKind::Failed { error },
        };
        let facts = RunFacts::of(&run, Some(run.started.elapsed()));
        self.emit_run(facts, kind);
    }

    /// After the scheduler stopped firing: report fires that will not run, let running jobs
    /// finish until the deadline, then cancel them.
    async fn drain(mut self, mut rx: mpsc::UnboundedReceiver<Box<Msg>>) {
        let waiting: Vec<_> = self.due.drain(..).collect();
        for t in waiting {
            let reason = "the scheduler shut down before the fire could start".to_owned();
            self.emit(t, EventKind::Misfired { reason });
        }
        let deadline = self
            .shared
            .deadline
            .get()
            .copied()
            .unwrap_or_else(Instant::now);
        let mut cancelled_at: Option<Instant> = None;
        while self.claiming.is_some() || !self.running.is_empty() || self.pending_reports > 0 {
            let wake = match cancelled_at {
                None => deadline,
                Some(at) => at + CANCEL_GRACE,
            };
            tokio::select! {
                Some(msg) = rx.recv() => match *msg {
                    Msg::Claimed { fire, result, .. } => {
                        self.claiming = None;
                        if let Ok(Claim::Acquired(lease)) = result {
                            release_soon(lease, Arc::clone(&self.job.name));
                        }
                        let reason = "the scheduler shut down before the fire could start".to_owned();
                        self.emit(fire, EventKind::Misfired { reason });
                    }
                    msg => self.on_msg(msg),
                },
                _ = sleep_until(wake) => {
                    if cancelled_at.is_some() {
                        for run in &self.running {
                            tracing::error!(job = %self.job.name, fire_time = %fmt_time(run.fire), "a blocking run ignored cancellation at shutdown and was abandoned; check `ctx.is_cancelled()` in long blocking jobs");
                        }
                        return;
                    }
                    for run in &mut self.running {
                        run.cancel_reason.get_or_insert(CancelReason::Shutdown);
                        run.cancel.cancel();
                    }
                    cancelled_at = Some(Instant::now());
                }
            }
        }
    }

    /// Reports a dropped fire.
    fn emit(&self, fire: DateTime<Utc>, kind: EventKind) {
        self.emit_with(fire, kind, true);
    }

    fn emit_with(&self, fire: DateTime<Utc>, kind: EventKind, first_report: bool) {
        let key = Arc::from(run_key(&self.job.name, fire));
        self.emit_event(fire, key, None, kind, first_report, (None, None));
    }

    /// Reports something of a run.
    fn emit_run(&self, run: RunFacts, kind: EventKind) {
        let times = (Some(run.lateness), run.duration);
        self.emit_event(run.fire, run.key, Some(run.token), kind, true, times);
    }

    fn emit_event(
        &self,
        fire: DateTime<Utc>,
        run_key: Arc<str>,
        fencing_token: Option<u64>,
        kind: EventKind,
        first_report: bool,
        (lateness, duration): (Option<Duration>, Option<Duration>),
    ) {
        let event = Event {
            run_key,
            job: Arc::clone(&self.job.name),
            fire_time: fire,
            fencing_token,
            instance: Arc::clone(&self.shared.instance),
            at: self.shared.clock.now(),
            first_report,
            lateness,
            duration,
            kind,
        };
        self.metrics.record(&event);
        self.shared.events.emit(&event);
        self.status.record(event, self.running.len());
    }
}

/// What the events of one run carry.
struct RunFacts {
    fire: DateTime<Utc>,
    key: Arc<str>,
    token: u64,
    lateness: Duration,
    duration: Option<Duration>,
}

impl RunFacts {
    fn of(run: &Running, duration: Option<Duration>) -> Self {
        RunFacts {
            fire: run.fire,
            key: Arc::clone(&run.run_key),
            token: run.token,
            lateness: run.lateness,
            duration,
        }
    }
}

/// Runs a job body: panics become failures, cancellation stops an async body at its next await.
async fn run_body(body: Body, ctx: JobContext, cancel: CancellationToken) -> RunEnd {
    let outcome = match body {
        Body::Async(f) => {
            let fut = std::panic::AssertUnwindSafe(async move { f(ctx).await }).catch_unwind();
            tokio::select! {
                biased;
                _ = cancel.cancelled() => return RunEnd::Cancelled,
                result = fut => result,
            }
        }
        Body::Blocking(f) => {
            let span = tracing::Span::current();
            let call = move || {
                span.in_scope(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(ctx))))
            };
            match tokio::task::spawn_blocking(call).await {
                Ok(result) => result,
                Err(e) => {
                    return RunEnd::Failed(format!("the blocking pool could not run the job: {e}"))
                }
            }
        }
    };
    match outcome {
        Ok(Ok(())) if cancel.is_cancelled() => RunEnd::Cancelled,
        Ok(Ok(())) => RunEnd::Ok,
        Ok(Err(e)) => RunEnd::Failed(e),
        Err(panic) => RunEnd::Failed(format!("the job panicked: {}", panic_message(&*panic))),
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-text payload".to_owned()
    }
}

/// Gives a lease back. A failure is only logged: the guard frees itself when the lease expires
/// or the process exits.
async fn release(lease: Box<dyn Lease>, job: Arc<str>) {
    match std::panic::AssertUnwindSafe(lease.release())
        .catch_unwind()
        .await
    {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            tracing::warn!(job = %job, error = %e, "could not release the guard; it frees itself when the lease expires or the process exits")
        }
        Err(panic) => {
            tracing::warn!(job = %job, panic = %panic_message(&*panic), "the guard panicked while releasing; it frees itself when the lease expires or the process exits")
        }
    }
}

/// [`release`] without waiting: done at once when the guard answers at once (in-memory guards),
/// otherwise on a task of its own.
fn release_soon(lease: Box<dyn Lease>, job: Arc<str>) {
    let mut releasing = Box::pin(release(lease, job));
    if releasing
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
        .is_pending()
    {
        tokio::spawn(releasing);
    }
}

pub(crate) fn fmt_time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// `job@T`: the identity of a fire in every process.
pub(crate) fn run_key(job: &str, fire: DateTime<Utc>) -> String {
    format!("{job}@{}", fmt_time(fire))
}

/// `1500ms`, `60s`: durations as the attribute writes them.
fn human(d: Duration) -> String {
    let ms = d.as_millis();
    if ms % 1000 != 0 || ms < 1000 {
        format!("{ms}ms")
    } else {
        format!("{}s", ms / 1000)
    }
}
