//! One runner per fire across processes of one host, with the `file` guard.
//!
//! Start it in two (or more) terminals:
//!
//! ```text
//! cargo run --example file_lock
//! ```
//!
//! Every 2 s exactly one of the processes logs `run started` for the fire; the others log
//! (at debug level, shown here) that the fire was claimed by another process. Kill the one that
//! is running (Ctrl-C or `kill -9`): the kernel frees its lock and the others carry on.
//! The lock files live in `$CRONGUARD_LOCK_DIR` (default: a folder private to the user;
//! docs/design/guard-contract.md).

use std::time::Duration;

use cronguard::{scheduled, JobContext};

#[scheduled(every = "2s", lock = "file")]
async fn rotate_logs(ctx: JobContext) {
    println!(
        "pid {} runs {} (fencing token {})",
        std::process::id(),
        ctx.run_key(),
        ctx.fencing_token()
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
}

#[tokio::main]
async fn main() -> Result<(), cronguard::Error> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,cronguard=debug")),
        )
        .init();
    cronguard::start().await?.run_until_shutdown_signal().await
}
