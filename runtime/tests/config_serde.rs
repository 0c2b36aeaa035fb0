//! `Deserialize` for `JobConfig`, `Lock`, `Overlap` and `Schedule` (feature `serde`): jobs from a
//! configuration file go through the attribute's checks.
#![cfg(feature = "serde")]

use cronguard::{JobConfig, Lock, Overlap, Schedule};

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
    assert!(err.to_string().contains("unknown field `leese`"), "{err}");
}
