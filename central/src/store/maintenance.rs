//! `maintenance_windows`: planned maintenance as operators wrote it. A write marks due
//! (`due::mark_due`), in its own transaction, every monitor its scope covers before and after
//! it, so that alerting looks at them and shows or ends `maintenance` at once; later
//! boundaries of a window reach each monitor through its look's next instant.
//!
//! Cost: status reads only the windows not over yet (`until_at`), however many monitors
//! there are; a write resolves its scope through the indexes on monitors' ids, pollers,
//! group regions, locations and tags (the monitors it covers). Must not: decide when a window is
//! under way or which monitor it covers (`service::maintenance`).

use sqlx::any::AnyRow;
use sqlx::{Any, FromRow, Row, Transaction};

use super::dialect::id_list;
use super::statements::Statements;
use super::{Backend, Cursor, Store};

const COLUMNS: &str = "id, name, starts_at, ends_at, rule, time_zone, duration_ms, until_at, \
     monitor_ids, poller_ids, regions, notify, created_at, updated_at, tags, stop_checks";

/// A window as stored; the lists are JSON arrays.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct WindowRow {
    pub id: String,
    pub name: String,
    pub starts_at: i64,
    pub ends_at: Option<i64>,
    pub rule: Option<String>,
    pub time_zone: Option<String>,
    pub duration_ms: Option<i64>,
    /// When its last occurrence ends; `None` while it recurs without end.
    pub until_at: Option<i64>,
    pub monitor_ids: String,
    pub poller_ids: String,
    pub regions: String,
    /// JSON array of tags.
    pub tags: String,
    pub notify: String,
    /// Whether the monitors it names by id or tag go unchecked while it is under way.
    #[serde(deserialize_with = "super::packed::flag")]
    pub stop_checks: bool,
    pub created_at: i64,
    pub updated_at: i64,
}

impl FromRow<'_, AnyRow> for WindowRow {
    fn from_row(row: &AnyRow) -> sqlx::Result<Self> {
        Ok(Self {
            id: row.try_get("id")?,
            name: row.try_get("name")?,
            starts_at: row.try_get("starts_at")?,
            ends_at: row.try_get("ends_at")?,
            rule: row.try_get("rule")?,
            time_zone: row.try_get("time_zone")?,
            duration_ms: row.try_get("duration_ms")?,
            until_at: row.try_get("until_at")?,
            monitor_ids: row.try_get("monitor_ids")?,
            poller_ids: row.try_get("poller_ids")?,
            regions: row.try_get("regions")?,
            tags: row.try_get("tags")?,
            notify: row.try_get("notify")?,
            stop_checks: row.try_get::<i64, _>("stop_checks")? != 0,
            created_at: row.try_get("created_at")?,
            updated_at: row.try_get("updated_at")?,
        })
    }
}

/// Marks due now every existing monitor the windows' scopes cover (a window, or a window
/// before and after an edit), in one pass in id order, as every marker takes them: named,
/// placed on one of its pollers (itself or by a location), running from one of its regions
/// (its group's region, its poller's, or a location's), or carrying one of its tags. Through
/// indexes: the monitors covered.
async fn mark_covered(
    tx: &mut Transaction<'_, Any>,
    backend: Backend,
    rows: &[&WindowRow],
    now: i64,
) -> anyhow::Result<()> {
    let mut ids: Vec<String> = Vec::new();
    for row in rows {
        ids.extend(covered(tx, backend, row).await?);
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
    row: &WindowRow,
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
        row: &WindowRow,
        replaces: Option<&WindowRow>,
        now: i64,
    ) -> anyhow::Result<bool> {
        super::conflicts::retrying("saving a maintenance window", || {
            self.save_window_once(row, replaces, now)
        })
        .await
    }

    /// One try of `save_window`.
    async fn save_window_once(
        &self,
        row: &WindowRow,
        replaces: Option<&WindowRow>,
        now: i64,
    ) -> anyhow::Result<bool> {
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
        let done = sqlx::query(&sql)
            .bind(&row.id)
            .bind(&row.name)
            .bind(row.starts_at)
            .bind(row.ends_at)
            .bind(&row.rule)
            .bind(&row.time_zone)
            .bind(row.duration_ms)
            .bind(row.until_at)
            .bind(&row.monitor_ids)
            .bind(&row.poller_ids)
            .bind(&row.regions)
            .bind(&row.notify)
            .bind(row.created_at)
            .bind(row.updated_at)
            .bind(&row.tags)
            .bind(i64::from(row.stop_checks))
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() != 1 {
            return Ok(false);
        }
        let scopes: Vec<&WindowRow> = replaces.into_iter().chain([row]).collect();
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
        mark_covered(&mut tx, self.backend(), &[&row], now).await?;
        tx.commit().await?;
        Ok(true)
    }

    pub async fn window(&self, id: &str) -> anyhow::Result<Option<WindowRow>> {
        let sql = format!("SELECT {COLUMNS} FROM maintenance_windows WHERE id = $1");
        Ok(sqlx::query_as(&sql)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?)
    }

    pub async fn list_windows(&self, after: &Cursor, limit: u32) -> anyhow::Result<Vec<WindowRow>> {
        self.page_by_creation(COLUMNS, "maintenance_windows", after, limit)
            .await
    }

    /// The windows not over by `at` (through `until_at`): those that can still cover a
    /// monitor at `at` or later.
    pub async fn windows_not_over(&self, at: i64) -> anyhow::Result<Vec<WindowRow>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM maintenance_windows WHERE until_at IS NULL OR until_at > $1"
        );
        Ok(sqlx::query_as(&sql).bind(at).fetch_all(&self.pool).await?)
    }
}

/// The windows not over by `at`, read in ingest's transaction (`intake`), packed: one value,
/// whichever the backend (`packed`).
pub(super) async fn windows_not_over_in(
    tx: &mut impl Statements,
    backend: Backend,
    at: i64,
) -> anyhow::Result<Vec<WindowRow>> {
    let sql = super::packed::packed(
        backend,
        &super::packed::columns_of(COLUMNS),
        "FROM maintenance_windows WHERE until_at IS NULL OR until_at > $1",
        "id",
    );
    super::packed::unpack(&tx.read_text(&sql, &[at.into()]).await?)
}
