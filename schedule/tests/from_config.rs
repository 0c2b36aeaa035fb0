//! Schedules from configuration: `FromStr`, `Schedule::from_settings` and (feature `serde`)
//! `Deserialize`, with the checks of the attribute.

use std::time::Duration;

use cronguard_schedule::{Schedule, ScheduleError};

#[test]
fn one_line_forms() {
    let cases = [
        ("30 2 * * *", "at 02:30 every day (UTC)"),
        ("  @daily ", "at 00:00 every day (UTC)"),
        (
            "CRON_TZ=Europe/Berlin 30 2 * * *",
            "at 02:30 every day (Europe/Berlin)",
        ),
        (
            "TZ=America/New_York\t0 9 * * MON-FRI",
            "at 09:00, Monday to Friday (America/New_York)",
        ),
        ("@every 30s", "every 30 seconds"),
        ("@EVERY 1h 30m", "every 90 minutes"),
    ];
    for (text, words) in cases {
        let schedule: Schedule = text.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(schedule.describe(), words, "{text}");
    }
}

#[test]
fn one_line_errors() {
    let err = "0 0 L-31 * *".parse::<Schedule>().expect_err("L-31");
    match &err {
        ScheduleError::Cron { source, .. } => assert_eq!(source.column(), Some(5)),
        other => panic!("{other:?}"),
    }
    let err = "CRON_TZ=Europe/Berln 0 0 * * *"
        .parse::<Schedule>()
        .expect_err("zone");
    assert!(
        err.to_string().contains("did you mean `Europe/Berlin`?"),
        "{err}"
    );
    let err = "CRON_TZ=UTC 0 0\u{3000}* * *"
        .parse::<Schedule>()
        .expect_err("space");
    assert!(
        err.to_string().contains("U+3000 IDEOGRAPHIC SPACE"),
        "{err}"
    );
    assert!(matches!(
        "@every 500us".parse::<Schedule>(),
        Err(ScheduleError::Interval(_))
    ));
    assert!(matches!(
        "@every 0s".parse::<Schedule>(),
        Err(ScheduleError::Interval(_))
    ));
    assert!("@everyday".parse::<Schedule>().is_err());
}

#[test]
fn settings_follow_the_rules_of_the_attribute() {
    assert_eq!(
        Schedule::from_settings(Some("0 * * * *"), Some("1m"), None).expect_err("invalid"),
        ScheduleError::CronAndEvery
    );
    assert_eq!(
        Schedule::from_settings(None, None, Some("UTC")).expect_err("invalid"),
        ScheduleError::NoSchedule
    );
    assert_eq!(
        Schedule::from_settings(None, Some("1m"), Some("UTC")).expect_err("invalid"),
        ScheduleError::TimeZoneWithEvery
    );
    let every = Schedule::from_settings(None, Some("1500ms"), None).expect("valid");
    assert_eq!(every.interval(), Some(Duration::from_millis(1500)));
    let cron = Schedule::from_settings(Some("0 0 L-1 * *"), None, None).expect("valid");
    assert_eq!(cron.time_zone(), Some(chrono_tz::Tz::UTC));
}

#[cfg(feature = "serde")]
#[test]
fn deserialize_from_a_string_or_a_table() {
    #[derive(serde::Deserialize)]
    struct Config {
        schedules: Vec<Schedule>,
    }
    let config: Config = serde_json::from_str(
        r#"{ "schedules": [
            "CRON_TZ=Europe/Berlin 30 2 * * *",
            { "cron": "*/15 9-17 * * MON-FRI" },
            { "cron": "0 0 LW * *", "tz": "Asia/Tokyo" },
            { "every": "5m" }
        ] }"#,
    )
    .expect("valid");
    let words: Vec<String> = config.schedules.iter().map(Schedule::describe).collect();
    assert_eq!(
        words,
        [
            "at 02:30 every day (Europe/Berlin)",
            "every 15 minutes from 09:00 through 17:45, Monday to Friday (UTC)",
            "at 00:00 on the last weekday of the month (Asia/Tokyo)",
            "every 5 minutes",
        ]
    );
    for (json, expected) in [
        (r#""0 0 L-31 * *""#, "at column 5: `L-31`"),
        (
            r#"{ "every": "5m", "tz": "UTC" }"#,
            "`tz` applies only to `cron`",
        ),
        (
            r#"{ "cron": "0 0 * * *", "every": "5m" }"#,
            "cannot be combined",
        ),
        (r#"{ "cronn": "0 0 * * *" }"#, "unknown field `cronn`"),
        (
            r#"{ "cron": "0 0 * * *", "cron": "1 0 * * *" }"#,
            "duplicate field `cron`",
        ),
        ("42", "a cron expression"),
    ] {
        let err = serde_json::from_str::<Schedule>(json)
            .map(|_| ())
            .expect_err(json);
        assert!(err.to_string().contains(expected), "{json}: {err}");
    }
}

#[test]
fn what_a_schedule_shows_reads_back_as_the_same_schedule() {
    let schedules = [
        Schedule::cron("30 2 * * *", "Europe/Berlin").expect("valid"),
        Schedule::cron("*/5 * * * * *", "UTC").expect("valid"),
        Schedule::cron("@daily", "America/New_York").expect("valid"),
        Schedule::every(std::time::Duration::from_secs(1)).expect("valid"),
        Schedule::every(std::time::Duration::from_millis(90_061_500)).expect("valid"),
        Schedule::every(std::time::Duration::from_secs(86_400 * 400)).expect("valid"),
    ];
    let now = chrono::Utc::now();
    for schedule in schedules {
        let shown = schedule.to_string();
        let read: Schedule = shown
            .parse()
            .unwrap_or_else(|e| panic!("reads back `{shown}`: {e}"));
        assert_eq!(read.to_string(), shown);
        assert_eq!(read.next_after(now), schedule.next_after(now), "{shown}");
    }
    assert!("cron `61 * * * *` in UTC".parse::<Schedule>().is_err());
}
