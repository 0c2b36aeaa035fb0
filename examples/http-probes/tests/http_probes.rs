//! The `http_probes` example's endpoints, fetched over loopback: `/metrics` counters move after
//! runs, `/health` answers 200 while jobs are on time and 503 once one is overdue.

use std::time::Duration;

use cronguard::{Job, Schedule};
use metrics_exporter_prometheus::PrometheusBuilder;

mod common;
use common::{eventually, get, serve};

fn counter(metrics: &str, series: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_move_after_runs_and_health_turns_503_when_a_job_is_overdue() {
    let prometheus = PrometheusBuilder::new()
        .install_recorder()
        .expect("the only recorder here");
    let tick = Job::new(
        "tick",
        Schedule::every(Duration::from_millis(300)).expect("valid"),
    )
    .run(|_| async {});
    let handle = cronguard::builder()
        .registered_jobs(false)
        .job(tick)
        .start()
        .await
        .expect("starts");
    let addr = serve(handle.monitor(), prometheus.clone()).await;

    let series = r#"cronguard_runs_total{cronguard_job="tick",outcome="succeeded"}"#;
    eventually(
        "a first run in /metrics",
        Duration::from_secs(5),
        || async { counter(&get(addr, "/metrics").await.1, series) >= 1 },
    )
    .await;
    let first = counter(&get(addr, "/metrics").await.1, series);
    eventually("the counter to move", Duration::from_secs(5), || async {
        counter(&get(addr, "/metrics").await.1, series) > first
    })
    .await;
    let (code, body) = get(addr, "/health").await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains(r#""healthy":true"#), "{body}");
    let (code, body) = get(addr, "/jobs").await;
    assert_eq!(code, 200);
    assert!(body.contains(r#""jobs":[{"name":"#), "a page: {body}");
    assert!(
        body.contains(r#""next":null"#),
        "one page holds them all: {body}"
    );
    assert!(body.contains(r#""name":"tick""#), "{body}");
    let (code, _) = get(addr, "/jobs?limit=0").await;
    assert_eq!(code, 400, "a limit out of range is refused");
    assert!(
        body.contains(r#""description":"every 300 milliseconds""#),
        "{body}"
    );

    // A watcher of a job that nobody runs: overdue after one period plus its grace.
    let nobody = Job::new(
        "nobody_runs_me",
        Schedule::every(Duration::from_millis(500)).expect("valid"),
    )
    .enabled(false)
    .misfire_grace(Duration::from_millis(300))
    .run(|_| async {});
    let watcher = cronguard::builder()
        .registered_jobs(false)
        .job(nobody)
        .start()
        .await
        .expect("starts");
    let watcher_addr = serve(watcher.monitor(), prometheus).await;
    eventually("/health to answer 503", Duration::from_secs(5), || async {
        get(watcher_addr, "/health").await.0 == 503
    })
    .await;
    let (_, body) = get(watcher_addr, "/health").await;
    assert!(body.contains(r#""state":"overdue""#), "{body}");
    handle.shutdown().await;
    watcher.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_history_is_served_from_the_postgres_guard() {
    let Some(db) = cronguard_testkit::PostgresServer::start() else {
        return;
    };
    let prometheus = PrometheusBuilder::new().build_recorder().handle();
    let job = Job::new(
        "reports::nightly",
        Schedule::every(Duration::from_millis(500)).expect("valid"),
    )
    .lock(cronguard::Lock::Postgres)
    .history(true)
    .run(|ctx| async move {
        if ctx.fire_time().timestamp_subsec_millis() == 0 {
            Err("the report store answered 503")
        } else {
            Ok(())
        }
    });
    let handle = cronguard::builder()
        .registered_jobs(false)
        .postgres_url(db.url())
        .job(job)
        .start()
        .await
        .expect("starts");
    let addr = serve(handle.monitor(), prometheus).await;
    let path = "/jobs/reports::nightly/history";
    eventually(
        "a failed and a succeeded run in the history",
        Duration::from_secs(10),
        || async {
            let body = get(addr, path).await.1;
            body.contains(r#""outcome":"failed""#) && body.contains(r#""outcome":"succeeded""#)
        },
    )
    .await;
    let (code, body) = get(addr, path).await;
    assert_eq!(code, 200);
    assert!(body.contains("the report store answered 503"), "{body}");
    assert!(body.contains(r#""fencing_token":"#), "{body}");
    let (code, _) = get(addr, "/jobs/nobody/history").await;
    assert_eq!(code, 404);
    let (code, body) = get(addr, &format!("{path}?since=yesterday")).await;
    assert_eq!(code, 400, "{body}");
    handle.shutdown().await;
}
