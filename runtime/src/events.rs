//! Every run and every dropped fire is an [`Event`]: logged through `tracing`, kept in the status,
//! and handed to the hooks a user adds.

use smol_str::SmolStr;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

/// One thing that happened to one fire of one job.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Event {
    /// The job's name.
    pub job: Arc<str>,
    /// The fire instant `T` the event is about.
    pub fire_time: DateTime<Utc>,
    /// `job@T`, the fire's identity in every process; `job@manual:<id>` for a run asked for
    /// with [`Monitor::trigger`](crate::Monitor::trigger).
    pub run_key: Arc<str>,
    /// For a run asked for with [`Monitor::trigger`](crate::Monitor::trigger) ("run now"):
    /// its id (then [`fire_time`](Event::fire_time) is when it was asked for).
    pub manual: Option<u64>,
    /// The fencing token of the run, for events of a claimed run.
    pub fencing_token: Option<u64>,
    /// The process that observed it (`CRONGUARD_INSTANCE`, default `hostname:pid`).
    pub instance: Arc<str>,
    /// When it was observed (the scheduler's clock).
    pub at: DateTime<Utc>,
    /// `false` when another process has already reported this same dropped fire (a skip or a
    /// misfire seen by several processes sharing a guard): such events are logged at debug
    /// level, not warn, so a drop is reported at warn level once.
    pub first_report: bool,
    /// For a run (`started` and its end): its start minus its fire time.
    pub lateness: Option<Duration>,
    /// For the end of a run (`succeeded`, `failed`, `cancelled`): how long it ran (this attempt,
    /// when the job has `retries`).
    pub duration: Option<Duration>,
    /// For the events of a run: which attempt of the fire they are about, 1 for the first and one
    /// more for every retry (`retries`). `None` for a dropped fire.
    pub attempt: Option<u32>,
    /// What happened.
    pub kind: EventKind,
}

/// What happened to a fire.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(tag = "kind", rename_all = "snake_case")
)]
#[non_exhaustive]
pub enum EventKind {
    /// The run started ([`Event::lateness`] after its fire time).
    Started,
    /// The run returned `Ok` or `()`.
    Succeeded,
    /// The run returned `Err`, panicked, or passed its `timeout`.
    Failed {
        /// The error's text with its chain of causes (`{:#}`, which anyhow and eyre print as
        /// `outer: cause: root cause`), the panic message, or what the timeout was.
        error: String,
        /// Whether it returned an error, panicked or timed out.
        reason: FailureReason,
        /// When the next attempt of the same fire starts (`retries`); `None` when this failure
        /// is the run's end.
        retry_at: Option<DateTime<Utc>>,
    },
    /// The run was cancelled before it finished.
    Cancelled {
        /// Why.
        reason: CancelReason,
    },
    /// The fire was dropped because no instance slot was free (`overlap = "skip"`).
    Skipped {
        /// Why no slot was free, or who paused the job.
        reason: String,
        /// The job is paused (docs/guide/controls.md): the fire was skipped
        /// on purpose, so it is logged at info level, not warn.
        paused: bool,
    },
    /// The fire could not start within its misfire grace. After a pause, every fire that was
    /// missed is reported in one event: [`Event::fire_time`] is the last of them.
    Misfired {
        /// Why it could not start.
        reason: String,
        /// How many fires this event reports (1 unless the process was paused or its clock
        /// jumped past several fires).
        count: u32,
        /// The first fire it reports (the event's fire time when `count` is 1).
        first: DateTime<Utc>,
    },
    /// The fire was dropped because a later fire was waiting too (`coalesce`).
    Coalesced {
        /// The fire that covers it.
        covered_by: DateTime<Utc>,
    },
    /// Another process claimed this fire (or a later one) first.
    ClaimedElsewhere,
    /// The run lost its lease; it is cancelled (a `cancelled` event follows when it stops).
    LeaseLost {
        /// Why the lease was lost.
        reason: String,
    },
}

/// Why a run failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(rename_all = "snake_case")
)]
#[non_exhaustive]
pub enum FailureReason {
    /// The body returned an error.
    Error,
    /// The body panicked.
    Panic,
    /// The run did not finish within its `timeout` and was cancelled there.
    Timeout,
}

impl fmt::Display for FailureReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FailureReason::Error => "error",
            FailureReason::Panic => "panic",
            FailureReason::Timeout => "timeout",
        })
    }
}

/// Why a run was cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(rename_all = "snake_case")
)]
#[non_exhaustive]
pub enum CancelReason {
    /// A newer fire replaced it (`overlap = "replace"`).
    Replaced,
    /// The scheduler shut down and the run did not finish within the shutdown deadline.
    Shutdown,
    /// The run lost its lease.
    LeaseLost,
}

impl fmt::Display for CancelReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CancelReason::Replaced => "replaced by a newer fire",
            CancelReason::Shutdown => "shutdown deadline passed",
            CancelReason::LeaseLost => "lease lost",
        })
    }
}

impl EventKind {
    /// This kind with `note` added to the reason of a skip or a misfire, unless the reason says
    /// it already (a drop told on the process's own word says why).
    pub(crate) fn with_reason_note(self, note: &str) -> EventKind {
        match self {
            EventKind::Misfired {
                reason,
                count,
                first,
            } if !reason.contains(note) => EventKind::Misfired {
                reason: format!("{reason}; {note}"),
                count,
                first,
            },
            EventKind::Skipped { reason, paused } if !reason.contains(note) => EventKind::Skipped {
                reason: format!("{reason}; {note}"),
                paused,
            },
            kind => kind,
        }
    }

    /// A fire skipped because no slot was free (not a pause).
    pub(crate) fn skipped(reason: String) -> Self {
        EventKind::Skipped {
            reason,
            paused: false,
        }
    }

    /// One misfired fire.
    pub(crate) fn misfired(reason: String, fire: DateTime<Utc>) -> Self {
        EventKind::Misfired {
            reason,
            count: 1,
            first: fire,
        }
    }

    /// The event's name as used in logs and metrics: `started`, `succeeded`, `failed`, `cancelled`,
    /// `skipped`, `misfired`, `coalesced`, `claimed_elsewhere` or `lease_lost`.
    pub fn name(&self) -> &'static str {
        match self {
            EventKind::Started => "started",
            EventKind::Succeeded => "succeeded",
            EventKind::Failed { .. } => "failed",
            EventKind::Cancelled { .. } => "cancelled",
            EventKind::Skipped { .. } => "skipped",
            EventKind::Misfired { .. } => "misfired",
            EventKind::Coalesced { .. } => "coalesced",
            EventKind::ClaimedElsewhere => "claimed_elsewhere",
            EventKind::LeaseLost { .. } => "lease_lost",
        }
    }
}

/// An event before it is given its job and instance: what the scheduler keeps in a job's status
/// and turns into an [`Event`] only when something consumes events.
#[derive(Debug, Clone)]
pub(crate) struct Occurrence {
    pub(crate) fire_time: DateTime<Utc>,
    pub(crate) fencing_token: Option<u64>,
    pub(crate) at: DateTime<Utc>,
    pub(crate) first_report: bool,
    pub(crate) lateness: Option<Duration>,
    pub(crate) duration: Option<Duration>,
    pub(crate) attempt: Option<u32>,
    pub(crate) kind: EventKind,
    /// The id of a manual run ([`Event::manual`]).
    pub(crate) manual: Option<u64>,
}

impl Occurrence {
    /// A dropped fire (no run, no token).
    pub(crate) fn drop(
        fire_time: DateTime<Utc>,
        at: DateTime<Utc>,
        kind: EventKind,
        first_report: bool,
    ) -> Self {
        Occurrence {
            fire_time,
            fencing_token: None,
            at,
            first_report,
            lateness: None,
            duration: None,
            attempt: None,
            kind,
            manual: None,
        }
    }

    /// The same occurrence, of manual run `manual` (`None`: of a scheduled fire).
    pub(crate) fn of_manual(mut self, manual: Option<u64>) -> Self {
        self.manual = manual;
        self
    }

    pub(crate) fn to_event(&self, job: &SmolStr, instance: &Arc<str>) -> Event {
        Event {
            job: Arc::from(job.clone()),
            fire_time: self.fire_time,
            run_key: crate::fire::shared_run_key(job, self.fire_time, self.manual),
            manual: self.manual,
            fencing_token: self.fencing_token,
            instance: Arc::clone(instance),
            at: self.at,
            first_report: self.first_report,
            lateness: self.lateness,
            duration: self.duration,
            attempt: self.attempt,
            kind: self.kind.clone(),
        }
    }
}

/// A user's event hook.
pub(crate) type Hook = Arc<dyn Fn(&Event) + Send + Sync>;

enum ToHooks {
    /// The events a shard emitted in one step, in order.
    Events(Vec<Event>),
    /// Answered once every event sent before it has been handed to the hooks.
    Flush(std::sync::mpsc::Sender<()>),
}

/// Where the scheduler sends events: logged at once, handed to hooks on a thread of their own so
/// that a slow, blocking or panicking hook never delays a timer or a job.
#[derive(Clone)]
pub(crate) struct EventSink {
    hooks: Option<std::sync::mpsc::SyncSender<ToHooks>>,
    /// Events handed to the hooks and not yet through them: at most [`HOOK_QUEUE_CAPACITY`].
    hooks_queued: Arc<std::sync::atomic::AtomicUsize>,
    /// Events the hooks missed because their queue was full.
    hooks_missed: Arc<std::sync::atomic::AtomicU64>,
    stream: tokio::sync::broadcast::Sender<Event>,
    /// Set by the first `subscribe()`.
    subscribed: Arc<std::sync::atomic::AtomicBool>,
}

/// How many events may wait for the event hooks ([`Builder::on_event`](crate::Builder::on_event))
/// before a hook that cannot keep up misses events (a warning says so); the scheduler never waits
/// for a hook.
pub const HOOK_QUEUE_CAPACITY: usize = 16_384;

/// How many events a slow [`Monitor::subscribe`](crate::Monitor::subscribe) receiver may fall
/// behind before it misses some (it is told how many, by `RecvError::Lagged`).
pub const EVENT_STREAM_CAPACITY: usize = 4096;

impl EventSink {
    pub(crate) fn new(hooks: Vec<Hook>) -> Self {
        let (stream, _) = tokio::sync::broadcast::channel(EVENT_STREAM_CAPACITY);
        if hooks.is_empty() {
            return EventSink {
                hooks: None,
                hooks_queued: Arc::default(),
                hooks_missed: Arc::default(),
                stream,
                subscribed: Arc::default(),
            };
        }
        let (tx, rx) = std::sync::mpsc::sync_channel::<ToHooks>(HOOK_QUEUE_CAPACITY);
        let hooks_queued: Arc<std::sync::atomic::AtomicUsize> = Arc::default();
        let queued = Arc::clone(&hooks_queued);
        let spawned = std::thread::Builder::new()
            .name("cronguard-hooks".to_owned())
            .spawn(move || {
                // Ends when the last sender (the scheduler) is gone.
                for message in rx {
                    match message {
                        ToHooks::Events(events) => {
                            for event in &events {
                                call_hooks(&hooks, event);
                                queued.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
                            }
                        }
                        ToHooks::Flush(done) => {
                            let _ = done.send(());
                        }
                    }
                }
            });
        match spawned {
            Ok(_) => EventSink {
                hooks: Some(tx),
                hooks_queued,
                hooks_missed: Arc::default(),
                stream,
                subscribed: Arc::default(),
            },
            Err(e) => {
                tracing::error!(error = %e, "cannot start the event hook thread; event hooks will not be called");
                EventSink {
                    hooks: None,
                    hooks_queued: Arc::default(),
                    hooks_missed: Arc::default(),
                    stream,
                    subscribed: Arc::default(),
                }
            }
        }
    }

    pub(crate) fn subscribe(&self) -> tokio::sync::broadcast::Receiver<Event> {
        let receiver = self.stream.subscribe();
        self.subscribed
            .store(true, std::sync::atomic::Ordering::Relaxed);
        receiver
    }

    /// Whether an event of this kind reaches anyone: a hook, a subscriber, or a log subscriber at
    /// its level. Events nobody consumes are never built (a run key is formatted text).
    pub(crate) fn wants(&self, kind: &EventKind, first_report: bool) -> bool {
        self.hooks.is_some()
            || self.subscribed.load(std::sync::atomic::Ordering::Relaxed)
            || log_enabled(level(kind, first_report))
    }

    /// Logs `event` and sends it to the subscribers at once; for the hooks it joins `for_hooks`,
    /// which the caller hands over with [`hand_to_hooks`](Self::hand_to_hooks) (a shard does once
    /// it is idle and the last hand-over is 10 ms ago, or it holds many): the hooks' thread wakes
    /// a few times per burst, not once per event (a burst of 10,000 jobs emits 20,000 events).
    pub(crate) fn emit(&self, event: Event, for_hooks: &mut Vec<Event>) {
        log(&event);
        if self.hooks.is_some() {
            if self.stream.receiver_count() > 0 {
                let _ = self.stream.send(event.clone());
            }
            for_hooks.push(event);
        } else if self.stream.receiver_count() > 0 {
            let _ = self.stream.send(event);
        }
    }

    /// Hands `events` to the hooks, in one message, and leaves it empty. The scheduler never
    /// waits for a hook: what does not fit in their queue ([`HOOK_QUEUE_CAPACITY`] events) is
    /// missed, and a warning says so (at the first miss and every power of two after it).
    pub(crate) fn hand_to_hooks(&self, events: &mut Vec<Event>) {
        use std::sync::atomic::Ordering::Relaxed;
        let Some(tx) = &self.hooks else {
            events.clear();
            return;
        };
        if events.is_empty() {
            return;
        }
        let room = HOOK_QUEUE_CAPACITY.saturating_sub(self.hooks_queued.load(Relaxed));
        // The next step's events likely number about as many: room for them at once.
        let mut batch = std::mem::replace(events, Vec::with_capacity(events.len()));
        let missed = batch.len().saturating_sub(room);
        batch.truncate(room);
        let sent = batch.len();
        if sent > 0 {
            self.hooks_queued.fetch_add(sent, Relaxed);
            if tx.try_send(ToHooks::Events(batch)).is_err() {
                self.hooks_queued.fetch_sub(sent, Relaxed);
                self.missed(sent as u64);
            }
        }
        self.missed(missed as u64);
    }

    fn missed(&self, count: u64) {
        if count == 0 {
            return;
        }
        let before = self
            .hooks_missed
            .fetch_add(count, std::sync::atomic::Ordering::Relaxed);
        let after = before + count;
        // A power of two crossed: the first miss, then ever more rarely.
        if (before + 1).next_power_of_two() <= after {
            tracing::warn!(
                missed = after,
                capacity = HOOK_QUEUE_CAPACITY,
                "event hooks cannot keep up: their queue is full and events are dropped for them (logs, metrics, status and subscribers still get every event); make the hook faster or hand its work to a queue of your own"
            );
        }
    }

    /// Waits until every event emitted so far has been handed to the hooks, for at most `limit`
    /// of real time (measured on the blocking pool, so that a paused tokio clock cannot cut it
    /// short). `false` when the hooks did not catch up in time.
    pub(crate) async fn flush(&self, limit: std::time::Duration) -> bool {
        let Some(tx) = &self.hooks else {
            return true;
        };
        let (done, wait) = std::sync::mpsc::channel();
        let tx = tx.clone();
        tokio::task::spawn_blocking(move || {
            let until = std::time::Instant::now() + limit;
            let mut flush = ToHooks::Flush(done);
            // The queue may be full: wait for room, but not past the limit.
            loop {
                match tx.try_send(flush) {
                    Ok(()) => break,
                    Err(std::sync::mpsc::TrySendError::Disconnected(_)) => return true,
                    Err(std::sync::mpsc::TrySendError::Full(back)) => {
                        if std::time::Instant::now() >= until {
                            return false;
                        }
                        flush = back;
                        std::thread::sleep(std::time::Duration::from_millis(5));
                    }
                }
            }
            let left = until.saturating_duration_since(std::time::Instant::now());
            wait.recv_timeout(left).is_ok()
        })
        .await
        .unwrap_or(false)
    }
}

fn call_hooks(hooks: &[Hook], event: &Event) {
    for hook in hooks {
        let call = std::panic::AssertUnwindSafe(|| hook(event));
        if std::panic::catch_unwind(call).is_err() {
            tracing::error!(job = %event.job, event = event.kind.name(), "an event hook panicked; the other hooks still get the event");
        }
    }
}

fn ms(d: Option<Duration>) -> u64 {
    d.map(|d| d.as_millis() as u64).unwrap_or_default()
}

/// Log fields formatted only when a subscriber records them.
struct Rfc3339(chrono::DateTime<chrono::Utc>);

impl fmt::Display for Rfc3339 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
    }
}
struct Token(Option<u64>);

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(t) => write!(f, "{t}"),
            None => Ok(()),
        }
    }
}

/// The level [`log`] writes an event at.
fn level(kind: &EventKind, first_report: bool) -> tracing::Level {
    use tracing::Level;
    match kind {
        EventKind::Started | EventKind::Succeeded | EventKind::Coalesced { .. } => Level::INFO,
        EventKind::Skipped { paused: true, .. } if first_report => Level::INFO,
        EventKind::Failed {
            retry_at: Some(_), ..
        } => Level::WARN,
        EventKind::Failed { .. } | EventKind::LeaseLost { .. } => Level::ERROR,
        EventKind::Cancelled { .. } => Level::WARN,
        EventKind::Skipped { .. } | EventKind::Misfired { .. } if first_report => Level::WARN,
        EventKind::Skipped { .. } | EventKind::Misfired { .. } | EventKind::ClaimedElsewhere => {
            Level::DEBUG
        }
    }
}

fn log_enabled(level: tracing::Level) -> bool {
    use tracing::Level;
    // `enabled!` needs a constant level.
    match level {
        Level::ERROR => tracing::enabled!(Level::ERROR),
        Level::WARN => tracing::enabled!(Level::WARN),
        Level::INFO => tracing::enabled!(Level::INFO),
        Level::DEBUG => tracing::enabled!(Level::DEBUG),
        _ => tracing::enabled!(Level::TRACE),
    }
}

fn log(e: &Event) {
    let t = Rfc3339(e.fire_time);
    let token = Token(e.fencing_token);
    let (lateness_ms, duration_ms) = (ms(e.lateness), ms(e.duration));
    match &e.kind {
        EventKind::Started if e.attempt.unwrap_or(1) > 1 => {
            tracing::info!(job = %e.job, fire_time = %t, fencing_token = %token, attempt = e.attempt.unwrap_or(1), "run retried")
        }
        EventKind::Started => {
            tracing::info!(job = %e.job, fire_time = %t, fencing_token = %token, lateness_ms, "run started")
        }
        EventKind::Succeeded => {
            tracing::info!(job = %e.job, fire_time = %t, fencing_token = %token, duration_ms, "run succeeded")
        }
        EventKind::Failed {
            error,
            reason,
            retry_at: Some(at),
        } => {
            tracing::warn!(job = %e.job, fire_time = %t, fencing_token = %token, duration_ms, attempt = e.attempt.unwrap_or(1), reason = %reason, retry_at = %Rfc3339(*at), error = %error, "run attempt failed; retrying")
        }
        EventKind::Failed { error, reason, .. } => {
            tracing::error!(job = %e.job, fire_time = %t, fencing_token = %token, duration_ms, attempt = e.attempt.unwrap_or(1), reason = %reason, error = %error, "run failed")
        }
        EventKind::Cancelled { reason } => {
            tracing::warn!(job = %e.job, fire_time = %t, fencing_token = %token, duration_ms, reason = %reason, "run cancelled")
        }
        EventKind::Skipped {
            reason,
            paused: true,
        } if e.first_report => {
            tracing::info!(job = %e.job, fire_time = %t, reason = %reason, "fire skipped: the job is paused")
        }
        EventKind::Skipped { reason, .. } if e.first_report => {
            tracing::warn!(job = %e.job, fire_time = %t, reason = %reason, "fire skipped")
        }
        EventKind::Skipped { reason, .. } => {
            tracing::debug!(job = %e.job, fire_time = %t, reason = %reason, "fire skipped (already reported by another process)")
        }
        EventKind::Misfired { reason, count, .. } if e.first_report => {
            tracing::warn!(job = %e.job, fire_time = %t, count, reason = %reason, "fire misfired")
        }
        EventKind::Misfired { reason, count, .. } => {
            tracing::debug!(job = %e.job, fire_time = %t, count, reason = %reason, "fire misfired (already reported by another process)")
        }
        EventKind::Coalesced { covered_by } => {
            tracing::info!(job = %e.job, fire_time = %t, covered_by = %covered_by.to_rfc3339_opts(chrono::SecondsFormat::Millis, true), "fire coalesced into a later one")
        }
        EventKind::ClaimedElsewhere => {
            tracing::debug!(job = %e.job, fire_time = %t, "fire claimed by another process")
        }
        EventKind::LeaseLost { reason } => {
            tracing::error!(job = %e.job, fire_time = %t, fencing_token = %token, reason = %reason, "lease lost; run cancelled")
        }
    }
}
