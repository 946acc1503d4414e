//! The one error type of central's HTTP boundary, and its mapping to responses.
//!
//! Every failure a client can cause is a 4xx with a machine code and a message that says
//! what to fix. Only faults of central itself (its database, a bug) become 5xx, and those
//! are logged here with their cause, never shown to the client.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use shared_proto::{ErrorBody, Rule, ValidationError};

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    Validation(#[from] ValidationError),
    #[error("{message}")]
    BadRequest { code: &'static str, message: String },
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    /// Valid credentials, but what they grant does not cover the request (a registration
    /// token's region or capabilities): 403 with a code that says which limit.
    #[error("{message}")]
    Refused { code: &'static str, message: String },
    /// Valid credentials whose role is below the one the operation needs
    /// (`service::access::required_role`).
    #[error("this needs the {needed} role; {who} has the {has} role")]
    RoleRequired {
        needed: crate::service::access::Role,
        has: crate::service::access::Role,
        who: String,
    },
    /// The poller behind valid credentials was deleted: its agent should stop probing.
    #[error("{0}")]
    PollerDeleted(String),
    /// The poller behind valid credentials is disabled: its agent should pause until enabled.
    #[error("{0}")]
    PollerDisabled(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    PayloadTooLarge(String),
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("{0}")]
    MethodNotAllowed(String),
    /// Not done within `CENTRAL_REQUEST_TIMEOUT` (a trickling body, mostly).
    #[error("{0}")]
    RequestTimeout(String),
    #[error("{message}")]
    TooManyRequests { message: String, retry_after: u64 },
    /// Central is at its request cap: shed, not queued.
    #[error("{message}")]
    Overloaded { message: String, retry_after: u64 },
    /// The poller API needs a client certificate (`CENTRAL_TLS_CLIENT_CA`) and none was shown.
    #[error("{0}")]
    ClientCertificateRequired(String),
    #[error("internal error")]
    Internal(#[from] anyhow::Error),
}

impl ApiError {
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        ApiError::BadRequest {
            code,
            message: message.into(),
        }
    }

    pub(crate) fn status_and_code(&self) -> (StatusCode, &'static str) {
        match self {
            ApiError::Validation(e) => match e.rule {
                Rule::Field => (StatusCode::BAD_REQUEST, "invalid_field"),
                // 400 is kept for what the OpenAPI document's schemas state; what they cannot
                // state (a rule between fields, an id that names nothing) is 422, so a client
                // or fuzzer can tell a request that breaks the schema from one that does not.
                Rule::Combination => (StatusCode::UNPROCESSABLE_ENTITY, "invalid_combination"),
                Rule::Reference => (StatusCode::UNPROCESSABLE_ENTITY, "unknown_reference"),
                Rule::Value => (StatusCode::UNPROCESSABLE_ENTITY, "invalid_value"),
            },
            ApiError::BadRequest { code, .. } => (StatusCode::BAD_REQUEST, code),
            ApiError::Unauthorized(_) => (StatusCode::UNAUTHORIZED, "unauthorized"),
            ApiError::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
            ApiError::Refused { code, .. } => (StatusCode::FORBIDDEN, code),
            ApiError::RoleRequired { .. } => (StatusCode::FORBIDDEN, "role_required"),
            ApiError::PollerDeleted(_) => (StatusCode::UNAUTHORIZED, "poller_deleted"),
            ApiError::PollerDisabled(_) => (StatusCode::FORBIDDEN, "poller_disabled"),
            ApiError::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            ApiError::Conflict(_) => (StatusCode::CONFLICT, "conflict"),
            ApiError::PayloadTooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"),
            ApiError::UnsupportedMediaType(_) => {
                (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type")
            }
            ApiError::MethodNotAllowed(_) => (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed"),
            ApiError::RequestTimeout(_) => (StatusCode::REQUEST_TIMEOUT, "request_timeout"),
            ApiError::TooManyRequests { .. } => (StatusCode::TOO_MANY_REQUESTS, "rate_limited"),
            ApiError::Overloaded { .. } => (StatusCode::SERVICE_UNAVAILABLE, "overloaded"),
            ApiError::ClientCertificateRequired(_) => {
                (StatusCode::UNAUTHORIZED, "client_certificate_required")
            }
            ApiError::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        }
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(error: sqlx::Error) -> Self {
        ApiError::Internal(error.into())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = self.status_and_code();
        let message = match &self {
            ApiError::Validation(e) => format!("`{}` {}", e.field, e.message),
            ApiError::Internal(cause) => {
                tracing::error!("internal error: {cause:#}");
                "central could not complete the request; it has been logged, retry later".into()
            }
            other => other.to_string(),
        };
        let body = ErrorBody {
            error: code.to_string(),
            message,
        };
        let mut response = (status, Json(body)).into_response();
        if let ApiError::TooManyRequests { retry_after, .. }
        | ApiError::Overloaded { retry_after, .. } = self
        {
            response
                .headers_mut()
                .insert(axum::http::header::RETRY_AFTER, retry_after.into());
        }
        response
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

/// An error with its causes, for the log (reqwest and others keep `connection refused` and
/// the like in a cause, not in the error's own words).
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
