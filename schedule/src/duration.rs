use std::time::Duration;

use crate::DurationError;

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
