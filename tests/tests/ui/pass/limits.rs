use cronguard::{scheduled, JobContext};

#[scheduled(
    every = "1h",
    timeout = "5m",
    retries = 3,
    backoff = "10s",
    jitter = "30s"
)]
async fn all_limits(ctx: JobContext) -> Result<(), String> {
    let _ = ctx.attempt();
    Ok(())
}

#[scheduled(cron = "0 0 * * * *", retries = 100)]
fn blocking_with_retries(ctx: JobContext) {
    let _ = ctx.is_cancelled();
}

pub(crate) fn main() {}
