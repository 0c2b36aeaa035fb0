//! What a running job knows about its run.

use smol_str::SmolStr;
use std::sync::Arc;

use crate::cancel::RunCancel;
use crate::state::{MissingState, State, StateKey, States};
use chrono::{DateTime, Utc};

/// What a running job knows about its run: which fire it is, its fencing token, the
/// application's state, and whether it should stop.
///
/// The scheduler makes one for every run. Tests make their own with [`JobContext::builder`].
#[derive(Debug, Clone)]
pub struct JobContext {
    pub(crate) job: SmolStr,
    pub(crate) fire_time: DateTime<Utc>,
    pub(crate) fencing_token: u64,
    pub(crate) manual: Option<u64>,
    pub(crate) attempt: u32,
    pub(crate) cancel: RunCancel,
    pub(crate) states: Arc<States>,
}

impl JobContext {
    /// A context for calling a job function directly, in a test: fire time, fencing token,
    /// state values and a cancel handle are set on the [`JobContextBuilder`].
    ///
    /// ```
    /// use chrono::{TimeZone, Utc};
    /// use cronguard::{scheduled, JobContext, State};
    /// use std::sync::Mutex;
    ///
    /// /// Where the job writes; in the service, a database pool.
    /// #[derive(Default)]
    /// struct Ledger {
    ///     rows: Mutex<Vec<(String, u64)>>,
    /// }
    ///
    /// #[scheduled(cron = "0 0 2 * * *")]
    /// async fn settle(ctx: JobContext, ledger: State<Ledger>) -> anyhow::Result<()> {
    ///     if ctx.is_cancelled() {
    ///         return Ok(());
    ///     }
    ///     let mut rows = ledger.rows.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
    ///     rows.push((ctx.run_key(), ctx.fencing_token()));
    ///     Ok(())
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// let ledger = State::new(Ledger::default());
    /// let builder = JobContext::builder("settle")
    ///     .fire_time(Utc.with_ymd_and_hms(2026, 1, 2, 2, 0, 0).unwrap())
    ///     .fencing_token(42);
    /// let cancel = builder.cancel_handle();
    /// let ctx = builder.build();
    ///
    /// settle(ctx.clone(), ledger.clone()).await?;
    /// assert_eq!(
    ///     *ledger.rows.lock().unwrap(),
    ///     [("settle@2026-01-02T02:00:00.000Z".to_owned(), 42)]
    /// );
    ///
    /// cancel.cancel(); // as `overlap = "replace"`, a lost lease or shutdown would
    /// settle(ctx, ledger.clone()).await?;
    /// assert_eq!(ledger.rows.lock().unwrap().len(), 1, "a cancelled run writes nothing");
    /// # Ok(())
    /// # }
    /// ```
    pub fn builder(job_name: impl Into<String>) -> JobContextBuilder {
        JobContextBuilder {
            job: SmolStr::from(job_name.into()),
            fire_time: DateTime::<Utc>::UNIX_EPOCH,
            fencing_token: 1,
            attempt: 1,
            cancel: RunCancel::default(),
            states: States::default(),
        }
    }

    /// The job's name.
    pub fn job_name(&self) -> &str {
        &self.job
    }

    /// The scheduled fire instant `T` this run belongs to (not the time the timer woke).
    pub fn fire_time(&self) -> DateTime<Utc> {
        self.fire_time
    }

    /// A token that strictly increases with every claimed run of this job.
    pub fn fencing_token(&self) -> u64 {
        self.fencing_token
    }

    /// Which attempt of the fire this is: 1 for the first, one more for every retry (`retries`).
    /// Every attempt has the same fire time, run key and fencing token.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// `job@T`, a natural unique key for idempotent writes; `job@manual:<id>` for a run asked
    /// for with [`Monitor::trigger`](crate::Monitor::trigger) ("run now"), which never
    /// equals a scheduled fire's key.
    pub fn run_key(&self) -> String {
        crate::fire::run_key(&self.job, self.fire_time, self.manual)
    }

    /// Whether this run was asked for with [`Monitor::trigger`](crate::Monitor::trigger)
    /// ("run now") rather than by the schedule; then [`fire_time`](JobContext::fire_time) is
    /// when it was asked for.
    pub fn is_manual(&self) -> bool {
        self.manual.is_some()
    }

    /// The application's state value of type `T`, given to
    /// [`Builder::state`](crate::Builder::state).
    ///
    /// A job built in code declares the types it reads with
    /// [`Job::needs_state`](crate::Job::needs_state), so that `start()` refuses to run without
    /// them; a `#[scheduled]` function takes a [`State<T>`] argument instead.
    ///
    /// # Errors
    ///
    /// [`MissingState`] when no value of type `T` was given.
    pub fn state<T: Send + Sync + 'static>(&self) -> Result<State<T>, MissingState> {
        self.states.get::<T>()
    }

    /// Resolves when the run is cancelled.
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await
    }

    /// Whether the run is cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }
}

/// Builds a [`JobContext`] for a test (see [`JobContext::builder`]). Defaults: fire time the
/// Unix epoch, fencing token 1, no state, not cancelled.
#[derive(Debug)]
#[must_use]
pub struct JobContextBuilder {
    job: SmolStr,
    fire_time: DateTime<Utc>,
    fencing_token: u64,
    attempt: u32,
    cancel: RunCancel,
    states: States,
}

impl JobContextBuilder {
    /// The fire instant `T` of the run.
    pub fn fire_time(mut self, fire_time: DateTime<Utc>) -> Self {
        self.fire_time = fire_time;
        self
    }

    /// The run's fencing token.
    pub fn fencing_token(mut self, token: u64) -> Self {
        self.fencing_token = token;
        self
    }

    /// Which attempt of the fire the run is (default 1; see [`JobContext::attempt`]).
    pub fn attempt(mut self, attempt: u32) -> Self {
        self.attempt = attempt;
        self
    }

    /// A state value, as [`Builder::state`](crate::Builder::state) gives it to the scheduler's
    /// runs (one per type; a second value of one type replaces the first).
    pub fn state<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.states.insert(value);
        self
    }

    /// A handle that cancels the run, as the scheduler does on `overlap = "replace"`, a lost
    /// lease or shutdown.
    pub fn cancel_handle(&self) -> CancelHandle {
        CancelHandle(self.cancel.clone())
    }

    /// The context.
    pub fn build(self) -> JobContext {
        JobContext {
            job: self.job,
            fire_time: self.fire_time,
            fencing_token: self.fencing_token,
            manual: None,
            attempt: self.attempt,
            cancel: self.cancel,
            states: Arc::new(self.states),
        }
    }
}

/// Cancels the run of a [`JobContext`] made by [`JobContext::builder`].
#[derive(Debug, Clone)]
pub struct CancelHandle(RunCancel);

impl CancelHandle {
    /// Cancels the run: [`JobContext::cancelled`] resolves and
    /// [`JobContext::is_cancelled`] turns `true`.
    pub fn cancel(&self) {
        self.0.cancel();
    }
}

/// What a `#[scheduled]` function's argument is made from: the run's context or a state value.
/// Implemented for [`JobContext`] and [`State<T>`].
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an argument that a `#[scheduled]` job can take",
    label = "take a `JobContext` or a `State<T>`"
)]
pub trait FromContext: Sized {
    /// The state type this argument needs, checked by `start()`.
    fn required() -> Option<StateKey>;

    /// The argument for one run.
    fn from_context(ctx: &JobContext) -> Result<Self, MissingState>;
}

impl FromContext for JobContext {
    fn required() -> Option<StateKey> {
        None
    }

    fn from_context(ctx: &JobContext) -> Result<Self, MissingState> {
        Ok(ctx.clone())
    }
}

impl<T: Send + Sync + 'static> FromContext for State<T> {
    fn required() -> Option<StateKey> {
        Some(StateKey::of::<T>())
    }

    fn from_context(ctx: &JobContext) -> Result<Self, MissingState> {
        ctx.state::<T>()
    }
}
