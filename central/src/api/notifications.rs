//! Settings-API handlers for notification channels and the delivery log (thin: parse, call
//! `service::channels`, answer).

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use shared_proto::notifications::{
    ChannelPatch, ChannelSpec, ChannelTestResult, ChannelView, NotificationView,
};
use shared_proto::settings_api::Page;
use utoipa::IntoParams;
use uuid::Uuid;

use super::extract::{ApiJson, ApiPath, ApiQuery, PageQuery};
use crate::error::ApiResult;
use crate::service::channels::Channels;

#[utoipa::path(
    post, path = "/api/v1/notification-channels", tag = "notifications", operation_id = "create_notification_channel",
    summary = "Create a notification channel",
    security(("admin_token" = [])),
    request_body = ChannelSpec,
    responses((status = 201, description = "Created (the secret is never shown again).", body = ChannelView), super::openapi::SpecErrors)
)]
pub async fn create_channel(
    State(channels): State<Channels>,
    ApiJson(spec): ApiJson<ChannelSpec>,
) -> ApiResult<(StatusCode, Json<ChannelView>)> {
    let view = channels.create_channel(spec).await?;
    Ok((StatusCode::CREATED, Json(view)))
}

#[utoipa::path(
    get, path = "/api/v1/notification-channels", tag = "notifications", operation_id = "list_notification_channels",
    summary = "List notification channels",
    security(("admin_token" = [])),
    params(PageQuery),
    responses((status = 200, description = "A page of channels.", body = Page<ChannelView>), super::openapi::QueryErrors)
)]
pub async fn list_channels(
    State(channels): State<Channels>,
    ApiQuery(page): ApiQuery<PageQuery>,
) -> ApiResult<Json<Page<ChannelView>>> {
    let (cursor, limit) = page.parse()?;
    Ok(Json(channels.list_channels(&cursor, limit).await?))
}

#[utoipa::path(
    get, path = "/api/v1/notification-channels/{id}", tag = "notifications", operation_id = "get_notification_channel",
    summary = "A notification channel",
    security(("admin_token" = [])),
    params(("id" = Uuid, Path, description = "Channel id")),
    responses((status = 200, description = "The channel.", body = ChannelView), super::openapi::IdErrors)
)]
pub async fn get_channel(
    State(channels): State<Channels>,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<Json<ChannelView>> {
    Ok(Json(channels.get_channel(id).await?))
}

#[utoipa::path(
    patch, path = "/api/v1/notification-channels/{id}", tag = "notifications", operation_id = "update_notification_channel",
    summary = "Change a notification channel (its kind cannot change)",
    security(("admin_token" = [])),
    request_body = ChannelPatch,
    params(("id" = Uuid, Path, description = "Channel id")),
    responses((status = 200, description = "The channel as changed.", body = ChannelView), super::openapi::PatchErrors)
)]
pub async fn update_channel(
    State(channels): State<Channels>,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(patch): ApiJson<ChannelPatch>,
) -> ApiResult<Json<ChannelView>> {
    Ok(Json(channels.update_channel(id, patch).await?))
}

#[utoipa::path(
    delete, path = "/api/v1/notification-channels/{id}", tag = "notifications", operation_id = "delete_notification_channel",
    summary = "Delete a notification channel (its undelivered notifications are given up)",
    security(("admin_token" = [])),
    params(("id" = Uuid, Path, description = "Channel id")),
    responses((status = 204, description = "Deleted."), super::openapi::IdErrors)
)]
pub async fn delete_channel(
    State(channels): State<Channels>,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<StatusCode> {
    channels.delete_channel(id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(
    post, path = "/api/v1/notification-channels/{id}/test", tag = "notifications", operation_id = "test_notification_channel",
    summary = "Send a test message now and say whether the receiver took it",
    security(("admin_token" = [])),
    params(("id" = Uuid, Path, description = "Channel id")),
    responses((status = 200, description = "What happened (a refusing receiver is `delivered: false` with its answer).", body = ChannelTestResult), super::openapi::IdErrors)
)]
pub async fn test_channel(
    State(channels): State<Channels>,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<Json<ChannelTestResult>> {
    Ok(Json(channels.test_channel(id).await?))
}

/// `?monitor_id=&channel_id=&cursor=&limit=`
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct NotificationQuery {
    /// Only notifications about this monitor.
    monitor_id: Option<Uuid>,
    /// Only notifications to this channel.
    channel_id: Option<Uuid>,
    /// `next_cursor` of the previous page; omit for the first page.
    #[param(pattern = r"^(-?[0-9]{1,18}\.[0-9a-f-]{0,36})?$")]
    cursor: Option<String>,
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u32>,
}

#[utoipa::path(
    get, path = "/api/v1/notifications", tag = "notifications", operation_id = "list_notifications",
    summary = "The delivery log, oldest first",
    security(("admin_token" = [])),
    params(NotificationQuery),
    responses((status = 200, description = "A page of notifications with their delivery state.", body = Page<NotificationView>), super::openapi::QueryErrors)
)]
pub async fn list_notifications(
    State(channels): State<Channels>,
    ApiQuery(query): ApiQuery<NotificationQuery>,
) -> ApiResult<Json<Page<NotificationView>>> {
    let (cursor, limit) = PageQuery {
        cursor: query.cursor,
        limit: query.limit,
    }
    .parse()?;
    Ok(Json(
        channels
            .list_notifications(query.monitor_id, query.channel_id, &cursor, limit)
            .await?,
    ))
}
