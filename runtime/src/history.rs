//! Run history: one record per claimed run and per reported dropped fire, kept by guards that
//! store it (the `postgres` guard) and read back with
//! [`Monitor::history`](crate::Monitor::history). A leaf module: guards and the handle name it.

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, Utc};

/// How many entries one history query returns at most.
pub const HISTORY_LIMIT: usize = 10_000;

/// What became of one fire, as the history records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(rename_all = "snake_case")
)]
#[non_exhaustive]
pub enum Outcome {
    /// Claimed and started; not ended yet (or its process ended without a word: see
    /// [`Outcome::Lost`]).
    Running,
    /// The run returned `Ok` or `()`.
    Succeeded,
    /// The run returned `Err` or panicked.
    Failed,
    /// The run was cancelled (replaced, lease lost, shutdown).
    Cancelled,
    /// The run was recorded as running when a later fire of the job was claimed: its process
    /// died or froze before it could record the end.
    Lost,
    /// The claim took effect but the run never started (its reply came too late).
    Abandoned,
    /// The fire was dropped because no slot was free (`overlap = "skip"`).
    Skipped,
    /// The fire could not start within its misfire grace.
    Misfired,
    /// The fire was covered by a later one (`coalesce`).
    Coalesced,
}

impl Outcome {
    /// The name stored in the history: `running`, `succeeded`, `failed`, `cancelled`, `lost`,
    /// `abandoned`, `skipped`, `misfired` or `coalesced`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Outcome::Running => "running",
            Outcome::Succeeded => "succeeded",
            Outcome::Failed => "failed",
            Outcome::Cancelled => "cancelled",
            Outcome::Lost => "lost",
            Outcome::Abandoned => "abandoned",
            Outcome::Skipped => "skipped",
            Outcome::Misfired => "misfired",
            Outcome::Coalesced => "coalesced",
        }
    }

    /// The outcome named `name` (see [`as_str`](Outcome::as_str)).
    pub fn from_name(name: &str) -> Option<Outcome> {
        [
            Outcome::Running,
            Outcome::Succeeded,
            Outcome::Failed,
            Outcome::Cancelled,
            Outcome::Lost,
            Outcome::Abandoned,
            Outcome::Skipped,
            Outcome::Misfired,
            Outcome::Coalesced,
        ]
        .into_iter()
        .find(|o| o.as_str() == name)
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One fire of one job in the history.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct HistoryEntry {
    /// The job's name.
    pub job: String,
    /// The fire `T`.
    pub fire_time: DateTime<Utc>,
    /// The process that ran it, or that reported the drop.
    pub instance: String,
    /// The run's fencing token (runs only).
    pub fencing_token: Option<u64>,
    /// When the claim was granted, on the guard's clock (runs only).
    pub started: Option<DateTime<Utc>>,
    /// When the end was recorded, on the guard's clock.
    pub ended: Option<DateTime<Utc>>,
    /// What became of the fire.
    pub outcome: Outcome,
    /// The error of a failed run with its causes, or why a fire was dropped.
    pub error: Option<String>,
    /// The start minus the fire time (runs only).
    pub lateness: Option<Duration>,
}

impl HistoryEntry {
    /// An entry with only the fire, the process and the outcome set.
    pub fn new(
        job: impl Into<String>,
        fire_time: DateTime<Utc>,
        instance: impl Into<String>,
        outcome: Outcome,
    ) -> Self {
        HistoryEntry {
            job: job.into(),
            fire_time,
            instance: instance.into(),
            fencing_token: None,
            started: None,
            ended: None,
            outcome,
            error: None,
            lateness: None,
        }
    }
}

/// How long the run history is kept by default: 30 days.
pub const DEFAULT_HISTORY_RETENTION_DAYS: u32 = 30;

/// How many entries of each job's history the `redis` and `file` guards keep by default: the
/// newest ([`Builder::recent_history`](crate::Builder::recent_history)).
pub const RECENT_HISTORY_KEPT: usize = 1_000;

/// The most entries per job [`Builder::recent_history`](crate::Builder::recent_history) takes.
pub const MAX_RECENT_HISTORY: usize = 100_000;

/// What the `redis` and `file` guards keep of each job's history: the newest `kept` entries (0:
/// none), none older than `retention`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RecentHistory {
    pub(crate) kept: usize,
    pub(crate) retention: Duration,
}

impl Default for RecentHistory {
    fn default() -> Self {
        RecentHistory {
            kept: RECENT_HISTORY_KEPT,
            retention: Duration::from_secs(u64::from(DEFAULT_HISTORY_RETENTION_DAYS) * 86_400),
        }
    }
}

/// One entry as one line of text, as the `redis` and `file` guards store it: tab-separated
/// `<ended> <fire> <outcome> <token> <lateness> <duration> <instance> <error>` (times in Unix
/// ms, `-` for none), the texts with `\`, tab, CR and newline escaped. The `redis` guard writes
/// everything after `<ended>`, and the server puts its own clock first.
pub(crate) mod line {
    use std::time::Duration;

    use chrono::{DateTime, Utc};

    use super::{HistoryEntry, Outcome};

    /// The entry after its `<ended>` field, and the duration of its run (`None`: not a run).
    pub(crate) fn tail(entry: &HistoryEntry, duration: Option<Duration>) -> String {
        let ms = |d: Option<Duration>| d.map_or("-".to_owned(), |d| d.as_millis().to_string());
        format!(
            "{}\t{}\t{}\t{}\t{}\t{}\t{}",
            entry.fire_time.timestamp_millis(),
            entry.outcome.as_str(),
            entry
                .fencing_token
                .map_or("-".to_owned(), |t| t.to_string()),
            ms(entry.lateness),
            ms(duration),
            escape(&entry.instance),
            entry.error.as_deref().map_or("-".to_owned(), escape),
        )
    }

    /// A whole line, ended at `ended`.
    pub(crate) fn whole(
        entry: &HistoryEntry,
        duration: Option<Duration>,
        ended: DateTime<Utc>,
    ) -> String {
        format!("{}\t{}", ended.timestamp_millis(), tail(entry, duration))
    }

    /// The entry of `job` a line holds; `None` for a line this version cannot read.
    pub(crate) fn parse(job: &str, line: &str) -> Option<HistoryEntry> {
        let mut f = line.split('\t');
        let time = |s: &str| DateTime::<Utc>::from_timestamp_millis(s.parse().ok()?);
        let millis = |s: &str| -> Option<Option<Duration>> {
            match s {
                "-" => Some(None),
                s => Some(Some(Duration::from_millis(s.parse().ok()?))),
            }
        };
        let ended = time(f.next()?)?;
        let fire_time = time(f.next()?)?;
        let outcome = Outcome::from_name(f.next()?)?;
        let fencing_token = match f.next()? {
            "-" => None,
            t => Some(t.parse().ok()?),
        };
        let lateness = millis(f.next()?)?;
        let duration = millis(f.next()?)?;
        let instance = unescape(f.next()?);
        let error = match f.next()? {
            "-" => None,
            e => Some(unescape(e)),
        };
        let mut entry = HistoryEntry::new(job, fire_time, instance, outcome);
        entry.fencing_token = fencing_token;
        entry.ended = Some(ended);
        entry.started =
            duration.and_then(|d| ended.checked_sub_signed(chrono::TimeDelta::from_std(d).ok()?));
        entry.lateness = lateness;
        entry.error = error;
        Some(entry)
    }

    fn escape(text: &str) -> String {
        if text == "-" {
            return "\\-".to_owned();
        }
        let mut out = String::with_capacity(text.len());
        for c in text.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\t' => out.push_str("\\t"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                c => out.push(c),
            }
        }
        out
    }

    fn unescape(text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            if c != '\\' {
                out.push(c);
                continue;
            }
            match chars.next() {
                Some('t') => out.push('\t'),
                Some('n') => out.push('\n'),
                Some('r') => out.push('\r'),
                Some(other) => out.push(other),
                None => out.push('\\'),
            }
        }
        out
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn an_entry_reads_back_as_written() {
            let fire = DateTime::<Utc>::from_timestamp_millis(1_767_225_600_000).expect("a time");
            let ended = DateTime::<Utc>::from_timestamp_millis(1_767_225_601_500).expect("a time");
            let mut entry = HistoryEntry::new("j", fire, "host\t1\\x", Outcome::Failed);
            entry.fencing_token = Some(42);
            entry.lateness = Some(Duration::from_millis(7));
            entry.error = Some("boom\nline two\r\t-".to_owned());
            let line = whole(&entry, Some(Duration::from_millis(1_000)), ended);
            assert_eq!(line.lines().count(), 1, "{line}");
            let back = parse("j", &line).expect("reads back");
            assert_eq!(back.instance, entry.instance);
            assert_eq!(back.error, entry.error);
            assert_eq!(back.fencing_token, Some(42));
            assert_eq!(back.ended, Some(ended));
            assert_eq!(back.started, Some(ended - chrono::TimeDelta::seconds(1)));
            assert_eq!(back.lateness, entry.lateness);
            let mut dropped = HistoryEntry::new("j", fire, "-", Outcome::Skipped);
            dropped.error = Some("-".to_owned());
            let back = parse("j", &whole(&dropped, None, ended)).expect("reads back");
            assert_eq!(
                (back.instance.as_str(), back.error.as_deref()),
                ("-", Some("-"))
            );
            assert_eq!(back.started, None);
            assert_eq!(parse("j", "garbage"), None);
        }
    }
}
