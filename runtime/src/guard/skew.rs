//! Clock skew between this process and Redis. Per-fire uniqueness does not depend on clocks
//! agreeing, but lateness and leases do: a skew larger than a quarter of the smallest lease or
//! grace of the `redis` jobs is reported as a warning, at start and every minute.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::guard::redis::clock_skew;
use crate::job::Job;
use crate::options::Lock;

const CHECK_EVERY: Duration = Duration::from_secs(60);

pub(crate) async fn spawn_monitor(
    mut conn: redis::aio::ConnectionManager,
    clock: Clock,
    jobs: &[Job],
    stop: CancellationToken,
) {
    let limit = jobs
        .iter()
        .filter(|j| j.lock == Lock::Redis)
        .flat_map(|j| [j.lease_or_default(), j.misfire_grace])
        .min()
        .unwrap_or(Duration::from_secs(30))
        / 4;
    check(&mut conn, &clock, limit).await;
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(CHECK_EVERY) => check(&mut conn, &clock, limit).await,
            }
        }
    });
}

async fn check(conn: &mut redis::aio::ConnectionManager, clock: &Clock, limit: Duration) {
    match clock_skew(conn, || clock.now()).await {
        Ok(skew) => {
            crate::metrics::clock_skew(skew.num_microseconds().unwrap_or(i64::MAX) as f64 / 1e6);
            let abs = skew.abs().to_std().unwrap_or(Duration::MAX);
            if abs > limit {
                tracing::warn!(
                    skew_ms = skew.num_milliseconds(),
                    limit_ms = limit.as_millis() as u64,
                    "this host's clock and the Redis server's differ by more than a quarter of the smallest lease or misfire grace; fires will look late or early here: run NTP on every host"
                );
            } else {
                tracing::debug!(
                    skew_ms = skew.num_milliseconds(),
                    "clock skew against Redis"
                );
            }
        }
        Err(e) => {
            tracing::debug!(error = %crate::error::Chain(&e), "could not measure clock skew against Redis")
        }
    }
}
