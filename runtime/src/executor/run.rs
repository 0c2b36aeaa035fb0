//! A run: the job's body, polled once by its shard and then on a task of its own unless it
//! finished, its lease kept alive by the watchdog, and its end reported back to the shard.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::task::TaskTracker;

use crate::cancel::RunCancel;
use futures_util::FutureExt;
use tokio::sync::mpsc;
use tracing::Instrument;

use super::errands::{release, Errands};
use super::msg::{Msg, Report};
use crate::clock::BootClock;
use crate::context::JobContext;
use crate::guard::watchdog::{watch, LeaseDeadline, Watch};
use crate::guard::Lease;
use crate::job::Body;
use crate::model::{RunEnd, RunId, Verdict};
use crate::registry::{BoxFuture, JobOutcome};

/// Where a run reports to: its shard, its job, its id; and where a run that finished at its
/// first poll gives its lease back.
pub(super) struct ReportTo<'a> {
    pub(super) tx: &'a mpsc::UnboundedSender<Msg>,
    pub(super) job: u32,
    pub(super) id: RunId,
    pub(super) tasks: &'a TaskTracker,
    pub(super) errands: &'a RefCell<Errands>,
}

/// [`ReportTo`] owned by a run's task.
struct Reporter {
    tx: mpsc::UnboundedSender<Msg>,
    job: u32,
    id: RunId,
}

/// How long a run's first poll on its shard may take before the job's later runs get a task of
/// their own from the start.
pub(super) const INLINE_POLL_LIMIT: Duration = Duration::from_millis(1);

/// A run's hold on its guard.
pub(super) enum Hold {
    /// A claim of the in-process guard: nothing to renew or give back.
    Local,
    /// A lease of a shared guard.
    Lease(Claimed),
}

/// A lease a guard granted, and when its claim was sent on the [`BootClock`] (at the latest:
/// the clock is read just before the claim goes out); `None` when that clock could not be read.
pub(super) struct Claimed {
    pub(super) lease: Box<dyn Lease>,
    pub(super) boot_sent: Option<Duration>,
}

/// A run to start.
pub(super) struct Start {
    pub(super) body: Body,
    pub(super) ctx: JobContext,
    pub(super) cancel: RunCancel,
    pub(super) hold: Hold,
    /// The lease renewals series of the job, for a run that holds a lease.
    pub(super) renewals: Option<metrics::Counter>,
    /// Whether the first poll may happen on the shard (see [`INLINE_POLL_LIMIT`]); when not,
    /// the first poll on the run's own task is timed and reported with its end.
    pub(super) inline: bool,
    /// Each attempt is cancelled after this long (`timeout`).
    pub(super) timeout: Option<Duration>,
    /// The clock that counts a suspend of the host, which the lease's deadline is also kept on.
    pub(super) boot: BootClock,
    /// For a job with `retries`: where the run learns, after a failed attempt, the number of the
    /// next one. It closes when no further attempt starts; the run then gives its lease back.
    pub(super) next_attempt: Option<mpsc::UnboundedReceiver<u32>>,
}

/// What became of a started run.
pub(super) enum Started {
    /// It finished during its first poll, on the shard, at `ended`.
    Finished { end: RunEnd, ended: Instant },
    /// It goes on as a task of its own, cancelled through `cancel`, and reports its end to the
    /// shard.
    Spawned {
        first_poll: Option<Duration>,
        cancel: RunCancel,
    },
}

/// Starts a run. An async body is polled once right here, within its lease, and gets a task of
/// its own only if it does not finish at once: most runs of a quick job never need one. A run
/// that goes on has the watchdog renew an expiring lease and stop the body at the lease's end.
/// The first poll's length is measured from `polled_from`: when the run was claimed, or when the
/// poll of the run before it on the shard ended, if later.
pub(super) fn start(run: Start, polled_from: Instant, to: ReportTo<'_>) -> Started {
    let Start {
        body,
        ctx,
        cancel,
        hold,
        renewals,
        inline,
        timeout,
        boot,
        next_attempt,
    } = run;
    let span = tracing::info_span!("cronguard.run", job = %ctx.job, fire_time = %crate::fire::fmt_time(ctx.fire_time), fencing_token = ctx.fencing_token);
    // The local deadline of an expiring lease: the body is never polled past it.
    let deadline = match &hold {
        Hold::Lease(Claimed { lease, boot_sent }) => lease
            .expiry()
            .map(|(length, sent)| Arc::new(LeaseDeadline::new(boot, sent, *boot_sent, length))),
        Hold::Local => None,
    };
    let blocking = body.is_blocking();
    // The job's name, for the log line of a lease that cannot be given back.
    let lease_job = matches!(hold, Hold::Lease(_)).then(|| ctx.job.clone());
    let retries = next_attempt.map(|next| (next, to.owned()));
    // A job moved to tasks of its own learns how long its first polls take there.
    let timed = !inline && !blocking;
    let inline = inline && retries.is_none() && !blocking;
    // Never polled past the lease's local deadline: a run claimed long ago (a paused process, a
    // suspended host) goes to its task, whose check ends it without a step.
    let within_lease = deadline.as_ref().is_none_or(|d| !d.passed());
    let first = if inline && within_lease && timeout.is_none() {
        first_step(body, ctx, &cancel, &span)
    } else {
        let lease = deadline.clone();
        let mut running: Running =
            Box::pin(attempts(body, ctx, cancel.clone(), timeout, retries, lease));
        if inline && within_lease {
            let polled = span.in_scope(|| {
                running
                    .as_mut()
                    .poll(&mut Context::from_waker(Waker::noop()))
            });
            let ended = Instant::now();
            match polled {
                Poll::Ready(end) => FirstPoll::Ended { end, ended },
                Poll::Pending => FirstPoll::GoesOn {
                    running,
                    polled_at: Some(ended),
                },
            }
        } else {
            FirstPoll::GoesOn {
                running,
                polled_at: None,
            }
        }
    };
    let (running, first_poll) = match first {
        FirstPoll::GoesOn { running, polled_at } => (running, polled_at.map(|at| at - polled_from)),
        FirstPoll::Ended { end, ended } => {
            if let (Hold::Lease(claimed), Some(job)) = (hold, lease_job) {
                to.errands.borrow_mut().release(claimed.lease, job);
            }
            return Started::Finished { end, ended };
        }
    };
    let Some(deadline) = deadline else {
        let reporter = to.owned();
        let running = TimedFirstPoll::new(running, timed);
        spawn_run(to.tasks, &span, async move {
            let (end, first_poll) = running.await;
            if let (Hold::Lease(claimed), Some(job)) = (hold, lease_job) {
                release(claimed.lease, job).await;
            }
            reporter.send(Report::Finished {
                id: reporter.id,
                end,
                first_poll,
            });
        });
        return Started::Spawned { first_poll, cancel };
    };
    // An expiring lease: the body is never polled past the lease's local deadline, which the
    // watchdog moves forward with every renewal; the watchdog renews until the body returned.
    let body_deadline = (!blocking).then(|| Arc::clone(&deadline));
    let running = TimedFirstPoll::new(
        WithinLease {
            body: running,
            deadline: body_deadline,
        },
        timed,
    );
    let reporter = to.owned();
    spawn_run(to.tasks, &span, async move {
        let Hold::Lease(Claimed { lease, .. }) = hold else {
            return;
        };
        let renewals = renewals.unwrap_or_else(metrics::Counter::noop);
        let end = {
            let watchdog = watch(&*lease, &renewals, &deadline, |w| {
                let verdict = match w {
                    Watch::Lost(reason) => Verdict::Lost(reason),
                    Watch::CancelRequested => Verdict::CancelRequested,
                };
                reporter.send(Report::Verdict {
                    id: reporter.id,
                    verdict,
                });
            });
            tokio::pin!(running);
            tokio::pin!(watchdog);
            tokio::select! {
                biased;
                end = &mut running => end,
                // The lease is lost: the body ends at its next poll (an async body) or when it
                // returns (a blocking one).
                () = &mut watchdog => running.await,
            }
        };
        let (end, first_poll) = end;
        if let Some(job) = lease_job {
            release(lease, job).await;
        }
        reporter.send(Report::Finished {
            id: reporter.id,
            end,
            first_poll,
        });
    });
    Started::Spawned { first_poll, cancel }
}

/// A run's future once its first step is taken.
type Running = Pin<Box<dyn Future<Output = RunEnd> + Send>>;

/// What a run's first poll came to.
enum FirstPoll {
    /// The run ended, at `ended`.
    Ended { end: RunEnd, ended: Instant },
    /// The run goes on; `polled_at` is when its first poll ended, if it had one.
    GoesOn {
        running: Running,
        polled_at: Option<Instant>,
    },
}

/// The first poll of a run of an async body with no retries and no timeout: the body's own future
/// is polled, with nothing of the executor's around it, so that a run that finishes there (most
/// runs of a quick job) allocates no future of its own.
fn first_step(body: Body, ctx: JobContext, cancel: &RunCancel, span: &tracing::Span) -> FirstPoll {
    // The body is called inside the catch, as `run_once` calls it: a closure may panic before it
    // returns its future.
    let polled = span.in_scope(|| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut job = body.run_async(ctx);
            match job.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
                Poll::Ready(result) => Ok(result),
                Poll::Pending => Err(job),
            }
        }))
    });
    let ended = Instant::now();
    let end = match polled {
        Ok(Err(job)) => {
            return FirstPoll::GoesOn {
                running: Box::pin(going_on(job, cancel.clone())),
                polled_at: Some(ended),
            }
        }
        Ok(Ok(result)) => run_end(Ok(result), cancel),
        Err(panic) => run_end(Err(panic), cancel),
    };
    FirstPoll::Ended { end, ended }
}

/// An async body's run after its first poll, which `run_once` would go on with.
async fn going_on(job: BoxFuture<JobOutcome>, cancel: RunCancel) -> RunEnd {
    let job = std::panic::AssertUnwindSafe(job).catch_unwind();
    tokio::select! {
        biased;
        result = job => run_end(result, &cancel),
        _ = cancel.cancelled() => RunEnd::Cancelled,
    }
}

/// How a run ended, from what its body returned or how it panicked.
fn run_end(
    outcome: Result<JobOutcome, Box<dyn std::any::Any + Send>>,
    cancel: &RunCancel,
) -> RunEnd {
    match outcome {
        Ok(Ok(())) if cancel.is_cancelled() => RunEnd::Cancelled,
        Ok(Ok(())) => RunEnd::Ok,
        Ok(Err(e)) => RunEnd::Failed(e),
        Err(panic) => RunEnd::Panicked(format!(
            "the job panicked: {}",
            crate::error::panic_message(&*panic)
        )),
    }
}

fn spawn_run(
    tasks: &TaskTracker,
    span: &tracing::Span,
    task: impl Future<Output = ()> + Send + 'static,
) {
    if span.is_disabled() {
        tasks.spawn(task);
    } else {
        tasks.spawn(task.instrument(span.clone()));
    }
}

impl ReportTo<'_> {
    fn owned(&self) -> Reporter {
        Reporter {
            tx: self.tx.clone(),
            job: self.job,
            id: self.id,
        }
    }
}

/// A run's body that is not polled once its lease's local deadline has passed
/// (docs/operations/redis.md): a run that was paused past its lease ends there, without another
/// step.
struct WithinLease {
    body: Running,
    deadline: Option<Arc<LeaseDeadline>>,
}

impl Future for WithinLease {
    type Output = RunEnd;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<RunEnd> {
        if self.deadline.as_ref().is_some_and(|d| d.passed()) {
            return Poll::Ready(RunEnd::LeaseExpired);
        }
        self.body.as_mut().poll(cx)
    }
}

/// A run's body on its task, with the length of its first poll there when `on` (a run of a job
/// whose first polls moved off the shard: see [`JobSlot::polled`](super::JobSlot)).
struct TimedFirstPoll<F> {
    body: F,
    on: bool,
    first_poll: Option<Duration>,
}

impl<F> TimedFirstPoll<F> {
    fn new(body: F, on: bool) -> Self {
        TimedFirstPoll {
            body,
            on,
            first_poll: None,
        }
    }
}

impl<F: Future<Output = RunEnd> + Unpin> Future for TimedFirstPoll<F> {
    type Output = (RunEnd, Option<Duration>);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let from = (self.on && self.first_poll.is_none()).then(Instant::now);
        let polled = Pin::new(&mut self.body).poll(cx);
        if let Some(from) = from {
            self.first_poll = Some(from.elapsed());
        }
        polled.map(|end| (end, self.first_poll))
    }
}

impl Reporter {
    fn send(&self, report: Report) {
        // Fails only when the shard is gone, and then nobody waits for the report.
        let _ = self.tx.send(Msg {
            job: self.job,
            report,
        });
    }
}

/// Runs the attempts of a run: the first, and after each failed one that the job's model retries,
/// the next, all under the run's lease (the watchdog renews it during the pauses too). Ends with
/// the last attempt's end.
///
/// An attempt never starts past the lease's local deadline (`lease`): a process frozen, or a
/// host suspended, during the pause between two attempts wakes with its lease gone, and a
/// blocking body, which no poll bounds, would otherwise run without it.
async fn attempts(
    body: Body,
    mut ctx: JobContext,
    cancel: RunCancel,
    timeout: Option<Duration>,
    mut retries: Option<(mpsc::UnboundedReceiver<u32>, Reporter)>,
    lease: Option<Arc<LeaseDeadline>>,
) -> RunEnd {
    loop {
        let end = run_body(body.clone(), ctx.clone(), cancel.clone(), timeout).await;
        let Some((next, reporter)) = retries.as_mut().filter(|_| end.may_retry()) else {
            return end;
        };
        reporter.send(Report::Finished {
            id: reporter.id,
            end: end.clone(),
            first_poll: None,
        });
        match next.recv().await {
            Some(_) if lease.as_deref().is_some_and(LeaseDeadline::passed) => {
                return RunEnd::LeaseExpired
            }
            Some(attempt) => ctx.attempt = attempt,
            // No further attempt; the model has already taken this end.
            None => return end,
        }
    }
}

/// Runs one attempt within its `timeout`: at the deadline an async body is dropped (it stops at
/// the `.await` it waits in), a blocking body sees `ctx.is_cancelled()` and is waited for.
async fn run_body(
    body: Body,
    mut ctx: JobContext,
    cancel: RunCancel,
    timeout: Option<Duration>,
) -> RunEnd {
    let Some(limit) = timeout else {
        return run_once(body, ctx, cancel).await;
    };
    let blocking = body.is_blocking();
    // The attempt's own signal: a timeout cancels this attempt, not the retries after it.
    let attempt = RunCancel::default();
    ctx.cancel = attempt.clone();
    let running = run_once(body, ctx, attempt.clone());
    let expired = tokio::time::sleep(limit);
    tokio::pin!(running);
    tokio::pin!(expired);
    tokio::select! {
        biased;
        end = &mut running => end,
        () = cancel.cancelled() => {
            attempt.cancel();
            running.await
        }
        () = &mut expired => {
            attempt.cancel();
            if blocking {
                // The run holds its slot until the blocking body has returned.
                let _ = running.await;
            }
            RunEnd::TimedOut
        }
    }
}

/// Runs a job body: panics become failures, cancellation stops an async body at its next await.
async fn run_once(body: Body, ctx: JobContext, cancel: RunCancel) -> RunEnd {
    let outcome = if body.is_blocking() {
        let span = tracing::Span::current();
        let call = move || {
            span.in_scope(|| {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body.run_blocking(ctx)))
            })
        };
        match tokio::task::spawn_blocking(call).await {
            Ok(result) => result,
            Err(e) => {
                return RunEnd::Failed(format!("the blocking pool could not run the job: {e}"))
            }
        }
    } else {
        let fut =
            std::panic::AssertUnwindSafe(async move { body.run_async(ctx).await }).catch_unwind();
        // The body first: a run that finishes in one poll never registers for cancellation
        // (a run cancelled before its first poll still ends as cancelled, below).
        tokio::select! {
            biased;
            result = fut => result,
            _ = cancel.cancelled() => return RunEnd::Cancelled,
        }
    };
    run_end(outcome, &cancel)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    fn ctx(cancel: &RunCancel) -> JobContext {
        let mut ctx = JobContext::builder("limited").build();
        ctx.cancel = cancel.clone();
        ctx
    }

    /// Drops its flag's `false` when dropped: tells that the body was dropped, not finished.
    struct Dropped(Arc<AtomicBool>);

    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    /// An expiring lease that tells when it was given back.
    struct Expiring {
        sent: Instant,
        released: Arc<AtomicBool>,
    }

    impl Lease for Expiring {
        fn fencing_token(&self) -> u64 {
            1
        }

        fn expiry(&self) -> Option<(Duration, Instant)> {
            Some((Duration::from_secs(10), self.sent))
        }

        fn release(
            self: Box<Self>,
        ) -> crate::registry::BoxFuture<Result<(), crate::guard::GuardError>> {
            self.released.store(true, Ordering::SeqCst);
            Box::pin(async { Ok(()) })
        }
    }

    /// Starts a quick run under an [`Expiring`] lease sent at `sent`; what became of it, whether
    /// its body ran, and whether the lease went back.
    fn start_leased(sent: Instant) -> (Started, bool, bool) {
        start_leased_on(&BootClock::Host, sent, None)
    }

    /// [`start_leased`], with the lease's claim sent at `boot_sent` on `boot`.
    fn start_leased_on(
        boot: &BootClock,
        sent: Instant,
        boot_sent: Option<Duration>,
    ) -> (Started, bool, bool) {
        let ran = Arc::new(AtomicBool::new(false));
        let released = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&ran);
        let body = Body::of_async(move |_ctx| {
            flag.store(true, Ordering::SeqCst);
            Box::pin(async { Ok(()) })
        });
        let hold = Hold::Lease(Claimed {
            lease: Box::new(Expiring {
                sent,
                released: Arc::clone(&released),
            }),
            boot_sent,
        });
        let (started, _rx) = start_on(boot, body, &RunCancel::default(), hold);
        (
            started,
            ran.load(Ordering::SeqCst),
            released.load(Ordering::SeqCst),
        )
    }

    #[tokio::test(start_paused = true)]
    async fn a_quick_run_under_a_lease_finishes_on_the_shard_and_gives_the_lease_back() {
        let (started, ran, released) = start_leased(Instant::now());
        assert!(
            matches!(
                started,
                Started::Finished {
                    end: RunEnd::Ok,
                    ..
                }
            ),
            "no task, no watchdog"
        );
        assert!(ran && released);
    }

    #[tokio::test(start_paused = true)]
    async fn a_run_whose_lease_has_run_out_is_not_polled_on_the_shard() {
        let sent = Instant::now();
        tokio::time::advance(Duration::from_secs(11)).await;
        let (started, ran, _) = start_leased(sent);
        assert!(matches!(
            started,
            Started::Spawned {
                first_poll: None,
                ..
            }
        ));
        assert!(!ran, "the body takes no step past its lease");
    }

    #[tokio::test(start_paused = true)]
    async fn a_run_whose_host_was_suspended_past_its_lease_is_not_polled_on_the_shard() {
        let clock = crate::Clock::anchored(chrono::DateTime::<chrono::Utc>::UNIX_EPOCH);
        let boot = clock.boot();
        let (sent, boot_sent) = (Instant::now(), boot.now());
        clock.suspend(Duration::from_secs(11));
        let (started, ran, _) = start_leased_on(&boot, sent, boot_sent);
        assert!(matches!(
            started,
            Started::Spawned {
                first_poll: None,
                ..
            }
        ));
        assert!(!ran, "the body takes no step past its lease");
    }

    /// A body that waits an hour, and the flag its future sets when it is dropped.
    fn an_hour_long_body() -> (Body, Arc<AtomicBool>) {
        let dropped = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&dropped);
        let body = Body::of_async(move |_ctx| {
            let guard = Dropped(Arc::clone(&flag));
            Box::pin(async move {
                tokio::time::sleep(Duration::from_secs(3_600)).await;
                drop(guard);
                Ok(())
            })
        });
        (body, dropped)
    }

    #[tokio::test(start_paused = true)]
    async fn an_async_body_is_dropped_at_its_timeout() {
        let (body, dropped) = an_hour_long_body();
        let cancel = RunCancel::default();
        let started = Instant::now();
        let end = run_body(
            body,
            ctx(&cancel),
            cancel.clone(),
            Some(Duration::from_secs(5)),
        )
        .await;
        assert_eq!(end, RunEnd::TimedOut);
        assert_eq!(started.elapsed(), Duration::from_secs(5), "at the deadline");
        assert!(
            dropped.load(Ordering::SeqCst),
            "the body is not polled again"
        );
        assert!(!cancel.is_cancelled(), "only the attempt is cancelled");
    }

    #[tokio::test(start_paused = true)]
    async fn a_blocking_body_sees_the_timeout_and_is_waited_for() {
        let (saw, seen) = std::sync::mpsc::channel();
        let (began, begun) = tokio::sync::oneshot::channel::<()>();
        let began = std::sync::Mutex::new(Some(began));
        let body = Body::of_blocking(move |ctx: JobContext| {
            if let Some(began) = began.lock().ok().and_then(|mut b| b.take()) {
                let _ = began.send(());
            }
            // Real time: the body polls its flag as a blocking job would.
            while !ctx.is_cancelled() {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            let _ = saw.send(ctx.attempt());
            Ok(())
        });
        let cancel = RunCancel::default();
        let mut running = tokio::spawn(run_body(
            body,
            ctx(&cancel),
            cancel.clone(),
            Some(Duration::from_secs(5)),
        ));
        // The deadline is set before the body begins; a running blocking body keeps tokio's
        // paused clock from moving on its own, so the test moves it.
        begun.await.expect("the body begins");
        tokio::time::advance(Duration::from_secs(5)).await;
        let end = (&mut running).await.expect("the attempt ends");
        assert_eq!(
            end,
            RunEnd::TimedOut,
            "reported as a timeout even though it returned Ok"
        );
        assert_eq!(
            seen.try_recv(),
            Ok(1),
            "it returned before the attempt ended"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_within_its_timeout_ends_as_it_returns() {
        let body = Body::of_async(|_ctx| {
            Box::pin(async {
                tokio::time::sleep(Duration::from_secs(1)).await;
                Err("boom".to_owned())
            })
        });
        let cancel = RunCancel::default();
        let end = run_body(
            body,
            ctx(&cancel),
            cancel.clone(),
            Some(Duration::from_secs(5)),
        )
        .await;
        assert_eq!(end, RunEnd::Failed("boom".to_owned()));
    }

    /// Starts a run of `body` held by `hold`, with no retries and no timeout, as run 7 of job 0.
    fn start_with(
        body: Body,
        cancel: &RunCancel,
        hold: Hold,
    ) -> (Started, mpsc::UnboundedReceiver<Msg>) {
        start_on(&BootClock::Host, body, cancel, hold)
    }

    /// [`start_with`], keeping the lease's deadline on `boot` too.
    fn start_on(
        boot: &BootClock,
        body: Body,
        cancel: &RunCancel,
        hold: Hold,
    ) -> (Started, mpsc::UnboundedReceiver<Msg>) {
        let run = Start {
            body,
            ctx: ctx(cancel),
            cancel: cancel.clone(),
            hold,
            renewals: None,
            inline: true,
            timeout: None,
            boot: boot.clone(),
            next_attempt: None,
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let tasks = TaskTracker::new();
        let errands = RefCell::new(Errands::default());
        let to = ReportTo {
            tx: &tx,
            job: 0,
            id: 7,
            tasks: &tasks,
            errands: &errands,
        };
        (start(run, Instant::now(), to), rx)
    }

    /// Starts a run of `body` as a `local` job's.
    fn start_local(body: Body, cancel: &RunCancel) -> (Started, mpsc::UnboundedReceiver<Msg>) {
        start_with(body, cancel, Hold::Local)
    }

    async fn reported_end(rx: &mut mpsc::UnboundedReceiver<Msg>) -> RunEnd {
        match rx.recv().await.map(|m| m.report) {
            Some(Report::Finished { id: 7, end, .. }) => end,
            _ => panic!("the run reports its end"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_panics_before_it_returns_its_future_is_a_panicked_run() {
        let body = Body::of_async(|_ctx| panic!("no future today"));
        let (started, _rx) = start_local(body, &RunCancel::default());
        match started {
            Started::Finished {
                end: RunEnd::Panicked(message),
                ..
            } => assert!(message.contains("no future today"), "{message}"),
            _ => panic!("a panicked run, ended on the shard"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_quick_body_cancelled_before_its_start_ends_as_cancelled() {
        let cancel = RunCancel::default();
        cancel.cancel();
        let body = Body::of_async(|_ctx| Box::pin(async { Ok(()) }));
        let (started, _rx) = start_local(body, &cancel);
        assert!(matches!(
            started,
            Started::Finished {
                end: RunEnd::Cancelled,
                ..
            }
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_waits_goes_on_on_its_task_and_reports_how_it_ended() {
        let body = Body::of_async(|_ctx| {
            Box::pin(async {
                tokio::time::sleep(Duration::from_secs(1)).await;
                Err("after a second".to_owned())
            })
        });
        let (started, mut rx) = start_local(body, &RunCancel::default());
        assert!(matches!(
            started,
            Started::Spawned {
                first_poll: Some(_),
                ..
            }
        ));
        assert_eq!(
            reported_end(&mut rx).await,
            RunEnd::Failed("after a second".to_owned())
        );

        let panics = Body::of_async(|_ctx| {
            Box::pin(async {
                tokio::time::sleep(Duration::from_secs(1)).await;
                panic!("late panic")
            })
        });
        let (_, mut rx) = start_local(panics, &RunCancel::default());
        assert!(
            matches!(reported_end(&mut rx).await, RunEnd::Panicked(m) if m.contains("late panic"))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_body_is_dropped_when_its_run_is_cancelled() {
        let (body, dropped) = an_hour_long_body();
        let cancel = RunCancel::default();
        let (_, mut rx) = start_local(body, &cancel);
        tokio::task::yield_now().await;
        cancel.cancel();
        assert_eq!(reported_end(&mut rx).await, RunEnd::Cancelled);
        assert!(dropped.load(Ordering::SeqCst));
    }
}
