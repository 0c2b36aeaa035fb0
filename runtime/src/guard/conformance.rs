//! The conformance suite of the [`Guard`] contract (feature `conformance`): the checks every
//! built-in guard passes, for a guard of your own to pass too.
//!
//! [`check`] builds guard values the way the scheduler does — one per job and process, through
//! the same kind of factory as [`Builder::custom_guard`](crate::Builder::custom_guard) takes —
//! and drives them through every rule of the [module documentation](super): mutual exclusion,
//! per-fire uniqueness also after release, rising fencing tokens, drops reported once (and then
//! not run by another claimant), a
//! repeated claim recognised as the same claimant, releases and renewals by the owner only,
//! expiring leases, `Lapsed` after a lost reply, abandon, `overlap = "replace"` asking the holder
//! to stop, fires far ahead of the guard's clock refused, fires a little ahead only taken and
//! never decided (for guards that [claim ahead](Guard::claims_ahead)), pauses (a paused fire reported once,
//! a held lease untouched) and manual runs (their own identity, the shared fencing tokens, the
//! record of scheduled fires untouched, each run claimed once however many runs follow it, a run
//! asked for longer ago than the misfire grace refused). Checks that need a feature the guard does not have (an
//! expiring lease, a clock of its own, pauses or manual runs: [`Guard::controls`] answers `None`) are
//! skipped and listed in the [`Report`].
//!
//! Every check uses job names of its own with a random suffix, so the suite can run against a
//! store that keeps data between runs. It takes a few seconds: leases of 300 ms are waited out.
//!
//! ```no_run
//! # #[cfg(feature = "conformance")]
//! # async fn demo(my_guard_for: impl Fn(&cronguard::guard::GuardSpec) -> std::sync::Arc<dyn cronguard::guard::Guard>) {
//! let report = cronguard::guard::conformance::check(|spec| my_guard_for(spec))
//!     .await
//!     .unwrap_or_else(|failure| panic!("{failure}"));
//! println!("{report}");
//! # }
//! ```

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

use super::{Claim, DropReport, Guard, GuardErrorKind, GuardSpec, Lease, Renewal};
use crate::control::{ManualRun, Pause};
use crate::options::Overlap;

/// A rule the guard broke.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Failure {
    /// The check, e.g. `exclusion`.
    pub check: &'static str,
    /// What was expected and what the guard did.
    pub message: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "guard conformance check `{}` failed: {}",
            self.check, self.message
        )
    }
}

impl std::error::Error for Failure {}

/// What the suite checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Report {
    /// The checks the guard passed.
    pub passed: Vec<&'static str>,
    /// The checks skipped, each with why (a feature the guard does not have).
    pub skipped: Vec<(&'static str, &'static str)>,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "passed: {}", self.passed.join(", "))?;
        for (check, why) in &self.skipped {
            write!(f, "; skipped `{check}` ({why})")?;
        }
        Ok(())
    }
}

type Outcome<T> = Result<T, Failure>;

/// The misfire grace of the suite's jobs.
const GRACE: Duration = Duration::from_secs(60);

struct Suite<F> {
    new_guard: F,
    run: String,
}

fn fail(check: &'static str, message: impl Into<String>) -> Failure {
    Failure {
        check,
        message: message.into(),
    }
}

macro_rules! ensure {
    ($check:expr, $cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(fail($check, format!($($msg)+)));
        }
    };
}

/// Now, to the millisecond.
fn now() -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp_millis(Utc::now().timestamp_millis()).unwrap_or_else(Utc::now)
}

/// A fire `s` seconds after a fixed instant an hour before the suite started.
fn at(base: DateTime<Utc>, s: i64) -> DateTime<Utc> {
    base + TimeDelta::seconds(s)
}

fn name(claim: &Claim) -> &'static str {
    match claim {
        Claim::Acquired(_) => "Acquired",
        Claim::AlreadyRan => "AlreadyRan",
        Claim::ClaimedByAnother => "ClaimedByAnother",
        Claim::Superseded => "Superseded",
        Claim::DroppedByAnother => "DroppedByAnother",
        Claim::Busy { .. } => "Busy",
        Claim::Lapsed => "Lapsed",
        Claim::TooLate { .. } => "TooLate",
        Claim::TooEarly { .. } => "TooEarly",
        Claim::Paused { .. } => "Paused",
    }
}

/// Whether an answer says that another claimant took the fire.
fn ran_elsewhere(answer: &str) -> bool {
    answer == "ClaimedByAnother" || answer == "AlreadyRan"
}

impl<F> Suite<F>
where
    F: Fn(&GuardSpec) -> Arc<dyn Guard>,
{
    /// One process's guard value of job `job` of this run.
    fn guard(&self, job: &str, lease: Duration, overlap: Overlap) -> Arc<dyn Guard> {
        self.guard_with_grace(job, lease, overlap, GRACE)
    }

    fn guard_with_grace(
        &self,
        job: &str,
        lease: Duration,
        overlap: Overlap,
        misfire_grace: Duration,
    ) -> Arc<dyn Guard> {
        (self.new_guard)(&GuardSpec {
            job: format!("conformance-{job}-{}", self.run),
            lease,
            overlap,
            history: false,
            instance: "conformance".to_owned(),
            misfire_grace,
        })
    }

    fn process(&self, job: &str) -> Arc<dyn Guard> {
        self.guard(job, Duration::from_secs(30), Overlap::Skip)
    }
}

async fn claim(check: &'static str, guard: &dyn Guard, fire: DateTime<Utc>) -> Outcome<Claim> {
    guard
        .claim(fire)
        .await
        .map_err(|e| fail(check, format!("the claim of {fire} failed: {e}")))
}

async fn acquire(
    check: &'static str,
    guard: &dyn Guard,
    fire: DateTime<Utc>,
) -> Outcome<Box<dyn Lease>> {
    match claim(check, guard, fire).await? {
        Claim::Acquired(lease) => Ok(lease),
        other => Err(fail(
            check,
            format!(
                "the claim of {fire} answered {}, expected Acquired",
                name(&other)
            ),
        )),
    }
}

/// The answer's name; an acquired lease is released at once.
async fn answer(
    check: &'static str,
    guard: &dyn Guard,
    fire: DateTime<Utc>,
) -> Outcome<&'static str> {
    let claim = claim(check, guard, fire).await?;
    let answer = name(&claim);
    if let Claim::Acquired(lease) = claim {
        release(check, lease).await?;
    }
    Ok(answer)
}

async fn release(check: &'static str, lease: Box<dyn Lease>) -> Outcome<()> {
    lease
        .release()
        .await
        .map_err(|e| fail(check, format!("a release failed: {e}")))
}

async fn renew(check: &'static str, lease: &dyn Lease) -> Outcome<Renewal> {
    lease
        .renew()
        .await
        .map_err(|e| fail(check, format!("a renewal failed: {e}")))
}

async fn report_drop(
    check: &'static str,
    guard: &dyn Guard,
    fire: DateTime<Utc>,
) -> Outcome<DropReport> {
    guard
        .report_drop(fire)
        .await
        .map_err(|e| fail(check, format!("report_drop({fire}) failed: {e}")))
}

/// Whether this process reports the drop of `fire` first.
async fn first_report(
    check: &'static str,
    guard: &dyn Guard,
    fire: DateTime<Utc>,
) -> Outcome<bool> {
    Ok(report_drop(check, guard, fire).await? == DropReport::First)
}

async fn fate_point(check: &'static str, guard: &dyn Guard) -> Outcome<Option<DateTime<Utc>>> {
    guard
        .fate_point()
        .await
        .map_err(|e| fail(check, format!("fate_point failed: {e}")))
}

async fn report_missed(
    check: &'static str,
    guard: &dyn Guard,
    first: DateTime<Utc>,
    last: DateTime<Utc>,
) -> Outcome<Option<DateTime<Utc>>> {
    guard
        .report_missed(first, last)
        .await
        .map_err(|e| fail(check, format!("report_missed({first}, {last}) failed: {e}")))
}

async fn last_claimed(check: &'static str, guard: &dyn Guard) -> Outcome<Option<DateTime<Utc>>> {
    guard
        .last_claimed()
        .await
        .map_err(|e| fail(check, format!("last_claimed failed: {e}")))
}

/// Claims `fire` until the previous lease has expired (at most 10 s).
async fn until_acquired(
    check: &'static str,
    guard: &dyn Guard,
    fire: DateTime<Utc>,
) -> Outcome<Box<dyn Lease>> {
    for _ in 0..500 {
        match claim(check, guard, fire).await? {
            Claim::Acquired(lease) => return Ok(lease),
            Claim::Busy { .. } => tokio::time::sleep(Duration::from_millis(20)).await,
            other => {
                return Err(fail(
                    check,
                    format!(
                        "waiting for an expired lease, the claim of {fire} answered {}",
                        name(&other)
                    ),
                ))
            }
        }
    }
    Err(fail(
        check,
        "a lease of 300 ms was still held after 10 s: leases do not expire",
    ))
}

/// Runs the whole suite against the guards `new_guard` builds: each call must return a new
/// guard value (another claimant, as in another process) of the job `spec.job`, sharing the
/// store with every other value of that job.
///
/// # Errors
///
/// The first [`Failure`]: which rule the guard broke and how.
pub async fn check<F>(new_guard: F) -> Result<Report, Failure>
where
    F: Fn(&GuardSpec) -> Arc<dyn Guard>,
{
    let suite = Suite {
        new_guard,
        run: format!("{:08x}", fastrand::u32(..)),
    };
    let base = now() - TimeDelta::hours(1);
    let mut report = Report::default();

    exclusion_and_uniqueness(&suite, base).await?;
    report.passed.push("exclusion_and_uniqueness");
    drops_are_reported_once(&suite, base).await?;
    report.passed.push("drops_are_reported_once");
    a_repeated_claim_is_the_same_claimant(&suite, base).await?;
    report.passed.push("a_repeated_claim_is_the_same_claimant");
    passed_over_fires(&suite).await?;
    report.passed.push("passed_over_fires");

    let probe = suite.guard("probe", Duration::from_millis(300), Overlap::Skip);
    let lease = acquire("probe", &*probe, at(base, 1)).await?;
    let expires = lease.expiry().is_some();
    release("probe", lease).await?;
    if expires {
        leases_expire_and_only_the_owner_acts(&suite, base).await?;
        report.passed.push("leases_expire_and_only_the_owner_acts");
        a_retry_after_the_lease_ran_out_is_lapsed(&suite).await?;
        report
            .passed
            .push("a_retry_after_the_lease_ran_out_is_lapsed");
        replace_asks_the_holder_to_stop(&suite, base).await?;
        report.passed.push("replace_asks_the_holder_to_stop");
        abandon_frees_the_lock(&suite).await?;
        report.passed.push("abandon_frees_the_lock");
    } else {
        for check in [
            "leases_expire_and_only_the_owner_acts",
            "a_retry_after_the_lease_ran_out_is_lapsed",
            "replace_asks_the_holder_to_stop",
            "abandon_frees_the_lock",
        ] {
            report.skipped.push((check, "its leases do not expire"));
        }
    }
    let has_clock = probe
        .server_time()
        .await
        .map_err(|e| fail("clock", format!("server_time failed: {e}")))?
        .is_some();
    if has_clock {
        a_fire_far_ahead_is_refused(&suite).await?;
        report.passed.push("a_fire_far_ahead_is_refused");
        missed_fires_ahead_are_refused(&suite).await?;
        report.passed.push("missed_fires_ahead_are_refused");
    } else {
        report
            .skipped
            .push(("a_fire_far_ahead_is_refused", "it has no clock of its own"));
        report.skipped.push((
            "missed_fires_ahead_are_refused",
            "it has no clock of its own",
        ));
    }
    const AHEAD: &str = "a_fire_ahead_is_only_taken_never_decided";
    if probe.claims_ahead() && has_clock && expires {
        a_fire_ahead_is_only_taken_never_decided(&suite).await?;
        report.passed.push(AHEAD);
    } else {
        report.skipped.push((
            AHEAD,
            "it does not claim ahead (`Guard::claims_ahead`), or has no clock or expiring lease",
        ));
    }
    const PAUSES: &str = "a_paused_fire_is_reported_once_and_leases_go_on";
    match a_paused_fire_is_reported_once_and_leases_go_on(&suite, base).await? {
        Supported::Yes => report.passed.push(PAUSES),
        Supported::No => report
            .skipped
            .push((PAUSES, "it does not support pauses (`Guard::controls`)")),
    }
    const MANUAL: &str = "manual_runs_share_the_lease_and_fence_not_the_fires";
    match manual_runs_share_the_lease_and_fence_not_the_fires(&suite, base).await? {
        Supported::Yes => report.passed.push(MANUAL),
        Supported::No => report.skipped.push((
            MANUAL,
            "it does not support manual runs (`Guard::controls`)",
        )),
    }
    for (check, outcome) in [
        (
            "a_manual_run_starts_once_however_many_follow",
            a_manual_run_starts_once_however_many_follow(&suite).await?,
        ),
        (
            "a_manual_run_asked_for_before_the_grace_is_refused",
            a_manual_run_asked_for_before_the_grace_is_refused(&suite).await?,
        ),
    ] {
        match outcome {
            Supported::Yes => report.passed.push(check),
            Supported::No => report
                .skipped
                .push((check, "it does not support manual runs (`Guard::controls`)")),
        }
    }
    const MISSED: &str = "missed_fires_are_decided_once";
    match missed_fires_are_decided_once(&suite, base).await? {
        Supported::Yes => report.passed.push(MISSED),
        Supported::No => report
            .skipped
            .push((MISSED, "it keeps no fate point (`Guard::report_missed`)")),
    }
    Ok(report)
}

/// Whether the guard supports what a check is about.
enum Supported {
    Yes,
    No,
}

async fn set_pause(
    check: &'static str,
    guard: &dyn Guard,
    pause: Option<Pause>,
) -> Outcome<Supported> {
    match guard.set_pause(pause).await {
        Ok(()) => Ok(Supported::Yes),
        Err(e) if e.kind() == GuardErrorKind::Unsupported => Ok(Supported::No),
        Err(e) => Err(fail(check, format!("set_pause failed: {e}"))),
    }
}

async fn paused(check: &'static str, guard: &dyn Guard) -> Outcome<Option<Pause>> {
    guard
        .pause()
        .await
        .map_err(|e| fail(check, format!("pause() failed: {e}")))
}

async fn claim_manual(check: &'static str, guard: &dyn Guard, run: ManualRun) -> Outcome<Claim> {
    guard.claim_manual(run).await.map_err(|e| {
        fail(
            check,
            format!("the claim of manual run {:x} failed: {e}", run.id),
        )
    })
}

async fn acquire_manual(
    check: &'static str,
    guard: &dyn Guard,
    run: ManualRun,
) -> Outcome<Box<dyn Lease>> {
    match claim_manual(check, guard, run).await? {
        Claim::Acquired(lease) => Ok(lease),
        other => Err(fail(
            check,
            format!(
                "the claim of manual run {:x} answered {}, expected Acquired",
                run.id,
                name(&other)
            ),
        )),
    }
}

async fn a_paused_fire_is_reported_once_and_leases_go_on<F>(
    suite: &Suite<F>,
    base: DateTime<Utc>,
) -> Outcome<Supported>
where
    F: Fn(&GuardSpec) -> Arc<dyn Guard>,
{
    const C: &str = "a_paused_fire_is_reported_once_and_leases_go_on";
    let (a, b) = (suite.process("paused"), suite.process("paused"));
    // Under `queue` a busy fire waits, but a paused one is dropped: it is reported all the same.
    let q = suite.guard("paused", Duration::from_secs(30), Overlap::Queue);
    let held = acquire(C, &*a, at(base, 1)).await?;
    let pause = Pause::new("conformance operator", now());
    if let Supported::No = set_pause(C, &*a, Some(pause.clone())).await? {
        release(C, held).await?;
        return Ok(Supported::No);
    }
    let seen = paused(C, &*b).await?;
    ensure!(
        C,
        seen.as_ref() == Some(&pause),
        "pause() answered {seen:?} on another process, expected {pause:?}"
    );
    for fire in [2, 3] {
        let mut firsts = Vec::new();
        for (i, g) in [&a, &b, &q].into_iter().enumerate() {
            match claim(C, &**g, at(base, fire)).await? {
                Claim::Paused {
                    pause: told,
                    first_report,
                } => {
                    ensure!(
                        C,
                        told == pause,
                        "a paused claim told {told:?}, expected {pause:?}"
                    );
                    if first_report {
                        firsts.push(i);
                    }
                }
                other => {
                    return Err(fail(
                        C,
                        format!(
                            "a claim of a paused job answered {}, expected Paused (also while a run holds the lease)",
                            name(&other)
                        ),
                    ))
                }
            }
        }
        ensure!(
            C,
            firsts.len() == 1,
            "{} processes were told they report paused fire {fire} first; exactly one must be",
            firsts.len()
        );
        let again = [&a, &b, &q][firsts[0]];
        ensure!(
            C,
            matches!(
                claim(C, &**again, at(base, fire)).await?,
                Claim::Paused {
                    first_report: true,
                    ..
                }
            ),
            "the process that reported paused fire {fire} first must be first again when it asks again"
        );
    }
    ensure!(
        C,
        renew(C, &*held).await? == Renewal::Renewed,
        "a pause must not stop a run that holds the lease: its renewal failed"
    );
    let shifted = at(base, 4);
    ensure!(
        C,
        matches!(set_pause(C, &*b, None).await?, Supported::Yes),
        "resume is supported where pause is"
    );
    ensure!(
        C,
        paused(C, &*a).await?.is_none(),
        "pause() must answer None once the job is resumed"
    );
    ensure!(
        C,
        renew(C, &*held).await? == Renewal::Renewed,
        "a resume must not touch the lease of a run"
    );
    release(C, held).await?;
    let told = answer(C, &*suite.process("paused"), at(base, 3)).await?;
    ensure!(
        C,
        told == "DroppedByAnother",
        "after the resume, a claim of a fire reported as paused answered {told}, expected DroppedByAnother: it was reported as not run, so it must not run"
    );
    let next = answer(C, &*b, shifted).await?;
    ensure!(
        C,
        next == "Acquired",
        "after the resume, the next fire answered {next}, expected Acquired"
    );
    Ok(Supported::Yes)
}

async fn manual_runs_share_the_lease_and_fence_not_the_fires<F>(
    suite: &Suite<F>,
    base: DateTime<Utc>,
) -> Outcome<Supported>
where
    F: Fn(&GuardSpec) -> Arc<dyn Guard>,
{
    const C: &str = "manual_runs_share_the_lease_and_fence_not_the_fires";
    let (a, b) = (suite.process("manual"), suite.process("manual"));
    let scheduled = acquire(C, &*a, at(base, 10)).await?;
    let mut last = scheduled.fencing_token();
    release(C, scheduled).await?;
    let run = ManualRun {
        id: fastrand::u64(..),
        requested_at: now(),
    };
    let manual = match a.claim_manual(run).await {
        Err(e) if e.kind() == GuardErrorKind::Unsupported => return Ok(Supported::No),
        Err(e) => return Err(fail(C, format!("the claim of a manual run failed: {e}"))),
        Ok(Claim::Acquired(lease)) => lease,
        Ok(other) => {
            return Err(fail(
                C,
                format!(
                    "the claim of a manual run of a free job answered {}, expected Acquired",
                    name(&other)
                ),
            ))
        }
    };
    ensure!(
        C,
        manual.fencing_token() > last,
        "a manual run's fencing token must rise above the scheduled runs': {} after {last}",
        manual.fencing_token()
    );
    last = manual.fencing_token();
    // The reply was "lost": the same claimant asks again while its lease is held. A guard whose
    // leases do not expire holds them in this process, where no reply is lost: its repeated
    // claim finds the run taken by itself and answers `Lapsed` (never `AlreadyRan`).
    if manual.expiry().is_some() {
        let again = acquire_manual(C, &*a, run).await?;
        ensure!(
            C,
            again.fencing_token() == last,
            "a manual claim repeated by the same guard value must carry the stored fencing token {last}, not {}",
            again.fencing_token()
        );
        drop(again);
    } else {
        let again = name(&claim_manual(C, &*a, run).await?);
        ensure!(
            C,
            again == "Lapsed" || again == "Busy",
            "a manual claim repeated by the same guard value answered {again}, expected Lapsed"
        );
    }
    let other = name(&claim_manual(C, &*b, run).await?);
    ensure!(
        C,
        other == "AlreadyRan",
        "a manual run taken by another process answered {other}, expected AlreadyRan"
    );
    let busy = answer(C, &*b, at(base, 11)).await?;
    ensure!(
        C,
        busy == "Busy",
        "a scheduled fire while a manual run holds the lease answered {busy}, expected Busy"
    );
    release(C, manual).await?;
    let seen = last_claimed(C, &*b).await?;
    ensure!(
        C,
        seen == Some(at(base, 10)),
        "a manual run must not change last_claimed: it answered {seen:?}, expected {}",
        at(base, 10)
    );
    let scheduled = acquire(C, &*b, at(base, 11)).await.map_err(|f| {
        fail(
            C,
            format!(
                "the next scheduled fire after a manual run must still be claimed ({})",
                f.message
            ),
        )
    })?;
    ensure!(
        C,
        scheduled.fencing_token() > last,
        "the scheduled run after a manual one must get a higher fencing token: {} after {last}",
        scheduled.fencing_token()
    );
    last = scheduled.fencing_token();
    let second = ManualRun {
        id: fastrand::u64(..),
        requested_at: now(),
    };
    match claim_manual(C, &*a, second).await? {
        Claim::Busy { first_report: true } => {}
        other => {
            return Err(fail(
                C,
                format!(
                    "a manual run while a scheduled run holds the lease answered {}, expected Busy {{ first_report: true }}",
                    name(&other)
                ),
            ))
        }
    }
    release(C, scheduled).await?;
    // A pause holds back scheduled fires only.
    let pausing = set_pause(C, &*a, Some(Pause::new("conformance operator", now()))).await?;
    let lease = acquire_manual(C, &*a, second).await.map_err(|f| {
        fail(
            C,
            format!(
                "a manual run refused while busy must be claimable once the lease is free, also while paused ({})",
                f.message
            ),
        )
    })?;
    ensure!(
        C,
        lease.fencing_token() > last,
        "fencing tokens must rise: {} after {last}",
        lease.fencing_token()
    );
    release(C, lease).await?;
    if let Supported::Yes = pausing {
        set_pause(C, &*a, None).await?;
    }
    let released = name(&claim_manual(C, &*b, second).await?);
    ensure!(
        C,
        released == "AlreadyRan",
        "a manual run that ran and was released answered {released} to another process, expected AlreadyRan"
    );
    ensure!(
        C,
        last_claimed(C, &*a).await? == Some(at(base, 11)),
        "manual runs must not change last_claimed"
    );
    let next = answer(C, &*b, at(base, 12)).await?;
    ensure!(
        C,
        next == "Acquired",
        "the next scheduled fire after manual runs answered {next}, expected Acquired"
    );
    Ok(Supported::Yes)
}

/// A manual run claimed by one process, then claimed by another after many more manual runs (a
/// burst, or a process that read the requests late): it must not run again, however many came
/// between.
async fn a_manual_run_starts_once_however_many_follow<F>(suite: &Suite<F>) -> Outcome<Supported>
where
    F: Fn(&GuardSpec) -> Arc<dyn Guard>,
{
    const C: &str = "a_manual_run_starts_once_however_many_follow";
    let (a, b) = (suite.process("burst"), suite.process("burst"));
    let runs: Vec<ManualRun> = (0..20)
        .map(|_| ManualRun {
            id: fastrand::u64(1..),
            requested_at: now(),
        })
        .collect();
    for run in &runs {
        let lease = match a.claim_manual(*run).await {
            Err(e) if e.kind() == GuardErrorKind::Unsupported => return Ok(Supported::No),
            Err(e) => return Err(fail(C, format!("the claim of a manual run failed: {e}"))),
            Ok(Claim::Acquired(lease)) => lease,
            Ok(other) => {
                return Err(fail(
                    C,
                    format!(
                        "manual run {:x} of a free job answered {}, expected Acquired",
                        run.id,
                        name(&other)
                    ),
                ))
            }
        };
        release(C, lease).await?;
    }
    for run in &runs {
        let again = name(&claim_manual(C, &*b, *run).await?);
        ensure!(
            C,
            again == "AlreadyRan",
            "manual run {:x}, claimed by another process before {} more manual runs, answered {again}, expected AlreadyRan",
            run.id,
            runs.len() - 1
        );
    }
    Ok(Supported::Yes)
}

/// A manual run asked for longer ago than the job's misfire grace, by the guard's clock, is
/// refused: nobody claimed it, and it can no longer start. A run that a process with a short
/// grace claimed is not claimed again by one with a longer grace, and a run nobody claimed, asked
/// for with it, is refused as too late, not taken for one that ran.
async fn a_manual_run_asked_for_before_the_grace_is_refused<F>(
    suite: &Suite<F>,
) -> Outcome<Supported>
where
    F: Fn(&GuardSpec) -> Arc<dyn Guard>,
{
    const C: &str = "a_manual_run_asked_for_before_the_grace_is_refused";
    let a = suite.process("too-late");
    let old = ManualRun {
        id: fastrand::u64(1..),
        requested_at: now() - TimeDelta::hours(1),
    };
    match a.claim_manual(old).await {
        Err(e) if e.kind() == GuardErrorKind::Unsupported => return Ok(Supported::No),
        Err(e) => return Err(fail(C, format!("the claim of a manual run failed: {e}"))),
        Ok(Claim::TooLate { late }) => ensure!(
            C,
            late >= GRACE,
            "a manual run asked for an hour ago answered TooLate by {late:?}, which is within the grace of {GRACE:?}"
        ),
        Ok(other) => {
            return Err(fail(
                C,
                format!(
                    "a manual run asked for an hour ago, with a misfire grace of {GRACE:?}, answered {}, expected TooLate",
                    name(&other)
                ),
            ))
        }
    }
    let lease = acquire_manual(
        C,
        &*a,
        ManualRun {
            id: fastrand::u64(1..),
            requested_at: now(),
        },
    )
    .await
    .map_err(|f| {
        fail(
            C,
            format!(
                "a refused manual run must leave the job free ({})",
                f.message
            ),
        )
    })?;
    release(C, lease).await?;

    let short = Duration::from_millis(300);
    let hasty = suite.guard_with_grace("forgetful", Duration::from_secs(30), Overlap::Skip, short);
    let patient = suite.guard("forgetful", Duration::from_secs(30), Overlap::Skip);
    let first = ManualRun {
        id: fastrand::u64(1..),
        requested_at: now(),
    };
    // Asked for with `first`, and read by nobody until its grace is over.
    let unread = ManualRun {
        id: fastrand::u64(1..),
        requested_at: first.requested_at,
    };
    release(C, acquire_manual(C, &*hasty, first).await?).await?;
    tokio::time::sleep(short * 2).await;
    let next = ManualRun {
        id: fastrand::u64(1..),
        requested_at: now(),
    };
    release(C, acquire_manual(C, &*hasty, next).await?).await?;
    let again = name(&claim_manual(C, &*patient, first).await?);
    ensure!(
        C,
        again == "AlreadyRan" || again == "TooLate",
        "a manual run claimed by a process with a grace of {short:?}, claimed {:?} later by another with a grace of {GRACE:?}, answered {again}, expected AlreadyRan",
        short * 2
    );
    // Nobody claimed it: it did not run, and the late reader must report it, not take it for a
    // run that was claimed and forgotten.
    let late = name(&claim_manual(C, &*hasty, unread).await?);
    ensure!(
        C,
        late == "TooLate",
        "a manual run nobody claimed, asked for {:?} ago with a grace of {short:?}, answered {late}, expected TooLate (a run claimed is remembered for at least `MANUAL_RUNS_KEPT`)",
        short * 2
    );
    Ok(Supported::Yes)
}

async fn exclusion_and_uniqueness<F>(suite: &Suite<F>, base: DateTime<Utc>) -> Outcome<()>
where
    F: Fn(&GuardSpec) -> Arc<dyn Guard>,
{
    const C: &str = "exclusion_and_uniqueness";
    let (a, b) = (suite.process("exclusion"), suite.process("exclusion"));
    let first = acquire(C, &*a, at(base, 10)).await?;
    let token = first.fencing_token();
    ensure!(
        C,
        answer(C, &*a, at(base, 18)).await? == "Busy",
        "a held guard must be busy for a later fire"
    );
    ensure!(
        C,
        answer(C, &*b, at(base, 19)).await? == "Busy",
        "a held guard must be busy for another process"
    );
    let same = answer(C, &*b, at(base, 10)).await?;
    ensure!(
        C,
        ran_elsewhere(same),
        "the same fire claimed by another process answered {same}, expected ClaimedByAnother (or AlreadyRan)"
    );
    for g in [&a, &b] {
        let older = answer(C, &**g, at(base, 5)).await?;
        ensure!(
            C,
            older == "AlreadyRan" || older == "Superseded",
            "an older fire answered {older}, expected AlreadyRan (or Superseded)"
        );
    }
    release(C, first).await?;
    let after = answer(C, &*b, at(base, 10)).await?;
    ensure!(
        C,
        ran_elsewhere(after),
        "after the release, the claimed fire answered {after}: a fire must stay claimed"
    );
    let second = acquire(C, &*b, at(base, 20)).await?;
    ensure!(
        C,
        second.fencing_token() > token,
        "fencing tokens must rise: {} after {token}",
        second.fencing_token()
    );
    let mut last = second.fencing_token();
    release(C, second).await?;
    for s in 21..30 {
        let g = if s % 2 == 0 { &a } else { &b };
        let lease = acquire(C, &**g, at(base, s)).await?;
        ensure!(
            C,
            lease.fencing_token() > last,
            "fencing tokens must rise: {} after {last}",
            lease.fencing_token()
        );
        last = lease.fencing_token();
        release(C, lease).await?;
    }
    let seen = last_claimed(C, &*a).await?;
    ensure!(
        C,
        seen == Some(at(base, 29)),
        "last_claimed answered {seen:?}, expected the last claimed fire {}",
        at(base, 29)
    );
    Ok(())
}

async fn drops_are_reported_once<F>(suite: &Suite<F>, base: DateTime<Utc>) -> Outcome<()>
where
    F: Fn(&GuardSpec) -> Arc<dyn Guard>,
{
    const C: &str = "drops_are_reported_once";
    let (a, b) = (suite.process("reports"), suite.process("reports"));
    ensure!(
        C,
        first_report(C, &*a, at(base, 300)).await?,
        "the first report of a fire must be first"
    );
    ensure!(
        C,
        !first_report(C, &*b, at(base, 300)).await?,
        "another process's report of the same fire must not be first"
    );
    ensure!(
        C,
        first_report(C, &*a, at(base, 300)).await?,
        "the same guard value asking again (its reply was lost) must still be first"
    );
    ensure!(
        C,
        first_report(C, &*b, at(base, 299)).await?,
        "an older fire is a fire of its own"
    );
    // A reported drop decides the fire: another process's claim of it does not run it.
    let told = answer(C, &*b, at(base, 300)).await?;
    ensure!(
        C,
        told == "DroppedByAnother",
        "a claim of a fire another process reported as dropped answered {told}, expected DroppedByAnother"
    );
    // A busy fire of `overlap = "skip"` is dropped: exactly one process reports it first.
    let processes: Vec<Arc<dyn Guard>> = (0..4).map(|_| suite.process("busy")).collect();
    let held = acquire(C, &*processes[0], at(base, 100)).await?;
    let mut firsts = Vec::new();
    for (i, g) in processes.iter().enumerate().skip(1) {
        match claim(C, &**g, at(base, 101)).await? {
            Claim::Busy { first_report: true } => firsts.push(i),
            // Not first: the answer says so, or says that the first report decided the fire.
            Claim::Busy { .. } | Claim::DroppedByAnother => {}
            other => {
                return Err(fail(
                    C,
                    format!("a busy fire answered {}, expected Busy", name(&other)),
                ))
            }
        }
    }
    ensure!(
        C,
        firsts.len() == 1,
        "{} processes were told they report a busy fire first; exactly one must be",
        firsts.len()
    );
    release(C, held).await?;
    // The skip decided the fire: once the lease is free, a process that comes late (it stood
    // by) must not run it.
    let late = suite.process("busy");
    let told = answer(C, &*late, at(base, 101)).await?;
    ensure!(
        C,
        told == "DroppedByAnother",
        "a claim of a fire skipped as busy, once the lease was free, answered {told}, expected DroppedByAnother: the fire was reported as skipped, so it must not run"
    );
    // The process that reported it may never have seen its busy answer (the reply was lost):
    // asking again, it may take the fire, and then reports it first if it gives it up.
    let reporter = &processes[firsts[0]];
    let taken = acquire(C, &**reporter, at(base, 101)).await?;
    ensure!(
        C,
        first_report(C, &**reporter, at(base, 101)).await?,
        "the claimant of a fire it had reported busy itself must report it first if it gives it up"
    );
    release(C, taken).await?;
    // Under `queue` a busy fire waits: the busy claims must not use up its report.
    let (q1, q2) = (
        suite.guard("queued", Duration::from_secs(30), Overlap::Queue),
        suite.guard("queued", Duration::from_secs(30), Overlap::Queue),
    );
    let held = acquire(C, &*q1, at(base, 1)).await?;
    ensure!(
        C,
        answer(C, &*q2, at(base, 2)).await? == "Busy",
        "a held guard must be busy"
    );
    ensure!(
        C,
        first_report(C, &*q2, at(base, 2)).await?,
        "a busy fire of `overlap = \"queue\"` waits: its misfire must still be reported first"
    );
    release(C, held).await
}

async fn a_repeated_claim_is_the_same_claimant<F>(
    suite: &Suite<F>,
    base: DateTime<Utc>,
) -> Outcome<()>
where
    F: Fn(&GuardSpec) -> Arc<dyn Guard>,
{
    const C: &str = "a_repeated_claim_is_the_same_claimant";
    let (a, b) = (suite.process("retry"), suite.process("retry"));
    // The reply of this claim is "lost": the lease is dropped unseen and the fire asked again.
    let token = acquire(C, &*a, at(base, 1)).await?.fencing_token();
    let again = match claim(C, &*a, at(base, 1)).await? {
        Claim::Acquired(lease) => lease,
        // A guard whose dropped lease lets its lock go at once (a file lock) can only say that
        // its own claim took effect and can no longer start.
        Claim::Lapsed => {
            ensure!(C, ran_elsewhere(answer(C, &*b, at(base, 1)).await?), "another process is not the claimant");
            return Ok(());
        }
        other => {
            return Err(fail(C, format!("a claim repeated by the same guard value answered {}, expected Acquired again while its lease is held (or Lapsed once it is gone); AlreadyRan would drop the fire without a word", name(&other))))
        }
    };
    ensure!(
        C,
        again.fencing_token() == token,
        "the repeated claim must carry the stored fencing token {token}, not {}",
        again.fencing_token()
    );
    ensure!(
        C,
        ran_elsewhere(answer(C, &*b, at(base, 1)).await?),
        "another process is not the claimant"
    );
    ensure!(
        C,
        answer(C, &*b, at(base, 2)).await? == "Busy",
        "the retried lease still holds the lock"
    );
    let renewed = renew(C, &*again).await?;
    ensure!(
        C,
        renewed == Renewal::Renewed,
        "the retried lease must renew, answered {renewed:?}"
    );
    release(C, again).await?;
    ensure!(
        C,
        answer(C, &*b, at(base, 2)).await? == "Acquired",
        "the release of the retried lease must free the lock"
    );
    Ok(())
}

async fn passed_over_fires<F>(suite: &Suite<F>) -> Outcome<()>
where
    F: Fn(&GuardSpec) -> Arc<dyn Guard>,
{
    const C: &str = "passed_over_fires";
    let (a, b) = (suite.process("passed-over"), suite.process("passed-over"));
    let now = now();
    for fire in [now - TimeDelta::seconds(3), now] {
        release(C, acquire(C, &*b, fire).await?).await?;
    }
    let skipped = answer(C, &*a, now - TimeDelta::seconds(1)).await?;
    ensure!(C, skipped == "Superseded" || skipped == "AlreadyRan", "a fire nobody claimed before a later one answered {skipped}, expected Superseded (or AlreadyRan for a guard that keeps no record per fire)");
    let ran = answer(C, &*a, now).await?;
    ensure!(
        C,
        ran_elsewhere(ran),
        "the fire another process claimed answered {ran}, expected ClaimedByAnother (or AlreadyRan)"
    );
    Ok(())
}

async fn leases_expire_and_only_the_owner_acts<F>(
    suite: &Suite<F>,
    base: DateTime<Utc>,
) -> Outcome<()>
where
    F: Fn(&GuardSpec) -> Arc<dyn Guard>,
{
    const C: &str = "leases_expire_and_only_the_owner_acts";
    let lease = Duration::from_millis(300);
    let (a, b) = (
        suite.guard("expiring", lease, Overlap::Skip),
        suite.guard("expiring", lease, Overlap::Skip),
    );
    let old = acquire(C, &*a, at(base, 1)).await?;
    let renewed = renew(C, &*old).await?;
    ensure!(
        C,
        renewed == Renewal::Renewed,
        "the holder's renewal answered {renewed:?}, expected Renewed"
    );
    let new = until_acquired(C, &*b, at(base, 2)).await?;
    ensure!(
        C,
        new.fencing_token() > old.fencing_token(),
        "fencing tokens must rise across an expired lease"
    );
    let lost = renew(C, &*old).await?;
    ensure!(
        C,
        lost == Renewal::Lost,
        "the renewal of an expired lease held by another answered {lost:?}, expected Lost"
    );
    release(C, old).await?;
    ensure!(
        C,
        answer(C, &*a, at(base, 3)).await? == "Busy",
        "the old holder's release must not free the new holder's lock"
    );
    release(C, new).await?;
    ensure!(
        C,
        answer(C, &*a, at(base, 3)).await? == "Acquired",
        "the owner's release must free the lock"
    );
    Ok(())
}

async fn a_retry_after_the_lease_ran_out_is_lapsed<F>(suite: &Suite<F>) -> Outcome<()>
where
    F: Fn(&GuardSpec) -> Arc<dyn Guard>,
{
    const C: &str = "a_retry_after_the_lease_ran_out_is_lapsed";
    let lease = Duration::from_millis(300);
    let (a, b) = (
        suite.guard("lapsed", lease, Overlap::Skip),
        suite.guard("lapsed", lease, Overlap::Skip),
    );
    let first = now() - TimeDelta::seconds(2);
    // A's claim takes effect, but A never hears of it; once its lease ran out, B claims the next.
    drop(acquire(C, &*a, first).await?);
    let next = first + TimeDelta::seconds(1);
    let held = until_acquired(C, &*b, next).await?;
    let retry = answer(C, &*a, first).await?;
    ensure!(C, retry == "Lapsed", "A's retry of its own claim after its lease ran out and a later fire was claimed answered {retry}, expected Lapsed (AlreadyRan would drop the fire without a word)");
    release(C, held).await?;
    // Without a later claim too.
    let c = suite.guard("lapsed-alone", lease, Overlap::Skip);
    let fire = now() - TimeDelta::seconds(1);
    drop(acquire(C, &*c, fire).await?);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let retry = answer(C, &*c, fire).await?;
    ensure!(
        C,
        retry == "Lapsed",
        "a retry after the lease ran out answered {retry}, expected Lapsed"
    );
    Ok(())
}

async fn replace_asks_the_holder_to_stop<F>(suite: &Suite<F>, base: DateTime<Utc>) -> Outcome<()>
where
    F: Fn(&GuardSpec) -> Arc<dyn Guard>,
{
    const C: &str = "replace_asks_the_holder_to_stop";
    let lease = Duration::from_secs(30);
    let (a, b) = (
        suite.guard("replace", lease, Overlap::Replace),
        suite.guard("replace", lease, Overlap::Replace),
    );
    let held = acquire(C, &*a, at(base, 1)).await?;
    ensure!(
        C,
        renew(C, &*held).await? == Renewal::Renewed,
        "nobody asked the holder to stop yet"
    );
    ensure!(
        C,
        answer(C, &*b, at(base, 2)).await? == "Busy",
        "a held guard must be busy"
    );
    let asked = renew(C, &*held).await?;
    ensure!(C, asked == Renewal::CancelRequested, "after a busy `overlap = \"replace\"` claim, the holder's renewal answered {asked:?}, expected CancelRequested");
    release(C, held).await?;
    ensure!(
        C,
        answer(C, &*b, at(base, 2)).await? == "Acquired",
        "the replacing fire gets the lock once the holder released it"
    );
    Ok(())
}

async fn abandon_frees_the_lock<F>(suite: &Suite<F>) -> Outcome<()>
where
    F: Fn(&GuardSpec) -> Arc<dyn Guard>,
{
    const C: &str = "abandon_frees_the_lock";
    let (a, b) = (suite.process("abandoned"), suite.process("abandoned"));
    // In the past, so that the busy answer below is not one for a fire ahead of the clock.
    let fire = now() - TimeDelta::seconds(2);
    drop(acquire(C, &*a, fire).await?);
    b.abandon(fire)
        .await
        .map_err(|e| fail(C, format!("abandon failed: {e}")))?;
    ensure!(
        C,
        last_claimed(C, &*a).await? == Some(fire),
        "another claimant must not be able to abandon A's claim"
    );
    ensure!(
        C,
        answer(C, &*b, fire + TimeDelta::milliseconds(100)).await? == "Busy",
        "another claimant's abandon must not free A's lock"
    );
    a.abandon(fire)
        .await
        .map_err(|e| fail(C, format!("abandon failed: {e}")))?;
    let seen = last_claimed(C, &*a).await?;
    ensure!(
        C,
        seen.is_none(),
        "a claim given up unstarted must not count as run: last_claimed answered {seen:?}"
    );
    let next = fire + TimeDelta::milliseconds(500);
    let lease = acquire(C, &*b, next).await.map_err(|f| {
        fail(
            C,
            format!("the abandoned claim's lock must be free ({})", f.message),
        )
    })?;
    ensure!(
        C,
        last_claimed(C, &*b).await? == Some(next),
        "last_claimed follows the next claim"
    );
    release(C, lease).await
}

async fn a_fire_far_ahead_is_refused<F>(suite: &Suite<F>) -> Outcome<()>
where
    F: Fn(&GuardSpec) -> Arc<dyn Guard>,
{
    const C: &str = "a_fire_far_ahead_is_refused";
    let g = suite.process("ahead");
    match claim(C, &*g, now() + TimeDelta::hours(1)).await? {
        Claim::TooEarly { ahead } => ensure!(
            C,
            ahead > Duration::from_secs(3500) && ahead <= Duration::from_secs(3600),
            "TooEarly by {ahead:?}, expected about an hour"
        ),
        other => {
            return Err(fail(
                C,
                format!(
                    "a fire an hour ahead of the guard's clock answered {}, expected TooEarly",
                    name(&other)
                ),
            ))
        }
    }
    ensure!(
        C,
        last_claimed(C, &*g).await?.is_none(),
        "a refused claim must record nothing"
    );
    let soon = now() + TimeDelta::milliseconds(500);
    release(C, acquire(C, &*g, soon).await?).await?;
    ensure!(
        C,
        last_claimed(C, &*g).await? == Some(soon),
        "a fire within the tolerance is claimed"
    );
    Ok(())
}

/// A claim of a fire ahead of the guard's clock takes a free fire, and answers `TooEarly` while
/// the job is busy or paused, recording nothing: no skip report, no request to stop the holder.
async fn a_fire_ahead_is_only_taken_never_decided<F>(suite: &Suite<F>) -> Outcome<()>
where
    F: Fn(&GuardSpec) -> Arc<dyn Guard>,
{
    const C: &str = "a_fire_ahead_is_only_taken_never_decided";
    let lease = Duration::from_secs(30);
    let (holder, early, other) = (
        suite.guard("early", lease, Overlap::Replace),
        suite.guard("early", lease, Overlap::Replace),
        suite.guard("early", lease, Overlap::Skip),
    );
    let skipper = suite.guard("early", lease, Overlap::Skip);
    let held = acquire(C, &*holder, now()).await?;
    let fire = now() + TimeDelta::milliseconds(700);
    for (who, g) in [
        ("a replacing claim", &early),
        ("a skipping claim", &skipper),
    ] {
        let got = answer(C, &**g, fire).await?;
        ensure!(
            C,
            got == "TooEarly",
            "{who} of a fire 700 ms ahead while the job is busy answered {got}, expected TooEarly"
        );
    }
    let renewed = renew(C, &*held).await?;
    ensure!(
        C,
        renewed == Renewal::Renewed,
        "a claim ahead must not ask the holder to stop: its renewal answered {renewed:?}"
    );
    release(C, held).await?;
    let lease = acquire(C, &*other, fire).await.map_err(|f| {
        fail(
            C,
            format!(
                "a busy claim ahead must record no skip, so another claimant takes the fire once the job is free ({})",
                f.message
            ),
        )
    })?;
    release(C, lease).await?;

    let g = suite.guard("early-paused", Duration::from_secs(30), Overlap::Skip);
    if let Supported::Yes = set_pause(C, &*g, Some(Pause::new("conformance", now()))).await? {
        let fire = now() + TimeDelta::milliseconds(700);
        let got = answer(C, &*g, fire).await?;
        ensure!(
            C,
            got == "TooEarly",
            "a claim of a paused fire 700 ms ahead answered {got}, expected TooEarly"
        );
        set_pause(C, &*g, None).await?;
        let other = suite.guard("early-paused", Duration::from_secs(30), Overlap::Skip);
        release(C, acquire(C, &*other, fire).await?).await?;
    }
    Ok(())
}

/// The fate point follows claims and reports and never moves back; missed fires reported by one
/// process are decided for all: reported once, never started.
async fn missed_fires_are_decided_once<F>(
    suite: &Suite<F>,
    base: DateTime<Utc>,
) -> Outcome<Supported>
where
    F: Fn(&GuardSpec) -> Arc<dyn Guard>,
{
    const C: &str = "missed_fires_are_decided_once";
    let (a, b) = (suite.process("missed"), suite.process("missed"));
    let point = fate_point(C, &*a).await?;
    ensure!(
        C,
        point.is_none(),
        "a job the store holds no record of must have no fate point, found {point:?}"
    );
    let lease = acquire(C, &*a, at(base, 10)).await?;
    release(C, lease).await?;
    let point = fate_point(C, &*b).await?;
    ensure!(
        C,
        point == Some(at(base, 10)),
        "after a claim of {} the fate point must be it, found {point:?}",
        at(base, 10)
    );
    let before = report_missed(C, &*a, at(base, 11), at(base, 15)).await?;
    if before.is_none() {
        return Ok(Supported::No);
    }
    ensure!(
        C,
        before == Some(at(base, 10)),
        "report_missed must answer the fate point before it ({}), answered {before:?}",
        at(base, 10)
    );
    let point = fate_point(C, &*b).await?;
    ensure!(
        C,
        point == Some(at(base, 15)),
        "fires reported missed up to {} must move the fate point there, found {point:?}",
        at(base, 15)
    );
    // Another process that found the same fires missed, and one more, learns which were decided.
    let before = report_missed(C, &*b, at(base, 11), at(base, 16)).await?;
    ensure!(
        C,
        before == Some(at(base, 15)),
        "a second report of missed fires must answer the point the first one left ({}), answered {before:?}",
        at(base, 15)
    );
    let told = answer(C, &*b, at(base, 13)).await?;
    ensure!(
        C,
        told == "DroppedByAnother",
        "a claim of a fire reported missed answered {told}, expected DroppedByAnother: it must never start"
    );
    ensure!(
        C,
        !first_report(C, &*a, at(base, 14)).await?,
        "a fire reported missed must not be reported again"
    );
    // Claims and reports move the point; an older report does not move it back.
    let lease = acquire(C, &*a, at(base, 20)).await?;
    release(C, lease).await?;
    let before = report_missed(C, &*b, at(base, 17), at(base, 18)).await?;
    ensure!(
        C,
        before == Some(at(base, 20)),
        "report_missed of fires older than the last claim must answer that claim ({}), answered {before:?}",
        at(base, 20)
    );
    let point = fate_point(C, &*a).await?;
    ensure!(
        C,
        point == Some(at(base, 20)),
        "the fate point must never move back, found {point:?} after a claim of {}",
        at(base, 20)
    );
    ensure!(
        C,
        first_report(C, &*a, at(base, 25)).await?,
        "a fire nobody reported must be reported first"
    );
    let point = fate_point(C, &*b).await?;
    ensure!(
        C,
        point == Some(at(base, 25)),
        "a reported drop of {} must move the fate point there, found {point:?}",
        at(base, 25)
    );
    // A fire given up unstarted was reported by its claimant: it keeps its fate.
    let lease = acquire(C, &*a, at(base, 30)).await?;
    release(C, lease).await?;
    a.abandon(at(base, 30))
        .await
        .map_err(|e| fail(C, format!("abandon failed: {e}")))?;
    let point = fate_point(C, &*b).await?;
    ensure!(
        C,
        point == Some(at(base, 30)),
        "a claim given up unstarted must still count for the fate point ({}), found {point:?}",
        at(base, 30)
    );
    // Missed fires are recorded from the fate point on: a fire before it that a process still
    // holds open (its claim was answered busy, say) was not reported missed, and that process
    // reports it. Missed fires recorded next, going on from them, are decided as well.
    ensure!(
        C,
        first_report(C, &*a, at(base, 35)).await?,
        "a fire nobody reported must be reported first"
    );
    let before = report_missed(C, &*b, at(base, 36), at(base, 38)).await?;
    ensure!(
        C,
        before == Some(at(base, 35)),
        "report_missed must answer the fate point before it ({}), answered {before:?}",
        at(base, 35)
    );
    let told = report_drop(C, &*a, at(base, 33)).await?;
    ensure!(
        C,
        told == DropReport::First,
        "a drop of {} reported after fires from {} on were reported missed answered {told:?}, expected First: it lies before them, and nobody else reports it",
        at(base, 33),
        at(base, 36)
    );
    report_missed(C, &*b, at(base, 39), at(base, 40)).await?;
    ensure!(
        C,
        !first_report(C, &*a, at(base, 37)).await?,
        "a fire reported missed must not be reported again, also after more missed fires were recorded after it"
    );
    // Missed fires are recorded from the reporter's first on: a fire between the fate point and
    // it is still open in the process that holds it, which decides it.
    let before = report_missed(C, &*b, at(base, 45), at(base, 46)).await?;
    ensure!(
        C,
        before == Some(at(base, 40)),
        "report_missed must answer the fate point before it ({}), answered {before:?}",
        at(base, 40)
    );
    let told = answer(C, &*a, at(base, 43)).await?;
    ensure!(
        C,
        told == "Acquired",
        "a claim of {}, after the fate point and before the first of the missed fires reported from {} on, answered {told}, expected Acquired: nobody reported it missed",
        at(base, 43),
        at(base, 45)
    );
    ensure!(
        C,
        answer(C, &*b, at(base, 45)).await? == "DroppedByAnother",
        "a fire reported missed must never start"
    );
    if !a.repeats_missed_answers() {
        return Ok(Supported::Yes);
    }
    // A retry whose first try took effect unheard is answered as that try, also after others
    // moved the point.
    let first_try = report_missed(C, &*a, at(base, 50), at(base, 52)).await?;
    report_missed(C, &*b, at(base, 53), at(base, 55)).await?;
    let retry = report_missed(C, &*a, at(base, 50), at(base, 52)).await?;
    ensure!(
        C,
        retry == first_try,
        "`repeats_missed_answers` says a retry is answered as its first try ({first_try:?}), answered {retry:?}"
    );
    let other = report_missed(C, &*b, at(base, 50), at(base, 52)).await?;
    ensure!(
        C,
        other == Some(at(base, 55)),
        "the same report from another guard value must answer the fate point ({}), answered {other:?}",
        at(base, 55)
    );
    Ok(Supported::Yes)
}

/// Missed fires far ahead of the guard's clock come from a host whose clock is ahead: recorded,
/// they would decide fires that have not come yet, so they are refused and nothing moves.
async fn missed_fires_ahead_are_refused<F>(suite: &Suite<F>) -> Outcome<()>
where
    F: Fn(&GuardSpec) -> Arc<dyn Guard>,
{
    const C: &str = "missed_fires_ahead_are_refused";
    let g = suite.process("missed-ahead");
    let soon = now() + TimeDelta::hours(1);
    let refused = g.report_missed(soon, soon).await;
    ensure!(
        C,
        refused.is_err(),
        "fires reported missed an hour ahead of the guard's clock were recorded: {refused:?}"
    );
    let point = fate_point(C, &*g).await?;
    ensure!(
        C,
        point.is_none(),
        "a refused report must move nothing, the fate point is {point:?}"
    );
    Ok(())
}
