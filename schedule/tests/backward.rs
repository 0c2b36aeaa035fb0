//! `previous_before` and `fires_before`: the same fires as the forward walk, in reverse, with the
//! same daylight-saving rules. Property tests over random expressions, zones and instants;
//! `CRONGUARD_PROPTEST_CASES` (default 256) and `CRONGUARD_PROPTEST_SEED` (fixed by default) for
//! longer or other runs.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use chrono_tz::Tz;
use cronguard_schedule::Schedule;
use proptest::prelude::*;

fn utc(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text).expect(text).to_utc()
}

/// Zones with gaps and folds of every shape: an hour, half an hour (Lord Howe), at midnight
/// (Havana, Santiago), a whole day skipped (Apia 2011), two hours (Troll), and no change at all.
const ZONES: &[Tz] = &[
    Tz::UTC,
    Tz::Europe__Berlin,
    Tz::America__New_York,
    Tz::Australia__Lord_Howe,
    Tz::America__Havana,
    Tz::America__Santiago,
    Tz::Pacific__Apia,
    Tz::Antarctica__Troll,
    Tz::Asia__Kolkata,
    Tz::America__St_Johns,
    Tz::Europe__London,
    Tz::Africa__Casablanca,
];

/// Checks that the backward walk from just after the `n`-th fire after `start` retraces the
/// forward walk exactly, and that each fire's `previous_before` is the fire before it.
fn agree(schedule: &Schedule, start: DateTime<Utc>, n: usize) -> Result<(), TestCaseError> {
    let forward: Vec<_> = schedule.fires_after(start).take(n).collect();
    let Some(last) = forward.last() else {
        return Ok(());
    };
    // Cron fires fall on whole seconds and intervals here are whole seconds too: nothing fires
    // strictly between the last fire and a second later.
    let mut backward: Vec<_> = schedule
        .fires_before(*last + TimeDelta::seconds(1))
        .take(forward.len())
        .collect();
    backward.reverse();
    prop_assert_eq!(&backward, &forward, "{} from {}", schedule, start);
    // The fire before the first one lies at or before the start.
    if let Some(before_first) = schedule.previous_before(forward[0]) {
        prop_assert!(
            before_first <= start,
            "{schedule}: {before_first} after {start}"
        );
        prop_assert_eq!(schedule.next_after(before_first), Some(forward[0]));
    }
    // From the start itself: the previous fire is before it, the next one after it is the first.
    if let Some(previous) = schedule.previous_before(start) {
        prop_assert!(previous < start);
        let next = schedule.next_after(previous);
        prop_assert!(
            next.is_some_and(|n| n >= start),
            "{schedule}: {previous} -> {next:?}"
        );
    }
    Ok(())
}

/// One item of a field with bounds `min..=max`.
fn item(min: u32, max: u32) -> impl Strategy<Value = String> {
    prop_oneof![
        3 => (min..=max).prop_map(|v| v.to_string()),
        1 => (min..=max, min..=max).prop_map(|(a, b)| format!("{}-{}", a.min(b), a.max(b))),
        1 => (1..=max.max(1)).prop_map(|s| format!("*/{s}")),
        1 => (min..=max, min..=max, 1..=7u32)
            .prop_map(|(a, b, s)| format!("{}-{}/{s}", a.min(b), a.max(b))),
    ]
}

fn field(min: u32, max: u32) -> impl Strategy<Value = String> {
    prop_oneof![
        2 => Just("*".to_owned()),
        3 => proptest::collection::vec(item(min, max), 1..=3).prop_map(|items| items.join(",")),
    ]
}

fn day_of_month() -> impl Strategy<Value = String> {
    let special = prop_oneof![
        Just("L".to_owned()),
        Just("LW".to_owned()),
        (1..=28u32).prop_map(|d| format!("{d}W")),
        (0..=30u32).prop_map(|n| format!("L-{n}")),
        item(1, 31),
    ];
    prop_oneof![
        3 => Just("*".to_owned()),
        2 => proptest::collection::vec(special, 1..=2).prop_map(|items| items.join(",")),
    ]
}

fn day_of_week() -> impl Strategy<Value = String> {
    let special = prop_oneof![
        (0..=7u32, 1..=5u32).prop_map(|(d, n)| format!("{d}#{n}")),
        (0..=7u32).prop_map(|d| format!("{d}L")),
        item(0, 7),
    ];
    prop_oneof![
        4 => Just("*".to_owned()),
        1 => special,
    ]
}

/// Random expressions, most of them firing often enough to cross a daylight-saving change.
fn expression() -> impl Strategy<Value = String> {
    (
        prop_oneof![3 => Just("0".to_owned()), 1 => field(0, 59)],
        field(0, 59),
        field(0, 23),
        day_of_month(),
        prop_oneof![3 => Just("*".to_owned()), 1 => field(1, 12)],
        day_of_week(),
    )
        .prop_map(|(s, m, h, dom, mon, dow)| format!("{s} {m} {h} {dom} {mon} {dow}"))
}

/// Instants from 1975 to 2045, many of them in the months where zones change their clocks.
fn instant() -> impl Strategy<Value = DateTime<Utc>> {
    (
        1975..2045i32,
        prop_oneof![Just(3u32), Just(4), Just(9), Just(10), Just(11), 1..=12u32],
        1..=28u32,
        0..86_400i64,
    )
        .prop_map(|(y, m, d, s)| {
            Utc.with_ymd_and_hms(y, m, d, 0, 0, 0)
                .single()
                .unwrap_or_default()
                + TimeDelta::seconds(s)
        })
}

fn cases() -> u32 {
    std::env::var("CRONGUARD_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

/// A fixed seed keeps runs deterministic; `CRONGUARD_PROPTEST_SEED` picks another one.
fn config() -> ProptestConfig {
    let seed = std::env::var("CRONGUARD_PROPTEST_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x0c40_9a2d);
    ProptestConfig {
        cases: cases(),
        rng_seed: proptest::test_runner::RngSeed::Fixed(seed),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn forward_and_backward_walks_agree(
        expr in expression(),
        zone in proptest::sample::select(ZONES),
        start in instant(),
    ) {
        // Random expressions that can never fire are rejected, as they should be.
        let Ok(schedule) = Schedule::cron_in(&expr, zone) else { return Ok(()); };
        agree(&schedule, start, 24)?;
    }

    #[test]
    fn wildcard_and_fixed_jobs_agree_around_every_change(
        expr in prop_oneof![
            Just("*/15 * * * *"), Just("0 * * * *"), Just("30 * * * *"), Just("*/7 * * * *"),
            Just("30 2 * * *"), Just("0 0 * * *"), Just("15,45 1-3 * * *"), Just("0 30 * * * *"),
            Just("*/20 0-3 * * *"), Just("0 23 * * *"), Just("0 0 L-1 * *"), Just("59 1 * * SUN"),
        ],
        zone in proptest::sample::select(ZONES),
        start in instant(),
    ) {
        let schedule = Schedule::cron_in(expr, zone).expect("valid");
        agree(&schedule, start, 40)?;
    }

    #[test]
    fn intervals_agree(
        seconds in 1u64..100_000,
        start in instant(),
    ) {
        let schedule = Schedule::every(Duration::from_secs(seconds)).expect("positive");
        agree(&schedule, start, 16)?;
    }
}

/// Every fire of a year in zones with changes, walked both ways.
#[test]
fn a_whole_year_both_ways() {
    for zone in ZONES {
        for expr in [
            "*/30 * * * *",
            "30 2 * * *",
            "0 0,1,2,3 * * *",
            "0 0 L-2 * *",
        ] {
            let schedule = Schedule::cron_in(expr, *zone).expect("valid");
            let start = utc("2025-12-31T00:00:00Z");
            let end = utc("2027-01-01T00:00:00Z");
            let forward: Vec<_> = schedule
                .fires_after(start)
                .take_while(|f| *f < end)
                .collect();
            let mut backward: Vec<_> = schedule
                .fires_before(end)
                .take_while(|f| *f > start)
                .collect();
            backward.reverse();
            assert_eq!(forward, backward, "{expr} in {zone}");
        }
    }
}

#[test]
fn previous_before_follows_the_daylight_saving_rules() {
    let berlin = "Europe/Berlin";
    // Spring forward on 2026-03-29: 02:00-03:00 local does not exist.
    let fixed = Schedule::cron("30 2 * * *", berlin).expect("valid");
    assert_eq!(
        fixed.previous_before(utc("2026-03-29T12:00:00Z")),
        Some(utc("2026-03-29T01:00:00Z"))
    );
    let wildcard = Schedule::cron("30 * * * *", berlin).expect("valid");
    assert_eq!(
        wildcard.previous_before(utc("2026-03-29T01:10:00Z")),
        Some(utc("2026-03-29T00:30:00Z")), // 01:30 local; 02:30 does not exist
    );
    // Fall back on 2026-10-25: 02:00-03:00 local happens twice (00:00-01:00 UTC, then 01:00-02:00).
    assert_eq!(
        fixed.previous_before(utc("2026-10-25T12:00:00Z")),
        Some(utc("2026-10-25T00:30:00Z")), // the first 02:30 only
    );
    assert_eq!(
        wildcard.previous_before(utc("2026-10-25T01:40:00Z")),
        Some(utc("2026-10-25T01:30:00Z")), // the second 02:30
    );
    assert_eq!(
        wildcard.previous_before(utc("2026-10-25T01:20:00Z")),
        Some(utc("2026-10-25T00:30:00Z")), // the first 02:30, from inside the second pass
    );
    // From inside the second pass, a fixed job's last fire is the first pass's 02:45.
    let quarter = Schedule::cron("45 2 * * *", berlin).expect("valid");
    assert_eq!(
        quarter.previous_before(utc("2026-10-25T01:20:00Z")),
        Some(utc("2026-10-25T00:45:00Z")),
    );
    let walked: Vec<_> = wildcard
        .fires_before(utc("2026-10-25T02:00:00Z"))
        .take(4)
        .collect();
    assert_eq!(
        walked,
        [
            utc("2026-10-25T01:30:00Z"),
            utc("2026-10-25T00:30:00Z"),
            utc("2026-10-24T23:30:00Z"),
            utc("2026-10-24T22:30:00Z"),
        ]
    );
}

#[test]
fn before_the_first_fire_there_is_none() {
    let once = Schedule::cron("0 0 0 1 1 * 2030", "UTC").expect("valid");
    assert_eq!(once.previous_before(utc("2030-01-01T00:00:00Z")), None);
    assert_eq!(
        once.previous_before(utc("2030-01-01T00:00:01Z")),
        Some(utc("2030-01-01T00:00:00Z"))
    );
    let every = Schedule::every(Duration::from_secs(60)).expect("valid");
    assert_eq!(
        every.previous_before(utc("2026-01-01T00:01:00Z")),
        Some(utc("2026-01-01T00:00:00Z"))
    );
    assert_eq!(
        every.previous_before(utc("2026-01-01T00:01:00.5Z")),
        Some(utc("2026-01-01T00:01:00Z"))
    );
    for extreme in [DateTime::<Utc>::MIN_UTC, DateTime::<Utc>::MAX_UTC] {
        let _ = every.previous_before(extreme);
        let _ = Schedule::cron("*/15 * * * *", "Europe/Berlin")
            .expect("valid")
            .previous_before(extreme);
    }
}
