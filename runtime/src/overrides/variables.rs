//! Overrides from environment variables: `CRONGUARD_JOB__<JOB>__<KEY>=value`.
//!
//! `<JOB>` is the job's name in capitals with `_` for every character other than an ASCII letter
//! or digit (`reports::nightly` is `REPORTS__NIGHTLY`, `billing.v2-sync` is `BILLING_V2_SYNC`),
//! and `<KEY>` a key of the settings table in capitals (`CRON`, `MAX_INSTANCES`). No key has two
//! `_` in a row nor starts with one, so the last `__` of a variable's name is the one before the
//! key, whatever the job's name. Two names that differ only in case or in their other characters
//! (`a-b`, `a_b`) are written alike: a variable that names such a pair is refused, and the
//! overrides file (which names a job exactly) overrides them.

use cronguard_schedule::settings::{self, Form};

use super::{problem, refused, Entry, OverrideSource, Target, Value};
use crate::error::Problem;

/// The start of every override variable.
pub(crate) const PREFIX: &str = "CRONGUARD_JOB__";

/// The variable that names the overrides file.
pub(crate) const FILE_VARIABLE: &str = "CRONGUARD_OVERRIDES_FILE";

/// The environment variable that overrides `setting` of job `job` at start:
/// `CRONGUARD_JOB__<JOB>__<KEY>`, where `<JOB>` is the job's name in capitals with `_` for every
/// character other than a letter or digit, and `<KEY>` the setting's key in capitals
/// (docs/guide/overrides.md).
///
/// ```
/// assert_eq!(
///     cronguard::override_variable("reports::nightly", "cron"),
///     "CRONGUARD_JOB__REPORTS__NIGHTLY__CRON"
/// );
/// assert_eq!(
///     cronguard::override_variable("billing.v2-sync", "max_instances"),
///     "CRONGUARD_JOB__BILLING_V2_SYNC__MAX_INSTANCES"
/// );
/// ```
pub fn override_variable(job: &str, setting: &str) -> String {
    variable(&job_form(job), setting)
}

/// The variable of the job written `form` and the setting `key`.
pub(crate) fn variable(form: &str, key: &str) -> String {
    format!("{PREFIX}{form}__{}", key.to_ascii_uppercase())
}

/// A job's name as a variable writes it.
pub(crate) fn job_form(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// Reads the override variables (their names and values; the jobs are matched later), reporting
/// each one that is not an override of a setting.
pub(crate) fn read(
    vars: &[(String, String)],
    entries: &mut Vec<Entry>,
    problems: &mut Vec<Problem>,
) {
    for (name, value) in vars {
        match parse(name, value) {
            Ok(entry) => entries.push(entry),
            Err(message) => problems.push(problem(
                None,
                &format!("environment variable `{name}`"),
                message,
            )),
        }
    }
}

/// One variable. A blank value sets nothing (as for every `CRONGUARD_*` variable), but its name
/// is checked like any other's.
fn parse(name: &str, text: &str) -> Result<Entry, String> {
    let Some(rest) = name.strip_prefix(PREFIX) else {
        return Err(format!(
            "does not start with `{PREFIX}`; write `{}`",
            corrected(name)
        ));
    };
    if rest.chars().any(|c| c.is_ascii_lowercase()) {
        return Err(format!("is not in capitals; write `{}`", corrected(name)));
    }
    let Some((form, key)) = rest
        .rsplit_once("__")
        .filter(|(f, k)| !f.is_empty() && !k.is_empty())
    else {
        return Err(format!(
            "names no setting; an override is `{PREFIX}<JOB>__<KEY>`, such as `{}`",
            variable(
                if rest.is_empty() {
                    "REPORTS__NIGHTLY"
                } else {
                    rest
                },
                "cron"
            )
        ));
    };
    let lower = key.to_ascii_lowercase();
    let Some(setting) = settings::key(&lower) else {
        let mut message = crate::job_config::unknown_key(&lower);
        if let Some(close) = settings::closest(&lower, &settings::keys()) {
            message.push_str(&format!(" (the variable `{}`)", variable(form, close)));
        }
        return Err(message);
    };
    let key = setting.key.unwrap_or_default();
    if let Some(why) = refused(key) {
        return Err(why.to_owned());
    }
    let value = if text.trim().is_empty() {
        Value::Blank
    } else {
        value(key, setting.form, text)?
    };
    Ok(Entry {
        target: Target::Variable(form.to_owned()),
        key,
        value,
        source: OverrideSource::Environment {
            variable: name.to_owned(),
        },
    })
}

/// Whether a variable is meant as an override: it starts with `CRONGUARD_JOB` in any case (a
/// misspelt `CRONGUARD_JOB_X__CRON` too, which is then refused), other than `CRONGUARD_JOBS`.
pub(crate) fn is_override(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper.starts_with("CRONGUARD_JOB") && upper != "CRONGUARD_JOBS"
}

/// A variable's name in capitals, starting with `CRONGUARD_JOB__`.
fn corrected(name: &str) -> String {
    let upper = name.to_ascii_uppercase();
    if upper.starts_with(PREFIX) {
        return upper;
    }
    let rest = upper.strip_prefix("CRONGUARD_JOB").unwrap_or(&upper);
    let rest = rest
        .strip_prefix('S')
        .filter(|r| r.starts_with('_'))
        .unwrap_or(rest);
    format!("{PREFIX}{}", rest.trim_start_matches('_'))
}

/// The value of a variable, of the kind the setting takes.
fn value(key: &str, form: Form, text: &str) -> Result<Value, String> {
    match form {
        Form::Count => {
            let trimmed = text.trim();
            if let Ok(n) = trimmed.parse::<u32>() {
                return Ok(Value::Count(n));
            }
            if trimmed.parse::<i64>().is_ok_and(|n| n < 0) {
                return Err(match key {
                    "retries" => format!(
                        "`retries` cannot be negative; give how often a failed run is tried again, from 0 to {}",
                        cronguard_schedule::MAX_RETRIES
                    ),
                    _ => format!("`{key}` must be at least 1; it is the number of runs of this job allowed at once"),
                });
            }
            Err(format!(
                "`{key}` takes a whole number from 0 to {}, such as `3`; `{text}` is not one",
                u32::MAX
            ))
        }
        Form::Flag | Form::Bool => match text.trim() {
            t if t.eq_ignore_ascii_case("true") => Ok(Value::Bool(true)),
            t if t.eq_ignore_ascii_case("false") => Ok(Value::Bool(false)),
            _ => Err(format!("`{key}` takes `true` or `false`, not `{text}`")),
        },
        _ => Ok(Value::Text(text.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_name_is_written_in_capitals_with_underscores() {
        assert_eq!(job_form("reports::nightly"), "REPORTS__NIGHTLY");
        assert_eq!(job_form("billing.v2-sync"), "BILLING_V2_SYNC");
        assert_eq!(job_form("Mixed_Case9"), "MIXED_CASE9");
        assert_eq!(
            override_variable("reports::nightly", "misfire_grace"),
            "CRONGUARD_JOB__REPORTS__NIGHTLY__MISFIRE_GRACE"
        );
    }

    /// The variable of every key of every name parses back to the same form and key: the last
    /// `__` is always the one before the key, also for names that end in `_` or `:`.
    #[test]
    fn every_variable_parses_back_to_its_job_and_key() {
        let names = [
            "a",
            "reports::nightly",
            "x_",
            "x__",
            "a::",
            "a:",
            "_a",
            "a-b.c::d_e",
            "T1",
        ];
        for name in names {
            for key in settings::keys() {
                let var = override_variable(name, key);
                let form = settings::key(key).map(|s| s.form);
                let text = if matches!(form, Some(Form::Flag | Form::Bool)) {
                    "true"
                } else {
                    "1"
                };
                let parsed = parse(&var, text);
                if refused(key).is_some() {
                    assert!(parsed.is_err(), "{var}");
                    continue;
                }
                let entry = parsed.unwrap_or_else(|e| panic!("{var}: {e}"));
                assert_eq!(entry.target, Target::Variable(job_form(name)), "{var}");
                assert_eq!(entry.key, key, "{var}");
            }
        }
    }

    #[test]
    fn values_take_the_kind_of_their_setting() {
        let value_of = |key: &str, text: &str| {
            let var = override_variable("job", key);
            parse(&var, text).map(|e| e.value)
        };
        assert_eq!(value_of("retries", "3"), Ok(Value::Count(3)));
        assert_eq!(value_of("enabled", "FALSE"), Ok(Value::Bool(false)));
        assert_eq!(value_of("coalesce", "true"), Ok(Value::Bool(true)));
        assert_eq!(
            value_of("cron", "0 30 2 * * *"),
            Ok(Value::Text("0 30 2 * * *".to_owned()))
        );
        assert_eq!(
            value_of("timeout", "  "),
            Ok(Value::Blank),
            "blank: not set"
        );
        let err = value_of("retries", "three").expect_err("not a number");
        assert!(err.contains("`retries` takes a whole number"), "{err}");
        let err = value_of("retries", "-1").expect_err("negative");
        assert!(err.starts_with("`retries` cannot be negative"), "{err}");
        let err = value_of("max_instances", "-2").expect_err("negative");
        assert!(
            err.starts_with("`max_instances` must be at least 1"),
            "{err}"
        );
        let err = value_of("enabled", "no").expect_err("not a bool");
        assert_eq!(err, "`enabled` takes `true` or `false`, not `no`");
    }

    #[test]
    fn a_wrong_name_is_refused_saying_what_to_write() {
        let err = parse("CRONGUARD_JOB__REPORTS__NIGHTLY__LEESE", "1s").expect_err("typo");
        assert!(
            err.starts_with("unknown key `leese`; did you mean `lease`? expected one of: `cron`"),
            "{err}"
        );
        assert!(
            err.ends_with("(the variable `CRONGUARD_JOB__REPORTS__NIGHTLY__LEASE`)"),
            "{err}"
        );
        let err = parse("CRONGUARD_JOB__REPORTS__NIGHTLY__LOCK", "redis").expect_err("refused");
        assert!(err.starts_with("`lock` cannot be overridden"), "{err}");
        let err = parse("CRONGUARD_JOB__REPORTS__NIGHTLY__NAME", "x").expect_err("refused");
        assert!(err.starts_with("`name` cannot be overridden"), "{err}");
        let err = parse("CRONGUARD_JOB__reports__nightly__cron", "x").expect_err("case");
        assert_eq!(
            err,
            "is not in capitals; write `CRONGUARD_JOB__REPORTS__NIGHTLY__CRON`"
        );
        for (misspelt, meant) in [
            (
                "CRONGUARD_JOB_CLEANUP__EVERY",
                "CRONGUARD_JOB__CLEANUP__EVERY",
            ),
            (
                "CRONGUARD_JOBS__CLEANUP__EVERY",
                "CRONGUARD_JOB__CLEANUP__EVERY",
            ),
            (
                "cronguard_job__cleanup__every",
                "CRONGUARD_JOB__CLEANUP__EVERY",
            ),
        ] {
            assert!(is_override(misspelt), "{misspelt}");
            let err = parse(misspelt, "1s").expect_err("misspelt");
            assert!(err.ends_with(&format!("; write `{meant}`")), "{err}");
        }
        assert!(!is_override("CRONGUARD_JOBS"), "the job selection");
        assert!(!is_override("CRONGUARD_LOCK_DIR"));
        let err = parse("CRONGUARD_JOB__CLEANUP", "1s").expect_err("no key");
        assert!(
            err.starts_with("names no setting; an override is `CRONGUARD_JOB__<JOB>__<KEY>`, such as `CRONGUARD_JOB__CLEANUP__CRON`"),
            "{err}"
        );
        // A blank value sets nothing, but its name is still checked.
        assert!(parse("CRONGUARD_JOB__X__TIMEUOT", "").is_err());
    }
}
