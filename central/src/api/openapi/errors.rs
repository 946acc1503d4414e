//! The error answers of each kind of operation, as named sets for the handlers'
//! `responses(...)`. `ApiError` in crate::error is what produces them.

use std::collections::BTreeMap;

use utoipa::openapi::content::ContentBuilder;
use utoipa::openapi::response::{Response, ResponseBuilder};
use utoipa::openapi::{Ref, RefOr};
use utoipa::IntoResponses;

// The error answers each kind of operation can give, by status. `ApiError` in crate::error is
// what produces them; the `error` codes per status are listed in docs/protocol.md.

const ADMIN_UNAUTHORIZED: &str =
    "`unauthorized`: missing or wrong credentials (the admin token or an API key).";
/// Every settings-API operation may answer this (`service::access`).
const ROLE_REQUIRED: &str = "`role_required`: the credential's role is below the one this \
                             operation needs (`viewer` reads, `editor` changes, `admin` \
                             manages users); the message names both. Or on `POST \
                             /api/v1/api-keys`, `user_required`: an API key cannot make keys.";
const POLLER_UNAUTHORIZED: &str =
    "`unauthorized`, `poller_deleted` or `client_certificate_required`.";
const POLLER_FORBIDDEN: &str = "`poller_disabled`.";
const REGISTRATION_FORBIDDEN: &str = "`poller_disabled` (token exchange), or on registration \
    `region_not_allowed` or `capability_not_allowed`: the registration token's region or \
    capabilities do not cover what was asked (no use of the token is counted).";
const NOT_FOUND: &str =
    "`not_found`: no object with this id (an id that is not a UUID names none).";
const TOO_LARGE: &str = "`payload_too_large`: body over 256 KiB.";
const MEDIA_TYPE: &str = "`unsupported_media_type`: send `Content-Type: application/json`.";
const OVERLOADED: &str = "`overloaded`: retry after `Retry-After` seconds.";
/// The settings API's changes are audited ahead (`service::audit_intents`).
const OVERLOADED_OR_UNAUDITED: &str = "`overloaded`: retry after `Retry-After` seconds; or, for a \
    change, `audit_unavailable`: its audit entry could not be written ahead of it, so nothing \
    was changed.";
const TIMED_OUT: &str = "`request_timeout`: the body did not arrive within \
                         `CENTRAL_REQUEST_TIMEOUT`; send it again, at once.";
const RATE_LIMITED: &str = "`rate_limited`: retry after `Retry-After` seconds.";
const PING_NOT_FOUND: &str = "`not_found`: no heartbeat monitor has this ping URL (a wrong or \
                              replaced token, or an unknown signal after it).";
const PING_TOO_LARGE: &str = "`payload_too_large`: body over 100 KiB (the first 10 KiB are kept).";
const PING_RATE_LIMITED: &str = "`rate_limited`: more than a ping a second for a while on this \
                                 URL; retry after `Retry-After` seconds.";
const BODY_INVALID: &str = "`invalid_body` (not the schema's shape) or `invalid_field` (a field \
                            breaks a rule the schema states); the message names the field.";
const UNPROCESSABLE: &str = "The body is as the schema says, but breaks a rule no schema states \
    (docs/protocol.md lists them): `invalid_combination`, a rule between fields (a timeout \
    within the interval, the fields a `poller_mode` needs, a quorum within the regions), or on \
    an edit, a patch that does not fit the object as it is (a `target` of another kind); \
    `unknown_reference`, an id that names nothing. The message names the field.";

/// `ErrorBody` answers, one per `(status, description)`.
/// Every operation may answer a caller without valid credentials `429` while its client is
/// locked out after failed authentications (`api::auth_failures`).
const LOCKED_OUT: &str = "`rate_limited`: too many failed authentications from this client \
                          (while failures come from everywhere at once, one a minute per \
                          client); retry after `Retry-After` seconds. Valid credentials are \
                          never refused for it.";

fn error_responses(answers: &[(u16, &str)]) -> BTreeMap<String, RefOr<Response>> {
    let locked_out =
        (!answers.iter().any(|(status, _)| *status == 429)).then_some((429, LOCKED_OUT));
    let settings_api = answers.iter().any(|(_, d)| *d == ADMIN_UNAUTHORIZED)
        && !answers.iter().any(|(status, _)| *status == 403);
    answers
        .iter()
        .copied()
        .chain(locked_out)
        .chain(settings_api.then_some((403, ROLE_REQUIRED)))
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
        503 => OVERLOADED_OR_UNAUDITED,
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
        503 => OVERLOADED_OR_UNAUDITED,
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
    /// Marking an object as managed by a file (`PUT /api/v1/managed-objects/{kind}/{key}`).
    KeyedSpecErrors {
        400 => "`invalid_path` (not a kind a file manages), `invalid_body`, or \
                `invalid_field` (a key not of the pattern); the message names it.",
        401 => ADMIN_UNAUTHORIZED,
        408 => TIMED_OUT,
        413 => TOO_LARGE,
        415 => MEDIA_TYPE,
        422 => "`unknown_reference`: no object of this kind has the id.",
        503 => OVERLOADED_OR_UNAUDITED,
    }
);

error_set!(
    /// One mark of a managed object, by kind and key.
    KeyErrors {
        400 => "`invalid_path`: not a kind a file manages.",
        401 => ADMIN_UNAUTHORIZED,
        404 => "`not_found`: nothing is managed under this key.",
        503 => OVERLOADED_OR_UNAUDITED,
    }
);

error_set!(
    /// Settings-API operations on one object, without a body.
    IdErrors {
        400 => "`invalid_path`: the id is not UTF-8 once percent-decoded.",
        401 => ADMIN_UNAUTHORIZED,
        404 => NOT_FOUND,
        503 => OVERLOADED_OR_UNAUDITED,
    }
);

error_set!(
    /// Settings-API lists under one object.
    IdQueryErrors {
        400 => "`invalid_path` (not UTF-8 once percent-decoded) or `invalid_query`.",
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
        503 => OVERLOADED_OR_UNAUDITED,
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
        503 => OVERLOADED_OR_UNAUDITED,
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
        503 => OVERLOADED_OR_UNAUDITED,
    }
);

const PAGE_TAKEN: &str = "`conflict`: another status page has this slug or this domain.";

error_set!(
    /// Changing an incident: decided from the incident as it is when written, again from a
    /// fresh reading when another change landed between (`service::status_pages::incidents`).
    IncidentChangeErrors {
        400 => "`invalid_path`, or a body error: `invalid_body` or `invalid_field`.",
        401 => ADMIN_UNAUTHORIZED,
        404 => NOT_FOUND,
        408 => TIMED_OUT,
        409 => "`conflict`: others kept changing the incident at the same time (five tries \
                lost); send the change again.",
        413 => TOO_LARGE,
        415 => MEDIA_TYPE,
        422 => UNPROCESSABLE,
        503 => OVERLOADED_OR_UNAUDITED,
    }
);

error_set!(
    /// Creating a status page: a spec, and a slug or domain only one page may have.
    PageCreateErrors {
        400 => BODY_INVALID,
        401 => ADMIN_UNAUTHORIZED,
        408 => TIMED_OUT,
        409 => PAGE_TAKEN,
        413 => TOO_LARGE,
        415 => MEDIA_TYPE,
        422 => UNPROCESSABLE,
        503 => OVERLOADED_OR_UNAUDITED,
    }
);

error_set!(
    /// Changing a status page.
    PagePatchErrors {
        400 => "`invalid_path`, or a body error: `invalid_body` or `invalid_field`.",
        401 => ADMIN_UNAUTHORIZED,
        404 => NOT_FOUND,
        408 => TIMED_OUT,
        409 => PAGE_TAKEN,
        413 => TOO_LARGE,
        415 => MEDIA_TYPE,
        422 => UNPROCESSABLE,
        503 => OVERLOADED_OR_UNAUDITED,
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

error_set!(
    /// Operators' commands about one monitor (check now, reset).
    CommandErrors {
        400 => "`invalid_path` or `invalid_query`.",
        401 => ADMIN_UNAUTHORIZED,
        404 => NOT_FOUND,
        409 => "`conflict`: no poller can hear the command now (the monitor is paused or \
                unplaced, or its poller is offline or disabled); the message says which.",
        422 => "`unknown_reference`: `poller_id` does not run this monitor.",
        503 => OVERLOADED,
    }
);

error_set!(
    /// Testing an unsaved monitor.
    TestErrors {
        400 => BODY_INVALID,
        401 => ADMIN_UNAUTHORIZED,
        408 => TIMED_OUT,
        409 => "`conflict`: no poller could run this monitor now; the message says why.",
        413 => TOO_LARGE,
        415 => MEDIA_TYPE,
        422 => UNPROCESSABLE,
        503 => OVERLOADED,
    }
);

error_set!(
    /// A poller acknowledging a command.
    PollerAckErrors {
        400 => BODY_INVALID,
        401 => POLLER_UNAUTHORIZED,
        403 => POLLER_FORBIDDEN,
        404 => "`not_found`: no such command for this poller (it may have expired).",
        408 => TIMED_OUT,
        413 => "`payload_too_large`.",
        415 => MEDIA_TYPE,
        422 => "`invalid_value`: the result is not about the command's monitor, or was refused.",
        503 => OVERLOADED,
    }
);

error_set!(
    /// Reads with no parameters.
    ReadErrors {
        401 => ADMIN_UNAUTHORIZED,
        503 => OVERLOADED,
    }
);

error_set!(
    /// One dependency alias, named in the path.
    AliasErrors {
        400 => "`invalid_path`: the alias is not UTF-8 once percent-decoded.",
        401 => ADMIN_UNAUTHORIZED,
        404 => "`not_found`: no alias of this name.",
        503 => OVERLOADED,
    }
);

error_set!(
    /// Creating a dependency alias.
    AliasCreateErrors {
        400 => BODY_INVALID,
        401 => ADMIN_UNAUTHORIZED,
        408 => TIMED_OUT,
        409 => "`conflict`: an alias of this name exists (delete it first), or central holds \
                10,000 aliases.",
        413 => TOO_LARGE,
        415 => MEDIA_TYPE,
        422 => "`invalid_combination`: the alias is its own canonical name, the canonical name \
                is itself an alias, or the alias is the canonical name of other aliases.",
        503 => OVERLOADED,
    }
);

error_set!(
    /// A heartbeat monitor's ping (`/ping/...`): no credentials beyond the URL.
    PingErrors {
        400 => "`invalid_body`: the body could not be read.",
        404 => PING_NOT_FOUND,
        408 => TIMED_OUT,
        413 => PING_TOO_LARGE,
        429 => PING_RATE_LIMITED,
        503 => OVERLOADED,
    }
);
