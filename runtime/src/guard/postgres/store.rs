//! The PostgreSQL store of a job set: its settings (from the environment and the builder),
//! opening it (at start, with every problem reported at once, and for the command-line tool),
//! the guards and the control feed built on its pool, and the task that deletes old history.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

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
}

impl PostgresSettings {
    /// The settings the environment gives.
    pub(crate) fn from_env() -> Self {
        let env = crate::env::var;
        PostgresSettings {
            url: env("CRONGUARD_POSTGRES_URL").or_else(|| env("DATABASE_URL")),
            schema: env("CRONGUARD_POSTGRES_SCHEMA")
                .unwrap_or_else(|| DEFAULT_POSTGRES_SCHEMA.to_owned()),
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
        let Some(url) = &settings.url else {
            problems.push(Problem::new(
                ProblemKind::MissingUrl,
                crate::job::one_of(jobs),
                format!(
                    "{} {} `lock = \"postgres\"` but no PostgreSQL URL is set; set `CRONGUARD_POSTGRES_URL` (or `DATABASE_URL`), or call `Builder::postgres_url`",
                    crate::job::quoted_names(jobs),
                    if jobs.len() == 1 { "uses" } else { "use" },
                ),
            ));
            return None;
        };
        let (kind, message) = match Database::open(url, &settings.schema).await {
            Open::Ready(db) => return Some(PostgresStore(Arc::new(db))),
            Open::Unreachable(db, why) if !required => {
                tracing::warn!(
                    postgres = %redact(url),
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
        problems.push(Problem::new(
            kind,
            None,
            format!("PostgreSQL at `{}`: {message}", redact(url)),
        ));
        None
    }

    /// Opens the store of the command-line tool; the error says what is wrong and what to check.
    pub(crate) async fn open_for_admin(
        url: &str,
        schema: &str,
        within: Duration,
    ) -> Result<PostgresStore, String> {
        match tokio::time::timeout(within, Database::connect(url, schema)).await {
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
