//! Bodies of the settings API (operator → central).

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::duration::parse_api_duration;
use crate::monitor::{has_control, is_blank, validate_label, MonitorSpec};
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

/// The longest `expires_in` of a registration token.
pub const MAX_TOKEN_LIFETIME: Duration = Duration::from_secs(3650 * 86_400);

/// The most pollers one registration token may enrol.
pub const MAX_TOKEN_USES: u32 = 1_000_000;

/// `POST /api/v1/registration-tokens`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateRegistrationToken {
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 1,
            max_length = 200,
            pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
        )
    )]
    pub name: String,
    /// e.g. `24h`; unset means the token does not expire.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(schema_with = expires_in_schema))]
    pub expires_in: Option<String>,
    /// How many pollers may register with it; default 1 (a one-time token).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1000000))]
    pub max_uses: Option<u32>,
    /// The region of every poller that registers with it: one that asks for another region
    /// is refused (`403 region_not_allowed`); one that names none gets this one. Unset: any.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[A-Za-z0-9._-]{1,64}$"))]
    pub region: Option<String>,
    /// The most a poller enrolled with it may advertise: registering with a capability
    /// outside the list is refused (`403 capability_not_allowed`), one that names none gets
    /// the list, and a heartbeat's capabilities outside it are ignored and reported as the
    /// poller's error. Unset: any.
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(schema_with = crate::poller_api::capability_limit_schema)
    )]
    pub capabilities: Option<Vec<String>>,
}

impl CreateRegistrationToken {
    /// Validates and returns the expiry as a duration.
    pub fn validate(&self) -> Result<Option<Duration>, ValidationError> {
        if is_blank(&self.name) || has_control(&self.name) || self.name.chars().count() > 200 {
            return Err(ValidationError::new(
                "name",
                "must be 1 to 200 characters, without control characters (line breaks, tabs)",
            ));
        }
        if let Some(uses) = self.max_uses.filter(|n| !(1..=MAX_TOKEN_USES).contains(n)) {
            return Err(ValidationError::new(
                "max_uses",
                format!(
                    "must be between 1 and {MAX_TOKEN_USES} (or leave it out for 1), got {uses}"
                ),
            ));
        }
        if let Some(region) = &self.region {
            validate_label("region", region)?;
        }
        if let Some(capabilities) = &self.capabilities {
            if capabilities.is_empty() {
                return Err(ValidationError::new(
                    "capabilities",
                    "must name at least one capability (or leave it out for any)",
                ));
            }
            crate::poller_api::validate_capabilities(capabilities)?;
        }
        self.expires_in
            .as_deref()
            .map(|text| {
                let duration = parse_api_duration(text, MAX_TOKEN_LIFETIME)
                    .map_err(|m| ValidationError::new("expires_in", m))?;
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
    #[cfg_attr(feature = "openapi", schema(schema_with = overlap_schema))]
    pub overlap: Option<String>,
}

/// A duration field in the OpenAPI document, with the exact pattern of what is accepted.
#[cfg(feature = "openapi")]
pub(crate) fn duration_schema(
    max: Duration,
    zero: bool,
    description: &str,
) -> utoipa::openapi::Object {
    use utoipa::openapi::schema::{ObjectBuilder, SchemaType, Type};
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
        .pattern(Some(crate::duration::api_duration_pattern(max, zero)))
        .examples(["24h"])
        .description(Some(description))
        .build()
}

#[cfg(feature = "openapi")]
fn expires_in_schema() -> utoipa::openapi::Object {
    duration_schema(
        MAX_TOKEN_LIFETIME,
        false,
        "e.g. `24h` (one number, one unit of ms/s/m/h/d, at most 3650d); unset: no expiry.",
    )
}

#[cfg(feature = "openapi")]
fn overlap_schema() -> utoipa::openapi::Object {
    duration_schema(
        MAX_ROTATION_OVERLAP,
        true,
        "How long the current secret keeps working beside the new one, e.g. `24h` (at most \
         30d); unset or `0s`: it stops at once.",
    )
}

/// Longest overlap of a rotation: a leaked old secret must not live on for long.
pub const MAX_ROTATION_OVERLAP: Duration = Duration::from_secs(30 * 86_400);

impl RotateRegistrationToken {
    /// Validates and returns the overlap (zero: none).
    pub fn validate(&self) -> Result<Duration, ValidationError> {
        let Some(text) = self.overlap.as_deref() else {
            return Ok(Duration::ZERO);
        };
        parse_api_duration(text, MAX_ROTATION_OVERLAP).map_err(|m| {
            ValidationError::new("overlap", format!("{m}; rotate again later to extend"))
        })
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
    /// The most its pollers may advertise; `null`: any.
    #[serde(default)]
    pub capabilities: Option<Vec<String>>,
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

impl PollerStatus {
    pub const ALL: [PollerStatus; 3] = [
        PollerStatus::Online,
        PollerStatus::Offline,
        PollerStatus::Degraded,
    ];

    /// The status `as_str` names; `None` for any other text.
    pub fn parse(text: &str) -> Option<PollerStatus> {
        PollerStatus::ALL.into_iter().find(|s| s.as_str() == text)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PollerStatus::Online => "online",
            PollerStatus::Offline => "offline",
            PollerStatus::Degraded => "degraded",
        }
    }
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
    /// Of `queue_depth`, results central refused that the agent keeps and offers again
    /// (`last_error` says why); 0 from agents older than this field.
    #[serde(default)]
    pub held_results: u64,
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
        schema(
            min_length = 1,
            max_length = 200,
            pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
        )
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
            if is_blank(alias) || has_control(alias) || alias.chars().count() > 200 {
                return Err(ValidationError::new(
                    "alias",
                    "must be 1 to 200 characters without control characters (line breaks, \
                     tabs), or null to clear it",
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
pub struct MonitorView {
    pub id: Uuid,
    #[serde(flatten)]
    pub spec: MonitorSpec,
    pub assigned_poller_id: Option<Uuid>,
    /// Why the monitor has no poller, when it has none.
    pub placement_reason: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Changes with every change of the spec (it only grows): send it as `If-Match` with a
    /// `PATCH` so that a change made in between is not overwritten (`409` instead).
    #[serde(default)]
    pub revision: u64,
    /// The derived status now (in lists and reads; see `GET …/status` for the details).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<MonitorStatus>,
    /// A heartbeat monitor's ping URL, in the answer that creates it only: it holds a secret
    /// stored hashed (`POST /api/v1/monitors/{id}/ping-url` makes a new one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ping_url: Option<String>,
}

/// `MonitorView`'s schema is `MonitorSpec`'s properties plus its own. The derive would write the
/// flatten as `allOf` with the spec, whose `additionalProperties: false` (the spec refuses
/// unknown fields on input) would then forbid the view's own fields.
#[cfg(feature = "openapi")]
mod monitor_view_schema {
    use chrono::{DateTime, Utc};
    use utoipa::openapi::schema::Object;
    use utoipa::openapi::{RefOr, Schema};
    use utoipa::{PartialSchema, ToSchema};
    use uuid::Uuid;

    use super::{MonitorSpec, MonitorView};

    /// The fields `MonitorView` adds to the spec; keep in step with the struct.
    #[derive(ToSchema)]
    #[allow(dead_code)]
    struct OwnFields {
        id: Uuid,
        assigned_poller_id: Option<Uuid>,
        /// Why the monitor has no poller, when it has none.
        placement_reason: Option<String>,
        created_at: DateTime<Utc>,
        updated_at: DateTime<Utc>,
        /// Changes with every change of the spec (it only grows): send it as `If-Match` with a
        /// `PATCH` so that a change made in between is not overwritten (`409` instead).
        revision: u64,
        /// The derived status now (in lists and reads; see `GET …/status` for the details).
        status: Option<super::MonitorStatus>,
        /// A heartbeat monitor's ping URL, in the answer that creates it only: it holds a
        /// secret stored hashed (`POST /api/v1/monitors/{id}/ping-url` makes a new one).
        ping_url: Option<String>,
    }

    fn object_of<T: PartialSchema>() -> Object {
        match T::schema() {
            RefOr::T(Schema::Object(object)) => object,
            _ => unreachable!("derived struct schemas are objects"),
        }
    }

    impl PartialSchema for MonitorView {
        fn schema() -> RefOr<Schema> {
            let mut view = object_of::<MonitorSpec>();
            let own = object_of::<OwnFields>();
            view.description =
                Some("A stored monitor: the operator's spec plus what central decided.".into());
            view.additional_properties = None;
            view.properties.extend(own.properties);
            view.required.extend(own.required);
            Schema::Object(view).into()
        }
    }

    impl ToSchema for MonitorView {
        fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
            <MonitorSpec as ToSchema>::schemas(schemas);
        }
    }
}

/// Derived monitor status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum MonitorStatus {
    Pending,
    Up,
    Down,
    /// Some locations see the target down, fewer than the quorum.
    Degraded,
    Stale,
    Paused,
    /// Inside a maintenance window (`/api/v1/maintenance-windows`): checks go on, problems
    /// are not told, and the time counts neither as up nor as down.
    Maintenance,
}

impl MonitorStatus {
    pub const ALL: [MonitorStatus; 7] = [
        MonitorStatus::Pending,
        MonitorStatus::Up,
        MonitorStatus::Down,
        MonitorStatus::Degraded,
        MonitorStatus::Stale,
        MonitorStatus::Paused,
        MonitorStatus::Maintenance,
    ];

    /// The status `as_str` names; `None` for any other text.
    pub fn parse(text: &str) -> Option<MonitorStatus> {
        MonitorStatus::ALL.into_iter().find(|s| s.as_str() == text)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            MonitorStatus::Pending => "pending",
            MonitorStatus::Up => "up",
            MonitorStatus::Down => "down",
            MonitorStatus::Degraded => "degraded",
            MonitorStatus::Stale => "stale",
            MonitorStatus::Paused => "paused",
            MonitorStatus::Maintenance => "maintenance",
        }
    }
}

/// The status of one location of a multi-location monitor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum LocationStatus {
    /// No result from this location yet.
    Pending,
    Up,
    Down,
    /// Its poller is offline, no poller of the region can run it, or its results are overdue:
    /// nobody knows, and it counts neither as up nor as down.
    Unknown,
}

impl LocationStatus {
    pub const ALL: [LocationStatus; 4] = [
        LocationStatus::Pending,
        LocationStatus::Up,
        LocationStatus::Down,
        LocationStatus::Unknown,
    ];

    /// The status `as_str` names; `None` for any other text.
    pub fn parse(text: &str) -> Option<LocationStatus> {
        LocationStatus::ALL.into_iter().find(|s| s.as_str() == text)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            LocationStatus::Pending => "pending",
            LocationStatus::Up => "up",
            LocationStatus::Down => "down",
            LocationStatus::Unknown => "unknown",
        }
    }
}

/// One location of a multi-location monitor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LocationView {
    pub region: String,
    /// The poller checking from this region now.
    pub poller_id: Option<Uuid>,
    pub status: LocationStatus,
    pub last_result_at: Option<DateTime<Utc>>,
    pub latency_ms: Option<u64>,
    pub message: Option<String>,
    /// Why the status is what it is, when that is not obvious.
    pub reason: Option<String>,
}

/// `GET /api/v1/version`: which central answers, and what it knows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct VersionView {
    /// This central's version (semver, from its build); poller-API answers carry it as
    /// `X-Central-Version`.
    pub version: String,
    /// The check kinds it knows: a monitor of any other kind is refused when it is saved.
    pub check_kinds: Vec<String>,
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
    /// For a multi-location monitor: each location's own status, in `poller_regions` order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub locations: Vec<LocationView>,
    /// For a multi-location monitor: how many locations must see it down for `down`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quorum: Option<u32>,
    /// What the poller's engine says of it (breaker, auto-pause, dead letter, rate limit);
    /// only in a single monitor's status answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<EngineView>,
    /// How it has fared lately; only in a single monitor's status answer, once it has results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<HealthClass>,
}

/// One stored result, as `GET /api/v1/monitors/{id}/results` returns it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StoredResult {
    pub id: Uuid,
    pub monitor_id: Uuid,
    pub poller_id: Uuid,
    /// The location it was checked from (multi-location monitors only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
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
        assert_eq!(ok.validate().unwrap(), Some(Duration::from_secs(7 * 86400)));
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
            (
                serde_json::json!({"name": "x", "max_uses": MAX_TOKEN_USES + 1}),
                "max_uses",
            ),
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

/// Where an operator's command to a poller stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum CommandState {
    /// Waiting for the poller's next long poll.
    Queued,
    /// Handed to the poller, not answered yet.
    Sent,
    /// The poller did it (`result` holds the result of a `check` or `test`).
    Done,
    /// The poller could not do it; `message` says why.
    Failed,
    /// Nobody answered in time; the poller will not be asked again.
    Expired,
}

/// An operator's command to one poller (`POST /api/v1/monitors/{id}/check`, `…/reset`,
/// `POST /api/v1/monitors/test`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CommandView {
    pub id: Uuid,
    /// `check`, `reset` or `test`.
    pub kind: String,
    pub poller_id: Uuid,
    /// The monitor it concerns (none for a `test`, which runs an unsaved monitor).
    pub monitor_id: Option<Uuid>,
    pub state: CommandState,
    pub message: Option<String>,
    /// The fresh result of a `check` or `test`.
    pub result: Option<crate::poller_api::CheckResult>,
    pub created_at: DateTime<Utc>,
    pub acked_at: Option<DateTime<Utc>>,
    pub expires_at: DateTime<Utc>,
}

/// Answer to a command request: one command per poller asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CommandsAnswer {
    /// `true` when every poller answered within the wait (HTTP 200); `false` otherwise (HTTP
    /// 202: read each again with `GET /api/v1/commands/{id}`).
    pub complete: bool,
    pub commands: Vec<CommandView>,
}

/// How a monitor has fared lately, by SourceMonitor's classes over its last 20 decisive
/// results (`rate_limited` ones left out): `declining` after 3 or more failures in a row,
/// `improving` after 2 or more successes that follow a failure, else `healthy` at a success
/// rate of 80 % or more, `warning` at 50 % or more, `critical` below.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum HealthClass {
    Healthy,
    Warning,
    Critical,
    Improving,
    Declining,
}

/// What a poller's engine says of a monitor, from its newest result's `meta.engine`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EngineView {
    /// The poller whose engine this is (a multi-location monitor's newest result's).
    pub poller_id: Uuid,
    /// `closed`, `open` or `half_open`.
    pub breaker: String,
    /// When an open breaker lets its next probe through.
    pub breaker_until: Option<DateTime<Utc>>,
    /// The engine paused the monitor itself (its success rate fell) until then.
    pub paused_until: Option<DateTime<Utc>>,
    /// The engine gave up on it for now (rechecked every 30 minutes): the last error.
    pub dead_letter: Option<String>,
    pub consecutive_failures: Option<u64>,
    /// Over the engine's rolling window.
    pub success_rate: Option<f64>,
    /// The target's stated rate-limit budget.
    pub rate_limit: Option<RateLimitView>,
    /// One line per thing an operator should know, as the page shows them (`auto-paused until
    /// …`, `breaker open until …`, `dead-lettered: …`, `rate limited: budget 12 of 5000 left,
    /// resets …`).
    pub notes: Vec<String>,
}

/// A target's rate-limit budget as it last stated it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RateLimitView {
    pub limit: Option<u64>,
    pub remaining: u64,
    pub reset_at: Option<DateTime<Utc>>,
    /// Below the monitor's reserve: checks are spaced out until the reset.
    pub low: bool,
}

/// A poller's scheduler as its last heartbeat described it (`GET /api/v1/pollers/{id}/scheduler`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SchedulerView {
    pub poller_id: Uuid,
    /// When that heartbeat arrived; none before the first.
    pub reported_at: Option<DateTime<Utc>>,
    pub scheduler: Option<crate::poller_api::SchedulerHealth>,
}
