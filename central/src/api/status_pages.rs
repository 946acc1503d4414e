//! Settings-API handlers for status pages (thin: parse, call the `StatusPages` service, which
//! they take from the router's state, answer).

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use shared_proto::settings_api::Page;
use shared_proto::status_pages::{StatusPagePatch, StatusPageSpec, StatusPageView};
use uuid::Uuid;

use super::extract::{ApiJson, ApiPath, ApiQuery, PageQuery};
use crate::error::ApiResult;
use crate::service::status_pages::StatusPages;

#[utoipa::path(
    post, path = "/api/v1/status-pages", tag = "status-pages", operation_id = "create_status_page",
    summary = "Create a status page (read by visitors at `/status/{slug}`)",
    security(("admin_token" = [])),
    request_body = StatusPageSpec,
    responses((status = 201, description = "Created.", body = StatusPageView), super::openapi::PageCreateErrors)
)]
pub async fn create_page(
    State(pages): State<StatusPages>,
    ApiJson(spec): ApiJson<StatusPageSpec>,
) -> ApiResult<(StatusCode, Json<StatusPageView>)> {
    Ok((StatusCode::CREATED, Json(pages.create_page(spec).await?)))
}

#[utoipa::path(
    get, path = "/api/v1/status-pages", tag = "status-pages", operation_id = "list_status_pages",
    summary = "List status pages",
    security(("admin_token" = [])),
    params(PageQuery),
    responses((status = 200, description = "A page of status pages.", body = Page<StatusPageView>), super::openapi::QueryErrors)
)]
pub async fn list_pages(
    State(pages): State<StatusPages>,
    ApiQuery(page): ApiQuery<PageQuery>,
) -> ApiResult<Json<Page<StatusPageView>>> {
    let (cursor, limit) = page.parse()?;
    Ok(Json(pages.list_pages(&cursor, limit).await?))
}

#[utoipa::path(
    get, path = "/api/v1/status-pages/{id}", tag = "status-pages", operation_id = "get_status_page",
    summary = "A status page (its password is never shown)",
    security(("admin_token" = [])),
    params(("id" = Uuid, Path, description = "Status page id")),
    responses((status = 200, description = "The page.", body = StatusPageView), super::openapi::IdErrors)
)]
pub async fn get_page(
    State(pages): State<StatusPages>,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<Json<StatusPageView>> {
    Ok(Json(pages.get_page(id).await?))
}

#[utoipa::path(
    patch, path = "/api/v1/status-pages/{id}", tag = "status-pages", operation_id = "update_status_page",
    summary = "Change a status page",
    security(("admin_token" = [])),
    request_body = StatusPagePatch,
    params(("id" = Uuid, Path, description = "Status page id")),
    responses((status = 200, description = "The page as changed.", body = StatusPageView), super::openapi::PagePatchErrors)
)]
pub async fn update_page(
    State(pages): State<StatusPages>,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(patch): ApiJson<StatusPagePatch>,
) -> ApiResult<Json<StatusPageView>> {
    Ok(Json(pages.update_page(id, patch).await?))
}

#[utoipa::path(
    delete, path = "/api/v1/status-pages/{id}", tag = "status-pages", operation_id = "delete_status_page",
    summary = "Delete a status page",
    security(("admin_token" = [])),
    params(("id" = Uuid, Path, description = "Status page id")),
    responses((status = 204, description = "Deleted."), super::openapi::IdErrors)
)]
pub async fn delete_page(
    State(pages): State<StatusPages>,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<StatusCode> {
    pages.delete_page(id).await?;
    Ok(StatusCode::NO_CONTENT)
}
