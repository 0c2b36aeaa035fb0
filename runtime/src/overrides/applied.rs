//! What the overrides changed in a job's settings and where each value came from: kept with the
//! job and shown in its status, and named in a problem an override caused. A leaf: the job and
//! its status name it without the reading of the overrides.

use std::fmt;
use std::sync::Arc;

/// One setting of a job that an override changed at start, with the value and where it came
/// from; [`JobStatus::overrides`](crate::JobStatus::overrides) lists them. Settings that no
/// override changed are not listed: they are the job's own (its `#[scheduled]` attribute, or the
/// [`Job`] built in code).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct SettingOverride {
    /// The setting, by its key in the attribute's table and `JobConfig`: `cron`, `every`, `tz`,
    /// `enabled`, `timeout`, …
    pub setting: String,
    /// The value as written (`"0 0 3 * * *"`, `"false"`, `"5m"`).
    pub value: String,
    /// Where the value came from.
    pub source: OverrideSource,
}

/// Where an overridden setting came from.
///
/// With the `serde` feature it serializes with a `kind` beside its fields:
/// `{"kind": "environment", "variable": "CRONGUARD_JOB__REPORTS__NIGHTLY__CRON"}`,
/// `{"kind": "file", "path": "/etc/app/overrides.toml", "line": 4}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(tag = "kind", rename_all = "snake_case")
)]
#[non_exhaustive]
pub enum OverrideSource {
    /// An environment variable `CRONGUARD_JOB__<JOB>__<KEY>` (see [`override_variable`](crate::override_variable)), or one
    /// of the variables given to [`Builder::overrides_from`](crate::Builder::overrides_from).
    Environment {
        /// The variable's name.
        variable: String,
    },
    /// A line of the overrides file ([`Builder::overrides_file`](crate::Builder), or
    /// `CRONGUARD_OVERRIDES_FILE`; feature `toml`).
    File {
        /// The file's path as given (lossily converted to UTF-8).
        path: String,
        /// The line of the value, from 1.
        line: u32,
    },
}

impl fmt::Display for OverrideSource {
    /// `environment variable `NAME`` or `overrides file `path:line``.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OverrideSource::Environment { variable } => {
                write!(f, "environment variable `{variable}`")
            }
            OverrideSource::File { path, line } => write!(f, "overrides file `{path}:{line}`"),
        }
    }
}

impl fmt::Display for SettingOverride {
    /// `` `cron = "0 0 3 * * *"` from environment variable `...` ``.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` from {}", self.setting, self.source)
    }
}

/// The overrides of one job's settings, in the order of the settings table, as a job keeps them
/// (shared by its status snapshots).
pub(crate) type Applied = Option<Arc<[SettingOverride]>>;

/// The problem, and where the overridden settings it names came from, when a job's settings
/// (checked by `start()` as for every job) fail because of an override.
pub(crate) fn annotate(problem: String, job: &str, overrides: &[SettingOverride]) -> String {
    let body = problem
        .strip_prefix(&format!("job `{job}`: "))
        .unwrap_or(&problem);
    let named: Vec<String> = overrides
        .iter()
        .filter(|o| mentions(body, &o.setting))
        .map(|o| format!("`{} = {}` from {}", o.setting, quoted_value(o), o.source))
        .collect();
    if named.is_empty() {
        return problem;
    }
    format!("{problem} (overridden: {})", named.join(", "))
}

/// Whether a problem's text is about `setting`: it names the setting (`` `retries` ``,
/// `` `max_instances = 2` ``), or the schedule for an override of the schedule.
fn mentions(text: &str, setting: &str) -> bool {
    text.contains(&format!("`{setting}`"))
        || text.contains(&format!("`{setting} "))
        || (matches!(setting, "cron" | "every" | "tz") && text.contains("schedule"))
}

fn quoted_value(o: &SettingOverride) -> String {
    let numeric_or_bool =
        o.value.parse::<u64>().is_ok() || matches!(o.value.as_str(), "true" | "false");
    if numeric_or_bool && !matches!(o.setting.as_str(), "cron" | "every" | "tz") {
        o.value.clone()
    } else {
        format!("\"{}\"", o.value)
    }
}
