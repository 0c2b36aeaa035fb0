//! The shared guards of a job set: connects the stores the jobs need (PostgreSQL, custom guards
//! registered by the application), builds each job's guard, and starts the checks that watch
//! them (clock skew, history retention).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::error::{Problem, ProblemKind};
use crate::guard::file::FileGuard;
use crate::guard::{Guard, GuardFactory, GuardSpec};
use crate::job::Job;
use crate::options::Lock;

/// The default schema of the `postgres` guard's tables.
pub const DEFAULT_POSTGRES_SCHEMA: &str = "cronguard";

/// How long the run history is kept by default: 30 days.
pub const DEFAULT_HISTORY_RETENTION_DAYS: u32 = 30;

/// Settings of the guards that need a store, from the builder.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub(crate) struct GuardSettings {
    pub(crate) postgres_url: Option<String>,
    pub(crate) postgres_schema: String,
    pub(crate) history_retention_days: u32,
    pub(crate) custom: BTreeMap<String, GuardFactory>,
    /// An unreachable server is a start error.
    pub(crate) required_at_start: bool,
}

/// The stores connected for a job set.
pub(crate) struct Stores {
    #[cfg(feature = "postgres")]
    postgres: Option<Arc<crate::guard::postgres::Database>>,
    custom: BTreeMap<String, GuardFactory>,
    history_retention_days: u32,
}

fn job_list(jobs: &[&Job]) -> String {
    jobs.iter()
        .map(|j| format!("`{}`", j.name()))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Stores {
    /// Connects what `jobs` need; every problem goes to `problems`.
    pub(crate) async fn connect(
        settings: GuardSettings,
        jobs: &[Job],
        problems: &mut Vec<Problem>,
    ) -> Stores {
        for job in jobs {
            if let Lock::Custom(name) = &job.lock {
                if !settings.custom.contains_key(&**name) {
                    let known = if settings.custom.is_empty() {
                        "none is registered".to_owned()
                    } else {
                        format!(
                            "registered: {}",
                            settings
                                .custom
                                .keys()
                                .map(|k| format!("`{k}`"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    };
                    problems.push(Problem::new(
                        ProblemKind::UnknownGuard,
                        Some(job.name()),
                        format!(
                            "job `{}` uses `lock = \"custom:{name}\"`, but no guard is registered under `{name}` ({known}); call `Builder::custom_guard(\"{name}\", ...)`",
                            job.name()
                        ),
                    ));
                }
            }
        }
        let postgres_jobs: Vec<&Job> = jobs.iter().filter(|j| j.lock == Lock::Postgres).collect();
        #[cfg(feature = "postgres")]
        let postgres = if postgres_jobs.is_empty() {
            None
        } else {
            connect_postgres(&settings, &postgres_jobs, problems).await
        };
        #[cfg(not(feature = "postgres"))]
        if !postgres_jobs.is_empty() {
            problems.push(Problem::new(
                ProblemKind::MissingFeature,
                None,
                format!(
                    "{} use `lock = \"postgres\"`, but this build of cronguard has no `postgres` feature; enable it in Cargo.toml: `cronguard = {{ version = \"...\", features = [\"postgres\"] }}`",
                    job_list(&postgres_jobs)
                ),
            ));
        }
        Stores {
            #[cfg(feature = "postgres")]
            postgres,
            custom: settings.custom,
            history_retention_days: settings.history_retention_days,
        }
    }

    /// The guard of `job`: `None` for `local` (the job model's own exclusion) and for `redis`
    /// (built by the caller, which holds the Redis connection).
    pub(crate) fn guard(
        &self,
        job: &Job,
        lock_dir: &Path,
        instance: &Arc<str>,
    ) -> Option<Arc<dyn Guard>> {
        match &job.lock {
            Lock::File => Some(Arc::new(
                FileGuard::new(lock_dir, &job.name).with_overlap(job.overlap),
            )),
            #[cfg(feature = "postgres")]
            Lock::Postgres => self.postgres.as_ref().map(|db| {
                Arc::new(crate::guard::postgres::PostgresGuard::new(
                    Arc::clone(db),
                    &job.name,
                    Arc::clone(instance),
                    job.lease_or_default(),
                    job.overlap,
                    job.history,
                )) as Arc<dyn Guard>
            }),
            Lock::Custom(name) => self.custom.get(&**name).map(|factory| {
                factory(&GuardSpec {
                    job: job.name.to_string(),
                    lease: job.lease_or_default(),
                    overlap: job.overlap,
                    history: job.history,
                    instance: instance.to_string(),
                })
            }),
            _ => None,
        }
    }

    /// The PostgreSQL database, when some job uses it.
    #[cfg(feature = "postgres")]
    pub(crate) fn postgres(&self) -> Option<Arc<crate::guard::postgres::Database>> {
        self.postgres.clone()
    }

    /// Deletes old run history now and every hour, when some job keeps it in PostgreSQL.
    pub(crate) fn spawn_retention(&self, stop: &CancellationToken) {
        #[cfg(feature = "postgres")]
        if let Some(db) = &self.postgres {
            let (db, days, stop) = (Arc::clone(db), self.history_retention_days, stop.clone());
            tokio::spawn(async move {
                loop {
                    match db.prune_history(days).await {
                        Ok(0) => {}
                        Ok(n) => tracing::debug!(deleted = n, days, "old run history deleted"),
                        Err(e) => {
                            tracing::warn!(error = %crate::error::Chain(&e), "could not delete old run history")
                        }
                    }
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        _ = tokio::time::sleep(Duration::from_secs(3600)) => {}
                    }
                }
            });
        }
        #[cfg(not(feature = "postgres"))]
        let _ = (stop, self.history_retention_days);
    }
}

#[cfg(feature = "postgres")]
async fn connect_postgres(
    settings: &GuardSettings,
    jobs: &[&Job],
    problems: &mut Vec<Problem>,
) -> Option<Arc<crate::guard::postgres::Database>> {
    let Some(url) = &settings.postgres_url else {
        problems.push(Problem::new(
            ProblemKind::MissingUrl,
            None,
            format!(
                "{} {} `lock = \"postgres\"` but no PostgreSQL URL is set; set `CRONGUARD_POSTGRES_URL` (or `DATABASE_URL`), or call `Builder::postgres_url`",
                job_list(jobs),
                if jobs.len() == 1 { "uses" } else { "use" },
            ),
        ));
        return None;
    };
    use crate::guard::postgres::{redact, Database, Open};
    let (kind, message) = match Database::open(url, &settings.postgres_schema).await {
        Open::Ready(db) => return Some(Arc::new(db)),
        Open::Unreachable(db, why) if !settings.required_at_start => {
            tracing::warn!(
                postgres = %redact(url),
                error = %why,
                jobs = jobs.len(),
                "PostgreSQL cannot be reached at start; the jobs that use it report their fires as misfires until it answers, and resume then without a restart (the schema is checked at the first statement that reaches it)"
            );
            return Some(Arc::new(db));
        }
        Open::Unreachable(_, why) => (
            ProblemKind::Unreachable,
            format!("cannot be reached ({why}); check `CRONGUARD_POSTGRES_URL` and that the server is up, or let the scheduler start without it (`Builder::require_guards_at_start(false)`, the default)"),
        ),
        Open::Failed(e) if e.contains("exists but is not the one") => (ProblemKind::ForeignTable, e),
        Open::Failed(e) if e.starts_with("PostgreSQL refused") || e.contains("URL is not valid") => (
            ProblemKind::GuardRefused,
            format!("{e}; check the URL, the user, the password and the database in `CRONGUARD_POSTGRES_URL`"),
        ),
        Open::Failed(e) => (ProblemKind::Other, e),
    };
    problems.push(Problem::new(
        kind,
        None,
        format!("PostgreSQL at `{}`: {message}", redact(url)),
    ));
    None
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
