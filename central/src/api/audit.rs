//! The audit log at the boundary: every change that succeeds through the settings API or the
//! page's forms is recorded with who made it (`Principal`), from which address, and the object
//! before and after (`service::audit`). Also `GET /api/v1/audit`. Reads are not recorded.

use std::net::IpAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{ConnectInfo, MatchedPath, Request, State};
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use shared_proto::audit::{AuditEntry, AuditFilter};
use shared_proto::settings_api::Page;
use utoipa::IntoParams;

use super::extract::{ApiQuery, PageQuery};
use crate::error::{ApiError, ApiResult};
use crate::server::client_addr::TrustedProxies;
use crate::server::PeerAddr;
use crate::service::access::Principal;
use crate::service::audit::{FormOutcome, Subject};
use crate::service::error::ServiceError;
use crate::service::App;

/// The largest answer kept as an entry's "after": a change answers with one object, which is
/// far smaller; anything larger is recorded without it rather than held in memory.
const MAX_RECORDED_ANSWER: usize = 256 * 1024;

/// What the recording layers need besides the request.
#[derive(Clone)]
pub struct Recorder {
    pub app: Arc<App>,
    pub proxies: Arc<TrustedProxies>,
}

impl Recorder {
    /// The client's address as the per-client limits see it (through trusted proxies).
    pub fn address(&self, request: &Request) -> Option<String> {
        let ConnectInfo(peer) = request.extensions().get::<ConnectInfo<PeerAddr>>()?;
        let ip: IpAddr = self.proxies.client_ip(peer.addr.ip(), request.headers());
        Some(ip.to_string())
    }

    /// Runs a change and records it when it succeeds: its entry is written ahead
    /// (`service::audit_intents`), and a change whose entry cannot be is refused with `503`. `after_from_answer`: the answer's JSON
    /// body is the object after (the settings API); otherwise the object is read again after
    /// the change (the page answers with a redirect).
    pub async fn around(
        &self,
        principal: Principal,
        subject: Subject,
        request: Request,
        next: Next,
        after_from_answer: bool,
    ) -> Response {
        let address = self.address(&request);
        let before = self.app.audit_view(&subject).await;
        // No change without its entry: written ahead, or the change is not made.
        let intent = match self
            .app
            .audit_intents()
            .intend_change(&principal, address, &subject, before)
            .await
        {
            Ok(intent) => intent,
            Err(e) => return ApiError::Service(ServiceError::AuditUnavailable(e)).into_response(),
        };
        let response = next.run(request).await;
        let status = response.status();
        if !(status.is_success() || status.is_redirection()) {
            self.app.audit_intents().abandon_change(intent).await;
            return response;
        }
        let mut subject = subject;
        match response.extensions().get::<FormOutcome>() {
            Some(FormOutcome::Made(id)) => subject.id = Some(id.clone()),
            Some(FormOutcome::Tested(spec)) => {
                subject.action = "test".into();
                let spec = spec.clone();
                self.app
                    .audit_intents()
                    .complete_change(intent, subject, Some(spec))
                    .await;
                return response;
            }
            None => {}
        }
        let (response, after) = if after_from_answer {
            let (parts, body) = response.into_parts();
            match axum::body::to_bytes(body, MAX_RECORDED_ANSWER).await {
                Ok(bytes) => {
                    let after = serde_json::from_slice(&bytes).ok();
                    (Response::from_parts(parts, Body::from(bytes)), after)
                }
                // Too large to keep: the change stands and is recorded; its answer is lost to
                // the client, which is told so.
                Err(_) => {
                    self.app
                        .audit_intents()
                        .complete_change(intent, subject, None)
                        .await;
                    return ApiError::Service(ServiceError::Internal(anyhow::anyhow!(
                        "a change's answer was over {MAX_RECORDED_ANSWER} bytes"
                    )))
                    .into_response();
                }
            }
        } else {
            (response, self.app.audit_view(&subject).await)
        };
        self.app
            .audit_intents()
            .complete_change(intent, subject, after)
            .await;
        response
    }
}

fn matched(request: &Request) -> String {
    request.extensions().get::<MatchedPath>().map_or_else(
        || request.uri().path().to_string(),
        |m| m.as_str().to_string(),
    )
}

/// The settings API's recording layer, inside `authz` (which put the principal there).
pub async fn record(State(recorder): State<Recorder>, request: Request, next: Next) -> Response {
    let prefix = super::authz::SETTINGS_PREFIX;
    let matched = matched(&request);
    let matched = matched.strip_prefix(prefix).unwrap_or(&matched);
    let actual = request.uri().path();
    let actual = actual.strip_prefix(prefix).unwrap_or(actual);
    let subject = Subject::of_api(request.method().as_str(), matched, actual);
    let principal = request.extensions().get::<Principal>().cloned();
    if let Some(principal) = &principal {
        recorder
            .app
            .note_key_address(principal, recorder.address(&request).as_deref())
            .await;
    }
    match (subject, principal) {
        (Some(subject), Some(principal)) => {
            recorder
                .around(principal, subject, request, next, true)
                .await
        }
        _ => next.run(request).await,
    }
}

/// The page's recording layer: a form's session is read once more here (the handler reads it
/// too), so that the entry names its user.
pub async fn record_page(
    State(recorder): State<Recorder>,
    request: Request,
    next: Next,
) -> Response {
    let matched = matched(&request);
    let Some(subject) = Subject::of_page(request.method().as_str(), &matched, request.uri().path())
    else {
        return next.run(request).await;
    };
    let principal = match session_secret(request.headers()) {
        Some(secret) => match recorder.app.web_session(&secret).await {
            Ok(Some(session)) => Some(session.principal),
            _ => None,
        },
        None => None,
    };
    match principal {
        Some(principal) => {
            recorder
                .around(principal, subject, request, next, false)
                .await
        }
        // No session: the handler refuses the form, and nothing changes.
        None => next.run(request).await,
    }
}

fn session_secret(headers: &HeaderMap) -> Option<String> {
    axum_extra::extract::CookieJar::from_headers(headers)
        .get(crate::web::session::COOKIE)
        .map(|c| c.value().to_string())
}

/// The filters of `GET /api/v1/audit`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct AuditQuery {
    /// Changes by this user or API key id.
    #[param(max_length = 64)]
    actor_id: Option<String>,
    /// `user`, `api_key`, `admin_token` or `anonymous` (refused sign-ins).
    #[param(pattern = "^(user|api_key|admin_token|anonymous)$")]
    actor_kind: Option<String>,
    /// Changes to this kind of object (`monitors`, `users`, …).
    #[param(pattern = "^[a-z-]{1,32}$")]
    object_kind: Option<String>,
    /// Changes to this object.
    #[param(max_length = 64)]
    object_id: Option<String>,
    /// `next_cursor` of the previous page; omit for the first page.
    #[param(pattern = r"^(-?[0-9]{1,18}\.[0-9a-f-]{0,36})?$")]
    cursor: Option<String>,
    /// Items per page (default 100).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u32>,
}

#[utoipa::path(
    get, path = "/api/v1/audit", tag = "users", operation_id = "list_audit",
    summary = "The audit log, newest first (admin)",
    description = "Every change made through the settings API or the page: who (a user, an API \
                   key or the admin token, and the client's address), what (object and action), \
                   when, and the object before and after as the API shows it (secrets are never \
                   in a view). Kept for `CENTRAL_AUDIT_RETENTION`.",
    security(("admin_token" = [])),
    params(AuditQuery),
    responses((status = 200, description = "A page of entries.", body = Page<AuditEntry>), super::openapi::QueryErrors)
)]
pub async fn list_audit(
    State(app): State<Arc<App>>,
    ApiQuery(query): ApiQuery<AuditQuery>,
) -> ApiResult<Json<Page<AuditEntry>>> {
    let (cursor, limit) = PageQuery {
        cursor: query.cursor,
        limit: query.limit,
    }
    .parse()?;
    let bounded = |field: &str, value: Option<String>, ok: fn(&str) -> bool| match value {
        Some(v) if !ok(&v) => Err(ApiError::bad_request(
            "invalid_query",
            format!("`{field}` is not one this API could have written"),
        )),
        other => Ok(other),
    };
    // As the schema says: at most 64 characters (an id names nothing when it matches nothing).
    let id_like = |v: &str| v.chars().count() <= 64;
    let filter = AuditFilter {
        actor_id: bounded("actor_id", query.actor_id, id_like)?,
        actor_kind: bounded("actor_kind", query.actor_kind, |v| {
            ["user", "api_key", "admin_token", "anonymous"].contains(&v)
        })?,
        object_kind: bounded("object_kind", query.object_kind, |v| {
            (1..=32).contains(&v.len()) && v.chars().all(|c| c.is_ascii_lowercase() || c == '-')
        })?,
        object_id: bounded("object_id", query.object_id, id_like)?,
    };
    Ok(Json(app.audit_log(&filter, &cursor, limit).await?))
}
