//! Schedules for cronguard: strict cron expressions and epoch-aligned intervals, evaluated in an IANA
//! time zone with cronie's daylight-saving rules.
//!
//! This crate is shared by the `#[scheduled]` macro (which validates at compile time) and the
//! `cronguard` runtime (which computes fires), so that every expression that compiles also runs.
//! Users reach it as `cronguard::Schedule`.
//!
//! # Cron dialect (Vixie/cronie, strict)
//!
//! - 5 fields (`min hour dom mon dow`), 6 (`sec min hour dom mon dow`) or 7 (… `year`); seconds
//!   always first. Items `*`, `N`, `N-M`, `*/S`, `N-M/S`, and comma lists of them.
//! - `JAN`–`DEC` in the month field and `SUN`–`SAT` in the day-of-week field only (three letters,
//!   any case, also in ranges, `#` and `L` items); weekdays 0–7, 0 and 7 both Sunday.
//! - Day of month: `L` (last day), `L-N` (N days before the last day, N 0–30; alone or in lists
//!   such as `L-3,L`), `LW` (last weekday), `NW` (weekday nearest day N, never leaving the
//!   month). Day of week: `D#N` (N-th weekday D of the month, N 1–5) and `DL` (last D). `?` means
//!   `*` in these two fields, and stands alone.
//! - Aliases `@yearly` `@annually` `@monthly` `@weekly` `@daily` `@midnight` `@hourly` (any case,
//!   alone).
//! - Day of month and day of week: when both are restricted a day matches if either matches; a
//!   field that starts with `*` or `?` is unrestricted, so `*/2` in one day field ANDs with the
//!   other (cronie's rule).
//! - Fields are separated by ASCII spaces and tabs only (leading and trailing ones allowed).
//!
//! Rejected, each with a reason naming the field and item and, where one part is at fault, its
//! column ([`CronError::column`]): empty list items, names in the wrong field or unknown names,
//! reversed ranges, `N/S` without a range, steps of 0, values out of range, unknown characters,
//! any white space other than space and tab and any non-ASCII character (named with its code
//! point: `U+00A0 NO-BREAK SPACE`), `L-31` and beyond, misplaced `L`/`W`/`#`/`?`, a wrong number
//! of fields, unknown aliases and `@reboot`, and expressions that never fire (`0 0 30 2 *`).
//!
//! Decisions beyond the bare dialect:
//!
//! - `L-N` is evaluated as one croner pattern per month length (croner has no `L-N`); a month
//!   where it falls before the 1st has no fire from it.
//! - A step larger than the span of its range is accepted, as cronie does (it only warns): `*/90`
//!   in the minute field fires at minute 0 only.
//! - In the day-of-week field a range may end in Sunday written as 0 (`5-0`, `FRI-SUN`), as in
//!   cronie; any other range with its larger value first is rejected (no wrap-around such as
//!   `22-2`).
//! - `L` and `LW` are not combined in one day-of-month list.
//! - Years (7th field) range over [`YEAR_MIN`]–[`YEAR_MAX`] (1970–2199, so that the non-leap 2100 is
//!   expressible); a bare `*` matches every year, and `*/S` counts from 1970.
//! - "Never fires" is decided on naive wall-clock time from 1970-01-01 within croner's search limit
//!   (the year 5000): an expression that fires only in the past (`0 0 0 1 1 * 1999`) is valid, it
//!   just has no further fires.
//!
//! # Time zones
//!
//! Fires are computed in the schedule's IANA zone with cronie's rules: a job is *wildcard* when its
//! minute or hour field starts with `*` (and `@hourly`), otherwise *fixed-time*. A wall-clock time
//! skipped by a spring-forward fires a fixed-time job once at the first instant after the gap and
//! is skipped by a wildcard job; a time repeated by a fall-back fires a fixed-time job at its first
//! occurrence only and a wildcard job at both. See [`Schedule`].
//!
//! The walk backwards ([`Schedule::previous_before`], [`Schedule::fires_before`]) follows the same
//! rules.
//!
//! # Intervals
//!
//! [`Schedule::every`] fires at whole multiples of the interval since the Unix epoch, so replicas
//! agree on the instants whenever they started.
//!
//! # From configuration, and in words
//!
//! [`Schedule::from_settings`] takes a job's `cron`, `every` and `tz` settings with the rules of
//! the `#[scheduled]` attribute; `Schedule` also implements [`FromStr`](std::str::FromStr)
//! (`CRON_TZ=Europe/Berlin 30 2 * * *`, `@every 30s`) and, with the `serde` feature,
//! `Deserialize`. [`Schedule::describe`] renders a schedule in English. The crate's README (its
//! "What it accepts" and "Daylight-saving time" tables) covers the same ground with examples.

mod config;
mod cron;
mod describe;
mod duration;
mod error;
mod limits;
mod memo;
mod name;
mod schedule;
#[doc(hidden)]
pub mod settings;
mod zone;

pub use crate::cron::{validate_cron, CronExpr, YEAR_MAX, YEAR_MIN};
pub use crate::duration::{
    check_lease, parse_duration, parse_duration_millis, parse_duration_millis_or_zero,
    DEFAULT_LEASE, DEFAULT_MISFIRE_GRACE, MAX_LEASE, MIN_LEASE,
};
pub use crate::error::{CronError, DurationError, ScheduleError, TimeZoneError};
pub use crate::limits::{
    check_backoff, check_jitter, check_jitter_for, check_retries, check_standby, check_timeout,
    DEFAULT_BACKOFF, DEFAULT_STANDBY, MAX_BACKOFF, MAX_JITTER, MAX_RETRIES, MAX_STANDBY,
    MAX_TIMEOUT,
};
pub use crate::name::validate_job_name;
pub use crate::schedule::{Fires, FiresBefore, Schedule};
pub use crate::zone::parse_time_zone;

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
