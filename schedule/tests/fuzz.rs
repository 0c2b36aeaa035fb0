//! Fuzzing the parser with proptest: arbitrary strings and near-valid expressions never make it
//! panic or hang, and what it accepts can be evaluated both ways and described.
//!
//! `CRONGUARD_FUZZ_CASES` sets the cases per property (default 2000) and `CRONGUARD_FUZZ_SEED`
//! the seed (fixed by default, so that a run is deterministic), for longer runs:
//!
//! ```text
//! CRONGUARD_FUZZ_CASES=200000 cargo test -p cronguard-schedule --release --test fuzz
//! ```

use std::time::{Duration, Instant};

use chrono::{TimeZone, Utc};
use cronguard_schedule::{CronExpr, Schedule};
use proptest::prelude::*;

/// Far above any parse (microseconds): a parse this slow is a hang, not a slow machine.
const HANG: Duration = Duration::from_secs(5);

fn cases() -> u32 {
    std::env::var("CRONGUARD_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000)
}

/// Parses `text` every way the crate offers and, when it is valid, walks and describes it.
fn exercise(text: &str) -> Result<(), TestCaseError> {
    let begin = Instant::now();
    let parsed = CronExpr::parse(text);
    if let Err(error) = &parsed {
        // A reported position lies inside the text, on character boundaries.
        if let Some(span) = error.span() {
            prop_assert!(text.get(span.clone()).is_some(), "{text:?}: {span:?}");
            prop_assert!(error.column().is_some());
        }
        prop_assert!(!error.reason().is_empty());
    }
    let _ = text.parse::<Schedule>();
    if parsed.is_ok() {
        let schedule = Schedule::cron(text, "Europe/Berlin");
        prop_assert!(schedule.is_ok(), "{text:?}: {schedule:?}");
        if let Ok(schedule) = schedule {
            let at = Utc
                .with_ymd_and_hms(2026, 3, 29, 0, 30, 0)
                .single()
                .unwrap_or_default();
            let next = schedule.next_after(at);
            let previous = schedule.previous_before(at);
            prop_assert!(next.is_none_or(|n| n > at));
            prop_assert!(previous.is_none_or(|p| p < at));
            prop_assert!(!schedule.describe().is_empty());
        }
    }
    prop_assert!(
        begin.elapsed() < HANG,
        "{text:?} took {:?}",
        begin.elapsed()
    );
    Ok(())
}

/// Pieces of the dialect and of typical mistakes, glued into near-valid expressions.
const PIECES: &[&str] = &[
    "*",
    "?",
    "L",
    "W",
    "LW",
    "#",
    "-",
    "/",
    ",",
    " ",
    " ",
    " ",
    "\t",
    "0",
    "1",
    "5",
    "7",
    "12",
    "15",
    "23",
    "29",
    "30",
    "31",
    "59",
    "60",
    "99999999999",
    "JAN",
    "feb",
    "DEC",
    "MON",
    "fri",
    "SUN",
    "L-",
    "L-3",
    "L-30",
    "L-31",
    "5#2",
    "5L",
    "15W",
    "@daily",
    "@hourly",
    "@every",
    "@",
    "CRON_TZ=",
    "TZ=",
    "Europe/Berlin",
    "UTC",
    "2030",
    "1970",
    "2199",
    "*/",
    "/0",
    "\u{a0}",
    "\n",
    "\r",
    "\u{3000}",
    "\u{2003}",
    "\u{feff}",
    "\u{200b}",
    "０",
    "é",
    "\0",
];

/// Valid expressions, each to be changed in one place.
const VALID: &[&str] = &[
    "*/15 9-17 * * MON-FRI",
    "0 30 2 * * *",
    "0 0 L-3,L * *",
    "0 0 1,15W * 1#2",
    "0 0 0 29 2 * 2028-2040/4",
    "CRON_TZ=Europe/Berlin 0 0 LW * *",
    "@every 1h 30m",
    "5,10,15-20,*/7 * * * *",
    "0 0 * * FRI-SUN",
    "@hourly",
];

/// A valid expression with one piece inserted, one character replaced, or one removed.
fn mutated() -> impl Strategy<Value = String> {
    (
        proptest::sample::select(VALID),
        any::<proptest::sample::Index>(),
        proptest::sample::select(PIECES),
        0..3u8,
    )
        .prop_map(|(valid, at, piece, how)| {
            let mut chars: Vec<char> = valid.chars().collect();
            let at = at.index(chars.len() + 1);
            match how {
                0 => {
                    chars.splice(at..at, piece.chars());
                }
                1 if at < chars.len() => {
                    chars.splice(at..=at, piece.chars());
                }
                _ if at < chars.len() => {
                    chars.remove(at);
                }
                _ => {}
            }
            chars.into_iter().collect()
        })
}

fn near_valid() -> impl Strategy<Value = String> {
    prop_oneof![
        mutated(),
        // Five to seven fields from the pieces.
        proptest::collection::vec(
            proptest::collection::vec(proptest::sample::select(PIECES), 1..4)
                .prop_map(|parts| parts.concat()),
            5..=7
        )
        .prop_map(|fields| fields.join(" ")),
        // Any sequence of pieces.
        proptest::collection::vec(proptest::sample::select(PIECES), 0..24)
            .prop_map(|parts| parts.concat()),
    ]
}

/// A fixed seed keeps runs deterministic; `CRONGUARD_FUZZ_SEED` picks another one.
fn config() -> ProptestConfig {
    let seed = std::env::var("CRONGUARD_FUZZ_SEED")
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
    fn arbitrary_strings_never_panic_or_hang(
        text in proptest::collection::vec(any::<char>(), 0..80).prop_map(String::from_iter)
    ) {
        exercise(&text)?;
    }

    #[test]
    fn ascii_strings_never_panic_or_hang(
        text in proptest::collection::vec(proptest::char::range(' ', '~'), 0..60)
            .prop_map(String::from_iter)
    ) {
        exercise(&text)?;
    }

    #[test]
    fn near_valid_expressions_never_panic_or_hang(text in near_valid()) {
        exercise(&text)?;
    }
}
