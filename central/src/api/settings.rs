//! Settings API handlers (operator → central). Who may call each is `authz`'s, in front of them.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use shared_proto::monitor::validate_label;
use shared_proto::poller_api::EngineEvent;
use shared_proto::settings_api::{
    CreateRegistrationToken, MonitorStatus, MonitorStatusView, MonitorView, Page, PollerPatch,
    PollerStatus, PollerStatusChange, PollerView, RegistrationTokenView, RotateRegistrationToken,
    SchedulerView, StoredResult,
};
use shared_proto::{MonitorPatch, MonitorSpec};
use uuid::Uuid;

use super::extract::{
    parse_since, valid_region, valid_tag, ApiJson, ApiPath, ApiQuery, IfMatch, OptionalJson,
    PageQuery,
};
use crate::error::{ApiError, ApiResult};
use crate::service::monitors::MonitorFilter;
use crate::service::pollers::PollerFilter;
use crate::service::tokens::RegistrationTokens;
use crate::service::App;
use crate::store::Cursor;
use utoipa::IntoParams;

#[utoipa::path(
    post, path = "/api/v1/registration-tokens", tag = "registration-tokens", operation_id = "create_registration_token",
    summary = "Create a registration token (admin; the secret is in the answer, once)",
    security(("admin_token" = [])),
    request_body = CreateRegistrationToken,

    responses((status = 201, description = "Created; `token` holds the secret.", body = RegistrationTokenView), super::openapi::BodyErrors)
)]
pub async fn create_registration_token(
    State(registration_tokens): State<RegistrationTokens>,
    ApiJson(request): ApiJson<CreateRegistrationToken>,
) -> ApiResult<(StatusCode, Json<RegistrationTokenView>)> {
    let view = registration_tokens
        .create_registration_token(request)
        .await?;
    Ok((StatusCode::CREATED, Json(view)))
}

#[utoipa::path(
    get, path = "/api/v1/registration-tokens", tag = "registration-tokens", operation_id = "list_registration_tokens",
    summary = "List registration tokens (admin)",
    security(("admin_token" = [])),
    params(PageQuery),
    responses((status = 200, description = "A page of tokens.", body = Page<RegistrationTokenView>), super::openapi::QueryErrors)
)]
pub async fn list_registration_tokens(
    State(registration_tokens): State<RegistrationTokens>,
    ApiQuery(page): ApiQuery<PageQuery>,
) -> ApiResult<Json<Page<RegistrationTokenView>>> {
    let (cursor, limit) = page.parse()?;
    Ok(Json(
        registration_tokens
            .list_registration_tokens(&cursor, limit)
            .await?,
    ))
}

#[utoipa::path(
    delete, path = "/api/v1/registration-tokens/{id}", tag = "registration-tokens", operation_id = "revoke_registration_token",
    summary = "Revoke a registration token (admin)",
    security(("admin_token" = [])),
    params(("id" = Uuid, Path, description = "Registration token id")),
    responses((status = 204, description = "Revoked."), super::openapi::IdErrors)
)]
pub async fn revoke_registration_token(
    State(registration_tokens): State<RegistrationTokens>,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<StatusCode> {
    registration_tokens.revoke_registration_token(id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(
    post, path = "/api/v1/registration-tokens/{id}/rotate", tag = "registration-tokens", operation_id = "rotate_registration_token",
    summary = "Give a registration token a new secret, optionally keeping the old one for an overlap (admin)",
    security(("admin_token" = [])),
    request_body = Option<RotateRegistrationToken>,
    params(("id" = Uuid, Path, description = "Registration token id")),
    responses((status = 200, description = "Rotated; `token` holds the new secret.", body = RegistrationTokenView), super::openapi::IdBodyErrors)
)]
pub async fn rotate_registration_token(
    State(registration_tokens): State<RegistrationTokens>,
    ApiPath(id): ApiPath<Uuid>,
    OptionalJson(request): OptionalJson<RotateRegistrationToken>,
) -> ApiResult<Json<RegistrationTokenView>> {
    Ok(Json(
        registration_tokens
            .rotate_registration_token(id, request)
            .await?,
    ))
}

/// `?cursor=&limit=&region=&datacenter=&status=`
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PollerListQuery {
    /// `next_cursor` of the previous page; omit for the first page.
    #[param(pattern = r"^(-?[0-9]{1,18}\.[0-9a-f-]{0,36})?$")]
    cursor: Option<String>,
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u32>,
    #[param(pattern = r"^[A-Za-z0-9._-]{1,64}$")]
    region: Option<String>,
    #[param(pattern = r"^[A-Za-z0-9._-]{1,64}$")]
    datacenter: Option<String>,
    #[param(inline)]
    status: Option<PollerStatus>,
}

#[utoipa::path(
    get, path = "/api/v1/pollers", tag = "pollers", operation_id = "list_pollers",
    summary = "List pollers",
    security(("admin_token" = [])),
    params(PollerListQuery),
    responses((status = 200, description = "A page of pollers.", body = Page<PollerView>), super::openapi::QueryErrors)
)]
pub async fn list_pollers(
    State(app): State<Arc<App>>,
    ApiQuery(query): ApiQuery<PollerListQuery>,
) -> ApiResult<Json<Page<PollerView>>> {
    let (cursor, limit) = PageQuery {
        cursor: query.cursor,
        limit: query.limit,
    }
    .parse()?;
    for (name, label) in [("region", &query.region), ("datacenter", &query.datacenter)] {
        if let Some(label) = label {
            validate_label(name, label).map_err(|e| {
                ApiError::bad_request("invalid_query", format!("`{}` {}", e.field, e.message))
            })?;
        }
    }
    let filter = PollerFilter {
        region: query.region,
        datacenter: query.datacenter,
        status: query.status,
    };
    Ok(Json(app.list_pollers(&filter, &cursor, limit).await?))
}

#[utoipa::path(
    patch, path = "/api/v1/pollers/{id}", tag = "pollers", operation_id = "update_poller",
    summary = "Change a poller's alias, region, datacenter or enabled flag",
    security(("admin_token" = [])),
    request_body = PollerPatch,
    params(("id" = Uuid, Path, description = "Poller id")),
    responses((status = 200, description = "The poller as changed.", body = PollerView), super::openapi::IdBodyErrors)
)]
pub async fn update_poller(
    State(app): State<Arc<App>>,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(patch): ApiJson<PollerPatch>,
) -> ApiResult<Json<PollerView>> {
    Ok(Json(app.update_poller(id, patch).await?))
}

#[utoipa::path(
    delete, path = "/api/v1/pollers/{id}", tag = "pollers", operation_id = "delete_poller",
    summary = "Delete a poller and revoke its tokens",
    security(("admin_token" = [])),
    params(("id" = Uuid, Path, description = "Poller id")),
    responses((status = 204, description = "Deleted."), super::openapi::IdErrors)
)]
pub async fn delete_poller(
    State(app): State<Arc<App>>,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<StatusCode> {
    app.delete_poller(id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(
    get, path = "/api/v1/pollers/{id}", tag = "pollers", operation_id = "get_poller",
    summary = "A poller",
    security(("admin_token" = [])),
    params(("id" = Uuid, Path, description = "Poller id")),
    responses((status = 200, description = "The poller.", body = PollerView), super::openapi::IdErrors)
)]
pub async fn get_poller(
    State(app): State<Arc<App>>,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<Json<PollerView>> {
    Ok(Json(app.get_poller(id).await?))
}

#[utoipa::path(
    get, path = "/api/v1/pollers/{id}/events", tag = "pollers", operation_id = "poller_events",
    summary = "Engine events a poller reported, oldest first",
    security(("admin_token" = [])),
    params(("id" = Uuid, Path, description = "Poller id"), PageQuery),
    responses((status = 200, description = "A page of events.", body = Page<EngineEvent>), super::openapi::IdQueryErrors)
)]
pub async fn poller_events(
    State(app): State<Arc<App>>,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(page): ApiQuery<PageQuery>,
) -> ApiResult<Json<Page<EngineEvent>>> {
    let (cursor, limit) = page.parse()?;
    Ok(Json(app.poller_events(id, &cursor, limit).await?))
}

#[utoipa::path(
    get, path = "/api/v1/pollers/{id}/status-changes", tag = "pollers", operation_id = "poller_status_changes",
    summary = "A poller's liveness changes, oldest first",
    security(("admin_token" = [])),
    params(("id" = Uuid, Path, description = "Poller id"), PageQuery),
    responses((status = 200, description = "A page of changes.", body = Page<PollerStatusChange>), super::openapi::IdQueryErrors)
)]
pub async fn poller_status_changes(
    State(app): State<Arc<App>>,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(page): ApiQuery<PageQuery>,
) -> ApiResult<Json<Page<PollerStatusChange>>> {
    let (cursor, limit) = page.parse()?;
    Ok(Json(app.poller_status_changes(id, &cursor, limit).await?))
}

#[utoipa::path(
    get, path = "/api/v1/pollers/{id}/scheduler", tag = "pollers", operation_id = "poller_scheduler",
    summary = "A poller's scheduler as its last heartbeat described it",
    description = "Counts, and bounded lists of breakers not closed, auto-paused and \
                   dead-lettered monitors, the stalest monitors and rate-limit budgets.",
    security(("admin_token" = [])),
    params(("id" = Uuid, Path, description = "Poller id")),
    responses((status = 200, description = "The scheduler.", body = SchedulerView), super::openapi::IdErrors)
)]
pub async fn poller_scheduler(
    State(app): State<Arc<App>>,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<Json<SchedulerView>> {
    Ok(Json(app.poller_scheduler(id).await?))
}

#[utoipa::path(
    post, path = "/api/v1/monitors", tag = "monitors", operation_id = "create_monitor",
    summary = "Create a monitor (placed on a poller before the answer)",
    security(("admin_token" = [])),
    request_body = MonitorSpec,

    responses((status = 201, description = "Created.", body = MonitorView, links(("get" = (operation_id = "get_monitor", parameters(("id" = "$response.body#/id")))), ("status" = (operation_id = "monitor_status", parameters(("id" = "$response.body#/id")))), ("update" = (operation_id = "update_monitor", parameters(("id" = "$response.body#/id")))), ("check" = (operation_id = "check_monitor", parameters(("id" = "$response.body#/id")))), ("reset" = (operation_id = "reset_monitor", parameters(("id" = "$response.body#/id")))), ("delete" = (operation_id = "delete_monitor", parameters(("id" = "$response.body#/id")))))), super::openapi::SpecErrors)
)]
pub async fn create_monitor(
    State(app): State<Arc<App>>,
    ApiJson(spec): ApiJson<MonitorSpec>,
) -> ApiResult<(StatusCode, Json<MonitorView>)> {
    let view = app.create_monitor(spec).await?;
    Ok((StatusCode::CREATED, Json(view)))
}

#[utoipa::path(
    get, path = "/api/v1/monitors", tag = "monitors", operation_id = "list_monitors",
    summary = "List monitors",
    security(("admin_token" = [])),
    params(MonitorListQuery),
    responses((status = 200, description = "A page of monitors, each with its status now.", body = Page<MonitorView>), super::openapi::QueryErrors)
)]
pub async fn list_monitors(
    State(app): State<Arc<App>>,
    ApiQuery(query): ApiQuery<MonitorListQuery>,
) -> ApiResult<Json<Page<MonitorView>>> {
    let (cursor, limit) = PageQuery {
        cursor: query.cursor,
        limit: query.limit,
    }
    .parse()?;
    let filter = MonitorFilter {
        status: query.status,
        region: valid_region(query.region)?,
        name: None,
        tag: valid_tag(query.tag)?,
    };
    Ok(Json(app.list_monitors(&filter, &cursor, limit).await?))
}

/// `?cursor=&limit=&status=&region=&tag=`
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct MonitorListQuery {
    /// `next_cursor` of the previous page; omit for the first page.
    #[param(pattern = r"^(-?[0-9]{1,18}\.[0-9a-f-]{0,36})?$")]
    cursor: Option<String>,
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u32>,
    /// Only monitors in this status now.
    #[param(inline)]
    status: Option<MonitorStatus>,
    /// Only monitors running in this region (their poller's, or one of their locations).
    #[param(pattern = r"^[A-Za-z0-9._-]{1,64}$")]
    region: Option<String>,
    /// Only monitors carrying this tag (matched whole, case-sensitively).
    #[param(pattern = r"^[A-Za-z0-9._:/=-]{1,64}$")]
    tag: Option<String>,
}

#[utoipa::path(
    get, path = "/api/v1/monitors/{id}", tag = "monitors", operation_id = "get_monitor",
    summary = "A monitor",
    security(("admin_token" = [])),
    params(("id" = Uuid, Path, description = "Monitor id")),
    responses((status = 200, description = "The monitor.", body = MonitorView), super::openapi::IdErrors)
)]
pub async fn get_monitor(
    State(app): State<Arc<App>>,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<Json<MonitorView>> {
    Ok(Json(app.get_monitor(id).await?))
}

#[utoipa::path(
    patch, path = "/api/v1/monitors/{id}", tag = "monitors", operation_id = "update_monitor",
    summary = "Change a monitor (its kind cannot change)",
    security(("admin_token" = [])),
    request_body = MonitorPatch,
    params(
        ("id" = Uuid, Path, description = "Monitor id"),
        ("If-Match" = Option<String>, Header, pattern = r#"^(\*|(W/)?("[0-9]{1,15}"|[0-9]{1,15}))$"#,
         description = "The monitor's `revision` as read: the change is made only if nobody changed the monitor since (else 409)"),
    ),
    responses((status = 200, description = "The monitor as changed.", body = MonitorView), super::openapi::EditErrors)
)]
pub async fn update_monitor(
    State(app): State<Arc<App>>,
    ApiPath(id): ApiPath<Uuid>,
    IfMatch(if_match): IfMatch,
    ApiJson(patch): ApiJson<MonitorPatch>,
) -> ApiResult<Json<MonitorView>> {
    Ok(Json(app.update_monitor(id, patch, if_match).await?))
}

#[utoipa::path(
    delete, path = "/api/v1/monitors/{id}", tag = "monitors", operation_id = "delete_monitor",
    summary = "Delete a monitor",
    security(("admin_token" = [])),
    params(("id" = Uuid, Path, description = "Monitor id")),
    responses((status = 204, description = "Deleted."), super::openapi::IdErrors)
)]
pub async fn delete_monitor(
    State(app): State<Arc<App>>,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<StatusCode> {
    app.delete_monitor(id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(
    get, path = "/api/v1/monitors/{id}/status", tag = "monitors", operation_id = "monitor_status",
    summary = "A monitor's derived status",
    security(("admin_token" = [])),
    params(("id" = Uuid, Path, description = "Monitor id")),
    responses((status = 200, description = "The status.", body = MonitorStatusView), super::openapi::IdErrors)
)]
pub async fn monitor_status(
    State(app): State<Arc<App>>,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<Json<MonitorStatusView>> {
    Ok(Json(app.monitor_status(id).await?))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ResultsQuery {
    /// Results at or after this RFC 3339 time (ignored with a `cursor`).
    #[param(format = DateTime)]
    since: Option<String>,
    /// `next_cursor` of the previous page; omit for the first page.
    #[param(pattern = r"^(-?[0-9]{1,18}\.[0-9a-f-]{0,36})?$")]
    cursor: Option<String>,
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u32>,
}

#[utoipa::path(
    get, path = "/api/v1/monitors/{id}/results", tag = "monitors", operation_id = "monitor_results",
    summary = "A monitor's raw results, oldest first",
    security(("admin_token" = [])),
    params(("id" = Uuid, Path, description = "Monitor id"), ResultsQuery),
    responses((status = 200, description = "A page of results.", body = Page<StoredResult>), super::openapi::IdQueryErrors)
)]
pub async fn monitor_results(
    State(app): State<Arc<App>>,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(query): ApiQuery<ResultsQuery>,
) -> ApiResult<Json<Page<StoredResult>>> {
    let (mut cursor, limit) = PageQuery {
        cursor: query.cursor,
        limit: query.limit,
    }
    .parse()?;
    // A malformed `since` is refused even beside a cursor (which it would not move).
    let since = parse_since(query.since.as_deref())?;
    if let (true, Some(since)) = (cursor == Cursor::start(), since) {
        // Results at exactly `since` are included.
        cursor = Cursor::before_key(since.timestamp_millis());
    }
    Ok(Json(app.monitor_results(id, &cursor, limit).await?))
}
