//! The per-job limits as pure rules: when a fire may start (`jitter`), and whether and when a
//! failed run is tried again (`retries`, `backoff`). The executor only carries out what these
//! return; `timeout` is a deadline the executor puts on every attempt.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::clock::after;
use cronguard_schedule::MAX_BACKOFF;

/// A job's limits, as the model needs them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub(crate) struct Limits {
    /// Each attempt is cancelled after this long and reported as failed (timeout).
    pub(crate) timeout: Option<Duration>,
    /// Attempts after the first one that failed.
    pub(crate) retries: u32,
    /// The pause before the first retry; doubled for each further one, capped at [`MAX_BACKOFF`].
    pub(crate) backoff: Duration,
    /// Starts are spread over `[0, jitter)` after the fire time.
    pub(crate) jitter: Option<Duration>,
}

/// FNV-1a, 64 bits: a hash fixed by its specification, so that every build, platform and Rust
/// version (unlike `std`'s `DefaultHasher`) and therefore every replica computes the same value.
pub(crate) fn fnv1a64(parts: &[&[u8]]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut hash = OFFSET;
    for byte in parts.iter().flat_map(|p| p.iter()) {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(PRIME);
    }
    hash
}

/// How long after its fire time `t` the fire of `job` starts: a whole number of milliseconds in
/// `[0, jitter)` from FNV-1a 64 over the job's name, a `0xFF` byte (never part of UTF-8) and `t`
/// as milliseconds since the Unix epoch (little-endian `i64`), modulo the jitter in milliseconds.
pub(crate) fn jitter_delay(job: &str, t: DateTime<Utc>, jitter: Option<Duration>) -> Duration {
    let Some(span) = jitter.map(|j| u64::try_from(j.as_millis()).unwrap_or(u64::MAX)) else {
        return Duration::ZERO;
    };
    if span == 0 {
        return Duration::ZERO;
    }
    let hash = fnv1a64(&[job.as_bytes(), &[0xFF], &t.timestamp_millis().to_le_bytes()]);
    Duration::from_millis(hash % span)
}

/// The pause after failed attempt `failed` (1-based): `backoff × 2^(failed-1)`, capped at
/// [`MAX_BACKOFF`].
pub(crate) fn backoff_after(backoff: Duration, failed: u32) -> Duration {
    let doublings = failed.saturating_sub(1).min(31);
    backoff.saturating_mul(1 << doublings).min(MAX_BACKOFF)
}

/// When attempt `failed + 1` of a fire starts, or `None` when it may not: no retry is left, or it
/// could not start before the fire's misfire deadline (`window_end`) and before the job's next
/// scheduled fire (`next_fire`).
pub(crate) fn next_attempt(
    limits: &Limits,
    failed: u32,
    now: DateTime<Utc>,
    window_end: DateTime<Utc>,
    next_fire: Option<DateTime<Utc>>,
) -> Option<DateTime<Utc>> {
    if failed == 0 || failed > limits.retries {
        return None;
    }
    let at = after(now, backoff_after(limits.backoff, failed));
    (at < window_end && next_fire.is_none_or(|n| at < n)).then_some(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> DateTime<Utc> {
        DateTime::<Utc>::from_timestamp(1_767_225_600 + s, 0).expect("in range")
    }

    #[test]
    fn fnv1a64_matches_its_reference_values() {
        // From the FNV specification's test suite.
        assert_eq!(fnv1a64(&[b""]), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(&[b"a"]), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(&[b"foo", b"bar"]), fnv1a64(&[b"foobar"]));
        assert_eq!(fnv1a64(&[b"foobar"]), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn the_jitter_is_the_same_everywhere_differs_across_fires_and_stays_in_range() {
        let jitter = Some(Duration::from_secs(30));
        // A value pinned here: every build and platform must compute exactly it.
        let pinned = jitter_delay("reports::nightly", t(0), jitter);
        assert_eq!(pinned, jitter_delay("reports::nightly", t(0), jitter));
        assert_eq!(pinned, Duration::from_millis(PINNED_DELAY_MS));
        let delays: Vec<Duration> = (0..200)
            .map(|k| jitter_delay("reports::nightly", t(k * 60), jitter))
            .collect();
        assert!(delays.iter().all(|d| *d < Duration::from_secs(30)));
        let distinct: std::collections::BTreeSet<_> = delays.iter().collect();
        assert!(distinct.len() > 150, "{} distinct", distinct.len());
        assert_ne!(
            jitter_delay("a", t(0), jitter),
            jitter_delay("b", t(0), jitter)
        );
        assert_eq!(jitter_delay("a", t(0), None), Duration::ZERO);
    }

    /// Computed independently of this code (FNV-1a 64 by hand over the same bytes).
    const PINNED_DELAY_MS: u64 = 17_670;

    #[test]
    fn the_backoff_doubles_and_is_capped() {
        let ten = Duration::from_secs(10);
        assert_eq!(backoff_after(ten, 1), ten);
        assert_eq!(backoff_after(ten, 2), Duration::from_secs(20));
        assert_eq!(backoff_after(ten, 3), Duration::from_secs(40));
        assert_eq!(backoff_after(ten, 12), MAX_BACKOFF);
        assert_eq!(backoff_after(ten, u32::MAX), MAX_BACKOFF);
    }

    #[test]
    fn a_retry_starts_only_inside_the_window() {
        let limits = Limits {
            retries: 3,
            backoff: Duration::from_secs(10),
            ..Limits::default()
        };
        let end = t(60);
        assert_eq!(next_attempt(&limits, 1, t(5), end, None), Some(t(15)));
        assert_eq!(next_attempt(&limits, 2, t(16), end, None), Some(t(36)));
        // 40 s after second 36 is past the misfire deadline.
        assert_eq!(next_attempt(&limits, 3, t(36), end, None), None);
        // The next fire closes the window too.
        assert_eq!(next_attempt(&limits, 1, t(5), end, Some(t(15))), None);
        assert_eq!(
            next_attempt(&limits, 4, t(0), t(10_000), None),
            None,
            "no retry left"
        );
        let none = Limits::default();
        assert_eq!(next_attempt(&none, 1, t(0), end, None), None);
    }
}
