//! `Deserialize` for `JobConfig`, `Lock`, `Overlap` and `Schedule` (feature `serde`): jobs from a
//! configuration file go through the attribute's checks.
#![cfg(feature = "serde")]

use cronguard::{JobConfig, Lock, Overlap, Schedule};
use cronguard_schedule::settings::{self, Form};

#[test]
fn choices_deserialize_from_their_names() {
    let locks: Vec<Lock> = serde_json::from_str(r#"["local", "file", "redis"]"#).expect("valid");
    assert_eq!(locks, [Lock::Local, Lock::File, Lock::Redis]);
    let overlaps: Vec<Overlap> =
        serde_json::from_str(r#"["skip", "queue", "replace"]"#).expect("valid");
    assert_eq!(overlaps, [Overlap::Skip, Overlap::Queue, Overlap::Replace]);
    let err = serde_json::from_str::<Lock>(r#""redsi""#).expect_err("typo");
    assert!(err.to_string().contains("did you mean `redis`?"), "{err}");
    let err = serde_json::from_str::<Overlap>(r#""drop""#).expect_err("unknown");
    assert!(
        err.to_string().contains("unknown overlap policy `drop`"),
        "{err}"
    );
    let schedule: Schedule =
        serde_json::from_str(r#"{ "cron": "0 0 L-2 * *", "tz": "America/New_York" }"#)
            .expect("valid");
    assert_eq!(
        schedule.describe(),
        "at 00:00 on the 3rd-to-last day of the month (America/New_York)"
    );
}

#[test]
fn job_configs_deserialize_and_are_checked() {
    let configs: Vec<JobConfig> = serde_json::from_str(
        r#"[
            { "name": "reports::nightly", "cron": "0 30 2 * * *", "tz": "Europe/Berlin",
              "lock": "redis", "lease": "10s", "overlap": "queue", "coalesce": true,
              "misfire_grace": "10m" },
            { "name": "poll", "every": "30s", "max_instances": 3 },
            { "name": "broken", "cron": "0 0 L-31 * *", "every": "1m", "lock": "file",
              "max_instances": 2 }
        ]"#,
    )
    .expect("well-formed");
    let mut jobs = configs.into_iter().map(JobConfig::into_job);
    let nightly = jobs.next().expect("three").expect("valid");
    assert_eq!(nightly.name(), "reports::nightly");
    assert_eq!(
        nightly.schedule().describe(),
        "at 02:30 every day (Europe/Berlin)"
    );
    assert!(jobs.next().expect("three").is_ok());
    let broken = jobs
        .next()
        .expect("three")
        .map(|_| ())
        .expect_err("invalid");
    // Both `cron` and `every`; `max_instances = 2` with a `file` guard.
    assert_eq!(broken.problems().len(), 2, "{broken}");
    assert!(
        broken.problems()[0].contains("cannot be combined"),
        "{broken}"
    );
    assert!(
        broken.problems()[1].contains("needs `lock = \"local\"`"),
        "{broken}"
    );

    let err = serde_json::from_str::<JobConfig>(r#"{ "name": "x", "every": "1s", "leese": "1s" }"#)
        .expect_err("unknown key");
    assert!(
        err.to_string().starts_with(
            "unknown key `leese`; did you mean `lease`? expected one of: `cron`, `every`,"
        ),
        "{err}"
    );
    let err = serde_json::from_str::<JobConfig>(r#"{ "every": "1s" }"#).expect_err("no name");
    assert!(err.to_string().contains("missing field `name`"), "{err}");
    let err =
        serde_json::from_str::<JobConfig>(r#"{ "name": "x", "name": "y" }"#).expect_err("twice");
    assert!(err.to_string().contains("duplicate field `name`"), "{err}");
}

/// The keys a configuration file may hold are the keys of the settings table: the error for an
/// unknown key lists them, and each one sets the field of its name, with a value of its form.
#[test]
fn the_keys_are_the_keys_of_the_settings_table() {
    let err = serde_json::from_str::<JobConfig>(r#"{ "name": "x", "priority": 1 }"#)
        .expect_err("unknown key");
    let listed: Vec<String> = err
        .to_string()
        .split_once("expected one of: ")
        .map(|(_, list)| list.split(" at line").next().unwrap_or_default())
        .unwrap_or_default()
        .split(", ")
        .map(|key| key.trim_matches('`').to_owned())
        .collect();
    assert_eq!(listed, keys(), "{err}");
    assert!(!err.to_string().contains("did you mean"), "{err}");

    let base: JobConfig = serde_json::from_str(r#"{ "name": "x" }"#).expect("valid");
    for setting in settings::SETTINGS {
        let Some(key) = setting.key else { continue };
        let value = match setting.form {
            Form::Cron => r#""0 30 2 * * *""#.to_owned(),
            Form::TimeZone => r#""Europe/Berlin""#.to_owned(),
            Form::Duration => r#""2s""#.to_owned(),
            Form::Count => "2".to_owned(),
            Form::Flag => "true".to_owned(),
            Form::Bool => "false".to_owned(),
            Form::OneOf(choices) => format!("{:?}", choices[0]),
            Form::JobName => r#""billing::settle""#.to_owned(),
            Form::Path => r#""my_framework::cronguard""#.to_owned(),
        };
        let json = if key == "name" {
            format!(r#"{{ "name": {value} }}"#)
        } else {
            format!(r#"{{ "name": "x", "{key}": {value} }}"#)
        };
        let config: JobConfig =
            serde_json::from_str(&json).unwrap_or_else(|e| panic!("{json}: {e}"));
        assert_eq!(changed_fields(&base, &config), [key], "{json}");
    }
}

fn keys() -> Vec<String> {
    settings::keys().into_iter().map(str::to_owned).collect()
}

/// The fields (as `Debug` names them) whose values differ.
fn changed_fields(a: &JobConfig, b: &JobConfig) -> Vec<String> {
    fn fields(config: &JobConfig) -> Vec<(String, String)> {
        let shown = format!("{config:?}");
        shown
            .trim_start_matches("JobConfig { ")
            .trim_end_matches(" }")
            .split(", ")
            .filter_map(|field| field.split_once(": "))
            .map(|(name, value)| (name.to_owned(), value.to_owned()))
            .collect()
    }
    fields(a)
        .into_iter()
        .zip(fields(b))
        .filter(|(a, b)| a != b)
        .map(|(a, _)| a.0)
        .collect()
}
