//! Incidents on status pages: the operators' CRUD and timelines (`StatusPages`), and what a
//! page's visitors read of them (`shown_incidents`): the open ones and those resolved lately,
//! their affected monitors by the names the page gives them, never one it does not show.
//!
//! An incident's status is its newest update's: opening it writes its first update, a
//! `PATCH` with a message or `POST …/updates` adds one. `resolved_at` is the time of the update
//! that resolved it, cleared if a later one reopens it. Cost: a write is an incident row and
//! at most one update row, and a notice to the page's subscribers in the same transaction
//! when the change tells them anything (`subscribers`); what visitors read is the page's open and lately resolved incidents
//! (`store::status_incidents`), at most every few seconds per page. Must not: render Markdown
//! or HTML (`web::status_pages`) or write SQL.

use std::collections::{HashMap, HashSet};

use shared_proto::settings_api::Page;
use shared_proto::status_incidents::{
    IncidentPatch, IncidentSpec, IncidentStatus, IncidentUpdateSpec, IncidentUpdateView,
    IncidentView, ShownIncident, ShownUpdate, MAX_UPDATES, RESOLVED_SHOWN_DAYS,
};
use shared_proto::ValidationError;
use uuid::Uuid;

use shared_proto::status_subscribers::NoticeIncident;

use super::{subscribers, StatusPage, StatusPages};
use crate::domain::{Incident, IncidentUpdate};
use crate::service::error::{ServiceError, ServiceResult};
use crate::service::tokens::page_of;
use crate::service::{stored_id, time_of};
use crate::store::{Cursor, IncidentChange};

const DAY_MS: i64 = 86_400_000;

fn update_view(update: &IncidentUpdate) -> anyhow::Result<IncidentUpdateView> {
    Ok(IncidentUpdateView {
        id: stored_id(&update.id)?,
        status: update.status,
        message: update.message.clone(),
        created_at: time_of(update.created_at),
    })
}

fn view(row: &Incident, updates: &[IncidentUpdate]) -> anyhow::Result<IncidentView> {
    Ok(IncidentView {
        id: stored_id(&row.id)?,
        page_id: stored_id(&row.page_id)?,
        title: row.title.clone(),
        status: row.status,
        monitor_ids: row.monitor_ids.clone(),
        updates: updates
            .iter()
            .filter(|u| u.incident_id == row.id)
            .map(update_view)
            .collect::<anyhow::Result<_>>()?,
        created_at: time_of(row.created_at),
        updated_at: time_of(row.updated_at),
        resolved_at: row.resolved_at.map(time_of),
        published: row.published,
        opened_for: row.opened_for.as_deref().map(stored_id).transpose()?,
    })
}

/// How often a change is decided again from a fresh reading when others keep changing the
/// incident between its reading and its write (each try is a read and a write).
pub(super) const CHANGE_TRIES: usize = 5;

/// A change that lost `CHANGE_TRIES` races in a row.
fn changed_meanwhile() -> ServiceError {
    ServiceError::Conflict(
        "the incident was being changed by others at the same time; send the change again".into(),
    )
}

fn not_found(page_id: Uuid, id: Uuid) -> ServiceError {
    ServiceError::NotFound(format!(
        "status page {page_id} has no incident with id {id}"
    ))
}

/// When an incident that now says `status` was resolved: at `at` when this update resolves
/// it, as before while it stays resolved, never while it is open.
fn resolved_at(status: IncidentStatus, before: Option<i64>, at: i64) -> Option<i64> {
    (status == IncidentStatus::Resolved).then(|| before.unwrap_or(at))
}

impl StatusPages {
    pub async fn create_incident(
        &self,
        page_id: Uuid,
        spec: IncidentSpec,
    ) -> ServiceResult<IncidentView> {
        spec.validate()?;
        let page = self.stored(page_id).await?;
        self.check_affected(&page, &spec.monitor_ids, &[]).await?;
        self.open(page_id, spec, true, None).await
    }

    /// Writes a new incident with its first update: `published` or a draft, opened by an
    /// operator or for a monitor (`opened_for`).
    pub(super) async fn open(
        &self,
        page_id: Uuid,
        spec: IncidentSpec,
        published: bool,
        opened_for: Option<Uuid>,
    ) -> ServiceResult<IncidentView> {
        let now = self.now_ms();
        let row = Incident {
            id: Uuid::now_v7().to_string(),
            page_id: page_id.to_string(),
            title: spec.title,
            status: spec.status,
            monitor_ids: spec.monitor_ids,
            created_at: now,
            updated_at: now,
            resolved_at: resolved_at(spec.status, None, now),
            published,
            opened_for: opened_for.map(|id| id.to_string()),
        };
        let first = IncidentUpdate {
            id: Uuid::now_v7().to_string(),
            incident_id: row.id.clone(),
            status: row.status,
            message: spec.message,
            created_at: now,
        };
        let notice = match published {
            true => {
                let incident = NoticeIncident {
                    id: stored_id(&row.id)?,
                    title: row.title.clone(),
                    status: spec.status,
                    message: first.message.clone(),
                };
                let event = shared_proto::status_subscribers::NoticeEvent::IncidentCreated;
                Some(subscribers::incident_notice(page_id, event, incident, now))
            }
            false => None,
        };
        self.store
            .insert_incident(&row, &first, notice.as_ref())
            .await?;
        Ok(view(&row, &[first])?)
    }

    pub async fn list_incidents(
        &self,
        page_id: Uuid,
        cursor: &Cursor,
        limit: u32,
    ) -> ServiceResult<Page<IncidentView>> {
        self.stored(page_id).await?;
        let incidents = self
            .store
            .list_incidents(&page_id.to_string(), cursor, limit)
            .await?;
        let ids: Vec<String> = incidents.items.iter().map(|r| r.id.clone()).collect();
        let updates = self.store.incident_updates(&ids).await?;
        Ok(page_of(incidents, |row| view(row, &updates))?)
    }

    pub async fn get_incident(&self, page_id: Uuid, id: Uuid) -> ServiceResult<IncidentView> {
        let row = self.stored_incident(page_id, id).await?;
        let updates = self
            .store
            .incident_updates(std::slice::from_ref(&row.id))
            .await?;
        Ok(view(&row, &updates)?)
    }

    /// A new title or monitors, and an update when the patch has a message.
    pub async fn update_incident(
        &self,
        page_id: Uuid,
        id: Uuid,
        patch: IncidentPatch,
    ) -> ServiceResult<IncidentView> {
        patch.validate()?;
        for _ in 0..CHANGE_TRIES {
            let before = self.stored_incident(page_id, id).await?;
            let current = before.status;
            let mut row = before.clone();
            if let Some(title) = &patch.title {
                row.title = title.clone();
            }
            if let Some(published) = patch.published {
                row.published = published;
            }
            if let Some(ids) = &patch.monitor_ids {
                let page = self.stored(page_id).await?;
                self.check_affected(&page, ids, &before.monitor_ids).await?;
                row.monitor_ids = ids.clone();
            }
            let changed = self
                .change(page_id, id, &before, row, patch.update(current))
                .await?;
            if let Some(view) = changed {
                return Ok(view);
            }
        }
        Err(changed_meanwhile())
    }

    /// Adds an update: what is new, and where the incident stands now.
    pub async fn add_incident_update(
        &self,
        page_id: Uuid,
        id: Uuid,
        update: IncidentUpdateSpec,
    ) -> ServiceResult<IncidentView> {
        update.validate()?;
        for _ in 0..CHANGE_TRIES {
            let row = self.stored_incident(page_id, id).await?;
            let changed = self
                .change(page_id, id, &row.clone(), row, Some(update.clone()))
                .await?;
            if let Some(view) = changed {
                return Ok(view);
            }
        }
        Err(changed_meanwhile())
    }

    pub async fn delete_incident(&self, page_id: Uuid, id: Uuid) -> ServiceResult<()> {
        if self
            .store
            .delete_incident(&page_id.to_string(), &id.to_string())
            .await?
        {
            Ok(())
        } else {
            Err(not_found(page_id, id))
        }
    }

    /// Writes `row` (what was `before`) with `update` on its timeline (its status the
    /// incident's from then on), and the notice that tells subscribers, if it tells them
    /// anything (`subscribers::incident_event`). `None` when the incident changed since
    /// `before` was read: nothing was written, and the caller decides again from a fresh
    /// reading (else two operators publishing a draft at once would tell it twice).
    pub(super) async fn change(
        &self,
        page_id: Uuid,
        id: Uuid,
        before: &Incident,
        mut row: Incident,
        update: Option<IncidentUpdateSpec>,
    ) -> ServiceResult<Option<IncidentView>> {
        // A change that changes nothing writes nothing (and tells nothing): the others that
        // raced it are not sent round again by it.
        if update.is_none() && row == *before {
            return self.get_incident(page_id, id).await.map(Some);
        }
        let now = self.now_ms();
        // Grows with every change, even two in one millisecond: it is what a change is
        // checked against (`Store::change_incident`).
        row.updated_at = now.max(before.updated_at + 1);
        let event = subscribers::incident_event(
            before.published,
            before.status,
            row.published,
            update.as_ref().map(|u| u.status),
        );
        let notice = match event {
            Some(event) => {
                // Publishing a draft without a new update tells its latest one.
                let message = match &update {
                    Some(update) => update.message.clone(),
                    None => self
                        .store
                        .incident_updates(std::slice::from_ref(&row.id))
                        .await?
                        .first()
                        .map(|u| u.message.clone())
                        .unwrap_or_default(),
                };
                let status = update.as_ref().map_or(row.status, |u| u.status);
                let incident = NoticeIncident {
                    id,
                    title: row.title.clone(),
                    status,
                    message,
                };
                Some(subscribers::incident_notice(page_id, event, incident, now))
            }
            None => None,
        };
        let update = update.map(|update| {
            row.status = update.status;
            row.resolved_at = resolved_at(update.status, row.resolved_at, now);
            IncidentUpdate {
                id: Uuid::now_v7().to_string(),
                incident_id: row.id.clone(),
                status: row.status,
                message: update.message,
                created_at: now,
            }
        });
        match self
            .store
            .change_incident(
                &row,
                before.updated_at,
                update.as_ref(),
                MAX_UPDATES,
                notice.as_ref(),
            )
            .await?
        {
            IncidentChange::Done => self.get_incident(page_id, id).await.map(Some),
            IncidentChange::Stale => Ok(None),
            IncidentChange::Missing => Err(not_found(page_id, id)),
            IncidentChange::TimelineFull => Err(ValidationError::combination(
                "message",
                format!(
                    "this incident has {MAX_UPDATES} updates, as many as one may have; \
                     open a new incident"
                ),
            )
            .into()),
        }
    }

    async fn stored_incident(&self, page_id: Uuid, id: Uuid) -> ServiceResult<Incident> {
        self.store
            .incident(&page_id.to_string(), &id.to_string())
            .await?
            .ok_or_else(|| not_found(page_id, id))
    }

    /// The monitors a page names, by id then by a tag they carry now, in its order, each once.
    /// Cost: the tags' index per tag.
    pub(super) async fn named_monitors(&self, page: &StatusPage) -> ServiceResult<Vec<Uuid>> {
        let mut seen = HashSet::new();
        let mut named = Vec::new();
        for section in &page.sections {
            let mut tagged = Vec::new();
            for tag in &section.tags {
                for id in self.store.monitors_tagged(tag).await? {
                    tagged.push(stored_id(&id)?);
                }
            }
            tagged.sort();
            for id in section.monitor_ids.iter().copied().chain(tagged) {
                if seen.insert(id) {
                    named.push(id);
                }
            }
        }
        Ok(named)
    }

    /// The monitors a page shows now, by their names there, in its order: what an incident
    /// may affect, for the operators' page. Cost: `named_monitors` and one read of their rows.
    pub async fn page_monitors(&self, page_id: Uuid) -> ServiceResult<Vec<(Uuid, String)>> {
        let page = self.stored(page_id).await?;
        let named = self.named_monitors(&page).await?;
        let ids: Vec<String> = named.iter().map(Uuid::to_string).collect();
        let names: HashMap<String, String> = self
            .store
            .monitors_by_ids(&ids)
            .await?
            .into_iter()
            .map(|m| (m.id, m.name))
            .collect();
        let display = |id: &Uuid| {
            page.sections
                .iter()
                .flat_map(|s| s.display_names.iter())
                .find(|d| d.monitor_id == *id)
                .map(|d| d.name.clone())
        };
        Ok(named
            .iter()
            .filter_map(|id| {
                let name = names.get(&id.to_string())?;
                Some((*id, display(id).unwrap_or_else(|| name.clone())))
            })
            .collect())
    }

    /// The monitors an incident names are ones the page shows (by id or by a tag they carry
    /// now), but those it named already.
    async fn check_affected(
        &self,
        page: &StatusPage,
        ids: &[Uuid],
        named_before: &[Uuid],
    ) -> ServiceResult<()> {
        let shown: HashSet<Uuid> = self.named_monitors(page).await?.into_iter().collect();
        for (j, id) in ids.iter().enumerate() {
            if !shown.contains(id) && !named_before.contains(id) {
                return Err(ValidationError::reference(
                    format!("monitor_ids[{j}]"),
                    format!("monitor {id} is not shown on status page `{}`", page.slug),
                )
                .into());
            }
        }
        Ok(())
    }

    /// What visitors of `page` read of its incidents at `now`: the open ones, then those
    /// resolved within `RESOLVED_SHOWN_DAYS`, newest first in each; affected monitors by
    /// `names` (the page's monitors by their names there), others left out.
    pub async fn shown_incidents(
        &self,
        page: &StatusPage,
        names: &HashMap<Uuid, String>,
        now: i64,
    ) -> ServiceResult<Vec<ShownIncident>> {
        let rows = self
            .store
            .shown_incidents(&page.id.to_string(), now - RESOLVED_SHOWN_DAYS * DAY_MS)
            .await?;
        self.shown(rows, names).await
    }

    /// The incidents of `page` opened within `[from, until)`, newest first (its history).
    pub async fn incidents_opened(
        &self,
        page: &StatusPage,
        names: &HashMap<Uuid, String>,
        from: i64,
        until: i64,
    ) -> ServiceResult<Vec<ShownIncident>> {
        let mut rows = self
            .store
            .incidents_opened(&page.id.to_string(), from, until)
            .await?;
        rows.reverse();
        self.shown(rows, names).await
    }

    async fn shown(
        &self,
        mut rows: Vec<Incident>,
        names: &HashMap<Uuid, String>,
    ) -> ServiceResult<Vec<ShownIncident>> {
        // Open ones first, then by when they started, newest first.
        rows.sort_by_key(|r| (r.resolved_at.is_some(), std::cmp::Reverse(r.created_at)));
        let ids: Vec<String> = rows.iter().map(|r| r.id.clone()).collect();
        let updates = self.store.incident_updates(&ids).await?;
        let mut shown = Vec::with_capacity(rows.len());
        for row in &rows {
            let incident = view(row, &updates)?;
            shown.push(ShownIncident {
                id: incident.id,
                title: incident.title,
                status: incident.status,
                affected: incident
                    .monitor_ids
                    .iter()
                    .filter_map(|id| names.get(id).cloned())
                    .collect(),
                updates: incident
                    .updates
                    .into_iter()
                    .map(|u| ShownUpdate {
                        id: u.id,
                        status: u.status,
                        message: u.message,
                        at: u.created_at,
                    })
                    .collect(),
                started_at: incident.created_at,
                resolved_at: incident.resolved_at,
            });
        }
        Ok(shown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolution_is_the_update_that_resolved() {
        assert_eq!(resolved_at(IncidentStatus::Resolved, None, 5), Some(5));
        assert_eq!(resolved_at(IncidentStatus::Resolved, Some(3), 5), Some(3));
        assert_eq!(resolved_at(IncidentStatus::Monitoring, Some(3), 5), None);
    }
}
