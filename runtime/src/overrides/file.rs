//! Overrides from a TOML file (feature `toml`): `[[job]]` tables as in a file of jobs read with
//! [`JobConfig`], each overriding the job of the same name.
//!
//! ```toml
//! [[job]]
//! name = "reports::nightly"
//! cron = "0 0 3 * * *"
//!
//! [[job]]
//! name = "cleanup"
//! enabled = false
//! ```
//!
//! Each table is read by `JobConfig`'s own `Deserialize` (its keys, its answer to an unknown
//! key), and a second time for the line of each key.

use std::collections::BTreeMap;
use std::path::Path;

use cronguard_schedule::settings;
use serde::de::IgnoredAny;
use toml::Spanned;

use super::{problem, refused, Entry, FileOrigin, OverrideSource, Target, Value, FILE_VARIABLE};
use crate::error::Problem;
use crate::job_config::JobConfig;

/// The file as `JobConfig`s.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Configs {
    #[serde(default)]
    job: Vec<JobConfig>,
}

/// The file again, for where each key of each table stands.
#[derive(serde::Deserialize)]
struct Places {
    #[serde(default)]
    job: Vec<BTreeMap<String, Spanned<IgnoredAny>>>,
}

/// Reads the overrides of the file at `path`.
pub(super) fn read(
    path: &Path,
    origin: FileOrigin,
    entries: &mut Vec<Entry>,
    problems: &mut Vec<Problem>,
) {
    let shown = path.display().to_string();
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) => {
            let fix = match origin {
                FileOrigin::Variable => {
                    format!("set `{FILE_VARIABLE}` to the file's path, or unset it")
                }
                FileOrigin::Builder => "give `Builder::overrides_file` the file's path".to_owned(),
            };
            problems.push(problem(
                None,
                &format!("overrides file `{shown}`"),
                format!("cannot be read: {error}; {fix}"),
            ));
            return;
        }
    };
    let parsed = toml::from_str::<Configs>(&text)
        .and_then(|configs| Ok((configs, toml::from_str::<Places>(&text)?)));
    let (configs, places) = match parsed {
        Ok(parsed) => parsed,
        Err(error) => {
            let at = error
                .span()
                .map(|span| format!(":{}", line(&text, span.start)))
                .unwrap_or_default();
            problems.push(problem(
                None,
                &format!("overrides file `{shown}{at}`"),
                error.message(),
            ));
            return;
        }
    };
    let mut seen: BTreeMap<String, u32> = BTreeMap::new();
    for (config, keys) in configs.job.iter().zip(&places.job) {
        let line_of = |key: &str| keys.get(key).map_or(0, |v| line(&text, v.span().start));
        let at = |line: u32| OverrideSource::File {
            path: shown.clone(),
            line,
        };
        let here = line_of("name");
        if let Some(first) = seen.insert(config.name.clone(), here) {
            problems.push(problem(
                Some(&config.name),
                &at(here).to_string(),
                format!("the job has a table of overrides at line {first} already; merge the two tables"),
            ));
            continue;
        }
        for key in settings::keys() {
            if key == "name" || !keys.contains_key(key) {
                continue;
            }
            let source = at(line_of(key));
            if let Some(why) = refused(key) {
                problems.push(problem(Some(&config.name), &source.to_string(), why));
                continue;
            }
            match value_of(config, key) {
                Some(value) => entries.push(Entry {
                    target: Target::Name(config.name.clone(), at(here)),
                    key,
                    value,
                    source,
                }),
                None => problems.push(problem(
                    Some(&config.name),
                    &source.to_string(),
                    format!("`{key}` cannot be overridden"),
                )),
            }
        }
    }
}

/// The value `config` holds for `key`, when it is a setting an override may change.
fn value_of(config: &JobConfig, key: &str) -> Option<Value> {
    let text = |value: &Option<String>| value.clone().map(Value::Text);
    match key {
        "cron" => text(&config.cron),
        "every" => text(&config.every),
        "tz" => text(&config.tz),
        "lease" => text(&config.lease),
        "overlap" => text(&config.overlap),
        "misfire_grace" => text(&config.misfire_grace),
        "timeout" => text(&config.timeout),
        "backoff" => text(&config.backoff),
        "jitter" => text(&config.jitter),
        "standby" => text(&config.standby),
        "max_instances" => config.max_instances.map(Value::Count),
        "retries" => config.retries.map(Value::Count),
        "coalesce" => Some(Value::Bool(config.coalesce)),
        "history" => Some(Value::Bool(config.history)),
        "enabled" => config.enabled.map(Value::Bool),
        _ => None,
    }
}

/// The line, from 1, of byte `at` of `text`.
fn line(text: &str, at: usize) -> u32 {
    let before = text.get(..at).unwrap_or(text);
    let breaks = before.bytes().filter(|b| *b == b'\n').count();
    u32::try_from(breaks).map_or(u32::MAX, |n| n.saturating_add(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_setting_but_the_refused_ones_has_a_value() {
        let mut config = JobConfig::new("x");
        config.cron = Some("c".into());
        config.every = Some("e".into());
        config.tz = Some("t".into());
        config.lease = Some("l".into());
        config.overlap = Some("o".into());
        config.misfire_grace = Some("m".into());
        config.timeout = Some("t".into());
        config.backoff = Some("b".into());
        config.jitter = Some("j".into());
        config.standby = Some("s".into());
        config.max_instances = Some(2);
        config.retries = Some(3);
        config.enabled = Some(false);
        for key in settings::keys() {
            assert_eq!(
                value_of(&config, key).is_some(),
                refused(key).is_none(),
                "`{key}`"
            );
        }
    }

    #[test]
    fn lines_count_from_one() {
        let text = "a\nb\n\nc";
        assert_eq!(line(text, 0), 1);
        assert_eq!(line(text, 2), 2);
        assert_eq!(line(text, 5), 4);
        assert_eq!(line(text, 99), 4);
    }
}
