//! Operating the jobs of a shared store without running them: list the jobs the replicas
//! announced, pause, resume, run now, and read the run history — through exactly the code a
//! replica uses, so that a job paused here is paused for every replica. The command-line tool
//! `cronguard` (package `cronguard-cli`, docs/operations/cli.md) is built on this.
//!
//! ```no_run
//! # async fn demo() -> Result<(), cronguard::admin::AdminError> {
//! use cronguard::admin::Store;
//!
//! let store = Store::lock_dir("/run/cronguard")?;
//! for job in store.jobs().await? {
//!     println!("{} {} next {:?}", job.name, job.schedule, job.next_fire);
//! }
//! store.pause("nightly-report", "alice@ops").await?;
//! let run_key = store.trigger("cleanup").await?; // `cleanup@manual:<16 hex digits>`
//! # let _ = run_key;
//! # Ok(()) }
//! ```
//!
//! [`Store::health`] is the dead-man check from outside the replicas: it tells from the store
//! alone which jobs' newest due fire has no fate there (no replica is running the job) or was
//! not run, so that a cron job or a Kubernetes CronJob running `cronguard health` notices when
//! every replica is gone (docs/operations/cli.md, "Health from outside").
//!
//! Only jobs that a running replica announced in the store's roster can be controlled, so that a
//! mistyped name is an error instead of a pause nobody reads. A pause is stored with the job's
//! state (every claim honours it) and published on the store's control feed, which every replica
//! reads about once a second; a run asked for with [`Store::trigger`] is published there and
//! claimed by the replicas that run the job, exactly one of which runs it. Only the replicas
//! alive then read it: [`Store::liveness`] tells from the store whether one runs the job, and
//! [`Store::trigger_if_live`] asks only then.

use std::path::Path;
#[cfg(feature = "redis")]
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use cronguard_schedule::{Schedule, ScheduleError};

use crate::clock::after;
use crate::control::{ManualRun, Pause};
use crate::guard::feed::{ControlAction, ControlFeed, ControlRequest, RosterEntry};
use crate::guard::{Guard, GuardError};
use crate::health::CLAIM_AHEAD_TOLERANCE;
use crate::history::{HistoryEntry, RecentHistory};
use crate::liveness::liveness;
use crate::DEFAULT_MISFIRE_GRACE;

/// How long one request may wait for the store.
const STORE_WAIT: Duration = Duration::from_secs(5);

/// The instance name the tool's requests carry where a store records one.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
const ADMIN_INSTANCE: &str = "cronguard-admin";

/// A job as the replicas announced it, with what its guard's store knows of it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct StoredJob {
    /// The job's name.
    pub name: String,
    /// Its schedule as the replica shows it (`cron `0 2 * * *` in Europe/Berlin`, `every 30s`).
    pub schedule: String,
    /// The next fire after now, when the schedule could be read and fires again.
    pub next_fire: Option<DateTime<Utc>>,
    /// The latest fire claimed anywhere the guard reaches (see
    /// [`Guard::last_claimed`]).
    pub last_claimed: Option<DateTime<Utc>>,
    /// Who paused it, and when; `None` when it runs.
    pub paused: Option<Pause>,
    /// The replica (`CRONGUARD_INSTANCE`) that announced it last.
    pub announced_by: String,
    /// When it was announced last: a replica announces its jobs when it starts.
    pub announced_at: DateTime<Utc>,
}

/// The health of a store's jobs as the store alone tells it, from [`Store::health`]: the check
/// to run from outside the replicas, which still answers when every replica is gone.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct StoreHealth {
    /// `true` when every job is on time or paused: none is missed, overdue or unknown.
    pub healthy: bool,
    /// When the check ran (this process's clock, against which the fires due are told).
    pub checked_at: DateTime<Utc>,
    /// Each job of the store's roster, sorted by name.
    pub jobs: Vec<StoredJobHealth>,
}

/// The health of one job of a store's roster (see [`StoredJobState`] for the rule).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct StoredJobHealth {
    /// The job's name.
    pub name: String,
    /// On time, missed, overdue, paused or unknown (serialized as the field `state`, with
    /// `pause` or `reason` beside it).
    #[cfg_attr(feature = "serde", serde(flatten))]
    pub state: StoredJobState,
    /// The fire the state is about: the newest fire `T` with `T + due_grace` at or before the
    /// check. `None` when no fire is due yet: the schedule has not fired that long ago, or the
    /// store holds no record of the job and no fire came due since it was announced.
    pub due: Option<DateTime<Utc>>,
    /// How long after its fire time a fire must have started: the job's misfire grace plus its
    /// whole jitter, as its replicas announced them; [`DEFAULT_MISFIRE_GRACE`]
    /// (60 s) for a job announced by a replica of an earlier version, which did not announce it.
    pub due_grace: Duration,
    /// The job's fate point in the store (see [`Guard::fate_point`]): every fire up to it was
    /// claimed, reported dropped or reported missed.
    pub fate_point: Option<DateTime<Utc>>,
    /// The latest fire claimed (see [`Guard::last_claimed`]).
    pub last_claimed: Option<DateTime<Utc>>,
    /// The replica (`CRONGUARD_INSTANCE`) that announced it last.
    pub announced_by: String,
    /// When it was announced last: a replica announces its jobs when it starts.
    pub announced_at: DateTime<Utc>,
}

/// What became of a job's newest due fire, as the store tells it.
///
/// `due` is the newest fire `T` whose grace has passed: `T + due_grace <= now`. Then:
///
/// - [`Missed`](StoredJobState::Missed) when the job's fate point lies before `T`: no process
///   claimed `T`, nor reported it dropped or missed — no process is running the job (every
///   replica is gone, or the ones left only watch it);
/// - [`Overdue`](StoredJobState::Overdue) when the fate point reaches `T` but the last claimed fire
///   does not: `T` was given a fate without running (skipped because the job was busy, misfired,
///   or reported missed by a replica that started after a downtime);
/// - [`OnTime`](StoredJobState::OnTime) when `T` or a later fire was claimed, or no fire is due.
///
/// A job of which the store holds no record (no fate point, no claim: a new job, or a store that
/// lost its data) has never fired anywhere: only a fire that came due since the job was
/// announced counts, so a job deployed today is not missed for the fires its schedule had before
/// it existed, but is missed once its first fire after the announcement passes its grace with no
/// process to claim it. A fate point or claim recorded further ahead of this process's clock
/// than a second proves nothing about the fires due now (a replica with a clock ahead wrote it)
/// and counts as none.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(tag = "state", rename_all = "snake_case")
)]
#[non_exhaustive]
pub enum StoredJobState {
    /// The newest due fire, or a later one, was claimed; or no fire is due yet.
    OnTime,
    /// The newest due fire has no fate in the store: no process is running the job.
    Missed,
    /// The newest due fire was reported dropped or missed, and no later fire was claimed: it did
    /// not run.
    Overdue,
    /// The job is paused: its fires are skipped on purpose, so it is neither missed nor overdue.
    Paused {
        /// Who paused it, and when.
        pause: Pause,
    },
    /// The store could not answer for the job, or its schedule cannot be read by this version.
    Unknown {
        /// Why.
        reason: String,
    },
}

impl StoredJobState {
    /// Whether the job's newest due fire did not run: [`Missed`](StoredJobState::Missed) or
    /// [`Overdue`](StoredJobState::Overdue).
    pub fn is_late(&self) -> bool {
        matches!(self, StoredJobState::Missed | StoredJobState::Overdue)
    }
}

pub use crate::liveness::{JobLiveness, Liveness, StoreProcess};

/// Why an operation on a store failed. Each message says what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdminError {
    /// No replica announced a job of this name in the store's roster.
    #[error("no replica announced job `{0}` in this store; `cronguard list` shows the jobs (check the name, and that the replicas use this store and have started)")]
    UnknownJob(String),
    /// The store could not be opened: a wrong URL, credentials, schema or lock dir.
    #[error("cannot use {store}: {problem}")]
    Open {
        /// The store (its URL without passwords, or the lock dir).
        store: String,
        /// What is wrong, and what to change.
        problem: String,
    },
    /// The store did not answer, or answered with an error; nothing was changed by this request.
    #[error("{store} could not carry out the request; check that it is up and reachable, then try again")]
    Store {
        /// The store (its URL without passwords, or the lock dir).
        store: String,
        /// What failed.
        #[source]
        source: GuardError,
    },
    /// The change is stored (and holds at every claim), but the control feed could not be
    /// written, so the replicas' status shows it from their next fire on.
    #[error("the change to job `{job}` is stored and holds at every claim, but the replicas could not be told at once through the control feed (their status shows it from their next fire on)")]
    Feed {
        /// The job.
        job: String,
        /// What failed.
        #[source]
        source: GuardError,
    },
    /// The job's guard keeps no run history.
    #[error("job `{0}` has no run history in this store: `lock = \"postgres\"` keeps one with `history = true`, and `redis` and `file` unless the replicas set `Builder::recent_history(0)`; read the replicas' logs or events")]
    NoHistory(String),
    /// The store's guard does not keep pauses or manual runs.
    #[error("the guard of job `{0}` does not support pause, resume or run now")]
    Unsupported(String),
    /// [`Store::trigger_if_live`]: the store shows no live replica that runs the job, so a run
    /// asked for would start nowhere; nothing was published.
    #[error("{}", crate::liveness::refusal(.0))]
    NoLiveReplica(Box<JobLiveness>),
}

/// The TLS files of a `rediss://` store ([`Store::redis_tls`]): what the replicas take from
/// `CRONGUARD_REDIS_CA_FILE`, `CRONGUARD_REDIS_CLIENT_CERT_FILE` and
/// `CRONGUARD_REDIS_CLIENT_KEY_FILE` (or `Builder::redis_tls_ca`,
/// `Builder::redis_tls_client_cert`).
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedisTlsFiles {
    /// A PEM file of the CA certificate(s) to trust instead of the system's store.
    pub ca: Option<PathBuf>,
    /// PEM files of a client certificate (chain) and its private key, for a server with
    /// `tls-auth-clients yes`.
    pub client: Option<(PathBuf, PathBuf)>,
}

#[cfg(feature = "redis")]
impl RedisTlsFiles {
    /// No files: the system's store is trusted, no client certificate is shown.
    pub fn new() -> Self {
        RedisTlsFiles::default()
    }

    /// Trusts the CA(s) of the PEM file `path` instead of the system's store.
    pub fn ca(mut self, path: impl Into<PathBuf>) -> Self {
        self.ca = Some(path.into());
        self
    }

    /// Shows the client certificate (chain) of the PEM file `cert`, with its key `key`.
    pub fn client_cert(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.client = Some((cert.into(), key.into()));
        self
    }
}

/// Where the store lives.
enum Backend {
    LockDir(crate::guard::file::FileStore),
    #[cfg(feature = "redis")]
    Redis(crate::guard::redis::RedisStore),
    #[cfg(feature = "postgres")]
    Postgres(crate::guard::postgres::PostgresStore),
}

/// A shared guard's store: a lock dir (`lock = "file"`), Redis (`lock = "redis"`) or PostgreSQL
/// (`lock = "postgres"`), as the replicas use it.
pub struct Store {
    backend: Backend,
    feed: Arc<dyn ControlFeed>,
    /// The store as messages name it (no passwords).
    shown: String,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("store", &self.shown).finish()
    }
}

impl Store {
    /// The lock dir of `lock = "file"` jobs (the replicas' `CRONGUARD_LOCK_DIR`). It must exist
    /// and, on Unix, belong to the user this process runs as, so that the files written here
    /// stay readable and writable by the replicas.
    ///
    /// # Errors
    ///
    /// [`AdminError::Open`] when the folder is missing, not a folder or another user's.
    pub fn lock_dir(dir: impl AsRef<Path>) -> Result<Store, AdminError> {
        let dir = dir.as_ref();
        let shown = format!("the lock dir `{}`", dir.display());
        let store = crate::guard::file::FileStore::open_for_admin(dir).map_err(|problem| {
            AdminError::Open {
                store: shown.clone(),
                problem,
            }
        })?;
        Ok(Store {
            feed: store.feed(),
            backend: Backend::LockDir(store),
            shown,
        })
    }

    /// The Redis of `lock = "redis"` jobs (the replicas' `CRONGUARD_REDIS_URL`: one server,
    /// `rediss://`, `redis+sentinel://`, `redis+cluster://`), under their key prefix
    /// (`Builder::redis_prefix`, `cronguard` by default).
    ///
    /// # Errors
    ///
    /// [`AdminError::Open`] when the URL is wrong or the server does not answer.
    #[cfg(feature = "redis")]
    #[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
    pub async fn redis(url: &str, prefix: &str) -> Result<Store, AdminError> {
        Store::redis_tls(url, prefix, &RedisTlsFiles::default()).await
    }

    /// [`Store::redis`], with the TLS files of a `rediss://` URL: a private CA to trust, a client
    /// certificate to show (the replicas' `CRONGUARD_REDIS_CA_FILE`,
    /// `CRONGUARD_REDIS_CLIENT_CERT_FILE` and `CRONGUARD_REDIS_CLIENT_KEY_FILE`). TLS needs the
    /// `redis-tls` feature; files given for a URL without TLS are refused, as at a replica's
    /// start.
    ///
    /// # Errors
    ///
    /// [`AdminError::Open`] when the URL or the files are wrong, the server's certificate is not
    /// trusted, the server refuses the client's, or it does not answer.
    #[cfg(feature = "redis")]
    #[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
    pub async fn redis_tls(
        url: &str,
        prefix: &str,
        tls: &RedisTlsFiles,
    ) -> Result<Store, AdminError> {
        use crate::guard::redis::{redact, RedisStore, TlsFiles};
        let shown = format!("Redis at `{}`", redact(url));
        let files = TlsFiles {
            ca: tls.ca.clone(),
            client: tls.client.clone(),
        };
        let store = RedisStore::open_for_admin(url, prefix, &files, STORE_WAIT)
            .await
            .map_err(|problem| AdminError::Open {
                store: shown.clone(),
                problem,
            })?;
        Ok(Store {
            feed: store.feed(),
            backend: Backend::Redis(store),
            shown,
        })
    }

    /// The PostgreSQL of `lock = "postgres"` jobs (the replicas' `CRONGUARD_POSTGRES_URL`), in
    /// their schema (`Builder::postgres_schema`, `cronguard` by default).
    ///
    /// It connects as a replica does: TLS as the URL's `sslmode` asks (feature `postgres-tls`),
    /// with the CA and client certificate of the URL's `sslrootcert`, `sslcert` and `sslkey` or
    /// of `CRONGUARD_POSTGRES_CA_FILE`, `CRONGUARD_POSTGRES_CLIENT_CERT_FILE` and
    /// `CRONGUARD_POSTGRES_CLIENT_KEY_FILE`, and a pool of `CRONGUARD_POSTGRES_POOL_SIZE`
    /// connections (see [`Builder::postgres_url`](crate::Builder::postgres_url)).
    ///
    /// # Errors
    ///
    /// [`AdminError::Open`] when the URL, the credentials, the TLS settings or the schema are
    /// wrong, or the server does not answer.
    #[cfg(feature = "postgres")]
    #[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
    pub async fn postgres(url: &str, schema: &str) -> Result<Store, AdminError> {
        use crate::guard::postgres::{PostgresSettings, PostgresStore};
        let mut settings = PostgresSettings::from_env();
        settings.url = Some(url.to_owned());
        settings.schema = schema.to_owned();
        let shown = settings.shown();
        let store = PostgresStore::open_for_admin(&settings, STORE_WAIT * 2)
            .await
            .map_err(|problem| AdminError::Open {
                store: shown.clone(),
                problem,
            })?;
        Ok(Store {
            feed: store.feed(),
            backend: Backend::Postgres(store),
            shown,
        })
    }

    /// The guard of `job` on this store, as a replica builds it (lease, overlap and grace do not
    /// matter to what the tool asks).
    fn guard(&self, job: &str) -> Arc<dyn Guard> {
        match &self.backend {
            Backend::LockDir(store) => store.guard(
                job,
                crate::Overlap::Skip,
                DEFAULT_MISFIRE_GRACE,
                RecentHistory::default(),
            ),
            #[cfg(feature = "redis")]
            Backend::Redis(store) => store.guard(
                job,
                crate::DEFAULT_LEASE,
                crate::Overlap::Skip,
                DEFAULT_MISFIRE_GRACE,
                RecentHistory::default(),
            ),
            #[cfg(feature = "postgres")]
            Backend::Postgres(store) => store.guard(
                job,
                &Arc::from(ADMIN_INSTANCE),
                crate::DEFAULT_LEASE,
                crate::Overlap::Skip,
                true,
                DEFAULT_MISFIRE_GRACE,
            ),
        }
    }

    /// One request to the store, within [`STORE_WAIT`].
    async fn ask<T>(
        &self,
        request: impl std::future::Future<Output = Result<T, GuardError>>,
    ) -> Result<T, AdminError> {
        match tokio::time::timeout(STORE_WAIT, request).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(source)) => Err(AdminError::Store {
                store: self.shown.clone(),
                source,
            }),
            Err(_) => Err(AdminError::Store {
                store: self.shown.clone(),
                source: GuardError::new(
                    crate::guard::GuardErrorKind::Timeout,
                    "no answer within 5 s",
                ),
            }),
        }
    }

    async fn roster(&self) -> Result<Vec<RosterEntry>, AdminError> {
        self.ask(self.feed.roster()).await
    }

    /// The roster entry of `job`, or [`AdminError::UnknownJob`].
    async fn announced(&self, job: &str) -> Result<RosterEntry, AdminError> {
        self.roster()
            .await?
            .into_iter()
            .find(|entry| entry.job == job)
            .ok_or_else(|| AdminError::UnknownJob(job.to_owned()))
    }

    /// Every job the replicas announced in the store's roster, sorted by name, with its next
    /// fire, the last fire claimed and its pause.
    ///
    /// Reads the roster once and asks each job's guard twice (its last claim and its pause), all
    /// at the same time; [`Store::jobs_named`] asks only about the jobs it is given.
    ///
    /// # Errors
    ///
    /// [`AdminError::Store`] when the store does not answer.
    pub async fn jobs(&self) -> Result<Vec<StoredJob>, AdminError> {
        let roster = self.roster().await?;
        self.stored_jobs(roster).await
    }

    /// The names of every job the replicas announced in the store's roster, sorted: one read of
    /// the roster, none of the jobs' guards (to page through a large roster, then ask
    /// [`Store::jobs_named`] and [`Store::health_of`] about one page of it).
    ///
    /// # Errors
    ///
    /// [`AdminError::Store`] when the store does not answer.
    pub async fn job_names(&self) -> Result<Vec<String>, AdminError> {
        let mut names: Vec<String> = self
            .roster()
            .await?
            .into_iter()
            .map(|entry| entry.job)
            .collect();
        names.sort_unstable();
        names.dedup();
        Ok(names)
    }

    /// [`Store::jobs`] of the jobs named in `names` only (those the roster holds, sorted by
    /// name): one read of the roster and two requests to each named job's guard.
    ///
    /// # Errors
    ///
    /// [`AdminError::Store`] when the store does not answer.
    pub async fn jobs_named(&self, names: &[&str]) -> Result<Vec<StoredJob>, AdminError> {
        let roster = self.roster().await?;
        let wanted: std::collections::HashSet<&str> = names.iter().copied().collect();
        self.stored_jobs(
            roster
                .into_iter()
                .filter(|entry| wanted.contains(entry.job.as_str()))
                .collect(),
        )
        .await
    }

    async fn stored_jobs(
        &self,
        mut roster: Vec<RosterEntry>,
    ) -> Result<Vec<StoredJob>, AdminError> {
        roster.sort_by(|a, b| a.job.cmp(&b.job));
        let now = Utc::now();
        let jobs = roster.into_iter().map(|entry| async move {
            let guard = self.guard(&entry.job);
            let (last_claimed, paused) = futures_util::future::try_join(
                self.ask(guard.last_claimed()),
                self.ask(guard.pause()),
            )
            .await?;
            Ok::<_, AdminError>(StoredJob {
                next_fire: schedule(&entry).ok().and_then(|s| s.next_after(now)),
                name: entry.job,
                schedule: entry.schedule,
                last_claimed,
                paused,
                announced_by: entry.instance,
                announced_at: entry.at,
            })
        });
        futures_util::future::try_join_all(jobs).await
    }

    /// The health of every job the replicas announced, told from the store alone, for a dead-man
    /// check from outside the replicas: for each job, the newest fire that should have started
    /// by now, and whether the store holds a fate for it (see [`StoredJobState`]). Each job's
    /// guard is asked at the same time as the others', each request within 5 s; a job whose
    /// guard does not answer is [`StoredJobState::Unknown`], the others are still told.
    ///
    /// # Errors
    ///
    /// [`AdminError::Store`] when the store does not answer for its roster.
    pub async fn health(&self) -> Result<StoreHealth, AdminError> {
        let roster = self.roster().await?;
        Ok(self.health_of_entries(roster).await)
    }

    /// [`Store::health`] of the jobs named in `names` only (those the roster holds): one read of
    /// the roster and three requests to each named job's guard. `healthy` is about these jobs.
    ///
    /// # Errors
    ///
    /// [`AdminError::Store`] when the store does not answer for its roster.
    pub async fn health_of(&self, names: &[&str]) -> Result<StoreHealth, AdminError> {
        let roster = self.roster().await?;
        let wanted: std::collections::HashSet<&str> = names.iter().copied().collect();
        Ok(self
            .health_of_entries(
                roster
                    .into_iter()
                    .filter(|entry| wanted.contains(entry.job.as_str()))
                    .collect(),
            )
            .await)
    }

    async fn health_of_entries(&self, mut roster: Vec<RosterEntry>) -> StoreHealth {
        roster.sort_by(|a, b| a.job.cmp(&b.job));
        let now = Utc::now();
        let jobs = futures_util::future::join_all(
            roster.into_iter().map(|entry| self.job_health(entry, now)),
        )
        .await;
        StoreHealth {
            healthy: jobs.iter().all(|j| {
                matches!(
                    j.state,
                    StoredJobState::OnTime | StoredJobState::Paused { .. }
                )
            }),
            checked_at: now,
            jobs,
        }
    }

    async fn job_health(&self, entry: RosterEntry, now: DateTime<Utc>) -> StoredJobHealth {
        let due_grace = entry.due_grace.unwrap_or(crate::DEFAULT_MISFIRE_GRACE);
        let guard = self.guard(&entry.job);
        let answers = futures_util::future::try_join3(
            self.ask(guard.fate_point()),
            self.ask(guard.last_claimed()),
            self.ask(guard.pause()),
        )
        .await;
        let schedule = schedule(&entry);
        let due = schedule
            .as_ref()
            .ok()
            .and_then(|s| newest_due(s, due_grace, now));
        let mut health = StoredJobHealth {
            name: entry.job,
            state: StoredJobState::OnTime,
            due,
            due_grace,
            fate_point: None,
            last_claimed: None,
            announced_by: entry.instance,
            announced_at: entry.at,
        };
        let (fate_point, last_claimed, paused) = match answers {
            Ok(answers) => answers,
            Err(e) => {
                health.state = StoredJobState::Unknown {
                    reason: crate::error::Chain(&e).to_string(),
                };
                return health;
            }
        };
        health.fate_point = fate_point;
        health.last_claimed = last_claimed;
        let no_record = fate_point.is_none() && last_claimed.is_none();
        if no_record {
            health.due = due.filter(|t| *t >= health.announced_at);
        }
        health.state = match (paused, schedule) {
            (Some(pause), _) => StoredJobState::Paused { pause },
            (None, Err(e)) => StoredJobState::Unknown {
                reason: format!(
                    "its schedule `{}` cannot be read by this version of cronguard ({e}); use the version its replicas run",
                    entry.schedule
                ),
            },
            (None, Ok(_)) => judge(health.due, fate_point, last_claimed, now),
        };
        health
    }

    /// Pauses `job` for every replica: its fires are reported as `skipped` (reason `paused`)
    /// until it is resumed. `by` names who paused it (an operator, a tool).
    ///
    /// # Errors
    ///
    /// [`AdminError::UnknownJob`] when no replica announced it, [`AdminError::Store`] when the
    /// pause could not be stored (nothing changed), [`AdminError::Feed`] when it was stored but
    /// the replicas could not be told at once.
    pub async fn pause(&self, job: &str, by: &str) -> Result<(), AdminError> {
        let pause = Pause::new(by, Utc::now());
        self.set_pause(job, Some(pause), ControlAction::Pause { by: by.to_owned() })
            .await
    }

    /// Resumes `job` for every replica; `by` names who resumed it.
    ///
    /// # Errors
    ///
    /// As [`Store::pause`].
    pub async fn resume(&self, job: &str, by: &str) -> Result<(), AdminError> {
        self.set_pause(job, None, ControlAction::Resume { by: by.to_owned() })
            .await
    }

    async fn set_pause(
        &self,
        job: &str,
        pause: Option<Pause>,
        action: ControlAction,
    ) -> Result<(), AdminError> {
        self.announced(job).await?;
        let guard = self.guard(job);
        match self.ask(guard.set_pause(pause)).await {
            Err(AdminError::Store { source, .. })
                if source.kind() == crate::guard::GuardErrorKind::Unsupported =>
            {
                return Err(AdminError::Unsupported(job.to_owned()))
            }
            other => other?,
        }
        self.publish(job, action).await
    }

    /// Asks the replicas that run `job` to run it now, outside its schedule; exactly one of them
    /// runs it (within the job's misfire grace). Returns the run's key,
    /// `job@manual:<16 hex digits>`, which its events and logs carry.
    ///
    /// The request is published whether or not a replica that runs the job is alive to read
    /// it (a replica that starts later does not take it): [`Store::trigger_if_live`] asks only
    /// when the store shows one.
    ///
    /// # Errors
    ///
    /// [`AdminError::UnknownJob`] when no replica announced it, [`AdminError::Feed`] when the
    /// request could not be published (then nothing runs).
    pub async fn trigger(&self, job: &str) -> Result<String, AdminError> {
        self.announced(job).await?;
        if self.guard(job).controls().is_none() {
            return Err(AdminError::Unsupported(job.to_owned()));
        }
        let run = ManualRun {
            id: fastrand::u64(1..),
            requested_at: Utc::now(),
        };
        self.publish(job, ControlAction::Trigger(run)).await?;
        Ok(crate::fire::run_key(job, run.requested_at, Some(run.id)))
    }

    /// Every process the store lists — the replicas that attend it, present or not — most
    /// recently seen first, without attending it (the replicas do not see the tool).
    ///
    /// # Errors
    ///
    /// [`AdminError::Store`] when the store does not answer.
    pub async fn processes(&self) -> Result<Vec<StoreProcess>, AdminError> {
        let mut processes: Vec<StoreProcess> = self
            .ask(self.feed.processes())
            .await?
            .into_iter()
            .map(StoreProcess::of)
            .collect();
        processes.sort_by(|a, b| {
            a.seen_ago
                .cmp(&b.seen_ago)
                .then_with(|| a.instance.cmp(&b.instance))
        });
        Ok(processes)
    }

    /// Whether a live replica runs `job`, as the store tells it (see [`Liveness`]).
    ///
    /// # Errors
    ///
    /// [`AdminError::UnknownJob`] when no replica announced it, [`AdminError::Store`] when the
    /// store does not answer.
    pub async fn liveness(&self, job: &str) -> Result<JobLiveness, AdminError> {
        let entry = self.announced(job).await?;
        let liveness = liveness(&entry.instance, self.processes().await?);
        Ok(JobLiveness {
            job: entry.job,
            announced_by: entry.instance,
            announced_at: entry.at,
            liveness,
        })
    }

    /// [`Store::trigger`], once [`Store::liveness`] shows a live replica that runs `job`:
    /// otherwise nothing is published, since the run would start nowhere.
    ///
    /// # Errors
    ///
    /// [`AdminError::NoLiveReplica`] when the store shows no live replica of the job (the error
    /// says what it shows), and the errors of [`Store::liveness`] and [`Store::trigger`].
    pub async fn trigger_if_live(&self, job: &str) -> Result<String, AdminError> {
        let liveness = self.liveness(job).await?;
        if !liveness.is_live() {
            return Err(AdminError::NoLiveReplica(Box::new(liveness)));
        }
        self.trigger(job).await
    }

    async fn publish(&self, job: &str, action: ControlAction) -> Result<(), AdminError> {
        let request = ControlRequest {
            job: job.to_owned(),
            action,
            at: Utc::now(),
        };
        match self.ask(self.feed.publish(request)).await {
            Ok(()) => Ok(()),
            Err(AdminError::Store { source, .. }) => Err(AdminError::Feed {
                job: job.to_owned(),
                source,
            }),
            Err(other) => Err(other),
        }
    }

    /// The run history of `job` from fire `since` on, oldest first, at most
    /// [`HISTORY_LIMIT`](crate::history::HISTORY_LIMIT) entries, where its guard keeps one
    /// (`redis` and `file`: the newest entries, see
    /// [`Builder::recent_history`](crate::Builder::recent_history); `postgres` with
    /// `history = true`).
    ///
    /// # Errors
    ///
    /// [`AdminError::NoHistory`] when the guard keeps none, [`AdminError::UnknownJob`] when there
    /// is none and no replica announced the job, [`AdminError::Store`] when the store does not
    /// answer.
    pub async fn history(
        &self,
        job: &str,
        since: DateTime<Utc>,
    ) -> Result<Vec<HistoryEntry>, AdminError> {
        let guard = self.guard(job);
        let Some(history) = guard.history() else {
            self.announced(job).await?;
            return Err(AdminError::NoHistory(job.to_owned()));
        };
        let entries = self.ask(history.read(since)).await?;
        if entries.is_empty() {
            self.announced(job).await?;
        }
        Ok(entries)
    }
}

/// The schedule of a roster entry, read back from the text the replica announced.
fn schedule(entry: &RosterEntry) -> Result<Schedule, ScheduleError> {
    entry.schedule.parse()
}

/// The newest fire `T` of `schedule` with `T + grace <= now`, if it ever fired that early.
fn newest_due(schedule: &Schedule, grace: Duration, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let edge = now.checked_sub_signed(TimeDelta::from_std(grace).ok()?)?;
    // `previous_before` is strictly before: a fire exactly at the edge is due.
    schedule.previous_before(edge.checked_add_signed(TimeDelta::nanoseconds(1))?)
}

/// The state of a job that is not paused and whose newest due fire is `due` (see
/// [`StoredJobState`]).
fn judge(
    due: Option<DateTime<Utc>>,
    fate_point: Option<DateTime<Utc>>,
    last_claimed: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> StoredJobState {
    let Some(due) = due else {
        return StoredJobState::OnTime;
    };
    let horizon = after(now, CLAIM_AHEAD_TOLERANCE);
    let reaches = |point: Option<DateTime<Utc>>| point.is_some_and(|p| p >= due && p <= horizon);
    if !reaches(fate_point) && !reaches(last_claimed) {
        StoredJobState::Missed
    } else if !reaches(last_claimed) {
        StoredJobState::Overdue
    } else {
        StoredJobState::OnTime
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> DateTime<Utc> {
        DateTime::<Utc>::from_timestamp(1_767_225_600 + s, 0).expect("in range")
    }

    #[test]
    fn the_newest_due_fire_is_the_last_whose_grace_has_passed() {
        let every_10s = Schedule::every(Duration::from_secs(10)).expect("valid");
        let grace = Duration::from_secs(3);
        assert_eq!(newest_due(&every_10s, grace, at(113)), Some(at(110)));
        assert_eq!(newest_due(&every_10s, grace, at(112)), Some(at(100)));
        assert_eq!(newest_due(&every_10s, grace, at(109)), Some(at(100)));
        let nightly: Schedule = "cron `30 2 * * *` in Europe/Berlin".parse().expect("valid");
        // 2026-01-01 01:30 UTC is 02:30 in Berlin.
        let fire = at(3600 + 1800);
        let grace = Duration::from_secs(600);
        assert_eq!(
            newest_due(&nightly, grace, at(3600 + 1800 + 600)),
            Some(fire)
        );
        assert_eq!(
            newest_due(&nightly, grace, at(3600 + 1800 + 599)),
            Some(fire - TimeDelta::days(1))
        );
    }

    #[test]
    fn a_due_fire_without_a_fate_is_missed_and_one_given_a_fate_without_running_is_overdue() {
        let now = at(1_000);
        let due = Some(at(900));
        assert_eq!(judge(None, None, None, now), StoredJobState::OnTime);
        assert_eq!(judge(due, None, None, now), StoredJobState::Missed);
        assert_eq!(
            judge(due, Some(at(890)), Some(at(890)), now),
            StoredJobState::Missed
        );
        assert_eq!(
            judge(due, Some(at(900)), Some(at(890)), now),
            StoredJobState::Overdue
        );
        assert_eq!(
            judge(due, Some(at(950)), None, now),
            StoredJobState::Overdue
        );
        assert_eq!(
            judge(due, Some(at(900)), Some(at(900)), now),
            StoredJobState::OnTime
        );
        // A claim is a fate, whatever a guard without a fate point of its own answers.
        assert_eq!(judge(due, None, Some(at(950)), now), StoredJobState::OnTime);
        // Written by a replica whose clock is an hour ahead: proves nothing about now.
        assert_eq!(
            judge(due, Some(at(4_600)), Some(at(4_600)), now),
            StoredJobState::Missed
        );
        assert_eq!(
            judge(due, Some(at(1_000)), Some(at(1_000)), now),
            StoredJobState::OnTime
        );
    }
}
