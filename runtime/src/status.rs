//! The status snapshot of each job: what the handle's [`Monitor::jobs`](crate::Monitor::jobs)
//! returns.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::events::{CancelReason, Event, EventKind, FailureReason, Occurrence};
use crate::options::Lock;

/// A snapshot of one job.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct JobStatus {
    /// The job's name.
    pub name: String,
    /// Its schedule, as text (`cron `0 */5 * * * *` in Europe/Berlin`, `every 30s`).
    pub schedule: String,
    /// Its schedule in words, for dashboards and logs (`every 5 minutes (Europe/Berlin)`,
    /// `at 02:30 every day (UTC)`); see [`Schedule::describe`](crate::Schedule::describe).
    pub description: String,
    /// Its guard.
    pub lock: Lock,
    /// Whether this process fires it (see [`Job::enabled`](crate::Job::enabled)).
    pub enabled: bool,
    /// The next fire instant, `None` when the schedule never fires again or the scheduler stopped.
    pub next_fire: Option<DateTime<Utc>>,
    /// The latest run that started in this process.
    pub last_run: Option<RunRecord>,
    /// The latest event of any kind.
    pub last_event: Option<Event>,
    /// Runs of this job going on in this process now.
    pub running: usize,
    /// How many events of each kind this process saw since start.
    pub counts: Counts,
    /// Who paused the job and when, as far as this process knows (docs/guide/controls.md); `None`
    /// while it runs on schedule.
    pub paused: Option<crate::control::Pause>,
    /// The settings that overrides changed at start (environment variables
    /// `CRONGUARD_JOB__<JOB>__<KEY>`, the overrides file), each with its value and where it came
    /// from, in the order of the attribute's table; empty when the job runs with its own
    /// settings, from its `#[scheduled]` attribute or the [`Job`](crate::Job) built in code
    /// (docs/guide/overrides.md).
    pub overrides: Vec<crate::SettingOverride>,
}

/// One run, as the status keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct RunRecord {
    /// The fire it ran.
    pub fire_time: DateTime<Utc>,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// When it ended; `None` while it runs.
    pub finished_at: Option<DateTime<Utc>>,
    /// `succeeded`, `failed` or `cancelled`; `None` while it runs.
    pub outcome: Option<EventKind>,
    /// Its fencing token.
    pub fencing_token: u64,
    /// The process that ran it.
    pub instance: Arc<str>,
}

/// Counts of events by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Counts {
    /// Runs started.
    pub started: u64,
    /// Runs that succeeded.
    pub succeeded: u64,
    /// Runs that failed (an `Err`, a panic or a timeout) with no further attempt.
    pub failed: u64,
    /// Failed attempts that were tried again (`retries`).
    pub retried: u64,
    /// Runs cancelled (replace, shutdown, lost lease).
    pub cancelled: u64,
    /// Fires skipped because no slot was free.
    pub skipped: u64,
    /// Fires that could not start within their grace.
    pub misfired: u64,
    /// Fires covered by a later fire.
    pub coalesced: u64,
    /// Fires claimed by another process.
    pub claimed_elsewhere: u64,
    /// Runs that lost their lease.
    pub lease_lost: u64,
}

/// What the scheduler keeps of one job for its status and health, built into a [`JobStatus`]
/// only when someone asks. Kept small, as there is one per job (BENCHMARKS.md): the last
/// run holds what its start and end events carry, as offsets from its fire time, so that the last
/// event is kept apart only when it is something else (a drop, a lost lease, the end of an older
/// run); that event and the counts most jobs never touch live behind one pointer.
#[derive(Debug, Default)]
pub(crate) struct StatusRecord {
    last_run: Option<LastRun>,
    counts: CountsRecord,
}

/// [`Counts`] as a job keeps them: the two every run moves inline, the rest once one is not 0
/// or a last event is kept apart. A job fires at most once a second, so 32 bits last 136 years;
/// they saturate.
#[derive(Debug, Default)]
struct CountsRecord {
    started: u32,
    succeeded: u32,
    rare: Option<Box<Rare>>,
}

/// What most jobs never have: the counts of anything but starts and successes, a last event
/// that the last run does not tell, and why the last run failed (a failure is counted, so it
/// costs no box of its own).
#[derive(Debug, Default)]
struct Rare {
    counts: RareCounts,
    /// See [`LastEvent`].
    last_event: LastEvent,
    /// Why the last run failed, when it did; boxed: its message is long.
    failure: Option<Box<Failure>>,
}

#[derive(Debug, Default, Clone, Copy)]
struct RareCounts {
    failed: u32,
    retried: u32,
    cancelled: u32,
    skipped: u32,
    misfired: u32,
    coalesced: u32,
    claimed_elsewhere: u32,
    lease_lost: u32,
}

impl CountsRecord {
    fn count(&mut self, kind: &EventKind) {
        let bump = |n: &mut u32| *n = n.saturating_add(1);
        match kind {
            EventKind::Started => return bump(&mut self.started),
            EventKind::Succeeded => return bump(&mut self.succeeded),
            _ => {}
        }
        let r = &mut self.rare.get_or_insert_with(Box::default).counts;
        match kind {
            EventKind::Started | EventKind::Succeeded => {}
            EventKind::Failed {
                retry_at: Some(_), ..
            } => bump(&mut r.retried),
            EventKind::Failed { .. } => bump(&mut r.failed),
            EventKind::Cancelled { .. } => bump(&mut r.cancelled),
            EventKind::Skipped { .. } => bump(&mut r.skipped),
            EventKind::Misfired { .. } => bump(&mut r.misfired),
            EventKind::Coalesced { .. } => bump(&mut r.coalesced),
            EventKind::ClaimedElsewhere => bump(&mut r.claimed_elsewhere),
            EventKind::LeaseLost { .. } => bump(&mut r.lease_lost),
        }
    }

    fn counts(&self) -> Counts {
        let r = self.rare.as_ref().map(|r| r.counts).unwrap_or_default();
        Counts {
            started: self.started.into(),
            succeeded: self.succeeded.into(),
            failed: r.failed.into(),
            retried: r.retried.into(),
            cancelled: r.cancelled.into(),
            skipped: r.skipped.into(),
            misfired: r.misfired.into(),
            coalesced: r.coalesced.into(),
            claimed_elsewhere: r.claimed_elsewhere.into(),
            lease_lost: r.lease_lost.into(),
        }
    }
}

/// The last event, when it is not one of the last run's own: `None` stands for the last run's
/// end once it ended, its start before that, and no event while there was no run. The last run's
/// events are told by its record alone, so they cost no allocation.
type LastEvent = Option<Box<Occurrence>>;

/// The last run, exactly as its events carried it: times as nanoseconds from the one before. A
/// manual run's events are kept whole as the last event, so the run keeps no id.
#[derive(Debug)]
struct LastRun {
    /// Its fire time in nanoseconds since the Unix epoch; a fire outside 1677–2262 is not kept
    /// here (see [`fire_ns`]).
    fire_ns: i64,
    attempt: u16,
    ended: Ended,
    /// Its end from its start on the wall clock minus its length on the monotonic clock: the two
    /// differ only by the clock's steps and drift while it ran. An end that differs by more than
    /// an `i32` of nanoseconds (2.1 s) is kept whole as the last event.
    skew_ns: i32,
    /// Its start, from the fire time.
    started_ns: i64,
    fencing_token: u64,
    lateness_ns: u64,
    /// Its end, from its start; 0 until it ended.
    ended_ns: i64,
}

/// `t` in nanoseconds since the Unix epoch, when that gives `t` back exactly: it fits, and it
/// is not within a leap second (which nanoseconds since the epoch cannot tell from the next).
fn fire_ns(t: DateTime<Utc>) -> Option<i64> {
    if t.timestamp_subsec_nanos() >= 1_000_000_000 {
        return None;
    }
    t.timestamp_nanos_opt()
}

/// Whether and how a run ended (with [`Rare::failure`] for a failure).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    Not,
    Succeeded,
    Failed,
    Cancelled(CancelReason),
}

#[derive(Debug)]
struct Failure {
    error: Box<str>,
    reason: FailureReason,
    retry_at: Option<DateTime<Utc>>,
}

impl Ended {
    /// How an end event ended its run; `None` for any other event.
    fn of(kind: &EventKind) -> Option<(Ended, Option<Box<Failure>>)> {
        match kind {
            EventKind::Succeeded => Some((Ended::Succeeded, None)),
            EventKind::Failed {
                error,
                reason,
                retry_at,
            } => Some((
                Ended::Failed,
                Some(Box::new(Failure {
                    error: error.as_str().into(),
                    reason: *reason,
                    retry_at: *retry_at,
                })),
            )),
            EventKind::Cancelled { reason } => Some((Ended::Cancelled(*reason), None)),
            _ => None,
        }
    }
}

/// `to - from` in nanoseconds, when it fits.
fn offset_ns(from: DateTime<Utc>, to: DateTime<Utc>) -> Option<i64> {
    crate::clock::nanos_between(from, to)
}

fn nanos(d: Duration) -> Option<u64> {
    u64::try_from(d.as_nanos()).ok()
}

impl LastRun {
    fn fire_time(&self) -> DateTime<Utc> {
        DateTime::from_timestamp_nanos(self.fire_ns)
    }

    /// Whether this is the run of fire `fire`: compared on the stored nanoseconds, without
    /// making an instant of them (the status is updated at every start and end).
    fn is_of(&self, fire: DateTime<Utc>) -> bool {
        fire.timestamp_nanos_opt() == Some(self.fire_ns)
    }

    /// Nanoseconds since the Unix epoch of its start.
    fn started_unix_ns(&self) -> i64 {
        self.fire_ns.saturating_add(self.started_ns)
    }

    fn started_at(&self) -> DateTime<Utc> {
        DateTime::from_timestamp_nanos(self.started_unix_ns())
    }

    fn duration(&self) -> Duration {
        let ns = self.ended_ns.saturating_sub(i64::from(self.skew_ns));
        Duration::from_nanos(u64::try_from(ns).unwrap_or(0))
    }

    fn lateness(&self) -> Duration {
        Duration::from_nanos(self.lateness_ns)
    }

    /// How it ended, if it did.
    fn outcome(&self, failure: Option<&Failure>) -> Option<EventKind> {
        Some(match self.ended {
            Ended::Not => return None,
            Ended::Succeeded => EventKind::Succeeded,
            Ended::Cancelled(reason) => EventKind::Cancelled { reason },
            Ended::Failed => {
                let f = failure?;
                EventKind::Failed {
                    error: f.error.to_string(),
                    reason: f.reason,
                    retry_at: f.retry_at,
                }
            }
        })
    }

    /// When it ended, if it did.
    fn ended_at(&self) -> Option<DateTime<Utc>> {
        (self.ended != Ended::Not).then(|| {
            DateTime::from_timestamp_nanos(self.started_unix_ns().saturating_add(self.ended_ns))
        })
    }

    /// The run's start or end event, as it was emitted.
    fn event(&self, end: bool, failure: Option<&Failure>) -> Occurrence {
        let (at, duration, kind) = match (self.ended_at().zip(self.outcome(failure)), end) {
            (Some((at, outcome)), true) => (at, Some(self.duration()), outcome),
            _ => (self.started_at(), None, EventKind::Started),
        };
        Occurrence {
            fire_time: self.fire_time(),
            fencing_token: Some(self.fencing_token),
            at,
            first_report: true,
            lateness: Some(self.lateness()),
            duration,
            attempt: Some(self.attempt.into()),
            kind,
            manual: None,
        }
    }
}

impl StatusRecord {
    /// Keeps `event` apart as the last event; `None`: the last run tells it.
    fn set_last_event(&mut self, event: Option<Occurrence>) {
        match event {
            Some(event) => {
                let rare = self.counts.rare.get_or_insert_with(Box::default);
                rare.last_event = Some(Box::new(event));
            }
            None => {
                if let Some(rare) = self.counts.rare.as_mut() {
                    rare.last_event = None;
                }
            }
        }
    }

    fn last_event(&self) -> Option<&Occurrence> {
        self.counts.rare.as_ref()?.last_event.as_deref()
    }

    fn set_failure(&mut self, failure: Option<Box<Failure>>) {
        match failure {
            Some(failure) => {
                self.counts.rare.get_or_insert_with(Box::default).failure = Some(failure);
            }
            None => {
                if let Some(rare) = self.counts.rare.as_mut() {
                    rare.failure = None;
                }
            }
        }
    }

    fn failure(&self) -> Option<&Failure> {
        self.counts.rare.as_ref()?.failure.as_deref()
    }

    /// Counts `event` and keeps it as the last event.
    pub(crate) fn record(&mut self, event: Occurrence) {
        self.counts.count(&event.kind);
        // A run's events carry its token, its lateness, and `first_report`; only those can be
        // told by the last run. A manual run's are kept whole.
        let run_event = event.first_report && event.fencing_token.is_some();
        let whole = event.manual.is_some();
        let attempt = event.attempt.unwrap_or(1);
        if let (EventKind::Started, true, Some(run)) =
            (&event.kind, attempt > 1, &mut self.last_run)
        {
            // A retry of the last run: it runs again, and its start is kept as emitted.
            if run.is_of(event.fire_time) && Some(run.fencing_token) == event.fencing_token {
                run.attempt = u16::try_from(attempt).unwrap_or(u16::MAX);
                run.ended = Ended::Not;
                self.set_failure(None);
            }
            self.set_last_event(Some(event));
            return;
        }
        if let (
            EventKind::Started,
            true,
            Some(token),
            Some(lateness_ns),
            None,
            Some(started_ns),
            Ok(attempt),
            Some(fire_ns),
        ) = (
            &event.kind,
            run_event,
            event.fencing_token,
            event.lateness.and_then(nanos),
            event.duration,
            offset_ns(event.fire_time, event.at),
            u16::try_from(attempt),
            fire_ns(event.fire_time),
        ) {
            self.last_run = Some(LastRun {
                fire_ns,
                attempt,
                ended: Ended::Not,
                skew_ns: 0,
                started_ns,
                fencing_token: token,
                lateness_ns,
                ended_ns: 0,
            });
            self.set_failure(None);
            self.set_last_event(whole.then_some(event));
            return;
        }
        if let (Some((ended, failure)), true, Some(duration_ns)) = (
            Ended::of(&event.kind),
            run_event,
            event.duration.and_then(nanos),
        ) {
            if let Some(run) = self.last_run.as_mut().filter(|r| {
                r.is_of(event.fire_time)
                    && Some(r.fencing_token) == event.fencing_token
                    && Some(r.lateness()) == event.lateness
                    && u32::from(r.attempt) == attempt
            }) {
                let ended_ns = event
                    .at
                    .timestamp_nanos_opt()
                    .and_then(|at| at.checked_sub(run.started_unix_ns()));
                if let Some(ended_ns) = ended_ns {
                    let skew_ns = i64::try_from(duration_ns)
                        .ok()
                        .and_then(|d| ended_ns.checked_sub(d))
                        .and_then(|skew| i32::try_from(skew).ok());
                    run.ended_ns = ended_ns;
                    run.skew_ns = skew_ns.unwrap_or(0);
                    run.ended = ended;
                    self.set_failure(failure);
                    self.set_last_event((whole || skew_ns.is_none()).then_some(event));
                    return;
                }
            }
        }
        self.set_last_event(Some(event));
    }

    pub(crate) fn snapshot(
        &self,
        job: &crate::model::Spec,
        next_fire: Option<DateTime<Utc>>,
        instance: &Arc<str>,
        running: usize,
        paused: Option<&crate::control::Pause>,
    ) -> JobStatus {
        JobStatus {
            name: job.name.to_string(),
            schedule: job.schedule.to_string(),
            description: job.schedule.describe(),
            lock: job.lock.clone(),
            enabled: job.enabled,
            next_fire,
            last_run: self.last_run.as_ref().map(|r| RunRecord {
                fire_time: r.fire_time(),
                started_at: r.started_at(),
                finished_at: r.ended_at(),
                outcome: r.outcome(self.failure()),
                fencing_token: r.fencing_token,
                instance: Arc::clone(instance),
            }),
            last_event: match (self.last_event(), &self.last_run) {
                (Some(e), _) => Some(e.to_event(&job.name, instance)),
                (None, Some(run)) => {
                    let ended = run.ended != Ended::Not;
                    Some(
                        run.event(ended, self.failure())
                            .to_event(&job.name, instance),
                    )
                }
                (None, None) => None,
            },
            running,
            counts: self.counts.counts(),
            paused: paused.cloned(),
            overrides: job
                .overrides
                .as_deref()
                .map(<[_]>::to_vec)
                .unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Settings, Spec};
    use crate::options::Overlap;
    use cronguard_schedule::Schedule;

    fn at(s: i64) -> DateTime<Utc> {
        DateTime::<Utc>::from_timestamp(1_767_225_600 + s, 7_000).expect("in range")
    }

    #[test]
    fn a_fire_is_kept_in_nanoseconds_only_when_they_give_it_back() {
        for t in [at(0), DateTime::<Utc>::UNIX_EPOCH, at(-1_767_225_601)] {
            assert_eq!(fire_ns(t).map(DateTime::from_timestamp_nanos), Some(t));
        }
        let leap = chrono::NaiveDate::from_ymd_opt(2016, 12, 31)
            .and_then(|d| d.and_hms_nano_opt(23, 59, 59, 1_500_000_000))
            .expect("a leap second")
            .and_utc();
        assert_eq!(fire_ns(leap), None);
        assert_eq!(fire_ns(DateTime::<Utc>::MAX_UTC), None);
    }

    fn run_event(fire: i64, token: u64, kind: EventKind, at_s: i64, ended: bool) -> Occurrence {
        Occurrence {
            fire_time: at(fire),
            fencing_token: Some(token),
            at: at(at_s),
            first_report: true,
            lateness: Some(Duration::from_micros(1_234)),
            duration: ended.then(|| Duration::from_nanos(5_000_321)),
            attempt: Some(1),
            kind,
            manual: None,
        }
    }

    /// A `local` job every 10 s with `max_instances` runs at once.
    fn local_spec(max_instances: u32) -> Spec {
        Spec::new(
            smol_str::SmolStr::from("job"),
            Settings {
                schedule: Schedule::every(Duration::from_secs(10)).expect("valid"),
                misfire_grace: Duration::from_secs(5),
                max_instances,
                lock: Lock::Local,
                overlap: Overlap::Skip,
                coalesce: false,
                enabled: true,
                limits: crate::model::limits::Limits::default(),
                standby: Duration::ZERO,
                claim_ahead: Duration::ZERO,
                overrides: None,
            },
        )
    }

    /// Whatever the last event was — a run's start or end, a drop, a lost lease, the end of an
    /// older run — the status shows it exactly as it was emitted, and the last run with it.
    #[test]
    fn the_status_shows_every_last_event_as_emitted() {
        let spec = local_spec(2);
        let instance: Arc<str> = Arc::from("here");
        let mut record = StatusRecord::default();
        let events = [
            run_event(0, 1, EventKind::Started, 0, false),
            run_event(0, 1, EventKind::Succeeded, 1, true),
            run_event(10, 2, EventKind::Started, 10, false),
            run_event(20, 3, EventKind::Started, 20, false),
            // The end of the older run of fire 10, while fire 20 runs.
            run_event(
                10,
                2,
                EventKind::Failed {
                    error: "boom: cause".to_owned(),
                    reason: FailureReason::Error,
                    retry_at: None,
                },
                21,
                true,
            ),
            run_event(
                20,
                3,
                EventKind::LeaseLost {
                    reason: "gone".to_owned(),
                },
                22,
                false,
            ),
            run_event(
                20,
                3,
                EventKind::Cancelled {
                    reason: CancelReason::LeaseLost,
                },
                23,
                true,
            ),
            Occurrence::drop(at(30), at(31), EventKind::skipped("busy".to_owned()), false),
        ];
        let check = |record: &mut StatusRecord, event: Occurrence| {
            let expected = event.to_event(&spec.name, &instance);
            let fire = event.fire_time;
            record.record(event);
            let status = record.snapshot(&spec, None, &instance, 0, None);
            // `Event` has no `PartialEq`; its `Debug` shows every field.
            assert_eq!(
                format!("{:?}", status.last_event),
                format!("{:?}", Some(expected))
            );
            let run = status.last_run.expect("a run happened");
            assert!(run.fire_time == fire || fire == at(10) || fire == at(30));
            assert_eq!(run.instance, instance);
        };
        for event in events {
            check(&mut record, event);
        }
        let status = record.snapshot(&spec, None, &instance, 0, None);
        let run = status.last_run.expect("a run happened");
        assert_eq!(run.fire_time, at(20));
        assert_eq!(run.finished_at, Some(at(23)));
        assert_eq!(
            run.outcome,
            Some(EventKind::Cancelled {
                reason: CancelReason::LeaseLost
            })
        );
        assert_eq!(status.counts.started, 3);
        assert_eq!(status.counts.failed, 1);
        assert_eq!(status.counts.skipped, 1);

        // A manual run: its events are kept whole, with its id, and it is the last run.
        for kind in [EventKind::Started, EventKind::Succeeded] {
            let ended = kind == EventKind::Succeeded;
            let event = Occurrence {
                manual: Some(77),
                ..run_event(40, 4, kind, if ended { 41 } else { 40 }, ended)
            };
            check(&mut record, event);
        }
        let status = record.snapshot(&spec, None, &instance, 0, None);
        let run = status.last_run.expect("a run happened");
        assert_eq!(run.fire_time, at(40));
        assert_eq!(run.finished_at, Some(at(41)));
        assert_eq!(run.outcome, Some(EventKind::Succeeded));
        assert_eq!(status.counts.started, 4);
        assert_eq!(status.counts.succeeded, 2);
    }

    /// A run whose length on the monotonic clock is far from its start and end on the wall clock
    /// (the clock stepped while it ran) still ends the last run, and its end shows as emitted.
    #[test]
    fn an_end_across_a_clock_step_shows_as_emitted() {
        let spec = local_spec(1);
        let instance: Arc<str> = Arc::from("here");
        for duration in [Duration::from_secs(30), Duration::ZERO] {
            let mut record = StatusRecord::default();
            record.record(run_event(0, 1, EventKind::Started, 0, false));
            let end = Occurrence {
                duration: Some(duration),
                ..run_event(0, 1, EventKind::Succeeded, 5, true)
            };
            let expected = end.to_event(&spec.name, &instance);
            record.record(end);
            let status = record.snapshot(&spec, None, &instance, 0, None);
            assert_eq!(
                format!("{:?}", status.last_event),
                format!("{:?}", Some(expected))
            );
            let run = status.last_run.expect("a run happened");
            assert_eq!(run.finished_at, Some(at(5)));
            assert_eq!(run.outcome, Some(EventKind::Succeeded));
        }
    }
}
