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

/// Parses a duration of a job setting (`every`, `lease`, `misfire_grace`): as
/// [`parse_duration`], and a whole number of milliseconds from 1 ms up, the unit the `#[scheduled]`
/// macro and the runtime count in. The macro and configuration files go through this one check.
pub fn parse_duration_millis(text: &str) -> Result<Duration, DurationError> {
    const MILLI: u32 = 1_000_000;
    let duration = parse_duration(text)?;
    let text = text.to_owned();
    if duration < Duration::from_millis(1) {
        return Err(DurationError::SubMillisecond { text });
    }
    if duration.subsec_nanos() % MILLI != 0 {
        let down = duration.as_millis();
        return Err(DurationError::FractionOfMillisecond {
            text,
            down,
            up: down + 1,
        });
    }
    if u64::try_from(duration.as_millis()).is_err() {
        return Err(DurationError::TooLong { text });
    }
    Ok(duration)
}

/// [`parse_duration_millis`] for a setting where zero means "none" (`standby = "0s"`).
pub fn parse_duration_millis_or_zero(text: &str) -> Result<Duration, DurationError> {
    match parse_duration(text) {
        Err(DurationError::Zero { .. }) => Ok(Duration::ZERO),
        _ => parse_duration_millis(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_is_a_duration_only_where_it_means_none() {
        assert_eq!(parse_duration_millis_or_zero("0s"), Ok(Duration::ZERO));
        assert_eq!(
            parse_duration_millis_or_zero("250ms"),
            Ok(Duration::from_millis(250))
        );
        assert!(parse_duration_millis_or_zero("500us").is_err());
        assert!(parse_duration_millis_or_zero("soon").is_err());
    }

    #[test]
    fn setting_durations_are_whole_milliseconds() {
        assert_eq!(parse_duration_millis("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration_millis("1ms"), Ok(Duration::from_millis(1)));
        let short = parse_duration_millis("500us").expect_err("under 1ms");
        assert!(short.to_string().contains("shorter than 1ms"), "{short}");
        let fraction = parse_duration_millis("1500us").expect_err("a fraction");
        assert!(
            fraction.to_string().contains("write `1ms` or `2ms`"),
            "{fraction}"
        );
        assert!(parse_duration_millis("0s").is_err());
        assert!(parse_duration_millis("soon").is_err());
    }

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
