//! The choices a job's settings offer: its guard and what a fire does when no slot is free.
//! A leaf module: every layer may name them.

use std::fmt;
use std::sync::Arc;

/// Which guard protects a job's fires.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(rename_all = "snake_case")
)]
#[non_exhaustive]
pub enum Lock {
    /// In-process: `max_instances` at once, each fire once, in this process only.
    #[default]
    Local,
    /// `flock` on a file in the lock dir: one run at a time, each fire once, across every process
    /// of one host.
    File,
    /// Redis: one run at a time, each fire once, across a cluster.
    Redis,
    /// PostgreSQL: one run at a time, each fire once, across a cluster, with run history.
    Postgres,
    /// A guard of the application's own, registered under this name with
    /// [`Builder::custom_guard`](crate::Builder::custom_guard) (`lock = "custom:<name>"`).
    Custom(Arc<str>),
}

impl Lock {
    /// The guard a job names with `lock = "custom:<name>"`.
    pub fn custom(name: impl Into<Arc<str>>) -> Self {
        Lock::Custom(name.into())
    }

    /// `local`, `file`, `redis`, `postgres` or `custom`: the guard's kind, as metrics label it.
    pub const fn as_str(&self) -> &'static str {
        match self {
            Lock::Local => "local",
            Lock::File => "file",
            Lock::Redis => "redis",
            Lock::Postgres => "postgres",
            Lock::Custom(_) => "custom",
        }
    }

    /// Whether runs hold an expiring lease in a store shared by a cluster (`redis`, `postgres`
    /// and custom guards), so that `lease` applies.
    pub const fn has_lease(&self) -> bool {
        matches!(self, Lock::Redis | Lock::Postgres | Lock::Custom(_))
    }
}

impl fmt::Display for Lock {
    /// The value of `lock = "..."`: `local`, `file`, `redis`, `postgres` or `custom:<name>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Lock::Custom(name) => write!(f, "custom:{name}"),
            other => f.write_str(other.as_str()),
        }
    }
}

/// What a fire does when no instance slot is free (`overlap = "..."`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Overlap {
    /// Drop the fire now; it is reported as `skipped`.
    #[default]
    Skip,
    /// Let the fire wait for a slot until its misfire grace runs out.
    Queue,
    /// Cancel the oldest running instance (through its [`JobContext`](crate::JobContext)) and start this fire when
    /// its slot is free.
    Replace,
}
