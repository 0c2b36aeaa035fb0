//! Schedules from configuration: [`Schedule::from_settings`], [`FromStr`] and (feature `serde`)
//! `Deserialize`, with exactly the checks of the `#[scheduled]` attribute.

use std::str::FromStr;

use crate::{parse_duration_millis, parse_time_zone, Schedule, ScheduleError};

impl Schedule {
    /// A schedule from the settings of a job as a configuration file holds them: a cron
    /// expression with an optional IANA time zone (UTC by default), or an interval — the `cron`,
    /// `tz` and `every` arguments of `#[scheduled]`, with the same rules: exactly one of `cron`
    /// and `every`, `tz` only with `cron`, an interval of whole milliseconds (`500ms`, `30s`,
    /// `1h 30m`).
    ///
    /// ```
    /// use cronguard_schedule::{Schedule, ScheduleError};
    ///
    /// let nightly = Schedule::from_settings(Some("30 2 * * *"), None, Some("Europe/Berlin"))?;
    /// assert_eq!(nightly.describe(), "at 02:30 every day (Europe/Berlin)");
    /// let poll = Schedule::from_settings(None, Some("30s"), None)?;
    /// assert_eq!(poll.describe(), "every 30 seconds");
    /// assert_eq!(
    ///     Schedule::from_settings(None, Some("30s"), Some("UTC")).expect_err("invalid"),
    ///     ScheduleError::TimeZoneWithEvery
    /// );
    /// # Ok::<(), ScheduleError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// A [`ScheduleError`] saying what is wrong and how to fix it; for a cron expression, its
    /// [`CronError`](crate::CronError) carries the position of the part at fault.
    pub fn from_settings(
        cron: Option<&str>,
        every: Option<&str>,
        tz: Option<&str>,
    ) -> Result<Schedule, ScheduleError> {
        match (cron, every) {
            (Some(_), Some(_)) => Err(ScheduleError::CronAndEvery),
            (None, None) => Err(ScheduleError::NoSchedule),
            (Some(cron), None) => Schedule::cron(cron, tz.unwrap_or("UTC")),
            (None, Some(_)) if tz.is_some() => Err(ScheduleError::TimeZoneWithEvery),
            (None, Some(every)) => {
                Schedule::every(parse_duration_millis(every).map_err(ScheduleError::Interval)?)
            }
        }
    }
}

/// Parses one line: a cron expression in UTC (`0 30 2 * * *`, `@daily`), a cron expression
/// with its zone in front (`CRON_TZ=Europe/Berlin 30 2 * * *`, or `TZ=...`), or an interval
/// (`@every 30s`).
///
/// ```
/// use cronguard_schedule::Schedule;
///
/// let nightly: Schedule = "CRON_TZ=Europe/Berlin 30 2 * * *".parse()?;
/// assert_eq!(nightly.describe(), "at 02:30 every day (Europe/Berlin)");
/// let poll: Schedule = "@every 5m".parse()?;
/// assert_eq!(poll.describe(), "every 5 minutes");
/// # Ok::<(), cronguard_schedule::ScheduleError>(())
/// ```
impl FromStr for Schedule {
    type Err = ScheduleError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if let Some(shown) = parse_shown(text) {
            return shown;
        }
        let trimmed = text.trim_start_matches([' ', '\t']);
        if let Some(interval) = strip_prefix_ignore_case(trimmed, "@every") {
            if interval.starts_with([' ', '\t']) {
                return Schedule::from_settings(
                    None,
                    Some(interval.trim_matches([' ', '\t'])),
                    None,
                );
            }
        }
        for prefix in ["CRON_TZ=", "TZ="] {
            if let Some(rest) = trimmed.strip_prefix(prefix) {
                let (zone, expr) = rest.split_once([' ', '\t']).unwrap_or((rest, ""));
                let tz = parse_time_zone(zone)?;
                return Schedule::cron_in(expr, tz);
            }
        }
        Schedule::cron(text, "UTC")
    }
}

/// A schedule as its `Display` writes it (`cron `<expr>` in <zone>`, `every <duration>`), so
/// that what a program shows (a status, a roster) reads back; `None` when `text` is not that form.
fn parse_shown(text: &str) -> Option<Result<Schedule, ScheduleError>> {
    if let Some(rest) = text.strip_prefix("cron `") {
        let (expr, zone) = rest.rsplit_once("` in ")?;
        return Some(Schedule::cron(expr, zone));
    }
    let interval = text.strip_prefix("every ")?;
    Some(Schedule::from_settings(None, Some(interval), None))
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| text.get(prefix.len()..))
        .flatten()
}

#[cfg(feature = "serde")]
mod serde_impl {
    use std::fmt;

    use serde::de::{self, MapAccess, Visitor};
    use serde::{Deserialize, Deserializer};

    use crate::Schedule;

    /// A schedule from a string (see [`FromStr`](std::str::FromStr) for [`Schedule`]) or from a
    /// table with `cron` and `tz`, or `every` (see [`Schedule::from_settings`]).
    impl<'de> Deserialize<'de> for Schedule {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            deserializer.deserialize_any(ScheduleVisitor)
        }
    }

    struct ScheduleVisitor;

    impl<'de> Visitor<'de> for ScheduleVisitor {
        type Value = Schedule;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a cron expression such as \"0 30 2 * * *\", \"@every 30s\", or a table with `cron` and `tz`, or `every`")
        }

        fn visit_str<E: de::Error>(self, text: &str) -> Result<Schedule, E> {
            text.parse().map_err(E::custom)
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Schedule, A::Error> {
            let (mut cron, mut every, mut tz) = (None::<String>, None::<String>, None::<String>);
            while let Some(key) = map.next_key::<String>()? {
                let slot = match key.as_str() {
                    "cron" => &mut cron,
                    "every" => &mut every,
                    "tz" => &mut tz,
                    other => return Err(de::Error::unknown_field(other, &["cron", "every", "tz"])),
                };
                if slot.is_some() {
                    return Err(de::Error::custom(format_args!("duplicate field `{key}`")));
                }
                *slot = Some(map.next_value()?);
            }
            Schedule::from_settings(cron.as_deref(), every.as_deref(), tz.as_deref())
                .map_err(de::Error::custom)
        }
    }
}
