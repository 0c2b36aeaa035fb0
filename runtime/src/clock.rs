//! The wall clock the scheduler reads, and how it maps a fire instant to a timer deadline.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
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
    Anchored { wall: DateTime<Utc>, at: Instant },
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
            Source::Anchored { wall, at } => after(*wall, at.elapsed()),
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
}

impl Default for Clock {
    fn default() -> Self {
        Clock::system()
    }
}

/// `t + d`, saturating at the largest instant instead of overflowing (a grace can be huge).
pub(crate) fn after(t: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    if d.is_zero() {
        return t; // no jitter: every fire's start, without date arithmetic
    }
    TimeDelta::from_std(d)
        .ok()
        .and_then(|d| t.checked_add_signed(d))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// Milliseconds since the Unix epoch of a fire instant, the form fires are stored in by guards.
pub(crate) fn epoch_millis(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

/// Microseconds since the Unix epoch of the system clock: the floor of every fencing token.
pub(crate) fn system_micros() -> u64 {
    u64::try_from(Utc::now().timestamp_micros()).unwrap_or(0)
}
