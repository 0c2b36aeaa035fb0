//! Metrics in Prometheus format and a health probe over HTTP, on loopback.
//!
//! ```text
//! cargo run --example http_probes
//! curl http://127.0.0.1:9464/livez     # 200 while the scheduler's loop is alive
//! curl http://127.0.0.1:9464/metrics   # cronguard_runs_total{cronguard_job="..."}, ...
//! curl http://127.0.0.1:9464/health    # 200 {"healthy":true,...} or 503 when a job is overdue
//! curl http://127.0.0.1:9464/jobs      # next fire, last run and counts of every job
//! open http://127.0.0.1:9464/ops        # the dashboard: jobs, their last fires, buttons
//! ```
//!
//! The dashboard's pause, resume and run-now buttons work only for requests that carry the header
//! `x-ops-token: $OPS_TOKEN` (set `OPS_TOKEN` to turn them on; in a real service the check reads
//! the session your authenticating proxy vouches for):
//!
//! ```text
//! OPS_TOKEN=s3cret cargo run --example http_probes
//! curl -X POST -H 'x-ops-token: s3cret' -d job=http_probes::heartbeat http://127.0.0.1:9464/ops/pause
//! ```
//!
//! `/livez` is what a liveness or readiness probe should call: it asks no guard, so a Redis blip
//! does not get the service restarted or taken out of its load balancer. `/health` (and the
//! `cronguard_job_overdue` gauge) is for alerting: it turns 503 when a job's newest due fire was
//! not claimed anywhere within its grace — a job that silently stopped. Here `flaky_export` fails
//! every other run: counted as `failed`, yet on time, because it runs.

use std::net::{Ipv4Addr, SocketAddr};

use cronguard::{scheduled, JobContext};

#[scheduled(every = "2s", misfire_grace = "2s")]
async fn heartbeat() {}

#[scheduled(every = "3s")]
async fn flaky_export(ctx: JobContext) -> Result<(), String> {
    if ctx.fire_time().timestamp() % 2 == 0 {
        return Err("the export endpoint answered 502".to_owned());
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt().with_env_filter("info").init();
    // Install the exporter before start(), so that every job's metrics go to it; its histograms
    // come with cronguard's buckets.
    let prometheus = cronguard::metrics::prometheus_builder().install_recorder()?;
    let handle = cronguard::start().await?;
    let port = std::env::var("PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(9464);
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!("serving /livez, /metrics, /health and /jobs on http://{addr}");
    let dashboard = cronguard_dashboard::Dashboard::new(&handle)
        .authorize(|request| {
            let expected = std::env::var("OPS_TOKEN").ok().filter(|t| !t.is_empty())?;
            let given = request.headers.get("x-ops-token")?.to_str().ok()?;
            (given == expected).then(|| "ops token holder".to_owned())
        })
        .router();
    let app = cronguard_example_http_probes::http::router(handle.monitor(), prometheus)
        .nest("/ops", dashboard);
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    handle.run_until_shutdown_signal().await?;
    server.abort();
    Ok(())
}
