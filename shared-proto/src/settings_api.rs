//! Bodies of the settings API (operator → central).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::duration::parse_duration;
use crate::monitor::{validate_label, MonitorSpec};
use crate::ValidationError;

pub const DEFAULT_PAGE_LIMIT: u32 = 100;
pub const MAX_PAGE_LIMIT: u32 = 1000;

/// Every list answer: one page of items and the cursor of the next page, if any.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next_cursor: Option<String>,
}

/// `POST /api/v1/registration-tokens`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateRegistrationToken {
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 1, max_length = 200, pattern = r"\S")
    )]
    pub name: String,
    /// e.g. `24h`; unset means the token does not expire.
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = r"^0*[1-9][0-9]*(ms|s|m|h|d)?$", examples("24h"))
    )]
    pub expires_in: Option<String>,
    /// How many pollers may register with it; default 1 (a one-time token).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(minimum = 1))]
    pub max_uses: Option<u32>,
    /// Region given to pollers that register without one.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[A-Za-z0-9._-]{1,64}$"))]
    pub region: Option<String>,
}

impl CreateRegistrationToken {
    /// Validates and returns the expiry as a duration.
    pub fn validate(&self) -> Result<Option<std::time::Duration>, ValidationError> {
        if self.name.trim().is_empty() || self.name.len() > 200 {
            return Err(ValidationError::new("name", "must be 1 to 200 characters"));
        }
        if self.max_uses == Some(0) {
            return Err(ValidationError::new(
                "max_uses",
                "must be at least 1 (or leave it out for 1)",
            ));
        }
        if let Some(region) = &self.region {
            validate_label("region", region)?;
        }
        self.expires_in
            .as_deref()
            .map(|text| {
                let duration =
                    parse_duration(text).map_err(|m| ValidationError::new("expires_in", m))?;
                if duration.is_zero() {
                    return Err(ValidationError::new("expires_in", "must be longer than 0s"));
                }
                Ok(duration)
            })
            .transpose()
    }
}

/// `POST /api/v1/registration-tokens/{id}/rotate` (the body is optional).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RotateRegistrationToken {
    /// How long the current secret keeps working beside the new one, e.g. `24h` (at most
    /// 30 days); unset or `0s`: it stops at once.
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = r"^[0-9]+(ms|s|m|h|d)?$", examples("24h"))
    )]
    pub overlap: Option<String>,
}

/// Longest overlap of a rotation: a leaked old secret must not live on for long.
pub const MAX_ROTATION_OVERLAP: std::time::Duration = std::time::Duration::from_secs(30 * 86_400);

impl RotateRegistrationToken {
    /// Validates and returns the overlap (zero: none).
    pub fn validate(&self) -> Result<std::time::Duration, ValidationError> {
        let Some(text) = self.overlap.as_deref() else {
            return Ok(std::time::Duration::ZERO);
        };
        let overlap = parse_duration(text).map_err(|m| ValidationError::new("overlap", m))?;
        if overlap > MAX_ROTATION_OVERLAP {
            return Err(ValidationError::new(
                "overlap",
                "must be at most 30d; rotate again later to extend",
            ));
        }
        Ok(overlap)
    }
}

/// A registration token as listed. `token` (the secret) is present only in the answer to
/// creation or rotation; central keeps only its hash.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RegistrationTokenView {
    pub id: Uuid,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    pub region: Option<String>,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    pub max_uses: u32,
    pub uses: u32,
    pub revoked: bool,
    /// Until when the secret before the latest rotation still works (rotation with overlap).
    #[serde(default)]
    pub previous_secret_valid_until: Option<DateTime<Utc>>,
}

/// Poller liveness as central derives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum PollerStatus {
    Online,
    Offline,
    Degraded,
}

/// A poller as the settings API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PollerView {
    pub id: Uuid,
    pub name: String,
    pub alias: Option<String>,
    pub region: Option<String>,
    pub datacenter: Option<String>,
    pub capabilities: Vec<String>,
    pub version: Option<String>,
    pub enabled: bool,
    pub status: PollerStatus,
    /// When the status last changed, as recorded by central's liveness watcher.
    pub status_since: Option<DateTime<Utc>>,
    /// The newest problem the poller reported in a heartbeat (it is `degraded` while recent).
    pub last_error: Option<String>,
    pub last_error_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub last_heartbeat_at: Option<DateTime<Utc>>,
    pub last_upload_at: Option<DateTime<Utc>>,
    pub queue_depth: u64,
    pub oldest_queued_at: Option<DateTime<Utc>>,
    pub dropped_results: u64,
    pub assignment_version: Option<i64>,
    pub assigned_monitors: u64,
    /// The agent's polling-engine snapshot from its newest heartbeat.
    pub scheduler: Option<crate::poller_api::SchedulerHealth>,
}

/// `PATCH /api/v1/pollers/{id}`: every field optional; `null` clears an optional one.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PollerPatch {
    #[serde(default, with = "crate::monitor::double_option")]
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 1, max_length = 200, pattern = r"\S")
    )]
    pub alias: Option<Option<String>>,
    #[serde(default, with = "crate::monitor::double_option")]
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[A-Za-z0-9._-]{1,64}$"))]
    pub region: Option<Option<String>>,
    #[serde(default, with = "crate::monitor::double_option")]
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[A-Za-z0-9._-]{1,64}$"))]
    pub datacenter: Option<Option<String>>,
    pub enabled: Option<bool>,
}

impl PollerPatch {
    pub fn validate(&self) -> Result<(), ValidationError> {
        if let Some(Some(alias)) = &self.alias {
            if alias.trim().is_empty() || alias.chars().count() > 200 {
                return Err(ValidationError::new(
                    "alias",
                    "must be 1 to 200 characters, or null to clear it",
                ));
            }
        }
        if let Some(Some(region)) = &self.region {
            validate_label("region", region)?;
        }
        if let Some(Some(datacenter)) = &self.datacenter {
            validate_label("datacenter", datacenter)?;
        }
        Ok(())
    }
}

/// One change of a poller's liveness status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PollerStatusChange {
    pub status: PollerStatus,
    pub at: DateTime<Utc>,
}

/// A stored monitor: the operator's spec plus what central decided about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MonitorView {
    pub id: Uuid,
    #[serde(flatten)]
    pub spec: MonitorSpec,
    pub assigned_poller_id: Option<Uuid>,
    /// Why the monitor has no poller, when it has none.
    pub placement_reason: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// Derived monitor status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum MonitorStatus {
    Pending,
    Up,
    Down,
    Stale,
    Paused,
}

/// `GET /api/v1/monitors/{id}/status`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MonitorStatusView {
    pub monitor_id: Uuid,
    pub status: MonitorStatus,
    /// The poller the monitor is assigned to now.
    pub poller_id: Option<Uuid>,
    pub last_result_at: Option<DateTime<Utc>>,
    pub latency_ms: Option<u64>,
    pub message: Option<String>,
    /// When the poller said it will check next (later than usual while backing off, paused
    /// or rate limited, so a quiet monitor is not mistaken for a lost one).
    pub next_check_at: Option<DateTime<Utc>>,
    /// Why the status is what it is, when that is not obvious (`stale`, `pending`).
    pub reason: Option<String>,
}

/// One stored result, as `GET /api/v1/monitors/{id}/results` returns it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StoredResult {
    pub id: Uuid,
    pub monitor_id: Uuid,
    pub poller_id: Uuid,
    pub ts: DateTime<Utc>,
    pub status: String,
    pub latency_ms: Option<u64>,
    pub msg: String,
    pub meta: serde_json::Value,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(json: serde_json::Value) -> CreateRegistrationToken {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn registration_token_validation_names_the_field() {
        let ok = token(serde_json::json!({"name": "eu agents", "expires_in": "7d", "max_uses": 3}));
        assert_eq!(
            ok.validate().unwrap(),
            Some(std::time::Duration::from_secs(7 * 86400))
        );
        let never = token(serde_json::json!({"name": "x"}));
        assert_eq!(never.validate().unwrap(), None);
        for (body, field) in [
            (serde_json::json!({"name": ""}), "name"),
            (
                serde_json::json!({"name": "x", "expires_in": "soon"}),
                "expires_in",
            ),
            (
                serde_json::json!({"name": "x", "expires_in": "0s"}),
                "expires_in",
            ),
            (serde_json::json!({"name": "x", "max_uses": 0}), "max_uses"),
            (serde_json::json!({"name": "x", "region": "a b"}), "region"),
        ] {
            assert_eq!(
                token(body.clone()).validate().unwrap_err().field,
                field,
                "{body}"
            );
        }
    }
}
