//! Schedules for cronguard: strict cron expressions and epoch-aligned intervals, evaluated in an IANA
//! time zone with cronie's daylight-saving rules.
//!
//! This crate is shared by the `#[scheduled]` macro (which validates at compile time) and the
//! `cronguard` runtime (which computes fires), so that every expression that compiles also runs.
//! Users reach it as `cronguard::Schedule`.

mod cron;
mod duration;
mod error;
mod schedule;
mod zone;

pub use crate::cron::{validate_cron, CronExpr};
pub use crate::duration::parse_duration;
pub use crate::error::{CronError, DurationError, ScheduleError, TimeZoneError};
pub use crate::schedule::{Fires, Schedule};
pub use crate::zone::parse_time_zone;
