//! Settings-API handlers for status pages (thin: parse, call the `StatusPages` service, which
//! they take from the router's state, answer).

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use shared_proto::settings_api::Page;
use shared_proto::status_incidents::{
    IncidentPatch, IncidentSpec, IncidentUpdateSpec, IncidentView,
};
use shared_proto::status_pages::{StatusPagePatch, StatusPageSpec, StatusPageView};
use shared_proto::status_subscribers::SubscriberView;
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

#[utoipa::path(
    post, path = "/api/v1/status-pages/{id}/incidents", tag = "status-pages", operation_id = "create_incident",
    summary = "Open an incident on a status page (its message is its first update)",
    security(("admin_token" = [])),
    request_body = IncidentSpec,
    params(("id" = Uuid, Path, description = "Status page id")),
    responses((status = 201, description = "Opened.", body = IncidentView), super::openapi::PatchErrors)
)]
pub async fn create_incident(
    State(pages): State<StatusPages>,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(spec): ApiJson<IncidentSpec>,
) -> ApiResult<(StatusCode, Json<IncidentView>)> {
    Ok((
        StatusCode::CREATED,
        Json(pages.create_incident(id, spec).await?),
    ))
}

#[utoipa::path(
    get, path = "/api/v1/status-pages/{id}/incidents", tag = "status-pages", operation_id = "list_incidents",
    summary = "A status page's incidents, oldest first, each with its updates (newest first)",
    security(("admin_token" = [])),
    params(("id" = Uuid, Path, description = "Status page id"), PageQuery),
    responses((status = 200, description = "A page of incidents.", body = Page<IncidentView>), super::openapi::IdQueryErrors)
)]
pub async fn list_incidents(
    State(pages): State<StatusPages>,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(page): ApiQuery<PageQuery>,
) -> ApiResult<Json<Page<IncidentView>>> {
    let (cursor, limit) = page.parse()?;
    Ok(Json(pages.list_incidents(id, &cursor, limit).await?))
}

#[utoipa::path(
    get, path = "/api/v1/status-pages/{id}/incidents/{iid}", tag = "status-pages", operation_id = "get_incident",
    summary = "An incident with its updates (newest first)",
    security(("admin_token" = [])),
    params(("id" = Uuid, Path, description = "Status page id"), ("iid" = Uuid, Path, description = "Incident id")),
    responses((status = 200, description = "The incident.", body = IncidentView), super::openapi::IdErrors)
)]
pub async fn get_incident(
    State(pages): State<StatusPages>,
    ApiPath((id, iid)): ApiPath<(Uuid, Uuid)>,
) -> ApiResult<Json<IncidentView>> {
    Ok(Json(pages.get_incident(id, iid).await?))
}

#[utoipa::path(
    patch, path = "/api/v1/status-pages/{id}/incidents/{iid}", tag = "status-pages", operation_id = "update_incident",
    summary = "Change an incident's title or monitors; a `message` (with a new `status`, or the same) adds an update",
    security(("admin_token" = [])),
    request_body = IncidentPatch,
    params(("id" = Uuid, Path, description = "Status page id"), ("iid" = Uuid, Path, description = "Incident id")),
    responses((status = 200, description = "The incident as changed.", body = IncidentView), super::openapi::IncidentChangeErrors)
)]
pub async fn update_incident(
    State(pages): State<StatusPages>,
    ApiPath((id, iid)): ApiPath<(Uuid, Uuid)>,
    ApiJson(patch): ApiJson<IncidentPatch>,
) -> ApiResult<Json<IncidentView>> {
    Ok(Json(pages.update_incident(id, iid, patch).await?))
}

#[utoipa::path(
    delete, path = "/api/v1/status-pages/{id}/incidents/{iid}", tag = "status-pages", operation_id = "delete_incident",
    summary = "Delete an incident and its updates (one opened by mistake; a resolved one belongs in the page's history)",
    security(("admin_token" = [])),
    params(("id" = Uuid, Path, description = "Status page id"), ("iid" = Uuid, Path, description = "Incident id")),
    responses((status = 204, description = "Deleted."), super::openapi::IdErrors)
)]
pub async fn delete_incident(
    State(pages): State<StatusPages>,
    ApiPath((id, iid)): ApiPath<(Uuid, Uuid)>,
) -> ApiResult<StatusCode> {
    pages.delete_incident(id, iid).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(
    post, path = "/api/v1/status-pages/{id}/incidents/{iid}/updates", tag = "status-pages", operation_id = "add_incident_update",
    summary = "Add an update to an incident: what is new, and where it stands now",
    security(("admin_token" = [])),
    request_body = IncidentUpdateSpec,
    params(("id" = Uuid, Path, description = "Status page id"), ("iid" = Uuid, Path, description = "Incident id")),
    responses((status = 201, description = "The incident with its new update.", body = IncidentView), super::openapi::IncidentChangeErrors)
)]
pub async fn add_incident_update(
    State(pages): State<StatusPages>,
    ApiPath((id, iid)): ApiPath<(Uuid, Uuid)>,
    ApiJson(update): ApiJson<IncidentUpdateSpec>,
) -> ApiResult<(StatusCode, Json<IncidentView>)> {
    let incident = pages.add_incident_update(id, iid, update).await?;
    Ok((StatusCode::CREATED, Json(incident)))
}

#[utoipa::path(
    get, path = "/api/v1/status-pages/{id}/subscribers", tag = "status-pages", operation_id = "list_subscribers",
    summary = "A status page's subscribers, oldest first (admins only: strangers' addresses; a webhook by its host)",
    security(("admin_token" = [])),
    params(("id" = Uuid, Path, description = "Status page id"), PageQuery),
    responses((status = 200, description = "A page of subscribers.", body = Page<SubscriberView>), super::openapi::IdQueryErrors)
)]
pub async fn list_subscribers(
    State(pages): State<StatusPages>,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(page): ApiQuery<PageQuery>,
) -> ApiResult<Json<Page<SubscriberView>>> {
    let (cursor, limit) = page.parse()?;
    Ok(Json(pages.list_subscribers(id, &cursor, limit).await?))
}

#[utoipa::path(
    delete, path = "/api/v1/status-pages/{id}/subscribers/{sid}", tag = "status-pages", operation_id = "delete_subscriber",
    summary = "Remove a subscriber (nothing more is sent to it)",
    security(("admin_token" = [])),
    params(("id" = Uuid, Path, description = "Status page id"), ("sid" = Uuid, Path, description = "Subscriber id")),
    responses((status = 204, description = "Deleted."), super::openapi::IdErrors)
)]
pub async fn delete_subscriber(
    State(pages): State<StatusPages>,
    ApiPath((id, sid)): ApiPath<(Uuid, Uuid)>,
) -> ApiResult<StatusCode> {
    pages.delete_subscriber(id, sid).await?;
    Ok(StatusCode::NO_CONTENT)
}
