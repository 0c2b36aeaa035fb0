//! The lease watchdog: one piece for every guard whose leases expire.
//!
//! While a run holds an expiring lease, the watchdog renews it every third of its length. The
//! holder keeps a local deadline: the instant the acquire (or the last successful renewal) was
//! *sent*, plus the lease. Measured from before the request left, the deadline never falls after
//! the moment the server could expire the key, so the holder gives up no later than the server
//! would let another process in. The deadline is kept on two clocks: the monotonic one (tokio's
//! `Instant`, which the timers use) and the [`BootClock`], which also counts the time the host
//! spends suspended — the monotonic clock stands still then, while the server goes on and expires
//! the lease (docs/design/guarantees.md, guarantee 2). The lease is lost once either deadline has
//! passed. The watchdog keeps renewing until the run's body has returned — also after another
//! process asked the run to stop, since a blocking body may go on for a while, and an expired
//! lease would let a second run start.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::{sleep_until, timeout_at, Instant};

use crate::clock::BootClock;
use crate::guard::{Lease, Renewal};

/// What the watchdog tells the run.
pub(crate) enum Watch {
    /// The lease is lost; the run must stop.
    Lost(String),
    /// Another process asked this run to stop (`overlap = "replace"`); the lease is still held.
    CancelRequested,
}

/// A [`BootClock`] deadline that is not known (the clock could not be read when the request
/// was sent): only the monotonic deadline counts.
const NO_BOOT_DEADLINE: u64 = u64::MAX;

/// The local deadline of a lease: when the acquire (or the last successful renewal) was sent,
/// plus the lease, on the monotonic clock and on the [`BootClock`]. Written by the watchdog,
/// read before every poll of the body.
pub(crate) struct LeaseDeadline {
    origin: Instant,
    nanos: AtomicU64,
    boot: BootClock,
    /// The deadline on `boot`, in nanoseconds of its readings, or [`NO_BOOT_DEADLINE`].
    boot_nanos: AtomicU64,
}

impl LeaseDeadline {
    /// The deadline of a lease of `length` whose request was sent at `sent`, which `boot` read
    /// as `boot_sent` (or earlier: an earlier reading only makes the deadline come sooner).
    pub(crate) fn new(
        boot: BootClock,
        sent: Instant,
        boot_sent: Option<Duration>,
        length: Duration,
    ) -> Self {
        let cell = LeaseDeadline {
            origin: sent,
            nanos: AtomicU64::new(0),
            boot,
            boot_nanos: AtomicU64::new(NO_BOOT_DEADLINE),
        };
        cell.set(sent, boot_sent, length);
        cell
    }

    /// Moves the deadline to `length` after a renewal sent at `sent` (`boot_sent` on the
    /// [`BootClock`]).
    pub(crate) fn set(&self, sent: Instant, boot_sent: Option<Duration>, length: Duration) {
        let boot = boot_sent.map_or(NO_BOOT_DEADLINE, |b| nanos_of(b.saturating_add(length)));
        // The boot deadline first: a poll that reads the new monotonic deadline then reads the
        // new boot deadline too, never a new one beside an old one that has passed.
        self.boot_nanos.store(boot, Ordering::Release);
        let mono = (sent + length).saturating_duration_since(self.origin);
        self.nanos.store(nanos_of(mono), Ordering::Release);
    }

    /// The deadline on the monotonic clock, for the watchdog's timers.
    pub(crate) fn get(&self) -> Instant {
        self.origin + Duration::from_nanos(self.nanos.load(Ordering::Acquire))
    }

    /// The current reading of the [`BootClock`], to send a renewal with.
    pub(crate) fn boot_now(&self) -> Option<Duration> {
        self.boot.now()
    }

    /// Whether the lease has run out: on the monotonic clock, or on the [`BootClock`] (the host
    /// was suspended past it). Two clock reads at most.
    pub(crate) fn passed(&self) -> bool {
        Instant::now() >= self.get() || self.suspended_past()
    }

    /// Whether the lease has run out on the [`BootClock`]: more than the lease has passed since
    /// the request was sent, counting the time the host was suspended.
    fn suspended_past(&self) -> bool {
        let deadline = self.boot_nanos.load(Ordering::Acquire);
        deadline != NO_BOOT_DEADLINE && self.boot.now().is_some_and(|now| nanos_of(now) >= deadline)
    }
}

fn nanos_of(d: Duration) -> u64 {
    // Saturates below `NO_BOOT_DEADLINE`'s meaning only after 584 years.
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX - 1)
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
        // After a suspend the monotonic timers wake up as late as the suspend lasted: the server
        // may have expired the lease meanwhile and let another process run, so the lease is lost
        // whatever a renewal would answer now.
        if deadline.suspended_past() {
            on_watch(Watch::Lost(suspended_reason(length)));
            return;
        }
        let sent = Instant::now();
        let boot_sent = deadline.boot_now();
        match timeout_at(until, lease.renew()).await {
            Ok(Ok(renewal @ (Renewal::Renewed | Renewal::CancelRequested))) => {
                renewals.increment(1);
                deadline.set(sent, boot_sent, length);
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

fn suspended_reason(length: Duration) -> String {
    format!(
        "more than the lease of {} ms passed since the last renewal was sent, counting the time the host was suspended (a suspended host or VM: the server expired the lease meanwhile)",
        length.as_millis()
    )
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU32;
    use std::sync::Arc;

    use super::*;
    use crate::clock::Clock;
    use crate::guard::GuardError;
    use crate::registry::BoxFuture;

    const LEASE: Duration = Duration::from_secs(10);

    /// A lease whose server never expires it: every renewal succeeds, and is counted.
    struct Renewing {
        sent: Instant,
        renewals: Arc<AtomicU32>,
    }

    impl Lease for Renewing {
        fn fencing_token(&self) -> u64 {
            1
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

    fn anchored() -> Clock {
        Clock::anchored(chrono::DateTime::<chrono::Utc>::UNIX_EPOCH)
    }

    #[tokio::test(start_paused = true)]
    async fn a_suspend_longer_than_the_lease_loses_it_at_the_first_check_after_resume() {
        let clock = anchored();
        let boot = clock.boot();
        let sent = Instant::now();
        let deadline = LeaseDeadline::new(boot.clone(), sent, boot.now(), LEASE);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(!deadline.passed(), "1 s into a lease of 10 s");
        clock.suspend(Duration::from_secs(60));
        assert_eq!(
            sent.elapsed(),
            Duration::from_secs(1),
            "tokio's clock stood still"
        );
        assert!(
            deadline.passed(),
            "61 s passed since the acquire was sent, 60 of them suspended"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_suspend_shorter_than_what_is_left_of_the_lease_keeps_it() {
        let clock = anchored();
        let boot = clock.boot();
        let deadline = LeaseDeadline::new(boot.clone(), Instant::now(), boot.now(), LEASE);
        clock.suspend(Duration::from_secs(8));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(!deadline.passed(), "9 s of a lease of 10 s");
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(deadline.passed(), "10 s: the server may expire it now");
    }

    #[tokio::test(start_paused = true)]
    async fn the_watchdog_gives_up_a_lease_the_host_was_suspended_past_without_renewing_it() {
        let clock = anchored();
        let boot = clock.boot();
        let renewals = Arc::new(AtomicU32::new(0));
        let lease = Renewing {
            sent: Instant::now(),
            renewals: Arc::clone(&renewals),
        };
        let deadline = LeaseDeadline::new(boot.clone(), lease.sent, boot.now(), LEASE);
        let renewed = metrics::Counter::noop();
        let mut told = Vec::new();
        let watching = watch(&lease, &renewed, &deadline, |w| {
            told.push(match w {
                Watch::Lost(reason) => reason,
                Watch::CancelRequested => "cancel requested".to_owned(),
            });
        });
        // Before the first renewal (at a third of the lease) the host sleeps for a minute.
        clock.suspend(Duration::from_secs(60));
        let ended = tokio::time::timeout(LEASE, watching).await;
        assert!(ended.is_ok(), "the watchdog gave the lease up");
        assert_eq!(told.len(), 1, "{told:?}");
        assert!(told[0].contains("suspended"), "{told:?}");
        assert_eq!(
            renewals.load(Ordering::SeqCst),
            0,
            "no renewal of a lease the server expired meanwhile"
        );
    }
}
