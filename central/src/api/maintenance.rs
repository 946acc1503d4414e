//! Settings-API handlers for maintenance windows and "mute for" (thin: parse, call the
//! `Maintenance` service, which they take from the router's state, answer).

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use shared_proto::maintenance::{
    MaintenanceWindowPatch, MaintenanceWindowSpec, MaintenanceWindowView, MuteRequest,
};
use shared_proto::settings_api::Page;
use uuid::Uuid;

use super::extract::{ApiJson, ApiPath, ApiQuery, PageQuery};
use crate::error::ApiResult;
use crate::service::maintenance::Maintenance;

#[utoipa::path(
    post, path = "/api/v1/maintenance-windows", tag = "maintenance", operation_id = "create_maintenance_window",
    summary = "Create a maintenance window (one-off or recurring)",
    security(("admin_token" = [])),
    request_body = MaintenanceWindowSpec,
    responses((status = 201, description = "Created; the monitors it covers show `maintenance` while it is under way.", body = MaintenanceWindowView), super::openapi::SpecErrors)
)]
pub async fn create_window(
    State(maintenance): State<Maintenance>,
    ApiJson(spec): ApiJson<MaintenanceWindowSpec>,
) -> ApiResult<(StatusCode, Json<MaintenanceWindowView>)> {
    let view = maintenance.create_window(spec).await?;
    Ok((StatusCode::CREATED, Json(view)))
}

#[utoipa::path(
    get, path = "/api/v1/maintenance-windows", tag = "maintenance", operation_id = "list_maintenance_windows",
    summary = "List maintenance windows",
    security(("admin_token" = [])),
    params(PageQuery),
    responses((status = 200, description = "A page of windows.", body = Page<MaintenanceWindowView>), super::openapi::QueryErrors)
)]
pub async fn list_windows(
    State(maintenance): State<Maintenance>,
    ApiQuery(page): ApiQuery<PageQuery>,
) -> ApiResult<Json<Page<MaintenanceWindowView>>> {
    let (cursor, limit) = page.parse()?;
    Ok(Json(maintenance.list_windows(&cursor, limit).await?))
}

#[utoipa::path(
    get, path = "/api/v1/maintenance-windows/{id}", tag = "maintenance", operation_id = "get_maintenance_window",
    summary = "A maintenance window, with its occurrence under way and its next one",
    security(("admin_token" = [])),
    params(("id" = Uuid, Path, description = "Window id")),
    responses((status = 200, description = "The window.", body = MaintenanceWindowView), super::openapi::IdErrors)
)]
pub async fn get_window(
    State(maintenance): State<Maintenance>,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<Json<MaintenanceWindowView>> {
    Ok(Json(maintenance.get_window(id).await?))
}

#[utoipa::path(
    patch, path = "/api/v1/maintenance-windows/{id}", tag = "maintenance", operation_id = "update_maintenance_window",
    summary = "Change a maintenance window (`ends_at` now ends it at once)",
    security(("admin_token" = [])),
    request_body = MaintenanceWindowPatch,
    params(("id" = Uuid, Path, description = "Window id")),
    responses((status = 200, description = "The window as changed.", body = MaintenanceWindowView), super::openapi::PatchErrors)
)]
pub async fn update_window(
    State(maintenance): State<Maintenance>,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(patch): ApiJson<MaintenanceWindowPatch>,
) -> ApiResult<Json<MaintenanceWindowView>> {
    Ok(Json(maintenance.update_window(id, patch).await?))
}

#[utoipa::path(
    delete, path = "/api/v1/maintenance-windows/{id}", tag = "maintenance", operation_id = "delete_maintenance_window",
    summary = "Delete a maintenance window (time it already kept out of uptime stays out)",
    security(("admin_token" = [])),
    params(("id" = Uuid, Path, description = "Window id")),
    responses((status = 204, description = "Deleted."), super::openapi::IdErrors)
)]
pub async fn delete_window(
    State(maintenance): State<Maintenance>,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<StatusCode> {
    maintenance.delete_window(id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(
    post, path = "/api/v1/monitors/{id}/mute", tag = "maintenance", operation_id = "mute_monitor",
    summary = "Mute a monitor for a while: a one-off maintenance window over it, from now",
    security(("admin_token" = [])),
    request_body = MuteRequest,
    params(("id" = Uuid, Path, description = "Monitor id")),
    responses((status = 201, description = "The window made; delete it to unmute early.", body = MaintenanceWindowView), super::openapi::IdBodyErrors)
)]
pub async fn mute_monitor(
    State(maintenance): State<Maintenance>,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(request): ApiJson<MuteRequest>,
) -> ApiResult<(StatusCode, Json<MaintenanceWindowView>)> {
    let view = maintenance.mute_monitor(id, request).await?;
    Ok((StatusCode::CREATED, Json(view)))
}
