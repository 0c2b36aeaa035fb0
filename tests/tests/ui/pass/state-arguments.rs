//! A job that takes a context and state values stays callable as an ordinary function.

use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{TimeZone, Utc};
use cronguard::{scheduled, JobContext, State};

struct Counter {
    runs: AtomicU64,
}

struct Settings {
    step: u64,
}

#[scheduled(every = "30s")]
async fn count(ctx: JobContext, counter: State<Counter>, settings: cronguard::State<Settings>) {
    if !ctx.is_cancelled() {
        counter.runs.fetch_add(settings.step, Ordering::Relaxed);
    }
}

#[scheduled(every = "30s")]
fn count_blocking(settings: State<Settings>, counter: State<Counter>) -> Result<(), String> {
    counter.runs.fetch_add(settings.step, Ordering::Relaxed);
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
pub(crate) async fn main() {
    let counter = State::new(Counter {
        runs: AtomicU64::new(0),
    });
    let settings = State::new(Settings { step: 2 });
    let ctx = JobContext::builder("count")
        .fire_time(Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 30).unwrap())
        .fencing_token(7)
        .build();
    count(ctx, counter.clone(), settings.clone()).await;
    assert_eq!(count_blocking(settings, counter.clone()), Ok(()));
    assert_eq!(counter.runs.load(Ordering::Relaxed), 4);
}
