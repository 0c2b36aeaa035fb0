//! A fire as a value: the instant `T` a job's schedule fires, and the instant by which it must
//! have started. Computed once when the fire comes due; every rule and every message reads it
//! from here.

use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::clock::{after, since};
use crate::control::ManualRun;

/// One fire of one job (the job is the model that holds it). 32 bytes: every job holds one or
/// two, so its start and deadline are kept as offsets from `t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Fire {
    /// The scheduled instant: the fire's identity in every process.
    pub(crate) t: DateTime<Utc>,
    /// The job's jitter delay in ms (at most a day; 0 for a manual run).
    start_ms: u32,
    /// The misfire grace, in ns from the start.
    grace_ns: u64,
    /// The id of a run asked for outside the schedule ([`ManualRun`]; never 0).
    manual: Option<NonZeroU64>,
}

impl Fire {
    fn with(t: DateTime<Utc>, start: DateTime<Utc>, grace: Duration, manual: Option<u64>) -> Self {
        let delay = since(t, start);
        Fire {
            t,
            start_ms: u32::try_from(delay.as_millis()).unwrap_or(u32::MAX),
            grace_ns: u64::try_from(grace.as_nanos()).unwrap_or(u64::MAX),
            manual: manual.and_then(NonZeroU64::new),
        }
    }

    /// `t` plus the job's jitter delay: the fire never starts earlier.
    pub(crate) fn start(&self) -> DateTime<Utc> {
        after(self.t, Duration::from_millis(u64::from(self.start_ms)))
    }

    /// `start + misfire_grace`: the fire is a misfire if it has not started by then.
    pub(crate) fn deadline(&self) -> DateTime<Utc> {
        after(self.start(), Duration::from_nanos(self.grace_ns))
    }

    /// The id of a run asked for outside the schedule ([`ManualRun`]): then `t` is when it was
    /// asked for, and the id, not `t`, is its identity.
    pub(crate) fn manual(&self) -> Option<u64> {
        self.manual.map(NonZeroU64::get)
    }

    #[cfg(test)]
    pub(crate) fn new(t: DateTime<Utc>, grace: Duration) -> Self {
        Fire::delayed(t, Duration::ZERO, grace)
    }

    /// A fire that starts `delay` after `t` (its jitter).
    pub(crate) fn delayed(t: DateTime<Utc>, delay: Duration, grace: Duration) -> Self {
        Fire::with(t, after(t, delay), grace, None)
    }

    /// A run asked for outside the schedule, seen at `now`: it may start within the grace from
    /// when it was asked for, however late the request reached this process, as the guard
    /// refuses it after that. A request stamped by a clock ahead of this one keeps its stamp as
    /// `t` (every replica claims it with the same instant; beyond one grace ahead, `now`) with
    /// its grace shortened, so that it cannot wait longer than the grace from `now`.
    pub(crate) fn requested(run: ManualRun, now: DateTime<Utc>, grace: Duration) -> Self {
        let t = if run.requested_at <= after(now, grace) {
            run.requested_at
        } else {
            now
        };
        Fire::with(t, t, grace.saturating_sub(since(now, t)), Some(run.id))
    }
}

/// An instant as logs and run keys write it (RFC 3339, milliseconds, `Z`).
pub(crate) fn fmt_time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// `job@T`: the identity of a fire in every process; `job@manual:<id>` for a run asked for
/// outside the schedule, which can never equal a fire's.
pub(crate) fn run_key(job: &str, fire: DateTime<Utc>, manual: Option<u64>) -> String {
    match manual {
        Some(id) => format!("{job}@manual:{id:016x}"),
        None => with_fire_time(fire, |time| {
            let mut key = String::with_capacity(job.len() + 1 + time.len());
            key.push_str(job);
            key.push('@');
            key.push_str(time);
            key
        }),
    }
}

/// [`run_key`] as a shared string, written once: every event of a run carries it.
pub(crate) fn shared_run_key(job: &str, fire: DateTime<Utc>, manual: Option<u64>) -> Arc<str> {
    if manual.is_some() {
        return Arc::from(run_key(job, fire, manual));
    }
    with_fire_time(fire, |time| {
        KEY.with(|key| {
            let mut key = key.borrow_mut();
            key.clear();
            key.push_str(job);
            key.push('@');
            key.push_str(time);
            Arc::from(key.as_str())
        })
    })
}

/// Calls `f` with `fire` formatted (see [`FIRE_TIME`]).
fn with_fire_time<T>(fire: DateTime<Utc>, f: impl FnOnce(&str) -> T) -> T {
    FIRE_TIME.with(|last| {
        let mut last = last.borrow_mut();
        if last.0 != fire || last.1.is_empty() {
            *last = (fire, fmt_time(fire));
        }
        f(&last.1)
    })
}

thread_local! {
    /// The fire time a run key was last made for on this thread, formatted: the jobs due at one
    /// instant (thousands, in a burst) share it, and formatting a time costs more than the key.
    static FIRE_TIME: std::cell::RefCell<(DateTime<Utc>, String)> =
        const { std::cell::RefCell::new((DateTime::<Utc>::MIN_UTC, String::new())) };
    /// Where [`shared_run_key`] writes a key before it is shared.
    static KEY: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// `1500ms`, `60s`: durations as the attribute writes them.
pub(crate) fn human(d: Duration) -> String {
    let ms = d.as_millis();
    if !ms.is_multiple_of(1000) || ms < 1000 {
        format!("{ms}ms")
    } else {
        format!("{}s", ms / 1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_run_key_is_the_run_key() {
        let t = DateTime::<Utc>::UNIX_EPOCH;
        let later = t + chrono::TimeDelta::milliseconds(1_500);
        for (job, fire, manual) in [
            ("a", t, None),
            ("tenant-00001/settle", t, None),
            ("a", later, None),
            ("a", t, Some(0xbeef)),
        ] {
            assert_eq!(
                &*shared_run_key(job, fire, manual),
                run_key(job, fire, manual)
            );
        }
        assert_eq!(
            &*shared_run_key("a", later, None),
            "a@1970-01-01T00:00:01.500Z"
        );
    }
}
