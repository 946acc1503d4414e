//! Authentication and authorisation of the settings API, in one layer in front of every
//! operation: the credential (the admin token or an API key) becomes a `Principal`, and the role the
//! operation needs (`service::access::required_role`, by the route as matched) is checked
//! before the handler runs or its body is read. Handlers that record who acted take the
//! principal as `Extension<Principal>`; none authenticates again.

use std::sync::Arc;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::extract::bearer;
use crate::error::ApiError;
use crate::service::access::{required_role, Principal};
use crate::service::api_keys;
use crate::service::error::ServiceError;
use crate::service::App;

/// Where the settings API is nested: matched paths carry it, the policy's paths do not.
pub const SETTINGS_PREFIX: &str = "/api/v1";

pub async fn authorize(State(app): State<Arc<App>>, mut request: Request, next: Next) -> Response {
    // Owned, so that no borrow of the request (whose body is not `Sync`) lives across an await.
    let token = bearer(request.headers()).map(str::to_string);
    let principal = match authenticate(&app, token).await {
        Ok(principal) => principal,
        Err(error) => return error.into_response(),
    };
    let path = request
        .extensions()
        .get::<MatchedPath>()
        .map(|matched| matched.as_str())
        .unwrap_or_else(|| request.uri().path());
    let path = path.strip_prefix(SETTINGS_PREFIX).unwrap_or(path);
    let needed = required_role(request.method(), path);
    if !principal.may(needed) {
        return ApiError::Service(ServiceError::RoleRequired {
            needed,
            has: principal.role,
            who: principal.describe(),
        })
        .into_response();
    }
    request.extensions_mut().insert(principal);
    next.run(request).await
}

async fn authenticate(app: &App, token: Result<String, ApiError>) -> Result<Principal, ApiError> {
    let token = token?;
    let token = token.as_str();
    if api_keys::is_api_key(token) {
        return match app.api_key_principal(token).await? {
            Some(principal) => Ok(principal),
            None => Err(ApiError::Service(ServiceError::Unauthorized(
                "this API key is unknown, revoked or expired, or its maker was removed".into(),
            ))),
        };
    }
    if app.verify_admin_token(token).await? {
        return Ok(Principal::admin_token());
    }
    Err(ApiError::Service(ServiceError::Unauthorized(
        "admin token is wrong; use CENTRAL_ADMIN_TOKEN or the token printed on first start".into(),
    )))
}
