//! Shared guards: the public trait every guard that coordinates several processes implements.
//!
//! A guard answers one question per fire: *may this process run fire `T` of this job now?* The
//! in-process rules (`max_instances`, the last fire claimed here, local fencing) are the job
//! model's own state, so a guard is only asked when something outside the process must agree:
//! the `file` guard (every process of one host), the `redis` guard (a cluster), or a guard of the
//! user's own. The scheduler does not know which one it talks to; a new kind of guard is one new
//! module.
//!
//! # What a guard is made of
//!
//! [`Guard`] holds what every guard does: claim a fire, record a dropped or missed one, and say
//! where the job got to. Two methods are required ([`Guard::claim`] and
//! [`Guard::last_claimed`]); the others have defaults that are safe for a guard that keeps less
//! (each says what it then reports twice rather than never). What a guard may offer besides is a
//! trait of its own, which the guard hands out from an accessor:
//!
//! - [`GuardControls`] from [`Guard::controls`]: pause, resume and run now, kept in the store so
//!   that every process obeys them;
//! - [`GuardHistory`] from [`Guard::history`]: the run history.
//!
//! A failure is a [`GuardError`] of a [`GuardErrorKind`] the guard chooses where it meets its
//! store's error; the built-in guards (`file`, `redis`, `postgres`) each own their settings,
//! their opening and their error mapping in a module of their own.
//!
//! # What a guard must guarantee
//!
//! - **Mutual exclusion**: while a lease is held, every other claim of the job answers
//!   [`Claim::Busy`].
//! - **Per-fire uniqueness**: once fire `T` was claimed, a claim of `T` or of an older fire answers
//!   [`Claim::ClaimedByAnother`] (for `T`, when the guard records who claimed it) or
//!   [`Claim::AlreadyRan`] — even after the lease was released. `ClaimedByAnother` is never the
//!   answer for a fire nobody claimed.
//! - **A reported drop decides the fire**: once a claimant recorded fire `T` as dropped (a busy
//!   answer under `overlap = "skip"`, a paused answer, or [`Guard::report_drop`]), a claim of
//!   `T` by any other claimant answers [`Claim::DroppedByAnother`] (or, while the job is paused,
//!   [`Claim::Paused`] without the report), even once the lease is free: a fire reported as
//!   skipped never runs elsewhere a moment later. The claimant's own record does not stop its
//!   own claim (its busy answer may have been lost on the way back), and a claim granted to it
//!   clears the record, so that it reports the fire if it gives it up.
//! - **A claimed fire is not reported dropped by another**: [`Guard::report_drop`] of a fire
//!   whose claim by another claimant took effect answers [`DropReport::ClaimedElsewhere`] and
//!   records nothing (as far as the guard knows who claimed it: the recent claims), so that a
//!   fire that waited in one process (queued behind a run, its claims unanswered) and ran in
//!   another is not reported as misfired at warn level.
//! - **Missed fires are decided once**: [`Guard::report_missed`] moves the job's fate point
//!   forward in one step and answers where it was, so that of several processes starting
//!   together after a downtime each missed fire is reported by one; a fire it recorded never
//!   starts afterwards ([`Claim::DroppedByAnother`]) and is not reported again. The fate point
//!   never moves back: a claim of an older fire leaves it where it is.
//! - **The same claimant is recognised**: a claim of fire `T` repeated by the same guard value
//!   (because the reply to the first one was lost) answers [`Claim::Acquired`] again with the same
//!   fencing token while that lease is held, or [`Claim::Lapsed`] once it expired — never
//!   `AlreadyRan`, which would drop the fire without a word.
//! - **Fencing tokens rise**: every acquired lease has a token greater than every earlier one of
//!   the job, also after the store lost its data.
//! - **A fire far ahead of the guard's own clock is refused** ([`Claim::TooEarly`]) where the guard
//!   has a clock of its own, so that one replica with a wrong clock cannot claim, and so silence,
//!   the fires of every replica.
//! - **A fire ahead of the guard's clock is only taken, never decided** (guards that claim ahead,
//!   [`Guard::claims_ahead`]): a claim of a fire that lies ahead of the guard's own clock is
//!   granted if the job is free, and otherwise answers [`Claim::TooEarly`] and records nothing —
//!   no busy skip, no paused fire, no request to stop the running holder. The busy, paused or
//!   replace decision is taken by the claim made at the fire's instant, as without claiming ahead
//!   (docs/design/standby.md).

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use crate::control::{ManualRun, Pause};
use crate::history::HistoryEntry;
use crate::options::Overlap;
use crate::registry::BoxFuture;

pub use error::{GuardError, GuardErrorKind};

#[cfg(any(feature = "redis", feature = "postgres"))]
mod batching;
#[cfg(any(test, feature = "conformance"))]
#[cfg_attr(docsrs, doc(cfg(feature = "conformance")))]
pub mod conformance;
#[cfg(any(feature = "redis-tls", feature = "postgres-tls"))]
pub(crate) mod crypto;
mod error;
pub(crate) mod feed;
pub(crate) mod file;
pub(crate) mod partitions;
#[cfg(feature = "postgres")]
pub(crate) mod postgres;
#[cfg(feature = "redis")]
pub(crate) mod redis;
pub(crate) mod skew;
#[cfg(test)]
mod tests;
pub(crate) mod watchdog;

/// What a custom guard is built for: one job and its settings (see
/// [`Builder::custom_guard`](crate::Builder::custom_guard)). Each job gets a guard value of its
/// own; every guard value is one claimant (see the module documentation).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct GuardSpec {
    /// The job's name: the key of its state in the store.
    pub job: String,
    /// The lease of a run (`lease = "..."`, default [`DEFAULT_LEASE`](crate::DEFAULT_LEASE)).
    pub lease: Duration,
    /// What a busy fire does: a guard records a busy fire as reported only for
    /// [`Overlap::Skip`] (see [`Claim::Busy`]), and for [`Overlap::Replace`] asks the holder to
    /// stop through its next renewal ([`Renewal::CancelRequested`]).
    pub overlap: Overlap,
    /// Whether to keep the job's run history ([`Guard::history`]).
    pub history: bool,
    /// This process's name (`CRONGUARD_INSTANCE`), for the history.
    pub instance: String,
    /// How late a fire may still start (`misfire_grace = "..."`): a manual run asked for longer
    /// ago than this by the guard's clock is refused ([`Claim::TooLate`]).
    pub misfire_grace: Duration,
}

/// How long a guard remembers a manual run it granted, at least: the job's misfire grace or this,
/// whichever is longer, from the later of the request and the claim ([`Guard::claim_manual`]).
/// A run nobody claimed is refused as [`Claim::TooLate`] once the grace is over, but only a run
/// forgotten is refused as [`Claim::AlreadyRan`] without a record of it, so the longer memory
/// keeps a late reader of a run nobody took from mistaking it for one that ran.
pub const MANUAL_RUNS_KEPT: Duration = Duration::from_secs(3600);

/// Builds a job's guard from its settings; registered with
/// [`Builder::custom_guard`](crate::Builder::custom_guard).
pub type GuardFactory =
    std::sync::Arc<dyn Fn(&GuardSpec) -> std::sync::Arc<dyn Guard> + Send + Sync>;

/// A guard's answer to [`Guard::report_drop`]: who reports a dropped fire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DropReport {
    /// The report is recorded, and it is the fire's fate: the process reports the drop at warn
    /// level, and no claim of the fire succeeds afterwards.
    First,
    /// Another process recorded its report of this fire first; this process reports it at info
    /// level.
    ReportedElsewhere,
    /// Another claimant's claim of this fire took effect: the fire ran (or runs) there, or that
    /// claimant reports it. Nothing is recorded; this process reports the fire as claimed
    /// elsewhere.
    ClaimedElsewhere,
}

/// A guard's answer to a claim.
#[non_exhaustive]
pub enum Claim {
    /// This process may run the fire; the lease must be released when the run ends.
    Acquired(Box<dyn Lease>),
    /// This fire, or a later one, was already claimed by another claimant.
    AlreadyRan,
    /// This very fire was claimed by another claimant, and the guard recorded whose claim took
    /// it: not this claimant's. Unlike [`Claim::AlreadyRan`] it tells a claimant whose earlier
    /// claim of the fire got no reply that this claim did not take effect, so the fire ran
    /// elsewhere and nothing is reported. A guard that cannot tell answers `AlreadyRan`.
    ClaimedByAnother,
    /// No claimant claimed this fire, but a later fire has been claimed: the fire was passed
    /// over (every process was late or busy). A guard that keeps no record of each fire's claim
    /// answers [`Claim::AlreadyRan`] instead.
    Superseded,
    /// Another claimant recorded this fire as dropped and reported it (it found the job busy
    /// under `overlap = "skip"`, found it paused, or reported it through
    /// [`Guard::report_drop`]): the fire does not run, and this claimant does not report it
    /// again. A guard that keeps no record of reports never answers it.
    DroppedByAnother,
    /// An instance of the job is running, so no slot is free.
    Busy {
        /// Whether this claimant reports the busy fire: the guard records a busy fire as
        /// reported only for `overlap = "skip"`, where it is dropped (under `queue` and
        /// `replace` it waits, and the answer is `false`). A fire that another claimant already
        /// reported is answered [`Claim::DroppedByAnother`] instead.
        first_report: bool,
    },
    /// This claimant's own earlier claim of the fire took effect (its reply was lost), and its
    /// lease ran out before this retry: the fire was claimed but can no longer start.
    Lapsed,
    /// The fire lies further ahead of the guard's clock than it tolerates: this process's clock
    /// is ahead. Asking again once the guard's clock has caught up may succeed.
    TooEarly {
        /// How far the fire lies ahead of the guard's clock.
        ahead: Duration,
    },
    /// A manual run ([`GuardControls::claim_manual`]) that nobody claimed was asked for longer
    /// ago than the job's misfire grace by the guard's clock: it can no longer start anywhere.
    TooLate {
        /// How long ago, by the guard's clock, the run was asked for.
        late: Duration,
    },
    /// The job is paused ([`GuardControls::set_pause`]): the fire does not run. The guard records the
    /// fire as reported like a busy one, so that it is reported at warn level once.
    Paused {
        /// Who paused it, and when.
        pause: Pause,
        /// `false` when another process already reported this fire.
        first_report: bool,
    },
}

impl std::fmt::Debug for Claim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Claim::Acquired(lease) => f
                .debug_struct("Acquired")
                .field("fencing_token", &lease.fencing_token())
                .finish(),
            Claim::AlreadyRan => f.write_str("AlreadyRan"),
            Claim::ClaimedByAnother => f.write_str("ClaimedByAnother"),
            Claim::Superseded => f.write_str("Superseded"),
            Claim::DroppedByAnother => f.write_str("DroppedByAnother"),
            Claim::Busy { first_report } => f
                .debug_struct("Busy")
                .field("first_report", first_report)
                .finish(),
            Claim::Lapsed => f.write_str("Lapsed"),
            Claim::TooEarly { ahead } => f.debug_struct("TooEarly").field("ahead", ahead).finish(),
            Claim::TooLate { late } => f.debug_struct("TooLate").field("late", late).finish(),
            Claim::Paused {
                pause,
                first_report,
            } => f
                .debug_struct("Paused")
                .field("pause", pause)
                .field("first_report", first_report)
                .finish(),
        }
    }
}

/// Mutual exclusion and per-fire uniqueness for one job, shared by several processes.
///
/// See the [module documentation](self) for what every implementation must guarantee.
pub trait Guard: Send + Sync + 'static {
    /// Claims fire `fire_time`. A repeated claim of the same fire by the same guard value is the
    /// same claimant (see the module documentation).
    fn claim(&self, fire_time: DateTime<Utc>) -> BoxFuture<Result<Claim, GuardError>>;

    /// Records that fire `fire_time` was dropped, unless its fate is decided already: another
    /// process reported it first ([`DropReport::ReportedElsewhere`]), or another claimant's claim
    /// of it took effect ([`DropReport::ClaimedElsewhere`]: it ran or runs there, or that
    /// claimant reports it). So a drop seen by several processes is reported at warn level once,
    /// and a fire that started is never reported as dropped. Asking again for the same fire from
    /// the same guard value answers [`DropReport::First`] again. The default records nothing and
    /// answers `First`: every process reports its own drops.
    fn report_drop(&self, fire_time: DateTime<Utc>) -> BoxFuture<Result<DropReport, GuardError>> {
        let _ = fire_time;
        Box::pin(async { Ok(DropReport::First) })
    }

    /// Gives up fire `fire_time`, which this guard value may have claimed without seeing the
    /// answer (the reply was lost), or was granted but will not run (it came too late): if this
    /// claimant's claim of the fire took effect, free its lock and record the fire as not started,
    /// so that [`last_claimed`](Guard::last_claimed) does not count it. Guards without such a
    /// record may keep the default, which does nothing.
    fn abandon(&self, fire_time: DateTime<Utc>) -> BoxFuture<Result<(), GuardError>> {
        let _ = fire_time;
        Box::pin(async { Ok(()) })
    }

    /// The latest fire claimed anywhere this guard reaches (this host, the cluster), unless that
    /// claim was given up unstarted ([`abandon`](Guard::abandon)): then `None`, since which
    /// earlier fire last ran is not known.
    fn last_claimed(&self) -> BoxFuture<Result<Option<DateTime<Utc>>, GuardError>>;

    /// The job's **fate point**: the newest fire up to which every fire has a fate in the store
    /// — the newest fire claimed (also one given up unstarted: it was reported by its
    /// claimant), reported dropped ([`report_drop`](Guard::report_drop), a busy or paused
    /// claim) or reported missed ([`report_missed`](Guard::report_missed)); `None` when the store
    /// holds no record of the job (a new job, a renamed one, or a store that lost its data).
    ///
    /// A process that starts the job, or that could not read it at its start, walks the fires
    /// after this point that it did not see itself: those still inside their misfire grace are
    /// claimed the normal way, the older ones are reported missed (docs/guide/downtime.md). The
    /// default answers [`last_claimed`](Guard::last_claimed), which forgets a fire given up
    /// unstarted and every reported one: such fires may then be reported again after a restart.
    fn fate_point(&self) -> BoxFuture<Result<Option<DateTime<Utc>>, GuardError>> {
        self.last_claimed()
    }

    /// Records the fires from `first` to `last` (both included) as **missed**: no process ran
    /// the job when they came due (a downtime), or this process slept through them (a pause),
    /// and their grace has passed. In one step the guard reads the
    /// [`fate_point`](Guard::fate_point) and, if it lies before `last`, moves it to `last`; it
    /// answers the point as it was before. The fires recorded are those after that point from
    /// `first` on: a fire before `first` that no process decided yet stays open, for the
    /// process that holds it to decide. The caller reports at warn level only the fires after
    /// that point, so that processes starting together report each missed fire once.
    ///
    /// Once recorded, a claim of a fire from the range that nobody claimed answers
    /// [`Claim::DroppedByAnother`], and [`report_drop`](Guard::report_drop) of such a fire
    /// answers `false`: a fire reported missed never starts, and is reported once. A guard with a
    /// clock of its own should refuse (answer an error) while `last` is not past the job's
    /// misfire grace by that clock, less a second: such a report comes from a host whose clock is
    /// ahead, and would move the fate point past fires other processes still hold. The scheduler
    /// sends a report again only after an error of kind [`GuardErrorKind::Unreachable`] or
    /// [`GuardErrorKind::Timeout`] (or no answer in time); after any other error it reports the
    /// fires on its own word. The default records nothing and answers `None`, so that every
    /// process that finds the fires missed reports them (twice, rather than never).
    fn report_missed(
        &self,
        first: DateTime<Utc>,
        last: DateTime<Utc>,
    ) -> BoxFuture<Result<Option<DateTime<Utc>>, GuardError>> {
        let _ = (first, last);
        Box::pin(async { Ok(None) })
    }

    /// Whether a [`report_missed`](Guard::report_missed) this guard value sends again with the
    /// same `last`, after a try that got no answer, is answered as the try that took effect
    /// was (the fate point before it), also when other processes moved the point since. Only
    /// then does the scheduler trust the answer to a retry; otherwise (the default, `false`) it
    /// reports the fires of a report whose first try got no answer on its own word (twice
    /// rather than never).
    fn repeats_missed_answers(&self) -> bool {
        false
    }

    /// The guard's own clock, for the clock-skew check (`None`: the guard has no clock of its
    /// own, as the `file` guard, which shares the host's).
    fn server_time(&self) -> BoxFuture<Result<Option<DateTime<Utc>>, GuardError>> {
        Box::pin(async { Ok(None) })
    }

    /// Whether this guard keeps the rule for fires ahead of its clock (see the module
    /// documentation): a claim it cannot grant at once of a fire that lies ahead of its clock
    /// answers [`Claim::TooEarly`] and records nothing. Only then may the scheduler claim the
    /// job's fires ahead of their instant ([`Builder::claim_ahead`](crate::Builder::claim_ahead));
    /// the default, `false`, keeps every claim at the fire's instant.
    fn claims_ahead(&self) -> bool {
        false
    }

    /// The controls this guard offers (pause, resume, run now) for every process it reaches;
    /// `None` (the default) makes the controls of its jobs answer
    /// [`ControlError::Unsupported`](crate::ControlError::Unsupported) at once.
    fn controls(&self) -> Option<&dyn GuardControls> {
        None
    }

    /// The run history this guard keeps for its job, when it was built to keep one
    /// ([`GuardSpec::history`]); `None` (the default): no history.
    fn history(&self) -> Option<&dyn GuardHistory> {
        None
    }
}

impl dyn Guard {
    /// [`GuardControls::set_pause`], or an error of kind [`GuardErrorKind::Unsupported`].
    pub(crate) fn set_pause(&self, pause: Option<Pause>) -> BoxFuture<Result<(), GuardError>> {
        match self.controls() {
            Some(controls) => controls.set_pause(pause),
            None => Box::pin(async { Err(GuardError::unsupported("pause")) }),
        }
    }

    /// [`GuardControls::pause`], or no pause.
    pub(crate) fn pause(&self) -> BoxFuture<Result<Option<Pause>, GuardError>> {
        match self.controls() {
            Some(controls) => controls.pause(),
            None => Box::pin(async { Ok(None) }),
        }
    }

    /// [`GuardControls::claim_manual`], or an error of kind [`GuardErrorKind::Unsupported`].
    pub(crate) fn claim_manual(&self, run: ManualRun) -> BoxFuture<Result<Claim, GuardError>> {
        match self.controls() {
            Some(controls) => controls.claim_manual(run),
            None => Box::pin(async { Err(GuardError::unsupported("run now")) }),
        }
    }
}

/// The controls of a guard that offers them ([`Guard::controls`]): a pause and runs asked for
/// outside the schedule, kept in the guard's store so that every process it reaches obeys them.
pub trait GuardControls: Send + Sync {
    /// Pauses the job (`Some`) or resumes it (`None`) for every process this guard reaches:
    /// while paused, [`Guard::claim`] answers [`Claim::Paused`] (a claim running at the
    /// same time sees the pause or not, never half of it); a run already going on is not
    /// stopped.
    fn set_pause(&self, pause: Option<Pause>) -> BoxFuture<Result<(), GuardError>>;

    /// The job's pause, if it is paused.
    fn pause(&self) -> BoxFuture<Result<Option<Pause>, GuardError>>;

    /// Claims a run asked for outside the schedule. Like [`Guard::claim`] it takes the
    /// job's lease (answering [`Claim::Busy`] while another run holds it) with a fencing token
    /// above every earlier one, and the same claimant asking again is recognised; unlike it, it
    /// leaves the record of scheduled fires alone, ignores a pause, and answers
    /// [`Claim::AlreadyRan`] once another claimant took this `run`.
    ///
    /// Each run starts at most once however late a claimant asks: the guard remembers every run
    /// claimed for as long as a claim of it could be granted, and answers [`Claim::TooLate`] to
    /// a claim of a run nobody claimed whose `requested_at` lies further back than
    /// [`GuardSpec::misfire_grace`] by its own clock (the host's for a guard without one). It
    /// may forget a run once the grace and [`MANUAL_RUNS_KEPT`] are both over, but must go on
    /// refusing it ([`Claim::AlreadyRan`] or `TooLate`): a claimant whose grace is longer, or a
    /// clock that went back, must not claim it again.
    fn claim_manual(&self, run: ManualRun) -> BoxFuture<Result<Claim, GuardError>>;
}

/// The run history a guard keeps ([`Guard::history`]).
pub trait GuardHistory: Send + Sync {
    /// Records `entry` in the run history: the end of a run this guard value claimed (the entry
    /// carries its fencing token), or a fire it reported as dropped.
    fn record(&self, entry: HistoryEntry) -> BoxFuture<Result<(), GuardError>>;

    /// The history of the job from fire `since` on, oldest first, at most
    /// [`HISTORY_LIMIT`](crate::history::HISTORY_LIMIT) entries.
    fn read(&self, since: DateTime<Utc>) -> BoxFuture<Result<Vec<HistoryEntry>, GuardError>>;
}

/// A claimed run's hold on its guard.
pub trait Lease: Send + Sync + 'static {
    /// The fencing token of the run: strictly greater than every earlier token of the job.
    fn fencing_token(&self) -> u64;

    /// For a lease that expires: its length, and the instant the acquire request was sent
    /// (the holder's local deadline is that instant plus the length).
    fn expiry(&self) -> Option<(Duration, Instant)> {
        None
    }

    /// Extends an expiring lease by its length.
    fn renew(&self) -> BoxFuture<Result<Renewal, GuardError>> {
        Box::pin(async { Ok(Renewal::Renewed) })
    }

    /// Gives the slot back. Use-once: consumes the lease.
    fn release(self: Box<Self>) -> BoxFuture<Result<(), GuardError>>;
}

/// The answer to a renewal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Renewal {
    /// The lease was extended.
    Renewed,
    /// The lease was extended, and another process asked this run to stop (`overlap = "replace"`).
    CancelRequested,
    /// The lease is gone: it expired, or another holder has it.
    Lost,
}
