//! Daylight-saving transitions, cronie's rules (DESIGN §2), with exact UTC instants.
//!
//! The 2026 transitions used (from chrono-tz):
//! - Europe/Berlin: 03-29 01:00Z (02:00 → 03:00 local), 10-25 01:00Z (03:00 → 02:00 local).
//! - America/New_York: 03-08 07:00Z (02:00 → 03:00), 11-01 06:00Z (02:00 → 01:00).
//! - Australia/Lord_Howe (30-minute shift): 04-04 15:00Z (02:00 → 01:30 local, +11:00 → +10:30),
//!   10-03 15:30Z (02:00 → 02:30 local, +10:30 → +11:00).

use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};
use cronguard_schedule::Schedule;

fn utc(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text).expect(text).to_utc()
}

fn show(instant: DateTime<Utc>) -> String {
    instant.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// The first `n` fires strictly after `after`, as RFC 3339 UTC strings.
fn fires(expr: &str, tz: &str, after: &str, n: usize) -> Vec<String> {
    let schedule = Schedule::cron(expr, tz).expect(expr);
    schedule.fires_after(utc(after)).take(n).map(show).collect()
}

fn next(expr: &str, tz: &str, after: &str) -> String {
    let schedule = Schedule::cron(expr, tz).expect(expr);
    show(schedule.next_after(utc(after)).expect("fires"))
}

const BERLIN: &str = "Europe/Berlin";
const NEW_YORK: &str = "America/New_York";
const LORD_HOWE: &str = "Australia/Lord_Howe";

// ----- Europe/Berlin -------------------------------------------------------------------------

#[test]
fn berlin_spring_forward_fixed_time() {
    // 02:30 does not exist on 03-29: the job runs once at 03:00 local (01:00Z).
    assert_eq!(
        fires("30 2 * * *", BERLIN, "2026-03-28T00:00:00Z", 3),
        [
            "2026-03-28T01:30:00Z",
            "2026-03-29T01:00:00Z",
            "2026-03-30T00:30:00Z"
        ]
    );
    assert_eq!(
        fires("0 2 * * *", BERLIN, "2026-03-28T00:00:00Z", 3),
        [
            "2026-03-28T01:00:00Z",
            "2026-03-29T01:00:00Z",
            "2026-03-30T00:00:00Z"
        ]
    );
    assert_eq!(
        fires("15,45 1 * * *", BERLIN, "2026-03-29T00:00:00Z", 3),
        [
            "2026-03-29T00:15:00Z",
            "2026-03-29T00:45:00Z",
            "2026-03-29T23:15:00Z"
        ]
    );
}

#[test]
fn berlin_spring_forward_gap_collapse() {
    // 02:00 and 02:30 both fall in the gap: one fire at 03:00 local.
    assert_eq!(
        fires("0,30 2 * * *", BERLIN, "2026-03-29T00:00:00Z", 3),
        [
            "2026-03-29T01:00:00Z",
            "2026-03-30T00:00:00Z",
            "2026-03-30T00:30:00Z"
        ]
    );
    // A time inside the gap and the first time after it collapse too.
    assert_eq!(
        fires("0 2,3 * * *", BERLIN, "2026-03-29T00:00:00Z", 2),
        ["2026-03-29T01:00:00Z", "2026-03-30T00:00:00Z"]
    );
    // Every second of 02:30 collapses into the one fire.
    assert_eq!(
        fires("* 30 2 * * *", BERLIN, "2026-03-29T00:59:00Z", 2),
        ["2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"]
    );
}

#[test]
fn berlin_spring_forward_wildcard() {
    assert_eq!(
        fires("*/15 * * * *", BERLIN, "2026-03-29T00:30:00Z", 3),
        [
            "2026-03-29T00:45:00Z",
            "2026-03-29T01:00:00Z",
            "2026-03-29T01:15:00Z"
        ]
    );
    assert_eq!(
        fires("0 * * * *", BERLIN, "2026-03-29T00:00:00Z", 2),
        ["2026-03-29T01:00:00Z", "2026-03-29T02:00:00Z"]
    );
    // A wildcard job whose only times fall in the gap skips that day.
    assert_eq!(
        fires("*/30 2 * * *", BERLIN, "2026-03-28T23:00:00Z", 1),
        ["2026-03-30T00:00:00Z"]
    );
}

#[test]
fn berlin_fall_back_fixed_time() {
    // 02:30 happens twice on 10-25: only the first (CEST, 00:30Z) fires.
    assert_eq!(
        fires("30 2 * * *", BERLIN, "2026-10-24T12:00:00Z", 2),
        ["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"]
    );
    assert_eq!(
        fires("0 2 * * *", BERLIN, "2026-10-24T12:00:00Z", 2),
        ["2026-10-25T00:00:00Z", "2026-10-26T01:00:00Z"]
    );
    assert_eq!(
        fires("15,45 2 * * *", BERLIN, "2026-10-24T12:00:00Z", 3),
        [
            "2026-10-25T00:15:00Z",
            "2026-10-25T00:45:00Z",
            "2026-10-26T01:15:00Z"
        ]
    );
}

#[test]
fn berlin_fall_back_wildcard() {
    assert_eq!(
        fires("*/15 * * * *", BERLIN, "2026-10-24T23:30:00Z", 10),
        [
            "2026-10-24T23:45:00Z",
            "2026-10-25T00:00:00Z",
            "2026-10-25T00:15:00Z",
            "2026-10-25T00:30:00Z",
            "2026-10-25T00:45:00Z",
            "2026-10-25T01:00:00Z",
            "2026-10-25T01:15:00Z",
            "2026-10-25T01:30:00Z",
            "2026-10-25T01:45:00Z",
            "2026-10-25T02:00:00Z",
        ]
    );
    assert_eq!(
        fires("0 * * * *", BERLIN, "2026-10-24T23:30:00Z", 3),
        [
            "2026-10-25T00:00:00Z",
            "2026-10-25T01:00:00Z",
            "2026-10-25T02:00:00Z"
        ]
    );
}

#[test]
fn berlin_start_inside_the_repeated_hour() {
    // From the second 02:30 (01:30Z): the wildcard job fires at the second 02:45, never at the
    // first 02:45 (00:45Z, already past).
    assert_eq!(
        next("*/15 * * * *", BERLIN, "2026-10-25T01:30:00Z"),
        "2026-10-25T01:45:00Z"
    );
    // The fixed-time job already ran at the first 02:45; next is the day after.
    assert_eq!(
        next("45 2 * * *", BERLIN, "2026-10-25T01:30:00Z"),
        "2026-10-26T01:45:00Z"
    );
    // From the first 02:50: the wildcard job's next is the second 02:00.
    assert_eq!(
        next("*/15 * * * *", BERLIN, "2026-10-25T00:50:00Z"),
        "2026-10-25T01:00:00Z"
    );
    assert_eq!(
        next("0 * * * *", BERLIN, "2026-10-25T00:50:00Z"),
        "2026-10-25T01:00:00Z"
    );
    assert_eq!(
        next("0 2 * * *", BERLIN, "2026-10-25T00:50:00Z"),
        "2026-10-26T01:00:00Z"
    );
    // Sub-second starts inside the repeated hour.
    assert_eq!(
        next("* * * * * *", BERLIN, "2026-10-25T00:59:59.500Z"),
        "2026-10-25T01:00:00Z"
    );
    assert_eq!(
        next("* * * * * *", BERLIN, "2026-10-25T01:00:00.250Z"),
        "2026-10-25T01:00:01Z"
    );
}

// ----- America/New_York ----------------------------------------------------------------------

#[test]
fn new_york_spring_forward() {
    assert_eq!(
        fires("30 2 * * *", NEW_YORK, "2026-03-07T12:00:00Z", 2),
        ["2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"]
    );
    assert_eq!(
        fires("0 2 * * *", NEW_YORK, "2026-03-07T12:00:00Z", 2),
        ["2026-03-08T07:00:00Z", "2026-03-09T06:00:00Z"]
    );
    assert_eq!(
        fires("15,45 1 * * *", NEW_YORK, "2026-03-08T00:00:00Z", 3),
        [
            "2026-03-08T06:15:00Z",
            "2026-03-08T06:45:00Z",
            "2026-03-09T05:15:00Z"
        ]
    );
    assert_eq!(
        fires("*/15 * * * *", NEW_YORK, "2026-03-08T06:30:00Z", 3),
        [
            "2026-03-08T06:45:00Z",
            "2026-03-08T07:00:00Z",
            "2026-03-08T07:15:00Z"
        ]
    );
    assert_eq!(
        fires("0 * * * *", NEW_YORK, "2026-03-08T06:30:00Z", 2),
        ["2026-03-08T07:00:00Z", "2026-03-08T08:00:00Z"]
    );
}

#[test]
fn new_york_fall_back() {
    assert_eq!(
        fires("15,45 1 * * *", NEW_YORK, "2026-10-31T12:00:00Z", 3),
        [
            "2026-11-01T05:15:00Z",
            "2026-11-01T05:45:00Z",
            "2026-11-02T06:15:00Z"
        ]
    );
    assert_eq!(
        fires("30 1 * * *", NEW_YORK, "2026-10-31T12:00:00Z", 2),
        ["2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"]
    );
    assert_eq!(
        fires("0 2 * * *", NEW_YORK, "2026-10-31T12:00:00Z", 2),
        ["2026-11-01T07:00:00Z", "2026-11-02T07:00:00Z"]
    );
    assert_eq!(
        fires("*/15 * * * *", NEW_YORK, "2026-11-01T04:50:00Z", 9),
        [
            "2026-11-01T05:00:00Z",
            "2026-11-01T05:15:00Z",
            "2026-11-01T05:30:00Z",
            "2026-11-01T05:45:00Z",
            "2026-11-01T06:00:00Z",
            "2026-11-01T06:15:00Z",
            "2026-11-01T06:30:00Z",
            "2026-11-01T06:45:00Z",
            "2026-11-01T07:00:00Z",
        ]
    );
    assert_eq!(
        fires("0 * * * *", NEW_YORK, "2026-11-01T04:30:00Z", 3),
        [
            "2026-11-01T05:00:00Z",
            "2026-11-01T06:00:00Z",
            "2026-11-01T07:00:00Z"
        ]
    );
}

#[test]
fn new_york_start_inside_the_repeated_hour() {
    // At the second 01:30 (06:30Z): not the first 01:45 (05:45Z), which is past.
    assert_eq!(
        next("*/15 * * * *", NEW_YORK, "2026-11-01T06:30:00Z"),
        "2026-11-01T06:45:00Z"
    );
    assert_eq!(
        next("45 1 * * *", NEW_YORK, "2026-11-01T06:30:00Z"),
        "2026-11-02T06:45:00Z"
    );
    // At the first 01:30 (05:30Z).
    assert_eq!(
        next("*/15 * * * *", NEW_YORK, "2026-11-01T05:30:00Z"),
        "2026-11-01T05:45:00Z"
    );
    assert_eq!(
        next("45 1 * * *", NEW_YORK, "2026-11-01T05:30:00Z"),
        "2026-11-01T05:45:00Z"
    );
    // From the first 01:50, a wildcard job's next time is the second 01:00.
    assert_eq!(
        next("*/20 1 * * *", NEW_YORK, "2026-11-01T05:50:00Z"),
        "2026-11-01T06:00:00Z"
    );
    assert_eq!(
        next("0 * * * *", NEW_YORK, "2026-11-01T05:30:00Z"),
        "2026-11-01T06:00:00Z"
    );
    assert_eq!(
        fires("*/20 1 * * *", NEW_YORK, "2026-11-01T05:30:00Z", 5),
        [
            "2026-11-01T05:40:00Z",
            "2026-11-01T06:00:00Z",
            "2026-11-01T06:20:00Z",
            "2026-11-01T06:40:00Z",
            "2026-11-02T06:00:00Z",
        ]
    );
}

// ----- Australia/Lord_Howe (30-minute shift) -------------------------------------------------

#[test]
fn lord_howe_fall_back() {
    // 01:30-02:00 local happens twice on 04-05: first at +11:00 (14:30Z-15:00Z), then at
    // +10:30 (15:00Z-15:30Z).
    assert_eq!(
        fires("45 1 * * *", LORD_HOWE, "2026-04-04T00:00:00Z", 2),
        ["2026-04-04T14:45:00Z", "2026-04-05T15:15:00Z"]
    );
    assert_eq!(
        fires("0 2 * * *", LORD_HOWE, "2026-04-04T00:00:00Z", 2),
        ["2026-04-04T15:30:00Z", "2026-04-05T15:30:00Z"]
    );
    assert_eq!(
        fires("15,45 1 * * *", LORD_HOWE, "2026-04-04T00:00:00Z", 3),
        [
            "2026-04-04T14:15:00Z",
            "2026-04-04T14:45:00Z",
            "2026-04-05T14:45:00Z"
        ]
    );
    assert_eq!(
        fires("*/15 * * * *", LORD_HOWE, "2026-04-04T14:20:00Z", 6),
        [
            "2026-04-04T14:30:00Z",
            "2026-04-04T14:45:00Z",
            "2026-04-04T15:00:00Z",
            "2026-04-04T15:15:00Z",
            "2026-04-04T15:30:00Z",
            "2026-04-04T15:45:00Z",
        ]
    );
    assert_eq!(
        fires("0 * * * *", LORD_HOWE, "2026-04-04T14:20:00Z", 2),
        ["2026-04-04T15:30:00Z", "2026-04-04T16:30:00Z"]
    );
    // From inside the second pass (01:40 at +10:30 = 15:10Z).
    assert_eq!(
        next("*/15 * * * *", LORD_HOWE, "2026-04-04T15:10:00Z"),
        "2026-04-04T15:15:00Z"
    );
    assert_eq!(
        next("45 1 * * *", LORD_HOWE, "2026-04-04T15:10:00Z"),
        "2026-04-05T15:15:00Z"
    );
}

#[test]
fn lord_howe_spring_forward() {
    // 02:00-02:30 local does not exist on 10-04: the gap ends at 02:30 (+11:00) = 15:30Z.
    assert_eq!(
        fires("0 2 * * *", LORD_HOWE, "2026-10-03T00:00:00Z", 2),
        ["2026-10-03T15:30:00Z", "2026-10-04T15:00:00Z"]
    );
    assert_eq!(
        fires("0,15 2 * * *", LORD_HOWE, "2026-10-03T00:00:00Z", 3),
        [
            "2026-10-03T15:30:00Z",
            "2026-10-04T15:00:00Z",
            "2026-10-04T15:15:00Z"
        ]
    );
    // 02:30 exists, and the gap's collapsed fire is the same instant: one fire.
    assert_eq!(
        fires("15,30 2 * * *", LORD_HOWE, "2026-10-03T00:00:00Z", 2),
        ["2026-10-03T15:30:00Z", "2026-10-04T15:15:00Z"]
    );
    assert_eq!(
        fires("30 2 * * *", LORD_HOWE, "2026-10-03T00:00:00Z", 2),
        ["2026-10-03T15:30:00Z", "2026-10-04T15:30:00Z"]
    );
    assert_eq!(
        fires("*/15 * * * *", LORD_HOWE, "2026-10-03T15:00:00Z", 3),
        [
            "2026-10-03T15:15:00Z",
            "2026-10-03T15:30:00Z",
            "2026-10-03T15:45:00Z"
        ]
    );
    assert_eq!(
        fires("0 * * * *", LORD_HOWE, "2026-10-03T15:00:00Z", 2),
        ["2026-10-03T16:00:00Z", "2026-10-03T17:00:00Z"]
    );
}

// ----- Whole years ---------------------------------------------------------------------------

/// A wildcard `*/15` keeps absolute time through every transition: exactly 15 minutes apart.
#[test]
fn a_year_of_quarter_hours_is_strictly_ascending_and_evenly_spaced() {
    for tz in [BERLIN, NEW_YORK, LORD_HOWE] {
        let schedule = Schedule::cron("*/15 * * * *", tz).expect("valid");
        let start = utc("2026-01-01T00:00:00Z");
        let end = utc("2027-01-01T00:00:00Z");
        let fires: Vec<_> = schedule
            .fires_after(start)
            .take_while(|t| *t <= end)
            .collect();
        assert_eq!(fires.len(), 365 * 96, "{tz}");
        for pair in fires.windows(2) {
            assert!(pair[0] < pair[1], "{tz}: {pair:?}");
            assert_eq!(pair[1] - pair[0], TimeDelta::minutes(15), "{tz}: {pair:?}");
        }
    }
}

/// A fixed-time job fires exactly once per day through both transitions.
#[test]
fn a_year_of_a_fixed_time_job_fires_once_a_day() {
    for (expr, tz) in [
        ("30 2 * * *", BERLIN),
        ("0,30 2 * * *", BERLIN),
        ("30 1 * * *", NEW_YORK),
        ("15 2 * * *", NEW_YORK),
        ("45 1 * * *", LORD_HOWE),
        ("15 2 * * *", LORD_HOWE),
    ] {
        let schedule = Schedule::cron(expr, tz).expect("valid");
        let start = utc("2025-12-31T12:00:00Z");
        let fires: Vec<_> = schedule.fires_after(start).take(365).collect();
        let per_fire = if expr.starts_with("0,30") { 2 } else { 1 };
        assert!(fires.windows(2).all(|w| w[0] < w[1]), "{expr} in {tz}");
        // Every local date of 2026 appears (with `0,30`, twice except the gap day).
        let zone = Schedule::cron(expr, tz)
            .expect("valid")
            .time_zone()
            .expect("cron");
        let days: std::collections::BTreeSet<_> = schedule
            .fires_after(start)
            .take(365 * per_fire)
            .map(|t| t.with_timezone(&zone).date_naive())
            .collect();
        assert!(days.len() >= 365, "{expr} in {tz}: {} days", days.len());
    }
}
