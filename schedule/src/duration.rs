use std::time::Duration;

use crate::DurationError;

/// The default `lease` of a shared guard (`lease = "..."`), used by the macro and the runtime.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// The default `misfire_grace`, used by the macro and the runtime.
pub const DEFAULT_MISFIRE_GRACE: Duration = Duration::from_secs(60);

/// The shortest `lease` of a `redis` guard: 100 ms. A holder renews its lease every third of it,
/// so a shorter lease would need a round trip to Redis every few milliseconds and would expire
/// under an ordinary network delay or a short pause of the process.
pub const MIN_LEASE: Duration = Duration::from_millis(100);

/// The longest `lease` of a `redis` guard: 24 h. A holder that dies keeps the job for up to one
/// lease, and the lease goes to Redis as `PX` milliseconds, which must not overflow (Redis also
/// rejects an expiry whose end does not fit its clock).
pub const MAX_LEASE: Duration = Duration::from_secs(24 * 60 * 60);

/// Checks a lease against [`MIN_LEASE`] and [`MAX_LEASE`]. The error completes a sentence that
/// names the lease ("the lease of 10ms ..."), and says the valid range and why.
pub fn check_lease(lease: Duration) -> Result<(), String> {
    if (MIN_LEASE..=MAX_LEASE).contains(&lease) {
        return Ok(());
    }
    let why = if lease < MIN_LEASE {
        "it is renewed every third of its length, so a shorter lease expires under an ordinary network delay"
    } else {
        "a holder that dies keeps the job for up to one lease"
    };
    Err(format!(
        "is out of range; give a lease from {LEASE_RANGE} ({why})"
    ))
}

/// [`MIN_LEASE`] to [`MAX_LEASE`] in words (a test keeps them in step).
const LEASE_RANGE: &str = "100ms to 24h";

/// Parses a human duration such as `500ms`, `30s`, `5m`, `1h 30m`; zero is rejected.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let parsed = humantime::parse_duration(text.trim()).map_err(|e| DurationError::Invalid {
        text: text.to_owned(),
        reason: e.to_string(),
    })?;
    if parsed.is_zero() {
        return Err(DurationError::Zero {
            text: text.to_owned(),
        });
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_limits() {
        assert!(check_lease(MIN_LEASE).is_ok());
        assert!(check_lease(MAX_LEASE).is_ok());
        let short = check_lease(Duration::from_millis(99)).expect_err("too short");
        assert!(
            short.starts_with("is out of range; give a lease from 100ms to 24h"),
            "{short}"
        );
        let (min, max) = LEASE_RANGE.split_once(" to ").expect("two ends");
        assert_eq!(parse_duration(min).ok(), Some(MIN_LEASE));
        assert_eq!(parse_duration(max).ok(), Some(MAX_LEASE));
        assert!(check_lease(MAX_LEASE + Duration::from_millis(1)).is_err());
        assert!(check_lease(Duration::MAX).is_err());
        assert!(check_lease(Duration::ZERO).is_err());
    }
}
