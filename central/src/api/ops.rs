//! Liveness, readiness and metrics endpoints.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use serde_json::json;

use crate::service::App;

pub async fn healthz() -> impl IntoResponse {
    Json(json!({"status": "ok"}))
}

pub async fn readyz(State(app): State<Arc<App>>) -> impl IntoResponse {
    match app.store.ping().await {
        Ok(()) => (StatusCode::OK, Json(json!({"status": "ready"}))),
        Err(e) => {
            // The driver's words may name hosts, users or paths: they go to the log only.
            tracing::warn!("not ready: the database does not answer: {e:#}");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(json!({
                    "status": "not_ready",
                    "error": "database_unreachable",
                    "unavailable": ["database"],
                    "message": "the database does not answer; central's log says why",
                })),
            )
        }
    }
}

pub async fn metrics(State(app): State<Arc<App>>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        app.metrics.render(),
    )
}

/// The OpenAPI document of both APIs, as kept in docs/ (a test checks it against the router).
const OPENAPI: &str = include_str!("../../../docs/openapi.json");

pub async fn openapi() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI)
}
