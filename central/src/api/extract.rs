//! Extractors whose failures are `ApiError`s, so that every bad request gets the JSON error body.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use shared_proto::settings_api::{DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT};

use crate::error::ApiError;
use crate::service::App;
use crate::store::{Cursor, PollerRow};

/// A JSON body.
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(value)) => Ok(ApiJson(value)),
            Err(rejection) => Err(json_error(rejection)),
        }
    }
}

/// A JSON body that may be left out: an empty body is `T::default()`.
pub struct OptionalJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Default> FromRequest<S> for OptionalJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let is_json = req
            .headers()
            .get(axum::http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| {
                let mime = v.split(';').next().unwrap_or("").trim();
                mime.eq_ignore_ascii_case("application/json") || mime.ends_with("+json")
            });
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::PayloadTooLarge("request body is too large".into())
            } else {
                ApiError::bad_request("invalid_body", e.body_text())
            }
        })?;
        if bytes.is_empty() {
            return Ok(OptionalJson(T::default()));
        }
        if !is_json {
            return Err(ApiError::UnsupportedMediaType(
                "send the body as JSON with `Content-Type: application/json`, or no body".into(),
            ));
        }
        // `null` is as good as no body.
        axum::Json::<Option<T>>::from_bytes(&bytes)
            .map(|axum::Json(value)| OptionalJson(value.unwrap_or_default()))
            .map_err(json_error)
    }
}

fn json_error(rejection: JsonRejection) -> ApiError {
    match rejection.status() {
        StatusCode::PAYLOAD_TOO_LARGE => {
            ApiError::PayloadTooLarge("request body is too large".into())
        }
        StatusCode::UNSUPPORTED_MEDIA_TYPE => ApiError::UnsupportedMediaType(
            "send the body as JSON with `Content-Type: application/json`".into(),
        ),
        // axum's text names the offending field path, e.g. `interval_ms: invalid type…`.
        _ => ApiError::bad_request("invalid_body", rejection.body_text()),
    }
}

/// Query parameters.
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| ApiQuery(q.0))
            .map_err(|e: QueryRejection| ApiError::bad_request("invalid_query", e.body_text()))
    }
}

/// Path parameters.
pub struct ApiPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| ApiPath(p.0))
            .map_err(|e: PathRejection| {
                ApiError::bad_request("invalid_path", format!("{}; ids are UUIDs", e.body_text()))
            })
    }
}

fn bearer(parts: &Parts) -> Result<&str, ApiError> {
    parts
        .headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .ok_or_else(|| ApiError::Unauthorized("send `Authorization: Bearer <token>`".into()))
}

/// Proof that the caller holds the admin token.
pub struct Admin;

impl FromRequestParts<Arc<App>> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        app: &Arc<App>,
    ) -> Result<Self, Self::Rejection> {
        if app.is_admin_token(bearer(parts)?) {
            Ok(Admin)
        } else {
            Err(ApiError::Unauthorized(
                "admin token is wrong; use CENTRAL_ADMIN_TOKEN or the token printed on first start"
                    .into(),
            ))
        }
    }
}

/// The poller whose access token authorised the request.
pub struct Poller(pub PollerRow);

impl FromRequestParts<Arc<App>> for Poller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        app: &Arc<App>,
    ) -> Result<Self, Self::Rejection> {
        let token = bearer(parts)?;
        app.authenticate_poller(token).await.map(Poller)
    }
}

/// `?cursor=&limit=` of every list.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// `next_cursor` of the previous page; omit for the first page.
    pub cursor: Option<String>,
    /// Items per page (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
}

impl PageQuery {
    pub fn parse(&self) -> Result<(Cursor, u32), ApiError> {
        let limit = self.limit.unwrap_or(DEFAULT_PAGE_LIMIT);
        if !(1..=MAX_PAGE_LIMIT).contains(&limit) {
            return Err(ApiError::bad_request(
                "invalid_query",
                format!("`limit` must be between 1 and {MAX_PAGE_LIMIT}, got {limit}"),
            ));
        }
        // `?cursor=` is the same as no cursor: the first page.
        let cursor = match self.cursor.as_ref().filter(|c| !c.is_empty()) {
            Some(text) => Cursor::decode(text).ok_or_else(|| {
                ApiError::bad_request(
                    "invalid_query",
                    "`cursor` is not one this API gave out; omit it to start over",
                )
            })?,
            None => Cursor::start(),
        };
        Ok((cursor, limit))
    }
}
