use std::fmt;

/// A cron expression that cronguard rejects, with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronError {
    pub(crate) message: String,
}

impl CronError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        CronError {
            message: message.into(),
        }
    }

    /// The reason, lowercase and without the expression itself (for compiler messages).
    pub fn reason(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for CronError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CronError {}

/// A time zone name that is not in the IANA database.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown time zone `{name}`; use an IANA name such as `Europe/Berlin`, `America/New_York` or `UTC`{}", suggestion.as_ref().map(|s| format!(" (did you mean `{s}`?)")).unwrap_or_default())]
pub struct TimeZoneError {
    pub(crate) name: String,
    pub(crate) suggestion: Option<String>,
}

impl TimeZoneError {
    /// The name as given.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The closest known IANA name, when one is close enough to be a likely intent.
    pub fn suggestion(&self) -> Option<&str> {
        self.suggestion.as_deref()
    }
}

/// A duration that does not parse, or is zero.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DurationError {
    /// The text is not a duration.
    #[error("`{text}` is not a duration ({reason}); write a number with a unit, such as `500ms`, `30s`, `5m` or `1h`")]
    Invalid {
        /// What was given.
        text: String,
        /// Why it does not parse.
        reason: String,
    },
    /// The duration is zero.
    #[error("the duration `{text}` is zero; give a positive duration such as `30s`")]
    Zero {
        /// What was given.
        text: String,
    },
}

/// Why a [`Schedule`](crate::Schedule) could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScheduleError {
    /// The cron expression is invalid.
    #[error("invalid cron expression `{expr}`: {source}")]
    Cron {
        /// The expression as given.
        expr: String,
        /// Why it is invalid.
        #[source]
        source: CronError,
    },
    /// The time zone is unknown.
    #[error(transparent)]
    TimeZone(#[from] TimeZoneError),
    /// The interval is zero.
    #[error("an interval of zero is not allowed; give a positive interval such as `30s`")]
    ZeroInterval,
}
