//! What a shard's step asks of shared guards — claims of fires and lease releases — sent together
//! on one task, not each on a task of its own: in a burst of fires that is one task per chunk of
//! jobs, and one wake-up of it per answer batch rather than one per claim.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Waker};

use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, StreamExt};
use smol_str::SmolStr;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::task::TaskTracker;

use super::msg::{Msg, Report};
use crate::clock::BootClock;
use crate::control::ManualRun;
use crate::error::panic_message;
use crate::fire::Fire;
use crate::guard::{Guard, GuardError, Lease};

/// A lease release that did not finish at once.
type Releasing = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The guard calls of a shard's step, waiting to be sent.
#[derive(Default)]
pub(super) struct Errands {
    claims: Vec<ClaimCall>,
    releases: Vec<Releasing>,
}

/// A claim of job `job`'s fire `fire` from its guard.
struct ClaimCall {
    job: u32,
    guard: Arc<dyn Guard>,
    fire: Fire,
}

impl ClaimCall {
    /// Asks the guard; the answer goes back to the shard whatever happens (a panicking guard is
    /// an error), or the job would wait for it forever.
    async fn call(self, boot: BootClock) -> Msg {
        let sent = Instant::now();
        let boot_sent = boot.now();
        let ClaimCall { job, guard, fire } = self;
        let asked = std::panic::catch_unwind(AssertUnwindSafe(|| match fire.manual() {
            None => guard.claim(fire.t),
            Some(id) => guard.claim_manual(ManualRun {
                id,
                requested_at: fire.t,
            }),
        }));
        let result = match asked {
            Ok(claim) => AssertUnwindSafe(claim)
                .catch_unwind()
                .await
                .unwrap_or_else(|p| Err(panicked(&*p))),
            Err(p) => Err(panicked(&*p)),
        };
        Msg {
            job,
            report: Report::Claimed {
                result,
                latency: sent.elapsed(),
                sent: boot_sent.map(|b| (sent, b)),
            },
        }
    }
}

fn panicked(payload: &(dyn std::any::Any + Send)) -> GuardError {
    GuardError::new(
        crate::guard::GuardErrorKind::Other,
        format!(
            "guard task failed: the guard panicked: {}",
            panic_message(payload)
        ),
    )
}

impl Errands {
    /// Claims fire `fire` of job `job` from `guard` with the step's other calls.
    pub(super) fn claim(&mut self, job: u32, guard: Arc<dyn Guard>, fire: Fire) {
        self.claims.push(ClaimCall { job, guard, fire });
    }

    /// Gives `lease` back: at once when the guard answers at once (in-memory guards), otherwise
    /// with the step's other calls. A failure is only logged (see [`release`]).
    pub(super) fn release(&mut self, lease: Box<dyn Lease>, job: SmolStr) {
        let mut releasing: Releasing = Box::pin(release(lease, job));
        if releasing
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
            .is_pending()
        {
            self.releases.push(releasing);
        }
    }

    /// Sends what waits on one task; each claim's answer goes to `tx` as soon as it comes.
    /// `boot` is read as each claim goes out (see [`Report::Claimed`]).
    pub(super) fn send(
        &mut self,
        tx: &mpsc::UnboundedSender<Msg>,
        tasks: &TaskTracker,
        boot: &BootClock,
    ) {
        if self.claims.is_empty() && self.releases.is_empty() {
            return;
        }
        let claims: FuturesUnordered<_> = self
            .claims
            .drain(..)
            .map(|claim| claim.call(boot.clone()))
            .collect();
        let releases: FuturesUnordered<_> = self.releases.drain(..).collect();
        let tx = tx.clone();
        tasks.spawn(async move {
            let answered = claims.for_each(|msg| {
                // Fails only when the shard is gone, and then nobody waits for the answer.
                let _ = tx.send(msg);
                std::future::ready(())
            });
            futures_util::future::join(answered, releases.collect::<()>()).await;
        });
    }
}

/// Gives a lease back. A failure is only logged: the guard frees itself when the lease expires
/// or the process exits. A guard that panics, before it returns its future or inside it, is a
/// failure too: the shard that gives a lease back goes on.
pub(super) async fn release(lease: Box<dyn Lease>, job: SmolStr) {
    let released = match std::panic::catch_unwind(AssertUnwindSafe(|| lease.release())) {
        Ok(releasing) => AssertUnwindSafe(releasing).catch_unwind().await,
        Err(panic) => Err(panic),
    };
    match released {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            tracing::warn!(job = %job, error = %crate::error::Chain(&e), "could not release the guard; it frees itself when the lease expires or the process exits")
        }
        Err(panic) => {
            tracing::warn!(job = %job, panic = %panic_message(&*panic), "the guard panicked while releasing; it frees itself when the lease expires or the process exits")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guard::Claim;
    use crate::registry::BoxFuture;
    use chrono::{DateTime, Utc};

    /// A guard whose claims panic: before returning a future, or inside it.
    struct Panicking {
        early: bool,
    }

    impl Guard for Panicking {
        fn claim(&self, _fire_time: DateTime<Utc>) -> BoxFuture<Result<Claim, GuardError>> {
            assert!(!self.early, "broken before the future");
            Box::pin(async { panic!("broken inside the future") })
        }

        fn last_claimed(&self) -> BoxFuture<Result<Option<DateTime<Utc>>, GuardError>> {
            Box::pin(async { Ok(None) })
        }
    }

    /// A lease whose release panics before it returns its future.
    struct PanickingLease;

    impl Lease for PanickingLease {
        fn fencing_token(&self) -> u64 {
            1
        }

        fn release(self: Box<Self>) -> BoxFuture<Result<(), GuardError>> {
            panic!("broken before the future")
        }
    }

    #[tokio::test]
    async fn a_lease_whose_release_panics_is_given_up_without_taking_the_shard_down() {
        let mut errands = Errands::default();
        errands.release(Box::new(PanickingLease), SmolStr::new("job"));
        assert!(errands.releases.is_empty(), "done at once, with a warning");
    }

    #[tokio::test]
    async fn a_panicking_guard_answers_each_claim_with_an_error() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let tasks = TaskTracker::new();
        let mut errands = Errands::default();
        let fire = Fire::new(
            DateTime::<Utc>::UNIX_EPOCH,
            std::time::Duration::from_secs(1),
        );
        errands.claim(3, Arc::new(Panicking { early: true }), fire);
        errands.claim(4, Arc::new(Panicking { early: false }), fire);
        errands.send(&tx, &tasks, &crate::clock::BootClock::Host);
        let mut answered = Vec::new();
        for _ in 0..2 {
            let answer = tokio::time::timeout(std::time::Duration::from_secs(10), rx.recv());
            let msg = answer
                .await
                .ok()
                .flatten()
                .expect("an answer for each claim");
            let Report::Claimed { result, .. } = msg.report else {
                panic!("a claim's answer");
            };
            let error = result.expect_err("an error").to_string();
            assert!(error.contains("panicked"), "{error}");
            answered.push(msg.job);
        }
        answered.sort_unstable();
        assert_eq!(answered, [3, 4]);
    }
}
