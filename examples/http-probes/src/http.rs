//! `/metrics` (Prometheus text), `/health` (200 when every job is on time, 503 otherwise, JSON
//! body) and `/jobs` (the status of every job, JSON) over HTTP.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use cronguard::Monitor;
use metrics_exporter_prometheus::PrometheusHandle;

#[derive(Clone)]
struct App {
    monitor: Monitor,
    prometheus: PrometheusHandle,
}

/// The routes, reading the scheduler through `monitor` and the metrics through `prometheus`.
pub fn router(monitor: Monitor, prometheus: PrometheusHandle) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/health", get(health))
        .route("/jobs", get(jobs))
        .with_state(App {
            monitor,
            prometheus,
        })
}

async fn metrics(State(app): State<App>) -> impl IntoResponse {
    app.prometheus.render()
}

async fn health(State(app): State<App>) -> impl IntoResponse {
    let health = app.monitor.health().await;
    let code = if health.healthy {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, Json(health))
}

async fn jobs(State(app): State<App>) -> impl IntoResponse {
    Json(app.monitor.jobs())
}
