//! Poller API handlers (agent → central).

use std::sync::Arc;

use axum::extract::State;
use axum::{Extension, Json};
use serde::Deserialize;
use shared_proto::poller_api::{
    AssignmentsResponse, HeartbeatRequest, HeartbeatResponse, RegisterRequest, RegisterResponse,
    ResultsAck, TokenRequest, TokenResponse,
};

use super::extract::{ApiJson, ApiQuery, Poller};
use super::overload::LongPolls;
use crate::error::{ApiError, ApiResult};
use crate::service::ingest::IncomingBatch;
use crate::service::App;

pub async fn register(
    State(app): State<Arc<App>>,
    ApiJson(request): ApiJson<RegisterRequest>,
) -> ApiResult<Json<RegisterResponse>> {
    app.register_poller(request).await.map(Json)
}

pub async fn token(
    State(app): State<Arc<App>>,
    ApiJson(request): ApiJson<TokenRequest>,
) -> ApiResult<Json<TokenResponse>> {
    app.refresh_poller_token(request).await.map(Json)
}

pub async fn heartbeat(
    State(app): State<Arc<App>>,
    Poller(poller): Poller,
    ApiJson(beat): ApiJson<HeartbeatRequest>,
) -> ApiResult<Json<HeartbeatResponse>> {
    app.heartbeat(&poller, beat).await.map(Json)
}

const MAX_WAIT_SECONDS: u64 = 60;

#[derive(Debug, Deserialize)]
pub struct AssignmentsQuery {
    #[serde(default)]
    since_version: i64,
    /// Seconds to wait for a change when there is none yet (long poll), at most 60.
    #[serde(default)]
    wait: u64,
}

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
    // Past the cap of held long polls, answer at once: the agent simply asks again.
    let slot = if query.wait > 0 {
        long_polls.try_wait()
    } else {
        None
    };
    let wait = match slot {
        Some(_) => std::time::Duration::from_secs(query.wait),
        None => std::time::Duration::ZERO,
    };
    let answer = app
        .wait_for_assignments(&poller, query.since_version, wait)
        .await;
    drop(slot);
    answer.map(Json)
}

pub async fn results(
    State(app): State<Arc<App>>,
    Poller(poller): Poller,
    ApiJson(batch): ApiJson<IncomingBatch>,
) -> ApiResult<Json<ResultsAck>> {
    app.ingest(&poller, batch).await.map(Json)
}
