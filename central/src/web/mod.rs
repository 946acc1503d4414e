//! The operators' web page, served by central at `/`: server-rendered HTML (maud), a vendored
//! htmx for live updates, every asset embedded in the binary. Routes are thin like `api/`'s:
//! they check the session (and the CSRF token of every form), call `service/`, and render.
//! Nothing here writes SQL or decides a rule.

mod assets;
mod audit;
pub mod badges;
mod channel_form;
mod charts;
mod check_settings;
mod commands;
mod dependencies;
mod fields;
mod headers;
mod heartbeats;
mod incident_form;
mod layout;
mod maintenance;
mod markdown;
mod monitor_form;
mod monitor_input;
mod monitors;
mod notifications;
mod origin;
mod pollers;
pub(crate) mod session;
mod sso;
mod status_page_form;
pub mod status_pages;
mod tokens;
mod users;

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;

use crate::error::ApiError;
use crate::service::error::ServiceError;
use crate::service::App;

/// Forms are small; a monitor's settings JSON is the largest field.
const FORM_BODY_LIMIT: usize = 64 * 1024;

/// What the page needs from the configuration (`origin` reads requests with it).
#[derive(Debug, Clone, Default)]
pub struct WebOptions {
    /// Central serves HTTPS itself: cookies get `Secure`.
    pub tls: bool,
    /// `CENTRAL_PUBLIC_URL`: central's address for agents, when set.
    pub public_url: Option<String>,
    /// `CENTRAL_TRUSTED_PROXIES`: whose `X-Forwarded-Proto`/`-Host` are believed.
    pub proxies: Arc<crate::server::client_addr::TrustedProxies>,
}

pub fn router(options: WebOptions) -> Router<Arc<App>> {
    Router::new()
        .route("/", get(status_pages::home))
        .route(
            session::LOGIN_PATH,
            get(session::login_page).post(session::log_in),
        )
        .route(sso::START_PATH, get(sso::start))
        .route(crate::service::sso::CALLBACK_PATH, get(sso::callback))
        .route("/logout", post(session::log_out))
        .route("/monitors/new", get(monitor_form::new_page))
        .route("/monitors", post(monitor_form::create))
        .route(
            "/monitors/{id}",
            get(monitors::detail).post(monitor_form::update),
        )
        .route("/monitors/{id}/edit", get(monitor_form::edit_page))
        .route("/monitors/tagged", post(monitor_form::tagged))
        .route("/monitors/{id}/pause", post(monitor_form::pause))
        .route("/monitors/{id}/resume", post(monitor_form::resume))
        .route("/monitors/{id}/delete", post(monitor_form::delete))
        .route("/monitors/{id}/check", post(commands::check))
        .route("/monitors/{id}/reset", post(commands::reset))
        .route("/pollers", get(pollers::list))
        .route("/pollers/{id}", post(pollers::update))
        .route("/pollers/{id}/delete", post(pollers::delete))
        .route("/tokens", get(tokens::tokens).post(tokens::create_token))
        .route("/tokens/{id}/revoke", post(tokens::revoke_token))
        .route("/tokens/{id}/rotate", post(tokens::rotate_token))
        .route("/monitors/{id}/mute", post(maintenance::mute))
        .route("/monitors/{id}/ping-url", post(heartbeats::new_url))
        .route(
            "/maintenance",
            get(maintenance::list).post(maintenance::create),
        )
        .route("/maintenance/{id}/delete", post(maintenance::delete))
        .route(
            "/status-pages",
            get(status_page_form::list).post(status_page_form::create),
        )
        .route(
            "/status-pages/{id}",
            get(incident_form::show).post(status_page_form::update),
        )
        .route("/status-pages/{id}/delete", post(status_page_form::delete))
        .route("/status-pages/{id}/incidents", post(incident_form::open))
        .route(
            "/status-pages/{id}/incidents/{iid}/updates",
            post(incident_form::update),
        )
        .route(
            "/status-pages/{id}/incidents/{iid}/delete",
            post(incident_form::delete),
        )
        .route(
            "/status-pages/{id}/incidents/{iid}/publish",
            post(incident_form::publish),
        )
        .route("/dependencies", get(dependencies::list))
        .route("/dependencies/aliases", post(dependencies::create_alias))
        .route(
            "/dependencies/aliases/delete",
            post(dependencies::delete_alias),
        )
        .route("/notifications", get(notifications::list))
        .route("/notifications/channels/new", get(channel_form::new_page))
        .route("/notifications/channels", post(channel_form::create))
        .route("/notifications/channels/{id}", post(channel_form::update))
        .route(
            "/notifications/channels/{id}/edit",
            get(channel_form::edit_page),
        )
        .route(
            "/notifications/channels/{id}/test",
            post(notifications::test),
        )
        .route(
            "/notifications/channels/{id}/delete",
            post(notifications::delete),
        )
        .route("/audit", get(audit::list))
        .route("/users", get(users::users).post(users::create_user))
        .route("/users/{id}", post(users::update_user))
        .route("/users/{id}/log-out", post(users::log_out_user))
        .route("/users/{id}/delete", post(users::delete_user))
        .route("/api-keys", get(users::api_keys).post(users::make_key))
        .route("/api-keys/{id}/revoke", post(users::revoke_key))
        .route("/assets/{name}", get(assets::serve))
        .route(status_pages::PAGE_PATH, get(status_pages::page))
        .route(status_pages::SUMMARY_PATH, get(status_pages::summary))
        .route(status_pages::UNLOCK_PATH, post(status_pages::unlock))
        .route(status_pages::FEED_PATH, get(status_pages::feed))
        .route(status_pages::HISTORY_PATH, get(status_pages::history))
        .route(status_pages::LOGO_PATH, get(status_pages::logo))
        .route(status_pages::SUBSCRIBE_PATH, post(status_pages::subscribe))
        .route(
            status_pages::CONFIRM_PATH,
            get(status_pages::confirm_page).post(status_pages::confirm),
        )
        .route(
            status_pages::UNSUBSCRIBE_PATH,
            get(status_pages::unsubscribe_page).post(status_pages::unsubscribe),
        )
        .route(badges::PAGE_PATH, get(badges::page))
        .route(badges::STATUS_PATH, get(badges::status))
        .route(badges::UPTIME_PATH, get(badges::uptime))
        .route(badges::LATENCY_PATH, get(badges::latency))
        .layer(axum::Extension(Arc::new(
            status_pages::PublicPages::default(),
        )))
        .layer(axum::Extension(options.clone()))
        .layer(DefaultBodyLimit::max(FORM_BODY_LIMIT))
        // Pages are repetitive markup re-fetched every few seconds: gzip makes them a fraction.
        // Compressing a secret beside reflected input (the name filter) is what BREACH
        // measures: the CSRF token is masked afresh on every page (`Session::csrf`), and the
        // session cookie is never sent cross-site (`SameSite=Strict`).
        .layer(tower_http::compression::CompressionLayer::new())
        .layer(axum::middleware::from_fn(move |request, next| {
            // HSTS when central speaks TLS itself; a proxy that ends TLS sends its own.
            headers::add(options.tls, request, next)
        }))
}

/// Why a page could not be shown.
#[derive(Debug)]
pub enum WebError {
    /// No session (or it ended): to the login page.
    LoggedOut,
    /// A form without its session's CSRF token.
    Csrf,
    Api(ApiError),
}

impl From<ApiError> for WebError {
    fn from(error: ApiError) -> Self {
        WebError::Api(error)
    }
}

impl From<crate::service::error::ServiceError> for WebError {
    fn from(error: crate::service::error::ServiceError) -> Self {
        WebError::Api(error.into())
    }
}

impl From<anyhow::Error> for WebError {
    fn from(error: anyhow::Error) -> Self {
        WebError::Api(error.into())
    }
}

impl IntoResponse for WebError {
    fn into_response(self) -> Response {
        match self {
            WebError::LoggedOut => Redirect::to("/login").into_response(),
            WebError::Csrf => layout::error_page(
                StatusCode::FORBIDDEN,
                "This form has expired or did not come from this page. Go back, reload and try again.",
            ),
            WebError::Api(error) => {
                let (status, _) = error.status_and_code();
                let message = match &error {
                    ApiError::Service(ServiceError::Internal(cause)) => {
                        tracing::error!("internal error on the web page: {cause:#}");
                        "Central could not complete the request; it has been logged. Retry later."
                            .to_string()
                    }
                    ApiError::Service(ServiceError::WriteConflict(cause)) => {
                        tracing::warn!("a write conflict outlasted its tries on the web page: {cause:#}");
                        error.to_string()
                    }
                    ApiError::Service(ServiceError::Validation(e)) => format!("`{}` {}", e.field, e.message),
                    other => other.to_string(),
                };
                layout::error_page(status, &message)
            }
        }
    }
}

pub type WebResult<T> = Result<T, WebError>;

/// The single sign-on routes start with this (`api::pools` serves them from the
/// unauthenticated pool, where failures count).
pub const SSO_PREFIX: &str = sso::START_PATH;

/// A form's answer that made the object `id`: the audit log records the creation under it.
pub(crate) fn made(answer: impl IntoResponse, id: impl std::fmt::Display) -> Response {
    let mut response = answer.into_response();
    response
        .extensions_mut()
        .insert(crate::service::audit::FormOutcome::Made(id.to_string()));
    response
}

/// A form's answer to a test run of `spec`: recorded as `test`, with the spec as views show
/// it (secrets hidden), although nothing stored changed.
pub(crate) fn tested(answer: impl IntoResponse, spec: &shared_proto::MonitorSpec) -> Response {
    let mut response = answer.into_response();
    let mut shown = spec.clone();
    shared_proto::redaction::hide_monitor(&mut shown);
    response
        .extensions_mut()
        .insert(crate::service::audit::FormOutcome::Tested(
            serde_json::to_value(shown).unwrap_or_default(),
        ));
    response
}
