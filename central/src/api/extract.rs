//! Extractors whose failures are `ApiError`s, so that every bad request gets the JSON error body.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use shared_proto::settings_api::{DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT};

use crate::error::ApiError;
use crate::service::error::ServiceError;
use crate::service::App;
use crate::store::Cursor;

/// A JSON body.
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        if !is_json(req.headers()) {
            return Err(ApiError::UnsupportedMediaType(
                "send the body as JSON with `Content-Type: application/json`".into(),
            ));
        }
        let bytes = body_bytes(req, state).await?;
        decode(&bytes).map(ApiJson)
    }
}

/// A JSON body that may be left out: an empty body is `T::default()`.
pub struct OptionalJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Default> FromRequest<S> for OptionalJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let is_json = is_json(req.headers());
        let bytes = body_bytes(req, state).await?;
        if bytes.is_empty() {
            return Ok(OptionalJson(T::default()));
        }
        if !is_json {
            return Err(ApiError::UnsupportedMediaType(
                "send the body as JSON with `Content-Type: application/json`, or no body".into(),
            ));
        }
        // `null` is as good as no body.
        decode::<Option<T>>(&bytes).map(|value| OptionalJson(value.unwrap_or_default()))
    }
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            let mime = v.split(';').next().unwrap_or("").trim();
            mime.eq_ignore_ascii_case("application/json") || mime.ends_with("+json")
        })
}

async fn body_bytes<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, ApiError> {
    Bytes::from_request(req, state).await.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::PayloadTooLarge("request body is too large".into())
        } else {
            ApiError::bad_request("invalid_body", e.body_text())
        }
    })
}

/// Parses a body, reading integral floats as JSON Schema does (`shared_proto::lenient`).
fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let error = match axum::Json::<T>::from_bytes(bytes) {
        Ok(axum::Json(value)) => return Ok(value),
        Err(rejection) => rejection,
    };
    if shared_proto::lenient::is_float_for_integer(&error.body_text()) {
        if let Ok(parsed) = shared_proto::lenient::from_slice(bytes) {
            return Ok(parsed);
        }
    }
    // axum's text names the offending field path, e.g. `interval_ms: invalid type…`.
    Err(ApiError::bad_request("invalid_body", error.body_text()))
}

/// A JSON body that must be an object. Serde reads a struct from an array too (its fields in
/// order), so a body whose fields are all optional would take `[null, null]` as "no change".
pub struct ApiObject<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiObject<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let ApiJson(value) = ApiJson::<serde_json::Value>::from_request(req, state).await?;
        if !value.is_object() {
            return Err(ApiError::bad_request(
                "invalid_body",
                "the body must be a JSON object of the fields to change",
            ));
        }
        decode(value.to_string().as_bytes()).map(ApiObject)
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

/// Path parameters. A segment that does not parse as its type (an id that is not a UUID)
/// names nothing, so it is `404 not_found` like an id that parses but names nothing: the
/// answer does not depend on how a wrong id is wrong, and a client that follows a `null` id
/// out of a list (`/users/None`) is told there is no such object. A segment that is not UTF-8
/// once percent-decoded is `400 invalid_path`.
pub struct ApiPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| ApiPath(p.0))
            .map_err(path_rejection)
    }
}

fn path_rejection(rejection: PathRejection) -> ApiError {
    use axum::extract::path::ErrorKind;
    if let PathRejection::FailedToDeserializePathParams(e) = &rejection {
        // The value is the caller's: at most 64 characters of it come back, escaped.
        let shown = |value: &str| format!("{:?}", value.chars().take(64).collect::<String>());
        let named = match e.kind() {
            ErrorKind::ParseErrorAtKey { key, value, .. }
            | ErrorKind::DeserializeError { key, value, .. } => {
                Some(format!("the {key} {}", shown(value)))
            }
            ErrorKind::ParseErrorAtIndex { value, .. } | ErrorKind::ParseError { value, .. } => {
                Some(format!("the id {}", shown(value)))
            }
            _ => None,
        };
        if let Some(named) = named {
            return ApiError::Service(ServiceError::NotFound(format!(
                "nothing has {named}: ids are UUIDs"
            )));
        }
    }
    ApiError::bad_request("invalid_path", rejection.body_text())
}

/// The `If-Match` header of an edit: the `revision` the client read. `"7"`, `7` and `W/"7"`
/// are the same revision; absent or `*`, the edit applies to whatever is there now.
pub struct IfMatch(pub Option<u64>);

impl<S: Send + Sync> FromRequestParts<S> for IfMatch {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let Some(value) = parts.headers.get(axum::http::header::IF_MATCH) else {
            return Ok(IfMatch(None));
        };
        let text = value.to_str().unwrap_or_default().trim();
        if text == "*" {
            return Ok(IfMatch(None));
        }
        let tag = text.strip_prefix("W/").unwrap_or(text);
        let tag = tag
            .strip_prefix('"')
            .and_then(|t| t.strip_suffix('"'))
            .unwrap_or(tag);
        tag.parse::<u64>().map(|r| IfMatch(Some(r))).map_err(|_| {
            ApiError::bad_request(
                "invalid_field",
                "`If-Match` must be the monitor's `revision` as read (a number, e.g. \"42\"), or *",
            )
        })
    }
}

/// The token of `Authorization: Bearer <token>`.
pub(super) fn bearer(headers: &HeaderMap) -> Result<&str, ApiError> {
    headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .ok_or_else(|| {
            ApiError::Service(ServiceError::Unauthorized(
                "send `Authorization: Bearer <token>`".into(),
            ))
        })
}

/// Proof that the caller may read `/metrics` on the public listener.
pub struct Scraper;

impl FromRequestParts<Arc<App>> for Scraper {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        app: &Arc<App>,
    ) -> Result<Self, Self::Rejection> {
        let token = bearer(&parts.headers).map_err(|_| {
            ApiError::Service(ServiceError::Unauthorized(
                "scrape /metrics with `Authorization: Bearer` and CENTRAL_METRICS_TOKEN (or the \
                 admin token), or on CENTRAL_METRICS_LISTEN"
                    .into(),
            ))
        })?;
        if app.may_scrape(token).await? {
            Ok(Scraper)
        } else {
            Err(ApiError::Service(ServiceError::Unauthorized(
                "that is neither CENTRAL_METRICS_TOKEN nor the admin token".into(),
            )))
        }
    }
}

/// The poller whose access token authorised the request.
pub struct Poller(pub crate::domain::Poller);

impl FromRequestParts<Arc<App>> for Poller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        app: &Arc<App>,
    ) -> Result<Self, Self::Rejection> {
        let token = bearer(&parts.headers)?;
        Ok(Poller(app.authenticate_poller(token).await?))
    }
}

/// `?cursor=&limit=` of every list.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// `next_cursor` of the previous page; omit for the first page.
    #[param(pattern = r"^(-?[0-9]{1,18}\.[0-9a-f-]{0,36})?$")]
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

/// A `since` query parameter: an RFC 3339 time, or a 400 naming the field.
pub fn parse_since(since: Option<&str>) -> Result<Option<chrono::DateTime<chrono::Utc>>, ApiError> {
    since
        .map(|since| {
            since.parse().map_err(|_| {
                ApiError::bad_request(
                    "invalid_query",
                    format!(
                        "`since` must be an RFC 3339 time like 2026-01-31T12:00:00Z, got `{since}`"
                    ),
                )
            })
        })
        .transpose()
}

/// A `region` query parameter, checked like a region label.
pub fn valid_region(region: Option<String>) -> Result<Option<String>, ApiError> {
    if let Some(region) = &region {
        shared_proto::monitor::validate_label("region", region).map_err(|e| {
            ApiError::bad_request("invalid_query", format!("`{}` {}", e.field, e.message))
        })?;
    }
    Ok(region)
}

/// A `?tag=` filter: `400` naming the parameter when it is not a tag.
pub fn valid_tag(tag: Option<String>) -> Result<Option<String>, ApiError> {
    if let Some(tag) = &tag {
        shared_proto::tags::validate_tag("tag", tag).map_err(|e| {
            ApiError::bad_request("invalid_query", format!("`{}` {}", e.field, e.message))
        })?;
    }
    Ok(tag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Counts {
        count: u32,
        nested: Vec<u64>,
        ratio: f64,
    }

    #[test]
    fn integral_floats_are_integers_and_nothing_else_changes() {
        let parsed: Counts =
            decode(br#"{"count": 3.0, "nested": [1e3, 4025273014964846.0], "ratio": 2.0}"#)
                .unwrap();
        assert_eq!(
            parsed,
            Counts {
                count: 3,
                nested: vec![1000, 4_025_273_014_964_846],
                ratio: 2.0
            }
        );
        for (body, field) in [
            (r#"{"count": 3.5, "nested": [], "ratio": 1}"#, "count"),
            (r#"{"count": 1, "nested": [1e300], "ratio": 1}"#, "nested"),
            (r#"{"count": -1.0, "nested": [], "ratio": 1}"#, "count"),
        ] {
            let error = decode::<Counts>(body.as_bytes()).unwrap_err();
            assert!(
                matches!(&error, ApiError::Service(ServiceError::Invalid { code: "invalid_body", message }) if message.contains(field)),
                "{body}: {error:?}"
            );
        }
    }
}
