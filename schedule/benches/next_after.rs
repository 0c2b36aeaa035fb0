//! Throughput of `Schedule::next_after` against croner's `find_next_occurrence` on the same
//! expressions, in UTC and in a zone with daylight-saving time. Each side walks the same number
//! of consecutive fires from the same start; the ratio is croner's time over ours (above 1: we
//! are faster).
//!
//! ```text
//! cargo bench -p cronguard-schedule
//! ```
//!
//! `CRONGUARD_BENCH_FIRES` sets the fires walked per expression and zone (default 20000; a yearly
//! expression ends at croner's search limit, the year 5000, before that).

use std::hint::black_box;
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds};
use cronguard_schedule::Schedule;

const EXPRESSIONS: &[&str] = &[
    "0 */5 * * * *",
    "*/10 * * * * *",
    "0 30 2 * * *",
    "0 0 9-17 * * MON-FRI",
    "0 */15 9-17 * * 1-5",
    "0 0 0 L * *",
    "0 15 10 ? * 5#3",
    "0 0 0 1 1 *",
];

const ZONES: &[Tz] = &[Tz::UTC, Tz::Europe__Berlin];

fn main() {
    let fires: usize = std::env::var("CRONGUARD_BENCH_FIRES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let start = Utc
        .with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
        .single()
        .unwrap_or_default();
    println!(
        "{:<24} {:<14} {:>12} {:>12} {:>7}",
        "expression", "zone", "ours ns/op", "croner ns/op", "ratio"
    );
    let (mut ours_total, mut croner_total) = (Duration::ZERO, Duration::ZERO);
    for zone in ZONES {
        for expr in EXPRESSIONS {
            let Ok(schedule) = Schedule::cron_in(expr, *zone) else {
                eprintln!("`{expr}` does not parse");
                continue;
            };
            let Ok(cron) = CronParser::builder()
                .seconds(Seconds::Optional)
                .build()
                .parse(expr)
            else {
                eprintln!("croner does not parse `{expr}`");
                continue;
            };
            // Warm up both, then time the walks in alternation and keep each side's fastest
            // round, so that a burst of load on the machine does not favour either.
            let local = start.with_timezone(zone);
            black_box(walk_ours(&schedule, start, fires / 10));
            black_box(walk_croner(&cron, local, fires / 10));
            let (mut ours, mut theirs) = (Duration::MAX, Duration::MAX);
            let (mut ours_fires, mut croner_fires) = (0, 0);
            for _ in 0..ROUNDS {
                let (elapsed, walked) = time(|| walk_ours(&schedule, start, fires));
                (ours, ours_fires) = (ours.min(elapsed), walked);
                let (elapsed, walked) = time(|| walk_croner(&cron, local, fires));
                (theirs, croner_fires) = (theirs.min(elapsed), walked);
            }
            if ours_fires != croner_fires {
                eprintln!("`{expr}` in {zone}: {ours_fires} fires against croner's {croner_fires}");
            }
            ours_total += ours;
            croner_total += theirs;
            println!(
                "{:<24} {:<14} {:>12.0} {:>12.0} {:>7.2}",
                expr,
                zone.name(),
                per_op(ours, ours_fires),
                per_op(theirs, croner_fires),
                theirs.as_secs_f64() / ours.as_secs_f64()
            );
        }
    }
    println!(
        "overall: croner time / our time = {:.2} (above 1: cronguard-schedule is faster)",
        croner_total.as_secs_f64() / ours_total.as_secs_f64()
    );
}

/// Rounds per expression and zone; each side's fastest counts.
const ROUNDS: usize = 5;

/// The time of one walk, and the fires it walked (a schedule may end before `fires`).
fn time(run: impl FnOnce() -> usize) -> (Duration, usize) {
    let begin = Instant::now();
    let walked = black_box(run());
    (begin.elapsed(), walked)
}

fn per_op(elapsed: Duration, fires: usize) -> f64 {
    elapsed.as_nanos() as f64 / fires.max(1) as f64
}

fn walk_ours(schedule: &Schedule, start: DateTime<Utc>, fires: usize) -> usize {
    schedule.fires_after(start).take(fires).count()
}

fn walk_croner(cron: &croner::Cron, start: DateTime<Tz>, fires: usize) -> usize {
    let mut at = start;
    let mut count = 0;
    while count < fires {
        match cron.find_next_occurrence(&at, false) {
            Ok(next) => at = next,
            Err(_) => break,
        }
        count += 1;
    }
    count
}
