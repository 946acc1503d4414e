//! Monitors: the operator's CRUD, and the status derived from results and liveness.

use shared_proto::settings::MonitorSettings;
use shared_proto::settings_api::{
    MonitorStatusView, MonitorView, Page, PollerStatus, StoredResult,
};
use shared_proto::{CheckKind, MonitorPatch, MonitorSpec, PollerMode, ValidationError};
use uuid::Uuid;

use super::status::{self, StatusInputs};
use super::tokens::page;
use super::{now_ms, stored_id, time_of, App};
use crate::error::{ApiError, ApiResult};
use crate::store::{Cursor, MonitorRow};

impl App {
    pub async fn create_monitor(&self, spec: MonitorSpec) -> ApiResult<MonitorView> {
        self.validate_monitor(&spec).await?;
        let id = Uuid::new_v4();
        let now = now_ms();
        let row = monitor_row(id, &spec, now, now);
        self.store.insert_monitor(&row).await?;
        self.reconcile_monitor(id).await?;
        self.get_monitor(id).await
    }

    async fn validate_monitor(&self, spec: &MonitorSpec) -> ApiResult<()> {
        spec.validate()?;
        if let (PollerMode::Pinned, Some(poller_id)) = (spec.poller_mode, spec.poller_id) {
            if self.store.poller(&poller_id.to_string()).await?.is_none() {
                return Err(ValidationError::reference(
                    "poller_id",
                    format!("no poller with id {poller_id}; list them with GET /api/v1/pollers"),
                )
                .into());
            }
        }
        Ok(())
    }

    pub async fn get_monitor(&self, id: Uuid) -> ApiResult<MonitorView> {
        let row = self.monitor_row(id).await?;
        monitor_view(&row).map_err(ApiError::Internal)
    }

    async fn monitor_row(&self, id: Uuid) -> ApiResult<MonitorRow> {
        self.store
            .monitor(&id.to_string())
            .await?
            .ok_or_else(|| ApiError::NotFound(format!("no monitor with id {id}")))
    }

    pub async fn list_monitors(&self, after: &Cursor, limit: u32) -> ApiResult<Page<MonitorView>> {
        let rows = self.store.list_monitors(after, limit).await?;
        let views = rows
            .iter()
            .map(monitor_view)
            .collect::<anyhow::Result<Vec<_>>>()?;
        let mut paged = page(
            rows,
            limit,
            |r| Cursor {
                key: r.created_at,
                id: r.id.clone(),
            },
            |_| Ok(()),
        )?;
        Ok(Page {
            items: views,
            next_cursor: paged.next_cursor.take(),
        })
    }

    pub async fn update_monitor(&self, id: Uuid, patch: MonitorPatch) -> ApiResult<MonitorView> {
        let current = self.monitor_row(id).await?;
        let mut spec = monitor_view(&current)?.spec;
        spec.apply(patch);
        self.validate_monitor(&spec).await?;
        let row = monitor_row(id, &spec, current.created_at, now_ms());
        if let Some(version) = self.store.update_monitor_spec(&row).await? {
            self.publish_version(version);
        }
        self.reconcile_monitor(id).await?;
        self.get_monitor(id).await
    }

    pub async fn delete_monitor(&self, id: Uuid) -> ApiResult<()> {
        let version = self
            .store
            .delete_monitor(&id.to_string(), now_ms())
            .await?
            .ok_or_else(|| ApiError::NotFound(format!("no monitor with id {id}")))?;
        self.publish_version(version);
        Ok(())
    }

    /// The monitor's status: `paused`, `stale` (nobody can be polling it), else its newest
    /// result (`up`/`down`), else `pending`.
    pub async fn monitor_status(&self, id: Uuid) -> ApiResult<MonitorStatusView> {
        let monitor = self.monitor_row(id).await?;
        let latest = self.store.monitor_status(&monitor.id).await?;
        let assigned = match &monitor.assigned_poller_id {
            Some(poller_id) => self.store.poller(poller_id).await?,
            None => None,
        };
        let now = now_ms();
        let settings: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&monitor.settings).unwrap_or_default();
        let confirm_down = CheckKind::parse(&monitor.kind)
            .and_then(|kind| MonitorSettings::parse(kind, &settings).ok())
            .map_or(1, |s| s.common.confirm_down);
        let recent = match latest.as_ref() {
            Some(l) if l.status == "down" && confirm_down > 1 => {
                self.store
                    .recent_verdicts(&monitor.id, confirm_down + 1)
                    .await?
            }
            _ => Vec::new(),
        };
        let offline = assigned
            .as_ref()
            .filter(|p| self.poller_status(p, now) == PollerStatus::Offline);
        let (status, reason) = status::derive(&StatusInputs {
            now,
            paused: monitor.paused,
            placement_reason: monitor.placement_reason.as_deref(),
            offline_poller: offline.map(|p| (p.id.as_str(), p.last_heartbeat_at)),
            interval_ms: monitor.interval_ms,
            assigned_at: monitor.assigned_at,
            latest: latest
                .as_ref()
                .map(|l| (l.status.as_str(), l.last_result_at, l.next_due_at)),
            recent: &recent,
            confirm_down,
        });
        Ok(MonitorStatusView {
            monitor_id: id,
            status,
            poller_id: assigned.map(|p| stored_id(&p.id)).transpose()?,
            last_result_at: latest.as_ref().map(|l| time_of(l.last_result_at)),
            latency_ms: latest
                .as_ref()
                .and_then(|l| l.latency_ms)
                .map(|l| l.max(0) as u64),
            next_check_at: latest.as_ref().and_then(|l| l.next_due_at).map(time_of),
            message: latest.map(|l| l.message),
            reason,
        })
    }

    pub async fn monitor_results(
        &self,
        id: Uuid,
        after: &Cursor,
        limit: u32,
    ) -> ApiResult<Page<StoredResult>> {
        self.monitor_row(id).await?;
        let rows = self
            .store
            .list_results(&id.to_string(), after, limit)
            .await?;
        Ok(page(
            rows,
            limit,
            |r| Cursor {
                key: r.ts,
                id: r.id.clone(),
            },
            |r| {
                Ok(StoredResult {
                    id: stored_id(&r.id)?,
                    monitor_id: id,
                    poller_id: stored_id(&r.poller_id)?,
                    ts: time_of(r.ts),
                    status: r.status.clone(),
                    latency_ms: r.latency_ms.map(|l| l.max(0) as u64),
                    msg: r.msg.clone(),
                    meta: serde_json::from_str(&r.meta).unwrap_or(serde_json::Value::Null),
                })
            },
        )?)
    }
}

fn monitor_row(id: Uuid, spec: &MonitorSpec, created_at: i64, updated_at: i64) -> MonitorRow {
    MonitorRow {
        id: id.to_string(),
        name: spec.name.trim().to_string(),
        kind: spec.kind.as_str().to_string(),
        target: spec.target.clone(),
        interval_ms: spec.interval_ms as i64,
        timeout_ms: spec.timeout_ms as i64,
        settings: serde_json::Value::Object(spec.settings.clone()).to_string(),
        poller_mode: spec.poller_mode.as_str().to_string(),
        poller_id: spec.poller_id.map(|p| p.to_string()),
        poller_region: spec.poller_region.clone(),
        poller_datacenter: spec.poller_datacenter.clone(),
        poller_capability: spec.poller_capability.clone(),
        failover: spec.failover,
        paused: spec.paused,
        created_at,
        updated_at,
        revision: 0,
        assigned_poller_id: None,
        previous_poller_id: None,
        assigned_at: None,
        placement_reason: None,
    }
}

fn monitor_view(row: &MonitorRow) -> anyhow::Result<MonitorView> {
    let spec = MonitorSpec {
        name: row.name.clone(),
        kind: CheckKind::parse(&row.kind)
            .ok_or_else(|| anyhow::anyhow!("stored kind `{}`", row.kind))?,
        target: row.target.clone(),
        interval_ms: row.interval_ms.max(0) as u64,
        timeout_ms: row.timeout_ms.max(0) as u64,
        settings: serde_json::from_str(&row.settings)?,
        poller_mode: PollerMode::parse(&row.poller_mode)
            .ok_or_else(|| anyhow::anyhow!("stored poller_mode `{}`", row.poller_mode))?,
        poller_id: row.poller_id.as_deref().map(stored_id).transpose()?,
        poller_region: row.poller_region.clone(),
        poller_datacenter: row.poller_datacenter.clone(),
        poller_capability: row.poller_capability.clone(),
        failover: row.failover,
        paused: row.paused,
    };
    Ok(MonitorView {
        id: Uuid::try_parse(&row.id)?,
        spec,
        assigned_poller_id: row
            .assigned_poller_id
            .as_deref()
            .map(Uuid::try_parse)
            .transpose()?,
        placement_reason: row.placement_reason.clone(),
        created_at: time_of(row.created_at),
        updated_at: time_of(row.updated_at),
    })
}
