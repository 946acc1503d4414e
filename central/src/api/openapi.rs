//! The OpenAPI document, generated from the handlers' `#[utoipa::path]` annotations and the
//! wire types' `ToSchema` derives, so that it cannot drift from the code. Served at
//! `/api/openapi.json`; `central openapi` prints it, and `docs/openapi.json` is that output
//! (a test keeps the two equal).

use std::sync::LazyLock;

use shared_proto::ErrorBody;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{IntoResponses, Modify, OpenApi};

use super::{ops, poller, settings};

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
        ops::healthz, ops::readyz, ops::metrics, ops::openapi,
        poller::register, poller::token, poller::heartbeat, poller::assignments, poller::results,
        settings::create_registration_token, settings::list_registration_tokens,
        settings::revoke_registration_token, settings::rotate_registration_token,
        settings::list_pollers, settings::get_poller, settings::update_poller,
        settings::delete_poller, settings::poller_events, settings::poller_status_changes,
        settings::create_monitor, settings::list_monitors, settings::get_monitor,
        settings::update_monitor, settings::delete_monitor, settings::monitor_status,
        settings::monitor_results,
    ),
    modifiers(&BearerSchemes),
    tags(
        (name = "poller", description = "Agent → central; all but `register` and `token` take a poller access token."),
        (name = "registration-tokens", description = "Enrolment secrets for new pollers."),
        (name = "pollers", description = "The poller registry."),
        (name = "monitors", description = "Monitors, their status and results."),
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
    ApiDoc::openapi()
        .to_pretty_json()
        .expect("the OpenAPI document serialises")
        + "\n"
});

// The error answers each kind of operation can give, by status. `ApiError` in crate::error is
// what produces them; the `error` codes per status are listed in docs/protocol.md.

/// Settings-API operations with a JSON body and no id.
#[derive(IntoResponses)]
pub enum BodyErrors {
    #[response(
        status = 400,
        description = "`invalid_field` or `invalid_body`: the message names the field."
    )]
    BadRequest(ErrorBody),
    #[response(
        status = 401,
        description = "`unauthorized`: missing or wrong admin token."
    )]
    Unauthorized(ErrorBody),
    #[response(status = 413, description = "`payload_too_large`: body over 256 KiB.")]
    TooLarge(ErrorBody),
    #[response(
        status = 415,
        description = "`unsupported_media_type`: send `Content-Type: application/json`."
    )]
    MediaType(ErrorBody),
    #[response(
        status = 503,
        description = "`overloaded`: retry after `Retry-After` seconds."
    )]
    Overloaded(ErrorBody),
}

/// Settings-API lists.
#[derive(IntoResponses)]
pub enum QueryErrors {
    #[response(
        status = 400,
        description = "`invalid_query`: the message names the parameter."
    )]
    BadRequest(ErrorBody),
    #[response(
        status = 401,
        description = "`unauthorized`: missing or wrong admin token."
    )]
    Unauthorized(ErrorBody),
    #[response(
        status = 503,
        description = "`overloaded`: retry after `Retry-After` seconds."
    )]
    Overloaded(ErrorBody),
}

/// Settings-API operations on one object, without a body.
#[derive(IntoResponses)]
pub enum IdErrors {
    #[response(status = 400, description = "`invalid_path`: the id is not a UUID.")]
    BadRequest(ErrorBody),
    #[response(
        status = 401,
        description = "`unauthorized`: missing or wrong admin token."
    )]
    Unauthorized(ErrorBody),
    #[response(status = 404, description = "`not_found`: no object with this id.")]
    NotFound(ErrorBody),
    #[response(
        status = 503,
        description = "`overloaded`: retry after `Retry-After` seconds."
    )]
    Overloaded(ErrorBody),
}

/// Settings-API lists under one object.
#[derive(IntoResponses)]
pub enum IdQueryErrors {
    #[response(status = 400, description = "`invalid_path` or `invalid_query`.")]
    BadRequest(ErrorBody),
    #[response(
        status = 401,
        description = "`unauthorized`: missing or wrong admin token."
    )]
    Unauthorized(ErrorBody),
    #[response(status = 404, description = "`not_found`: no object with this id.")]
    NotFound(ErrorBody),
    #[response(
        status = 503,
        description = "`overloaded`: retry after `Retry-After` seconds."
    )]
    Overloaded(ErrorBody),
}

/// Settings-API operations on one object, with a JSON body.
#[derive(IntoResponses)]
pub enum IdBodyErrors {
    #[response(
        status = 400,
        description = "`invalid_path`, `invalid_field` or `invalid_body`."
    )]
    BadRequest(ErrorBody),
    #[response(
        status = 401,
        description = "`unauthorized`: missing or wrong admin token."
    )]
    Unauthorized(ErrorBody),
    #[response(status = 404, description = "`not_found`: no object with this id.")]
    NotFound(ErrorBody),
    #[response(status = 413, description = "`payload_too_large`: body over 256 KiB.")]
    TooLarge(ErrorBody),
    #[response(
        status = 415,
        description = "`unsupported_media_type`: send `Content-Type: application/json`."
    )]
    MediaType(ErrorBody),
    #[response(
        status = 503,
        description = "`overloaded`: retry after `Retry-After` seconds."
    )]
    Overloaded(ErrorBody),
}

/// `register` and `token`: no bearer token, rate limited per address.
#[derive(IntoResponses)]
pub enum PublicBodyErrors {
    #[response(status = 400, description = "`invalid_field` or `invalid_body`.")]
    BadRequest(ErrorBody),
    #[response(
        status = 401,
        description = "`unauthorized`, `poller_deleted` or `client_certificate_required`."
    )]
    Unauthorized(ErrorBody),
    #[response(status = 403, description = "`poller_disabled`.")]
    Forbidden(ErrorBody),
    #[response(status = 413, description = "`payload_too_large`.")]
    TooLarge(ErrorBody),
    #[response(status = 415, description = "`unsupported_media_type`.")]
    MediaType(ErrorBody),
    #[response(
        status = 429,
        description = "`rate_limited`: retry after `Retry-After` seconds."
    )]
    RateLimited(ErrorBody),
    #[response(
        status = 503,
        description = "`overloaded`: retry after `Retry-After` seconds."
    )]
    Overloaded(ErrorBody),
}

/// Poller-API operations with a JSON body.
#[derive(IntoResponses)]
pub enum PollerBodyErrors {
    #[response(status = 400, description = "`invalid_field` or `invalid_body`.")]
    BadRequest(ErrorBody),
    #[response(
        status = 401,
        description = "`unauthorized`, `poller_deleted` or `client_certificate_required`."
    )]
    Unauthorized(ErrorBody),
    #[response(status = 403, description = "`poller_disabled`.")]
    Forbidden(ErrorBody),
    #[response(
        status = 413,
        description = "`payload_too_large`: over the body limit, or over 5,000 results."
    )]
    TooLarge(ErrorBody),
    #[response(status = 415, description = "`unsupported_media_type`.")]
    MediaType(ErrorBody),
    #[response(
        status = 503,
        description = "`overloaded`: retry after `Retry-After` seconds."
    )]
    Overloaded(ErrorBody),
}

/// Poller-API reads.
#[derive(IntoResponses)]
pub enum PollerQueryErrors {
    #[response(status = 400, description = "`invalid_query`.")]
    BadRequest(ErrorBody),
    #[response(
        status = 401,
        description = "`unauthorized`, `poller_deleted` or `client_certificate_required`."
    )]
    Unauthorized(ErrorBody),
    #[response(status = 403, description = "`poller_disabled`.")]
    Forbidden(ErrorBody),
}
