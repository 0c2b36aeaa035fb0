//! `cronguard::builder()` reads the overrides from the process environment:
//! `CRONGUARD_JOB__<JOB>__<KEY>` variables and the file `CRONGUARD_OVERRIDES_FILE` names
//! (docs/guide/overrides.md). The only test of its binary, so that the variables it sets reach no
//! other test; `overrides.rs` covers the rest with `Builder::overrides_from`.

use chrono::{DateTime, Utc};
use cronguard::{scheduled, Clock, JobContext, OverrideSource, State};
use tokio::sync::mpsc;

struct Runs(mpsc::UnboundedSender<(&'static str, DateTime<Utc>)>);

#[scheduled(every = "1h", name = "reports::nightly")]
async fn nightly(ctx: JobContext, runs: State<Runs>) {
    let _ = runs.0.send(("reports::nightly", ctx.fire_time()));
}

#[scheduled(every = "10s", name = "cleanup")]
async fn cleanup(ctx: JobContext, runs: State<Runs>) {
    let _ = runs.0.send(("cleanup", ctx.fire_time()));
}

#[test]
fn the_environment_overrides_the_attribute() {
    let dir = std::env::temp_dir().join(format!("cronguard-overrides-env-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    let file = dir.join("overrides.toml");
    std::fs::write(&file, "[[job]]\nname = \"cleanup\"\nenabled = false\n").expect("written");
    std::env::set_var("CRONGUARD_JOB__REPORTS__NIGHTLY__EVERY", "20s");
    std::env::set_var("CRONGUARD_OVERRIDES_FILE", &file);

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let t0 = DateTime::parse_from_rfc3339("2026-01-01T00:00:00.500Z")
            .expect("a valid instant")
            .with_timezone(&Utc);
        let (tx, mut rx) = mpsc::unbounded_channel();
        let handle = cronguard::builder()
            .clock(Clock::anchored(t0))
            .state(Runs(tx))
            .shutdown_timeout(std::time::Duration::ZERO)
            .start()
            .await
            .expect("starts");
        let mut runs = Vec::new();
        while runs.len() < 2 {
            let (job, fire) = rx.recv().await.expect("the scheduler runs");
            runs.push((job, fire.timestamp() - t0.timestamp()));
        }
        assert_eq!(runs, [("reports::nightly", 20), ("reports::nightly", 40)]);
        let monitor = handle.monitor();
        let nightly = monitor.job("reports::nightly").expect("registered");
        assert_eq!(
            nightly.overrides[0].source,
            OverrideSource::Environment {
                variable: "CRONGUARD_JOB__REPORTS__NIGHTLY__EVERY".to_owned()
            }
        );
        let cleanup = monitor.job("cleanup").expect("registered");
        assert!(!cleanup.enabled);
        assert_eq!(
            cleanup.overrides[0].source,
            OverrideSource::File {
                path: file.display().to_string(),
                line: 3
            }
        );
        handle.shutdown().await;
    });
    let _ = std::fs::remove_dir_all(&dir);
}
