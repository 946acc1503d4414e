//! Bodies of the poller API (agent → central). The agent only ever makes outbound requests.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use crate::monitor::{has_control, is_blank, validate_label, AssignedMonitor, CheckKind};
use crate::{bounded, ValidationError};

/// Most results one upload may carry; larger backlogs go in several batches.
pub const MAX_BATCH_RESULTS: usize = 5_000;
/// Longest `msg` central keeps; longer ones are cut, not rejected.
pub const MAX_RESULT_MSG_LEN: usize = 1_024;
/// Largest `meta` (as JSON) central keeps of one result; a larger one is replaced by a note of
/// its size (and its `engine` part, when that is small), not rejected: the result still counts.
pub const MAX_RESULT_META_BYTES: usize = 64 * 1024;
/// A result's `latency_ms` beyond this is refused: no check outlives its timeout (at most
/// `MAX_TIMEOUT_MS`), and the margin covers a busy agent's scheduling. A larger value is a
/// broken or hostile poller's, and would distort (or overflow) the latency sums of rollups.
pub const MAX_RESULT_LATENCY_MS: u64 = 2 * crate::monitor::MAX_TIMEOUT_MS;
// The OpenAPI schema of `CheckResult::latency_ms` states this number as a literal.
const _: () = assert!(MAX_RESULT_LATENCY_MS == 240_000);
/// Caps of a heartbeat, each well above what an agent sends (500 events, 20 errors, 100 dead
/// letters): central refuses more while parsing rather than after.
pub const MAX_HEARTBEAT_EVENTS: usize = 1_000;
pub const MAX_HEARTBEAT_ERRORS: usize = 100;
pub const MAX_DEAD_LETTERS: usize = 1_000;
/// Caps of the scheduler's per-monitor lists in a heartbeat, each above what an agent sends
/// (100 breakers, budgets and pauses, 25 stalest monitors).
pub const MAX_REPORTED_MONITORS: usize = 1_000;
pub const MAX_CAPABILITIES: usize = 64;
/// Longest `version`, and longest text kept of an error, event reason or dead-letter reason.
pub const MAX_VERSION_LEN: usize = 64;
/// Sent by the agent with every request to central: its version (semver).
pub const POLLER_VERSION_HEADER: &str = "x-poller-version";
/// Sent by central with every poller-API answer: its version (semver).
pub const CENTRAL_VERSION_HEADER: &str = "x-central-version";
pub const MAX_REPORTED_TEXT_LEN: usize = 1_024;

/// `POST /api/poller/register`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RegisterRequest {
    pub registration_token: String,
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 1,
            max_length = 200,
            pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
        )
    )]
    pub name: String,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[A-Za-z0-9._-]{1,64}$"))]
    pub region: Option<String>,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[A-Za-z0-9._-]{1,64}$"))]
    pub datacenter: Option<String>,
    #[serde(default, deserialize_with = "bounded::vec::<_, _, MAX_CAPABILITIES>")]
    #[cfg_attr(feature = "openapi", schema(schema_with = capability_list_schema))]
    pub capabilities: Vec<String>,
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 1, max_length = 64, pattern = r"^[^\x00-\x1f\x7f-\x9f]+$")
    )]
    pub version: String,
}

impl RegisterRequest {
    pub fn validate(&self) -> Result<(), ValidationError> {
        if is_blank(&self.name) || has_control(&self.name) || self.name.chars().count() > 200 {
            return Err(ValidationError::new(
                "name",
                "must be 1 to 200 characters, without control characters (line breaks, tabs)",
            ));
        }
        validate_version(&self.version)?;
        if let Some(region) = &self.region {
            validate_label("region", region)?;
        }
        if let Some(datacenter) = &self.datacenter {
            validate_label("datacenter", datacenter)?;
        }
        validate_capabilities(&self.capabilities)
    }
}

/// The agent's version: what operators read in the poller list.
pub fn validate_version(version: &str) -> Result<(), ValidationError> {
    if version.is_empty()
        || version.chars().count() > MAX_VERSION_LEN
        || version.chars().any(char::is_control)
    {
        return Err(ValidationError::new(
            "version",
            format!("must be 1 to {MAX_VERSION_LEN} printable characters"),
        ));
    }
    Ok(())
}

/// Capabilities are free-form labels so that pollers can advertise more than the check kinds
/// (e.g. `icmp`, `internal-network`); each must still be a well-formed label.
pub fn validate_capabilities(capabilities: &[String]) -> Result<(), ValidationError> {
    if capabilities.len() > MAX_CAPABILITIES {
        return Err(ValidationError::new(
            "capabilities",
            format!("at most {MAX_CAPABILITIES} entries"),
        ));
    }
    capabilities
        .iter()
        .try_for_each(|c| validate_label("capabilities", c))
}

/// `capabilities` in the OpenAPI document: a list of labels.
#[cfg(feature = "openapi")]
fn capability_list_schema() -> utoipa::openapi::schema::Array {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Type};
    let label = ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some(crate::monitor::LABEL_PATTERN));
    ArrayBuilder::new()
        .items(label)
        .max_items(Some(MAX_CAPABILITIES))
        .description(Some(
            "What the poller can run: check kinds and free-form labels; default every kind.",
        ))
        .build()
}

/// A registration token's `capabilities`: a non-empty list of labels, or null for any.
#[cfg(feature = "openapi")]
pub(crate) fn capability_limit_schema() -> utoipa::openapi::schema::Array {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, SchemaType, Type};
    let label = ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some(crate::monitor::LABEL_PATTERN));
    ArrayBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Array, Type::Null]))
        .items(label)
        .min_items(Some(1))
        .max_items(Some(MAX_CAPABILITIES))
        .description(Some(
            "The most a poller enrolled with this token may advertise; unset: any.",
        ))
        .build()
}

/// The capabilities a poller has when it names none: every kind agents run.
pub fn default_capabilities() -> Vec<String> {
    CheckKind::AGENT_KINDS
        .iter()
        .map(|k| k.as_str().to_string())
        .collect()
}

/// Answer to `register`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RegisterResponse {
    pub poller_id: Uuid,
    pub access_token: String,
    pub access_expires_at: DateTime<Utc>,
    pub refresh_token: String,
}

/// `POST /api/poller/token`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TokenRequest {
    pub refresh_token: String,
}

/// Answer to `token`: the old refresh token is spent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TokenResponse {
    pub access_token: String,
    pub access_expires_at: DateTime<Utc>,
    pub refresh_token: String,
}

/// `POST /api/poller/heartbeat`
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HeartbeatRequest {
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 1, max_length = 64, pattern = r"^[^\x00-\x1f\x7f-\x9f]+$")
    )]
    pub version: String,
    #[serde(default, deserialize_with = "bounded::vec::<_, _, MAX_CAPABILITIES>")]
    #[cfg_attr(feature = "openapi", schema(schema_with = capability_list_schema))]
    pub capabilities: Vec<String>,
    #[serde(default)]
    pub queue_depth: u64,
    #[serde(default)]
    pub oldest_queued_at: Option<DateTime<Utc>>,
    /// The assignment version the agent is running.
    #[serde(default)]
    pub assignment_version: Option<i64>,
    /// Results dropped (retention, size cap, unwritable disk) over the queue's life: loss is
    /// never silent.
    #[serde(default)]
    pub dropped_results: u64,
    /// Results central refused that the agent keeps to offer again (never deleted for the
    /// refusal); counted in `queue_depth` too. Older centrals ignore the field.
    #[serde(default)]
    pub held_results: u64,
    /// Problems since the previous heartbeat (failed uploads, unwritable queue, dropped
    /// results), newest last; central marks the poller `degraded` while they are recent.
    #[serde(
        default,
        deserialize_with = "bounded::vec::<_, _, MAX_HEARTBEAT_ERRORS>"
    )]
    #[cfg_attr(feature = "openapi", schema(max_items = 100))]
    pub errors: Vec<String>,
    /// The polling engine's health as of this heartbeat.
    #[serde(default)]
    pub scheduler: Option<SchedulerHealth>,
    /// Engine state changes since the previous heartbeat (at most the newest 500).
    #[serde(
        default,
        deserialize_with = "bounded::vec::<_, _, MAX_HEARTBEAT_EVENTS>"
    )]
    #[cfg_attr(feature = "openapi", schema(max_items = 1000))]
    pub events: Vec<EngineEvent>,
}

impl HeartbeatRequest {
    /// Refuses what an operator could not use, and cuts free texts to
    /// `MAX_REPORTED_TEXT_LEN` (a long reason is not worth losing the heartbeat over).
    pub fn validate_and_trim(&mut self) -> Result<(), ValidationError> {
        validate_version(&self.version)?;
        validate_capabilities(&self.capabilities)?;
        self.errors.iter_mut().for_each(trim_text);
        if let Some(scheduler) = &mut self.scheduler {
            for dead in &mut scheduler.dead_letters {
                trim_text(&mut dead.reason);
            }
            for stale in &mut scheduler.staleness {
                if let Some(error) = &mut stale.last_error {
                    trim_text(error);
                }
            }
        }
        for event in &mut self.events {
            if let EventKind::DeadLettered { reason } = &mut event.kind {
                trim_text(reason);
            }
        }
        Ok(())
    }
}

fn trim_text(text: &mut String) {
    if let Some((cut, _)) = text.char_indices().nth(MAX_REPORTED_TEXT_LEN) {
        text.truncate(cut);
    }
}

/// A snapshot of the agent's polling engine, sent with each heartbeat.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SchedulerHealth {
    pub monitors: u64,
    /// Requests in flight.
    pub running: u64,
    /// Monitors waiting for a per-host slot.
    pub waiting_for_host: u64,
    /// Monitors due within the next 10 seconds.
    pub due_soon: u64,
    pub breakers_open: u64,
    pub breakers_half_open: u64,
    pub paused: u64,
    #[serde(deserialize_with = "bounded::vec::<_, _, MAX_DEAD_LETTERS>")]
    #[cfg_attr(feature = "openapi", schema(max_items = 1000))]
    pub dead_letters: Vec<DeadLetter>,
    /// How late the most overdue monitor is (0 when none is late).
    pub most_overdue_ms: u64,
    /// Breakers not closed (at most 100, those to retry soonest first).
    #[serde(
        default,
        deserialize_with = "bounded::vec::<_, _, MAX_REPORTED_MONITORS>"
    )]
    #[cfg_attr(feature = "openapi", schema(max_items = 1000))]
    pub breakers: Vec<BreakerReport>,
    /// Monitors the engine auto-paused (at most 100, soonest to resume first).
    #[serde(
        default,
        deserialize_with = "bounded::vec::<_, _, MAX_REPORTED_MONITORS>"
    )]
    #[cfg_attr(feature = "openapi", schema(max_items = 1000))]
    pub auto_paused: Vec<PauseReport>,
    /// The monitors longest without a success, in intervals (at most 25, stalest first; only
    /// those at least one interval late).
    #[serde(
        default,
        deserialize_with = "bounded::vec::<_, _, MAX_REPORTED_MONITORS>"
    )]
    #[cfg_attr(feature = "openapi", schema(max_items = 1000))]
    pub staleness: Vec<Staleness>,
    /// Targets' stated rate-limit budgets (at most 100, least left first).
    #[serde(
        default,
        deserialize_with = "bounded::vec::<_, _, MAX_REPORTED_MONITORS>"
    )]
    #[cfg_attr(feature = "openapi", schema(max_items = 1000))]
    pub budgets: Vec<BudgetReport>,
}

/// A monitor the engine gave up on for now; rechecked every 30 minutes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DeadLetter {
    pub monitor_id: Uuid,
    /// The last error.
    pub reason: String,
    pub since: DateTime<Utc>,
    /// Consecutive failures so far.
    #[serde(default)]
    pub failures: u32,
    /// When it is rechecked.
    #[serde(default)]
    pub next_recheck: Option<DateTime<Utc>>,
}

/// A monitor whose breaker is not closed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BreakerReport {
    pub monitor_id: Uuid,
    /// `open` or `half_open`.
    pub state: String,
    /// Consecutive failures.
    pub failures: u32,
    /// When an open breaker lets a probe through.
    pub retry_at: Option<DateTime<Utc>>,
}

/// A monitor the engine paused itself (its success rate fell below its threshold).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PauseReport {
    pub monitor_id: Uuid,
    pub until: DateTime<Utc>,
    /// Its success rate over its window.
    pub success_rate: Option<f64>,
}

/// How long a monitor has gone without a success.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Staleness {
    pub monitor_id: Uuid,
    /// Intervals since its last success (or since it was assigned, without one).
    pub intervals: f64,
    pub last_success: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
}

/// A target's rate-limit budget as it last stated it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BudgetReport {
    pub monitor_id: Uuid,
    pub limit: Option<u64>,
    pub remaining: u64,
    pub reset_at: Option<DateTime<Utc>>,
    /// Below the monitor's reserve: its checks are spaced out until the reset.
    pub low: bool,
}

/// A state change of the engine about one monitor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EngineEvent {
    /// Made by the agent, so that a heartbeat sent again does not store its events twice.
    #[serde(default)]
    pub id: Option<Uuid>,
    pub monitor_id: Uuid,
    pub at: DateTime<Utc>,
    #[serde(flatten)]
    pub kind: EventKind,
    /// When the monitor runs next, so that a deliberate delay is not mistaken for silence.
    pub next_due_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum EventKind {
    BreakerOpened,
    BreakerHalfOpen,
    BreakerClosed,
    Paused {
        until: DateTime<Utc>,
    },
    Resumed,
    DeadLettered {
        reason: String,
    },
    Revived,
    StatusChanged {
        from: Option<ResultStatus>,
        to: ResultStatus,
    },
    RateLimited {
        retry_after_ms: u64,
    },
    /// The target's stated rate-limit budget fell below the monitor's reserve: checks are
    /// spaced out until it resets.
    BudgetLow {
        remaining: u64,
        limit: Option<u64>,
        reset_ms: Option<u64>,
    },
}

impl EventKind {
    pub fn name(&self) -> &'static str {
        match self {
            EventKind::BreakerOpened => "breaker_opened",
            EventKind::BreakerHalfOpen => "breaker_half_open",
            EventKind::BreakerClosed => "breaker_closed",
            EventKind::Paused { .. } => "paused",
            EventKind::Resumed => "resumed",
            EventKind::DeadLettered { .. } => "dead_lettered",
            EventKind::Revived => "revived",
            EventKind::StatusChanged { .. } => "status_changed",
            EventKind::RateLimited { .. } => "rate_limited",
            EventKind::BudgetLow { .. } => "budget_low",
        }
    }
}

/// Answer to `heartbeat`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HeartbeatResponse {
    pub assignment_version: i64,
    pub server_time: DateTime<Utc>,
    /// When central stored this poller's newest upload, as its database says (`null` before
    /// its first). An agent that had uploads acknowledged well after it knows the database
    /// lost them (central runs on a restored copy) and sends again the delivered results it
    /// kept (`POLLER_REDELIVERY_WINDOW`); central keeps each result once. Absent (`None` here)
    /// from centrals older than the field, which tell nothing either way.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::monitor::double_option"
    )]
    pub last_upload_at: Option<Option<DateTime<Utc>>>,
}

/// Answer to `GET /api/poller/assignments?since_version=N`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(from = "ReadAssignments")]
pub struct AssignmentsResponse {
    pub version: i64,
    /// `true`: `upserts` is the whole set and anything not in it is no longer assigned.
    pub full: bool,
    pub upserts: Vec<AssignedMonitor>,
    pub removes: Vec<Uuid>,
    /// What operators asked of this poller since it last asked (check now, reset, test),
    /// to do after applying `upserts` and `removes`. Each is acknowledged once with
    /// `POST /api/poller/commands/{id}/ack`; one not acknowledged is offered again after
    /// `COMMAND_RESEND_MS`, so an agent must do nothing the second time it sees an id.
    /// A command this agent cannot read (a kind from a newer central) is left out: it expires
    /// at central unanswered, and the rest of the answer still applies.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "readable_commands"
    )]
    pub commands: Vec<PollerCommand>,
    /// Monitors of `upserts` this agent could not read (a kind or a field of a newer central),
    /// left out of `upserts` so that the rest of the answer still applies: the agent runs
    /// them not, says so, and drops an older copy it held. Never sent; empty at central.
    #[serde(skip)]
    pub unreadable: Vec<UnreadableMonitor>,
}

/// An assigned monitor an agent could not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnreadableMonitor {
    /// Its id, when that much reads.
    pub id: Option<Uuid>,
    /// Its kind as sent (`multihttp`), when it is text.
    pub kind: Option<String>,
    /// What did not read.
    pub why: String,
}

/// `AssignmentsResponse` as it arrives: each upsert read on its own.
#[derive(Deserialize)]
struct ReadAssignments {
    version: i64,
    full: bool,
    upserts: Vec<Value>,
    removes: Vec<Uuid>,
    #[serde(default, deserialize_with = "readable_commands")]
    commands: Vec<PollerCommand>,
}

impl From<ReadAssignments> for AssignmentsResponse {
    fn from(read: ReadAssignments) -> Self {
        let mut upserts = Vec::with_capacity(read.upserts.len());
        let mut unreadable = Vec::new();
        for monitor in read.upserts {
            let id = monitor.get("id").and_then(|i| i.as_str()?.parse().ok());
            let kind = monitor
                .get("kind")
                .and_then(Value::as_str)
                .map(str::to_string);
            match serde_json::from_value::<AssignedMonitor>(monitor) {
                Ok(monitor) => upserts.push(monitor),
                Err(e) => unreadable.push(UnreadableMonitor {
                    id,
                    kind,
                    why: e.to_string(),
                }),
            }
        }
        AssignmentsResponse {
            version: read.version,
            full: read.full,
            upserts,
            removes: read.removes,
            commands: read.commands,
            unreadable,
        }
    }
}

fn readable_commands<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<PollerCommand>, D::Error> {
    let raw: Vec<Value> = Deserialize::deserialize(deserializer)?;
    Ok(raw
        .into_iter()
        .filter_map(|command| serde_json::from_value(command).ok())
        .collect())
}

/// A command not acknowledged is offered again after this long (its answer may have been
/// lost on the way).
pub const COMMAND_RESEND_MS: i64 = 15_000;

/// Something an operator asked one poller to do. Pollers only make outbound requests, so
/// commands ride on the assignments long poll.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PollerCommand {
    /// Made by central; the agent acknowledges by it and runs an id at most once.
    pub id: Uuid,
    #[serde(flatten)]
    pub action: CommandAction,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CommandAction {
    /// Run this assigned monitor now, whatever its schedule, breaker, auto-pause or dead
    /// letter; acknowledged with the result of a check started after the command arrived.
    Check { monitor_id: Uuid },
    /// Forget the monitor's engine state (breaker, backoff, retries, auto-pause, dead letter)
    /// and run it now.
    Reset { monitor_id: Uuid },
    /// Run this monitor once, outside the schedule, and acknowledge with its result; nothing
    /// is queued or uploaded.
    Test { monitor: AssignedMonitor },
}

impl CommandAction {
    pub fn name(&self) -> &'static str {
        match self {
            CommandAction::Check { .. } => "check",
            CommandAction::Reset { .. } => "reset",
            CommandAction::Test { .. } => "test",
        }
    }
}

/// `POST /api/poller/commands/{id}/ack`: what came of a command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CommandAck {
    /// Whether the agent did what was asked (`false`: e.g. the monitor is not assigned here).
    pub done: bool,
    /// What happened, for the operator.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_length = 1024))]
    pub message: String,
    /// `check` and `test`: the result. A `check`'s result is also queued and uploaded as any
    /// other; central stores it once (by its `id`).
    #[serde(default)]
    pub result: Option<CheckResult>,
}

impl CommandAck {
    /// Cuts the message as heartbeats' texts are cut.
    pub fn trim(&mut self) {
        trim_text(&mut self.message);
    }
}

/// Answer to `ack`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CommandAckResponse {
    /// `true` when this command had been acknowledged before: the first answer stands.
    pub already: bool,
}

/// The outcome of one check.
///
/// On the wire a rate-limited result is `ratelimited`, as every released agent and central
/// writes it (serde's `lowercase` of the variant's name); central also takes `rate_limited`,
/// the name it stores and shows, which the protocol document gave (it is what a poller of
/// another make would send).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum ResultStatus {
    Up,
    Down,
    /// The target asked us to slow down (`429`/`503` with `Retry-After`): neither up nor down.
    #[serde(alias = "rate_limited")]
    RateLimited,
}

/// An up/down result's verdict on its target: what moves a monitor's confirmed status (a
/// rate-limited result moves none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Up,
    Down,
}

impl Verdict {
    /// The verdict of a stored status text (`up`/`down`); `None` for any other.
    pub fn parse(status: &str) -> Option<Verdict> {
        ResultStatus::parse(status).and_then(ResultStatus::verdict)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Up => "up",
            Verdict::Down => "down",
        }
    }
}

impl From<Verdict> for ResultStatus {
    fn from(verdict: Verdict) -> Self {
        match verdict {
            Verdict::Up => ResultStatus::Up,
            Verdict::Down => ResultStatus::Down,
        }
    }
}

impl ResultStatus {
    /// The verdict an up/down result gives; `None` for a rate-limited one.
    pub fn verdict(self) -> Option<Verdict> {
        match self {
            ResultStatus::Up => Some(Verdict::Up),
            ResultStatus::Down => Some(Verdict::Down),
            ResultStatus::RateLimited => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ResultStatus::Up => "up",
            ResultStatus::Down => "down",
            ResultStatus::RateLimited => "rate_limited",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "up" => Some(ResultStatus::Up),
            "down" => Some(ResultStatus::Down),
            "rate_limited" => Some(ResultStatus::RateLimited),
            _ => None,
        }
    }
}

/// One check result. `id` is made by the agent, so a re-upload is recognised as a duplicate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CheckResult {
    pub id: Uuid,
    pub monitor_id: Uuid,
    pub ts: DateTime<Utc>,
    pub status: ResultStatus,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(maximum = 240000))]
    pub latency_ms: Option<u64>,
    #[serde(default)]
    pub msg: String,
    #[serde(default)]
    pub meta: Value,
}

/// `POST /api/poller/results`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ResultsBatch {
    pub batch_id: Uuid,
    #[cfg_attr(feature = "openapi", schema(max_items = 5000))]
    pub results: Vec<CheckResult>,
}

/// Why central refused one result of a batch; the rest of the batch is unaffected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RejectedResult {
    /// The result's `id`, or its position in the batch when it had no readable id.
    pub id: String,
    pub reason: String,
}

/// Answer to `results`. `accepted + duplicates + rejected.len()` equals the batch size.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ResultsAck {
    pub accepted: u64,
    pub duplicates: u64,
    pub rejected: Vec<RejectedResult>,
    /// How long before this upload central had stored this poller's previous one, as its
    /// database said while storing this one (`null`: none before). Read in the transaction
    /// that stores this upload, so a central restored from a copy is noticed at the first
    /// upload it takes, before what it stores moves its record on: an agent that had an
    /// upload acknowledged well after that sends again the delivered results it kept
    /// (`POLLER_REDELIVERY_WINDOW`), as for the heartbeat's `last_upload_at`. A duration, not
    /// an instant, so the agent's clock need not agree with central's. Absent from centrals
    /// older than the field, and when nothing of the batch was to be stored.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::monitor::double_option"
    )]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<u64>))]
    pub since_previous_upload_ms: Option<Option<u64>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn register(name: &str) -> RegisterRequest {
        RegisterRequest {
            registration_token: "t".into(),
            name: name.into(),
            region: Some("eu-west".into()),
            datacenter: None,
            capabilities: default_capabilities(),
            version: "0.1.0".into(),
        }
    }

    /// A rate-limited result travels as `ratelimited` (what released centrals take) and is
    /// taken under both names; up and down are what they say.
    #[test]
    fn a_rate_limited_result_is_taken_under_both_names() {
        let written = serde_json::to_string(&ResultStatus::RateLimited).unwrap();
        assert_eq!(written, r#""ratelimited""#);
        for name in [r#""ratelimited""#, r#""rate_limited""#] {
            let read: ResultStatus = serde_json::from_str(name).unwrap();
            assert_eq!(read, ResultStatus::RateLimited, "{name}");
        }
        assert_eq!(
            serde_json::from_str::<ResultStatus>(r#""down""#).unwrap(),
            ResultStatus::Down
        );
        assert_eq!(ResultStatus::RateLimited.verdict(), None);
        assert_eq!(Verdict::parse("rate_limited"), None);
        assert_eq!(Verdict::parse("up"), Some(Verdict::Up));
    }

    #[test]
    fn register_validation_names_the_field() {
        register("edge-1").validate().unwrap();
        assert_eq!(register("").validate().unwrap_err().field, "name");
        let mut bad_region = register("edge-1");
        bad_region.region = Some("eu west".into());
        assert_eq!(bad_region.validate().unwrap_err().field, "region");
        let mut bad_caps = register("edge-1");
        bad_caps.capabilities = vec!["http".into(), "".into()];
        assert_eq!(bad_caps.validate().unwrap_err().field, "capabilities");
    }

    #[test]
    fn a_command_of_an_unknown_kind_is_left_out_and_the_rest_applies() {
        let answer: AssignmentsResponse = serde_json::from_value(serde_json::json!({
            "version": 3, "full": false, "upserts": [], "removes": [],
            "commands": [
                {"id": "0193a4b2-0000-7000-8000-000000000001", "kind": "teleport"},
                {"id": "0193a4b2-0000-7000-8000-000000000002", "kind": "reset",
                 "monitor_id": "0193a4b2-0000-7000-8000-000000000003"}
            ]
        }))
        .unwrap();
        assert_eq!(answer.commands.len(), 1);
        assert_eq!(answer.commands[0].action.name(), "reset");
        let old: AssignmentsResponse = serde_json::from_value(serde_json::json!({
            "version": 3, "full": false, "upserts": [], "removes": []}))
        .unwrap();
        assert!(old.commands.is_empty());
    }

    /// An older central's heartbeat answer says nothing of uploads (no field: `None`), which an
    /// agent must not take for "none stored" (`Some(None)`, sent as `null`): it would send
    /// again everything it delivered at every heartbeat.
    #[test]
    fn last_upload_at_tells_an_older_central_from_one_with_no_upload() {
        let read = |text: &str| serde_json::from_str::<HeartbeatResponse>(text).unwrap();
        let old = read(r#"{"assignment_version": 1, "server_time": "2026-12-06T10:00:00Z"}"#);
        assert_eq!(old.last_upload_at, None);
        let none = read(
            r#"{"assignment_version": 1, "server_time": "2026-12-06T10:00:00Z",
                "last_upload_at": null}"#,
        );
        assert_eq!(none.last_upload_at, Some(None));
        assert!(serde_json::to_string(&none)
            .unwrap()
            .contains("\"last_upload_at\":null"));
        let some = read(
            r#"{"assignment_version": 1, "server_time": "2026-12-06T10:00:00Z",
                "last_upload_at": "2026-12-06T09:59:58Z"}"#,
        );
        assert!(matches!(some.last_upload_at, Some(Some(_))));
    }

    /// A monitor of a kind from a newer central is left out alone: the rest of the answer
    /// (the readable monitor, the removal) still applies, and the agent learns what it skipped.
    #[test]
    fn a_monitor_of_an_unknown_kind_is_left_out_and_the_rest_applies() {
        let answer: AssignmentsResponse = serde_json::from_value(serde_json::json!({
            "version": 9, "full": false,
            "upserts": [
                {"id": "0193a4b2-0000-7000-8000-000000000001", "name": "flow",
                 "kind": "multihttp", "target": "https://example.com", "interval_ms": 60000,
                 "timeout_ms": 10000, "revision": 9},
                {"id": "0193a4b2-0000-7000-8000-000000000002", "name": "api", "kind": "http",
                 "target": "https://example.com", "interval_ms": 60000, "timeout_ms": 10000,
                 "revision": 9}
            ],
            "removes": ["0193a4b2-0000-7000-8000-000000000003"]
        }))
        .unwrap();
        assert_eq!(answer.upserts.len(), 1);
        assert_eq!(answer.upserts[0].name, "api");
        assert_eq!(answer.removes.len(), 1);
        assert_eq!(answer.unreadable.len(), 1);
        let skipped = &answer.unreadable[0];
        assert_eq!(
            skipped.id,
            Some("0193a4b2-0000-7000-8000-000000000001".parse().unwrap())
        );
        assert_eq!(skipped.kind.as_deref(), Some("multihttp"));
        assert!(skipped.why.contains("multihttp"), "{}", skipped.why);
        // What central sends carries no such field.
        let sent = serde_json::to_value(&answer).unwrap();
        assert!(sent.get("unreadable").is_none(), "{sent}");
    }

    #[test]
    fn results_round_trip_with_rfc3339_times() {
        let result = CheckResult {
            id: Uuid::new_v4(),
            monitor_id: Uuid::new_v4(),
            ts: "2026-11-21T10:00:00.123Z".parse().unwrap(),
            status: ResultStatus::Down,
            latency_ms: Some(12),
            msg: "expected 200, got 503".into(),
            meta: serde_json::json!({"status_code": 503}),
        };
        let text = serde_json::to_string(&result).unwrap();
        assert!(text.contains("\"2026-11-21T10:00:00.123Z\""), "{text}");
        assert!(text.contains("\"down\""));
        assert_eq!(serde_json::from_str::<CheckResult>(&text).unwrap(), result);
    }
}
