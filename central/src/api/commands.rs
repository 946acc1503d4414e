//! Commands handlers: operators asking pollers to check now, reset or test
//! (`service::commands`), and pollers acknowledging them.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use shared_proto::poller_api::{CommandAck, CommandAckResponse};
use shared_proto::settings_api::{CommandView, CommandsAnswer};
use shared_proto::MonitorSpec;
use uuid::Uuid;

use super::extract::{ApiJson, ApiPath, ApiQuery, Poller};
use crate::error::{ApiError, ApiResult};
use crate::service::commands::{CommandRequest, DEFAULT_WAIT, MAX_WAIT};
use crate::service::App;

/// How long to wait for the answers, and whom to ask.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CommandQuery {
    /// One of the pollers that run the monitor; unset: every one (each location).
    #[serde(default)]
    poller_id: Option<Uuid>,
    /// Seconds to wait for the answers (default 10, at most 25); 0 answers at once.
    #[serde(default)]
    #[param(minimum = 0, maximum = 25)]
    wait: Option<u64>,
}

/// How long to wait for the answers.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct WaitQuery {
    /// Seconds to wait for the answers (default 10, at most 25); 0 answers at once.
    #[serde(default)]
    #[param(minimum = 0, maximum = 25)]
    wait: Option<u64>,
}

impl CommandQuery {
    fn request(&self) -> ApiResult<CommandRequest> {
        Ok(CommandRequest {
            poller_id: self.poller_id,
            wait: wait_of(self.wait)?,
        })
    }
}

fn wait_of(wait: Option<u64>) -> ApiResult<Duration> {
    match wait {
        None => Ok(DEFAULT_WAIT),
        Some(seconds) if seconds <= MAX_WAIT.as_secs() => Ok(Duration::from_secs(seconds)),
        Some(seconds) => Err(ApiError::bad_request(
            "invalid_query",
            format!(
                "`wait` is at most {} seconds, got {seconds}",
                MAX_WAIT.as_secs()
            ),
        )),
    }
}

/// 200 when every poller answered within the wait, 202 when some had not yet.
fn answered(answer: CommandsAnswer) -> (StatusCode, Json<CommandsAnswer>) {
    let status = if answer.complete {
        StatusCode::OK
    } else {
        StatusCode::ACCEPTED
    };
    (status, Json(answer))
}

#[utoipa::path(
    post, path = "/api/v1/monitors/{id}/check", tag = "monitors", operation_id = "check_monitor",
    summary = "Run a monitor now on its poller(s), answering with the fresh results",
    description = "Goes through an open breaker, an auto-pause or a dead letter; the result \
                   counts as any other (stored once).",
    security(("admin_token" = [])),
    params(("id" = Uuid, Path, description = "Monitor id"), CommandQuery),
    responses(
        (status = 200, description = "Every poller answered; each command holds its result.", body = CommandsAnswer),
        (status = 202, description = "Some poller had not answered within the wait.", body = CommandsAnswer),
        super::openapi::CommandErrors
    )
)]
pub async fn check_monitor(
    State(app): State<Arc<App>>,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(query): ApiQuery<CommandQuery>,
) -> ApiResult<(StatusCode, Json<CommandsAnswer>)> {
    let request = query.request()?;
    Ok(answered(app.check_monitor_now(id, request).await?))
}

#[utoipa::path(
    post, path = "/api/v1/monitors/{id}/reset", tag = "monitors", operation_id = "reset_monitor",
    summary = "Clear a monitor's engine state on its poller(s) and run it now",
    description = "Forgets the breaker, backoff, retries, auto-pause and dead letter (releasing \
                   a dead-lettered monitor); results and history stay.",
    security(("admin_token" = [])),
    params(("id" = Uuid, Path, description = "Monitor id"), CommandQuery),
    responses(
        (status = 200, description = "Every poller answered; `message` says what was cleared.", body = CommandsAnswer),
        (status = 202, description = "Some poller had not answered within the wait.", body = CommandsAnswer),
        super::openapi::CommandErrors
    )
)]
pub async fn reset_monitor(
    State(app): State<Arc<App>>,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(query): ApiQuery<CommandQuery>,
) -> ApiResult<(StatusCode, Json<CommandsAnswer>)> {
    let request = query.request()?;
    Ok(answered(app.reset_monitor_engine(id, request).await?))
}

#[utoipa::path(
    post, path = "/api/v1/monitors/test", tag = "monitors", operation_id = "test_monitor",
    summary = "Run a monitor once without saving it",
    description = "On the poller it would run on (one per region for `multi`); nothing is \
                   stored but the command.",
    security(("admin_token" = [])),
    request_body = MonitorSpec,
    params(WaitQuery),
    responses(
        (status = 200, description = "Every poller answered with its result.", body = CommandsAnswer),
        (status = 202, description = "Some poller had not answered within the wait.", body = CommandsAnswer),
        super::openapi::TestErrors
    )
)]
pub async fn test_monitor(
    State(app): State<Arc<App>>,
    ApiQuery(query): ApiQuery<WaitQuery>,
    ApiJson(spec): ApiJson<MonitorSpec>,
) -> ApiResult<Response> {
    let wait = wait_of(query.wait)?;
    let mut shown = spec.clone();
    shared_proto::redaction::hide_monitor(&mut shown);
    let answer = app.test_monitor(spec, wait).await.map(answered)?;
    // For the audit layer: what was tested, as views show it.
    let mut response = answer.into_response();
    response
        .extensions_mut()
        .insert(crate::service::audit::FormOutcome::Tested(
            serde_json::to_value(shown).map_err(anyhow::Error::from)?,
        ));
    Ok(response)
}

#[utoipa::path(
    get, path = "/api/v1/commands/{id}", tag = "monitors", operation_id = "get_command",
    summary = "One command to a poller, as it stands",
    security(("admin_token" = [])),
    params(("id" = Uuid, Path, description = "Command id")),
    responses((status = 200, description = "The command.", body = CommandView), super::openapi::IdErrors)
)]
pub async fn get_command(
    State(app): State<Arc<App>>,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<Json<CommandView>> {
    Ok(Json(app.command(id).await?))
}

#[utoipa::path(
    post, path = "/api/poller/commands/{id}/ack", tag = "poller", operation_id = "acknowledge_command",
    summary = "Say what came of a command (stored once; a repeat answers `already`)",
    security(("poller_access_token" = [])),
    params(("id" = Uuid, Path, description = "Command id")),
    request_body = CommandAck,
    responses(
        (status = 200, description = "Stored, or stored before.", body = CommandAckResponse),
        super::openapi::PollerAckErrors
    )
)]
pub async fn acknowledge(
    State(app): State<Arc<App>>,
    Poller(poller): Poller,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(ack): ApiJson<CommandAck>,
) -> ApiResult<Json<CommandAckResponse>> {
    Ok(Json(app.acknowledge_command(&poller, id, ack).await?))
}
