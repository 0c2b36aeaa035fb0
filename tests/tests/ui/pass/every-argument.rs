// Generated code must not trip these in a user's crate.
#![forbid(unsafe_code)]
#![deny(warnings)]

use cronguard::{scheduled, JobContext};

#[scheduled(
    cron = "0 */5 * * * *",
    tz = "Europe/Berlin",
    lock = "redis",
    lease = "10s",
    max_instances = 1,
    overlap = "queue",
    coalesce,
    misfire_grace = "2m",
    name = "billing::settle_orders"
)]
async fn settle_orders(ctx: JobContext) -> anyhow::Result<()> {
    let _ = (ctx.fire_time(), ctx.fencing_token(), ctx.run_key());
    Ok(())
}

#[scheduled(every = "30s", lock = "local", max_instances = 4, overlap = "replace")]
async fn refresh_cache() {}

#[scheduled(
    every = "1h 30m",
    lock = "file",
    overlap = "skip",
    misfire_grace = "500ms"
)]
fn rotate_logs(ctx: JobContext) -> Result<(), String> {
    if ctx.is_cancelled() {
        return Err("cancelled".to_owned());
    }
    Ok(())
}

#[scheduled(cron = "@hourly")]
fn hourly() {}

#[scheduled(
    cron = "0 30 9 * * MON-FRI",
    tz = "America/New_York",
    name = "reports.daily-summary"
)]
fn weekday_report() {}

pub(crate) fn main() {}
