//! The errors `cronguard` returns to its user.

use std::fmt;

/// Why the scheduler could not start or run.
///
/// Its `Display` form lists every problem, each saying how to fix it; a caller that wants to act
/// on one kind of problem matches [`Error::Config`] and reads each [`Problem`]'s
/// [`kind`](Problem::kind) and [`job`](Problem::job).
///
/// ```
/// use std::time::Duration;
/// use cronguard::{Error, Job, ProblemKind, Schedule};
///
/// struct Pool;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), cronguard::ScheduleError> {
/// let every_minute = Schedule::every(Duration::from_secs(60))?;
/// let result = cronguard::builder()
///     .registered_jobs(false)
///     .job(Job::new("a", every_minute.clone()).needs_state::<Pool>().run(|_| async {}))
///     .job(Job::new("b", every_minute).max_instances(0).run(|_| async {}))
///     .start()
///     .await;
/// let Err(Error::Config { problems }) = result else {
///     panic!("both jobs have a problem");
/// };
/// let kinds: Vec<_> = problems.iter().map(|p| (p.kind(), p.job())).collect();
/// assert_eq!(
///     kinds,
///     [(ProblemKind::MissingState, Some("a")), (ProblemKind::InvalidJob, Some("b"))]
/// );
/// # Ok(())
/// # }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The settings or the jobs have problems; every one is listed, each saying how to fix it.
    #[error("cronguard cannot start:{}", Bullets(problems))]
    Config {
        /// Every problem found, in the order they were found.
        problems: Vec<Problem>,
    },
    /// Listening for SIGINT/SIGTERM failed.
    #[error("cronguard cannot listen for shutdown signals")]
    Signal(#[source] std::io::Error),
}

/// One problem [`Builder::start`](crate::Builder::start) found: its kind, the job it concerns
/// (if one), and a message that says how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    kind: ProblemKind,
    job: Option<String>,
    message: String,
}

impl Problem {
    pub(crate) fn new(kind: ProblemKind, job: Option<&str>, message: impl Into<String>) -> Self {
        Problem {
            kind,
            job: job.map(str::to_owned),
            message: message.into(),
        }
    }

    /// What is wrong.
    pub fn kind(&self) -> ProblemKind {
        self.kind
    }

    /// The job it concerns, when it concerns one job.
    pub fn job(&self) -> Option<&str> {
        self.job.as_deref()
    }

    /// What is wrong and how to fix it, in words (the same as its `Display`).
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// A problem not otherwise classified.
impl From<String> for Problem {
    fn from(message: String) -> Self {
        Problem::new(ProblemKind::Other, None, message)
    }
}

/// The kinds of [`Problem`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProblemKind {
    /// A job's settings are invalid (a zero `max_instances`, a lease out of range, no body…).
    InvalidJob,
    /// Two jobs have the same name.
    DuplicateName,
    /// A job needs a state type that was never given to [`Builder::state`](crate::Builder::state).
    MissingState,
    /// The lock dir of the `file` guards cannot be created or used, or is not private.
    LockDir,
    /// The state dir of the `local` jobs cannot be created or used, is not private, or another
    /// process uses it.
    StateDir,
    /// A job uses a guard whose store is not configured (no Redis URL).
    MissingUrl,
    /// A guard's store cannot be reached, and
    /// [`Builder::require_guards_at_start`](crate::Builder::require_guards_at_start) asks that it
    /// is.
    Unreachable,
    /// A guard's store answered but refused the connection, or its URL is not valid: a wrong
    /// password, an unknown user, a scheme this build does not support, a TLS certificate that
    /// is not trusted.
    GuardRefused,
    /// A job uses a guard whose cargo feature is off in this build.
    MissingFeature,
    /// A job names a custom guard (`lock = "custom:<name>"`) that was not registered with
    /// [`Builder::custom_guard`](crate::Builder::custom_guard).
    UnknownGuard,
    /// The `postgres` guard's schema holds a table that is not cronguard's (it is never altered).
    ForeignTable,
    /// An override of a job's settings at start (an environment variable
    /// `CRONGUARD_JOB__<JOB>__<KEY>` or the overrides file) names no job or no setting, a setting
    /// that cannot be overridden, or a value the attribute would refuse; or the overrides file
    /// cannot be read. Settings that are valid each on their own but not together (such as
    /// `max_instances` above 1 with a shared guard) are [`ProblemKind::InvalidJob`], naming the
    /// overrides involved.
    InvalidOverride,
    /// Anything else.
    Other,
}

/// An error and its causes, `outer: cause: root cause`, for logs and messages: each error's
/// `Display` leaves its cause to `source()`, so this prints every cause once.
pub(crate) struct Chain<'a>(pub(crate) &'a (dyn std::error::Error + 'static));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(cause) = source {
            write!(f, ": {cause}")?;
            source = cause.source();
        }
        Ok(())
    }
}

struct Bullets<'a>(&'a [Problem]);

impl fmt::Display for Bullets<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for p in self.0 {
            write!(f, "\n  - {p}")?;
        }
        Ok(())
    }
}

/// What a caught panic says: its message, when it has one.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-text payload".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn a_cause_is_in_the_source_only() {
        let e = Error::Signal(std::io::Error::other("no signal handler"));
        assert_eq!(
            e.to_string(),
            "cronguard cannot listen for shutdown signals"
        );
        assert_eq!(
            e.source().map(ToString::to_string).as_deref(),
            Some("no signal handler")
        );
    }

    #[test]
    fn a_chain_names_every_cause_once() {
        let e = crate::guard::GuardError::new(
            crate::guard::GuardErrorKind::Other,
            "cannot use the lock file `/run/cronguard/job.lock`",
        )
        .with_source(std::io::Error::other("permission denied"));
        assert_eq!(
            e.to_string(),
            "cannot use the lock file `/run/cronguard/job.lock`"
        );
        assert_eq!(
            Chain(&e).to_string(),
            "cannot use the lock file `/run/cronguard/job.lock`: permission denied"
        );
        let other = crate::guard::GuardError::other("etcd is down");
        assert_eq!(Chain(&other).to_string(), "the guard failed: etcd is down");
    }

    #[test]
    fn config_lists_each_problem_and_debug_is_structural() {
        let e = Error::Config {
            problems: vec![
                Problem::new(
                    ProblemKind::DuplicateName,
                    Some("a"),
                    "two jobs are named `a`",
                ),
                Problem::from("something else".to_owned()),
            ],
        };
        assert_eq!(
            e.to_string(),
            "cronguard cannot start:\n  - two jobs are named `a`\n  - something else"
        );
        let debug = format!("{e:?}");
        assert!(
            debug.starts_with("Config { problems: [Problem { kind: DuplicateName"),
            "{debug}"
        );
    }
}
