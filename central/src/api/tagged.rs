//! Settings-API handlers for what is done to every monitor carrying a tag (thin: parse, call
//! `service::tagged`, answer).

use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use shared_proto::tags::{TagSelection, TaggedChange};

use super::extract::ApiJson;
use crate::error::ApiResult;
use crate::service::App;

#[utoipa::path(
    post, path = "/api/v1/monitors/pause", tag = "monitors", operation_id = "pause_tagged_monitors",
    summary = "Pause every monitor carrying a tag",
    security(("admin_token" = [])),
    request_body = TagSelection,
    responses((status = 200, description = "How many carry the tag, and how many this paused (at most 5000 per request).", body = TaggedChange), super::openapi::BodyErrors)
)]
pub async fn pause(
    State(app): State<Arc<App>>,
    ApiJson(selection): ApiJson<TagSelection>,
) -> ApiResult<Json<TaggedChange>> {
    Ok(Json(app.pause_tagged(selection, true).await?))
}

#[utoipa::path(
    post, path = "/api/v1/monitors/resume", tag = "monitors", operation_id = "resume_tagged_monitors",
    summary = "Resume every monitor carrying a tag",
    security(("admin_token" = [])),
    request_body = TagSelection,
    responses((status = 200, description = "How many carry the tag, and how many this resumed (at most 5000 per request).", body = TaggedChange), super::openapi::BodyErrors)
)]
pub async fn resume(
    State(app): State<Arc<App>>,
    ApiJson(selection): ApiJson<TagSelection>,
) -> ApiResult<Json<TaggedChange>> {
    Ok(Json(app.pause_tagged(selection, false).await?))
}
