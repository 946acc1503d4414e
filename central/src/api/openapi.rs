//! The OpenAPI document, generated from the handlers' `#[utoipa::path]` annotations and the
//! wire types' `ToSchema` derives, so that it cannot drift from the code. Served at
//! `/api/openapi.json`; `central openapi` prints it, and `docs/openapi.json` is that output
//! (a test keeps the two equal).

use std::collections::BTreeMap;
use std::sync::LazyLock;

use shared_proto::ErrorBody;
use utoipa::openapi::content::ContentBuilder;
use utoipa::openapi::response::{Response, ResponseBuilder};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{Ref, RefOr};
use utoipa::{IntoResponses, Modify, OpenApi};

use super::{history, notifications, ops, poller, settings};

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
        settings::monitor_results, history::monitor_uptime, history::monitor_history,
        notifications::create_channel, notifications::list_channels, notifications::get_channel,
        notifications::update_channel, notifications::delete_channel, notifications::test_channel,
        notifications::list_notifications,
    ),
    components(schemas(ErrorBody)),
    modifiers(&BearerSchemes),
    tags(
        (name = "poller", description = "Agent → central; all but `register` and `token` take a poller access token."),
        (name = "registration-tokens", description = "Enrolment secrets for new pollers."),
        (name = "pollers", description = "The poller registry."),
        (name = "monitors", description = "Monitors, their status and results."),
        (name = "notifications", description = "Notification channels and the delivery log."),
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
    state_item_rules(&mut document);
    headers_are_never_null(&mut document);
    tidy_formats(&mut document);
    serde_json::to_string_pretty(&document).expect("a JSON value serialises") + "\n"
});

/// utoipa writes an optional header parameter (`Option<String>`) as `type: [string, null]`,
/// but a header is absent or a string, never JSON `null`: generators would send the text
/// `null`. Optional is `required: false`, which utoipa writes too.
fn headers_are_never_null(document: &mut serde_json::Value) {
    use serde_json::Value;
    let Some(Value::Object(paths)) = document.get_mut("paths") else {
        return;
    };
    for operation in paths.values_mut().filter_map(Value::as_object_mut) {
        for method in operation.values_mut() {
            let Some(parameters) = method.get_mut("parameters").and_then(Value::as_array_mut)
            else {
                continue;
            };
            for parameter in parameters {
                if parameter.get("in").and_then(Value::as_str) != Some("header") {
                    continue;
                }
                if let Some(kind) = parameter.pointer_mut("/schema/type") {
                    if let Some(types) = kind.as_array() {
                        if let Some(one) = types.iter().find(|t| t.as_str() != Some("null")) {
                            *kind = one.clone();
                        }
                    }
                }
            }
        }
    }
}

/// Rules on the items and keys of collections, which the derives cannot spell: region labels
/// (distinct), HTTP header names and values, mail addresses, and URLs.
fn state_item_rules(document: &mut serde_json::Value) {
    use serde_json::{json, Value};
    let label = json!({"type": "string", "pattern": shared_proto::monitor::LABEL_PATTERN});
    let header_rules = json!({
        "maxProperties": 20,
        "propertyNames": {"pattern": "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$"},
        "additionalProperties": {"type": "string", "maxLength": 4096, "pattern": "^[^\\x00-\\x08\\x0a-\\x1f\\x7f]*$"},
    });
    let email = json!({"type": "string", "format": "email", "maxLength": 254});
    let url = json!({"type": "string", "format": "uri", "maxLength": 2048});
    let rules: [(&str, &str, Value); 10] = [
        (
            "MonitorSpec",
            "poller_regions",
            json!({"items": label, "uniqueItems": true}),
        ),
        (
            "MonitorPatch",
            "poller_regions",
            json!({"items": label, "uniqueItems": true}),
        ),
        ("ChannelSpec", "headers", header_rules.clone()),
        ("ChannelPatch", "headers", header_rules),
        ("ChannelSpec", "to", json!({"items": email})),
        ("ChannelPatch", "to", json!({"items": email})),
        ("ChannelSpec", "url", json!({"format": "uri"})),
        ("ChannelPatch", "url", json!({"format": "uri"})),
        ("ChannelSpec", "urls", json!({"items": url})),
        ("ChannelPatch", "urls", json!({"items": url})),
    ];
    for (schema, property, extra) in rules {
        let Some(field) = document.pointer_mut(&format!(
            "/components/schemas/{schema}/properties/{property}"
        )) else {
            continue;
        };
        // An `Option` is `oneOf: [T, null]` or `type: [T, null]`: the rules go on T.
        let target = match field.get_mut("oneOf").and_then(Value::as_array_mut) {
            Some(branches) => branches
                .iter_mut()
                .find(|b| b.get("type") != Some(&json!("null"))),
            None => Some(field),
        };
        if let (Some(Value::Object(target)), Value::Object(extra)) = (target, extra) {
            target.extend(extra);
        }
    }
    for (schema, property) in [("ChannelSpec", "from"), ("ChannelPatch", "from")] {
        if let Some(Value::Object(field)) = document.pointer_mut(&format!(
            "/components/schemas/{schema}/properties/{property}"
        )) {
            field.insert("format".into(), json!("email"));
            field.insert("maxLength".into(), json!(254));
        }
    }
}

/// The keywords that constrain the string or number itself, as opposed to describing the field.
const VALUE_KEYWORDS: [&str; 7] = [
    "format",
    "pattern",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "enum",
];

/// Spells unsigned formats as the OpenAPI format registry does, and rewrites
/// `{type: [T, null], format: F, …}` (how utoipa writes an `Option` of a formatted
/// value) as `{oneOf: [{type: T, format: F, …}, {type: null}]}`. Both mean the same, but
/// generators (schemathesis) fill the first with strings of type T that ignore the format, e.g.
/// `""` for an optional date-time, and then call the refusal a failure.
fn tidy_formats(value: &mut serde_json::Value) {
    use serde_json::{json, Value};
    match value {
        Value::Object(fields) => {
            let nullable_with_format = fields.contains_key("format")
                && fields
                    .get("type")
                    .and_then(Value::as_array)
                    .is_some_and(|types| types.len() == 2 && types.contains(&json!("null")));
            if nullable_with_format {
                let types = fields.remove("type").expect("checked above");
                let inner_type = types
                    .as_array()
                    .and_then(|t| t.iter().find(|t| *t != "null"))
                    .cloned()
                    .unwrap_or(Value::Null);
                let mut inner = serde_json::Map::from_iter([("type".to_string(), inner_type)]);
                for keyword in VALUE_KEYWORDS {
                    if let Some(constraint) = fields.remove(keyword) {
                        inner.insert(keyword.to_string(), constraint);
                    }
                }
                fields.insert(
                    "oneOf".into(),
                    json!([Value::Object(inner), {"type": "null"}]),
                );
            }
            // utoipa spells the unsigned formats `u-int32`, `u-int64`: the registry's names are
            // `uint32`, `uint64`.
            // Validators ignore those formats, so the largest value serde takes is written out
            // as `maximum` (utoipa's own `maximum` is an f64, which cannot hold u64::MAX).
            let unsigned_bits = fields
                .get("format")
                .and_then(Value::as_str)
                .and_then(|format| format.strip_prefix("u-int"))
                .map(str::to_owned);
            if let Some(bits) = unsigned_bits {
                fields.insert("format".into(), json!(format!("uint{bits}")));
                let largest = match bits.as_str() {
                    "8" => u64::from(u8::MAX),
                    "16" => u64::from(u16::MAX),
                    "32" => u64::from(u32::MAX),
                    _ => u64::MAX,
                };
                fields.entry("maximum").or_insert(json!(largest));
            }
            fields.values_mut().for_each(tidy_formats);
        }
        Value::Array(items) => items.iter_mut().for_each(tidy_formats),
        _ => {}
    }
}

// The error answers each kind of operation can give, by status. `ApiError` in crate::error is
// what produces them; the `error` codes per status are listed in docs/protocol.md.

const ADMIN_UNAUTHORIZED: &str = "`unauthorized`: missing or wrong admin token.";
const POLLER_UNAUTHORIZED: &str =
    "`unauthorized`, `poller_deleted` or `client_certificate_required`.";
const POLLER_FORBIDDEN: &str = "`poller_disabled`.";
const REGISTRATION_FORBIDDEN: &str = "`poller_disabled` (token exchange), or on registration \
    `region_not_allowed` or `capability_not_allowed`: the registration token's region or \
    capabilities do not cover what was asked (no use of the token is counted).";
const NOT_FOUND: &str = "`not_found`: no object with this id.";
const TOO_LARGE: &str = "`payload_too_large`: body over 256 KiB.";
const MEDIA_TYPE: &str = "`unsupported_media_type`: send `Content-Type: application/json`.";
const OVERLOADED: &str = "`overloaded`: retry after `Retry-After` seconds.";
const TIMED_OUT: &str = "`request_timeout`: the body did not arrive within \
                         `CENTRAL_REQUEST_TIMEOUT`; send it again, at once.";
const RATE_LIMITED: &str = "`rate_limited`: retry after `Retry-After` seconds.";
const BODY_INVALID: &str = "`invalid_body` (not the schema's shape) or `invalid_field` (a field \
                            breaks a rule the schema states); the message names the field.";
const UNPROCESSABLE: &str = "The body is as the schema says, but breaks a rule no schema states \
    (docs/protocol.md lists them): `invalid_combination`, a rule between fields (a timeout \
    within the interval, the fields a `poller_mode` needs, a quorum within the regions), or on \
    an edit, a patch that does not fit the object as it is (a `target` of another kind); \
    `unknown_reference`, an id that names nothing. The message names the field.";

/// `ErrorBody` answers, one per `(status, description)`.
/// Every operation may answer a caller without valid credentials `429` while it (or everyone)
/// is locked out after failed authentications (`api::auth_failures`).
const LOCKED_OUT: &str = "`rate_limited`: too many failed authentications from this client, or \
                          from everywhere; retry after `Retry-After` seconds.";

fn error_responses(answers: &[(u16, &str)]) -> BTreeMap<String, RefOr<Response>> {
    let locked_out =
        (!answers.iter().any(|(status, _)| *status == 429)).then_some((429, LOCKED_OUT));
    answers
        .iter()
        .copied()
        .chain(locked_out)
        .map(|(status, description)| {
            let body = ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("ErrorBody")))
                .build();
            let response = ResponseBuilder::new()
                .description(description)
                .content("application/json", body)
                .build();
            (status.to_string(), RefOr::T(response))
        })
        .collect()
}

/// A named set of error answers, for `responses(...)` in the handlers' annotations.
macro_rules! error_set {
    ($(#[$doc:meta])* $name:ident { $($status:literal => $description:expr),+ $(,)? }) => {
        $(#[$doc])*
        pub struct $name;

        impl IntoResponses for $name {
            fn responses() -> BTreeMap<String, RefOr<Response>> {
                error_responses(&[$(($status, $description)),+])
            }
        }
    };
}

error_set!(
    /// Settings-API operations with a JSON body and no id.
    BodyErrors {
        400 => BODY_INVALID,
        401 => ADMIN_UNAUTHORIZED,
        408 => TIMED_OUT,
        413 => TOO_LARGE,
        415 => MEDIA_TYPE,
        503 => OVERLOADED,
    }
);

error_set!(
    /// Creating a monitor or a channel: a JSON body with rules between its fields.
    SpecErrors {
        400 => BODY_INVALID,
        401 => ADMIN_UNAUTHORIZED,
        408 => TIMED_OUT,
        413 => TOO_LARGE,
        415 => MEDIA_TYPE,
        422 => UNPROCESSABLE,
        503 => OVERLOADED,
    }
);

error_set!(
    /// Settings-API lists.
    QueryErrors {
        400 => "`invalid_query`: the message names the parameter.",
        401 => ADMIN_UNAUTHORIZED,
        503 => OVERLOADED,
    }
);

error_set!(
    /// Settings-API operations on one object, without a body.
    IdErrors {
        400 => "`invalid_path`: the id is not a UUID.",
        401 => ADMIN_UNAUTHORIZED,
        404 => NOT_FOUND,
        503 => OVERLOADED,
    }
);

error_set!(
    /// Settings-API lists under one object.
    IdQueryErrors {
        400 => "`invalid_path` or `invalid_query`.",
        401 => ADMIN_UNAUTHORIZED,
        404 => NOT_FOUND,
        503 => OVERLOADED,
    }
);

error_set!(
    /// Settings-API operations on one object, with a JSON body.
    IdBodyErrors {
        400 => "`invalid_path`, or a body error: `invalid_body` or `invalid_field`.",
        401 => ADMIN_UNAUTHORIZED,
        404 => NOT_FOUND,
        408 => TIMED_OUT,
        413 => TOO_LARGE,
        415 => MEDIA_TYPE,
        503 => OVERLOADED,
    }
);

error_set!(
    /// An edit of a monitor, which has a revision (`If-Match`).
    EditErrors {
        400 => "`invalid_path`, `If-Match` that is not a revision, or a body error: \
                `invalid_body` or `invalid_field`.",
        401 => ADMIN_UNAUTHORIZED,
        404 => NOT_FOUND,
        409 => "`conflict`: the object changed since the revision in `If-Match` was read; read \
                it again.",
        408 => TIMED_OUT,
        413 => TOO_LARGE,
        415 => MEDIA_TYPE,
        422 => UNPROCESSABLE,
        503 => OVERLOADED,
    }
);

error_set!(
    /// An edit of a channel.
    PatchErrors {
        400 => "`invalid_path`, or a body error: `invalid_body` or `invalid_field`.",
        401 => ADMIN_UNAUTHORIZED,
        404 => NOT_FOUND,
        408 => TIMED_OUT,
        413 => TOO_LARGE,
        415 => MEDIA_TYPE,
        422 => UNPROCESSABLE,
        503 => OVERLOADED,
    }
);

error_set!(
    /// `register` and `token`: no bearer token, rate limited per address.
    PublicBodyErrors {
        400 => BODY_INVALID,
        401 => POLLER_UNAUTHORIZED,
        403 => REGISTRATION_FORBIDDEN,
        408 => TIMED_OUT,
        413 => "`payload_too_large`.",
        415 => MEDIA_TYPE,
        429 => RATE_LIMITED,
        503 => OVERLOADED,
    }
);

error_set!(
    /// Poller-API operations with a JSON body.
    PollerBodyErrors {
        400 => BODY_INVALID,
        401 => POLLER_UNAUTHORIZED,
        403 => POLLER_FORBIDDEN,
        408 => TIMED_OUT,
        413 => "`payload_too_large`: over the body limit, or over 5,000 results.",
        415 => MEDIA_TYPE,
        429 => "`rate_limited`: this poller's heartbeats come faster than \
                `CENTRAL_POLLER_HEARTBEATS_PER_MINUTE`; retry after `Retry-After` seconds.",
        503 => OVERLOADED,
    }
);

error_set!(
    /// Poller-API reads.
    PollerQueryErrors {
        400 => "`invalid_query`.",
        401 => POLLER_UNAUTHORIZED,
        403 => POLLER_FORBIDDEN,
    }
);

#[cfg(test)]
mod tests {
    use serde_json::Value;

    /// Every schema object in the document, depth first.
    fn schemas(value: &Value, found: &mut Vec<serde_json::Map<String, Value>>) {
        match value {
            Value::Object(fields) => {
                found.push(fields.clone());
                fields.values().for_each(|v| schemas(v, found));
            }
            Value::Array(items) => items.iter().for_each(|v| schemas(v, found)),
            _ => {}
        }
    }

    #[test]
    fn formats_are_never_beside_a_type_list_and_unsigned_ones_have_their_maximum() {
        let document: Value = serde_json::from_str(&super::DOCUMENT).unwrap();
        let mut all = Vec::new();
        schemas(&document, &mut all);
        let mut unsigned = 0;
        for schema in &all {
            // A schema's `format` is a string; an object's properties may hold one named so.
            if schema.get("format").is_some_and(Value::is_string) {
                assert!(
                    !schema.get("type").is_some_and(Value::is_array),
                    "{schema:?}"
                );
            }
            match schema.get("format").and_then(Value::as_str) {
                Some("uint64") => {
                    unsigned += 1;
                    // Its own limit where the field has one, else the type's.
                    assert!(schema["maximum"].is_u64(), "{schema:?}");
                }
                Some(format) => assert!(!format.starts_with("u-int"), "{format}"),
                None => {}
            }
        }
        assert!(unsigned > 5, "the heartbeat alone has several u64 counts");
    }
}
