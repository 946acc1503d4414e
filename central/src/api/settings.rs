//! Settings API handlers (operator → central). Every one requires the admin token.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use shared_proto::poller_api::EngineEvent;
use shared_proto::settings_api::{
    CreateRegistrationToken, MonitorStatusView, MonitorView, Page, PollerPatch, PollerStatus,
    PollerStatusChange, PollerView, RegistrationTokenView, RotateRegistrationToken, StoredResult,
};
use shared_proto::{MonitorPatch, MonitorSpec};
use uuid::Uuid;

use super::extract::{Admin, ApiJson, ApiPath, ApiQuery, OptionalJson, PageQuery};
use crate::error::{ApiError, ApiResult};
use crate::service::pollers::PollerFilter;
use crate::service::App;
use crate::store::Cursor;

pub async fn create_registration_token(
    State(app): State<Arc<App>>,
    _: Admin,
    ApiJson(request): ApiJson<CreateRegistrationToken>,
) -> ApiResult<(StatusCode, Json<RegistrationTokenView>)> {
    let view = app.create_registration_token(request).await?;
    Ok((StatusCode::CREATED, Json(view)))
}

pub async fn list_registration_tokens(
    State(app): State<Arc<App>>,
    _: Admin,
    ApiQuery(page): ApiQuery<PageQuery>,
) -> ApiResult<Json<Page<RegistrationTokenView>>> {
    let (cursor, limit) = page.parse()?;
    app.list_registration_tokens(&cursor, limit).await.map(Json)
}

pub async fn revoke_registration_token(
    State(app): State<Arc<App>>,
    _: Admin,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<StatusCode> {
    app.revoke_registration_token(id).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn rotate_registration_token(
    State(app): State<Arc<App>>,
    _: Admin,
    ApiPath(id): ApiPath<Uuid>,
    OptionalJson(request): OptionalJson<RotateRegistrationToken>,
) -> ApiResult<Json<RegistrationTokenView>> {
    app.rotate_registration_token(id, request).await.map(Json)
}

/// `?cursor=&limit=&region=&datacenter=&status=`
#[derive(Debug, Deserialize)]
pub struct PollerListQuery {
    cursor: Option<String>,
    limit: Option<u32>,
    region: Option<String>,
    datacenter: Option<String>,
    status: Option<PollerStatus>,
}

pub async fn list_pollers(
    State(app): State<Arc<App>>,
    _: Admin,
    ApiQuery(query): ApiQuery<PollerListQuery>,
) -> ApiResult<Json<Page<PollerView>>> {
    let (cursor, limit) = PageQuery {
        cursor: query.cursor,
        limit: query.limit,
    }
    .parse()?;
    let filter = PollerFilter {
        region: query.region,
        datacenter: query.datacenter,
        status: query.status,
    };
    app.list_pollers(&filter, &cursor, limit).await.map(Json)
}

pub async fn update_poller(
    State(app): State<Arc<App>>,
    _: Admin,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(patch): ApiJson<PollerPatch>,
) -> ApiResult<Json<PollerView>> {
    app.update_poller(id, patch).await.map(Json)
}

pub async fn delete_poller(
    State(app): State<Arc<App>>,
    _: Admin,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<StatusCode> {
    app.delete_poller(id).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn get_poller(
    State(app): State<Arc<App>>,
    _: Admin,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<Json<PollerView>> {
    app.get_poller(id).await.map(Json)
}

pub async fn poller_events(
    State(app): State<Arc<App>>,
    _: Admin,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(page): ApiQuery<PageQuery>,
) -> ApiResult<Json<Page<EngineEvent>>> {
    let (cursor, limit) = page.parse()?;
    app.poller_events(id, &cursor, limit).await.map(Json)
}

pub async fn poller_status_changes(
    State(app): State<Arc<App>>,
    _: Admin,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(page): ApiQuery<PageQuery>,
) -> ApiResult<Json<Page<PollerStatusChange>>> {
    let (cursor, limit) = page.parse()?;
    app.poller_status_changes(id, &cursor, limit)
        .await
        .map(Json)
}

pub async fn create_monitor(
    State(app): State<Arc<App>>,
    _: Admin,
    ApiJson(spec): ApiJson<MonitorSpec>,
) -> ApiResult<(StatusCode, Json<MonitorView>)> {
    let view = app.create_monitor(spec).await?;
    Ok((StatusCode::CREATED, Json(view)))
}

pub async fn list_monitors(
    State(app): State<Arc<App>>,
    _: Admin,
    ApiQuery(page): ApiQuery<PageQuery>,
) -> ApiResult<Json<Page<MonitorView>>> {
    let (cursor, limit) = page.parse()?;
    app.list_monitors(&cursor, limit).await.map(Json)
}

pub async fn get_monitor(
    State(app): State<Arc<App>>,
    _: Admin,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<Json<MonitorView>> {
    app.get_monitor(id).await.map(Json)
}

pub async fn update_monitor(
    State(app): State<Arc<App>>,
    _: Admin,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(patch): ApiJson<MonitorPatch>,
) -> ApiResult<Json<MonitorView>> {
    app.update_monitor(id, patch).await.map(Json)
}

pub async fn delete_monitor(
    State(app): State<Arc<App>>,
    _: Admin,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<StatusCode> {
    app.delete_monitor(id).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn monitor_status(
    State(app): State<Arc<App>>,
    _: Admin,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<Json<MonitorStatusView>> {
    app.monitor_status(id).await.map(Json)
}

#[derive(Debug, Deserialize)]
pub struct ResultsQuery {
    since: Option<String>,
    cursor: Option<String>,
    limit: Option<u32>,
}

pub async fn monitor_results(
    State(app): State<Arc<App>>,
    _: Admin,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(query): ApiQuery<ResultsQuery>,
) -> ApiResult<Json<Page<StoredResult>>> {
    let (mut cursor, limit) = PageQuery {
        cursor: query.cursor,
        limit: query.limit,
    }
    .parse()?;
    if cursor == Cursor::start() {
        if let Some(since) = &query.since {
            let since: DateTime<Utc> = since.parse().map_err(|_| {
                ApiError::bad_request(
                    "invalid_query",
                    format!(
                        "`since` must be an RFC 3339 time like 2026-01-31T12:00:00Z, got `{since}`"
                    ),
                )
            })?;
            // Results at exactly `since` are included: start just before it.
            cursor = Cursor {
                key: since.timestamp_millis() - 1,
                id: "\u{10FFFF}".into(),
            };
        }
    }
    app.monitor_results(id, &cursor, limit).await.map(Json)
}
