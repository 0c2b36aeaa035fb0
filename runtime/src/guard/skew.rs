//! Clock skew between this process and a shared guard's store. Per-fire uniqueness does not
//! depend on clocks agreeing, but lateness and leases do: a skew larger than a quarter of the
//! smallest lease or grace of the guard's jobs is reported as a warning, at start and every
//! minute, and published as `cronguard_clock_skew_seconds{guard}`.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use tokio_util::sync::CancellationToken;

use super::{Guard, GuardError};
use crate::clock::Clock;

const CHECK_EVERY: Duration = Duration::from_secs(60);

/// Watches the clock of the store behind `guard` (one guard value stands for all of its kind).
/// `limit` is the skew worth a warning; `kind` labels the metric (`redis`, `postgres`, `custom`).
pub(crate) async fn spawn_monitor(
    guard: Arc<dyn Guard>,
    kind: &'static str,
    clock: Clock,
    limit: Duration,
    stop: CancellationToken,
) {
    if !check(&*guard, kind, &clock, limit).await {
        return; // the guard has no clock of its own
    }
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(CHECK_EVERY) => {
                    check(&*guard, kind, &clock, limit).await;
                }
            }
        }
    });
}

/// The store's clock minus ours, from one round trip (its midpoint); `None` when the guard has
/// no clock of its own.
pub(crate) async fn measure(
    guard: &dyn Guard,
    local_now: impl Fn() -> DateTime<Utc>,
) -> Result<Option<TimeDelta>, GuardError> {
    let before = local_now();
    let server = guard.server_time().await?;
    let after = local_now();
    Ok(server.map(|server| server - (before + (after - before) / 2)))
}

/// Measures once; `false` when the guard has no clock of its own.
async fn check(guard: &dyn Guard, kind: &'static str, clock: &Clock, limit: Duration) -> bool {
    match measure(guard, || clock.now()).await {
        Ok(None) => false,
        Ok(Some(skew)) => {
            crate::metrics::clock_skew(
                kind,
                skew.num_microseconds().unwrap_or(i64::MAX) as f64 / 1e6,
            );
            let abs = skew.abs().to_std().unwrap_or(Duration::MAX);
            if abs > limit {
                tracing::warn!(
                    guard = kind,
                    skew_ms = skew.num_milliseconds(),
                    limit_ms = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX),
                    "this host's clock and the guard's server's differ by more than a quarter of the smallest lease or misfire grace; fires will look late or early here: run NTP on every host"
                );
            } else {
                tracing::debug!(
                    guard = kind,
                    skew_ms = skew.num_milliseconds(),
                    "clock skew against the guard's server"
                );
            }
            true
        }
        Err(e) => {
            tracing::debug!(guard = kind, error = %crate::error::Chain(&e), "could not measure the clock skew against the guard's server");
            true
        }
    }
}
