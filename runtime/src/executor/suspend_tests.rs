//! A host suspended while a job holds a lease, through the whole scheduler on tokio's paused
//! clock: the monotonic clock stands still while the server's goes on, and the lease counts as
//! lost once the time that really passed reaches it (docs/design/guarantees.md, guarantee 2).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use tokio::sync::{broadcast, mpsc, Semaphore};
use tokio::time::Instant;

use crate::events::CancelReason;
use crate::guard::{Claim, Guard, GuardError, Lease, Renewal};
use crate::registry::BoxFuture;
use crate::{Clock, Cronguard, Event, EventKind, Job, Lock, Schedule};

const LEASE: Duration = Duration::from_secs(10);
/// Longer than the lease.
const SUSPEND: Duration = Duration::from_secs(30);

fn t0() -> DateTime<Utc> {
    DateTime::from_timestamp(1_767_225_600, 0).unwrap_or(DateTime::<Utc>::UNIX_EPOCH)
}

/// An in-memory guard of one process whose leases expire (after [`LEASE`]) but are always
/// renewed: the server never tells the holder that it expired the lease while the host slept.
/// With `gate`, each claim waits for a permit before it answers, and says on `asked` that it
/// was sent.
struct Leasing {
    last: Mutex<Option<DateTime<Utc>>>,
    tokens: AtomicU64,
    renewals: Arc<AtomicU32>,
    gate: Option<(Arc<Semaphore>, mpsc::UnboundedSender<()>)>,
}

impl Guard for Leasing {
    fn claim(&self, fire_time: DateTime<Utc>) -> BoxFuture<Result<Claim, GuardError>> {
        let sent = Instant::now();
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if last.is_some_and(|l| l >= fire_time) {
            return Box::pin(async { Ok(Claim::AlreadyRan) });
        }
        *last = Some(fire_time);
        let lease = Leased {
            sent,
            token: self.tokens.fetch_add(1, Ordering::SeqCst) + 1,
            renewals: Arc::clone(&self.renewals),
        };
        let gate = self.gate.clone();
        Box::pin(async move {
            if let Some((permits, asked)) = gate {
                let _ = asked.send(());
                permits
                    .acquire()
                    .await
                    .map_err(|e| {
                        GuardError::new(crate::guard::GuardErrorKind::Other, e.to_string())
                    })?
                    .forget();
            }
            Ok(Claim::Acquired(Box::new(lease)))
        })
    }

    fn last_claimed(&self) -> BoxFuture<Result<Option<DateTime<Utc>>, GuardError>> {
        let last = *self.last.lock().unwrap_or_else(|e| e.into_inner());
        Box::pin(async move { Ok(last) })
    }
}

struct Leased {
    sent: Instant,
    token: u64,
    renewals: Arc<AtomicU32>,
}

impl Lease for Leased {
    fn fencing_token(&self) -> u64 {
        self.token
    }

    fn expiry(&self) -> Option<(Duration, Instant)> {
        Some((LEASE, self.sent))
    }

    fn renew(&self) -> BoxFuture<Result<Renewal, GuardError>> {
        self.renewals.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { Ok(Renewal::Renewed) })
    }

    fn release(self: Box<Self>) -> BoxFuture<Result<(), GuardError>> {
        Box::pin(async { Ok(()) })
    }
}

/// Starts a scheduler on `clock` with `job` under a [`Leasing`] guard; returns it and its
/// event stream.
async fn start(
    clock: &Clock,
    job: Job,
    renewals: &Arc<AtomicU32>,
    gate: Option<(Arc<Semaphore>, mpsc::UnboundedSender<()>)>,
) -> (Cronguard, broadcast::Receiver<Event>) {
    let guard: Arc<dyn Guard> = Arc::new(Leasing {
        last: Mutex::new(None),
        tokens: AtomicU64::new(0),
        renewals: Arc::clone(renewals),
        gate,
    });
    let handle = crate::builder()
        .registered_jobs(false)
        .instance("sleeper")
        .clock(clock.clone())
        .custom_guard("leasing", move |_spec| Arc::clone(&guard))
        .job(job.lock(Lock::custom("leasing")).lease(LEASE))
        .start()
        .await
        .expect("starts");
    let stream = handle.monitor().subscribe();
    (handle, stream)
}

/// The events of the stream until one that ends the fire at `fire` (a run's end or a drop),
/// waiting at most a minute of the paused clock.
async fn until_the_fire_ends(
    stream: &mut broadcast::Receiver<Event>,
    fire: DateTime<Utc>,
) -> Vec<EventKind> {
    let mut seen = Vec::new();
    let ends = |kind: &EventKind| {
        matches!(
            kind,
            EventKind::Succeeded
                | EventKind::Failed { .. }
                | EventKind::Cancelled { .. }
                | EventKind::Misfired { .. }
                | EventKind::Skipped { .. }
        )
    };
    let reading = async {
        while let Ok(event) = stream.recv().await {
            if event.fire_time != fire {
                continue;
            }
            let end = ends(&event.kind);
            seen.push(event.kind);
            if end {
                return;
            }
        }
    };
    let ended = tokio::time::timeout(Duration::from_secs(60), reading).await;
    assert!(ended.is_ok(), "the fire never ended: {seen:?}");
    seen
}

#[tokio::test(start_paused = true)]
async fn a_run_whose_host_was_suspended_past_its_lease_is_stopped_as_having_lost_it() {
    let clock = Clock::anchored(t0());
    let steps = Arc::new(AtomicU32::new(0));
    let (began, mut begun) = mpsc::unbounded_channel();
    let counted = Arc::clone(&steps);
    let job = Job::new(
        "suspended",
        Schedule::every(Duration::from_secs(60)).expect("valid"),
    )
    .run(move |_ctx| {
        let (steps, began) = (Arc::clone(&counted), began.clone());
        async move {
            steps.fetch_add(1, Ordering::SeqCst);
            let _ = began.send(());
            tokio::time::sleep(Duration::from_secs(1)).await;
            steps.fetch_add(1, Ordering::SeqCst);
            Ok::<(), String>(())
        }
    });
    let renewals = Arc::new(AtomicU32::new(0));
    let (handle, mut stream) = start(&clock, job, &renewals, None).await;
    begun.recv().await.expect("the run begins");
    // The host sleeps while the body waits: when it resumes, the body's timer is due.
    clock.suspend(SUSPEND);
    let fire = t0() + TimeDelta::seconds(60);
    let seen = until_the_fire_ends(&mut stream, fire).await;
    assert_eq!(steps.load(Ordering::SeqCst), 1, "no step after the resume");
    assert!(
        matches!(
            seen.as_slice(),
            [
                ..,
                EventKind::LeaseLost { .. },
                EventKind::Cancelled {
                    reason: CancelReason::LeaseLost
                }
            ]
        ),
        "{seen:?}"
    );
    assert_eq!(
        renewals.load(Ordering::SeqCst),
        0,
        "the lease was not renewed after the resume"
    );
    handle.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_claim_answered_after_a_suspend_longer_than_the_lease_does_not_start_the_run() {
    let clock = Clock::anchored(t0());
    let ran = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&ran);
    let job = Job::new(
        "suspended-claim",
        Schedule::every(Duration::from_secs(60)).expect("valid"),
    )
    .run(move |_ctx| {
        counted.fetch_add(1, Ordering::SeqCst);
        async { Ok::<(), String>(()) }
    });
    let permits = Arc::new(Semaphore::new(0));
    let (asked, mut claims) = mpsc::unbounded_channel();
    let renewals = Arc::new(AtomicU32::new(0));
    let gate = Some((Arc::clone(&permits), asked));
    let (handle, mut stream) = start(&clock, job, &renewals, gate).await;
    claims.recv().await.expect("the claim goes out");
    // The host sleeps with the claim out; the answer comes at the resume.
    clock.suspend(SUSPEND);
    permits.add_permits(1);
    let fire = t0() + TimeDelta::seconds(60);
    let seen = until_the_fire_ends(&mut stream, fire).await;
    assert_eq!(ran.load(Ordering::SeqCst), 0, "the run did not start");
    assert!(
        matches!(seen.as_slice(), [EventKind::Misfired { reason, .. }] if reason.contains("lease had run out")),
        "{seen:?}"
    );
    handle.shutdown().await;
}

/// A blocking job with retries: the host is suspended during the pause between two attempts,
/// past the lease. The next attempt does not start: the lease is gone, and a blocking body,
/// which no poll bounds, would run without it (docs/design/guarantees.md, guarantee 2).
#[tokio::test(start_paused = true)]
async fn a_retry_of_a_blocking_job_does_not_start_once_a_suspend_took_its_lease() {
    let clock = Clock::anchored(t0());
    let attempts = Arc::new(AtomicU32::new(0));
    let (failed, mut first_failed) = mpsc::unbounded_channel();
    let counted = Arc::clone(&attempts);
    let job = Job::new(
        "retried",
        Schedule::every(Duration::from_secs(60)).expect("valid"),
    )
    .retries(3)
    .backoff(Duration::from_secs(2))
    .run_blocking(move |_ctx| {
        counted.fetch_add(1, Ordering::SeqCst);
        let _ = failed.send(());
        Err::<(), String>("the attempt fails".to_owned())
    });
    let renewals = Arc::new(AtomicU32::new(0));
    let (handle, mut stream) = start(&clock, job, &renewals, None).await;
    first_failed.recv().await.expect("the first attempt runs");
    // The host sleeps during the back-off, longer than the lease.
    clock.suspend(SUSPEND);
    let fire = t0() + TimeDelta::seconds(60);
    let seen = until_the_fire_ends(&mut stream, fire).await;
    // The run's end may come after the failure event of the first attempt: read until it.
    let mut seen = seen;
    while !seen.iter().any(|k| {
        matches!(
            k,
            EventKind::Cancelled { .. } | EventKind::Failed { retry_at: None, .. }
        )
    }) {
        seen.extend(until_the_fire_ends(&mut stream, fire).await);
    }
    assert_eq!(
        attempts.load(Ordering::SeqCst),
        1,
        "no attempt after the suspend took the lease: {seen:?}"
    );
    handle.shutdown().await;
}
