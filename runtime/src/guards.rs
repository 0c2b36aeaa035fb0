//! The guards of a job set: opens the stores its jobs need — each through its backend's own
//! module (`guard/file`, `guard/redis`, `guard/postgres`) or a factory the application
//! registered — builds each job's guard, also of a job added while the scheduler runs, and
//! starts the checks that watch them (clock skew, history retention).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::error::{Problem, ProblemKind};
use crate::guard::feed::ControlFeed;
use crate::guard::file::{check_lock_dir, FileStore};
#[cfg(feature = "postgres")]
use crate::guard::postgres::{PostgresSettings, PostgresStore};
#[cfg(feature = "redis")]
use crate::guard::redis::{RedisSettings, RedisStore};
use crate::guard::{Guard, GuardFactory, GuardSpec};
use crate::history::RecentHistory;
use crate::job::Job;
use crate::operate::{Feeds, GuardMaker};
use crate::options::Lock;

/// The settings of every kind of guard, from the environment and the builder.
pub(crate) struct GuardSettings {
    /// `CRONGUARD_LOCK_DIR`, or `Builder::lock_dir`; `None`: the default.
    pub(crate) lock_dir: Option<PathBuf>,
    #[cfg(feature = "redis")]
    pub(crate) redis: RedisSettings,
    #[cfg(feature = "postgres")]
    pub(crate) postgres: PostgresSettings,
    /// Why the Redis URL of the environment could not be read (`CRONGUARD_REDIS_URL_FILE`); a
    /// start error of the `redis` jobs unless `Builder::redis_url` gives one.
    #[cfg(feature = "redis")]
    pub(crate) redis_url_problem: Option<String>,
    /// The same for PostgreSQL (`CRONGUARD_POSTGRES_URL_FILE`, `Builder::postgres_url`).
    #[cfg(feature = "postgres")]
    pub(crate) postgres_url_problem: Option<String>,
    pub(crate) history_retention_days: u32,
    /// Entries of each job's history the `redis` and `file` guards keep (`Builder::recent_history`).
    pub(crate) recent_history: usize,
    pub(crate) custom: BTreeMap<String, GuardFactory>,
    /// An unreachable server is a start error.
    pub(crate) required_at_start: bool,
}

impl GuardSettings {
    /// The settings the environment gives.
    pub(crate) fn from_env() -> Self {
        // The URLs: `CRONGUARD_<X>_URL`, else the file of `CRONGUARD_<X>_URL_FILE`, else the
        // generic variable (`REDIS_URL`, `DATABASE_URL`).
        #[cfg(feature = "redis")]
        let (redis, redis_url_problem) = {
            let mut redis = RedisSettings::from_env();
            let (url, problem) = split(crate::env::url("CRONGUARD_REDIS_URL", "REDIS_URL"));
            redis.url = url;
            (redis, problem)
        };
        #[cfg(feature = "postgres")]
        let (postgres, postgres_url_problem) = {
            let mut postgres = PostgresSettings::from_env();
            let (url, problem) = split(crate::env::url("CRONGUARD_POSTGRES_URL", "DATABASE_URL"));
            postgres.url = url;
            (postgres, problem)
        };
        GuardSettings {
            lock_dir: crate::env::var("CRONGUARD_LOCK_DIR").map(PathBuf::from),
            #[cfg(feature = "redis")]
            redis,
            #[cfg(feature = "postgres")]
            postgres,
            #[cfg(feature = "redis")]
            redis_url_problem,
            #[cfg(feature = "postgres")]
            postgres_url_problem,
            history_retention_days: crate::history::DEFAULT_HISTORY_RETENTION_DAYS,
            recent_history: crate::history::RECENT_HISTORY_KEPT,
            custom: BTreeMap::new(),
            required_at_start: false,
        }
    }
}

/// A URL read from the environment, or why it could not be.
#[cfg(any(feature = "redis", feature = "postgres"))]
fn split(read: Result<Option<String>, String>) -> (Option<String>, Option<String>) {
    match read {
        Ok(url) => (url, None),
        Err(problem) => (None, Some(problem)),
    }
}

/// The stores opened for a job set, which build the guard of every job.
pub(crate) struct Stores {
    file: FileStore,
    #[cfg(feature = "redis")]
    redis: Option<RedisStore>,
    #[cfg(feature = "postgres")]
    postgres: Option<PostgresStore>,
    custom: BTreeMap<String, GuardFactory>,
    history_retention_days: u32,
    recent_history: RecentHistory,
    instance: Arc<str>,
    states: Arc<crate::state::States>,
}

impl Stores {
    /// Opens what `jobs` need; every problem goes to `problems`.
    pub(crate) async fn open(
        settings: GuardSettings,
        jobs: &[Job],
        instance: &Arc<str>,
        states: &Arc<crate::state::States>,
        clock: &Clock,
        problems: &mut Vec<Problem>,
    ) -> Stores {
        let required = settings.required_at_start;
        let of = |lock: Lock| -> Vec<&Job> { jobs.iter().filter(|j| j.lock == lock).collect() };
        let file = FileStore::new(settings.lock_dir).with_clock(clock.clone());
        if jobs.iter().any(|j| j.lock == Lock::File) {
            if let Err(p) = check_lock_dir(file.dir()) {
                problems.push(Problem::new(ProblemKind::LockDir, None, p));
            }
        }
        for job in jobs {
            if let Lock::Custom(name) = &job.lock {
                if !settings.custom.contains_key(&**name) {
                    problems.push(unknown_custom(job, name, &settings.custom));
                }
            }
        }
        let redis_jobs = of(Lock::Redis);
        #[cfg(feature = "redis")]
        let redis = if redis_jobs.is_empty() {
            None
        } else if let Some(problem) = settings.redis_url_problem {
            problems.push(Problem::new(
                ProblemKind::MissingUrl,
                crate::job::one_of(&redis_jobs),
                problem,
            ));
            None
        } else {
            RedisStore::open(settings.redis, required, &redis_jobs, problems).await
        };
        #[cfg(not(feature = "redis"))]
        missing_feature("redis", &redis_jobs, problems);
        let postgres_jobs = of(Lock::Postgres);
        #[cfg(feature = "postgres")]
        let postgres = if postgres_jobs.is_empty() {
            None
        } else if let Some(problem) = settings.postgres_url_problem {
            problems.push(Problem::new(
                ProblemKind::MissingUrl,
                crate::job::one_of(&postgres_jobs),
                problem,
            ));
            None
        } else {
            PostgresStore::open(settings.postgres, required, &postgres_jobs, problems).await
        };
        #[cfg(not(feature = "postgres"))]
        missing_feature("postgres", &postgres_jobs, problems);
        let _ = required;
        Stores {
            file,
            #[cfg(feature = "redis")]
            redis,
            #[cfg(feature = "postgres")]
            postgres,
            custom: settings.custom,
            history_retention_days: settings.history_retention_days,
            recent_history: RecentHistory {
                kept: settings.recent_history,
                retention: Duration::from_secs(u64::from(settings.history_retention_days) * 86_400),
            },
            instance: Arc::clone(instance),
            states: Arc::clone(states),
        }
    }

    /// The guard of `job`; `None` for `local` (the job model's own exclusion), or when its store
    /// is not open.
    pub(crate) fn build(&self, job: &Job) -> Option<Arc<dyn Guard>> {
        match &job.lock {
            Lock::Local => None,
            Lock::File => Some(self.file.guard(
                &job.name,
                job.overlap,
                job.misfire_grace,
                self.recent_history,
            )),
            #[cfg(feature = "redis")]
            Lock::Redis => self.redis.as_ref().map(|redis| {
                redis.guard(
                    &job.name,
                    job.lease_or_default(),
                    job.overlap,
                    job.misfire_grace,
                    self.recent_history,
                )
            }),
            #[cfg(feature = "postgres")]
            Lock::Postgres => self.postgres.as_ref().map(|postgres| {
                postgres.guard(
                    &job.name,
                    &self.instance,
                    job.lease_or_default(),
                    job.overlap,
                    job.history,
                    job.misfire_grace,
                )
            }),
            Lock::Custom(name) => self.custom.get(&**name).map(|factory| {
                factory(&GuardSpec {
                    job: job.name.to_string(),
                    lease: job.lease_or_default(),
                    overlap: job.overlap,
                    history: job.history,
                    instance: self.instance.to_string(),
                    misfire_grace: job.misfire_grace,
                })
            }),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }

    /// The control feed of each kind of shared guard among `locks`.
    pub(crate) fn feeds<'a>(&self, locks: impl Iterator<Item = &'a Lock>) -> Feeds {
        let mut feeds = Feeds::new();
        for lock in locks {
            if feeds.contains_key(lock.as_str()) {
                continue;
            }
            let feed: Option<Arc<dyn ControlFeed>> = match lock {
                Lock::File => Some(self.file.feed()),
                #[cfg(feature = "redis")]
                Lock::Redis => self.redis.as_ref().map(RedisStore::feed),
                #[cfg(feature = "postgres")]
                Lock::Postgres => self.postgres.as_ref().map(PostgresStore::feed),
                _ => None,
            };
            if let Some(feed) = feed {
                feeds.insert(lock.as_str(), feed);
            }
        }
        feeds
    }

    /// Deletes old run history now and every hour, when some job keeps it in PostgreSQL.
    pub(crate) fn spawn_retention(&self, stop: &CancellationToken) {
        #[cfg(feature = "postgres")]
        if let Some(postgres) = &self.postgres {
            postgres.spawn_retention(self.history_retention_days, stop);
        }
        #[cfg(not(feature = "postgres"))]
        let _ = (stop, self.history_retention_days);
    }
}

impl GuardMaker for Stores {
    fn guard(&self, job: &Job) -> Result<Option<Arc<dyn Guard>>, String> {
        let guard = self.build(job);
        if guard.is_none() && job.lock != Lock::Local {
            return Err(format!(
                "no store for `lock = \"{}\"` was connected at start; start with a job of that guard or set its URL on the builder",
                job.lock
            ));
        }
        Ok(guard)
    }

    fn problems(&self, job: &Job) -> Vec<String> {
        let mut problems: Vec<String> = job.problems().into_iter().map(|p| p.to_string()).collect();
        for key in job.states.iter().filter(|key| !self.states.contains(key)) {
            problems.push(format!(
                "it needs state of type `{}`, which was never given to `Builder::state`",
                key.name()
            ));
        }
        if job.lock == Lock::File {
            if let Err(p) = check_lock_dir(self.file.dir()) {
                problems.push(p);
            }
        }
        problems
    }
}

/// The problem of a job whose `custom:<name>` guard was never registered.
fn unknown_custom(job: &Job, name: &str, custom: &BTreeMap<String, GuardFactory>) -> Problem {
    let known = if custom.is_empty() {
        "none is registered".to_owned()
    } else {
        format!(
            "registered: {}",
            custom
                .keys()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    Problem::new(
        ProblemKind::UnknownGuard,
        Some(job.name()),
        format!(
            "job `{}` uses `lock = \"custom:{name}\"`, but no guard is registered under `{name}` ({known}); call `Builder::custom_guard(\"{name}\", ...)`",
            job.name()
        ),
    )
}

/// The problem of jobs whose guard this build leaves out.
#[cfg(not(all(feature = "redis", feature = "postgres")))]
fn missing_feature(feature: &str, jobs: &[&Job], problems: &mut Vec<Problem>) {
    if jobs.is_empty() {
        return;
    }
    let default = if feature == "redis" {
        " (it is on by default)"
    } else {
        ""
    };
    problems.push(Problem::new(
        ProblemKind::MissingFeature,
        crate::job::one_of(jobs),
        format!(
            "{} use `lock = \"{feature}\"`, but this build of cronguard has no `{feature}` feature; enable it in Cargo.toml: `cronguard = {{ version = \"...\", features = [\"{feature}\"] }}`{default}",
            crate::job::quoted_names(jobs)
        ),
    ));
}

/// Starts one clock-skew monitor per kind of shared guard with a clock of its own, each
/// warning above a quarter of the smallest lease or grace of its jobs.
pub(crate) async fn spawn_skew_monitors<'a>(
    jobs: impl Iterator<Item = (&'a Job, Option<&'a Arc<dyn Guard>>)>,
    clock: &Clock,
    stop: &CancellationToken,
) {
    let mut kinds: BTreeMap<&'static str, (Arc<dyn Guard>, Duration)> = BTreeMap::new();
    for (job, guard) in jobs {
        let (Some(guard), true) = (guard, job.lock.has_lease()) else {
            continue;
        };
        let limit = job.lease_or_default().min(job.misfire_grace) / 4;
        kinds
            .entry(job.lock.as_str())
            .and_modify(|(_, l)| *l = (*l).min(limit))
            .or_insert_with(|| (Arc::clone(guard), limit));
    }
    for (kind, (guard, limit)) in kinds {
        crate::guard::skew::spawn_monitor(guard, kind, clock.clone(), limit, stop.clone()).await;
    }
}
