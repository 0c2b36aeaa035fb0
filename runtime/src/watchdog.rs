//! The lease watchdog: one piece for every guard whose leases expire.
//!
//! While a run holds an expiring lease, the watchdog renews it every third of its length. The
//! holder keeps a local deadline on the monotonic clock: the instant the acquire (or the last
//! successful renewal) was *sent*, plus the lease. Measured from before the request left, the
//! deadline never falls after the moment the server could expire the key, so the holder gives up
//! no later than the server would let another process in.

use std::time::Duration;

use tokio::time::{sleep_until, timeout_at, Instant};

use crate::guard::{Lease, Renewal};

/// Why the watchdog stopped a run.
pub(crate) enum Verdict {
    /// The lease is lost; the run must stop.
    Lost(String),
    /// Another process asked this run to stop (`overlap = "replace"`); the lease is still held.
    CancelRequested,
}

/// Keeps `lease` alive; returns only when the run must stop. A lease that never expires is
/// never lost, and then this never returns.
pub(crate) async fn watch(lease: &dyn Lease, renewals: &metrics::Counter) -> Verdict {
    let Some((length, sent_at)) = lease.expiry() else {
        return std::future::pending().await;
    };
    let period = length / 3;
    let mut deadline = sent_at + length;
    let mut next_renewal = sent_at + period;
    let mut last_error: Option<String> = None;
    loop {
        sleep_until(next_renewal.min(deadline)).await;
        if Instant::now() >= deadline {
            return Verdict::Lost(lost_reason(length, last_error.as_deref()));
        }
        let sent = Instant::now();
        match timeout_at(deadline, lease.renew()).await {
            Ok(Ok(Renewal::Renewed)) => {
                renewals.increment(1);
                deadline = sent + length;
                next_renewal = sent + period;
                last_error = None;
            }
            Ok(Ok(Renewal::CancelRequested)) => return Verdict::CancelRequested,
            Ok(Ok(Renewal::Lost)) => {
                return Verdict::Lost(
                    "the lock key expired or another holder took it (the process may have been paused longer than the lease)".to_owned(),
                )
            }
            Ok(Err(e)) => {
                // Try again soon, but never past the deadline.
                last_error = Some(e.to_string());
                next_renewal = Instant::now() + (period / 4).max(Duration::from_millis(10));
            }
            Err(_) => return Verdict::Lost(lost_reason(length, last_error.as_deref())),
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
