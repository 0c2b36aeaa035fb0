//! What the dialect means: day-of-month/day-of-week, `L`, `W`, `#`, aliases, years, intervals.

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use cronguard_schedule::Schedule;

fn utc(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text).expect(text).to_utc()
}

fn show(instant: DateTime<Utc>) -> String {
    instant.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// The first `n` fires in UTC strictly after `after`, as RFC 3339 strings.
fn fires(expr: &str, after: &str, n: usize) -> Vec<String> {
    let schedule = Schedule::cron(expr, "UTC").expect(expr);
    schedule.fires_after(utc(after)).take(n).map(show).collect()
}

/// The dates (`YYYY-MM-DD`) of the first `n` fires strictly after `after`.
fn dates(expr: &str, after: &str, n: usize) -> Vec<String> {
    fires(expr, after, n)
        .into_iter()
        .map(|s| s[..10].to_owned())
        .collect()
}

#[test]
fn both_day_fields_restricted_is_or() {
    // April 2026: Fridays are 3, 10, 17, 24; the 13th is a Monday.
    assert_eq!(
        dates("0 0 13 * 5", "2026-04-01T00:00:00Z", 6),
        [
            "2026-04-03",
            "2026-04-10",
            "2026-04-13",
            "2026-04-17",
            "2026-04-24",
            "2026-05-01"
        ]
    );
    assert_eq!(
        dates("0 0 13 * FRI", "2026-04-01T00:00:00Z", 3),
        ["2026-04-03", "2026-04-10", "2026-04-13"]
    );
}

#[test]
fn a_day_field_starting_with_star_is_and() {
    // Odd days (`*/2` = 1, 3, …, 31) that are Fridays.
    assert_eq!(
        dates("0 0 */2 * 5", "2026-04-01T00:00:00Z", 3),
        ["2026-04-03", "2026-04-17", "2026-05-01"]
    );
    // The other way round: days 1-7 AND `*/5` weekdays (0 and 5: Sunday and Friday).
    assert_eq!(
        dates("0 0 1-7 * */5", "2026-04-01T00:00:00Z", 4),
        ["2026-04-03", "2026-04-05", "2026-05-01", "2026-05-03"]
    );
    // `*` and `?` leave the other field alone.
    assert_eq!(
        dates("0 0 * * 5", "2026-04-01T00:00:00Z", 2),
        ["2026-04-03", "2026-04-10"]
    );
    assert_eq!(
        dates("0 0 ? * 5", "2026-04-01T00:00:00Z", 2),
        ["2026-04-03", "2026-04-10"]
    );
    assert_eq!(
        dates("0 0 13 * ?", "2026-04-01T00:00:00Z", 2),
        ["2026-04-13", "2026-05-13"]
    );
}

#[test]
fn weekday_numbers_and_names() {
    // 0 and 7 are both Sunday; 2026-04-05 is a Sunday.
    for expr in [
        "0 0 * * 0",
        "0 0 * * 7",
        "0 0 * * SUN",
        "0 0 * * sun",
        "@weekly",
    ] {
        assert_eq!(
            dates(expr, "2026-04-01T00:00:00Z", 2),
            ["2026-04-05", "2026-04-12"],
            "{expr}"
        );
    }
    // Friday to Sunday, with Sunday written as 0 (cronie).
    for expr in ["0 0 * * 5-0", "0 0 * * FRI-SUN", "0 0 * * 5-7"] {
        assert_eq!(
            dates(expr, "2026-04-01T00:00:00Z", 4),
            ["2026-04-03", "2026-04-04", "2026-04-05", "2026-04-10"],
            "{expr}"
        );
    }
}

#[test]
fn last_day_of_month() {
    assert_eq!(
        dates("0 0 L * *", "2026-01-15T00:00:00Z", 4),
        ["2026-01-31", "2026-02-28", "2026-03-31", "2026-04-30"]
    );
    assert_eq!(
        dates("0 0 L 2 *", "2027-03-01T00:00:00Z", 2),
        ["2028-02-29", "2029-02-28"]
    );
}

#[test]
fn last_weekday_of_month() {
    // Jan 31 2026 is a Saturday, Feb 28 a Saturday, May 31 a Sunday.
    assert_eq!(
        dates("0 0 LW * *", "2026-01-01T00:00:00Z", 5),
        [
            "2026-01-30",
            "2026-02-27",
            "2026-03-31",
            "2026-04-30",
            "2026-05-29"
        ]
    );
}

#[test]
fn nearest_weekday() {
    // 15th: Feb 15 and Mar 15 2026 are Sundays (→ Monday), Apr 15 a Wednesday.
    assert_eq!(
        dates("0 0 15W * *", "2026-02-01T00:00:00Z", 3),
        ["2026-02-16", "2026-03-16", "2026-04-15"]
    );
    // Aug 15 2026 is a Saturday (→ Friday 14th).
    assert_eq!(
        dates("0 0 15W 8 *", "2026-01-01T00:00:00Z", 1),
        ["2026-08-14"]
    );
    // Aug 1 2026 is a Saturday: the nearest weekday in the month is Monday the 3rd.
    assert_eq!(
        dates("0 0 1W 8 *", "2026-01-01T00:00:00Z", 1),
        ["2026-08-03"]
    );
}

#[test]
fn nth_and_last_weekday() {
    // Second Friday.
    assert_eq!(
        dates("0 0 * * 5#2", "2026-01-01T00:00:00Z", 3),
        ["2026-01-09", "2026-02-13", "2026-03-13"]
    );
    assert_eq!(
        dates("0 0 * * FRI#2", "2026-01-01T00:00:00Z", 1),
        ["2026-01-09"]
    );
    // Last Friday.
    assert_eq!(
        dates("0 0 * * 5L", "2026-01-01T00:00:00Z", 3),
        ["2026-01-30", "2026-02-27", "2026-03-27"]
    );
    // Fifth Monday exists only in some months: March, June, August, November in 2026.
    assert_eq!(
        dates("0 0 * * 1#5", "2026-01-01T00:00:00Z", 4),
        ["2026-03-30", "2026-06-29", "2026-08-31", "2026-11-30"]
    );
    // Sunday as 7 with `#`.
    assert_eq!(
        dates("0 0 * * 7#1", "2026-04-01T00:00:00Z", 1),
        ["2026-04-05"]
    );
}

#[test]
fn aliases() {
    let after = "2026-04-15T10:30:00Z";
    assert_eq!(
        fires("@hourly", after, 2),
        ["2026-04-15T11:00:00Z", "2026-04-15T12:00:00Z"]
    );
    assert_eq!(fires("@daily", after, 1), ["2026-04-16T00:00:00Z"]);
    assert_eq!(fires("@midnight", after, 1), ["2026-04-16T00:00:00Z"]);
    assert_eq!(fires("@weekly", after, 1), ["2026-04-19T00:00:00Z"]);
    assert_eq!(fires("@monthly", after, 1), ["2026-05-01T00:00:00Z"]);
    assert_eq!(fires("@yearly", after, 1), ["2027-01-01T00:00:00Z"]);
    assert_eq!(fires("@annually", after, 1), ["2027-01-01T00:00:00Z"]);
    assert!(Schedule::cron("@hourly", "UTC")
        .expect("valid")
        .is_wildcard());
    assert!(!Schedule::cron("@daily", "UTC")
        .expect("valid")
        .is_wildcard());
}

#[test]
fn seconds_and_years() {
    assert_eq!(
        fires("*/20 * * * * *", "2026-04-15T10:30:05Z", 3),
        [
            "2026-04-15T10:30:20Z",
            "2026-04-15T10:30:40Z",
            "2026-04-15T10:31:00Z"
        ]
    );
    // A 7-field expression stops after its last year.
    assert_eq!(
        fires("0 0 12 1 1 * 2027", "2026-01-01T00:00:00Z", 5),
        ["2027-01-01T12:00:00Z"]
    );
    assert_eq!(
        dates("0 0 0 1 1 * 2026-2032/3", "2025-01-01T00:00:00Z", 5),
        ["2026-01-01", "2029-01-01", "2032-01-01"]
    );
    // `*/4` in the year field counts from 1970: 2026, 2030, …
    assert_eq!(
        dates("0 0 0 1 1 * */4", "2025-01-01T00:00:00Z", 2),
        ["2026-01-01", "2030-01-01"]
    );
    // Years in the past are valid; such a schedule simply has no further fires.
    let past = Schedule::cron("0 0 0 1 1 * 1999", "UTC").expect("valid");
    assert_eq!(past.next_after(utc("2026-01-01T00:00:00Z")), None);
    assert_eq!(
        past.next_after(utc("1998-06-01T00:00:00Z")),
        Some(utc("1999-01-01T00:00:00Z"))
    );
    // February 29 in a leap year only.
    assert_eq!(
        dates("0 0 0 29 2 * 2028", "2026-01-01T00:00:00Z", 2),
        ["2028-02-29"]
    );
    // A step beyond the span selects the start only.
    assert_eq!(
        fires("*/90 * * * *", "2026-04-15T10:30:00Z", 2),
        ["2026-04-15T11:00:00Z", "2026-04-15T12:00:00Z"]
    );
}

#[test]
fn next_after_is_strictly_after() {
    let schedule = Schedule::cron("0 * * * *", "Europe/Berlin").expect("valid");
    let on_a_fire = utc("2026-04-15T10:00:00Z");
    assert_eq!(
        show(schedule.next_after(on_a_fire).expect("fires")),
        "2026-04-15T11:00:00Z"
    );
    let just_before = utc("2026-04-15T09:59:59.999Z");
    assert_eq!(
        show(schedule.next_after(just_before).expect("fires")),
        "2026-04-15T10:00:00Z"
    );
}

#[test]
fn every_is_epoch_aligned() {
    let every = |d: Duration| Schedule::every(d).expect("non-zero");
    let seven = every(Duration::from_secs(7));
    assert_eq!(
        seven.next_after(DateTime::UNIX_EPOCH + chrono::TimeDelta::seconds(10)),
        Some(DateTime::UNIX_EPOCH + chrono::TimeDelta::seconds(14))
    );
    // 2026-01-01T00:00:00Z is a multiple of 90 minutes since the epoch.
    let ninety = every(Duration::from_secs(90 * 60));
    assert_eq!(
        ninety
            .fires_after(utc("2026-01-01T00:00:00Z"))
            .take(2)
            .map(show)
            .collect::<Vec<_>>(),
        ["2026-01-01T01:30:00Z", "2026-01-01T03:00:00Z"]
    );
    // Replicas started at different instants agree on the fires.
    let thirty = every(Duration::from_secs(30));
    let a: Vec<_> = thirty
        .fires_after(utc("2026-04-15T10:00:03Z"))
        .take(4)
        .collect();
    let b: Vec<_> = thirty
        .fires_after(utc("2026-04-15T10:00:17.5Z"))
        .take(4)
        .collect();
    assert_eq!(a, b);
    assert_eq!(show(a[0]), "2026-04-15T10:00:30Z");
    // Milliseconds.
    let ms = every(Duration::from_millis(1));
    assert_eq!(
        ms.next_after(utc("2026-04-15T10:00:00.0004Z")),
        Some(utc("2026-04-15T10:00:00.001Z"))
    );
    // Before the epoch.
    let hour = every(Duration::from_secs(3600));
    assert_eq!(
        hour.next_after(utc("1969-12-31T23:30:00Z")),
        Some(DateTime::UNIX_EPOCH)
    );
    // Days, and strict.
    let day = every(Duration::from_secs(86_400));
    assert_eq!(
        day.next_after(utc("2026-04-15T00:00:00Z")),
        Some(utc("2026-04-16T00:00:00Z"))
    );
    assert_eq!(hour.interval(), Some(Duration::from_secs(3600)));
    assert_eq!(hour.time_zone(), None);
    assert!(!hour.is_wildcard());
}

#[test]
fn display() {
    let cron = Schedule::cron("*/5 * * * *", "Europe/Berlin").expect("valid");
    assert_eq!(cron.to_string(), "cron `*/5 * * * *` in Europe/Berlin");
    let every = Schedule::every(Duration::from_secs(90)).expect("valid");
    assert_eq!(every.to_string(), "every 1m 30s");
}
