//! A guard of your own: `lock = "custom:<name>"` and `Builder::custom_guard`.
//!
//! ```text
//! cargo run --example custom_guard
//! ```
//!
//! The guard here keeps its state in memory (`cronguard_examples::memory_guard`): a guard for
//! etcd, DynamoDB or your own table implements the same trait, and proves it keeps the contract
//! with the conformance suite (`cronguard::guard::conformance::check`, feature `conformance`),
//! as `examples/tests/custom_guard.rs` does for this one.

use std::time::Duration;

use cronguard::{scheduled, JobContext};
use cronguard_examples::memory_guard::MemoryGuards;

#[scheduled(every = "2s", lock = "custom:memory", lease = "5s")]
async fn sync_inventory(ctx: JobContext) {
    tracing::info!(fire = %ctx.fire_time(), token = ctx.fencing_token(), "syncing the inventory");
}

#[tokio::main]
async fn main() -> Result<(), cronguard::Error> {
    tracing_subscriber::fmt().with_env_filter("info").init();
    let guards = MemoryGuards::new();
    let handle = cronguard::builder()
        .custom_guard("memory", move |spec| guards.guard(spec))
        .start()
        .await?;
    if std::env::var_os("CRONGUARD_EXAMPLE_ONCE").is_some() {
        tokio::time::sleep(Duration::from_secs(3)).await;
        handle.shutdown().await;
        return Ok(());
    }
    handle.run_until_shutdown_signal().await
}
