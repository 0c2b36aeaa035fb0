//! A job: its name, schedule, guard, the rules for late and overlapping fires, and its body.
//! Jobs come from `#[scheduled]` functions (gathered through `inventory`) or are built in code.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::context::JobContext;
use crate::error::{Problem, ProblemKind};
use crate::options::{Lock, Overlap};
use crate::registry::{
    BoxFuture, IntoJobOutcome, JobBody, JobOutcome, StaticGuard, StaticJob, StaticSchedule,
};
use crate::state::StateKey;
use cronguard_schedule::Schedule;
use smol_str::SmolStr;

pub use cronguard_schedule::{DEFAULT_LEASE, DEFAULT_MISFIRE_GRACE};

pub use cronguard_schedule::DEFAULT_STANDBY;

/// The longest lead of [`Builder::claim_ahead`](crate::Builder::claim_ahead): 500 ms. The
/// guards take a fire at most 1 s ahead of their clock; the other half is left for the skew of
/// the hosts' clocks.
pub const MAX_CLAIM_AHEAD: Duration = Duration::from_millis(500);

/// A job's code: one pointer in every job (an enum of the two kinds would take 24 bytes, and a
/// million jobs feel it; BENCHMARKS.md).
#[derive(Clone)]
pub(crate) struct Body(Arc<dyn Code>);

/// A job's code, by kind.
enum Call<'a> {
    /// An async body, run as a future.
    Async(&'a (dyn Fn(JobContext) -> BoxFuture<JobOutcome> + Send + Sync)),
    /// A plain function, run on tokio's blocking pool.
    Blocking(&'a (dyn Fn(JobContext) -> JobOutcome + Send + Sync)),
}

trait Code: Send + Sync {
    fn call(&self) -> Call<'_>;
}

struct AsyncCode<F>(F);
struct BlockingCode<F>(F);

impl<F: Fn(JobContext) -> BoxFuture<JobOutcome> + Send + Sync> Code for AsyncCode<F> {
    fn call(&self) -> Call<'_> {
        Call::Async(&self.0)
    }
}

impl<F: Fn(JobContext) -> JobOutcome + Send + Sync> Code for BlockingCode<F> {
    fn call(&self) -> Call<'_> {
        Call::Blocking(&self.0)
    }
}

impl Body {
    pub(crate) fn of_async(
        f: impl Fn(JobContext) -> BoxFuture<JobOutcome> + Send + Sync + 'static,
    ) -> Self {
        Body(Arc::new(AsyncCode(f)))
    }

    pub(crate) fn of_blocking(
        f: impl Fn(JobContext) -> JobOutcome + Send + Sync + 'static,
    ) -> Self {
        Body(Arc::new(BlockingCode(f)))
    }

    /// Runs on tokio's blocking pool, not as a future.
    pub(crate) fn is_blocking(&self) -> bool {
        matches!(self.0.call(), Call::Blocking(_))
    }

    /// An async body's run; a blocking one's is called here, on the caller's thread.
    pub(crate) fn run_async(&self, ctx: JobContext) -> BoxFuture<JobOutcome> {
        match self.0.call() {
            Call::Async(f) => f(ctx),
            Call::Blocking(f) => Box::pin(std::future::ready(f(ctx))),
        }
    }

    /// A blocking body's run, on a thread of the blocking pool; the executor sends no async body
    /// there, and one that came would fail instead of blocking the pool's thread on a future.
    pub(crate) fn run_blocking(&self, ctx: JobContext) -> JobOutcome {
        match self.0.call() {
            Call::Blocking(f) => f(ctx),
            Call::Async(_) => Err("an async body was sent to the blocking pool".into()),
        }
    }
}

/// A job defined in code, with the same settings as the `#[scheduled]` attribute.
///
/// Use it for jobs whose schedule comes from configuration. It is checked by
/// [`Builder::start`](crate::Builder::start) with the same rules the attribute applies at compile
/// time, and every problem is reported at once.
///
/// ```
/// use std::time::Duration;
/// use cronguard::{Job, Lock, Overlap, Schedule};
///
/// # fn main() -> Result<(), cronguard::ScheduleError> {
/// let job = Job::new("reports::nightly", Schedule::cron("0 30 2 * * *", "Europe/Berlin")?)
///     .lock(Lock::File)
///     .overlap(Overlap::Queue)
///     .misfire_grace(Duration::from_secs(600))
///     .run(|ctx| async move {
///         println!("building the report for {}", ctx.fire_time());
///         Ok::<(), std::io::Error>(())
///     });
/// # let _ = job;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Job {
    pub(crate) name: SmolStr,
    pub(crate) schedule: Schedule,
    pub(crate) lock: Lock,
    pub(crate) lease: Option<Duration>,
    pub(crate) max_instances: u32,
    pub(crate) overlap: Overlap,
    pub(crate) coalesce: bool,
    pub(crate) misfire_grace: Duration,
    pub(crate) timeout: Option<Duration>,
    pub(crate) retries: u32,
    pub(crate) backoff: Option<Duration>,
    pub(crate) jitter: Option<Duration>,
    pub(crate) standby: Option<Duration>,
    /// [`Builder::claim_ahead`](crate::Builder::claim_ahead).
    pub(crate) claim_ahead: Duration,
    pub(crate) body: Option<Body>,
    pub(crate) defined_at: Option<String>,
    pub(crate) enabled: bool,
    pub(crate) history: bool,
    /// The state types the body needs, checked by `start()`.
    pub(crate) states: Vec<StateKey>,
    /// The settings that overrides changed at start, and where each came from
    /// (docs/guide/overrides.md).
    pub(crate) overrides: crate::overrides::applied::Applied,
}

impl Job {
    /// A job named `name` firing on `schedule`, with the attribute's defaults: `local` guard,
    /// one instance, `overlap = "skip"`, no coalescing, 60 s misfire grace.
    pub fn new(name: impl Into<String>, schedule: Schedule) -> Self {
        Job {
            name: SmolStr::from(name.into()),
            schedule,
            lock: Lock::Local,
            lease: None,
            max_instances: 1,
            overlap: Overlap::Skip,
            coalesce: false,
            misfire_grace: DEFAULT_MISFIRE_GRACE,
            timeout: None,
            retries: 0,
            backoff: None,
            jitter: None,
            standby: None,
            claim_ahead: Duration::ZERO,
            body: None,
            defined_at: None,
            enabled: true,
            history: false,
            states: Vec::new(),
            overrides: None,
        }
    }

    /// The guard (`lock = "..."`).
    pub fn lock(mut self, lock: Lock) -> Self {
        self.lock = lock;
        self
    }

    /// Whether the guard keeps this job's run history (`history`): needs a guard that stores it,
    /// such as `lock = "postgres"`. See also [`Builder::history`](crate::Builder::history).
    pub fn history(mut self, history: bool) -> Self {
        self.history = history;
        self
    }

    /// The lease of a `redis`, `postgres` or custom guard (`lease = "..."`), from
    /// [`MIN_LEASE`](cronguard_schedule::MIN_LEASE) (100 ms) to
    /// [`MAX_LEASE`](cronguard_schedule::MAX_LEASE) (24 h).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease);
        self
    }

    /// Runs allowed at once (`max_instances = N`, `local` only).
    pub fn max_instances(mut self, n: u32) -> Self {
        self.max_instances = n;
        self
    }

    /// What a fire does when no slot is free (`overlap = "..."`).
    pub fn overlap(mut self, overlap: Overlap) -> Self {
        self.overlap = overlap;
        self
    }

    /// Of several waiting fires run only the latest (`coalesce`).
    pub fn coalesce(mut self, coalesce: bool) -> Self {
        self.coalesce = coalesce;
        self
    }

    /// How late a fire may still start (`misfire_grace = "..."`).
    pub fn misfire_grace(mut self, grace: Duration) -> Self {
        self.misfire_grace = grace;
        self
    }

    /// Cancels each run (each attempt, with [`retries`](Job::retries)) after `timeout` and
    /// reports it as failed with [`FailureReason::Timeout`](crate::FailureReason::Timeout)
    /// (`timeout = "..."`, from 1 ms to [`MAX_TIMEOUT`](cronguard_schedule::MAX_TIMEOUT), 7 days).
    /// An async body is dropped at the `.await` it waits in; a blocking body sees
    /// [`JobContext::is_cancelled`] and keeps its slot until it returns.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Tries a failed run (an error, a panic or a timeout) again up to `retries` times under the
    /// same fire, lease and fencing token, while the next attempt can still start before the
    /// fire's misfire deadline and before the job's next fire (`retries = N`, at most
    /// [`MAX_RETRIES`](cronguard_schedule::MAX_RETRIES), 100).
    pub fn retries(mut self, retries: u32) -> Self {
        self.retries = retries;
        self
    }

    /// The pause before the first retry (`backoff = "..."`, default
    /// [`DEFAULT_BACKOFF`](cronguard_schedule::DEFAULT_BACKOFF), 1 s); it doubles for every
    /// further retry and is capped at [`MAX_BACKOFF`](cronguard_schedule::MAX_BACKOFF) (1 h).
    /// Needs [`retries`](Job::retries).
    pub fn backoff(mut self, backoff: Duration) -> Self {
        self.backoff = Some(backoff);
        self
    }

    /// Delays each fire's start by an amount in `[0, jitter)` that every replica derives alike
    /// from the job's name and the fire time (`jitter = "..."`, from 1 ms to
    /// [`MAX_JITTER`](cronguard_schedule::MAX_JITTER), 24 h). The fire keeps its time `T` as its
    /// identity; its misfire grace counts from the delayed start.
    pub fn jitter(mut self, jitter: Duration) -> Self {
        self.jitter = Some(jitter);
        self
    }

    /// How long a process that did not get the job's last fire waits past each fire's start
    /// before it claims the fire (default [`DEFAULT_STANDBY`], 1 s; see
    /// [`Builder::standby`](crate::Builder::standby) for every job at once). The process that got
    /// the last fire claims at once, so in a steady cluster each fire costs the guard one claim
    /// at its instant, and a fire the others miss (that process died) starts the standby late.
    /// Zero: every process claims every fire at once; at most
    /// [`MAX_STANDBY`](cronguard_schedule::MAX_STANDBY), 1 h (`standby = "..."`). Only shared
    /// guards claim; at most half the misfire grace and half the time between two fires is waited
    /// (docs/design/standby.md).
    pub fn standby(mut self, standby: Duration) -> Self {
        self.standby = Some(standby);
        self
    }

    /// Whether this process fires the job (default `true`). A disabled job runs nothing here but
    /// still follows its schedule for [`Monitor::health`](crate::Monitor::health): a process
    /// can watch that *some* replica runs a job without running it itself.
    pub fn enabled(mut self, enabled: bool) -> Self {
        self.enabled = enabled;
        self
    }

    /// Declares that the body reads the state value of type `T`
    /// ([`JobContext::state`]), so that [`Builder::start`](crate::Builder::start) fails, naming
    /// this job and `T`, when no such value was given to
    /// [`Builder::state`](crate::Builder::state).
    ///
    /// ```
    /// use std::time::Duration;
    /// use cronguard::{Job, Schedule};
    ///
    /// struct Mailer;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let job = Job::new("mail::digest", Schedule::every(Duration::from_secs(3600))?)
    ///     .needs_state::<Mailer>()
    ///     .run(|ctx| async move {
    ///         let _mailer = ctx.state::<Mailer>()?;
    ///         Ok::<(), cronguard::MissingState>(())
    ///     });
    /// let started = cronguard::builder().registered_jobs(false).job(job).start().await;
    /// let Err(error) = started else { panic!("no `Mailer` was given") };
    /// assert!(error.to_string().contains("job `mail::digest` needs state of type"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn needs_state<T: Send + Sync + 'static>(mut self) -> Self {
        let key = StateKey::of::<T>();
        if !self.states.contains(&key) {
            self.states.push(key);
        }
        self
    }

    /// The body: an async function of the run's [`JobContext`], returning `()` or
    /// `Result<(), E: Display>`.
    pub fn run<F, Fut, R>(mut self, f: F) -> Self
    where
        F: Fn(JobContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = R> + Send + 'static,
        R: IntoJobOutcome,
    {
        self.body = Some(Body::of_async(move |ctx| {
            let fut = f(ctx);
            Box::pin(async move { fut.await.into_job_outcome() })
        }));
        self
    }

    /// The body as a plain (blocking) function, run on tokio's blocking pool so it never stalls
    /// the scheduler. It sees cancellation through [`JobContext::is_cancelled`].
    pub fn run_blocking<F, R>(mut self, f: F) -> Self
    where
        F: Fn(JobContext) -> R + Send + Sync + 'static,
        R: IntoJobOutcome,
    {
        self.body = Some(Body::of_blocking(move |ctx| f(ctx).into_job_outcome()));
        self
    }

    /// The job's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The job's schedule.
    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    /// How long after its fire time a fire must have started: the misfire grace plus the whole
    /// jitter, as the job model's `due_grace` (announced in the roster for the health check of
    /// the command-line tool).
    pub(crate) fn due_grace(&self) -> Duration {
        self.misfire_grace + self.jitter.unwrap_or_default()
    }

    /// The lease to use (the default when unset).
    #[allow(dead_code)] // read by the redis guard
    pub(crate) fn lease_or_default(&self) -> Duration {
        self.lease.unwrap_or(DEFAULT_LEASE)
    }

    /// The pause before the first retry.
    /// The standby, or its default.
    pub(crate) fn standby_or_default(&self) -> Duration {
        self.standby.unwrap_or(DEFAULT_STANDBY)
    }

    pub(crate) fn backoff_or_default(&self) -> Duration {
        self.backoff.unwrap_or(cronguard_schedule::DEFAULT_BACKOFF)
    }

    /// Every problem with this job, in words that say how to fix it.
    pub(crate) fn problems(&self) -> Vec<Problem> {
        let mut problems = self.setting_problems();
        if let Some(overrides) = &self.overrides {
            // Each with the overrides it names: the job's own settings passed these checks.
            problems = problems
                .into_iter()
                .map(|p| crate::overrides::applied::annotate(p, &self.name, overrides))
                .collect();
        }
        if self.body.is_none() {
            problems.push(format!(
                "job `{}` has no body; call `.run(...)` or `.run_blocking(...)`",
                self.name
            ));
        }
        problems
            .into_iter()
            .map(|p| Problem::new(ProblemKind::InvalidJob, Some(&self.name), p))
            .collect()
    }

    /// Every problem with this job's settings (not its body): the rules the `#[scheduled]`
    /// attribute applies at compile time, for jobs built in code or from configuration.
    pub(crate) fn setting_problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let name = &self.name;
        if let Err(e) = cronguard_schedule::validate_job_name(name) {
            problems.push(e);
        }
        if self.max_instances == 0 {
            problems.push(format!(
                "job `{name}`: `max_instances` is 0; it must be at least 1"
            ));
        }
        if self.max_instances > 1 && self.lock != Lock::Local {
            problems.push(format!(
                "job `{name}`: `max_instances = {}` needs `lock = \"local\"`; the `{}` guard runs one instance at a time",
                self.max_instances, self.lock
            ));
        }
        if self.lease.is_some() && !self.lock.has_lease() {
            problems.push(format!(
                "job `{name}`: `lease` applies only to guards with leases (`lock = \"redis\"`, `\"postgres\"` or a custom guard), not to `lock = \"{}\"`",
                self.lock
            ));
        }
        if self.history && !matches!(self.lock, Lock::Postgres | Lock::Custom(_)) {
            problems.push(format!(
                "job `{name}`: `history` needs a guard that keeps run history (`lock = \"postgres\"` or a custom guard), not `lock = \"{}\"`",
                self.lock
            ));
        }
        if let Some(lease) = self.lease {
            if let Err(range) = cronguard_schedule::check_lease(lease) {
                problems.push(format!("job `{name}`: the lease of {lease:?} {range}"));
            }
        }
        if self.misfire_grace.is_zero() {
            problems.push(format!(
                "job `{name}`: `misfire_grace` is zero; give a positive grace such as 60 s"
            ));
        }
        self.limit_problems(&mut problems);
        problems
    }

    /// The problems of `timeout`, `retries`, `backoff` and `jitter`.
    fn limit_problems(&self, problems: &mut Vec<String>) {
        let name = &self.name;
        if let Err(range) = cronguard_schedule::check_retries(self.retries) {
            problems.push(format!(
                "job `{name}`: `retries = {}` {range}",
                self.retries
            ));
        }
        if self.backoff.is_some() && self.retries == 0 {
            problems.push(format!(
                "job `{name}`: `backoff` is the pause between retries, but the job has no `retries`; add `retries = N` or remove `backoff`"
            ));
        }
        let durations = [
            (
                "timeout",
                self.timeout,
                cronguard_schedule::check_timeout as fn(Duration) -> _,
            ),
            ("backoff", self.backoff, cronguard_schedule::check_backoff),
            ("jitter", self.jitter, cronguard_schedule::check_jitter),
            ("standby", self.standby, cronguard_schedule::check_standby),
        ];
        for (key, value, check) in durations {
            if let Some(Err(range)) = value.map(check) {
                problems.push(format!(
                    "job `{name}`: `{key}` of {value:?} {range}",
                    value = value.unwrap_or_default()
                ));
            }
        }
        if let Some(jitter) = self
            .jitter
            .filter(|j| cronguard_schedule::check_jitter(*j).is_ok())
        {
            if let Err(gap) = cronguard_schedule::check_jitter_for(jitter, &self.schedule) {
                problems.push(format!("job `{name}`: `jitter` of {jitter:?} {gap}"));
            }
        }
    }

    /// Converts a `#[scheduled]` registration. Its settings were validated at compile time by the
    /// same code, so only a broken build could make the schedule fail here.
    pub(crate) fn from_static(s: &'static StaticJob) -> Result<Job, String> {
        let schedule = match s.schedule {
            StaticSchedule::Cron { expr, tz } => Schedule::cron(expr, tz),
            StaticSchedule::Every { millis } => Schedule::every(Duration::from_millis(millis)),
        }
        .map_err(|e| format!("job `{}` ({}:{}): {e}", s.name, s.file, s.line))?;
        let lock = match s.guard {
            StaticGuard::Local => Lock::Local,
            StaticGuard::File => Lock::File,
            StaticGuard::Redis => Lock::Redis,
            StaticGuard::Postgres => Lock::Postgres,
            StaticGuard::Custom(name) => Lock::custom(name),
        };
        let body = match s.body {
            JobBody::Async(f) => Body::of_async(f),
            JobBody::Blocking(f) => Body::of_blocking(f),
        };
        let leased = lock.has_lease();
        let mut job = Job::new(s.name, schedule)
            .lock(lock)
            .history(s.history)
            .max_instances(s.max_instances)
            .overlap(s.overlap)
            .coalesce(s.coalesce)
            .misfire_grace(Duration::from_millis(s.misfire_grace_millis))
            .retries(s.retries);
        if leased {
            job = job.lease(Duration::from_millis(s.lease_millis));
        }
        // Zero milliseconds: not given (the macro rejects a zero duration).
        let given = |millis: u64| (millis > 0).then(|| Duration::from_millis(millis));
        job.timeout = given(s.timeout_millis);
        job.backoff = given(s.backoff_millis);
        job.jitter = given(s.jitter_millis);
        job.standby = s.standby_millis.map(Duration::from_millis);
        job.body = Some(body);
        for key in s.states.iter().filter_map(|required| required()) {
            if !job.states.contains(&key) {
                job.states.push(key);
            }
        }
        job.defined_at = Some(format!("{}:{}", s.file, s.line));
        Ok(job)
    }
}

/// What the builder sets for every job, at start and for jobs added later.
#[derive(Debug, Clone, Copy)]
pub(crate) struct JobDefaults {
    /// [`Builder::history`](crate::Builder::history).
    pub(crate) history: bool,
    /// [`Builder::standby`](crate::Builder::standby).
    pub(crate) standby: Option<Duration>,
    /// [`Builder::claim_ahead`](crate::Builder::claim_ahead).
    pub(crate) claim_ahead: Duration,
}

impl JobDefaults {
    /// Gives `job` what the builder sets for every job, where the job did not set its own.
    pub(crate) fn apply(&self, job: &mut Job) {
        if self.history && matches!(job.lock, Lock::Postgres | Lock::Custom(_)) {
            job.history = true;
        }
        if job.standby.is_none() {
            job.standby = self.standby;
        }
        job.claim_ahead = self.claim_ahead;
    }
}

impl fmt::Debug for Job {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Job")
            .field("name", &self.name)
            .field("schedule", &self.schedule)
            .field("lock", &self.lock)
            .field("lease", &self.lease)
            .field("history", &self.history)
            .field("max_instances", &self.max_instances)
            .field("overlap", &self.overlap)
            .field("coalesce", &self.coalesce)
            .field("misfire_grace", &self.misfire_grace)
            .field("timeout", &self.timeout)
            .field("retries", &self.retries)
            .field("backoff", &self.backoff)
            .field("jitter", &self.jitter)
            .field("standby", &self.standby)
            .field("claim_ahead", &self.claim_ahead)
            .field("states", &self.states)
            .field("overrides", &self.overrides)
            .finish_non_exhaustive()
    }
}

/// Every job registered with `#[scheduled]` in this binary, sorted by name.
pub(crate) fn registered() -> Vec<&'static StaticJob> {
    let mut jobs: Vec<&'static StaticJob> = inventory::iter::<StaticJob>.into_iter().collect();
    jobs.sort_by(|a, b| {
        a.name
            .cmp(b.name)
            .then(a.file.cmp(b.file))
            .then(a.line.cmp(&b.line))
    });
    jobs
}

/// The names of `jobs` for a message: `` `a`, `b` ``.
pub(crate) fn quoted_names(jobs: &[&Job]) -> String {
    jobs.iter()
        .map(|j| format!("`{}`", j.name()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The job a problem concerns when it concerns exactly one of `jobs`.
pub(crate) fn one_of<'a>(jobs: &[&'a Job]) -> Option<&'a str> {
    match jobs {
        [job] => Some(job.name()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redis_job(lease: Duration) -> Job {
        Job::new(
            "leased",
            Schedule::every(Duration::from_secs(1)).expect("valid"),
        )
        .lock(Lock::Redis)
        .lease(lease)
        .run(|_| async {})
    }

    #[test]
    fn leases_outside_the_shared_limits_are_rejected_with_the_range() {
        for lease in [
            Duration::from_millis(1),
            Duration::from_millis(99),
            Duration::from_secs(24 * 3600) + Duration::from_millis(1),
            Duration::from_secs(u64::MAX),
        ] {
            let problems: Vec<String> = redis_job(lease)
                .problems()
                .iter()
                .map(ToString::to_string)
                .collect();
            assert_eq!(problems.len(), 1, "{lease:?}: {problems:?}");
            assert!(
                problems[0].starts_with("job `leased`: the lease of ")
                    && problems[0].contains("from 100ms to 24h"),
                "{lease:?}: {problems:?}"
            );
        }
        for lease in [
            cronguard_schedule::MIN_LEASE,
            DEFAULT_LEASE,
            cronguard_schedule::MAX_LEASE,
        ] {
            assert_eq!(
                redis_job(lease).problems(),
                Vec::<Problem>::new(),
                "{lease:?}"
            );
        }
    }
}
