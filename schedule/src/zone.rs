use chrono_tz::Tz;

use crate::TimeZoneError;

/// Parses an IANA time zone name such as `Europe/Berlin` or `UTC`.
pub fn parse_time_zone(name: &str) -> Result<Tz, TimeZoneError> {
    name.parse::<Tz>().map_err(|_| TimeZoneError {
        name: name.to_owned(),
        suggestion: None,
    })
}
