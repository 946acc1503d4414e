//! Monitors: the operator's CRUD, and the status derived from results and liveness.

use shared_proto::settings_api::{MonitorStatusView, MonitorView, Page, StoredResult};
use shared_proto::{CheckKind, MonitorPatch, MonitorSpec, PollerMode, ValidationError};
use uuid::Uuid;

use super::tokens::page;
use super::{stored_id, time_of, App};
use crate::domain::Monitor;
use crate::service::error::{ServiceError, ServiceResult};
use crate::store::{Cursor, ListFilter};

/// Rows read per step of a filtered list.
const FILTER_CHUNK: u32 = 500;

/// `GET /api/v1/monitors?status=&region=`.
#[derive(Debug, Default, Clone)]
pub struct MonitorFilter {
    pub status: Option<shared_proto::settings_api::MonitorStatus>,
    pub region: Option<String>,
    /// Only monitors whose name contains this, ignoring case (the web page's search).
    pub name: Option<String>,
    /// Only monitors carrying this tag.
    pub tag: Option<String>,
}

impl App {
    pub async fn create_monitor(&self, spec: MonitorSpec) -> ServiceResult<MonitorView> {
        self.validate_monitor(None, &spec).await?;
        let id = Uuid::new_v4();
        let now = self.now_ms();
        let row = monitor_row(id, &spec, now, now);
        self.store
            .insert_monitor(&row)
            .await
            .map_err(super::parents::link_conflict)?;
        self.reconcile_monitor(id).await?;
        let mut view = self.get_monitor(id).await?;
        if spec.kind == CheckKind::Heartbeat {
            view.ping_url = Some(self.new_ping_url(id).await?.ping_url);
        }
        Ok(view)
    }

    /// `id`: the monitor edited, `None` for a new one.
    pub(super) async fn validate_monitor(
        &self,
        id: Option<Uuid>,
        spec: &MonitorSpec,
    ) -> ServiceResult<()> {
        spec.validate()?;
        if spec.kind == CheckKind::Heartbeat {
            super::push::validate_spec(spec)?;
        }
        if let (PollerMode::Pinned, Some(poller_id)) = (spec.poller_mode, spec.poller_id) {
            if self.store.poller(&poller_id.to_string()).await?.is_none() {
                return Err(ValidationError::reference(
                    "poller_id",
                    format!("no poller with id {poller_id}; list them with GET /api/v1/pollers"),
                )
                .into());
            }
        }
        for channel in &spec.notification_channel_ids {
            if !self.store.channel_exists(&channel.to_string()).await? {
                return Err(ValidationError::reference(
                    "notification_channel_ids",
                    format!("no notification channel with id {channel}; list them with GET /api/v1/notification-channels"),
                )
                .into());
            }
        }
        self.parents().check_parents(id, &spec.parent_ids).await?;
        Ok(())
    }

    pub async fn get_monitor(&self, id: Uuid) -> ServiceResult<MonitorView> {
        let row = self.monitor_row(id).await?;
        let mut view = monitor_view(&row)?;
        view.status = self
            .statuses_of(std::slice::from_ref(&row))
            .await?
            .pop()
            .map(|s| s.status);
        Ok(view)
    }

    pub(super) async fn monitor_row(&self, id: Uuid) -> ServiceResult<Monitor> {
        self.store
            .monitor(&id.to_string())
            .await?
            .ok_or_else(|| ServiceError::NotFound(format!("no monitor with id {id}")))
    }

    /// A page of monitors with their status now, optionally only those in a status or running
    /// in a region. Filtered lists read on until the page is full, so a dashboard asking for
    /// the `down` ones gets them in one call.
    pub async fn list_monitors(
        &self,
        filter: &MonitorFilter,
        after: &Cursor,
        limit: u32,
    ) -> ServiceResult<Page<MonitorView>> {
        let page = self.list_monitors_with_status(filter, after, limit).await?;
        Ok(Page {
            items: page.items.into_iter().map(|(view, _)| view).collect(),
            next_cursor: page.next_cursor,
        })
    }

    /// A page of monitors (oldest first) that pass the filter, each with its derived status.
    pub async fn list_monitors_with_status(
        &self,
        filter: &MonitorFilter,
        after: &Cursor,
        limit: u32,
    ) -> ServiceResult<Page<(MonitorView, MonitorStatusView)>> {
        let filtered = filter.status.is_some()
            || filter.region.is_some()
            || filter.name.is_some()
            || filter.tag.is_some();
        let chunk = if filtered {
            limit.max(FILTER_CHUNK)
        } else {
            limit
        };
        let name = filter.name.as_deref().map(str::to_lowercase);
        let mut items = Vec::new();
        let mut cursor = after.clone();
        loop {
            // In a status: the monitors alerting last saw in it (an indexed read of those
            // alone), each derived again below, so that one that changed since is left out.
            // In a region, with a tag: filtered by the database (`store::list_monitors`).
            let kept = ListFilter {
                shown: filter.status,
                region: filter.region.as_deref(),
                tag: filter.tag.as_deref(),
            };
            let read = self.store.list_monitors(&kept, &cursor, chunk).await?;
            let statuses = self.statuses_of(&read.items).await?;
            for (row, status) in read.items.iter().zip(statuses) {
                cursor = Cursor {
                    key: row.created_at,
                    id: row.id.clone(),
                };
                let wanted = filter.status.is_none_or(|s| s == status.status)
                    && name
                        .as_deref()
                        .is_none_or(|name| row.name.to_lowercase().contains(name));
                if !wanted {
                    continue;
                }
                let mut view = monitor_view(row)?;
                view.status = Some(status.status);
                items.push((view, status));
                if items.len() == limit as usize {
                    return Ok(Page {
                        items,
                        next_cursor: Some(cursor.encode()),
                    });
                }
            }
            // The store's next position, not the last monitor's: one left out of the read
            // (it does not read) ends neither the page nor the list.
            match read.next {
                Some(next) => cursor = next,
                None => {
                    return Ok(Page {
                        items,
                        next_cursor: None,
                    })
                }
            }
        }
    }

    /// Applies `patch` to the monitor as it is now. With `if_match` (the `revision` the caller
    /// read), only if nobody changed it since: otherwise `409`, so an edit made on an old
    /// copy (a form opened before a pause) never silently undoes a newer change. Without it,
    /// the patch is applied to the newest revision (read, apply and write again if a change
    /// came in between), never to a stale copy.
    pub async fn update_monitor(
        &self,
        id: Uuid,
        patch: MonitorPatch,
        if_match: Option<u64>,
    ) -> ServiceResult<MonitorView> {
        const ATTEMPTS: usize = 5;
        patch.validate_fields()?;
        for _ in 0..ATTEMPTS {
            let current = self.monitor_row(id).await?;
            let revision = current.revision.max(0) as u64;
            if if_match.is_some_and(|expected| expected != revision) {
                return Err(stale_revision(if_match.unwrap_or_default(), revision));
            }
            let stored = monitor_spec(&current)?;
            let mut spec = stored.clone();
            spec.apply(patch.clone());
            super::monitor_secrets::keep(&mut spec, &stored)?;
            super::monitor_secrets::not_carried_elsewhere(
                &spec,
                &stored,
                patch.settings.is_some(),
                patch.target.is_some(),
            )?;
            self.validate_monitor(Some(id), &spec)
                .await
                .map_err(super::patch_does_not_fit)?;
            let row = monitor_row(id, &spec, current.created_at, self.now_ms());
            match self
                .store
                .update_monitor_spec(&row, current.revision)
                .await
                .map_err(super::parents::link_conflict)?
            {
                Some(versioned) => {
                    self.publish_version(&versioned);
                    // A heartbeat's new schedule starts its clock again (not any edit: a
                    // rename must not forgive a missed run).
                    if spec.kind == CheckKind::Heartbeat
                        && super::push::schedule_changed(&current, &row)
                    {
                        self.store.set_schedule_at(&row.id, row.updated_at).await?;
                    }
                    self.dependencies()
                        .forget_unreported_dependencies(id)
                        .await?;
                    self.reconcile_monitor(id).await?;
                    return self.get_monitor(id).await;
                }
                // Changed (or deleted) since it was read: read it again.
                None => {
                    if let Some(expected) = if_match {
                        let now = self.monitor_row(id).await?.revision.max(0) as u64;
                        return Err(stale_revision(expected, now));
                    }
                }
            }
        }
        Err(ServiceError::Conflict(format!(
            "monitor {id} kept changing while this change was applied ({ATTEMPTS} tries); retry"
        )))
    }

    pub async fn delete_monitor(&self, id: Uuid) -> ServiceResult<()> {
        let versioned = self
            .store
            .delete_monitor(&id.to_string(), self.now_ms())
            .await?
            .ok_or_else(|| ServiceError::NotFound(format!("no monitor with id {id}")))?;
        self.publish_version(&versioned);
        Ok(())
    }

    /// The monitor's status: `paused`, `stale` (nobody can be polling it), else its newest
    /// verdict (`up`/`down`, or for several locations `up`/`degraded`/`down` by quorum), else
    /// `pending`.
    pub async fn monitor_status(&self, id: Uuid) -> ServiceResult<MonitorStatusView> {
        let monitor = self.monitor_row(id).await?;
        let mut statuses = self.statuses_of(std::slice::from_ref(&monitor)).await?;
        let mut status = statuses
            .pop()
            .ok_or_else(|| ServiceError::Internal(anyhow::anyhow!("no status derived for {id}")))?;
        self.add_engine_health(&mut status).await?;
        Ok(status)
    }

    pub async fn monitor_results(
        &self,
        id: Uuid,
        after: &Cursor,
        limit: u32,
    ) -> ServiceResult<Page<StoredResult>> {
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
                    region: r.region.clone(),
                    ts: time_of(r.ts),
                    status: r.status.as_str().to_string(),
                    latency_ms: r.latency_ms.map(|l| l.max(0) as u64),
                    msg: r.msg.clone(),
                    meta: serde_json::from_str(&r.meta).unwrap_or(serde_json::Value::Null),
                })
            },
        )?)
    }
}

pub(super) fn monitor_row(
    id: Uuid,
    spec: &MonitorSpec,
    created_at: i64,
    updated_at: i64,
) -> Monitor {
    Monitor {
        id: id.to_string(),
        name: spec.name.trim().to_string(),
        kind: spec.kind,
        target: spec.target.clone(),
        interval_ms: spec.interval_ms as i64,
        timeout_ms: spec.timeout_ms as i64,
        settings: spec.settings.clone(),
        poller_mode: spec.poller_mode,
        poller_id: spec.poller_id.map(|p| p.to_string()),
        poller_region: spec.poller_region.clone(),
        poller_datacenter: spec.poller_datacenter.clone(),
        poller_capability: spec.poller_capability.clone(),
        poller_regions: spec.poller_regions.clone(),
        quorum: spec.quorum.map(i64::from),
        channel_ids: spec
            .notification_channel_ids
            .iter()
            .map(Uuid::to_string)
            .collect(),
        tags: spec.tags.clone(),
        parent_ids: spec.parent_ids.iter().map(Uuid::to_string).collect(),
        failover: spec.failover,
        paused: spec.paused,
        // The store keeps these as `paused` changes.
        paused_at: None,
        resumed_at: None,
        created_at,
        updated_at,
        revision: 0,
        assigned_poller_id: None,
        previous_poller_id: None,
        assigned_at: None,
        placement_reason: None,
        shown_status: None,
    }
}

fn stale_revision(expected: u64, now: u64) -> ServiceError {
    ServiceError::Conflict(format!(
        "the monitor changed since revision {expected} was read (it is at revision {now} now): \
         read it again, then make the change on what it is now"
    ))
}

/// The monitor as stored, secrets included: for central's own use, never for a view.
pub(super) fn monitor_spec(row: &Monitor) -> anyhow::Result<MonitorSpec> {
    Ok(MonitorSpec {
        name: row.name.clone(),
        kind: row.kind,
        target: row.target.clone(),
        interval_ms: row.interval_ms.max(0) as u64,
        timeout_ms: row.timeout_ms.max(0) as u64,
        settings: row.settings.clone(),
        poller_mode: row.poller_mode,
        poller_id: row.poller_id.as_deref().map(stored_id).transpose()?,
        poller_region: row.poller_region.clone(),
        poller_datacenter: row.poller_datacenter.clone(),
        poller_capability: row.poller_capability.clone(),
        poller_regions: row.poller_regions.clone(),
        quorum: row.quorum.map(|q| q.clamp(0, i64::from(u32::MAX)) as u32),
        failover: row.failover,
        paused: row.paused,
        notification_channel_ids: row
            .channel_ids
            .iter()
            .map(|id| stored_id(id))
            .collect::<anyhow::Result<_>>()?,
        tags: row.tags.clone(),
        parent_ids: row
            .parent_ids
            .iter()
            .map(|id| stored_id(id))
            .collect::<anyhow::Result<_>>()?,
    })
}

/// The monitor as its readers see it: header values hidden (`monitor_secrets`).
fn monitor_view(row: &Monitor) -> anyhow::Result<MonitorView> {
    let mut spec = monitor_spec(row)?;
    shared_proto::redaction::hide_monitor(&mut spec);
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
        revision: row.revision.max(0) as u64,
        status: None,
        ping_url: None,
    })
}
