//! The OpenAPI document, generated from the handlers' `#[utoipa::path]` annotations and the
//! wire types' `ToSchema` derives, so that it cannot drift from the code. Served at
//! `/api/openapi.json`; `central openapi` prints it, and `docs/openapi.json` is that output
//! (a test keeps the two equal).

use std::sync::LazyLock;

use shared_proto::ErrorBody;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::{
    audit, commands, dependencies, history, maintenance, managed, notifications, ops, ping, poller,
    settings, status_pages, tagged, users,
};

use crate::web::badges;
use crate::web::status_pages::{self as public, subscriptions};

mod errors;
mod kinds;
mod tidy;

pub use errors::*;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Central: settings API and poller API",
        description = "Operators manage registration tokens, pollers and monitors under `/api/v1` \
                       with the admin token. Agents register, heartbeat, pull assignments and \
                       upload results under `/api/poller`. Errors are `{error, message}`: a \
                       machine code and what to fix (docs/protocol.md lists every code)."
    ),
    paths(
        ops::healthz, ops::readyz, ops::metrics, ops::openapi, ops::version,
        poller::register, poller::token, poller::heartbeat, poller::assignments, poller::results,
        commands::acknowledge,
        settings::create_registration_token, settings::list_registration_tokens,
        settings::revoke_registration_token, settings::rotate_registration_token,
        settings::list_pollers, settings::get_poller, settings::update_poller,
        settings::delete_poller, settings::poller_events, settings::poller_status_changes,
        settings::poller_scheduler,
        settings::create_monitor, settings::list_monitors, settings::get_monitor,
        settings::update_monitor, settings::delete_monitor, settings::monitor_status,
        settings::monitor_results, history::monitor_uptime, history::monitor_history,
        commands::check_monitor, commands::reset_monitor, commands::test_monitor,
        commands::get_command,
        dependencies::monitor_dependencies, dependencies::dependency_latency,
        dependencies::list_dependencies, dependencies::list_aliases, dependencies::create_alias,
        dependencies::get_alias, dependencies::delete_alias,
        notifications::create_channel, notifications::list_channels, notifications::get_channel,
        notifications::update_channel, notifications::delete_channel, notifications::test_channel,
        notifications::list_notifications,
        maintenance::create_window, maintenance::list_windows, maintenance::get_window,
        maintenance::update_window, maintenance::delete_window, maintenance::mute_monitor,
        status_pages::create_page, status_pages::list_pages, status_pages::get_page,
        status_pages::update_page, status_pages::delete_page,
        status_pages::create_incident, status_pages::list_incidents, status_pages::get_incident,
        status_pages::update_incident, status_pages::delete_incident,
        status_pages::add_incident_update, status_pages::list_subscribers,
        status_pages::delete_subscriber,
        tagged::pause, tagged::resume,
        ping::ping, ping::ping_signal, ping::new_ping_url, ping::list_pings,
        users::create_user, users::list_users, users::get_user, users::update_user,
        users::delete_user, users::list_user_sessions, users::log_out_user,
        users::end_user_session, users::create_api_key, users::list_api_keys, users::revoke_api_key,
        audit::list_audit, managed::list_managed, managed::manage, managed::unmanage,
        public::page, public::summary, public::feed, public::history, public::unlock,
        public::logo, badges::page, subscriptions::subscribe, subscriptions::confirm_page,
        subscriptions::confirm, subscriptions::unsubscribe_page, subscriptions::unsubscribe,
        badges::status, badges::uptime, badges::latency,
    ),
    components(schemas(ErrorBody)),
    modifiers(&BearerSchemes),
    tags(
        (name = "poller", description = "Agent → central; all but `register` and `token` take a poller access token."),
        (name = "registration-tokens", description = "Enrolment secrets for new pollers."),
        (name = "pollers", description = "The poller registry."),
        (name = "monitors", description = "Monitors, their status and results."),
        (name = "dependencies", description = "What health-json monitors report of the services they depend on, and aliases that group their names."),
        (name = "notifications", description = "Notification channels and the delivery log."),
        (name = "maintenance", description = "Maintenance windows: planned time in which monitors show `maintenance`, problems are not told and uptime does not count."),
        (name = "status-pages", description = "Status pages: what visitors see of chosen monitors at `/status/{slug}` (HTML) and `/status/{slug}/summary.json`, under display names, with nothing else of them. Visitors' operations (`/status/...`, `/badge/...`) take no credential: a `password` page takes the cookie its unlock sets, a `users` page a session of central; their refusals are pages for people (HTML)."),
        (name = "heartbeats", description = "Heartbeat (push) monitors: a job pings its monitor's URL; late or failing pings make it `down`. The ping URL is its only credential."),
        (name = "users", description = "Users with roles (`viewer` reads, `editor` changes, `admin` manages users) and API keys. Every settings-API call is made with the admin token (the bootstrap and break-glass credential) or an API key, and authorised by its role."),
        (name = "as-code", description = "Monitors as code: which objects a configuration file manages, each under a stable key (`central apply` keeps these marks)."),
        (name = "ops", description = "Probes, metrics and this document; no authentication."),
    )
)]
struct ApiDoc;

struct BearerSchemes;

impl Modify for BearerSchemes {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "admin_token",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "CENTRAL_ADMIN_TOKEN, or the `padm_...` token central printed on its \
                         first start.",
                    ))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "metrics_token",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "CENTRAL_METRICS_TOKEN: reads `/metrics` and nothing else.",
                    ))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "poller_access_token",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .description(Some(
                        "A poller access token (at most 15 minutes) from `register` or `token`.",
                    ))
                    .build(),
            ),
        );
    }
}

/// The document as served (pretty JSON, stable order).
pub static DOCUMENT: LazyLock<String> = LazyLock::new(|| {
    let mut document =
        serde_json::to_value(ApiDoc::openapi()).expect("the OpenAPI document serialises");
    tidy::state_item_rules(&mut document);
    tidy::state_window_rules(&mut document);
    tidy::headers_are_never_null(&mut document);
    tidy::subscribe_body(&mut document);
    kinds::one_of_per_kind(&mut document);
    tidy::tidy_formats(&mut document);
    tidy::unique_operation_ids(&mut document);
    serde_json::to_string_pretty(&document).expect("a JSON value serialises") + "\n"
});
