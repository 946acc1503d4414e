//! The agent's local HTTP endpoints: `/healthz` (alive: every task running), `/readyz`
//! (registered and polling, which goes on while central is away, but not while central has
//! disabled or deleted the poller), `/metrics` (Prometheus).

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;

use crate::metrics::AgentMetrics;

pub fn router(metrics: Arc<AgentMetrics>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(render_metrics))
        .with_state(metrics)
}

async fn readyz(State(metrics): State<Arc<AgentMetrics>>) -> impl IntoResponse {
    let state = metrics.state();
    // Ready once registered: polling continues while central is away, which is the point.
    let status = if state.poller_id.is_some() && state.checks_stopped.is_none() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (
        status,
        Json(json!({"ready": status == StatusCode::OK, "state": state})),
    )
}

async fn healthz(State(metrics): State<Arc<AgentMetrics>>) -> impl IntoResponse {
    match metrics.state().failed_task {
        None => (StatusCode::OK, Json(json!({"status": "ok"}))),
        Some(task) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "failed", "failed_task": task})),
        ),
    }
}

async fn render_metrics(State(metrics): State<Arc<AgentMetrics>>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        metrics.render(),
    )
}
