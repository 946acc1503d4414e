//! Poller API handlers (agent → central).

use std::sync::Arc;

use axum::extract::State;
use axum::{Extension, Json};
use serde::Deserialize;
use shared_proto::poller_api::{
    AssignmentsResponse, HeartbeatRequest, HeartbeatResponse, RegisterRequest, RegisterResponse,
    ResultsAck, ResultsBatch, TokenRequest, TokenResponse,
};

use super::extract::{ApiJson, ApiQuery, Poller};
use super::pools::LongPolls;
use crate::error::{ApiError, ApiResult};
use crate::service::ingest::IncomingBatch;
use crate::service::App;

#[utoipa::path(
    post, path = "/api/poller/register", tag = "poller", operation_id = "register",
    summary = "Register a poller with a registration token",
    security(), request_body = RegisterRequest,
    responses(
        (status = 200, description = "Registered: the poller's id and first tokens.", body = RegisterResponse),
        super::openapi::PublicBodyErrors
    )
)]
pub async fn register(
    State(app): State<Arc<App>>,
    ApiJson(request): ApiJson<RegisterRequest>,
) -> ApiResult<Json<RegisterResponse>> {
    Ok(Json(app.register_poller(request).await?))
}

#[utoipa::path(
    post, path = "/api/poller/token", tag = "poller", operation_id = "token",
    summary = "Trade a refresh token for new tokens (the old one is spent)",
    description = "The refresh token in the body is what authorises the exchange. An agent whose \
        access token is still valid sends it too, as a bearer token: central then serves the \
        exchange from the pollers' share of its capacity, which strangers cannot fill.",
    security((), ("poller_access_token" = [])), request_body = TokenRequest,
    responses(
        (status = 200, description = "New tokens.", body = TokenResponse),
        super::openapi::PublicBodyErrors
    )
)]
pub async fn token(
    State(app): State<Arc<App>>,
    ApiJson(request): ApiJson<TokenRequest>,
) -> ApiResult<Json<TokenResponse>> {
    Ok(Json(app.refresh_poller_token(request).await?))
}

#[utoipa::path(
    post, path = "/api/poller/heartbeat", tag = "poller", operation_id = "heartbeat",
    summary = "Report liveness, backlog and engine state",
    security(("poller_access_token" = [])), request_body = HeartbeatRequest,
    responses(
        (status = 200, description = "The current assignment version.", body = HeartbeatResponse),
        super::openapi::PollerBodyErrors
    )
)]
pub async fn heartbeat(
    State(app): State<Arc<App>>,
    Poller(poller): Poller,
    ApiJson(beat): ApiJson<HeartbeatRequest>,
) -> ApiResult<Json<HeartbeatResponse>> {
    Ok(Json(app.heartbeat(&poller, beat).await?))
}

const MAX_WAIT_SECONDS: u64 = 60;

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AssignmentsQuery {
    /// The version the agent has; 0 or less (or one too old) gets the whole set.
    #[serde(default)]
    since_version: i64,
    /// Seconds to wait for a change when there is none yet (long poll), at most 60.
    #[serde(default)]
    #[param(minimum = 0, maximum = 60)]
    wait: u64,
}

#[utoipa::path(
    get, path = "/api/poller/assignments", tag = "poller", operation_id = "assignments",
    summary = "The poller's monitors changed since a version (long poll with `wait`)",
    security(("poller_access_token" = [])),
    params(AssignmentsQuery),
    responses(
        (status = 200, description = "Changes, or the whole set when `full`.", body = AssignmentsResponse),
        super::openapi::PollerQueryErrors
    )
)]
pub async fn assignments(
    State(app): State<Arc<App>>,
    Extension(long_polls): Extension<Arc<LongPolls>>,
    Poller(poller): Poller,
    ApiQuery(query): ApiQuery<AssignmentsQuery>,
) -> ApiResult<Json<AssignmentsResponse>> {
    if query.wait > MAX_WAIT_SECONDS {
        return Err(ApiError::bad_request(
            "invalid_query",
            format!(
                "`wait` is at most {MAX_WAIT_SECONDS} seconds, got {}",
                query.wait
            ),
        ));
    }
    // Past the caps of held long polls (in all, and this poller's), answer at once: the
    // agent simply asks again.
    let slot = if query.wait > 0 {
        long_polls.try_wait(&poller.id)
    } else {
        None
    };
    let wait = match slot {
        Some(_) => std::time::Duration::from_secs(query.wait),
        None => std::time::Duration::ZERO,
    };
    let answer = tokio::select! {
        answer = app.wait_for_assignments(&poller, query.since_version, wait) => answer,
        // Central is stopping: what there is now, rather than a poll cut off by the shutdown.
        () = long_polls.closed(), if slot.is_some() => {
            app.wait_for_assignments(&poller, query.since_version, std::time::Duration::ZERO)
                .await
        }
    };
    drop(slot);
    Ok(Json(answer?))
}

#[utoipa::path(
    post, path = "/api/poller/results", tag = "poller", operation_id = "results",
    summary = "Upload a batch of results (each stored once)",
    security(("poller_access_token" = [])), request_body = ResultsBatch,
    responses(
        (status = 200, description = "Accepted, duplicate and rejected counts.", body = ResultsAck),
        super::openapi::PollerBodyErrors
    )
)]
pub async fn results(
    State(app): State<Arc<App>>,
    Poller(poller): Poller,
    ApiJson(batch): ApiJson<IncomingBatch>,
) -> ApiResult<Json<ResultsAck>> {
    Ok(Json(app.ingest(&poller, batch).await?))
}
