//! The lease watchdog: one piece for every guard whose leases expire.
//!
//! While a run holds an expiring lease, the watchdog renews it every third of its length. The
//! holder keeps a local deadline on the monotonic clock: the instant the acquire (or the last
//! successful renewal) was *sent*, plus the lease. Measured from before the request left, the
//! deadline never falls after the moment the server could expire the key, so the holder gives up
//! no later than the server would let another process in. The watchdog keeps renewing until the
//! run's body has returned — also after another process asked the run to stop, since a blocking
//! body may go on for a while, and an expired lease would let a second run start.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::{sleep_until, timeout_at, Instant};

use crate::guard::{Lease, Renewal};

/// What the watchdog tells the run.
pub(crate) enum Watch {
    /// The lease is lost; the run must stop.
    Lost(String),
    /// Another process asked this run to stop (`overlap = "replace"`); the lease is still held.
    CancelRequested,
}

/// The local deadline of a lease: when the acquire (or the last successful renewal) was sent,
/// plus the lease. Written by the watchdog, read before every poll of the body.
pub(crate) struct LeaseDeadline {
    origin: Instant,
    nanos: AtomicU64,
}

impl LeaseDeadline {
    pub(crate) fn new(origin: Instant, deadline: Instant) -> Self {
        let cell = LeaseDeadline {
            origin,
            nanos: AtomicU64::new(0),
        };
        cell.set(deadline);
        cell
    }

    pub(crate) fn set(&self, deadline: Instant) {
        let nanos = deadline.saturating_duration_since(self.origin).as_nanos();
        self.nanos
            .store(u64::try_from(nanos).unwrap_or(u64::MAX), Ordering::Release);
    }

    pub(crate) fn get(&self) -> Instant {
        self.origin + Duration::from_nanos(self.nanos.load(Ordering::Acquire))
    }

    pub(crate) fn passed(&self) -> bool {
        Instant::now() >= self.get()
    }
}

/// Keeps `lease` alive and moves `deadline` with every renewal; tells `on_watch` when the run
/// must stop. Returns only once the lease is lost (after telling `on_watch`).
pub(crate) async fn watch(
    lease: &dyn Lease,
    renewals: &metrics::Counter,
    deadline: &LeaseDeadline,
    mut on_watch: impl FnMut(Watch),
) {
    let Some((length, _)) = lease.expiry() else {
        return std::future::pending().await;
    };
    let period = length / 3;
    let mut next_renewal = deadline.get() - length + period;
    let mut last_error: Option<String> = None;
    let mut cancel_told = false;
    loop {
        let until = deadline.get();
        sleep_until(next_renewal.min(until)).await;
        if Instant::now() >= until {
            on_watch(Watch::Lost(lost_reason(length, last_error.as_deref())));
            return;
        }
        let sent = Instant::now();
        match timeout_at(until, lease.renew()).await {
            Ok(Ok(renewal @ (Renewal::Renewed | Renewal::CancelRequested))) => {
                renewals.increment(1);
                deadline.set(sent + length);
                next_renewal = sent + period;
                last_error = None;
                if renewal == Renewal::CancelRequested && !cancel_told {
                    cancel_told = true;
                    on_watch(Watch::CancelRequested);
                }
            }
            Ok(Ok(_)) => {
                on_watch(Watch::Lost(
                    "the lock key expired or another holder took it (the process may have been paused longer than the lease)".to_owned(),
                ));
                return;
            }
            Ok(Err(e)) => {
                // Try again soon, but never past the deadline.
                last_error = Some(crate::error::Chain(&e).to_string());
                next_renewal = Instant::now() + (period / 4).max(Duration::from_millis(10));
            }
            Err(_) => {
                on_watch(Watch::Lost(lost_reason(length, last_error.as_deref())));
                return;
            }
        }
    }
}

fn lost_reason(length: Duration, last_error: Option<&str>) -> String {
    match last_error {
        Some(e) => format!(
            "no renewal succeeded within the lease of {} ms (last error: {e})",
            length.as_millis()
        ),
        None => format!(
            "no renewal succeeded within the lease of {} ms (the process was paused, or Redis did not answer)",
            length.as_millis()
        ),
    }
}
