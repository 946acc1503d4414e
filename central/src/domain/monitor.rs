//! A monitor as central keeps it: the operator's spec (kind, target, schedule, settings,
//! placement wishes, channels, tags, parents) and what central keeps of its life (placement,
//! pause times, revision, the status alerting last showed). The store makes one from its row
//! (`store::monitors`) and writes one back; services decide on it. Must not: hold a rule (what
//! a field means for placement, alerting or uptime is the service's).

use serde_json::{Map, Value};
use shared_proto::monitor::{CheckKind, PollerMode};
use shared_proto::settings_api::MonitorStatus;

#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub struct Monitor {
    pub id: String,
    pub name: String,
    pub kind: CheckKind,
    pub target: String,
    pub interval_ms: i64,
    pub timeout_ms: i64,
    /// The kind's settings (`shared_proto::settings`), as the operator gave them.
    pub settings: Map<String, Value>,
    pub poller_mode: PollerMode,
    pub poller_id: Option<String>,
    pub poller_region: Option<String>,
    pub poller_datacenter: Option<String>,
    pub poller_capability: Option<String>,
    /// The regions of a `multi` monitor; `None` for the other modes.
    pub poller_regions: Option<Vec<String>>,
    pub quorum: Option<i64>,
    /// The channels it names (beside the default channels).
    #[serde(default)]
    pub channel_ids: Vec<String>,
    /// The operator's tags.
    #[serde(default)]
    pub tags: Vec<String>,
    /// The monitors it depends on.
    #[serde(default)]
    pub parent_ids: Vec<String>,
    pub failover: Option<bool>,
    pub paused: bool,
    /// When it was last paused, and resumed after that (kept by the store when `paused`
    /// changes): a pause cuts its results' time short (`service::uptime`).
    pub paused_at: Option<i64>,
    pub resumed_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
    pub revision: i64,
    pub assigned_poller_id: Option<String>,
    pub previous_poller_id: Option<String>,
    pub assigned_at: Option<i64>,
    pub placement_reason: Option<String>,
    /// The status it showed at alerting's last look (`service::alerts::look`): a cache the
    /// next look rewrites; `None` before a monitor is first stored, or when a newer replica
    /// wrote a status this central does not know.
    pub shown_status: Option<MonitorStatus>,
}

impl Monitor {
    /// The regions of a multi-location monitor; none for the other modes.
    pub fn regions(&self) -> &[String] {
        self.poller_regions.as_deref().unwrap_or_default()
    }
}
