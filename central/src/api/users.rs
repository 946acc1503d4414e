//! Users and API keys (settings API). Who may call each is `authz`'s; the rules are
//! `service::users`' and `service::api_keys`'.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::{Extension, Json};
use shared_proto::settings_api::Page;
use shared_proto::users::{
    ApiKey, CreateApiKey, CreateUser, CreatedApiKey, UpdateUser, User, UserSession,
};
use uuid::Uuid;

use super::extract::{ApiJson, ApiObject, ApiPath, ApiQuery, PageQuery};
use crate::error::ApiResult;
use crate::service::access::Principal;
use crate::service::users::Users;
use crate::service::App;

#[utoipa::path(
    post, path = "/api/v1/users", tag = "users", operation_id = "create_user",
    summary = "Add a user (admin)",
    security(("admin_token" = [])),
    request_body = CreateUser,
    responses(
        (status = 201, description = "Added.", body = User),
        (status = 409, description = "`conflict`: another user has this email.", body = shared_proto::ErrorBody),
        super::openapi::SpecErrors
    )
)]
pub async fn create_user(
    State(users): State<Users>,
    ApiJson(body): ApiJson<CreateUser>,
) -> ApiResult<(StatusCode, Json<User>)> {
    Ok((StatusCode::CREATED, Json(users.create_user(body).await?)))
}

#[utoipa::path(
    get, path = "/api/v1/users", tag = "users", operation_id = "list_users",
    summary = "List users (admin)",
    security(("admin_token" = [])),
    params(PageQuery),
    responses((status = 200, description = "A page of users.", body = Page<User>), super::openapi::QueryErrors)
)]
pub async fn list_users(
    State(users): State<Users>,
    ApiQuery(page): ApiQuery<PageQuery>,
) -> ApiResult<Json<Page<User>>> {
    let (cursor, limit) = page.parse()?;
    Ok(Json(users.list_users(&cursor, limit).await?))
}

#[utoipa::path(
    get, path = "/api/v1/users/{id}", tag = "users", operation_id = "get_user",
    summary = "One user (admin)",
    security(("admin_token" = [])),
    params(("id" = Uuid, Path, description = "User id")),
    responses((status = 200, description = "The user.", body = User), super::openapi::IdErrors)
)]
pub async fn get_user(
    State(users): State<Users>,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<Json<User>> {
    Ok(Json(users.get_user(id).await?))
}

#[utoipa::path(
    patch, path = "/api/v1/users/{id}", tag = "users", operation_id = "update_user",
    summary = "Change a user's name, email, role or password (admin)",
    security(("admin_token" = [])),
    params(("id" = Uuid, Path, description = "User id")),
    request_body = UpdateUser,
    responses(
        (status = 200, description = "Changed.", body = User),
        (status = 409, description = "`conflict`: another user has this email, or this is the last admin.", body = shared_proto::ErrorBody),
        super::openapi::PatchErrors
    )
)]
pub async fn update_user(
    State(users): State<Users>,
    ApiPath(id): ApiPath<Uuid>,
    ApiObject(body): ApiObject<UpdateUser>,
) -> ApiResult<Json<User>> {
    Ok(Json(users.update_user(id, body).await?))
}

#[utoipa::path(
    delete, path = "/api/v1/users/{id}", tag = "users", operation_id = "delete_user",
    summary = "Remove a user: their sessions end, their API keys are revoked (admin)",
    security(("admin_token" = [])),
    params(("id" = Uuid, Path, description = "User id")),
    responses(
        (status = 204, description = "Removed."),
        (status = 409, description = "`conflict`: yourself, or the last admin.", body = shared_proto::ErrorBody),
        super::openapi::IdErrors
    )
)]
pub async fn delete_user(
    State(users): State<Users>,
    Extension(principal): Extension<Principal>,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<StatusCode> {
    users.delete_user(id, &principal).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(
    get, path = "/api/v1/users/{id}/sessions", tag = "users", operation_id = "list_user_sessions",
    summary = "A user's live web sessions, newest first (admin)",
    security(("admin_token" = [])),
    params(("id" = Uuid, Path, description = "User id")),
    responses((status = 200, description = "The sessions.", body = Vec<UserSession>), super::openapi::IdErrors)
)]
pub async fn list_user_sessions(
    State(users): State<Users>,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<Json<Vec<UserSession>>> {
    Ok(Json(users.user_sessions(id).await?))
}

// A `POST` to a verb rather than `DELETE /users/{id}/sessions`: the list of sessions is still
// there after (empty), and a `DELETE` says the resource at its path is gone.
#[utoipa::path(
    post, path = "/api/v1/users/{id}/log-out", tag = "users", operation_id = "log_out_user",
    summary = "End every web session of a user (admin); their next page asks for a login",
    security(("admin_token" = [])),
    params(("id" = Uuid, Path, description = "User id")),
    responses((status = 204, description = "Ended."), super::openapi::IdErrors)
)]
pub async fn log_out_user(
    State(users): State<Users>,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<StatusCode> {
    users.end_user_sessions(id, None).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A user and one of their sessions.
#[derive(Debug, serde::Deserialize)]
pub struct SessionPath {
    id: Uuid,
    session: String,
}

#[utoipa::path(
    delete, path = "/api/v1/users/{id}/sessions/{session}", tag = "users", operation_id = "end_user_session",
    summary = "End one web session of a user (admin)",
    security(("admin_token" = [])),
    params(
        ("id" = Uuid, Path, description = "User id"),
        ("session" = String, Path, description = "The session's id, as listed", pattern = "^[0-9a-f]{64}$")
    ),
    responses((status = 204, description = "Ended."), super::openapi::IdErrors)
)]
pub async fn end_user_session(
    State(users): State<Users>,
    ApiPath(path): ApiPath<SessionPath>,
) -> ApiResult<StatusCode> {
    users
        .end_user_sessions(path.id, Some(&path.session))
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(
    post, path = "/api/v1/api-keys", tag = "users", operation_id = "create_api_key",
    summary = "Make an API key (the secret is in the answer, once)",
    description = "Its role is at most the maker's own (`403 role_required` above it) and, \
                   while it lives, at most its maker's role now.",
    security(("admin_token" = [])),
    request_body = CreateApiKey,
    responses((status = 201, description = "Made; `token` (the key) is shown only now.", body = CreatedApiKey), super::openapi::SpecErrors)
)]
pub async fn create_api_key(
    State(app): State<Arc<App>>,
    Extension(principal): Extension<Principal>,
    ApiJson(body): ApiJson<CreateApiKey>,
) -> ApiResult<(StatusCode, Json<CreatedApiKey>)> {
    let created = app.create_api_key(body, &principal).await?;
    Ok((StatusCode::CREATED, Json(created)))
}

#[utoipa::path(
    get, path = "/api/v1/api-keys", tag = "users", operation_id = "list_api_keys",
    summary = "List API keys: your own, or every key for an admin",
    security(("admin_token" = [])),
    params(PageQuery),
    responses((status = 200, description = "A page of keys.", body = Page<ApiKey>), super::openapi::QueryErrors)
)]
pub async fn list_api_keys(
    State(app): State<Arc<App>>,
    Extension(principal): Extension<Principal>,
    ApiQuery(page): ApiQuery<PageQuery>,
) -> ApiResult<Json<Page<ApiKey>>> {
    let (cursor, limit) = page.parse()?;
    Ok(Json(app.list_api_keys(&principal, &cursor, limit).await?))
}

#[utoipa::path(
    delete, path = "/api/v1/api-keys/{id}", tag = "users", operation_id = "revoke_api_key",
    summary = "Revoke an API key (your own, or any for an admin); it stops at once",
    security(("admin_token" = [])),
    params(("id" = Uuid, Path, description = "API key id")),
    responses(
        (status = 204, description = "Revoked."),
        (status = 409, description = "`conflict`: revoked already.", body = shared_proto::ErrorBody),
        super::openapi::IdErrors
    )
)]
pub async fn revoke_api_key(
    State(app): State<Arc<App>>,
    Extension(principal): Extension<Principal>,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<StatusCode> {
    app.revoke_api_key(id, &principal).await?;
    Ok(StatusCode::NO_CONTENT)
}
