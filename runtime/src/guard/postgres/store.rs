//! The PostgreSQL store of a job set: its settings (from the environment and the builder),
//! opening it (at start, with every problem reported at once, and for the command-line tool),
//! the guards and the control feed built on its pool, and the task that deletes old history.

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::Pool;
use tokio_util::sync::CancellationToken;

use super::connect::{PoolOptions, PostgresTlsSettings, Target};
use super::{redact, Database, Open, PostgresFeed, PostgresGuard};
use crate::error::{Problem, ProblemKind};
use crate::guard::feed::ControlFeed;
use crate::guard::Guard;
use crate::job::Job;
use crate::options::Overlap;

/// The default schema of the `postgres` guard's tables.
pub const DEFAULT_POSTGRES_SCHEMA: &str = "cronguard";

/// The settings of the `postgres` guards, as given.
#[derive(Debug, Clone)]
pub(crate) struct PostgresSettings {
    /// `CRONGUARD_POSTGRES_URL` or `DATABASE_URL`, or `Builder::postgres_url`.
    pub(crate) url: Option<String>,
    /// `CRONGUARD_POSTGRES_SCHEMA`, or `Builder::postgres_schema`.
    pub(crate) schema: String,
    /// The CA and client certificate files outside the URL.
    pub(crate) tls: PostgresTlsSettings,
    /// The size and timeouts of the pool cronguard makes.
    pub(crate) pool: PoolOptions,
    /// The application's pool (`Builder::postgres_pool`), used instead of a URL.
    pub(crate) shared: Option<Pool>,
    /// The builder methods called that set up a connection of cronguard's own, by name
    /// (`postgres_url`, `postgres_tls_ca`, `postgres_tls_client_cert`, `postgres_pool_size`,
    /// `postgres_connect_timeout`): with the application's pool they would be ignored, so they
    /// are a start error.
    pub(crate) in_code: Vec<&'static str>,
    /// Variables of the environment that cannot be read, each saying what to write instead.
    pub(crate) env_problems: Vec<String>,
}

impl PostgresSettings {
    /// The settings the environment gives.
    pub(crate) fn from_env() -> Self {
        let env = crate::env::var;
        let mut env_problems = Vec::new();
        let size = env("CRONGUARD_POSTGRES_POOL_SIZE").and_then(|text| {
            match text.trim().parse::<usize>() {
                Ok(size) => Some(size),
                Err(_) => {
                    env_problems.push(format!(
                        "`CRONGUARD_POSTGRES_POOL_SIZE={text}` is not a number of connections; give 1 or more (the default is 8)"
                    ));
                    None
                }
            }
        });
        PostgresSettings {
            url: env("CRONGUARD_POSTGRES_URL").or_else(|| env("DATABASE_URL")),
            schema: env("CRONGUARD_POSTGRES_SCHEMA")
                .unwrap_or_else(|| DEFAULT_POSTGRES_SCHEMA.to_owned()),
            tls: PostgresTlsSettings::from_env(),
            pool: PoolOptions {
                size,
                ..PoolOptions::default()
            },
            shared: None,
            in_code: Vec::new(),
            env_problems,
        }
    }

    /// `url` and `schema` alone: nothing from the environment.
    pub(crate) fn for_url(url: &str, schema: &str) -> Self {
        PostgresSettings {
            url: Some(url.to_owned()),
            schema: schema.to_owned(),
            tls: PostgresTlsSettings::default(),
            pool: PoolOptions::default(),
            shared: None,
            in_code: Vec::new(),
            env_problems: Vec::new(),
        }
    }

    /// Notes that the builder method `method` was called (see [`PostgresSettings::in_code`]).
    pub(crate) fn set_in_code(&mut self, method: &'static str) {
        if !self.in_code.contains(&method) {
            self.in_code.push(method);
        }
    }

    /// The store as messages name it: its URL without the password, or the application's pool.
    pub(crate) fn shown(&self) -> String {
        match (&self.shared, &self.url) {
            (Some(_), _) => {
                "the application's PostgreSQL pool (`Builder::postgres_pool`)".to_owned()
            }
            (None, Some(url)) => format!("PostgreSQL at `{}`", redact(url)),
            (None, None) => "PostgreSQL".to_owned(),
        }
    }

    /// The pool the guards use and how long a statement waits for one of its connections, or
    /// every problem of the settings with its kind; none of its connections is made yet. No URL
    /// and no pool is a problem of kind [`ProblemKind::MissingUrl`].
    pub(crate) fn pool(&self) -> Result<(Pool, Duration), Vec<(ProblemKind, String)>> {
        if let Some(pool) = &self.shared {
            let conflicting: Vec<String> = self
                .in_code
                .iter()
                .map(|method| format!("`Builder::{method}`"))
                .collect();
            let mut problems: Vec<(ProblemKind, String)> = PoolOptions {
                wait_timeout: self.pool.wait_timeout,
                ..PoolOptions::default()
            }
            .problems()
            .into_iter()
            .map(|text| (ProblemKind::Other, text))
            .collect();
            if !conflicting.is_empty() {
                problems.push((ProblemKind::Other, format!(
                    "`Builder::postgres_pool` hands cronguard the application's pool, which makes its connections with its own URL, TLS, size and timeouts, but {} {} set too; remove {}, or `Builder::postgres_pool`",
                    conflicting.join(", "),
                    if conflicting.len() == 1 { "is" } else { "are" },
                    if conflicting.len() == 1 { "it" } else { "them" },
                )));
            }
            if !problems.is_empty() {
                return Err(problems);
            }
            let ignored: Vec<&str> = [
                (
                    "CRONGUARD_POSTGRES_URL",
                    crate::env::var("CRONGUARD_POSTGRES_URL").is_some(),
                ),
                (
                    "CRONGUARD_POSTGRES_POOL_SIZE",
                    crate::env::var("CRONGUARD_POSTGRES_POOL_SIZE").is_some(),
                ),
                ("CRONGUARD_POSTGRES_CA_FILE", self.tls.ca.is_some()),
                (
                    "CRONGUARD_POSTGRES_CLIENT_CERT_FILE",
                    self.tls.client_cert.is_some(),
                ),
            ]
            .into_iter()
            .filter_map(|(name, set)| set.then_some(name))
            .collect();
            if !ignored.is_empty() {
                tracing::info!(
                    ignored = %ignored.join(", "),
                    "the `postgres` guards use the application's pool (`Builder::postgres_pool`); the connection settings of the environment are not used"
                );
            }
            return Ok((pool.clone(), self.pool.shared_deadline()));
        }
        let mut problems: Vec<(ProblemKind, String)> = self
            .env_problems
            .iter()
            .chain(&self.pool.problems())
            .map(|text| (ProblemKind::Other, text.clone()))
            .collect();
        let Some(url) = &self.url else {
            problems.push((ProblemKind::MissingUrl, "no PostgreSQL URL is set; set `CRONGUARD_POSTGRES_URL` (or `DATABASE_URL`), or call `Builder::postgres_url` (or `Builder::postgres_pool`)".to_owned()));
            return Err(problems);
        };
        let pool = Target::parse(url, &self.tls).and_then(|target| target.pool(&self.pool));
        match pool {
            Ok(pool) if problems.is_empty() => Ok(pool),
            Ok(_) => Err(problems),
            Err(why) => {
                problems.push((ProblemKind::GuardRefused, why));
                Err(problems)
            }
        }
    }
}

/// The pool every `postgres` job of a scheduler shares (or the command-line tool's).
pub(crate) struct PostgresStore(Arc<Database>);

impl PostgresStore {
    /// The guard of job `job` on this pool; `instance` names this process in the history.
    pub(crate) fn guard(
        &self,
        job: &str,
        instance: &Arc<str>,
        lease: Duration,
        overlap: Overlap,
        history: bool,
        grace: Duration,
    ) -> Arc<dyn Guard> {
        Arc::new(
            PostgresGuard::new(
                Arc::clone(&self.0),
                job,
                Arc::clone(instance),
                lease,
                overlap,
                history,
            )
            .with_misfire_grace(grace),
        )
    }

    /// The control feed of this store.
    pub(crate) fn feed(&self) -> Arc<dyn ControlFeed> {
        Arc::new(PostgresFeed::new(Arc::clone(&self.0)))
    }

    /// Opens the store of `jobs` at start; every problem goes to `problems`. A server that does
    /// not answer is a problem only when `required`: otherwise its jobs misfire until it answers.
    pub(crate) async fn open(
        settings: PostgresSettings,
        required: bool,
        jobs: &[&Job],
        problems: &mut Vec<Problem>,
    ) -> Option<PostgresStore> {
        if settings.url.is_none() && settings.shared.is_none() {
            problems.push(Problem::new(
                ProblemKind::MissingUrl,
                crate::job::one_of(jobs),
                format!(
                    "{} {} `lock = \"postgres\"` but no PostgreSQL URL is set; set `CRONGUARD_POSTGRES_URL` (or `DATABASE_URL`), or call `Builder::postgres_url` (or hand over the application's pool with `Builder::postgres_pool`)",
                    crate::job::quoted_names(jobs),
                    if jobs.len() == 1 { "uses" } else { "use" },
                ),
            ));
            return None;
        }
        let shown = settings.shown();
        let (pool, wait) = match settings.pool() {
            Ok(pool) => pool,
            Err(found) => {
                for (kind, text) in found {
                    problems.push(Problem::new(kind, None, format!("{shown}: {text}")));
                }
                return None;
            }
        };
        let (kind, message) = match Database::open(pool, wait, &settings.schema).await {
            Open::Ready(db) => return Some(PostgresStore(Arc::new(db))),
            Open::Unreachable(db, why) if !required => {
                tracing::warn!(
                    postgres = %shown,
                    error = %why,
                    jobs = jobs.len(),
                    "PostgreSQL cannot be reached at start; the jobs that use it report their fires as misfires until it answers, and resume then without a restart (the schema is checked at the first statement that reaches it)"
                );
                return Some(PostgresStore(Arc::new(db)));
            }
            Open::Unreachable(_, why) => (
                ProblemKind::Unreachable,
                format!("cannot be reached ({why}); check `CRONGUARD_POSTGRES_URL` and that the server is up, or let the scheduler start without it (`Builder::require_guards_at_start(false)`, the default)"),
            ),
            Open::Failed(failure) => (failure.problem_kind(), failure.to_string()),
        };
        problems.push(Problem::new(kind, None, format!("{shown}: {message}")));
        None
    }

    /// Opens the store of the command-line tool; the error says what is wrong and what to check.
    pub(crate) async fn open_for_admin(
        settings: &PostgresSettings,
        within: Duration,
    ) -> Result<PostgresStore, String> {
        match tokio::time::timeout(within, Database::connect_with(settings)).await {
            Ok(Ok(db)) => Ok(PostgresStore(Arc::new(db))),
            Ok(Err(problem)) => Err(format!(
                "{problem}; check the URL, the user, the password and the schema"
            )),
            Err(_) => Err(format!(
                "it did not answer within {} s; check the URL and that the server is up",
                within.as_secs()
            )),
        }
    }

    /// Deletes run history older than `days` now and every hour, until `stop`.
    pub(crate) fn spawn_retention(&self, days: u32, stop: &CancellationToken) {
        let (db, stop) = (Arc::clone(&self.0), stop.clone());
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
}
