//! `/livez` (200 while the scheduler's loop is alive, 503 once it stopped: for a liveness or
//! readiness probe; it never asks a guard), `/metrics` (Prometheus text, from an exporter made by
//! `cronguard::metrics::prometheus_builder`, with cronguard's histogram buckets), `/health` (200 when every job is on time, 503 otherwise, JSON
//! body: for alerting and dashboards, not for a probe), `/jobs?after=<name>&limit=<n>` (the status of the jobs, JSON, a page of at most
//! `limit` (default 100, at most 1,000) sorted by name with the `next` name to ask for), and `/jobs/{name}/history?since=<RFC 3339>`
//! (the run history of a job whose guard keeps it, JSON; the last 24 hours by default) over
//! HTTP.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use chrono::{DateTime, TimeDelta, Utc};
use cronguard::{HistoryError, Monitor};
use metrics_exporter_prometheus::PrometheusHandle;

#[derive(Clone)]
struct App {
    monitor: Monitor,
    prometheus: PrometheusHandle,
}

/// The routes, reading the scheduler through `monitor` and the metrics through `prometheus`.
pub fn router(monitor: Monitor, prometheus: PrometheusHandle) -> Router {
    Router::new()
        .route("/livez", get(livez))
        .route("/metrics", get(metrics))
        .route("/health", get(health))
        .route("/jobs", get(jobs))
        .route("/jobs/{name}/history", get(history))
        .with_state(App {
            monitor,
            prometheus,
        })
}

async fn livez(State(app): State<App>) -> impl IntoResponse {
    if app.monitor.alive() {
        (StatusCode::OK, "alive")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "the scheduler stopped")
    }
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

async fn jobs(
    State(app): State<App>,
    Query(query): Query<HashMap<String, String>>,
) -> axum::response::Response {
    let limit = match query.get("limit").map(|l| l.parse::<usize>()) {
        None => 100,
        Some(Ok(limit)) if (1..=1000).contains(&limit) => limit,
        Some(_) => {
            let message = "`limit` must be a number from 1 to 1000";
            return (StatusCode::BAD_REQUEST, message).into_response();
        }
    };
    let page = app
        .monitor
        .jobs_page(query.get("after").map(String::as_str), limit);
    Json(page).into_response()
}

async fn history(
    State(app): State<App>,
    Path(name): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> axum::response::Response {
    let since = match query.get("since") {
        None => Utc::now() - TimeDelta::hours(24),
        Some(text) => match DateTime::parse_from_rfc3339(text) {
            Ok(t) => t.with_timezone(&Utc),
            Err(e) => {
                let message =
                    format!("`since` must be an RFC 3339 time such as 2026-01-31T02:30:00Z: {e}");
                return (StatusCode::BAD_REQUEST, message).into_response();
            }
        },
    };
    match app.monitor.history(&name, since).await {
        Ok(entries) => Json(entries).into_response(),
        Err(e @ (HistoryError::UnknownJob(_) | HistoryError::NotKept(_))) => {
            (StatusCode::NOT_FOUND, e.to_string()).into_response()
        }
        Err(e) => {
            let message = match std::error::Error::source(&e) {
                Some(source) => format!("{e}: {source}"),
                None => e.to_string(),
            };
            (StatusCode::SERVICE_UNAVAILABLE, message).into_response()
        }
    }
}
