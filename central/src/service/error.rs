//! The one error type of the services: what went wrong, in the domain's words.
//!
//! Services, duties and the CLI see only this; how each case reads over HTTP (a status, a
//! machine code, `Retry-After`) is decided once, at the HTTP boundary (the crate's `error` module), which
//! also has the cases only HTTP knows (a body too large, a request too slow). Must not name a
//! status code or anything of axum.

use shared_proto::users::Role;
use shared_proto::ValidationError;

#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// A field, or a rule between fields, that the request breaks.
    #[error("{0}")]
    Validation(#[from] ValidationError),
    /// A request that cannot be done as asked, with a machine code that says why.
    #[error("{message}")]
    Invalid { code: &'static str, message: String },
    /// No valid credentials.
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    /// Valid credentials, but what they grant does not cover the request (a registration
    /// token's region or capabilities), with a code that says which limit.
    #[error("{message}")]
    Refused { code: &'static str, message: String },
    /// Valid credentials whose role is below the one the operation needs
    /// (`service::access::required_role`).
    #[error("this needs the {needed} role; {who} has the {has} role")]
    RoleRequired {
        needed: Role,
        has: Role,
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
    /// More than one request may carry (an upload's results, say).
    #[error("{0}")]
    TooLarge(String),
    /// The caller asked too often; it may ask again after `retry_after` seconds.
    #[error("{message}")]
    RateLimited { message: String, retry_after: u64 },
    /// Central sheds the work rather than queue it; ask again after `retry_after` seconds.
    #[error("{message}")]
    Busy { message: String, retry_after: u64 },
    /// PostgreSQL aborted a write as a conflict with another writer, and it stayed one
    /// through the store's tries (`store::is_conflict`): nothing is wrong with the request,
    /// and the same request a moment later succeeds.
    #[error("central's database aborted a write of this request as a conflict with another writer; retry it")]
    WriteConflict(#[source] anyhow::Error),
    /// The audit entry of a change could not be written ahead of it, so the change was not
    /// made (`service::audit::Intent`).
    #[error("the audit log cannot be written now, so nothing was changed; retry later")]
    AuditUnavailable(#[source] anyhow::Error),
    /// A fault of central's own (its database, a bug).
    #[error("internal error")]
    Internal(#[source] anyhow::Error),
}

pub type ServiceResult<T> = Result<T, ServiceError>;

/// A fault below the services: a write conflict PostgreSQL broke (`WriteConflict`), or
/// central's own (`Internal`).
impl From<anyhow::Error> for ServiceError {
    fn from(error: anyhow::Error) -> Self {
        if crate::store::is_conflict(&error) {
            ServiceError::WriteConflict(error)
        } else {
            ServiceError::Internal(error)
        }
    }
}

impl ServiceError {
    pub fn invalid(code: &'static str, message: impl Into<String>) -> Self {
        ServiceError::Invalid {
            code,
            message: message.into(),
        }
    }
}
