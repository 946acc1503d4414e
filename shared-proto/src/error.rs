//! Validation failures and the JSON error body every API answers with.

use serde::{Deserialize, Serialize};

/// A rejected field: which one, what would make it acceptable, and which kind of rule it broke.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ValidationError {
    pub field: String,
    pub message: String,
    pub rule: Rule,
}

/// The kinds of rule a field can break. The OpenAPI schema states only the first (`400`); the
/// others are stated in prose and answered `422`, so clients (and the API fuzzer) tell them
/// apart by status and code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// The field's own syntax or range.
    Field,
    /// A rule between fields that are each well-formed, which no schema states: a timeout
    /// longer than the interval, a quorum above the number of regions, a patch that does not
    /// fit the object it is applied to.
    Combination,
    /// The field names an object that does not exist.
    Reference,
    /// The field has the shape its schema states, but is not usable for a reason no pattern
    /// states: a bracketed IPv6 address that does not parse, a host name over 253 characters.
    Value,
}

impl ValidationError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
            rule: Rule::Field,
        }
    }

    pub fn combination(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            rule: Rule::Combination,
            ..Self::new(field, message)
        }
    }

    pub fn reference(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            rule: Rule::Reference,
            ..Self::new(field, message)
        }
    }

    pub fn value(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            rule: Rule::Value,
            ..Self::new(field, message)
        }
    }

    /// The same failure, caused by the field's combination with another.
    pub fn in_combination(self) -> Self {
        Self {
            rule: Rule::Combination,
            ..self
        }
    }
}

/// `{"error": "<machine_code>", "message": "<what went wrong and how to fix it>"}`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorBody {
    pub error: String,
    pub message: String,
}
