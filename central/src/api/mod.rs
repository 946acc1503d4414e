//! HTTP: the router and thin handlers. Handlers parse, call one service method, and answer.

mod audit;
mod auth_failures;
mod authz;
mod commands;
mod deadline;
mod dependencies;
mod extract;
mod history;
mod maintenance;
mod managed;
mod notifications;
pub mod openapi;
mod ops;
mod ping;
mod poller;
mod pools;
pub use pools::LongPolls;
mod rate_limit;
mod settings;
mod status_pages;
mod tagged;
mod users;

use std::sync::Arc;

use axum::extract::{ConnectInfo, DefaultBodyLimit, Request};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use axum::{Extension, Router};
use tower_http::decompression::RequestDecompressionLayer;

use crate::config::ServeArgs;
use crate::error::ApiError;
use crate::server::client_addr::TrustedProxies;
use crate::server::PeerAddr;
use crate::service::error::ServiceError;
use crate::service::App;

/// Result uploads are the largest bodies: up to 5,000 results.
const POLLER_BODY_LIMIT: usize = 8 * 1024 * 1024;
/// Heartbeats carry at most 1,000 events and 1,000 dead letters.
const HEARTBEAT_BODY_LIMIT: usize = 1024 * 1024;
const SETTINGS_BODY_LIMIT: usize = 256 * 1024;
/// `register` and `token` bodies: a token, a name, a few capabilities.
const PUBLIC_BODY_LIMIT: usize = 16 * 1024;

/// What the HTTP layer is told by the configuration.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    pub max_concurrent_requests: u32,
    pub max_unauthenticated_requests: u32,
    pub request_timeout: std::time::Duration,
    pub auth_failures_per_minute: u32,
    pub auth_failures_global_per_minute: u32,
    pub max_long_polls: u32,
    pub max_long_polls_per_poller: u32,
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// `CENTRAL_TLS_CLIENT_CA` is set: the poller API wants a vouched client certificate.
    pub require_client_certificate: bool,
    /// `/metrics` is served here too (false when it has a listener of its own).
    pub metrics_on_main_listener: bool,
    /// Central serves HTTPS itself (the web page's cookies get `Secure`).
    pub tls: bool,
    /// `CENTRAL_PUBLIC_URL`, for addresses the page writes.
    pub public_url: Option<String>,
}

impl HttpOptions {
    pub fn from_args(args: &ServeArgs) -> Self {
        Self {
            max_concurrent_requests: args.max_concurrent_requests,
            max_unauthenticated_requests: args.max_unauthenticated_requests,
            request_timeout: args.request_timeout,
            auth_failures_per_minute: args.auth_failures_per_minute,
            auth_failures_global_per_minute: args.auth_failures_global_per_minute,
            max_long_polls: args.max_long_polls,
            max_long_polls_per_poller: args.max_long_polls_per_poller,
            trusted_proxies: args.trusted_proxies.clone(),
            require_client_certificate: args.tls_client_ca.is_some(),
            metrics_on_main_listener: args.metrics_listen.is_none(),
            tls: args.tls_cert.is_some(),
            public_url: args.public_url.clone(),
        }
    }
}

/// The router of `CENTRAL_METRICS_LISTEN`: metrics and nothing else.
pub fn metrics_router(app: Arc<App>) -> Router {
    Router::new()
        .route("/metrics", get(ops::private_metrics))
        .fallback(not_found)
        .with_state(app)
}

/// `long_polls` is the caller's, so that it can answer every waiting poll when central stops
/// (`LongPolls::close`).
pub fn router(app: Arc<App>, options: &HttpOptions, long_polls: Arc<pools::LongPolls>) -> Router {
    let mut unauthenticated = Router::new()
        .route("/register", post(poller::register))
        .route("/token", post(poller::token))
        // Anyone may send these: a few KiB is all they need.
        .layer(DefaultBodyLimit::max(PUBLIC_BODY_LIMIT));
    if app.limits.auth_rate_limit > 0.0 {
        let rate = app.limits.auth_rate_limit;
        let proxies = TrustedProxies::new(options.trusted_proxies.clone());
        let limiter = Arc::new(rate_limit::RateLimiter::new(rate, rate * 4.0, proxies));
        unauthenticated =
            unauthenticated.layer(middleware::from_fn_with_state(limiter, rate_limit::limit));
    }
    let mut poller_api = Router::new()
        .merge(unauthenticated)
        .route(
            "/heartbeat",
            post(poller::heartbeat).layer(DefaultBodyLimit::max(HEARTBEAT_BODY_LIMIT)),
        )
        .route("/assignments", get(poller::assignments))
        .route("/results", post(poller::results))
        .route("/commands/{id}/ack", post(commands::acknowledge))
        // Agents gzip their uploads; the body limit applies to the decompressed body too.
        .layer(RequestDecompressionLayer::new())
        .layer(DefaultBodyLimit::max(POLLER_BODY_LIMIT))
        .layer(middleware::map_response(with_central_version))
        .layer(Extension(long_polls));
    if options.require_client_certificate {
        poller_api = poller_api.layer(middleware::from_fn(require_client_certificate));
    }
    let recorder = audit::Recorder {
        app: app.clone(),
        proxies: Arc::new(TrustedProxies::new(options.trusted_proxies.clone())),
    };
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
        .route("/version", get(ops::version))
        .route("/pollers", get(settings::list_pollers))
        .route(
            "/pollers/{id}",
            get(settings::get_poller)
                .patch(settings::update_poller)
                .delete(settings::delete_poller),
        )
        .route("/pollers/{id}/events", get(settings::poller_events))
        .route("/pollers/{id}/scheduler", get(settings::poller_scheduler))
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
        .route("/monitors/{id}/check", post(commands::check_monitor))
        .route("/monitors/{id}/reset", post(commands::reset_monitor))
        .route("/monitors/test", post(commands::test_monitor))
        .route("/monitors/pause", post(tagged::pause))
        .route("/monitors/resume", post(tagged::resume))
        .route("/commands/{id}", get(commands::get_command))
        .route("/monitors/{id}/results", get(settings::monitor_results))
        .route("/monitors/{id}/uptime", get(history::monitor_uptime))
        .route("/monitors/{id}/history", get(history::monitor_history))
        .route(
            "/monitors/{id}/dependencies",
            get(dependencies::monitor_dependencies),
        )
        .route(
            "/monitors/{id}/dependencies/latency",
            get(dependencies::dependency_latency),
        )
        .route("/dependencies", get(dependencies::list_dependencies))
        .route(
            "/dependency-aliases",
            post(dependencies::create_alias).get(dependencies::list_aliases),
        )
        .route(
            "/dependency-aliases/{alias}",
            get(dependencies::get_alias).delete(dependencies::delete_alias),
        )
        .route(
            "/notification-channels",
            post(notifications::create_channel).get(notifications::list_channels),
        )
        .route(
            "/notification-channels/{id}",
            get(notifications::get_channel)
                .patch(notifications::update_channel)
                .delete(notifications::delete_channel),
        )
        .route(
            "/notification-channels/{id}/test",
            post(notifications::test_channel),
        )
        .route("/notifications", get(notifications::list_notifications))
        .route(
            "/maintenance-windows",
            post(maintenance::create_window).get(maintenance::list_windows),
        )
        .route(
            "/maintenance-windows/{id}",
            get(maintenance::get_window)
                .patch(maintenance::update_window)
                .delete(maintenance::delete_window),
        )
        .route("/monitors/{id}/mute", post(maintenance::mute_monitor))
        .route(
            "/status-pages",
            post(status_pages::create_page).get(status_pages::list_pages),
        )
        .route(
            "/status-pages/{id}",
            get(status_pages::get_page)
                .patch(status_pages::update_page)
                .delete(status_pages::delete_page),
        )
        .route(
            "/status-pages/{id}/incidents",
            post(status_pages::create_incident).get(status_pages::list_incidents),
        )
        .route(
            "/status-pages/{id}/incidents/{iid}",
            get(status_pages::get_incident)
                .patch(status_pages::update_incident)
                .delete(status_pages::delete_incident),
        )
        .route(
            "/status-pages/{id}/incidents/{iid}/updates",
            post(status_pages::add_incident_update),
        )
        .route(
            "/status-pages/{id}/subscribers",
            get(status_pages::list_subscribers),
        )
        .route(
            "/status-pages/{id}/subscribers/{sid}",
            delete(status_pages::delete_subscriber),
        )
        .route("/monitors/{id}/ping-url", post(ping::new_ping_url))
        .route("/monitors/{id}/pings", get(ping::list_pings))
        .route("/users", post(users::create_user).get(users::list_users))
        .route(
            "/users/{id}",
            get(users::get_user)
                .patch(users::update_user)
                .delete(users::delete_user),
        )
        .route("/users/{id}/sessions", get(users::list_user_sessions))
        .route("/users/{id}/log-out", post(users::log_out_user))
        .route(
            "/users/{id}/sessions/{session}",
            delete(users::end_user_session),
        )
        .route(
            "/api-keys",
            post(users::create_api_key).get(users::list_api_keys),
        )
        .route("/api-keys/{id}", delete(users::revoke_api_key))
        .route("/audit", get(audit::list_audit))
        .route("/managed-objects", get(managed::list_managed))
        .route(
            "/managed-objects/{kind}/{key}",
            put(managed::manage).delete(managed::unmanage),
        )
        // Inside `authz`, which names the principal: each change that succeeds is recorded.
        .route_layer(middleware::from_fn_with_state(
            recorder.clone(),
            audit::record,
        ))
        // Before any handler reads its body: who is asking, and may they (`authz`).
        .route_layer(middleware::from_fn_with_state(
            app.clone(),
            authz::authorize,
        ))
        .layer(DefaultBodyLimit::max(SETTINGS_BODY_LIMIT));
    let pools = Arc::new(pools::Pools::new(
        app.clone(),
        options.max_concurrent_requests,
        options.max_unauthenticated_requests,
        TrustedProxies::new(options.trusted_proxies.clone()),
        options.request_timeout,
        auth_failures::AuthFailures::new(
            options.auth_failures_per_minute,
            options.auth_failures_global_per_minute,
        ),
        auth_failures::AuthFailures::new(options.auth_failures_per_minute.saturating_mul(10), 0),
    ));
    let pings = Router::new()
        .route("/{token}", get(ping::ping).post(ping::ping))
        .route(
            "/{token}/{signal}",
            get(ping::ping_signal).post(ping::ping_signal),
        )
        .layer(DefaultBodyLimit::max(ping::PING_BODY_LIMIT))
        .layer(Extension(Arc::new(ping::PingState::new(
            TrustedProxies::new(options.trusted_proxies.clone()),
        ))));
    let mut router = Router::new()
        .route("/api/openapi.json", get(ops::openapi))
        .nest("/ping", pings)
        .nest("/api/poller", poller_api)
        .nest(authz::SETTINGS_PREFIX, settings_api)
        .merge(
            crate::web::router(crate::web::WebOptions {
                tls: options.tls,
                public_url: options.public_url.clone(),
                proxies: Arc::new(TrustedProxies::new(options.trusted_proxies.clone())),
            })
            .route_layer(middleware::from_fn_with_state(recorder, audit::record_page)),
        )
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed);
    if options.metrics_on_main_listener {
        router = router.route("/metrics", get(ops::metrics));
    }
    router
        .layer(middleware::from_fn_with_state(pools, pools::admit))
        // Probes are exempt from shedding: an overloaded central is still alive and ready.
        // Their cost does not grow with their callers (`App::database_answers`).
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .with_state(app)
}

/// With mutual TLS on, the poller API answers only connections that showed a client
/// certificate signed by `CENTRAL_TLS_CLIENT_CA` (the handshake already verified it).
async fn require_client_certificate(request: Request, next: Next) -> Response {
    let certified = request
        .extensions()
        .get::<ConnectInfo<PeerAddr>>()
        .is_some_and(|ConnectInfo(peer)| peer.client_certified);
    if certified {
        next.run(request).await
    } else {
        ApiError::ClientCertificateRequired(
            "the poller API requires a client certificate signed by central's \
             CENTRAL_TLS_CLIENT_CA; give the agent one with POLLER_TLS_CERT and POLLER_TLS_KEY"
                .into(),
        )
        .into_response()
    }
}

/// Every poller-API answer names central's version, so an agent can say which central it
/// talks to (`/readyz`) and tell an older one from a newer.
async fn with_central_version(mut response: Response) -> Response {
    response.headers_mut().insert(
        shared_proto::poller_api::CENTRAL_VERSION_HEADER,
        axum::http::HeaderValue::from_static(env!("CARGO_PKG_VERSION")),
    );
    response
}

async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::Service(ServiceError::NotFound(format!(
        "no such endpoint: {}",
        uri.path()
    )))
}

async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> ApiError {
    ApiError::MethodNotAllowed(format!("{method} is not allowed on {}", uri.path()))
}
