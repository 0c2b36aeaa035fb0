//! The cancel signal of one run.
//!
//! A run needs one flag that the scheduler sets and the job reads or awaits: no parent, no
//! children. `tokio_util`'s `CancellationToken` is a tree whose every clone and drop takes a
//! mutex; a run's signal is cloned and dropped on every fire, so it is this flag instead.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

#[derive(Debug, Clone, Default)]
pub(crate) struct RunCancel(Arc<State>);

#[derive(Debug, Default)]
struct State {
    cancelled: AtomicBool,
    notify: Notify,
}

impl RunCancel {
    /// Cancels the run; every waiter of [`cancelled`](RunCancel::cancelled) wakes.
    pub(crate) fn cancel(&self) {
        if !self.0.cancelled.swap(true, Ordering::AcqRel) {
            self.0.notify.notify_waiters();
        }
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.0.cancelled.load(Ordering::Acquire)
    }

    /// Resolves once the run is cancelled.
    pub(crate) async fn cancelled(&self) {
        let notified = self.0.notify.notified();
        tokio::pin!(notified);
        // Registered before the flag is read: a `cancel` after the read wakes this waiter.
        notified.as_mut().enable();
        if self.is_cancelled() {
            return;
        }
        // Only `cancel` notifies, and only after it set the flag.
        notified.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waiters_wake_on_cancel_and_late_waiters_return_at_once() {
        let cancel = RunCancel::default();
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let c = cancel.clone();
                tokio::spawn(async move { c.cancelled().await })
            })
            .collect();
        tokio::task::yield_now().await;
        assert!(!cancel.is_cancelled());
        cancel.cancel();
        for w in waiters {
            w.await.expect("the waiter ends");
        }
        assert!(cancel.is_cancelled());
        cancel.clone().cancelled().await;
        cancel.cancel(); // twice is harmless
    }
}
