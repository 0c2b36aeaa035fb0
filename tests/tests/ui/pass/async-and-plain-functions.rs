// Generated code must not trip these in a user's crate.
#![forbid(unsafe_code)]
#![deny(warnings)]

use cronguard::{scheduled, JobContext};

#[scheduled(every = "1s")]
async fn async_without_context() {}

#[scheduled(every = "1s")]
async fn async_with_context(ctx: JobContext) {
    ctx.cancelled().await;
}

#[scheduled(every = "1s")]
fn plain_without_context() {}

#[scheduled(every = "1s")]
fn plain_with_context(ctx: JobContext) {
    let _ = ctx.job_name();
}

// Any pattern for the context, and a path to the type.
#[scheduled(every = "1s")]
fn ignores_context(_: JobContext) {}

#[scheduled(every = "1s")]
async fn underscore_context(_ctx: cronguard::JobContext) {}

#[scheduled(every = "1s")]
async fn mutable_context(mut ctx: ::cronguard::JobContext) {
    ctx = ctx.clone();
    let _ = ctx;
}

pub mod public {
    use cronguard::scheduled;

    // Visibility, attributes and doc comments are kept.
    /// A documented public job.
    #[scheduled(every = "1s")]
    #[allow(clippy::unused_async)]
    pub async fn documented() {}
}

pub(crate) fn main() {}
