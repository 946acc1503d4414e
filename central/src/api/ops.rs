//! Liveness, readiness and metrics endpoints.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use crate::service::App;

#[utoipa::path(get, path = "/healthz", tag = "ops", operation_id = "healthz", security(),
    responses((status = 200, description = "The process serves.", body = serde_json::Value)))]
pub async fn healthz() -> impl IntoResponse {
    Json(json!({"status": "ok"}))
}

#[utoipa::path(get, path = "/readyz", tag = "ops", operation_id = "readyz", security(),
    responses(
        (status = 200, description = "The database answers.", body = serde_json::Value),
        (status = 503, description = "Something central needs is unavailable; `unavailable` names it.", body = serde_json::Value)
    ))]
pub async fn readyz(State(app): State<Arc<App>>) -> impl IntoResponse {
    if app.database_answers().await {
        (StatusCode::OK, Json(json!({"status": "ready"})))
    } else {
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

#[utoipa::path(get, path = "/metrics", tag = "ops", operation_id = "metrics",
    security(("metrics_token" = []), ("admin_token" = [])),
    description = "On CENTRAL_LISTEN only with `Authorization: Bearer` and CENTRAL_METRICS_TOKEN (or the admin token); on CENTRAL_METRICS_LISTEN without. Worked out at most once every 5 s however many scrape.",
    responses((status = 200,
        description = "OpenMetrics text when the scraper asks for it (`Accept: application/openmetrics-text`, as Prometheus does), else the Prometheus text format 0.0.4 (what `promtool check metrics` reads). Absent here when CENTRAL_METRICS_LISTEN is set.",
        content((String = "application/openmetrics-text"), (String = "text/plain"))),
        (status = 401, description = "`unauthorized`: no bearer token, or not CENTRAL_METRICS_TOKEN or the admin token.", body = shared_proto::ErrorBody),
        (status = 429, description = "`rate_limited`: too many failed authentications from this client, or from everywhere; retry after `Retry-After` seconds.", body = shared_proto::ErrorBody),
        (status = 503, description = "`overloaded`: retry after `Retry-After` seconds.", body = shared_proto::ErrorBody)))]
pub async fn metrics(
    State(app): State<Arc<App>>,
    _: super::extract::Scraper,
    headers: HeaderMap,
) -> Response {
    metrics_text(&app, &headers).await
}

/// `/metrics` on CENTRAL_METRICS_LISTEN, which is private: no token asked.
pub async fn private_metrics(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    metrics_text(&app, &headers).await
}

async fn metrics_text(app: &App, headers: &HeaderMap) -> Response {
    let openmetrics = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|accept| accept.contains("application/openmetrics-text"));
    // The state gauges are shared bytes, sent as they are; only the process counters (a few
    // lines) are rendered per scrape, in the format asked for, and end the text.
    let state = app.metrics_state().await;
    let counters = app.process_metrics();
    let (content_type, counters) = if openmetrics {
        (
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            counters,
        )
    } else {
        (
            "text/plain; version=0.0.4; charset=utf-8",
            crate::metrics::to_text_format(&counters),
        )
    };
    let parts = state
        .into_iter()
        .chain([axum::body::Bytes::from(counters)])
        .filter(|part| !part.is_empty())
        .map(Ok::<_, std::convert::Infallible>);
    (
        [(header::CONTENT_TYPE, content_type)],
        axum::body::Body::from_stream(futures_util::stream::iter(parts)),
    )
        .into_response()
}

#[utoipa::path(get, path = "/api/openapi.json", tag = "ops", operation_id = "openapi", security(),
    responses((status = 200, description = "This document.", body = serde_json::Value)))]
pub async fn openapi() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        super::openapi::DOCUMENT.as_str(),
    )
}

#[utoipa::path(get, path = "/api/v1/version", tag = "ops", operation_id = "version",
    security(("admin_token" = [])),
    responses((status = 200, description = "This central's version and the check kinds it knows.", body = shared_proto::settings_api::VersionView), super::openapi::ReadErrors))]
pub async fn version() -> Json<shared_proto::settings_api::VersionView> {
    Json(shared_proto::settings_api::VersionView {
        version: env!("CARGO_PKG_VERSION").to_string(),
        check_kinds: shared_proto::CheckKind::ALL
            .iter()
            .map(|kind| kind.as_str().to_string())
            .collect(),
    })
}
