#![doc = include_str!("../../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod context;
mod registry;

pub use crate::context::JobContext;
pub use cronguard_macros::scheduled;
pub use cronguard_schedule::{Schedule, ScheduleError};

/// What a fire does when no instance slot is free.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Overlap {
    /// Drop the fire now (reported as `skipped`).
    #[default]
    Skip,
    /// Let the fire wait for a slot until its grace runs out.
    Queue,
    /// Cancel the oldest running instance and start this fire.
    Replace,
}

/// Not public API. Used by code that `#[scheduled]` generates.
#[doc(hidden)]
pub mod __private {
    pub use crate::registry::{
        BoxFuture, IntoJobOutcome, JobBody, JobOutcome, StaticGuard, StaticJob, StaticSchedule,
    };
    pub use crate::Overlap;
    pub use inventory;
}
