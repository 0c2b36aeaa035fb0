//! The settings of a job, described once: the arguments of `#[scheduled]` and the keys of
//! `cronguard::JobConfig`. The macro takes its list of arguments (and its suggestions for a
//! misspelt one) from here, configuration files their keys, and tests check the attribute's
//! documentation, the macro's parser and `JobConfig` against this table.
//!
//! Not public API: shared by the macro and the runtime, and free to change with them.

/// One setting of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    /// The argument of `#[scheduled]`; `None` for a setting the attribute does not take.
    pub attribute: Option<&'static str>,
    /// The key of `JobConfig` in a configuration file; `None` for an argument of the attribute
    /// only.
    pub key: Option<&'static str>,
    /// What its value is.
    pub form: Form,
    /// The default, as the attribute's documentation shows it (Markdown).
    pub default: &'static str,
    /// What it does, in one line, as the attribute's documentation shows it (Markdown).
    pub meaning: &'static str,
}

/// What a setting's value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// A cron expression (a string).
    Cron,
    /// An IANA time zone (a string).
    TimeZone,
    /// A duration with its unit (a string such as `"30s"`).
    Duration,
    /// A whole number.
    Count,
    /// On when given: the argument's name alone in the attribute, `true` or `false` in a
    /// configuration file.
    Flag,
    /// `true` or `false`, in a configuration file.
    Bool,
    /// One of these strings; `<...>` marks a part the user fills in (`custom:<name>`).
    OneOf(&'static [&'static str]),
    /// A job name (a string).
    JobName,
    /// A Rust path (a string).
    Path,
}

/// Every setting, in the order the documentation lists them.
pub const SETTINGS: &[Setting] = &[
    both("cron", Form::Cron, "one of `cron`/`every` is required", "cron expression (5, 6 or 7 fields, seconds first when 6 or 7)"),
    both("every", Form::Duration, "", "fixed interval, aligned to the Unix epoch"),
    both("tz", Form::TimeZone, "`UTC`", "IANA time zone of `cron`"),
    both(
        "lock",
        Form::OneOf(LOCKS),
        "`local`",
        "the guard: `local` (this process), `file` (the processes of this host), `redis` or `postgres` (the replicas of a cluster), or a guard registered with `Builder::custom_guard`",
    ),
    both("lease", Form::Duration, "`30s`", "lease of a guard with leases (`redis`, `postgres`, custom); 100 ms to 24 h"),
    both("history", Form::Flag, "off", "the guard keeps the job's run history (`postgres` or a custom guard)"),
    both("max_instances", Form::Count, "`1`", "runs at once (above 1 with `local` only)"),
    both("overlap", Form::OneOf(OVERLAPS), "`skip`", "what a fire does when no slot is free"),
    both("coalesce", Form::Flag, "off", "of several waiting fires run only the latest"),
    both("misfire_grace", Form::Duration, "`60s`", "how late a fire may still start"),
    both(
        "timeout",
        Form::Duration,
        "none",
        "each run is cancelled at this deadline and reported as failed (timeout); 1 ms to 7 days",
    ),
    both(
        "retries",
        Form::Count,
        "`0`",
        "retry a failed run under the same fire, lease and token while the next attempt fits the fire's window; at most 100",
    ),
    both(
        "backoff",
        Form::Duration,
        "`1s`",
        "pause before the first retry, doubled per retry, capped at 1 h; needs `retries`",
    ),
    both(
        "jitter",
        Form::Duration,
        "none",
        "delay each start by a deterministic amount in `[0, jitter)` from (job, `T`); 1 ms to 24 h, and shorter than the shortest gap between two fires",
    ),
    both(
        "standby",
        Form::Duration,
        "`1s`, or `Builder::standby`",
        "a process that did not get the last fire claims the next ones this long after their start; `0s` claims at once; up to 1 h",
    ),
    both("name", Form::JobName, "`module_path::fn_name`", "the job's identity in locks, logs and events"),
    Setting {
        attribute: Some("crate"),
        key: None,
        form: Form::Path,
        default: "`::cronguard`",
        meaning: "the path of `cronguard` when it is re-exported or renamed",
    },
    Setting {
        attribute: None,
        key: Some("enabled"),
        form: Form::Bool,
        default: "`true`",
        meaning: "whether this process fires the job (`Job::enabled`)",
    },
];

/// The values of `lock`.
const LOCKS: &[&str] = &["local", "file", "redis", "postgres", "custom:<name>"];

/// The values of `overlap`.
const OVERLAPS: &[&str] = &["skip", "queue", "replace"];

/// A setting with the same name in the attribute and in configuration.
const fn both(
    name: &'static str,
    form: Form,
    default: &'static str,
    meaning: &'static str,
) -> Setting {
    Setting {
        attribute: Some(name),
        key: Some(name),
        form,
        default,
        meaning,
    }
}

/// The setting that `#[scheduled]` names `name`.
pub fn attribute(name: &str) -> Option<&'static Setting> {
    SETTINGS.iter().find(|s| s.attribute == Some(name))
}

/// The setting that a configuration file names `key`.
pub fn key(key: &str) -> Option<&'static Setting> {
    SETTINGS.iter().find(|s| s.key == Some(key))
}

/// The arguments of `#[scheduled]`, in order.
pub fn attributes() -> Vec<&'static str> {
    SETTINGS.iter().filter_map(|s| s.attribute).collect()
}

/// The keys of a job in a configuration file, in order.
pub fn keys() -> Vec<&'static str> {
    SETTINGS.iter().filter_map(|s| s.key).collect()
}

impl Form {
    /// The values of a [`Form::OneOf`] written as they are, without those with a part to fill in
    /// (`custom:<name>`); empty for other forms.
    pub fn plain_choices(&self) -> Vec<&'static str> {
        match self {
            Form::OneOf(choices) => choices
                .iter()
                .copied()
                .filter(|c| !c.contains('<'))
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// Words users reach for that mean one of the settings.
const ALIASES: &[(&str, &str)] = &[
    ("schedule", "cron"),
    ("crontab", "cron"),
    ("interval", "every"),
    ("period", "every"),
    ("timezone", "tz"),
    ("time_zone", "tz"),
    ("zone", "tz"),
    ("guard", "lock"),
    ("locking", "lock"),
    ("ttl", "lease"),
    ("lease_time", "lease"),
    ("instances", "max_instances"),
    ("concurrency", "max_instances"),
    ("max_concurrent", "max_instances"),
    ("on_overlap", "overlap"),
    ("misfire", "misfire_grace"),
    ("grace", "misfire_grace"),
    ("id", "name"),
    ("deadline", "timeout"),
    ("max_runtime", "timeout"),
    ("retry", "retries"),
    ("max_retries", "retries"),
    ("attempts", "retries"),
    ("retry_delay", "backoff"),
    ("retry_backoff", "backoff"),
    ("splay", "jitter"),
    ("spread", "jitter"),
    ("failover_delay", "standby"),
    ("disabled", "enabled"),
    ("enable", "enabled"),
];

/// The candidate that `unknown` was probably meant to be: the same word in another case, a word
/// users reach for that means a setting (`timezone` for `tz`), or a typo within a small edit
/// distance.
pub fn closest<'a>(unknown: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let lower = unknown.to_lowercase();
    if let Some(exact) = candidates.iter().find(|c| **c == lower) {
        return Some(exact);
    }
    if let Some((_, target)) = ALIASES.iter().find(|(alias, _)| *alias == lower) {
        if let Some(found) = candidates.iter().find(|c| *c == target) {
            return Some(found);
        }
    }
    let limit = (lower.chars().count() / 3).max(1);
    candidates
        .iter()
        .map(|c| (edit_distance(&lower, c), *c))
        .filter(|(distance, _)| *distance <= limit)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, c)| c)
}

/// Optimal string alignment distance: insertions, deletions, substitutions and swaps of two
/// neighbours each count one.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut rows = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in rows.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in rows[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (rows[i - 1][j] + 1)
                .min(rows[i][j - 1] + 1)
                .min(rows[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(rows[i - 2][j - 2] + 1);
            }
            rows[i][j] = best;
        }
    }
    rows[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn names_are_unique_and_every_setting_has_one() {
        for setting in SETTINGS {
            assert!(
                setting.attribute.is_some() || setting.key.is_some(),
                "{setting:?}"
            );
        }
        for names in [attributes(), keys()] {
            let mut sorted = names.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), names.len(), "a name twice: {names:?}");
        }
    }

    #[test]
    fn every_alias_names_a_setting_and_is_none() {
        for (alias, target) in ALIASES {
            assert!(
                attribute(target).is_some() || key(target).is_some(),
                "{target}"
            );
            assert!(
                attribute(alias).is_none() && key(alias).is_none(),
                "{alias}"
            );
        }
    }

    /// The defaults shown are the constants the macro and the runtime apply.
    #[test]
    fn defaults_are_the_shared_constants() {
        let shown = |name: &str| attribute(name).map(|s| s.default);
        let seconds = |d: Duration| format!("`{}s`", d.as_secs());
        assert_eq!(shown("lease"), Some(seconds(crate::DEFAULT_LEASE).as_str()));
        assert_eq!(
            shown("misfire_grace"),
            Some(seconds(crate::DEFAULT_MISFIRE_GRACE).as_str())
        );
        assert_eq!(
            shown("backoff"),
            Some(seconds(crate::DEFAULT_BACKOFF).as_str())
        );
        let standby = shown("standby").unwrap_or_default();
        assert!(
            standby.starts_with(&seconds(crate::DEFAULT_STANDBY)),
            "{standby}"
        );
        let retries = attribute("retries").map(|s| s.meaning).unwrap_or_default();
        assert!(
            retries.ends_with(&format!("at most {}", crate::MAX_RETRIES)),
            "{retries}"
        );
    }

    #[test]
    fn suggests_the_closest_name() {
        let names = attributes();
        assert_eq!(closest("leese", &names), Some("lease"));
        assert_eq!(closest("Cron", &names), Some("cron"));
        assert_eq!(closest("timezone", &names), Some("tz"));
        assert_eq!(closest("max_instance", &names), Some("max_instances"));
        assert_eq!(closest("misfire_graec", &names), Some("misfire_grace"));
        assert_eq!(closest("banana", &names), None);
        assert_eq!(closest("disabled", &keys()), Some("enabled"));
        let locks = attribute("lock")
            .map(|s| s.form.plain_choices())
            .unwrap_or_default();
        assert_eq!(locks, ["local", "file", "redis", "postgres"]);
        assert_eq!(closest("reddis", &locks), Some("redis"));
    }
}
