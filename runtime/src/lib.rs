//! Scheduled jobs for Rust services that start **at most once per scheduled fire** — in one
//! process, in several processes of one host, or across the replicas of a cluster — and report
//! **every fire that does not start**, so a job never stops silently.
//!
//! A fire is the pair *(job, T)*, where `T` is the instant the schedule names (not the moment a
//! timer woke). A guard lets one process claim each fire; a fire that is skipped (the previous run
//! is still going), misfired (too late to start), coalesced, or claimed by another process is an
//! event, a log record and a metric. With the fencing token checked where the side effect lands
//! ([Exactly once, end to end]), that is exactly once end to end.
//!
//! # A first job
//!
//! ```no_run
//! use cronguard::{scheduled, JobContext, State};
//!
//! struct Db; // the application's pool
//!
//! /// Every 30 s, in this process only (`lock = "local"`, the default).
//! #[scheduled(every = "30s")]
//! async fn settle(ctx: JobContext, db: State<Db>) -> anyhow::Result<()> {
//!     tracing::info!(run_key = %ctx.run_key(), fencing_token = ctx.fencing_token(), "settling");
//!     let _db: &Db = &db;
//!     Ok(())
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), cronguard::Error> {
//!     tracing_subscriber::fmt().init(); // cronguard logs through `tracing`
//!     cronguard::builder()
//!         .state(Db)
//!         .start()
//!         .await?
//!         .run_until_shutdown_signal()
//!         .await
//! }
//! ```
//!
//! Every `#[scheduled]` function of the binary (any module, any linked crate) is registered at
//! compile time and started by [`start`] or [`Builder::start`]; its arguments are checked at
//! compile time and described in [`scheduled`]. Jobs can also be built in code ([`Job`]) or read
//! from configuration ([`JobConfig`]), and their schedule, `enabled` and limits overridden at start
//! from environment variables or a file ([`Builder::overrides_from`], [Overriding settings at
//! start]).
//!
//! # The book
//!
//! Everything else is in the book, in the repository's `docs/` folder, whose Rust examples run as
//! doc tests: [the guide] (state, testing a job, fires, overlap, downtime, retries, controls,
//! settings), [operations] (Redis, PostgreSQL, the command-line tool, the dashboard, metrics, a
//! production checklist) and [the design] ([guarantees], the simulation, the guard contract).
//!
//! # Features
//!
//! - `redis` (default): the `redis` guard; `redis-tls` (or `redis-tls-webpki-roots`) adds
//!   `rediss://` URLs.
//! - `postgres`: the `postgres` guard and its run history; `postgres-tls` adds TLS as the URL's
//!   `sslmode` asks (rustls).
//! - `conformance`: the guard conformance suite (`cronguard::guard::conformance`), for tests of a
//!   guard of your own.
//! - `serde`: `Serialize` for the status, events, health and history (and `Deserialize` for jobs
//!   from configuration).
//! - `toml`: overrides of the jobs' settings from a TOML file (`Builder::overrides_file`,
//!   `CRONGUARD_OVERRIDES_FILE`); the overrides from environment variables need no feature
//!   ([Overriding settings at start]).
//! - `prometheus`: [`metrics::prometheus_builder`], a Prometheus exporter with cronguard's
//!   histogram buckets.
//!
//! [Exactly once, end to end]: https://example.invalid/cronguard/blob/main/docs/design/guarantees.md#exactly-once-end-to-end
//! [the guide]: https://example.invalid/cronguard/blob/main/docs/README.md#guide
//! [operations]: https://example.invalid/cronguard/blob/main/docs/README.md#operations
//! [the design]: https://example.invalid/cronguard/blob/main/docs/README.md#design
//! [guarantees]: https://example.invalid/cronguard/blob/main/docs/design/guarantees.md
//! [Overriding settings at start]: https://example.invalid/cronguard/blob/main/docs/guide/overrides.md

#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod admin;
mod cancel;
mod clock;
mod config;
mod context;
mod control;
mod env;
mod error;
mod events;
mod executor;
mod fire;
pub mod guard;
mod guards;
mod handle;
mod health;
pub mod history;
mod job;
mod job_config;
mod liveness;
pub mod metrics;
mod model;
mod operate;
mod options;
mod overrides;
mod private_dir;
mod registry;
mod selection;
#[cfg(test)]
mod sim;
mod state;
mod state_dir;
mod status;

pub use crate::clock::Clock;
pub use crate::config::{builder, start, Builder, DEFAULT_SHUTDOWN_TIMEOUT};
pub use crate::context::{CancelHandle, JobContext, JobContextBuilder};
pub use crate::control::{ManualRun, Pause};
pub use crate::error::{Error, Problem, ProblemKind};
pub use crate::events::{
    CancelReason, Event, EventKind, FailureReason, EVENT_STREAM_CAPACITY, HOOK_QUEUE_CAPACITY,
};
pub use crate::guard::partitions::PARTITION_LEASE;
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub use crate::guard::postgres::{
    DEFAULT_POSTGRES_CONNECT_TIMEOUT, DEFAULT_POSTGRES_POOL_SIZE,
    DEFAULT_POSTGRES_POOL_WAIT_TIMEOUT, DEFAULT_POSTGRES_SCHEMA,
};
pub use crate::handle::{Cronguard, HistoryError, JobsPage, Monitor};
pub use crate::health::{Health, HealthState, JobHealth};
pub use crate::history::DEFAULT_HISTORY_RETENTION_DAYS;
pub use crate::job::{Job, DEFAULT_LEASE, DEFAULT_MISFIRE_GRACE, DEFAULT_STANDBY, MAX_CLAIM_AHEAD};
pub use crate::job_config::{JobConfig, JobConfigError};
pub use crate::operate::ControlError;
pub use crate::options::{Lock, Overlap, ParseOptionError};
pub use crate::overrides::{override_variable, OverrideSource, SettingOverride};
pub use crate::registry::IntoJobOutcome;
pub use crate::state::{MissingState, State};
pub use crate::status::{Counts, JobStatus, RunRecord};
pub use cronguard_macros::scheduled;
pub use cronguard_schedule::{
    CronError, Fires, FiresBefore, Schedule, ScheduleError, MAX_LEASE, MIN_LEASE,
};
/// `deadpool-postgres` 0.14, whose [`Pool`](deadpool_postgres::Pool)
/// [`Builder::postgres_pool`] takes (and, as `deadpool_postgres::tokio_postgres`, the
/// `tokio-postgres` it is built on): an application that makes its pool with this re-export
/// always has the version cronguard was built with.
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub use deadpool_postgres;

/// Not public API. Lets the benchmarks drive a guard directly.
#[cfg(feature = "redis")]
#[doc(hidden)]
pub mod __bench {
    #[cfg(feature = "postgres")]
    use std::sync::Arc;
    use std::time::Duration;

    use crate::guard::redis::{connect, Batcher, RedisGuard};
    use crate::guard::{Claim, Guard};

    /// Claims fire `fire_ms` through `guard` and releases it at once; `true` when acquired.
    async fn claim_release(guard: &dyn Guard, fire_ms: i64) -> Result<bool, String> {
        let fire = chrono::DateTime::<chrono::Utc>::from_timestamp_millis(fire_ms)
            .ok_or("fire out of range")?;
        match guard.claim(fire).await.map_err(|e| e.to_string())? {
            Claim::Acquired(lease) => {
                lease.release().await.map_err(|e| e.to_string())?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// A `postgres` guard of one job.
    #[cfg(feature = "postgres")]
    pub struct PostgresClaimer(crate::guard::postgres::PostgresGuard);

    #[cfg(feature = "postgres")]
    impl PostgresClaimer {
        /// Connects (creating the schema) and builds the guard of `job`.
        pub async fn connect(url: &str, job: &str) -> Result<Self, String> {
            let db = crate::guard::postgres::Database::connect(url, "cronguard").await?;
            Ok(Self::on(Arc::new(db), job))
        }

        /// Statements sent so far on these connections (each one round trip).
        pub fn statements(&self) -> u64 {
            self.0.database().statements()
        }

        /// Another job's guard on the same connections.
        pub fn sibling(&self, job: &str) -> Self {
            Self::on(Arc::clone(self.0.database()), job)
        }

        fn on(db: Arc<crate::guard::postgres::Database>, job: &str) -> Self {
            PostgresClaimer(crate::guard::postgres::PostgresGuard::new(
                db,
                job,
                Arc::from("bench"),
                Duration::from_secs(30),
                crate::options::Overlap::Skip,
                false,
            ))
        }

        /// Claims fire `fire_ms` and releases it at once; `true` when the claim was acquired.
        pub async fn claim_release(&self, fire_ms: i64) -> Result<bool, String> {
            claim_release(&self.0, fire_ms).await
        }
    }

    /// The Lua of the Redis guard's batch script, so that a benchmark can load it and measure the
    /// server's own ceiling for claims (op code `c`: 4 keys — lock, state, cancel, report record —
    /// and 8 arguments — fire ms, token, lease ms, replace `0`/`1`, ahead tolerance ms, skip
    /// `0`/`1`, nonce, report TTL ms).
    pub const REDIS_BATCH_SCRIPT: &str = crate::guard::redis::BATCH_LUA;

    /// The connection the `redis` guards share.
    #[derive(Clone)]
    pub struct RedisConnection(crate::guard::redis::RedisConn);

    /// Connects to Redis the way the guards do.
    pub async fn redis_connection(url: &str) -> Result<RedisConnection, String> {
        connect(url).await.map(RedisConnection)
    }

    /// A `redis` guard of one job.
    pub struct RedisClaimer(RedisGuard);

    impl RedisClaimer {
        /// Connects the guard of `job`.
        pub async fn connect(url: &str, job: &str) -> Result<Self, String> {
            Ok(Self::with_connection(redis_connection(url).await?, job))
        }

        /// The guard of `job` on a given connection.
        pub fn with_connection(conn: RedisConnection, job: &str) -> Self {
            let lease = Duration::from_secs(30);
            RedisClaimer(RedisGuard::new(
                conn.0.clone(),
                Batcher::new(conn.0),
                "cronguard",
                job,
                lease,
                crate::options::Overlap::Skip,
            ))
        }

        /// Claims fire `fire_ms` and releases it at once; `true` when the claim was acquired.
        pub async fn claim_release(&self, fire_ms: i64) -> Result<bool, String> {
            claim_release(&self.0, fire_ms).await
        }

        /// Acquired claims wait until `replicas` replicas have them (`WAIT`), as with
        /// `Builder::redis_wait_for_replicas`; they go through `conn`, and so do renewals.
        /// Must be called inside a tokio runtime.
        pub fn waiting_for_replicas(
            self,
            replicas: u32,
            timeout: Duration,
            conn: RedisConnection,
        ) -> Result<Self, String> {
            let wait = crate::guard::redis::ReplicaWait::check(replicas, timeout)?;
            let replication = crate::guard::redis::Replication::new(wait, conn.0.clone(), conn.0);
            Ok(RedisClaimer(self.0.waiting_for_replicas(Some(replication))))
        }
    }
}

/// Not public API. Used by code that `#[scheduled]` generates.
#[doc(hidden)]
pub mod __private {
    pub use crate::context::FromContext;
    pub use crate::options::Overlap;
    pub use crate::registry::{
        BoxFuture, IntoJobOutcome, JobBody, JobOutcome, StaticGuard, StaticJob, StaticSchedule,
    };
    pub use crate::state::StateKey;
    pub use inventory;

    /// Emitted by `#[scheduled(lock = "redis")]`, spanned on `"redis"`: nothing when the
    /// `redis` feature is on, a compile error naming the feature when it is off.
    #[cfg(feature = "redis")]
    #[doc(hidden)]
    #[macro_export]
    macro_rules! __cronguard_require_redis_feature {
        () => {};
    }

    /// See the other definition.
    #[cfg(not(feature = "redis"))]
    #[doc(hidden)]
    #[macro_export]
    macro_rules! __cronguard_require_redis_feature {
        () => {
            ::core::compile_error!(
                "`lock = \"redis\"` needs the `redis` feature of `cronguard`; enable it in Cargo.toml: `cronguard = { version = \"...\", features = [\"redis\"] }` (it is on by default)"
            );
        };
    }

    #[doc(hidden)]
    pub use crate::__cronguard_require_redis_feature as require_redis_feature;

    /// Emitted by `#[scheduled(lock = "postgres")]`, spanned on `"postgres"`: nothing when the
    /// `postgres` feature is on, a compile error naming the feature when it is off.
    #[cfg(feature = "postgres")]
    #[doc(hidden)]
    #[macro_export]
    macro_rules! __cronguard_require_postgres_feature {
        () => {};
    }

    /// See the other definition.
    #[cfg(not(feature = "postgres"))]
    #[doc(hidden)]
    #[macro_export]
    macro_rules! __cronguard_require_postgres_feature {
        () => {
            ::core::compile_error!(
                "`lock = \"postgres\"` needs the `postgres` feature of `cronguard`; enable it in Cargo.toml: `cronguard = { version = \"...\", features = [\"postgres\"] }`"
            );
        };
    }

    #[doc(hidden)]
    pub use crate::__cronguard_require_postgres_feature as require_postgres_feature;
}
