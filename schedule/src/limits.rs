//! The ranges of the per-job limits `timeout`, `retries`, `backoff` and `jitter`, shared by the
//! `#[scheduled]` macro, [`Job`](https://docs.rs/cronguard) and configuration files, so that all
//! three accept exactly the same values.

use std::time::Duration;

use crate::Schedule;

/// The most `retries` a job may have: 100. Every attempt must start inside the fire's window
/// anyway, so more attempts than this only hide a job that never works.
pub const MAX_RETRIES: u32 = 100;

/// The pause before the first retry when `retries` is given without `backoff`: 1 s.
pub const DEFAULT_BACKOFF: Duration = Duration::from_secs(1);

/// The longest pause between two attempts: 1 h. The pause before retry `k` (1-based) is
/// `backoff × 2^(k-1)`, capped here; `backoff` itself may not exceed it.
pub const MAX_BACKOFF: Duration = Duration::from_secs(60 * 60);

/// The longest `timeout`: 7 days.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// The longest `jitter`: 24 h.
pub const MAX_JITTER: Duration = Duration::from_secs(24 * 60 * 60);

/// How long a process that did not get a shared-guard job's last fire waits before it claims the
/// next one, unless the job says otherwise (`standby`): 1 s.
pub const DEFAULT_STANDBY: Duration = Duration::from_secs(1);

/// The longest `standby`: 1 h (it is cut to half the misfire grace and half the time between two
/// fires anyway).
pub const MAX_STANDBY: Duration = Duration::from_secs(60 * 60);

/// Checks `retries` against [`MAX_RETRIES`]. The error completes a sentence that names the
/// setting ("`retries = 500` ...").
pub fn check_retries(retries: u32) -> Result<(), String> {
    if retries <= MAX_RETRIES {
        return Ok(());
    }
    Err(format!(
        "is too many; give at most {MAX_RETRIES} retries (every attempt must start within the fire's misfire grace anyway)"
    ))
}

/// Checks `backoff` (1 ms to [`MAX_BACKOFF`]). The error completes a sentence that names it.
pub fn check_backoff(backoff: Duration) -> Result<(), String> {
    in_range(
        backoff,
        MAX_BACKOFF,
        "1h",
        "the pause doubles with every retry and is capped at 1h",
    )
}

/// Checks `timeout` (1 ms to [`MAX_TIMEOUT`]). The error completes a sentence that names it.
pub fn check_timeout(timeout: Duration) -> Result<(), String> {
    in_range(
        timeout,
        MAX_TIMEOUT,
        "7d",
        "leave `timeout` out for runs without a deadline",
    )
}

/// Checks `jitter` (1 ms to [`MAX_JITTER`]). The error completes a sentence that names it.
pub fn check_jitter(jitter: Duration) -> Result<(), String> {
    in_range(
        jitter,
        MAX_JITTER,
        "24h",
        "keep it well below the interval between fires",
    )
}

/// Checks `jitter` against the job's schedule: it must be shorter than the schedule's
/// [`shortest_gap`](Schedule::shortest_gap), or a fire's start could come after the next fire's
/// instant. The error completes a sentence that names it.
pub fn check_jitter_for(jitter: Duration, schedule: &Schedule) -> Result<(), String> {
    let gap = schedule.shortest_gap();
    if jitter < gap {
        return Ok(());
    }
    let gap = humantime::format_duration(gap);
    Err(format!(
        "is not shorter than the shortest gap between two fires of the schedule ({gap}), so a fire could start after the next one is due; give a jitter below {gap} (well below it, so that the runs stay apart), or a schedule whose fires are further apart"
    ))
}

/// Checks `standby` (0, which turns it off, to [`MAX_STANDBY`]). The error completes a sentence
/// that names it.
pub fn check_standby(standby: Duration) -> Result<(), String> {
    if standby <= MAX_STANDBY {
        return Ok(());
    }
    Err("is out of range; give a duration from 0s (every process claims at once) to 1h (it is cut to half the misfire grace anyway)".to_owned())
}

fn in_range(value: Duration, max: Duration, max_text: &str, why: &str) -> Result<(), String> {
    if value >= Duration::from_millis(1) && value <= max {
        return Ok(());
    }
    Err(format!(
        "is out of range; give a duration from 1ms to {max_text} ({why})"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_duration;

    #[test]
    fn ranges_match_their_words() {
        assert_eq!(parse_duration("1h").ok(), Some(MAX_BACKOFF));
        assert_eq!(parse_duration("7d").ok(), Some(MAX_TIMEOUT));
        assert_eq!(parse_duration("24h").ok(), Some(MAX_JITTER));
        assert!(check_backoff(MAX_BACKOFF).is_ok());
        assert!(check_backoff(MAX_BACKOFF + Duration::from_millis(1)).is_err());
        assert!(check_timeout(Duration::ZERO).is_err());
        assert!(check_jitter(MAX_JITTER + Duration::from_millis(1)).is_err());
        let hourly = Schedule::cron("0 * * * *", "UTC").expect("valid");
        assert!(check_jitter_for(Duration::from_secs(59 * 60), &hourly).is_ok());
        let equal = check_jitter_for(Duration::from_secs(60 * 60), &hourly).expect_err("a gap");
        assert!(equal.contains("below 1h"), "{equal}");
        assert!(check_retries(MAX_RETRIES).is_ok());
        let many = check_retries(MAX_RETRIES + 1).expect_err("too many");
        assert!(many.contains("at most 100"), "{many}");
    }
}
