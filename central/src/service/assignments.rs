//! Turning placement decisions into versioned assignments, and serving them to pollers.

use std::collections::HashMap;

use shared_proto::poller_api::AssignmentsResponse;
use shared_proto::{AssignedMonitor, CheckKind, PollerMode};
use uuid::Uuid;

use super::placement::{place, Candidate, Decision, Placement};
use super::{now_ms, App};
use crate::error::ApiResult;
use crate::store::{AssignmentChange, MonitorRow, PollerRow};

impl App {
    /// Re-decides the poller of every monitor and stores what changed under a new version.
    /// Called after anything that can change a decision: a monitor written, a poller
    /// registered, gone offline or back.
    pub async fn reconcile(&self) -> ApiResult<()> {
        let _one_at_a_time = self.reconcile_lock.lock().await;
        let now = now_ms();
        let pollers = self.store.all_pollers().await?;
        let candidates: Vec<Candidate> = pollers.iter().map(|p| self.candidate(p, now)).collect();
        let monitors = self.store.all_monitors().await?;
        let changes: Vec<AssignmentChange> = monitors
            .iter()
            .filter_map(|monitor| {
                let (to, reason) = match place(&placement_of(monitor), &candidates) {
                    Decision::Assign(poller) => (Some(poller.to_string()), None),
                    Decision::Unplaced(reason) => (None, Some(reason)),
                };
                let unchanged =
                    to == monitor.assigned_poller_id && reason == monitor.placement_reason;
                (!unchanged).then(|| AssignmentChange {
                    monitor_id: monitor.id.clone(),
                    from: monitor.assigned_poller_id.clone(),
                    to,
                    reason,
                })
            })
            .collect();
        if changes.is_empty() {
            return Ok(());
        }
        for change in changes.iter().filter(|c| c.from != c.to) {
            tracing::info!(monitor_id = %change.monitor_id, from = ?change.from, to = ?change.to,
                reason = ?change.reason, "monitor placement changed");
        }
        let version = self.store.apply_assignments(&changes, now).await?;
        self.publish_version(version);
        Ok(())
    }

    fn candidate(&self, poller: &PollerRow, now: i64) -> Candidate {
        Candidate {
            id: Uuid::try_parse(&poller.id).unwrap_or_default(),
            region: poller.region.clone(),
            datacenter: poller.datacenter.clone(),
            capabilities: poller.capability_list(),
            enabled: poller.enabled,
            online: self.poller_status(poller, now)
                != shared_proto::settings_api::PollerStatus::Offline,
        }
    }

    /// Which pollers are online now, for the liveness watcher to notice changes.
    pub async fn online_pollers(&self) -> ApiResult<Vec<String>> {
        let now = now_ms();
        let mut online: Vec<String> = self
            .store
            .all_pollers()
            .await?
            .iter()
            .filter(|p| self.candidate(p, now).online)
            .map(|p| p.id.clone())
            .collect();
        online.sort();
        Ok(online)
    }

    /// A poller's assignments. Until versioned deltas land, any version other than the
    /// current one gets the full set (which the protocol always allows).
    pub async fn assignments_for(
        &self,
        poller: &PollerRow,
        since_version: i64,
    ) -> ApiResult<AssignmentsResponse> {
        // Version first, then the monitors: the set is then at least as new as the version.
        let version = self.store.assignment_version().await?;
        if since_version == version {
            return Ok(AssignmentsResponse {
                version,
                full: false,
                upserts: Vec::new(),
                removes: Vec::new(),
            });
        }
        let upserts = self
            .store
            .monitors_assigned_to(&poller.id)
            .await?
            .iter()
            .filter_map(assigned_monitor)
            .collect();
        Ok(AssignmentsResponse {
            version,
            full: true,
            upserts,
            removes: Vec::new(),
        })
    }
}

fn placement_of(monitor: &MonitorRow) -> Placement {
    let mode = PollerMode::parse(&monitor.poller_mode).unwrap_or_default();
    Placement {
        monitor_id: Uuid::try_parse(&monitor.id).unwrap_or_default(),
        kind: monitor.kind.clone(),
        mode,
        pinned: monitor
            .poller_id
            .as_deref()
            .and_then(|id| Uuid::try_parse(id).ok()),
        region: monitor.poller_region.clone(),
        datacenter: monitor.poller_datacenter.clone(),
        capability: monitor.poller_capability.clone(),
        failover: monitor.failover.unwrap_or(mode != PollerMode::Pinned),
        current: monitor
            .assigned_poller_id
            .as_deref()
            .and_then(|id| Uuid::try_parse(id).ok()),
    }
}

fn assigned_monitor(row: &MonitorRow) -> Option<AssignedMonitor> {
    let settings: HashMap<String, serde_json::Value> = serde_json::from_str(&row.settings).ok()?;
    Some(AssignedMonitor {
        id: Uuid::try_parse(&row.id).ok()?,
        name: row.name.clone(),
        kind: CheckKind::parse(&row.kind)?,
        target: row.target.clone(),
        interval_ms: row.interval_ms.max(0) as u64,
        timeout_ms: row.timeout_ms.max(0) as u64,
        settings: settings.into_iter().collect(),
        revision: row.revision,
    })
}
