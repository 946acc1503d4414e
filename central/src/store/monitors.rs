//! Monitors written: their specs inserted, changed and deleted with their locations, tags and
//! parents in one transaction each, and the links checked where they are written. Reading
//! monitors is `store::monitor_reads`', their row `store::monitor_rows`; storing placement decisions and the assignment log is
//! `store::assignments`'.

use sqlx::{Any, Transaction};

use crate::domain::Monitor;

use super::assignments::{bump_version, log_change, Versioned};
use super::monitor_rows::JsonColumns;
use super::{flag, Store};

/// `$first, $first+1, …` for `count` parameters.
pub(super) fn placeholders(first: usize, count: usize) -> String {
    (first..first + count)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The pollers a monitor's locations run on now.
async fn location_pollers(
    tx: &mut Transaction<'_, Any>,
    monitor_id: &str,
) -> sqlx::Result<Vec<String>> {
    let rows: Vec<(String,)> = sqlx::query_as(
        "SELECT assigned_poller_id FROM monitor_locations \
         WHERE monitor_id = $1 AND assigned_poller_id IS NOT NULL",
    )
    .bind(monitor_id)
    .fetch_all(&mut **tx)
    .await?;
    Ok(rows.into_iter().map(|(p,)| p).collect())
}

/// Makes a monitor's location rows the given regions: new ones start unplaced (the next
/// reconciliation places them), dropped ones go with their status, and their pollers hear of
/// it under `version`.
async fn sync_locations(
    tx: &mut Transaction<'_, Any>,
    monitor_id: &str,
    regions: &[String],
    versioned: &mut Versioned,
    now: i64,
) -> anyhow::Result<()> {
    let existing: Vec<(String, Option<String>)> = sqlx::query_as(
        "SELECT region, assigned_poller_id FROM monitor_locations WHERE monitor_id = $1",
    )
    .bind(monitor_id)
    .fetch_all(&mut **tx)
    .await?;
    for (region, poller) in existing.iter().filter(|(r, _)| !regions.contains(r)) {
        for table in ["monitor_locations", "location_status"] {
            sqlx::query(&format!(
                "DELETE FROM {table} WHERE monitor_id = $1 AND region = $2"
            ))
            .bind(monitor_id)
            .bind(region)
            .execute(&mut **tx)
            .await?;
        }
        if let Some(poller) = poller {
            log_change(tx, versioned, poller, monitor_id, now).await?;
        }
    }
    for region in regions
        .iter()
        .filter(|r| !existing.iter().any(|(e, _)| e == *r))
    {
        sqlx::query("INSERT INTO monitor_locations (monitor_id, region) VALUES ($1, $2)")
            .bind(monitor_id)
            .bind(region)
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

/// Makes the rows of `table` whose `own` column is `id` hold exactly `values` in `value`
/// (a monitor's tags, or its parents): the ones dropped go, new ones come.
async fn sync_set(
    tx: &mut Transaction<'_, Any>,
    (table, own, value): (&str, &str, &str),
    id: &str,
    values: &[String],
) -> sqlx::Result<()> {
    let existing: Vec<(String,)> =
        sqlx::query_as(&format!("SELECT {value} FROM {table} WHERE {own} = $1"))
            .bind(id)
            .fetch_all(&mut **tx)
            .await?;
    for (old,) in existing.iter().filter(|(v,)| !values.contains(v)) {
        sqlx::query(&format!(
            "DELETE FROM {table} WHERE {value} = $1 AND {own} = $2"
        ))
        .bind(old)
        .bind(id)
        .execute(&mut **tx)
        .await?;
    }
    for new in values
        .iter()
        .filter(|v| !existing.iter().any(|(e,)| e == *v))
    {
        sqlx::query(&format!(
            "INSERT INTO {table} ({value}, {own}) VALUES ($1, $2)"
        ))
        .bind(new)
        .bind(id)
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

/// What the store refuses in a monitor's `parent_ids` when it is written: another write in
/// between made it a cycle, or removed a parent (the service checks both before, with a
/// clearer message; this check, in the write's transaction, is what makes them hold). Writers
/// of monitors are serialised (the assignment version's row lock on PostgreSQL, the one
/// writer on SQLite), so what the transaction reads is what it commits over.
#[derive(Debug, thiserror::Error)]
pub enum LinkConflict {
    #[error(
        "`parent_ids` would make a cycle: a monitor it names depends on it (changed meanwhile)"
    )]
    Cycle,
    #[error("`parent_ids` names a monitor deleted meanwhile")]
    MissingParent,
}

/// Refuses (rolls back through `LinkConflict`) the links a write just made for `child` if
/// the monitor is among its own ancestors, or a parent does not exist. Cost: its ancestors.
async fn check_links(tx: &mut Transaction<'_, Any>, child: &str) -> anyhow::Result<()> {
    let (missing,): (i64,) = sqlx::query_as(
        "SELECT COUNT(*) FROM monitor_parents p LEFT JOIN monitors m ON m.id = p.parent_id \
         WHERE p.child_id = $1 AND m.id IS NULL",
    )
    .bind(child)
    .fetch_one(&mut **tx)
    .await?;
    if missing > 0 {
        return Err(LinkConflict::MissingParent.into());
    }
    let (cycle,): (i64,) = sqlx::query_as(&format!("{ANCESTORS} WHERE id = $2"))
        .bind(child)
        .bind(child)
        .fetch_one(&mut **tx)
        .await?;
    if cycle > 0 {
        return Err(LinkConflict::Cycle.into());
    }
    Ok(())
}

/// The ancestors of `$1` (its parents, theirs, …) as `up(id)`, counted: a walk up
/// `monitor_parents_child` that ends on a cycle too (`UNION` keeps each once).
pub(super) const ANCESTORS: &str = "WITH RECURSIVE up(id) AS ( \
     SELECT parent_id FROM monitor_parents WHERE child_id = $1 \
     UNION SELECT p.parent_id FROM monitor_parents p JOIN up ON p.child_id = up.id) \
     SELECT COUNT(*) FROM up";

/// A deleted monitor is nobody's parent any more: it leaves its children's lists, each child
/// taking the deletion's version as its new revision (its spec changed: an edit made on an
/// older copy gets `409`) and its pollers hearing of it; their status reasons change, so they
/// are marked due. Cost: its children.
async fn forget_parent(
    tx: &mut Transaction<'_, Any>,
    backend: super::Backend,
    versioned: &mut Versioned,
    id: &str,
    now: i64,
) -> anyhow::Result<()> {
    let children: Vec<(String, Option<String>)> = sqlx::query_as(
        "SELECT m.id, m.parent_ids FROM monitor_parents p JOIN monitors m ON m.id = p.child_id \
         WHERE p.parent_id = $1 ORDER BY m.id",
    )
    .bind(id)
    .fetch_all(&mut **tx)
    .await?;
    for (child, parents) in &children {
        let mut list: Vec<String> = parents
            .as_deref()
            .map(serde_json::from_str)
            .transpose()?
            .unwrap_or_default();
        list.retain(|p| p != id);
        let json = (!list.is_empty()).then(|| serde_json::Value::from(list).to_string());
        let (assigned,): (Option<String>,) = sqlx::query_as(
            "UPDATE monitors SET parent_ids = $2, revision = $3, updated_at = $4 WHERE id = $1 \
             RETURNING assigned_poller_id",
        )
        .bind(child)
        .bind(json)
        .bind(versioned.version)
        .bind(now)
        .fetch_one(&mut **tx)
        .await?;
        let mut running = location_pollers(tx, child).await?;
        running.extend(assigned);
        for poller in running {
            log_change(tx, versioned, &poller, child, now).await?;
        }
    }
    sqlx::query("DELETE FROM monitor_parents WHERE parent_id = $1 OR child_id = $1")
        .bind(id)
        .execute(&mut **tx)
        .await?;
    if !children.is_empty() {
        let ids: Vec<&String> = children.iter().map(|(c, _)| c).collect();
        super::due::mark_due(tx, backend, &serde_json::to_string(&ids)?, now).await?;
    }
    Ok(())
}

const TAGS: (&str, &str, &str) = ("monitor_tags", "monitor_id", "tag");
const PARENTS: (&str, &str, &str) = ("monitor_parents", "child_id", "parent_id");

impl Store {
    /// Inserts a monitor (unplaced) and returns the assignment version it was created at.
    ///
    /// Run again if PostgreSQL aborts it as a conflict (`conflicts`).
    pub async fn insert_monitor(&self, monitor: &Monitor) -> anyhow::Result<i64> {
        super::conflicts::retrying("creating a monitor", || self.insert_monitor_once(monitor)).await
    }

    /// One try of `insert_monitor`.
    async fn insert_monitor_once(&self, row: &Monitor) -> anyhow::Result<i64> {
        let json = JsonColumns::of(row)?;
        let _guard = self.write_lock().await;
        let mut tx = self.writer.begin().await?;
        let mut versioned = bump_version(&mut tx).await?;
        let version = versioned.version;
        sqlx::query(
            "INSERT INTO monitors (id, name, kind, target, interval_ms, timeout_ms, settings, \
             poller_mode, poller_id, poller_region, poller_datacenter, poller_capability, \
             failover, paused, created_at, updated_at, revision, placement_reason, \
             poller_regions, quorum, notification_channel_ids, tags, parent_ids, paused_at, \
             shown_status) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, \
             $18, $19, $20, $21, $22, $23, CASE WHEN $14 <> 0 THEN $15 END, \
             CASE WHEN $14 <> 0 THEN 'paused' ELSE 'pending' END)",
        )
        .bind(&row.id)
        .bind(&row.name)
        .bind(row.kind.as_str())
        .bind(&row.target)
        .bind(row.interval_ms)
        .bind(row.timeout_ms)
        .bind(&json.settings)
        .bind(row.poller_mode.as_str())
        .bind(&row.poller_id)
        .bind(&row.poller_region)
        .bind(&row.poller_datacenter)
        .bind(&row.poller_capability)
        .bind(row.failover.map(flag))
        .bind(flag(row.paused))
        .bind(row.created_at)
        .bind(row.updated_at)
        .bind(version)
        .bind(&row.placement_reason)
        .bind(&json.poller_regions)
        .bind(row.quorum)
        .bind(&json.channel_ids)
        .bind(&json.tags)
        .bind(&json.parent_ids)
        .execute(&mut *tx)
        .await?;
        sync_set(&mut tx, TAGS, &row.id, &row.tags).await?;
        sync_set(&mut tx, PARENTS, &row.id, &row.parent_ids).await?;
        check_links(&mut tx, &row.id).await?;
        sync_locations(
            &mut tx,
            &row.id,
            row.regions(),
            &mut versioned,
            row.created_at,
        )
        .await?;
        let ids = serde_json::to_string(&[&row.id])?;
        super::due::mark_due(&mut tx, self.backend(), &ids, row.created_at).await?;
        tx.commit().await?;
        Ok(version)
    }

    /// Rewrites a monitor's spec if it is still at `revision`, and returns the new assignment
    /// version (also its new revision); `None` if there is no such monitor or it changed
    /// since (compare-and-set). Its placement is left to the next reconciliation.
    ///
    /// Run again if PostgreSQL aborts it as a conflict (`conflicts`).
    pub async fn update_monitor_spec(
        &self,
        row: &Monitor,
        revision: i64,
    ) -> anyhow::Result<Option<Versioned>> {
        super::conflicts::retrying("editing a monitor", || {
            self.update_monitor_spec_once(row, revision)
        })
        .await
    }

    /// One try of `update_monitor_spec`.
    async fn update_monitor_spec_once(
        &self,
        row: &Monitor,
        revision: i64,
    ) -> anyhow::Result<Option<Versioned>> {
        let json = JsonColumns::of(row)?;
        let _guard = self.write_lock().await;
        let mut tx = self.writer.begin().await?;
        let mut versioned = bump_version(&mut tx).await?;
        let version = versioned.version;
        let updated: Option<(Option<String>,)> = sqlx::query_as(
            "UPDATE monitors SET name = $2, target = $3, interval_ms = $4, timeout_ms = $5, \
             settings = $6, poller_mode = $7, poller_id = $8, poller_region = $9, \
             poller_datacenter = $10, poller_capability = $11, failover = $12, paused = $13, \
             paused_at = CASE WHEN $13 <> 0 AND paused = 0 THEN $14 ELSE paused_at END, \
             resumed_at = CASE WHEN $13 = 0 AND paused <> 0 THEN $14 ELSE resumed_at END, \
             updated_at = $14, revision = $15, poller_regions = $16, quorum = $17, \
             notification_channel_ids = $18, tags = $20, parent_ids = $21 \
             WHERE id = $1 AND revision = $19 RETURNING assigned_poller_id",
        )
        .bind(&row.id)
        .bind(&row.name)
        .bind(&row.target)
        .bind(row.interval_ms)
        .bind(row.timeout_ms)
        .bind(&json.settings)
        .bind(row.poller_mode.as_str())
        .bind(&row.poller_id)
        .bind(&row.poller_region)
        .bind(&row.poller_datacenter)
        .bind(&row.poller_capability)
        .bind(row.failover.map(flag))
        .bind(flag(row.paused))
        .bind(row.updated_at)
        .bind(version)
        .bind(&json.poller_regions)
        .bind(row.quorum)
        .bind(&json.channel_ids)
        .bind(revision)
        .bind(&json.tags)
        .bind(&json.parent_ids)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((assigned,)) = updated else {
            return Ok(None);
        };
        sync_set(&mut tx, TAGS, &row.id, &row.tags).await?;
        sync_set(&mut tx, PARENTS, &row.id, &row.parent_ids).await?;
        check_links(&mut tx, &row.id).await?;
        // Every poller running it (its one placement, or each location) gets the new spec.
        let mut running: Vec<String> = location_pollers(&mut tx, &row.id).await?;
        running.extend(assigned);
        for poller in running {
            log_change(&mut tx, &mut versioned, &poller, &row.id, row.updated_at).await?;
        }
        sync_locations(
            &mut tx,
            &row.id,
            row.regions(),
            &mut versioned,
            row.updated_at,
        )
        .await?;
        let ids = serde_json::to_string(&[&row.id])?;
        super::due::mark_due(&mut tx, self.backend(), &ids, row.updated_at).await?;
        tx.commit().await?;
        Ok(Some(versioned))
    }

    /// Deletes a monitor with its status and history; returns the new assignment version,
    /// `None` if there was no such monitor.
    ///
    /// Run again if PostgreSQL aborts it as a conflict (`conflicts`).
    pub async fn delete_monitor(&self, id: &str, now: i64) -> anyhow::Result<Option<Versioned>> {
        super::conflicts::retrying("deleting a monitor", || self.delete_monitor_once(id, now)).await
    }

    /// One try of `delete_monitor`.
    async fn delete_monitor_once(&self, id: &str, now: i64) -> anyhow::Result<Option<Versioned>> {
        let _guard = self.write_lock().await;
        let mut tx = self.writer.begin().await?;
        // The version first, as every writer of monitors takes it: taken after the monitor's
        // row, a delete and an edit of the same monitor could each wait on the other (on
        // PostgreSQL). Nothing to delete rolls it back.
        let mut versioned = bump_version(&mut tx).await?;
        let deleted: Option<(Option<String>,)> =
            sqlx::query_as("DELETE FROM monitors WHERE id = $1 RETURNING assigned_poller_id")
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
        let Some((assigned,)) = deleted else {
            return Ok(None);
        };
        if let Some(poller) = assigned {
            log_change(&mut tx, &mut versioned, &poller, id, now).await?;
        }
        // Its rows in the order ingest and alerting take them (`conflicts`): its status before
        // its locations' (`sync_locations`), its history before its due row, and its children
        // after all of its own.
        sqlx::query("DELETE FROM monitor_status WHERE monitor_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        sync_locations(&mut tx, id, &[], &mut versioned, now).await?;
        // Its results: on SQLite found through `result_index` and the head (`results` has no
        // index by monitor there), on PostgreSQL through `results_monitor_ts` below.
        if self.backend().keeps_results_head() {
            sqlx::query(
                "DELETE FROM results WHERE rowid IN (SELECT value FROM json_each($2)) \
                 AND monitor_id = $1",
            )
            .bind(id)
            .bind(self.head_rowids(id))
            .execute(&mut *tx)
            .await?;
            for sql in [
                "DELETE FROM results WHERE id IN (SELECT id FROM result_index WHERE monitor_id = $1)",
                "DELETE FROM result_index WHERE monitor_id = $1",
            ] {
                sqlx::query(sql).bind(id).execute(&mut *tx).await?;
            }
        }
        let results = (!self.backend().keeps_results_head()).then_some("results");
        let tables = [
            "alert_state",
            "monitor_tags",
            "heartbeats",
            "heartbeat_pings",
        ]
        .into_iter()
        .chain(results)
        .chain(["rollups"])
        .chain(super::dependencies::MONITOR_TABLES)
        .chain(["alert_due"]);
        for table in tables {
            sqlx::query(&format!("DELETE FROM {table} WHERE monitor_id = $1"))
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        forget_parent(&mut tx, self.backend(), &mut versioned, id, now).await?;
        tx.commit().await?;
        self.head.forget(id);
        Ok(Some(versioned))
    }
}
