//! Monitors as code: which objects a configuration file manages, each under a stable key the
//! file names it by (`/api/v1/managed-objects`). `central apply` keeps these marks; the page
//! shows them. The file's own format is central's (`central::cli`), not the wire's.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::ValidationError;

/// A stable key: lowercase letters, digits, `_`, `.` and `-`, starting with a letter or digit.
pub const KEY_PATTERN: &str = r"^[a-z0-9][a-z0-9_.-]{0,63}$";

/// The kinds of objects a file may manage, named as the settings API names their collections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum ManagedKind {
    NotificationChannels,
    Monitors,
    MaintenanceWindows,
    StatusPages,
}

impl ManagedKind {
    pub const ALL: [ManagedKind; 4] = [
        ManagedKind::NotificationChannels,
        ManagedKind::Monitors,
        ManagedKind::MaintenanceWindows,
        ManagedKind::StatusPages,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ManagedKind::NotificationChannels => "notification-channels",
            ManagedKind::Monitors => "monitors",
            ManagedKind::MaintenanceWindows => "maintenance-windows",
            ManagedKind::StatusPages => "status-pages",
        }
    }

    pub fn parse(text: &str) -> Option<ManagedKind> {
        Self::ALL.into_iter().find(|k| k.as_str() == text)
    }
}

/// An object managed by a file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ManagedObject {
    pub kind: ManagedKind,
    /// The key the file names it by.
    pub key: String,
    pub object_id: Uuid,
    /// When a file last said so.
    pub applied_at: DateTime<Utc>,
}

/// `PUT /api/v1/managed-objects/{kind}/{key}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ManageObject {
    /// The object the key names (it must exist).
    pub object_id: Uuid,
}

/// Whether `key` is a stable key (`KEY_PATTERN`).
pub fn validate_key(field: &'static str, key: &str) -> Result<(), ValidationError> {
    let mut chars = key.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let rest_ok =
        chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '.' | '-'));
    if !first_ok || !rest_ok || key.len() > 64 {
        return Err(ValidationError::new(
            field,
            format!(
                "must be 1 to 64 of a-z, 0-9, `_`, `.`, `-`, starting with a letter or digit \
                 (got `{}`)",
                key.chars().take(80).collect::<String>()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_what_the_pattern_says() {
        for good in ["api", "api-health", "a.b_c-1", "0x"] {
            assert!(validate_key("key", good).is_ok(), "{good}");
        }
        for bad in ["", "-api", "Api", "a b", "é", &"x".repeat(65)] {
            assert!(validate_key("key", bad).is_err(), "{bad}");
        }
    }
}
