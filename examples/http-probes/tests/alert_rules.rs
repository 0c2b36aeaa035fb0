//! The README's Prometheus alert rules read metrics that a real `/metrics` scrape serves, with
//! their `# HELP` and `# TYPE` lines, so that the rules cannot drift from the names; `/livez`
//! answers 200 while the scheduler runs and 503 after it stopped, whatever the guards do.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use cronguard::guard::{Claim, Guard, GuardError};
use cronguard::{Job, Lock, Overlap, Schedule};

mod common;
use common::{eventually, get, serve};

const README: &str = include_str!("../../../README.md");

type BoxFuture<T> = Pin<Box<dyn std::future::Future<Output = T> + Send + 'static>>;

/// A store that cannot be reached.
struct Unreachable;

impl Guard for Unreachable {
    fn claim(&self, _: DateTime<Utc>) -> BoxFuture<Result<Claim, GuardError>> {
        Box::pin(async { Err(GuardError::other("connection refused")) })
    }

    fn last_claimed(&self) -> BoxFuture<Result<Option<DateTime<Utc>>, GuardError>> {
        Box::pin(async { Err(GuardError::other("connection refused")) })
    }
}

/// The metric names in the README's alert rules (every YAML block that holds an `alert:`: the
/// rules of "Never silent" and those of "Health from outside").
fn names_in_readme_rules() -> Vec<String> {
    let blocks: Vec<&str> = README
        .split("```yaml")
        .skip(1)
        .filter_map(|rest| rest.split_once("```").map(|(block, _)| block))
        .filter(|block| block.contains("alert:"))
        .collect();
    assert!(
        blocks.iter().any(|block| block.contains("groups:")),
        "the README has a YAML block of alert rules"
    );
    let mut names: Vec<String> = blocks
        .iter()
        .flat_map(|block| {
            block.match_indices("cronguard_").map(|(at, _)| {
                block[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                    .collect()
            })
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_alert_rules_read_metrics_that_metrics_serves_and_livez_ignores_guards() {
    let prometheus = cronguard::metrics::prometheus_builder()
        .install_recorder()
        .expect("the only recorder of this test binary");
    let every = |ms| Schedule::every(Duration::from_millis(ms)).expect("valid");
    let tick = Job::new("tick", every(300)).run(|_| async {});
    // Its first run never ends: the next fire waits for the slot and misfires.
    let stuck = Job::new("stuck", every(300))
        .overlap(Overlap::Queue)
        .misfire_grace(Duration::from_millis(200))
        .run(|ctx| async move { ctx.cancelled().await });
    let unreachable = Job::new("unreachable_store", every(300))
        .lock(Lock::custom("down"))
        .misfire_grace(Duration::from_millis(200))
        .run(|_| async {});
    let handle = cronguard::builder()
        .registered_jobs(false)
        .custom_guard("down", |_| Arc::new(Unreachable))
        .job(tick)
        .job(stuck)
        .job(unreachable)
        .start()
        .await
        .expect("starts");
    let monitor = handle.monitor();
    let addr = serve(monitor.clone(), prometheus).await;

    eventually(
        "a success, an overdue job and a guard error",
        Duration::from_secs(10),
        || async {
            let body = get(addr, "/metrics").await.1;
            body.contains(r#"cronguard_last_success_timestamp_seconds{cronguard_job="tick"}"#)
                && body.contains(r#"cronguard_job_overdue{cronguard_job="stuck"} 1"#)
                && body.contains(
                    r#"cronguard_guard_errors_total{cronguard_job="unreachable_store",kind="other"}"#,
                )
        },
    )
    .await;
    let (code, metrics) = get(addr, "/metrics").await;
    assert_eq!(code, 200);

    let names = names_in_readme_rules();
    assert!(names.len() >= 3, "{names:?}");
    for name in &names {
        assert!(
            metrics.contains(&format!("# HELP {name} ")),
            "`{name}` of the README's alert rules has no help text in /metrics:\n{metrics}"
        );
        assert!(
            metrics.contains(&format!("# TYPE {name} ")),
            "`{name}` of the README's alert rules is not served by /metrics:\n{metrics}"
        );
    }
    for gauge in [
        "cronguard_last_success_timestamp_seconds",
        "cronguard_next_fire_timestamp_seconds",
        "cronguard_job_overdue",
    ] {
        assert!(
            metrics.contains(&format!("# TYPE {gauge} gauge")),
            "{metrics}"
        );
    }
    assert!(metrics.contains("# TYPE cronguard_guard_errors_total counter"));
    for histogram in [
        "cronguard_run_duration_seconds",
        "cronguard_fire_lateness_seconds",
    ] {
        assert!(
            metrics.contains(&format!("# TYPE {histogram} histogram")),
            "a histogram, not a summary: {metrics}"
        );
        assert!(
            metrics.contains(&format!(
                r#"{histogram}_bucket{{cronguard_job="tick",le="0.01"}}"#
            )),
            "{metrics}"
        );
    }
    assert!(metrics
        .contains(r#"cronguard_run_duration_seconds_bucket{cronguard_job="tick",le="21600"}"#));

    // The guard of `unreachable_store` cannot be asked: /health says so, /livez does not care.
    let (code, body) = get(addr, "/health").await;
    assert_eq!(code, 503, "{body}");
    let (code, body) = get(addr, "/livez").await;
    assert_eq!(code, 200, "{body}");

    handle.shutdown_within(Duration::ZERO).await;
    assert!(!monitor.alive());
    let (code, _) = get(addr, "/livez").await;
    assert_eq!(code, 503, "the scheduler stopped");
}
