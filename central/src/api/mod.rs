//! HTTP: the router and thin handlers. Handlers parse, call one service method, and answer.

mod extract;
mod ops;
mod poller;
mod rate_limit;
mod settings;

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::middleware;
use axum::routing::{delete, get, post};
use axum::Router;
use tower_http::decompression::RequestDecompressionLayer;

use crate::error::ApiError;
use crate::service::App;

/// Result uploads are the largest bodies: up to 5,000 results.
const POLLER_BODY_LIMIT: usize = 8 * 1024 * 1024;
const SETTINGS_BODY_LIMIT: usize = 256 * 1024;

pub fn router(app: Arc<App>) -> Router {
    let mut unauthenticated = Router::new()
        .route("/register", post(poller::register))
        .route("/token", post(poller::token));
    if app.auth_rate_limit > 0.0 {
        let rate = app.auth_rate_limit;
        let limiter = Arc::new(rate_limit::RateLimiter::new(rate, rate * 4.0));
        unauthenticated =
            unauthenticated.layer(middleware::from_fn_with_state(limiter, rate_limit::limit));
    }
    let poller_api = Router::new()
        .merge(unauthenticated)
        .route("/heartbeat", post(poller::heartbeat))
        .route("/assignments", get(poller::assignments))
        .route("/results", post(poller::results))
        // Agents gzip their uploads; the body limit applies to the decompressed body too.
        .layer(RequestDecompressionLayer::new())
        .layer(DefaultBodyLimit::max(POLLER_BODY_LIMIT));
    let settings_api = Router::new()
        .route(
            "/registration-tokens",
            post(settings::create_registration_token).get(settings::list_registration_tokens),
        )
        .route(
            "/registration-tokens/{id}",
            delete(settings::revoke_registration_token),
        )
        .route(
            "/registration-tokens/{id}/rotate",
            post(settings::rotate_registration_token),
        )
        .route("/pollers", get(settings::list_pollers))
        .route(
            "/pollers/{id}",
            get(settings::get_poller)
                .patch(settings::update_poller)
                .delete(settings::delete_poller),
        )
        .route("/pollers/{id}/events", get(settings::poller_events))
        .route(
            "/pollers/{id}/status-changes",
            get(settings::poller_status_changes),
        )
        .route(
            "/monitors",
            post(settings::create_monitor).get(settings::list_monitors),
        )
        .route(
            "/monitors/{id}",
            get(settings::get_monitor)
                .patch(settings::update_monitor)
                .delete(settings::delete_monitor),
        )
        .route("/monitors/{id}/status", get(settings::monitor_status))
        .route("/monitors/{id}/results", get(settings::monitor_results))
        .layer(DefaultBodyLimit::max(SETTINGS_BODY_LIMIT));
    Router::new()
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .route("/metrics", get(ops::metrics))
        .route("/api/openapi.json", get(ops::openapi))
        .nest("/api/poller", poller_api)
        .nest("/api/v1", settings_api)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(app)
}

async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::NotFound(format!("no such endpoint: {}", uri.path()))
}

async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> ApiError {
    ApiError::MethodNotAllowed(format!("{method} is not allowed on {}", uri.path()))
}
