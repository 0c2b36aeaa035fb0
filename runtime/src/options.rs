//! The choices a job's settings offer: its guard and what a fire does when no slot is free.
//! A leaf module: every layer may name them.

use std::fmt;

/// Which guard protects a job's fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
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
}

impl Lock {
    /// `local`, `file` or `redis`: the value of `lock = "..."`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Lock::Local => "local",
            Lock::File => "file",
            Lock::Redis => "redis",
        }
    }
}

impl fmt::Display for Lock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
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
