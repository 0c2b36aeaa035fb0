use std::fmt;
use std::ops::Range;

/// A cron expression that cronguard rejects, with the reason and, where one part of the
/// expression is at fault, its position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronError {
    pub(crate) message: String,
    /// Byte range of the offending part in the expression as given.
    pub(crate) span: Option<Range<usize>>,
    /// 1-based column (in characters) of the span's start.
    pub(crate) column: Option<usize>,
}

impl CronError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        CronError {
            message: message.into(),
            span: None,
            column: None,
        }
    }

    /// Marks `len` bytes from `at` as the offending part, unless a narrower part is marked.
    pub(crate) fn spanning(mut self, at: usize, len: usize) -> Self {
        if self.span.is_none() {
            self.span = Some(at..at + len);
        }
        self
    }

    /// Moves a span relative to a part that starts at `at` into the enclosing text; without a
    /// span, the whole part (`len` bytes) is marked.
    pub(crate) fn shifted(mut self, at: usize, len: usize) -> Self {
        self.span = Some(match self.span.take() {
            Some(span) => span.start + at..span.end + at,
            None => at..at + len,
        });
        self
    }

    /// Computes the column of the span in `expr`, the expression as given.
    pub(crate) fn located_in(mut self, expr: &str) -> Self {
        self.column = self
            .span
            .as_ref()
            .and_then(|span| expr.get(..span.start))
            .map(|before| before.chars().count() + 1);
        self
    }

    /// The reason, lowercase and without the expression itself (for compiler messages).
    pub fn reason(&self) -> &str {
        &self.message
    }

    /// The byte range of the offending part (a field, an item or one character) in the
    /// expression as given; `None` when the expression as a whole is at fault (a wrong number
    /// of fields, a date that never occurs).
    pub fn span(&self) -> Option<Range<usize>> {
        self.span.clone()
    }

    /// The 1-based column, counted in characters, where the offending part starts.
    pub fn column(&self) -> Option<usize> {
        self.column
    }

    /// The whole message for `expr`, the expression as given: "invalid cron expression `...` at
    /// column N: reason". Characters other than printable ASCII, space and tab are shown escaped
    /// (`\u{a0}`), so a hidden character is visible. The `#[scheduled]` macro and
    /// [`ScheduleError`] both print this.
    pub fn message_for(&self, expr: &str) -> String {
        let shown: String = expr
            .chars()
            .map(|c| {
                if c.is_ascii_graphic() || c == ' ' || c == '\t' {
                    c.to_string()
                } else {
                    format!("\\u{{{:x}}}", u32::from(c))
                }
            })
            .collect();
        let at = self
            .column
            .map(|c| format!(" at column {c}"))
            .unwrap_or_default();
        format!("invalid cron expression `{shown}`{at}: {}", self.message)
    }
}

impl fmt::Display for CronError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.column {
            Some(column) => write!(f, "at column {column}: {}", self.message),
            None => f.write_str(&self.message),
        }
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
    /// A job setting shorter than a millisecond.
    #[error("`{text}` is shorter than 1ms; cronguard counts durations in whole milliseconds, so give at least `1ms`")]
    SubMillisecond {
        /// What was given.
        text: String,
    },
    /// A job setting with a fraction of a millisecond, which would be cut off silently.
    #[error("`{text}` is not a whole number of milliseconds; cronguard counts durations in whole milliseconds, so write `{down}ms` or `{up}ms`")]
    FractionOfMillisecond {
        /// What was given.
        text: String,
        /// The whole milliseconds below it.
        down: u128,
        /// The whole milliseconds above it.
        up: u128,
    },
    /// A job setting longer than `u64::MAX` milliseconds.
    #[error("`{text}` is too long; give at most `18446744073709551615ms`")]
    TooLong {
        /// What was given.
        text: String,
    },
}

/// Why a [`Schedule`](crate::Schedule) could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScheduleError {
    /// The cron expression is invalid.
    #[error("{}", source.message_for(expr))]
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
    /// The interval (`every`, `@every`) is not a duration of whole milliseconds.
    #[error(transparent)]
    Interval(DurationError),
    /// Both `cron` and `every` were given.
    #[error("`cron` cannot be combined with `every`; a job has one schedule: keep `cron` for calendar times or `every` for a fixed interval")]
    CronAndEvery,
    /// Neither `cron` nor `every` was given.
    #[error("missing schedule; give `cron` (for example `0 */5 * * * *`) or `every` (for example `30s`)")]
    NoSchedule,
    /// A time zone was given for an interval.
    #[error("`tz` applies only to `cron`; an `every` interval is counted from the Unix epoch and does not depend on a time zone, so remove `tz`")]
    TimeZoneWithEvery,
}
