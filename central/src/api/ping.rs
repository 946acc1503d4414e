//! Heartbeat monitors' ping URLs (`/ping/{token}`, `/ping/{token}/{signal}`: `start`, `fail`
//! or an exit code), GET, HEAD or POST, and the settings-API operations on them (a new ping
//! URL, the kept pings). Thin: parse, limit, call `service::push`, answer.
//!
//! A ping needs nothing but its URL, so it is served from the `ping` pool (`pools`), apart
//! from logins and from pollers. Each token may ping about once a second (`PER_SECOND`, with
//! a burst), checked in memory before any database read; a wrong token counts as a failed
//! authentication of its client, apart from logins' (`pools`). Cost: O(1) per ping.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::{Extension, Json};
use sha2::{Digest, Sha256};
use shared_proto::heartbeat::{PingKind, PingList, PingUrl};
use uuid::Uuid;

use super::extract::ApiPath;
use crate::error::{ApiError, ApiResult};
use crate::server::client_addr::TrustedProxies;
use crate::server::PeerAddr;
use crate::service::buckets::Buckets;
use crate::service::error::ServiceError;
use crate::service::push::Ping;
use crate::service::App;

/// The largest ping body taken (the first `service::push::KEPT_BODY_BYTES` are kept).
pub const PING_BODY_LIMIT: usize = 100 * 1024;
/// Pings per second a token gets back, and how many it may send at once.
const PER_SECOND: f64 = 1.0;
const BURST: f64 = 20.0;
/// A ping token as central makes them (`auth::new_secret`): 64 hex digits.
const TOKEN_LEN: usize = 64;

/// What the ping route shares: the per-token buckets and who may name the client.
pub struct PingState {
    buckets: Buckets<[u8; 16]>,
    proxies: TrustedProxies,
}

impl PingState {
    pub fn new(proxies: TrustedProxies) -> Self {
        Self {
            buckets: Buckets::new(PER_SECOND, BURST),
            proxies,
        }
    }
}

#[utoipa::path(
    method(get, post), path = "/ping/{token}", tag = "heartbeats", operation_id = "ping",
    summary = "A heartbeat monitor's job reports success (GET, HEAD or POST)",
    params(("token" = String, Path, description = "The secret of the monitor's ping URL")),
    request_body(content = String, content_type = "text/plain", description = "Optional (POST): the job's output; the first 10 KiB are kept."),
    responses((status = 200, description = "Recorded.", body = String, content_type = "text/plain"), super::openapi::PingErrors)
)]
pub async fn ping(
    State(app): State<Arc<App>>,
    Extension(state): Extension<Arc<PingState>>,
    ConnectInfo(peer): ConnectInfo<PeerAddr>,
    method: Method,
    headers: HeaderMap,
    ApiPath(token): ApiPath<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<&'static str> {
    let source = state.proxies.client_ip(peer.addr.ip(), &headers);
    receive(&app, &state, &token, None, source, method, body).await
}

#[utoipa::path(
    method(get, post), path = "/ping/{token}/{signal}", tag = "heartbeats", operation_id = "ping_signal",
    summary = "A heartbeat monitor's job says it started, failed, or exited with a code (GET, HEAD or POST)",
    params(
        ("token" = String, Path, description = "The secret of the monitor's ping URL"),
        ("signal" = String, Path, description = "`start` (the job began: it must finish within the grace), `fail`, or an exit code 0–255 (0 is success)"),
    ),
    request_body(content = String, content_type = "text/plain", description = "Optional (POST): the job's output; the first 10 KiB are kept."),
    responses((status = 200, description = "Recorded.", body = String, content_type = "text/plain"), super::openapi::PingErrors)
)]
pub async fn ping_signal(
    State(app): State<Arc<App>>,
    Extension(state): Extension<Arc<PingState>>,
    ConnectInfo(peer): ConnectInfo<PeerAddr>,
    method: Method,
    headers: HeaderMap,
    ApiPath((token, signal)): ApiPath<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<&'static str> {
    let source = state.proxies.client_ip(peer.addr.ip(), &headers);
    receive(&app, &state, &token, Some(&signal), source, method, body).await
}

async fn receive(
    app: &App,
    state: &PingState,
    token: &str,
    signal: Option<&str>,
    source: std::net::IpAddr,
    method: Method,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<&'static str> {
    let unknown = || {
        ApiError::Service(ServiceError::NotFound(
            "no heartbeat monitor has this ping URL".into(),
        ))
    };
    if token.len() != TOKEN_LEN || !token.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(unknown());
    }
    // Hex digits in either case name the same token.
    let token = &token.to_ascii_lowercase();
    let kind = PingKind::parse(signal).ok_or_else(unknown)?;
    // Before any read: a token that pings too often costs nothing more.
    let key: [u8; 16] = Sha256::digest(token.as_bytes())[..16]
        .try_into()
        .expect("16 bytes of a 32-byte digest");
    if let Err(wait) = state.buckets.take(key, Instant::now()) {
        let seconds = wait.as_secs().max(1);
        return Err(ApiError::Service(ServiceError::RateLimited {
            message: format!("this ping URL pings too often; retry in {seconds} s"),
            retry_after: seconds,
        }));
    }
    let body = body.map_err(|e| match e.status() {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge(format!(
            "a ping's body is at most {} KiB",
            PING_BODY_LIMIT / 1024
        )),
        _ => ApiError::Service(ServiceError::Invalid {
            code: "invalid_body",
            message: format!("the body could not be read: {e}"),
        }),
    })?;
    let ping = Ping {
        kind,
        source: source.to_string(),
        method: method.as_str().to_string(),
        body: body.to_vec(),
    };
    app.ping(token, ping).await?;
    Ok("OK\n")
}

#[utoipa::path(
    post, path = "/api/v1/monitors/{id}/ping-url", tag = "heartbeats", operation_id = "new_ping_url",
    summary = "A new ping URL for a heartbeat monitor (the previous one stops working)",
    security(("admin_token" = [])),
    params(("id" = Uuid, Path, description = "Monitor id")),
    responses(
        (status = 200, description = "The new URL, shown this once.", body = PingUrl),
        (status = 409, description = "`conflict`: the monitor is not a heartbeat monitor.", body = shared_proto::ErrorBody),
        super::openapi::IdErrors
    )
)]
pub async fn new_ping_url(
    State(app): State<Arc<App>>,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<Json<PingUrl>> {
    Ok(Json(app.new_ping_url(id).await?))
}

#[utoipa::path(
    get, path = "/api/v1/monitors/{id}/pings", tag = "heartbeats", operation_id = "list_pings",
    summary = "A heartbeat monitor's last 50 pings, newest first",
    security(("admin_token" = [])),
    params(("id" = Uuid, Path, description = "Monitor id")),
    responses((status = 200, description = "The kept pings (none for other kinds).", body = PingList), super::openapi::IdErrors)
)]
pub async fn list_pings(
    State(app): State<Arc<App>>,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<Json<PingList>> {
    Ok(Json(app.pings(id).await?))
}
