//! `status_incidents` and `status_incident_updates`: incidents on status pages as operators
//! wrote them (monitors as JSON ids) and their timelines. Cost: an incident by id; a page's
//! list by `(page_id, created_at, id)`; what a page shows (the open ones and those resolved
//! since an instant) by `(page_id, resolved_at)`, never the page's whole history; a month of
//! history by `(page_id, created_at)`; updates by `(incident_id, created_at)`. Must not: decide
//! what an incident means or who reads it (`service::status_pages::incidents`).

use anyhow::Context;
use shared_proto::status_incidents::IncidentStatus;
use sqlx::any::AnyRow;
use sqlx::{Any, FromRow, Row, Transaction};

use super::readable::readable;
use super::status_subscribers::tell_subscribers;
use super::{Cursor, Paged, Store};
use crate::domain::{Incident, IncidentUpdate, PageNotice};

const COLUMNS: &str = "id, page_id, title, status, monitor_ids, created_at, updated_at, \
     resolved_at, published, opened_for";
const UPDATE_COLUMNS: &str = "id, incident_id, status, message, created_at";

/// An incident as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
struct IncidentRow {
    id: String,
    page_id: String,
    title: String,
    status: String,
    /// The monitors it affects, JSON ids.
    monitor_ids: String,
    created_at: i64,
    updated_at: i64,
    resolved_at: Option<i64>,
    published: bool,
    opened_for: Option<String>,
}

/// One update of an incident's timeline, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
struct IncidentUpdateRow {
    id: String,
    incident_id: String,
    status: String,
    message: String,
    created_at: i64,
}

/// A stored incident status; an error (with the caller's context) for one central never
/// writes.
fn status_of(text: &str) -> anyhow::Result<IncidentStatus> {
    IncidentStatus::parse(text)
        .ok_or_else(|| anyhow::anyhow!("an incident status central does not know, `{text}`"))
}

impl TryFrom<IncidentRow> for Incident {
    type Error = anyhow::Error;

    /// An error names the incident and the column that does not read.
    fn try_from(row: IncidentRow) -> anyhow::Result<Incident> {
        let id = row.id;
        let column = |name: &str| format!("incident {id}: its stored {name}");
        Ok(Incident {
            status: status_of(&row.status).with_context(|| column("status"))?,
            monitor_ids: serde_json::from_str(&row.monitor_ids)
                .with_context(|| column("monitor_ids"))?,
            page_id: row.page_id,
            title: row.title,
            created_at: row.created_at,
            updated_at: row.updated_at,
            resolved_at: row.resolved_at,
            published: row.published,
            opened_for: row.opened_for,
            id,
        })
    }
}

impl IncidentRow {
    fn of(incident: &Incident) -> anyhow::Result<IncidentRow> {
        Ok(IncidentRow {
            id: incident.id.clone(),
            page_id: incident.page_id.clone(),
            title: incident.title.clone(),
            status: incident.status.as_str().to_string(),
            monitor_ids: serde_json::to_string(&incident.monitor_ids)?,
            created_at: incident.created_at,
            updated_at: incident.updated_at,
            resolved_at: incident.resolved_at,
            published: incident.published,
            opened_for: incident.opened_for.clone(),
        })
    }
}

impl TryFrom<IncidentUpdateRow> for IncidentUpdate {
    type Error = anyhow::Error;

    fn try_from(row: IncidentUpdateRow) -> anyhow::Result<IncidentUpdate> {
        Ok(IncidentUpdate {
            status: status_of(&row.status)
                .with_context(|| format!("incident update {}: its stored status", row.id))?,
            id: row.id,
            incident_id: row.incident_id,
            message: row.message,
            created_at: row.created_at,
        })
    }
}

impl FromRow<'_, AnyRow> for IncidentRow {
    fn from_row(row: &AnyRow) -> sqlx::Result<Self> {
        Ok(Self {
            id: row.try_get("id")?,
            page_id: row.try_get("page_id")?,
            title: row.try_get("title")?,
            status: row.try_get("status")?,
            monitor_ids: row.try_get("monitor_ids")?,
            created_at: row.try_get("created_at")?,
            updated_at: row.try_get("updated_at")?,
            resolved_at: row.try_get("resolved_at")?,
            published: row.try_get::<i64, _>("published")? != 0,
            opened_for: row.try_get("opened_for")?,
        })
    }
}

impl FromRow<'_, AnyRow> for IncidentUpdateRow {
    fn from_row(row: &AnyRow) -> sqlx::Result<Self> {
        Ok(Self {
            id: row.try_get("id")?,
            incident_id: row.try_get("incident_id")?,
            status: row.try_get("status")?,
            message: row.try_get("message")?,
            created_at: row.try_get("created_at")?,
        })
    }
}

/// What became of a change to an incident.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncidentChange {
    Done,
    /// The page has no such incident (deleted meanwhile).
    Missing,
    /// Its timeline has as many updates as it may; nothing was changed.
    TimelineFull,
    /// It was changed since it was read (its `updated_at` is not the one expected); nothing
    /// was changed.
    Stale,
}

async fn add_update(tx: &mut Transaction<'_, Any>, update: &IncidentUpdate) -> sqlx::Result<()> {
    sqlx::query(&format!(
        "INSERT INTO status_incident_updates ({UPDATE_COLUMNS}) VALUES ($1, $2, $3, $4, $5)"
    ))
    .bind(&update.id)
    .bind(&update.incident_id)
    .bind(update.status.as_str())
    .bind(&update.message)
    .bind(update.created_at)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

impl Store {
    /// Adds an incident with its first update, and the notice that tells the page's
    /// subscribers of it, in one transaction.
    pub async fn insert_incident(
        &self,
        incident: &Incident,
        first: &IncidentUpdate,
        notice: Option<&PageNotice>,
    ) -> anyhow::Result<()> {
        let row = IncidentRow::of(incident)?;
        let _guard = self.write_lock().await;
        let mut tx = self.writer.begin().await?;
        sqlx::query(&format!(
            "INSERT INTO status_incidents ({COLUMNS}) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
        ))
        .bind(&row.id)
        .bind(&row.page_id)
        .bind(&row.title)
        .bind(&row.status)
        .bind(&row.monitor_ids)
        .bind(row.created_at)
        .bind(row.updated_at)
        .bind(row.resolved_at)
        .bind(i64::from(row.published))
        .bind(&row.opened_for)
        .execute(&mut *tx)
        .await?;
        add_update(&mut tx, first).await?;
        if let Some(notice) = notice {
            tell_subscribers(&mut tx, notice).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Overwrites an incident read when its `updated_at` was `read_at`, and adds `update` to
    /// its timeline, with the notice that tells the page's subscribers, in one transaction,
    /// unless the timeline has `max_updates` already or the incident changed since
    /// (`updated_at` grows with every change): what a change tells was decided from the
    /// incident as it was read, so two changes decided from one reading must not both land.
    pub async fn change_incident(
        &self,
        incident: &Incident,
        read_at: i64,
        update: Option<&IncidentUpdate>,
        max_updates: usize,
        notice: Option<&PageNotice>,
    ) -> anyhow::Result<IncidentChange> {
        let row = IncidentRow::of(incident)?;
        let _guard = self.write_lock().await;
        let mut tx = self.writer.begin().await?;
        let done = sqlx::query(
            "UPDATE status_incidents SET title = $3, status = $4, monitor_ids = $5, \
             updated_at = $6, resolved_at = $7, published = $8 \
             WHERE id = $1 AND page_id = $2 AND updated_at = $9",
        )
        .bind(&row.id)
        .bind(&row.page_id)
        .bind(&row.title)
        .bind(&row.status)
        .bind(&row.monitor_ids)
        .bind(row.updated_at)
        .bind(row.resolved_at)
        .bind(i64::from(row.published))
        .bind(read_at)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() != 1 {
            let exists: Option<(i64,)> =
                sqlx::query_as("SELECT 1 FROM status_incidents WHERE id = $1 AND page_id = $2")
                    .bind(&row.id)
                    .bind(&row.page_id)
                    .fetch_optional(&mut *tx)
                    .await?;
            return Ok(match exists {
                Some(_) => IncidentChange::Stale,
                None => IncidentChange::Missing,
            });
        }
        if let Some(update) = update {
            let (count,): (i64,) = sqlx::query_as(
                "SELECT COUNT(*) FROM status_incident_updates WHERE incident_id = $1",
            )
            .bind(&row.id)
            .fetch_one(&mut *tx)
            .await?;
            if count as usize >= max_updates {
                return Ok(IncidentChange::TimelineFull);
            }
            add_update(&mut tx, update).await?;
        }
        if let Some(notice) = notice {
            tell_subscribers(&mut tx, notice).await?;
        }
        tx.commit().await?;
        Ok(IncidentChange::Done)
    }

    /// Deletes an incident and its updates; `false` if the page had no such incident.
    pub async fn delete_incident(&self, page_id: &str, id: &str) -> anyhow::Result<bool> {
        let _guard = self.write_lock().await;
        let mut tx = self.writer.begin().await?;
        let done = sqlx::query("DELETE FROM status_incidents WHERE id = $1 AND page_id = $2")
            .bind(id)
            .bind(page_id)
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() != 1 {
            return Ok(false);
        }
        sqlx::query("DELETE FROM status_incident_updates WHERE incident_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// A page's incident; an error naming it and its column if it does not read.
    pub async fn incident(&self, page_id: &str, id: &str) -> anyhow::Result<Option<Incident>> {
        let sql = format!("SELECT {COLUMNS} FROM status_incidents WHERE id = $1 AND page_id = $2");
        let row: Option<IncidentRow> = sqlx::query_as(&sql)
            .bind(id)
            .bind(page_id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(Incident::try_from).transpose()
    }

    /// A page of a status page's incidents, oldest first (one that does not read left out,
    /// logged; in this and every read of many below).
    pub async fn list_incidents(
        &self,
        page_id: &str,
        after: &Cursor,
        limit: u32,
    ) -> anyhow::Result<Paged<Incident>> {
        let sql = super::cursor::by_creation(COLUMNS, "status_incidents", "page_id = $4 AND");
        let rows: Vec<IncidentRow> = sqlx::query_as(&sql)
            .bind(after.key)
            .bind(&after.id)
            .bind(i64::from(limit))
            .bind(page_id)
            .fetch_all(&self.pool)
            .await?;
        Ok(Paged::of("incident", rows, limit, |r| Cursor {
            key: r.created_at,
            id: r.id.clone(),
        }))
    }

    /// What a page shows: its open incidents and those resolved at `since` or later, published.
    pub async fn shown_incidents(
        &self,
        page_id: &str,
        since: i64,
    ) -> anyhow::Result<Vec<Incident>> {
        let open = format!(
            "SELECT {COLUMNS} FROM status_incidents \
             WHERE page_id = $1 AND resolved_at IS NULL AND published = 1"
        );
        let mut rows: Vec<IncidentRow> = sqlx::query_as(&open)
            .bind(page_id)
            .fetch_all(&self.pool)
            .await?;
        let lately = format!(
            "SELECT {COLUMNS} FROM status_incidents \
             WHERE page_id = $1 AND resolved_at >= $2 AND published = 1"
        );
        rows.extend(
            sqlx::query_as::<_, IncidentRow>(&lately)
                .bind(page_id)
                .bind(since)
                .fetch_all(&self.pool)
                .await?,
        );
        Ok(readable("incident", rows))
    }

    /// A page's published incidents opened within `[from, until)`, oldest first (its history by
    /// month).
    pub async fn incidents_opened(
        &self,
        page_id: &str,
        from: i64,
        until: i64,
    ) -> anyhow::Result<Vec<Incident>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM status_incidents \
             WHERE page_id = $1 AND created_at >= $2 AND created_at < $3 AND published = 1 \
             ORDER BY created_at, id"
        );
        let rows: Vec<IncidentRow> = sqlx::query_as(&sql)
            .bind(page_id)
            .bind(from)
            .bind(until)
            .fetch_all(&self.pool)
            .await?;
        Ok(readable("incident", rows))
    }

    /// The open incident a page opened itself for a monitor, if any.
    pub async fn open_incident_for(
        &self,
        page_id: &str,
        monitor_id: &str,
    ) -> anyhow::Result<Option<Incident>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM status_incidents \
             WHERE opened_for = $1 AND page_id = $2 AND resolved_at IS NULL"
        );
        let row: Option<IncidentRow> = sqlx::query_as(&sql)
            .bind(monitor_id)
            .bind(page_id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(Incident::try_from).transpose()
    }

    /// The updates of each incident, newest first.
    pub async fn incident_updates(
        &self,
        incident_ids: &[String],
    ) -> anyhow::Result<Vec<IncidentUpdate>> {
        let mut updates = Vec::new();
        for chunk in incident_ids.chunks(500) {
            let sql = format!(
                "SELECT {UPDATE_COLUMNS} FROM status_incident_updates WHERE incident_id IN ({}) \
                 ORDER BY created_at DESC, id DESC",
                super::monitors::placeholders(1, chunk.len())
            );
            let mut query = sqlx::query_as::<_, IncidentUpdateRow>(&sql);
            for id in chunk {
                query = query.bind(id);
            }
            updates.extend(query.fetch_all(&self.pool).await?);
        }
        Ok(readable("incident update", updates))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing::sqlite_store;

    fn incident(id: &str, page: &str, at: i64, resolved_at: Option<i64>) -> Incident {
        Incident {
            id: id.into(),
            page_id: page.into(),
            title: "API errors".into(),
            status: if resolved_at.is_some() {
                IncidentStatus::Resolved
            } else {
                IncidentStatus::Investigating
            },
            monitor_ids: Vec::new(),
            created_at: at,
            updated_at: at,
            resolved_at,
            published: true,
            opened_for: None,
        }
    }

    fn update(id: &str, incident: &str, at: i64) -> IncidentUpdate {
        IncidentUpdate {
            id: id.into(),
            incident_id: incident.into(),
            status: IncidentStatus::Investigating,
            message: "Looking".into(),
            created_at: at,
        }
    }

    #[tokio::test]
    async fn a_page_shows_its_open_and_lately_resolved_incidents() {
        let (store, _dir) = sqlite_store().await;
        for (id, at, resolved) in [
            ("open", 10, None),
            ("old", 1, Some(2)),
            ("lately", 5, Some(50)),
        ] {
            let row = incident(id, "p", at, resolved);
            store
                .insert_incident(&row, &update(&format!("{id}-1"), id, at), None)
                .await
                .unwrap();
        }
        store
            .insert_incident(
                &incident("elsewhere", "q", 10, None),
                &update("e-1", "elsewhere", 10),
                None,
            )
            .await
            .unwrap();
        let draft = Incident {
            published: false,
            opened_for: Some("m".into()),
            ..incident("draft", "p", 20, None)
        };
        store
            .insert_incident(&draft, &update("d-1", "draft", 20), None)
            .await
            .unwrap();
        let opened = store.open_incident_for("p", "m").await.unwrap();
        assert_eq!(opened.map(|r| r.id).as_deref(), Some("draft"));
        assert!(store.open_incident_for("q", "m").await.unwrap().is_none());
        let mut shown: Vec<String> = store
            .shown_incidents("p", 40)
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.id)
            .collect();
        shown.sort();
        assert_eq!(shown, ["lately", "open"], "a draft is not shown");
        let month: Vec<String> = store
            .incidents_opened("p", 0, 6)
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.id)
            .collect();
        assert_eq!(month, ["old", "lately"]);
        assert!(
            store.incident("q", "open").await.unwrap().is_none(),
            "another page's"
        );
    }

    #[tokio::test]
    async fn a_timeline_is_capped_and_goes_with_its_incident() {
        let (store, _dir) = sqlite_store().await;
        let row = incident("i", "p", 1, None);
        store
            .insert_incident(&row, &update("u1", "i", 1), None)
            .await
            .unwrap();
        let mut row = row;
        for (id, at) in [("u2", 2), ("u3", 3)] {
            let next = update(id, "i", at);
            let read_at = row.updated_at;
            row.updated_at = at;
            let done = store
                .change_incident(&row, read_at, Some(&next), 3, None)
                .await
                .unwrap();
            assert_eq!(done, IncidentChange::Done);
        }
        let fourth = update("u4", "i", 4);
        let full = store
            .change_incident(&row, 3, Some(&fourth), 3, None)
            .await
            .unwrap();
        assert_eq!(full, IncidentChange::TimelineFull);
        let elsewhere = Incident {
            page_id: "q".into(),
            ..row.clone()
        };
        let missing = store.change_incident(&elsewhere, 3, None, 3, None);
        assert_eq!(missing.await.unwrap(), IncidentChange::Missing);
        // Decided from a reading older than the incident: nothing written.
        let retitled = Incident {
            title: "stale".into(),
            ..row.clone()
        };
        let stale = store.change_incident(&retitled, 2, None, 3, None);
        assert_eq!(stale.await.unwrap(), IncidentChange::Stale);
        assert_ne!(
            store.incident("p", "i").await.unwrap().unwrap().title,
            "stale"
        );
        let ids: Vec<String> = store
            .incident_updates(&["i".into()])
            .await
            .unwrap()
            .into_iter()
            .map(|u| u.id)
            .collect();
        assert_eq!(ids, ["u3", "u2", "u1"], "newest first");
        // Deleting the page deletes its incidents and their updates.
        sqlx::query(
            "INSERT INTO status_pages (id, slug, title, sections, visibility, created_at, \
             updated_at, auto_incidents) VALUES ('p', 'p', 'P', '[]', 'public', 1, 1, 'off')",
        )
        .execute(&store.writer)
        .await
        .unwrap();
        assert!(store.delete_status_page("p").await.unwrap());
        assert!(store.incident("p", "i").await.unwrap().is_none());
        assert!(store
            .incident_updates(&["i".into()])
            .await
            .unwrap()
            .is_empty());
    }

    /// An incident whose status a newer central wrote is an error naming it and the column
    /// when read alone, and is left out of what the page shows (the others still shown), as
    /// is an update of it whose status does not read.
    #[tokio::test]
    async fn an_incident_that_does_not_read_is_left_out_of_the_page() {
        let (store, _dir) = sqlite_store().await;
        for id in ["a", "b"] {
            store
                .insert_incident(
                    &incident(id, "p", 10, None),
                    &update(&format!("{id}-1"), id, 10),
                    None,
                )
                .await
                .unwrap();
        }
        sqlx::query("UPDATE status_incidents SET status = 'escalated' WHERE id = 'a'")
            .execute(&store.writer)
            .await
            .unwrap();
        sqlx::query("UPDATE status_incident_updates SET status = 'escalated' WHERE id = 'b-1'")
            .execute(&store.writer)
            .await
            .unwrap();
        let said = format!("{:#}", store.incident("p", "a").await.unwrap_err());
        assert!(
            said.contains("incident a") && said.contains("status"),
            "{said}"
        );
        let shown: Vec<String> = store
            .shown_incidents("p", 0)
            .await
            .unwrap()
            .into_iter()
            .map(|i| i.id)
            .collect();
        assert_eq!(shown, ["b"]);
        let updates = store
            .incident_updates(&["a".into(), "b".into()])
            .await
            .unwrap();
        assert_eq!(
            updates.iter().map(|u| u.id.as_str()).collect::<Vec<_>>(),
            ["a-1"]
        );
    }
}
