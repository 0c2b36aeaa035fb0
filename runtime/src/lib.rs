#![doc = include_str!("../../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod cancel;
mod clock;
mod config;
mod context;
mod error;
mod events;
mod executor;
mod fire;
pub mod guard;
mod handle;
mod health;
mod job;
mod metrics;
mod model;
mod options;
mod registry;
#[cfg(test)]
mod sim;
mod state;
mod status;

pub use crate::clock::Clock;
pub use crate::config::{builder, start, Builder, DEFAULT_SHUTDOWN_TIMEOUT};
pub use crate::context::{CancelHandle, JobContext, JobContextBuilder};
pub use crate::error::{Error, Problem, ProblemKind};
pub use crate::events::{
    CancelReason, Event, EventKind, EVENT_STREAM_CAPACITY, HOOK_QUEUE_CAPACITY,
};
pub use crate::handle::{Cronguard, Monitor};
pub use crate::health::{Health, HealthState, JobHealth};
pub use crate::job::{Job, DEFAULT_LEASE, DEFAULT_MISFIRE_GRACE};
pub use crate::options::{Lock, Overlap};
pub use crate::registry::IntoJobOutcome;
pub use crate::state::{MissingState, State};
pub use crate::status::{Counts, JobStatus, RunRecord};
pub use cronguard_macros::scheduled;
pub use cronguard_schedule::{Fires, Schedule, ScheduleError, MAX_LEASE, MIN_LEASE};

/// Not public API. Lets the benchmarks drive a guard directly.
#[cfg(feature = "redis")]
#[doc(hidden)]
pub mod __bench {
    use std::sync::Arc;
    use std::time::Duration;

    use crate::guard::redis::{connect, RedisGuard, Scripts};
    use crate::guard::{Claim, Guard};

    /// A `redis` guard of one job.
    pub struct RedisClaimer(RedisGuard);

    impl RedisClaimer {
        /// Connects the guard of `job`.
        pub async fn connect(url: &str, job: &str) -> Result<Self, String> {
            Ok(Self::with_connection(connect(url).await?, job))
        }

        /// The guard of `job` on a given connection.
        pub fn with_connection(conn: redis::aio::ConnectionManager, job: &str) -> Self {
            let scripts = Arc::new(Scripts::new());
            let lease = Duration::from_secs(30);
            RedisClaimer(RedisGuard::new(
                conn,
                scripts,
                "cronguard",
                job,
                lease,
                crate::options::Overlap::Skip,
            ))
        }

        /// Claims fire `fire_ms` and releases it at once; `true` when the claim was acquired.
        pub async fn claim_release(&self, fire_ms: i64) -> Result<bool, String> {
            let fire = chrono::DateTime::<chrono::Utc>::from_timestamp_millis(fire_ms)
                .ok_or("fire out of range")?;
            match self.0.claim(fire).await.map_err(|e| e.to_string())? {
                Claim::Acquired(lease) => {
                    lease.release().await.map_err(|e| e.to_string())?;
                    Ok(true)
                }
                _ => Ok(false),
            }
        }
    }
}

/// Not public API. Used by code that `#[scheduled]` generates.
#[doc(hidden)]
pub mod __private {
    pub use crate::options::Overlap;
    pub use crate::registry::{
        BoxFuture, IntoJobOutcome, JobBody, JobOutcome, StaticGuard, StaticJob, StaticSchedule,
    };
    pub use crate::state::{FromContext, StateKey};
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
}
