//! Bodies of the dependency endpoints: what `health-json` monitors report of the services
//! they depend on, grouped through operators' aliases (docs/health-json.md).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::monitor::{has_control, is_blank};
use crate::ValidationError;

/// The longest alias or canonical name, in characters (a reported name is kept up to 200).
pub const MAX_DEPENDENCY_NAME_CHARS: usize = 200;

/// A dependency's health as its service reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum DependencyState {
    /// Not working: its service said so, or did not say it works.
    Unhealthy,
    Healthy,
    /// Not checked this time; fails nothing.
    Skipped,
}

impl DependencyState {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "healthy" => Some(Self::Healthy),
            "unhealthy" => Some(Self::Unhealthy),
            "skipped" => Some(Self::Skipped),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Healthy => "healthy",
            Self::Unhealthy => "unhealthy",
            Self::Skipped => "skipped",
        }
    }
}

/// One dependency of one monitor's location.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Dependency {
    /// As the service reports it.
    pub name: String,
    /// The name its alias gives it (`/api/v1/dependency-aliases`), else its own.
    pub canonical: String,
    /// The location that reads it, for a multi-location monitor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    pub state: DependencyState,
    /// From the newest document.
    pub latency_ms: Option<f64>,
    /// Why it is unhealthy; `Unhealthy` when its service gave no reason.
    pub error: Option<String>,
    /// Whom to call about it, as the service reports it.
    pub contact: Option<Value>,
    /// How it was checked, as the service reports it.
    pub check_details: Option<Value>,
    /// When it moved to `state` (the check time of that document).
    pub last_change_at: DateTime<Utc>,
    /// The check time of the newest document.
    pub reported_at: DateTime<Utc>,
}

/// What could not be read in a location's newest document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DependencyWarning {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    pub warning: String,
}

/// What a change recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum DependencyChangeKind {
    /// First reported.
    Appeared,
    /// Its state moved (a recovery is a move to `healthy`).
    Changed,
    /// Still unhealthy, with another error.
    Error,
    /// No longer reported.
    Gone,
}

/// One recorded change of a dependency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DependencyChange {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    pub at: DateTime<Utc>,
    pub kind: DependencyChangeKind,
    /// The state it moved to (for `gone`, the last it had).
    pub state: DependencyState,
    /// For an unhealthy one: its error.
    pub error: Option<String>,
}

/// `GET /api/v1/monitors/{id}/dependencies`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MonitorDependencies {
    pub monitor_id: String,
    /// By location, then name.
    pub dependencies: Vec<Dependency>,
    pub warnings: Vec<DependencyWarning>,
    /// The newest changes first (at most 100).
    pub history: Vec<DependencyChange>,
}

/// One monitor's location reporting a canonical dependency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DependencyReporter {
    pub monitor_id: String,
    pub monitor_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// The name this monitor's service reports it by.
    pub name: String,
    pub state: DependencyState,
    pub error: Option<String>,
    pub last_change_at: DateTime<Utc>,
}

/// A canonical dependency and every monitor that reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CanonicalDependency {
    pub canonical: String,
    /// `unhealthy` when any reporter says so, else `healthy` when any does, else `skipped`.
    pub state: DependencyState,
    pub unhealthy: u32,
    pub healthy: u32,
    pub skipped: u32,
    pub reporters: Vec<DependencyReporter>,
}

/// `GET /api/v1/dependencies`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DependencyList {
    /// Unhealthy ones first, then by name.
    pub dependencies: Vec<CanonicalDependency>,
    /// More reports exist than one answer holds (10,000): the list is cut.
    pub truncated: bool,
}

/// An operator's alias: a reported name that stands for a canonical dependency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DependencyAlias {
    pub alias: String,
    pub canonical: String,
    pub created_at: DateTime<Utc>,
}

/// `POST /api/v1/dependency-aliases`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewDependencyAlias {
    /// A name services report (e.g. `pg-main`).
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 1,
            max_length = 200,
            pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
        )
    )]
    pub alias: String,
    /// The dependency it stands for (e.g. `postgres`).
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 1,
            max_length = 200,
            pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
        )
    )]
    pub canonical: String,
}

impl NewDependencyAlias {
    /// Each name is printable (the rule of monitors' names), not blank and at most `MAX_DEPENDENCY_NAME_CHARS`; an alias is
    /// not its own canonical name.
    pub fn validate(&self) -> Result<(), ValidationError> {
        for (field, name) in [("alias", &self.alias), ("canonical", &self.canonical)] {
            if is_blank(name)
                || has_control(name)
                || name.chars().count() > MAX_DEPENDENCY_NAME_CHARS
            {
                return Err(ValidationError::new(
                    field,
                    format!(
                        "must be a printable name of 1 to {MAX_DEPENDENCY_NAME_CHARS} characters"
                    ),
                ));
            }
        }
        if self.alias == self.canonical {
            return Err(ValidationError::combination(
                "canonical",
                "is the alias itself; an alias names another dependency",
            ));
        }
        Ok(())
    }
}

/// The bucket width of a dependency's latency: kept in hours and days.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum LatencyResolution {
    Hour,
    Day,
}

/// One latency bucket of a dependency (UTC).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DependencyLatencyBucket {
    pub start: DateTime<Utc>,
    /// Documents that gave a latency.
    pub count: u64,
    pub mean_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
}

/// `GET /api/v1/monitors/{id}/dependencies/latency`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DependencyLatency {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    pub resolution: LatencyResolution,
    /// Oldest first.
    pub buckets: Vec<DependencyLatencyBucket>,
}
