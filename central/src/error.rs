//! The one error type of central's HTTP boundary, and its mapping to responses: a service's
//! error (`ServiceError`, which handlers use for their own refusals too) or one only HTTP
//! has (a body too large, a request too slow, the request cap). How each reads over HTTP
//! (status, machine code, `Retry-After`) is decided here and nowhere else.
//!
//! Every failure a client can cause is a 4xx with a machine code and a message that says
//! what to fix. Only faults of central itself (its database, a bug) become 5xx, and those
//! are logged here with their cause, never shown to the client.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use shared_proto::{ErrorBody, Rule, ValidationError};

use crate::service::error::ServiceError;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// What a service refused or failed at (handlers refuse in the same words).
    #[error(transparent)]
    Service(#[from] ServiceError),
    /// A body over the request's limit.
    #[error("{0}")]
    PayloadTooLarge(String),
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("{0}")]
    MethodNotAllowed(String),
    /// Not done within `CENTRAL_REQUEST_TIMEOUT` (a trickling body, mostly).
    #[error("{0}")]
    RequestTimeout(String),
    /// Central is at its request cap: shed, not queued.
    #[error("{message}")]
    Overloaded { message: String, retry_after: u64 },
    /// The poller API needs a client certificate (`CENTRAL_TLS_CLIENT_CA`) and none was shown.
    #[error("{0}")]
    ClientCertificateRequired(String),
}

impl From<ValidationError> for ApiError {
    fn from(error: ValidationError) -> Self {
        ServiceError::Validation(error).into()
    }
}

/// A fault below the HTTP boundary: a write conflict PostgreSQL broke, or central's own.
impl From<anyhow::Error> for ApiError {
    fn from(error: anyhow::Error) -> Self {
        ServiceError::from(error).into()
    }
}

impl ApiError {
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        ServiceError::invalid(code, message).into()
    }

    /// How each error reads over HTTP: the one place that decides it.
    pub(crate) fn status_and_code(&self) -> (StatusCode, &'static str) {
        match self {
            ApiError::Service(error) => match error {
                ServiceError::Validation(e) => match e.rule {
                    Rule::Field => (StatusCode::BAD_REQUEST, "invalid_field"),
                    // 400 is kept for what the OpenAPI document's schemas state; what they
                    // cannot state (a rule between fields, an id that names nothing) is 422,
                    // so a client or fuzzer can tell a request that breaks the schema from
                    // one that does not.
                    Rule::Combination => (StatusCode::UNPROCESSABLE_ENTITY, "invalid_combination"),
                    Rule::Reference => (StatusCode::UNPROCESSABLE_ENTITY, "unknown_reference"),
                    Rule::Value => (StatusCode::UNPROCESSABLE_ENTITY, "invalid_value"),
                },
                ServiceError::Invalid { code, .. } => (StatusCode::BAD_REQUEST, code),
                ServiceError::Unauthorized(_) => (StatusCode::UNAUTHORIZED, "unauthorized"),
                ServiceError::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
                ServiceError::Refused { code, .. } => (StatusCode::FORBIDDEN, code),
                ServiceError::RoleRequired { .. } => (StatusCode::FORBIDDEN, "role_required"),
                ServiceError::PollerDeleted(_) => (StatusCode::UNAUTHORIZED, "poller_deleted"),
                ServiceError::PollerDisabled(_) => (StatusCode::FORBIDDEN, "poller_disabled"),
                ServiceError::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
                ServiceError::Conflict(_) => (StatusCode::CONFLICT, "conflict"),
                ServiceError::TooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"),
                ServiceError::RateLimited { .. } => (StatusCode::TOO_MANY_REQUESTS, "rate_limited"),
                ServiceError::Busy { .. } => (StatusCode::SERVICE_UNAVAILABLE, "overloaded"),
                ServiceError::WriteConflict(_) => {
                    (StatusCode::SERVICE_UNAVAILABLE, "write_conflict")
                }
                ServiceError::AuditUnavailable(_) => {
                    (StatusCode::SERVICE_UNAVAILABLE, "audit_unavailable")
                }
                ServiceError::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
            },
            ApiError::PayloadTooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"),
            ApiError::UnsupportedMediaType(_) => {
                (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type")
            }
            ApiError::MethodNotAllowed(_) => (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed"),
            ApiError::RequestTimeout(_) => (StatusCode::REQUEST_TIMEOUT, "request_timeout"),
            ApiError::Overloaded { .. } => (StatusCode::SERVICE_UNAVAILABLE, "overloaded"),
            ApiError::ClientCertificateRequired(_) => {
                (StatusCode::UNAUTHORIZED, "client_certificate_required")
            }
        }
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(error: sqlx::Error) -> Self {
        anyhow::Error::from(error).into()
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = self.status_and_code();
        let message = match &self {
            ApiError::Service(ServiceError::Validation(e)) => {
                format!("`{}` {}", e.field, e.message)
            }
            ApiError::Service(ServiceError::Internal(cause)) => {
                tracing::error!("internal error: {cause:#}");
                "central could not complete the request; it has been logged, retry later".into()
            }
            ApiError::Service(ServiceError::WriteConflict(cause)) => {
                tracing::warn!("a write conflict outlasted its tries: {cause:#}");
                self.to_string()
            }
            ApiError::Service(ServiceError::AuditUnavailable(cause)) => {
                tracing::error!(
                    "a change was refused: its audit entry could not be written: {cause:#}"
                );
                self.to_string()
            }
            other => other.to_string(),
        };
        let body = ErrorBody {
            error: code.to_string(),
            message,
        };
        let mut response = (status, Json(body)).into_response();
        let retry_after = match self {
            ApiError::Service(
                ServiceError::RateLimited { retry_after, .. }
                | ServiceError::Busy { retry_after, .. },
            )
            | ApiError::Overloaded { retry_after, .. } => Some(retry_after),
            // The other writer's transaction ends when this one is aborted.
            ApiError::Service(ServiceError::WriteConflict(_)) => Some(1),
            ApiError::Service(ServiceError::AuditUnavailable(_)) => Some(5),
            _ => None,
        };
        if let Some(retry_after) = retry_after {
            response
                .headers_mut()
                .insert(axum::http::header::RETRY_AFTER, retry_after.into());
        }
        response
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use axum::http::StatusCode;
    use axum::response::IntoResponse;

    use super::ApiError;

    /// A database error with an SQLSTATE, as PostgreSQL's driver reports one.
    #[derive(Debug)]
    struct Coded(&'static str);

    impl std::fmt::Display for Coded {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "error with SQLSTATE {}", self.0)
        }
    }

    impl std::error::Error for Coded {}

    impl sqlx::error::DatabaseError for Coded {
        fn message(&self) -> &str {
            "aborted"
        }
        fn code(&self) -> Option<Cow<'_, str>> {
            Some(Cow::Borrowed(self.0))
        }
        fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
            self
        }
        fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
            self
        }
        fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
            self
        }
        fn kind(&self) -> sqlx::error::ErrorKind {
            sqlx::error::ErrorKind::Other
        }
    }

    fn answer_to(code: &'static str) -> axum::response::Response {
        let error = anyhow::Error::from(sqlx::Error::Database(Box::new(Coded(code))))
            .context("storing results");
        ApiError::from(error).into_response()
    }

    /// A deadlock PostgreSQL broke, still there after the store's tries, is a 503 the client
    /// may retry at once, not a fault of central's; any other database error stays a 500.
    #[test]
    fn a_write_conflict_is_a_503_to_retry() {
        let conflict = answer_to("40P01");
        assert_eq!(conflict.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(conflict.headers()["retry-after"], "1");
        let other = answer_to("23505");
        assert_eq!(other.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert!(other.headers().get("retry-after").is_none());
    }
}
