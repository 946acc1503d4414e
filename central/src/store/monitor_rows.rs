//! A monitor's row and the `domain::Monitor` read from it: the columns as stored (JSON texts
//! for the settings and the lists, integer flags, the shown status's text) and their one
//! translation each way. Must not: run a statement (`store::monitors` writes, and
//! `store::monitor_reads` reads, with these).

use sqlx::any::AnyRow;
use sqlx::{FromRow, Row};

use shared_proto::monitor::{CheckKind, PollerMode};
use shared_proto::settings_api::MonitorStatus;

use crate::domain::Monitor;

#[derive(Debug, Clone, serde::Deserialize)]
pub(super) struct MonitorRow {
    pub id: String,
    pub name: String,
    pub kind: String,
    pub target: String,
    pub interval_ms: i64,
    pub timeout_ms: i64,
    /// JSON object.
    pub settings: String,
    pub poller_mode: String,
    pub poller_id: Option<String>,
    pub poller_region: Option<String>,
    pub poller_datacenter: Option<String>,
    pub poller_capability: Option<String>,
    /// JSON array, for `multi` monitors.
    pub poller_regions: Option<String>,
    pub quorum: Option<i64>,
    /// JSON array of channel ids.
    pub notification_channel_ids: Option<String>,
    /// JSON array of the operator's tags (`monitor_tags` holds a row per tag, for lookups).
    pub tags: Option<String>,
    /// JSON array of the monitors it depends on (`monitor_parents` holds a row per parent).
    pub parent_ids: Option<String>,
    #[serde(deserialize_with = "super::packed::optional_flag")]
    pub failover: Option<bool>,
    #[serde(deserialize_with = "super::packed::flag")]
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
    /// The status it showed at alerting's last look (`alerts::look`); set by the store only.
    pub shown_status: Option<String>,
}

impl FromRow<'_, AnyRow> for MonitorRow {
    fn from_row(row: &AnyRow) -> sqlx::Result<Self> {
        Ok(Self {
            id: row.try_get("id")?,
            name: row.try_get("name")?,
            kind: row.try_get("kind")?,
            target: row.try_get("target")?,
            interval_ms: row.try_get("interval_ms")?,
            timeout_ms: row.try_get("timeout_ms")?,
            settings: row.try_get("settings")?,
            poller_mode: row.try_get("poller_mode")?,
            poller_id: row.try_get("poller_id")?,
            poller_region: row.try_get("poller_region")?,
            poller_datacenter: row.try_get("poller_datacenter")?,
            poller_capability: row.try_get("poller_capability")?,
            poller_regions: row.try_get("poller_regions")?,
            quorum: row.try_get("quorum")?,
            notification_channel_ids: row.try_get("notification_channel_ids")?,
            tags: row.try_get("tags")?,
            parent_ids: row.try_get("parent_ids")?,
            failover: row.try_get::<Option<i64>, _>("failover")?.map(|f| f != 0),
            paused: row.try_get::<i64, _>("paused")? != 0,
            paused_at: row.try_get("paused_at")?,
            resumed_at: row.try_get("resumed_at")?,
            created_at: row.try_get("created_at")?,
            updated_at: row.try_get("updated_at")?,
            revision: row.try_get("revision")?,
            assigned_poller_id: row.try_get("assigned_poller_id")?,
            previous_poller_id: row.try_get("previous_poller_id")?,
            assigned_at: row.try_get("assigned_at")?,
            placement_reason: row.try_get("placement_reason")?,
            shown_status: row.try_get("shown_status")?,
        })
    }
}

impl TryFrom<MonitorRow> for Monitor {
    type Error = anyhow::Error;

    /// Reads the row's encodings once: a text central never writes (a hand-edited database,
    /// or a kind a newer replica added) is an error naming the monitor and the column, not a
    /// guess further up.
    fn try_from(row: MonitorRow) -> anyhow::Result<Monitor> {
        let id = row.id.clone();
        let unread = move |column: &str, why: &dyn std::fmt::Display| {
            anyhow::anyhow!("monitor {id}: stored {column} does not read: {why}")
        };
        let json = |column: &str, text: &str| -> anyhow::Result<serde_json::Value> {
            serde_json::from_str(text).map_err(|e| unread(column, &e))
        };
        let typed = |column: &str, text: Option<String>| -> anyhow::Result<Option<Vec<String>>> {
            text.map(|text| {
                serde_json::from_value(json(column, &text)?).map_err(|e| unread(column, &e))
            })
            .transpose()
        };
        Ok(Monitor {
            kind: CheckKind::parse(&row.kind)
                .ok_or_else(|| unread("kind", &format!("`{}`", row.kind)))?,
            poller_mode: PollerMode::parse(&row.poller_mode)
                .ok_or_else(|| unread("poller_mode", &format!("`{}`", row.poller_mode)))?,
            settings: match json("settings", &row.settings)? {
                serde_json::Value::Object(settings) => settings,
                _ => return Err(unread("settings", &"not an object")),
            },
            poller_regions: typed("poller_regions", row.poller_regions)?,
            channel_ids: typed("notification_channel_ids", row.notification_channel_ids)?
                .unwrap_or_default(),
            tags: typed("tags", row.tags)?.unwrap_or_default(),
            parent_ids: typed("parent_ids", row.parent_ids)?.unwrap_or_default(),
            // What alerting's last look showed is a cache its next look rewrites; a status
            // this central does not know (a newer replica's, during a rolling upgrade) reads
            // as none shown yet, never as a reason to leave the monitor out.
            shown_status: row.shown_status.as_deref().and_then(MonitorStatus::parse),
            id: row.id,
            name: row.name,
            target: row.target,
            interval_ms: row.interval_ms,
            timeout_ms: row.timeout_ms,
            poller_id: row.poller_id,
            poller_region: row.poller_region,
            poller_datacenter: row.poller_datacenter,
            poller_capability: row.poller_capability,
            quorum: row.quorum,
            failover: row.failover,
            paused: row.paused,
            paused_at: row.paused_at,
            resumed_at: row.resumed_at,
            created_at: row.created_at,
            updated_at: row.updated_at,
            revision: row.revision,
            assigned_poller_id: row.assigned_poller_id,
            previous_poller_id: row.previous_poller_id,
            assigned_at: row.assigned_at,
            placement_reason: row.placement_reason,
        })
    }
}

/// Monitors read from rows, every one or an error: for what a poller is sent, where a monitor
/// left out would be taken for one to stop running (a kind a newer replica added stays with
/// its poller until a replica that reads it answers).
pub(super) fn each_monitor_of(rows: Vec<MonitorRow>) -> anyhow::Result<Vec<Monitor>> {
    rows.into_iter().map(Monitor::try_from).collect()
}

/// A list column as stored: `NULL` when empty.
fn list_text(list: &[String]) -> anyhow::Result<Option<String>> {
    Ok(if list.is_empty() {
        None
    } else {
        Some(serde_json::to_string(list)?)
    })
}

/// The JSON columns of a monitor written: settings, regions, channels, tags, parents.
pub(super) struct JsonColumns {
    pub(super) settings: String,
    pub(super) poller_regions: Option<String>,
    pub(super) channel_ids: Option<String>,
    pub(super) tags: Option<String>,
    pub(super) parent_ids: Option<String>,
}

impl JsonColumns {
    pub(super) fn of(monitor: &Monitor) -> anyhow::Result<JsonColumns> {
        Ok(JsonColumns {
            settings: serde_json::to_string(&monitor.settings)?,
            poller_regions: monitor
                .poller_regions
                .as_ref()
                .map(serde_json::to_string)
                .transpose()?,
            channel_ids: list_text(&monitor.channel_ids)?,
            tags: list_text(&monitor.tags)?,
            parent_ids: list_text(&monitor.parent_ids)?,
        })
    }
}

pub(super) const MONITOR_COLUMNS: &str =
    "id, name, kind, target, interval_ms, timeout_ms, settings, \
     poller_mode, poller_id, poller_region, poller_datacenter, poller_capability, \
     poller_regions, quorum, notification_channel_ids, tags, parent_ids, failover, \
     paused, paused_at, resumed_at, created_at, updated_at, revision, assigned_poller_id, \
     previous_poller_id, assigned_at, placement_reason, shown_status";
