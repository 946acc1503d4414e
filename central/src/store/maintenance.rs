//! `maintenance_windows`: planned maintenance as operators wrote it. A write marks due
//! (`due::mark_due`), in its own transaction, every monitor its scope covers before and after
//! it, so that alerting looks at them and shows or ends `maintenance` at once; later
//! boundaries of a window reach each monitor through its look's next instant.
//!
//! Cost: status reads only the windows not over yet (`until_at`), however many monitors
//! there are; a write resolves its scope through the indexes on monitors' ids, pollers,
//! group regions, locations and tags (the monitors it covers). Must not: decide when a window is
//! under way or which monitor it covers (`service::maintenance`).

use sqlx::{Any, Transaction};

use crate::domain::MaintenanceWindow;

use super::dialect::id_list;
use super::readable::readable;
use super::statements::Statements;
use super::window_rows::{WindowColumns, WindowRow, COLUMNS};
use super::{Backend, Cursor, Paged, Store};

/// Marks due now every existing monitor the windows' scopes cover (a window, or a window
/// before and after an edit), in one pass in id order, as every marker takes them: named,
/// placed on one of its pollers (itself or by a location), running from one of its regions
/// (its group's region, its poller's, or a location's), or carrying one of its tags. Through
/// indexes: the monitors covered.
async fn mark_covered(
    tx: &mut Transaction<'_, Any>,
    backend: Backend,
    windows: &[&MaintenanceWindow],
    now: i64,
) -> anyhow::Result<()> {
    let columns = windows
        .iter()
        .map(|w| WindowColumns::of(w))
        .collect::<anyhow::Result<Vec<_>>>()?;
    mark_covered_by(tx, backend, &columns.iter().collect::<Vec<_>>(), now).await
}

/// `mark_covered` for windows' scopes as stored.
async fn mark_covered_by(
    tx: &mut Transaction<'_, Any>,
    backend: Backend,
    scopes: &[&WindowColumns],
    now: i64,
) -> anyhow::Result<()> {
    let mut ids: Vec<String> = Vec::new();
    for scope in scopes {
        ids.extend(covered(tx, backend, scope).await?);
    }
    if ids.is_empty() {
        return Ok(());
    }
    ids.sort();
    ids.dedup();
    let ids = serde_json::to_string(&ids)?;
    super::due::mark_due(tx, backend, &ids, now).await
}

/// The existing monitors a window's scope covers (see `mark_covered`).
async fn covered(
    tx: &mut Transaction<'_, Any>,
    backend: Backend,
    row: &WindowColumns,
) -> sqlx::Result<Vec<String>> {
    let (ids, pollers, regions, tags) = (
        id_list(backend, "$1"),
        id_list(backend, "$2"),
        id_list(backend, "$3"),
        id_list(backend, "$4"),
    );
    let sql = format!(
        "SELECT id FROM monitors WHERE id IN ({ids}) \
         UNION SELECT id FROM monitors WHERE assigned_poller_id IN ({pollers}) \
         UNION SELECT monitor_id FROM monitor_locations \
           WHERE assigned_poller_id IN ({pollers}) \
         UNION SELECT monitor_id FROM monitor_locations WHERE region IN ({regions}) \
         UNION SELECT id FROM monitors WHERE poller_mode = 'grouped' \
           AND poller_region IN ({regions}) \
         UNION SELECT id FROM monitors WHERE assigned_poller_id IN \
           (SELECT id FROM pollers WHERE region IN ({regions})) \
         UNION SELECT monitor_id FROM monitor_tags WHERE tag IN ({tags})"
    );
    let covered: Vec<(String,)> = sqlx::query_as(&sql)
        .bind(&row.monitor_ids)
        .bind(&row.poller_ids)
        .bind(&row.regions)
        .bind(&row.tags)
        .fetch_all(&mut **tx)
        .await?;
    Ok(covered.into_iter().map(|(id,)| id).collect())
}

impl Store {
    /// Stores a new window, or replaces one (`replaces`: the row as read before), marking due
    /// what both cover. `false` if the window to replace is gone.
    ///
    /// Run again if PostgreSQL aborts it as a conflict (`conflicts`).
    pub async fn save_window(
        &self,
        window: &MaintenanceWindow,
        replaces: Option<&MaintenanceWindow>,
        now: i64,
    ) -> anyhow::Result<bool> {
        super::conflicts::retrying("saving a maintenance window", || {
            self.save_window_once(window, replaces, now)
        })
        .await
    }

    /// One try of `save_window`.
    async fn save_window_once(
        &self,
        window: &MaintenanceWindow,
        replaces: Option<&MaintenanceWindow>,
        now: i64,
    ) -> anyhow::Result<bool> {
        let row = WindowColumns::of(window)?;
        let _guard = self.write_lock().await;
        let mut tx = self.writer.begin().await?;
        let sql = match replaces {
            None => format!(
                "INSERT INTO maintenance_windows ({COLUMNS}) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)"
            ),
            Some(_) => "UPDATE maintenance_windows SET name = $2, starts_at = $3, ends_at = $4, \
                 rule = $5, time_zone = $6, duration_ms = $7, until_at = $8, monitor_ids = $9, \
                 poller_ids = $10, regions = $11, notify = $12, created_at = $13, \
                 updated_at = $14, tags = $15, stop_checks = $16 WHERE id = $1"
                .to_string(),
        };
        let recurrence = window.recurrence.as_ref();
        let done = sqlx::query(&sql)
            .bind(&window.id)
            .bind(&window.name)
            .bind(window.starts_at)
            .bind(window.ends_at)
            .bind(recurrence.map(|r| &r.rule))
            .bind(recurrence.map(|r| &r.time_zone))
            .bind(recurrence.map(|r| r.duration_ms.min(i64::MAX as u64) as i64))
            .bind(window.until_at)
            .bind(&row.monitor_ids)
            .bind(&row.poller_ids)
            .bind(&row.regions)
            .bind(row.notify)
            .bind(window.created_at)
            .bind(window.updated_at)
            .bind(&row.tags)
            .bind(i64::from(window.stop_checks))
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() != 1 {
            return Ok(false);
        }
        let scopes: Vec<&MaintenanceWindow> = replaces.into_iter().chain([window]).collect();
        mark_covered(&mut tx, self.backend(), &scopes, now).await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Deletes a window, marking due what it covered. `false` if unknown.
    ///
    /// Run again if PostgreSQL aborts it as a conflict (`conflicts`).
    pub async fn delete_window(&self, id: &str, now: i64) -> anyhow::Result<bool> {
        super::conflicts::retrying("deleting a maintenance window", || {
            self.delete_window_once(id, now)
        })
        .await
    }

    /// One try of `delete_window`.
    async fn delete_window_once(&self, id: &str, now: i64) -> anyhow::Result<bool> {
        let _guard = self.write_lock().await;
        let mut tx = self.writer.begin().await?;
        let sql = format!("SELECT {COLUMNS} FROM maintenance_windows WHERE id = $1");
        let Some(row): Option<WindowRow> = sqlx::query_as(&sql)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?
        else {
            return Ok(false);
        };
        sqlx::query("DELETE FROM maintenance_windows WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        // What it covered is marked due, from its columns as stored (whether they read or
        // not: a scope this central cannot read covers nothing it can name).
        let columns = WindowColumns::of_row(row);
        mark_covered_by(&mut tx, self.backend(), &[&columns], now).await?;
        tx.commit().await?;
        Ok(true)
    }

    pub async fn window(&self, id: &str) -> anyhow::Result<Option<MaintenanceWindow>> {
        let sql = format!("SELECT {COLUMNS} FROM maintenance_windows WHERE id = $1");
        let row: Option<WindowRow> = sqlx::query_as(&sql)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(MaintenanceWindow::try_from).transpose()
    }

    pub async fn list_windows(
        &self,
        after: &Cursor,
        limit: u32,
    ) -> anyhow::Result<Paged<MaintenanceWindow>> {
        let rows: Vec<WindowRow> = self
            .page_by_creation(COLUMNS, "maintenance_windows", after, limit)
            .await?;
        Ok(Paged::of("maintenance window", rows, limit, |r| Cursor {
            key: r.created_at,
            id: r.id.clone(),
        }))
    }

    /// The windows not over by `at` (through `until_at`): those that can still cover a
    /// monitor at `at` or later.
    pub async fn windows_not_over(&self, at: i64) -> anyhow::Result<Vec<MaintenanceWindow>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM maintenance_windows WHERE until_at IS NULL OR until_at > $1"
        );
        let rows: Vec<WindowRow> = sqlx::query_as(&sql).bind(at).fetch_all(&self.pool).await?;
        Ok(readable("maintenance window", rows))
    }
}

/// The windows not over by `at`, read in ingest's transaction (`intake`), packed: one value,
/// whichever the backend (`packed`).
pub(super) async fn windows_not_over_in(
    tx: &mut impl Statements,
    backend: Backend,
    at: i64,
) -> anyhow::Result<Vec<MaintenanceWindow>> {
    let sql = super::packed::packed(
        backend,
        &super::packed::columns_of(COLUMNS),
        "FROM maintenance_windows WHERE until_at IS NULL OR until_at > $1",
        "id",
    );
    let rows: Vec<WindowRow> = super::packed::unpack(&tx.read_text(&sql, &[at.into()]).await?)?;
    Ok(readable("maintenance window", rows))
}
