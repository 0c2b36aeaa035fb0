//! A run: the job's body, polled once by its shard and then on a task of its own unless it
//! finished, its lease kept alive by the watchdog, and its end reported back to the shard.

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::time::Instant;

use crate::cancel::RunCancel;
use futures_util::FutureExt;
use tokio::sync::mpsc;
use tracing::Instrument;

use super::shard::{Msg, Report};
use crate::guard::Lease;
use crate::job::Body;
use crate::watchdog::watch;
use crate::JobContext;

/// How a run ended.
pub(super) enum RunEnd {
    Ok,
    Failed(String),
    Cancelled,
}

/// Where a run reports to: its shard, its job, its id.
pub(super) struct ReportTo<'a> {
    pub(super) tx: &'a mpsc::UnboundedSender<Msg>,
    pub(super) job: u32,
    pub(super) id: u32,
}

/// [`ReportTo`] owned by a run's task.
struct Reporter {
    tx: mpsc::UnboundedSender<Msg>,
    job: u32,
    id: u32,
}

/// How long a run's first poll on its shard may take before the job's later runs get a task of
/// their own from the start.
pub(super) const INLINE_POLL_LIMIT: Duration = Duration::from_millis(1);

/// A run's hold on its guard.
pub(super) enum Hold {
    /// A claim of the in-process guard: nothing to renew or give back.
    Local { token: u64 },
    /// A lease of a shared guard.
    Lease(Box<dyn Lease>),
}

impl Hold {
    pub(super) fn fencing_token(&self) -> u64 {
        match self {
            Hold::Local { token } => *token,
            Hold::Lease(lease) => lease.fencing_token(),
        }
    }

    fn expires(&self) -> bool {
        matches!(self, Hold::Lease(lease) if lease.expiry().is_some())
    }
}

/// A run to start.
pub(super) struct Start {
    pub(super) body: Body,
    pub(super) ctx: JobContext,
    pub(super) cancel: RunCancel,
    pub(super) hold: Hold,
    pub(super) renewals: metrics::Counter,
    /// Whether the first poll may happen on the shard (see [`INLINE_POLL_LIMIT`]).
    pub(super) inline: bool,
}

/// What became of a started run.
pub(super) enum Started {
    /// It finished during its first poll, on the shard, at `ended`.
    Finished { end: RunEnd, ended: Instant },
    /// It goes on as a task of its own, and reports its end to the shard.
    Spawned { first_poll: Option<Duration> },
}

/// Starts a run. An async body whose lease never expires is polled once right here, and gets a
/// task of its own only if it does not finish at once: most runs of a quick job never need one.
/// Otherwise the run is a task from the start, with the watchdog renewing an expiring lease.
/// `started` is when the run was claimed; the first poll's length is measured from there.
pub(super) fn start(run: Start, started: Instant, to: ReportTo<'_>) -> Started {
    let Start {
        body,
        ctx,
        cancel,
        hold,
        renewals,
        inline,
    } = run;
    let span = tracing::info_span!("cronguard.run", job = %ctx.job, fire_time = %super::fmt_time(ctx.fire_time), fencing_token = ctx.fencing_token);
    let expires = hold.expires();
    let blocking = matches!(body, Body::Blocking(_));
    // The job's name, for the log line of a lease that cannot be given back.
    let lease_job = matches!(hold, Hold::Lease(_)).then(|| Arc::clone(&ctx.job));
    let mut running = Box::pin(run_body(body, ctx, cancel));
    let mut first_poll = None;
    if inline && !expires && !blocking {
        let polled = span.in_scope(|| {
            running
                .as_mut()
                .poll(&mut Context::from_waker(Waker::noop()))
        });
        let ended = Instant::now();
        if let Poll::Ready(end) = polled {
            if let (Hold::Lease(lease), Some(job)) = (hold, lease_job) {
                release_soon(lease, job);
            }
            return Started::Finished { end, ended };
        }
        first_poll = Some(ended - started);
    }
    let to = Reporter {
        tx: to.tx.clone(),
        job: to.job,
        id: to.id,
    };
    let task = async move {
        let end = match &hold {
            Hold::Lease(lease) if expires => {
                let watchdog = async {
                    let verdict = watch(&**lease, &renewals).await;
                    to.send(Report::Stopped { id: to.id, verdict });
                    // The run now ends at its next await point (or, if blocking, when it returns).
                    std::future::pending::<()>().await;
                };
                tokio::select! {
                    biased;
                    end = &mut running => end,
                    _ = watchdog => RunEnd::Cancelled,
                }
            }
            _ => running.await,
        };
        if let (Hold::Lease(lease), Some(job)) = (hold, lease_job) {
            release(lease, job).await;
        }
        to.send(Report::Finished { id: to.id, end });
    };
    if span.is_disabled() {
        tokio::spawn(task);
    } else {
        tokio::spawn(task.instrument(span));
    }
    Started::Spawned { first_poll }
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

/// Runs a job body: panics become failures, cancellation stops an async body at its next await.
async fn run_body(body: Body, ctx: JobContext, cancel: RunCancel) -> RunEnd {
    let outcome = match body {
        Body::Async(f) => {
            let fut = std::panic::AssertUnwindSafe(async move { f(ctx).await }).catch_unwind();
            // The body first: a run that finishes in one poll never registers for cancellation
            // (a run cancelled before its first poll still ends as cancelled, below).
            tokio::select! {
                biased;
                result = fut => result,
                _ = cancel.cancelled() => return RunEnd::Cancelled,
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

pub(super) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
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
pub(super) fn release_soon(lease: Box<dyn Lease>, job: Arc<str>) {
    let mut releasing = Box::pin(release(lease, job));
    if releasing
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
        .is_pending()
    {
        tokio::spawn(releasing);
    }
}
