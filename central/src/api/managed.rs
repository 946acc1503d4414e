//! Handlers of the marks of monitors as code (`service::managed`): which objects a
//! configuration file manages, by kind and stable key.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use shared_proto::as_code::{ManageObject, ManagedKind, ManagedObject};
use utoipa::IntoParams;

use super::extract::{ApiJson, ApiPath, ApiQuery};
use crate::error::{ApiError, ApiResult};
use crate::service::App;

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ManagedQuery {
    /// Only this kind.
    kind: Option<ManagedKind>,
}

#[derive(Debug, Deserialize)]
pub struct ManagedPath {
    kind: String,
    key: String,
}

fn kind_of(text: &str) -> ApiResult<ManagedKind> {
    ManagedKind::parse(text).ok_or_else(|| {
        ApiError::bad_request(
            "invalid_path",
            format!(
                "`{}` is not a kind a file manages: notification-channels, monitors or \
                 maintenance-windows",
                text.chars().take(64).collect::<String>()
            ),
        )
    })
}

#[utoipa::path(
    get, path = "/api/v1/managed-objects", tag = "as-code", operation_id = "list_managed_objects",
    summary = "The objects configuration files manage, by kind and key",
    security(("admin_token" = [])),
    params(ManagedQuery),
    responses((status = 200, description = "Every mark, by kind and key.", body = [ManagedObject]), super::openapi::QueryErrors)
)]
pub async fn list_managed(
    State(app): State<Arc<App>>,
    ApiQuery(query): ApiQuery<ManagedQuery>,
) -> ApiResult<Json<Vec<ManagedObject>>> {
    Ok(Json(app.managed_objects(query.kind).await?))
}

#[utoipa::path(
    put, path = "/api/v1/managed-objects/{kind}/{key}", tag = "as-code",
    operation_id = "manage_object",
    summary = "Mark an object as managed by a file under a key",
    description = "The key names this object from now on; an earlier key of the object goes. \
                   `central apply` does this for what it creates and changes.",
    security(("admin_token" = [])),
    params(
        ("kind" = ManagedKind, Path, description = "The object's kind"),
        ("key" = String, Path, description = "The file's key", pattern = r"^[a-z0-9][a-z0-9_.-]{0,63}$")
    ),
    request_body = ManageObject,
    responses((status = 200, description = "Marked.", body = ManagedObject), super::openapi::KeyedSpecErrors)
)]
pub async fn manage(
    State(app): State<Arc<App>>,
    ApiPath(path): ApiPath<ManagedPath>,
    ApiJson(body): ApiJson<ManageObject>,
) -> ApiResult<Json<ManagedObject>> {
    let kind = kind_of(&path.kind)?;
    Ok(Json(
        app.manage_object(kind, &path.key, body.object_id).await?,
    ))
}

#[utoipa::path(
    delete, path = "/api/v1/managed-objects/{kind}/{key}", tag = "as-code",
    operation_id = "unmanage_object",
    summary = "Stop managing an object by a file (the object stays)",
    security(("admin_token" = [])),
    params(
        ("kind" = ManagedKind, Path, description = "The object's kind"),
        ("key" = String, Path, description = "The file's key", pattern = r"^[a-z0-9][a-z0-9_.-]{0,63}$")
    ),
    responses((status = 204, description = "The mark is gone."), super::openapi::KeyErrors)
)]
pub async fn unmanage(
    State(app): State<Arc<App>>,
    ApiPath(path): ApiPath<ManagedPath>,
) -> ApiResult<StatusCode> {
    let kind = kind_of(&path.kind)?;
    app.unmanage_object(kind, &path.key).await?;
    Ok(StatusCode::NO_CONTENT)
}
