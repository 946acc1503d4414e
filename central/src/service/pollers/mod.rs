//! Pollers: enrolment and credentials (`registration`), what they report (`heartbeat`), what
//! one may cost (`limits`), their derived liveness (`liveness`), and here what operators do
//! with them (list, read, edit, delete, their events and status changes).

mod heartbeat;
mod limits;
mod liveness;
mod registration;

pub use limits::PollerLimits;

use shared_proto::poller_api::EngineEvent;
use shared_proto::settings_api::{Page, PollerPatch, PollerStatus, PollerStatusChange, PollerView};
use uuid::Uuid;

use super::stored_id;
use super::tokens::{page, page_of};
use super::{time_of, App};
use crate::domain::Poller;
use crate::service::error::{ServiceError, ServiceResult};
use crate::store::{Cursor, Reach};

/// `GET /api/v1/pollers` filters.
#[derive(Debug, Default, serde::Deserialize)]
pub struct PollerFilter {
    pub region: Option<String>,
    pub datacenter: Option<String>,
    pub status: Option<PollerStatus>,
}

impl App {
    /// Operator changes: alias, placement labels, enabled. The poller is queued for placement,
    /// which the lease holder runs within moments.
    pub async fn update_poller(&self, id: Uuid, patch: PollerPatch) -> ServiceResult<PollerView> {
        patch.validate()?;
        let mut row = self
            .store
            .poller(&id.to_string())
            .await?
            .ok_or_else(|| ServiceError::NotFound(format!("no poller with id {id}")))?;
        let PollerPatch {
            alias,
            region,
            datacenter,
            enabled,
        } = patch;
        if let Some(alias) = alias {
            row.alias = alias;
        }
        if let Some(region) = region {
            row.region = region;
        }
        if let Some(datacenter) = datacenter {
            row.datacenter = datacenter;
        }
        if let Some(enabled) = enabled {
            row.enabled = enabled;
        }
        self.store.update_poller(&row).await?;
        self.queue_placement(std::slice::from_ref(&row.id), Reach::Could)
            .await?;
        self.get_poller(id).await
    }

    /// Deletes a poller: its tokens stop working on its next call, its monitors fail over.
    pub async fn delete_poller(&self, id: Uuid) -> ServiceResult<()> {
        let now = self.now_ms();
        if !self.store.delete_poller(&id.to_string(), now).await? {
            return Err(ServiceError::NotFound(format!("no poller with id {id}")));
        }
        self.store
            .revoke_poller_refresh_tokens(&id.to_string(), now)
            .await?;
        tracing::info!(poller_id = %id, "poller deleted and its tokens revoked");
        self.queue_placement(&[id.to_string()], Reach::Own).await
    }

    pub async fn list_pollers(
        &self,
        filter: &PollerFilter,
        after: &Cursor,
        limit: u32,
    ) -> ServiceResult<Page<PollerView>> {
        let rows = self
            .store
            .list_pollers(
                filter.region.as_deref(),
                filter.datacenter.as_deref(),
                after,
                limit,
            )
            .await?;
        // Of this page's pollers only: the cost follows the monitors placed on them.
        let ids: Vec<String> = rows.items.iter().map(|r| r.id.clone()).collect();
        let counts: std::collections::HashMap<String, i64> = self
            .store
            .assigned_counts(&ids)
            .await?
            .into_iter()
            .collect();
        let now = self.now_ms();
        let mut listed = page_of(rows, |r| {
            self.poller_view(r, counts.get(&r.id).copied().unwrap_or(0), now)
        })?;
        // Status is derived, so it filters after the page is read: a page may come back short,
        // and its cursor still leads on.
        if let Some(status) = filter.status {
            listed.items.retain(|p| p.status == status);
        }
        Ok(listed)
    }

    pub async fn get_poller(&self, id: Uuid) -> ServiceResult<PollerView> {
        let row = self
            .store
            .poller(&id.to_string())
            .await?
            .ok_or_else(|| ServiceError::NotFound(format!("no poller with id {id}")))?;
        let count = self
            .store
            .assigned_counts(std::slice::from_ref(&row.id))
            .await?
            .first()
            .map_or(0, |(_, n)| *n);
        Ok(self.poller_view(&row, count, self.now_ms())?)
    }

    fn poller_view(&self, row: &Poller, assigned: i64, now: i64) -> anyhow::Result<PollerView> {
        Ok(PollerView {
            id: stored_id(&row.id)?,
            name: row.name.clone(),
            alias: row.alias.clone(),
            region: row.region.clone(),
            datacenter: row.datacenter.clone(),
            capabilities: row.capabilities.clone(),
            version: row.version.clone(),
            enabled: row.enabled,
            status: self.poller_status(row, now),
            status_since: row.status_since.map(time_of),
            last_error: row.last_error.clone(),
            last_error_at: row.last_error_at.map(time_of),
            created_at: time_of(row.created_at),
            last_heartbeat_at: row.last_heartbeat_at.map(time_of),
            last_upload_at: row.last_upload_at.map(time_of),
            queue_depth: row.queue_depth.max(0) as u64,
            oldest_queued_at: row.oldest_queued_at.map(time_of),
            dropped_results: row.dropped_results.max(0) as u64,
            held_results: row.held_results.max(0) as u64,
            assignment_version: row.assignment_version,
            assigned_monitors: assigned.max(0) as u64,
            scheduler: row.scheduler_health.clone(),
        })
    }

    /// The engine events a poller reported, oldest first.
    pub async fn poller_events(
        &self,
        id: Uuid,
        after: &Cursor,
        limit: u32,
    ) -> ServiceResult<Page<EngineEvent>> {
        self.get_poller(id).await?;
        let events = self
            .store
            .list_engine_events(&id.to_string(), after, limit)
            .await?;
        Ok(page_of(events, |event| Ok(event.clone()))?)
    }

    /// A poller's recorded status changes, oldest first.
    pub async fn poller_status_changes(
        &self,
        id: Uuid,
        after: &Cursor,
        limit: u32,
    ) -> ServiceResult<Page<PollerStatusChange>> {
        self.get_poller(id).await?;
        let rows = self
            .store
            .list_poller_status_changes(&id.to_string(), after, limit)
            .await?;
        Ok(page(
            rows,
            limit,
            |(row_id, _, at)| Cursor {
                key: *at,
                id: row_id.clone(),
            },
            |(_, status, at)| {
                Ok(PollerStatusChange {
                    status: PollerStatus::parse(status)
                        .ok_or_else(|| anyhow::anyhow!("stored poller status `{status}`"))?,
                    at: time_of(*at),
                })
            },
        )?)
    }
}
