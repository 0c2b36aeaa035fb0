//! The wall clock the scheduler reads, how it maps a fire instant to a timer deadline, and the
//! clock that counts the time a host spends suspended.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, NaiveTime, TimeDelta, Timelike, Utc};
use tokio::time::Instant;

/// The scheduler's view of wall-clock time.
///
/// Fire instants are wall-clock times (UTC); timers run on tokio's monotonic clock. A `Clock`
/// converts between the two.
///
/// - [`Clock::system`] (the default) reads the system clock at every step, so a clock that is
///   corrected by NTP is followed.
/// - [`Clock::anchored`] reads a fixed wall-clock instant plus the time elapsed on tokio's clock.
///   On a paused tokio clock (`#[tokio::test(start_paused = true)]`) the whole scheduler then runs
///   on virtual time, which makes scheduling tests exact and instant.
/// - [`Clock::with_offset`] shifts either clock, to test replicas whose clocks disagree.
///
/// ```
/// use cronguard::Clock;
/// let skewed = Clock::system().with_offset(chrono::TimeDelta::milliseconds(-400));
/// assert!(skewed.now() < Clock::system().now());
/// ```
#[derive(Debug, Clone)]
pub struct Clock {
    source: Source,
    offset: TimeDelta,
}

#[derive(Debug, Clone)]
enum Source {
    System,
    Anchored {
        wall: DateTime<Utc>,
        at: Instant,
        /// Nanoseconds the host "was suspended", as a test simulates it (see [`BootClock`]).
        suspended: Arc<AtomicU64>,
    },
}

/// The longest single timer wait. The monotonic clock stops while a machine is suspended, so a
/// wait is re-checked against the wall clock at least this often.
pub(crate) const MAX_TIMER_WAIT: Duration = Duration::from_secs(300);

impl Clock {
    /// The system clock.
    pub fn system() -> Self {
        Clock {
            source: Source::System,
            offset: TimeDelta::zero(),
        }
    }

    /// A clock that reads `wall` now and advances with tokio's clock from here on.
    pub fn anchored(wall: DateTime<Utc>) -> Self {
        Clock {
            source: Source::Anchored {
                wall,
                at: Instant::now(),
                suspended: Arc::default(),
            },
            offset: TimeDelta::zero(),
        }
    }

    /// The same clock shifted by `offset` (positive: ahead, negative: behind).
    pub fn with_offset(mut self, offset: TimeDelta) -> Self {
        self.offset += offset;
        self
    }

    /// The current wall-clock time.
    pub fn now(&self) -> DateTime<Utc> {
        let raw = match &self.source {
            Source::System => Utc::now(),
            Source::Anchored {
                wall,
                at,
                suspended,
            } => after(*wall, at.elapsed() + nanos(suspended)),
        };
        if self.offset.is_zero() {
            return raw;
        }
        raw.checked_add_signed(self.offset).unwrap_or(raw)
    }

    /// The tokio instant at which the wall clock is expected to read `wall`, capped at
    /// [`MAX_TIMER_WAIT`] from now.
    pub(crate) fn deadline_for(&self, wall: DateTime<Utc>) -> Instant {
        let wait = (wall - self.now()).to_std().unwrap_or(Duration::ZERO);
        Instant::now() + wait.min(MAX_TIMER_WAIT)
    }

    /// The clock that goes on while the host is suspended, for the lease deadlines
    /// (see [`BootClock`]).
    pub(crate) fn boot(&self) -> BootClock {
        match &self.source {
            Source::System => BootClock::Host,
            Source::Anchored { at, suspended, .. } => BootClock::Virtual {
                at: *at,
                suspended: Arc::clone(suspended),
            },
        }
    }

    /// Simulates a suspend of the host for `length` on an anchored clock: tokio's clock (the
    /// monotonic one) stands still while the wall clock and the [`BootClock`] move on by
    /// `length`. Nothing happens on a system clock.
    #[cfg(test)]
    pub(crate) fn suspend(&self, length: Duration) {
        if let Source::Anchored { suspended, .. } = &self.source {
            let add = u64::try_from(length.as_nanos()).unwrap_or(u64::MAX);
            let _ = suspended.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                Some(n.saturating_add(add))
            });
        }
    }
}

fn nanos(cell: &AtomicU64) -> Duration {
    Duration::from_nanos(cell.load(Ordering::Acquire))
}

/// Time that goes on while the host is suspended, which tokio's clock does not count: tokio's
/// `Instant` is the monotonic clock (`CLOCK_MONOTONIC` on Linux), which stands still while a host
/// or VM is suspended, while the guard's server goes on and expires the lease. A lease counts as
/// lost once this clock says that the lease has passed since its acquire or last renewal was
/// sent (docs/design/guarantees.md, guarantee 2).
///
/// A reading is a duration from an origin of the clock's own, comparable only with readings of
/// the same `BootClock`; `None` when the clock cannot be read, and then nothing is judged by it.
#[derive(Debug, Clone)]
pub(crate) enum BootClock {
    /// The host's: `CLOCK_BOOTTIME` on Linux and Android. Elsewhere the wall clock, which also
    /// goes on while the host is suspended: a step of it forward (a clock set by hand, NTP
    /// correcting a clock far behind) may make a lease count as lost, and the run is then
    /// cancelled and reported; a step back hides a suspend of the same length
    /// (docs/design/guarantees.md, "What does not hold").
    Host,
    /// tokio's clock from `at` plus the suspends simulated through [`Clock::suspend`]: the
    /// clock of [`Clock::anchored`].
    Virtual {
        at: Instant,
        suspended: Arc<AtomicU64>,
    },
}

impl BootClock {
    /// The current reading.
    pub(crate) fn now(&self) -> Option<Duration> {
        match self {
            BootClock::Host => host_boot_time(),
            BootClock::Virtual { at, suspended } => Some(at.elapsed() + nanos(suspended)),
        }
    }
}

/// `CLOCK_BOOTTIME`: the monotonic clock plus the time the host spent suspended.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn host_boot_time() -> Option<Duration> {
    use nix::time::{clock_gettime, ClockId};
    clock_gettime(ClockId::CLOCK_BOOTTIME)
        .ok()
        .map(Duration::from)
}

/// The wall clock, where no clock that counts suspend is read (see [`BootClock::Host`]).
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn host_boot_time() -> Option<Duration> {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()
}

impl Default for Clock {
    fn default() -> Self {
        Clock::system()
    }
}

/// `t + d`, saturating at the largest instant instead of overflowing (a grace can be huge).
/// The job models add durations to instants several times per fire, so the common case — a
/// result on the same day or the next — keeps the date and rebuilds the time of day, and never
/// turns a day number into a date; any other case is computed on the Unix timestamp.
pub(crate) fn after(t: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    if d.is_zero() {
        return t; // no jitter: every fire's start
    }
    let naive = t.naive_utc();
    let time = naive.time();
    let nanos = time.nanosecond();
    if nanos >= NANOS_PER_SECOND {
        // A leap second, which only a parsed instant can hold.
        return TimeDelta::from_std(d)
            .ok()
            .and_then(|d| t.checked_add_signed(d))
            .unwrap_or(DateTime::<Utc>::MAX_UTC);
    }
    if d < ONE_DAY {
        // Below two days' worth of nanoseconds: no overflow.
        let of_day = u64::from(time.num_seconds_from_midnight()) * NANOS_PER_SECOND_U64
            + u64::from(nanos)
            + d.as_secs() * NANOS_PER_SECOND_U64
            + u64::from(d.subsec_nanos());
        let (date, of_day) = if of_day < NANOS_PER_DAY {
            (Some(naive.date()), of_day)
        } else {
            (naive.date().succ_opt(), of_day - NANOS_PER_DAY)
        };
        let time = NaiveTime::from_num_seconds_from_midnight_opt(
            u32::try_from(of_day / NANOS_PER_SECOND_U64).unwrap_or(u32::MAX),
            u32::try_from(of_day % NANOS_PER_SECOND_U64).unwrap_or(u32::MAX),
        );
        return match (date, time) {
            (Some(date), Some(time)) => date.and_time(time).and_utc(),
            _ => DateTime::<Utc>::MAX_UTC, // past the last date
        };
    }
    let nanos = nanos + d.subsec_nanos(); // below two seconds' worth: no overflow
    let secs = i64::try_from(d.as_secs())
        .ok()
        .and_then(|s| t.timestamp().checked_add(s))
        .and_then(|s| s.checked_add(i64::from(nanos / NANOS_PER_SECOND)));
    secs.and_then(|s| DateTime::from_timestamp(s, nanos % NANOS_PER_SECOND))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// `later - earlier`, or zero when `later` is not later. Computed on the Unix timestamps, as
/// [`after`] is.
pub(crate) fn since(earlier: DateTime<Utc>, later: DateTime<Utc>) -> Duration {
    match nanos_between(earlier, later) {
        Some(ns) => Duration::from_nanos(u64::try_from(ns).unwrap_or(0)),
        None => (later - earlier).to_std().unwrap_or_default(),
    }
}

/// `later - earlier` in nanoseconds; `None` when that does not fit (about 292 years). Two
/// instants of the same day (the common case) are compared by their time of day alone.
pub(crate) fn nanos_between(earlier: DateTime<Utc>, later: DateTime<Utc>) -> Option<i64> {
    let (a, b) = (earlier.naive_utc(), later.naive_utc());
    let secs = if a.date() == b.date() {
        i64::from(b.time().num_seconds_from_midnight())
            - i64::from(a.time().num_seconds_from_midnight())
    } else {
        later.timestamp().checked_sub(earlier.timestamp())?
    };
    let nanos = i64::from(b.time().nanosecond()) - i64::from(a.time().nanosecond());
    secs.checked_mul(i64::from(NANOS_PER_SECOND))?
        .checked_add(nanos)
}

const NANOS_PER_SECOND: u32 = 1_000_000_000;
const NANOS_PER_SECOND_U64: u64 = 1_000_000_000;
const NANOS_PER_DAY: u64 = 86_400 * NANOS_PER_SECOND_U64;
const ONE_DAY: Duration = Duration::from_secs(86_400);

/// Milliseconds since the Unix epoch of a fire instant, the form fires are stored in by guards.
pub(crate) fn epoch_millis(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

/// Microseconds since the Unix epoch of the system clock: the floor of every fencing token.
pub(crate) fn system_micros() -> u64 {
    u64::try_from(Utc::now().timestamp_micros()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Instants around the epoch, today, a leap second, and both ends of chrono's range.
    fn instants() -> Vec<DateTime<Utc>> {
        let leap = chrono::NaiveDate::from_ymd_opt(2016, 12, 31)
            .and_then(|d| d.and_hms_nano_opt(23, 59, 59, 1_500_000_000))
            .expect("a leap second")
            .and_utc();
        let mut all = vec![
            DateTime::<Utc>::MIN_UTC,
            DateTime::<Utc>::MAX_UTC,
            DateTime::<Utc>::UNIX_EPOCH,
            leap,
        ];
        for (secs, nanos) in [
            (-1, 999_999_999),
            (1_767_225_599, 999_999_999),
            (1_767_225_600, 0),
            (1_767_225_600, 123_456_789),
            // The end of a leap year, of February, and a second before the last instant: a
            // sum within a day that moves the date by one.
            (1_735_689_599, 500_000_000),
            (1_772_323_199, 999_999_999),
            (DateTime::<Utc>::MAX_UTC.timestamp() - 1, 0),
            // The day of the leap second above.
            (1_483_185_600, 0),
        ] {
            all.push(DateTime::from_timestamp(secs, nanos).expect("in range"));
        }
        all
    }

    fn durations() -> [Duration; 11] {
        [
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::from_millis(999),
            Duration::from_nanos(1_000_000_001),
            Duration::from_secs(1),
            Duration::from_secs(43_200),
            Duration::from_nanos(86_400_000_000_000 - 1),
            Duration::from_secs(86_400),
            Duration::from_secs(86_400 * 366),
            Duration::from_secs(u64::MAX / 2),
            Duration::MAX,
        ]
    }

    #[tokio::test(start_paused = true)]
    async fn a_simulated_suspend_moves_the_wall_and_boot_clocks_but_not_tokios() {
        let wall = DateTime::<Utc>::UNIX_EPOCH;
        let clock = Clock::anchored(wall);
        let boot = clock.boot();
        let (mono, booted) = (Instant::now(), boot.now());
        clock.suspend(Duration::from_secs(90));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(mono.elapsed(), Duration::from_secs(1));
        assert_eq!(clock.now(), after(wall, Duration::from_secs(91)));
        assert_eq!(
            boot.now().zip(booted).map(|(now, then)| now - then),
            Some(Duration::from_secs(91))
        );
        Clock::system().suspend(Duration::from_secs(90)); // nothing to simulate
    }

    #[test]
    fn the_hosts_boot_clock_reads_and_goes_forward() {
        let first = BootClock::Host.now().expect("the host's clock reads");
        let second = BootClock::Host.now().expect("the host's clock reads");
        assert!(second >= first);
    }

    #[test]
    fn after_is_calendar_addition_saturated_at_the_largest_instant() {
        for t in instants() {
            for d in durations() {
                let calendar = TimeDelta::from_std(d)
                    .ok()
                    .and_then(|d| t.checked_add_signed(d))
                    .unwrap_or(DateTime::<Utc>::MAX_UTC);
                assert_eq!(after(t, d), calendar, "{t} + {d:?}");
            }
        }
    }

    #[test]
    fn since_and_nanos_between_are_calendar_subtraction() {
        for a in instants() {
            for b in instants() {
                assert_eq!(nanos_between(a, b), (b - a).num_nanoseconds(), "{b} - {a}");
                assert_eq!(
                    since(a, b),
                    (b - a).to_std().unwrap_or_default(),
                    "{b} - {a}"
                );
            }
        }
    }
}
