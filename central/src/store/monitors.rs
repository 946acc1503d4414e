//! Monitors: their specs written and read (with their locations, tags and parents), their
//! owners for ingest and their newest status. Storing placement decisions and the assignment
//! log is `store::assignments`'.

use sqlx::any::AnyRow;
use sqlx::{Any, FromRow, Row, Transaction};

use super::assignments::{bump_version, log_change, Versioned};
use super::{flag, Backend, Cursor, Store};

#[derive(Debug, Clone, serde::Deserialize)]
pub struct MonitorRow {
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

impl MonitorRow {
    /// The channels the monitor lists (beside the default channels).
    pub fn channel_ids(&self) -> anyhow::Result<Vec<String>> {
        match &self.notification_channel_ids {
            Some(json) => Ok(serde_json::from_str(json)?),
            None => Ok(Vec::new()),
        }
    }

    /// The operator's tags.
    pub fn tags(&self) -> anyhow::Result<Vec<String>> {
        match &self.tags {
            Some(json) => Ok(serde_json::from_str(json)?),
            None => Ok(Vec::new()),
        }
    }

    /// The monitors it depends on.
    pub fn parents(&self) -> anyhow::Result<Vec<String>> {
        match &self.parent_ids {
            Some(json) => Ok(serde_json::from_str(json)?),
            None => Ok(Vec::new()),
        }
    }

    /// The regions of a multi-location monitor; none for the other modes.
    pub fn regions(&self) -> anyhow::Result<Vec<String>> {
        match &self.poller_regions {
            Some(json) => Ok(serde_json::from_str(json)?),
            None => Ok(Vec::new()),
        }
    }
}

/// What a page of the monitor list keeps (`Store::list_monitors`); `None` keeps all.
#[derive(Debug, Clone, Copy, Default)]
pub struct ListFilter<'a> {
    /// The status alerting's last look showed.
    pub shown: Option<&'a str>,
    /// Running in this region (placed on a poller of it, meant for it, or a location there).
    pub region: Option<&'a str>,
    /// Carrying this tag.
    pub tag: Option<&'a str>,
}

/// The newest result of a monitor.
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct StatusRow {
    /// The newest verdict (`up`/`down`), or `rate_limited` while there is none.
    pub status: String,
    /// The confirmed verdict (`up`/`down`), `None` while none is confirmed.
    pub confirmed: Option<String>,
    /// How many results equal to `status` end the sequence of verdicts.
    pub run_length: i64,
    pub poller_id: String,
    pub last_result_at: i64,
    /// The newest result's own status (`up`, `down` or `rate_limited`), which stands for the
    /// time after it (`service::uptime`); `status` is the newest verdict.
    pub newest_status: String,
    pub latency_ms: Option<i64>,
    pub message: String,
    pub next_due_at: Option<i64>,
}

pub(super) const MONITOR_COLUMNS: &str =
    "id, name, kind, target, interval_ms, timeout_ms, settings, \
     poller_mode, poller_id, poller_region, poller_datacenter, poller_capability, \
     poller_regions, quorum, notification_channel_ids, tags, parent_ids, failover, \
     paused, paused_at, resumed_at, created_at, updated_at, revision, assigned_poller_id, \
     previous_poller_id, assigned_at, placement_reason, shown_status";

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
const ANCESTORS: &str = "WITH RECURSIVE up(id) AS ( \
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
    pub async fn insert_monitor(&self, row: &MonitorRow) -> anyhow::Result<i64> {
        super::conflicts::retrying("creating a monitor", || self.insert_monitor_once(row)).await
    }

    /// One try of `insert_monitor`.
    async fn insert_monitor_once(&self, row: &MonitorRow) -> anyhow::Result<i64> {
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
        .bind(&row.kind)
        .bind(&row.target)
        .bind(row.interval_ms)
        .bind(row.timeout_ms)
        .bind(&row.settings)
        .bind(&row.poller_mode)
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
        .bind(&row.poller_regions)
        .bind(row.quorum)
        .bind(&row.notification_channel_ids)
        .bind(&row.tags)
        .bind(&row.parent_ids)
        .execute(&mut *tx)
        .await?;
        sync_set(&mut tx, TAGS, &row.id, &row.tags()?).await?;
        sync_set(&mut tx, PARENTS, &row.id, &row.parents()?).await?;
        check_links(&mut tx, &row.id).await?;
        sync_locations(
            &mut tx,
            &row.id,
            &row.regions()?,
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
        row: &MonitorRow,
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
        row: &MonitorRow,
        revision: i64,
    ) -> anyhow::Result<Option<Versioned>> {
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
        .bind(&row.settings)
        .bind(&row.poller_mode)
        .bind(&row.poller_id)
        .bind(&row.poller_region)
        .bind(&row.poller_datacenter)
        .bind(&row.poller_capability)
        .bind(row.failover.map(flag))
        .bind(flag(row.paused))
        .bind(row.updated_at)
        .bind(version)
        .bind(&row.poller_regions)
        .bind(row.quorum)
        .bind(&row.notification_channel_ids)
        .bind(revision)
        .bind(&row.tags)
        .bind(&row.parent_ids)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((assigned,)) = updated else {
            return Ok(None);
        };
        sync_set(&mut tx, TAGS, &row.id, &row.tags()?).await?;
        sync_set(&mut tx, PARENTS, &row.id, &row.parents()?).await?;
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
            &row.regions()?,
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
        if self.backend() == Backend::Sqlite {
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
        let results = match self.backend() {
            Backend::Sqlite => None,
            Backend::Postgres => Some("results"),
        };
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

    pub async fn monitor(&self, id: &str) -> anyhow::Result<Option<MonitorRow>> {
        let sql = format!("SELECT {MONITOR_COLUMNS} FROM monitors WHERE id = $1");
        Ok(sqlx::query_as(&sql)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?)
    }

    /// A page of monitors in list order (`created_at`, then id) after `after` that pass
    /// `filter`. The database walks the list's index and checks each filter per row: the
    /// status against `shown_status` (index `monitors_shown_status`), the region against the
    /// sets of its pollers and locations (read once per statement, the latter through
    /// `monitor_locations_region`), the tag against the set of its monitors (the primary key
    /// of `monitor_tags`); nothing is derived per row.
    pub async fn list_monitors(
        &self,
        filter: &ListFilter<'_>,
        after: &Cursor,
        limit: u32,
    ) -> anyhow::Result<Vec<MonitorRow>> {
        let mut filters = String::new();
        let mut next = 4;
        if filter.shown.is_some() {
            filters.push_str(&format!(" AND shown_status = ${next}"));
            next += 1;
        }
        if filter.region.is_some() {
            filters.push_str(&format!(
                " AND (poller_region = ${next} \
                 OR assigned_poller_id IN (SELECT id FROM pollers WHERE region = ${next}) \
                 OR id IN (SELECT monitor_id FROM monitor_locations WHERE region = ${next}))"
            ));
            next += 1;
        }
        if filter.tag.is_some() {
            filters.push_str(&format!(
                " AND id IN (SELECT monitor_id FROM monitor_tags WHERE tag = ${next})"
            ));
        }
        let sql = format!(
            "SELECT {MONITOR_COLUMNS} FROM monitors \
             WHERE (created_at > $1 OR (created_at = $1 AND id > $2)){filters} \
             ORDER BY created_at, id LIMIT $3"
        );
        let mut query = sqlx::query_as(&sql)
            .bind(after.key)
            .bind(&after.id)
            .bind(i64::from(limit));
        for value in [filter.shown, filter.region, filter.tag]
            .into_iter()
            .flatten()
        {
            query = query.bind(value);
        }
        Ok(query.fetch_all(&self.pool).await?)
    }

    /// The first `limit` monitors (by name) that depend on `parent_id`, as (id, name), and how
    /// many there are (through `monitor_parents`' primary key).
    pub async fn children_of(
        &self,
        parent_id: &str,
        limit: u32,
    ) -> anyhow::Result<(Vec<(String, String)>, i64)> {
        let named: Vec<(String, String)> = sqlx::query_as(
            "SELECT m.id, m.name FROM monitor_parents p JOIN monitors m ON m.id = p.child_id \
             WHERE p.parent_id = $1 ORDER BY m.name, m.id LIMIT $2",
        )
        .bind(parent_id)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        let (count,): (i64,) =
            sqlx::query_as("SELECT COUNT(*) FROM monitor_parents WHERE parent_id = $1")
                .bind(parent_id)
                .fetch_one(&self.pool)
                .await?;
        Ok((named, count))
    }

    /// Whether `target` is `from` or one of its ancestors (`from` depends on it, however far
    /// up): naming `from` as a parent of `target` would make a cycle.
    pub async fn depends_on(&self, from: &str, target: &str) -> anyhow::Result<bool> {
        if from == target {
            return Ok(true);
        }
        let (count,): (i64,) = sqlx::query_as(&format!("{ANCESTORS} WHERE id = $2"))
            .bind(from)
            .bind(target)
            .fetch_one(&self.pool)
            .await?;
        Ok(count > 0)
    }

    /// The ids of the monitors carrying `tag`, through `monitor_tags`' primary key: what a
    /// pause or resume by tag changes.
    pub async fn monitors_tagged(&self, tag: &str) -> anyhow::Result<Vec<String>> {
        let rows: Vec<(String,)> = sqlx::query_as(
            "SELECT monitor_id FROM monitor_tags WHERE tag = $1 ORDER BY monitor_id",
        )
        .bind(tag)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(|(id,)| id).collect())
    }

    /// Every monitor, for placement.
    pub async fn all_monitors(&self) -> anyhow::Result<Vec<MonitorRow>> {
        let sql = format!("SELECT {MONITOR_COLUMNS} FROM monitors");
        Ok(sqlx::query_as(&sql).fetch_all(&self.pool).await?)
    }

    /// The unpaused monitors a poller should run now: those placed on it, and those with a
    /// location on it.
    pub async fn monitors_assigned_to(&self, poller_id: &str) -> anyhow::Result<Vec<MonitorRow>> {
        let sql = format!(
            "SELECT {MONITOR_COLUMNS} FROM monitors \
             WHERE (assigned_poller_id = $1 OR id IN \
                 (SELECT monitor_id FROM monitor_locations WHERE assigned_poller_id = $1)) \
             AND paused = 0 ORDER BY id"
        );
        Ok(sqlx::query_as(&sql)
            .bind(poller_id)
            .fetch_all(&self.pool)
            .await?)
    }

    pub async fn monitors_by_ids(&self, ids: &[String]) -> anyhow::Result<Vec<MonitorRow>> {
        self.packed_where_in(MONITOR_COLUMNS, "FROM monitors WHERE", "id", ids)
            .await
    }

    pub async fn monitor_status(&self, monitor_id: &str) -> anyhow::Result<Option<StatusRow>> {
        let sql = format!(
            "SELECT {} FROM monitor_status WHERE monitor_id = $1",
            super::locations::STATUS_COLUMNS
        );
        let row = sqlx::query(&sql)
            .bind(monitor_id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row
            .map(|row| super::locations::status_row(&row))
            .transpose()?)
    }
}

#[cfg(test)]
mod list_tests {
    use crate::store::testing::sqlite_store;
    use crate::store::{Cursor, ListFilter};

    fn kept<'a>(
        shown: Option<&'a str>,
        region: Option<&'a str>,
        tag: Option<&'a str>,
    ) -> ListFilter<'a> {
        ListFilter { shown, region, tag }
    }

    #[tokio::test]
    async fn the_list_filters_by_shown_status_and_region_in_the_database() {
        let (store, _dir) = sqlite_store().await;
        sqlx::query(
            "INSERT INTO pollers (id, name, region, capabilities, created_at) \
             VALUES ('p-eu', 'eu one', 'eu', 'http', 0), ('p-us', 'us one', 'us', 'http', 0)",
        )
        .execute(&store.pool)
        .await
        .unwrap();
        // a: placed on the eu poller; b: meant for eu, not placed; c: a location in eu;
        // d: on the us poller; e: a location in us only.
        sqlx::query(
            "INSERT INTO monitors (id, name, kind, target, interval_ms, timeout_ms, settings, \
                poller_mode, poller_region, assigned_poller_id, created_at, updated_at, \
                revision, shown_status) VALUES \
             ('a', 'a', 'http', 'http://x', 60000, 10000, '{}', 'auto', NULL, 'p-eu', 1, 1, 1, 'down'), \
             ('b', 'b', 'http', 'http://x', 60000, 10000, '{}', 'region', 'eu', NULL, 2, 2, 1, 'up'), \
             ('c', 'c', 'http', 'http://x', 60000, 10000, '{}', 'multi', NULL, NULL, 3, 3, 1, 'down'), \
             ('d', 'd', 'http', 'http://x', 60000, 10000, '{}', 'auto', NULL, 'p-us', 4, 4, 1, 'down'), \
             ('e', 'e', 'http', 'http://x', 60000, 10000, '{}', 'multi', NULL, NULL, 5, 5, 1, 'up')",
        )
        .execute(&store.pool)
        .await
        .unwrap();
        sqlx::query(
            "INSERT INTO monitor_locations (monitor_id, region) VALUES ('c', 'eu'), ('c', 'us'), \
             ('e', 'us')",
        )
        .execute(&store.pool)
        .await
        .unwrap();
        let ids = |rows: Vec<crate::store::MonitorRow>| -> Vec<String> {
            rows.into_iter().map(|m| m.id).collect()
        };
        let start = Cursor::start();
        let all = store
            .list_monitors(&kept(None, None, None), &start, 10)
            .await
            .unwrap();
        assert_eq!(ids(all), ["a", "b", "c", "d", "e"]);
        let eu = store
            .list_monitors(&kept(None, Some("eu"), None), &start, 10)
            .await
            .unwrap();
        assert_eq!(ids(eu), ["a", "b", "c"]);
        let down_in_us = store
            .list_monitors(&kept(Some("down"), Some("us"), None), &start, 10)
            .await
            .unwrap();
        assert_eq!(ids(down_in_us), ["c", "d"]);
        let after_a = Cursor {
            key: 1,
            id: "a".into(),
        };
        let down = store
            .list_monitors(&kept(Some("down"), None, None), &after_a, 1)
            .await
            .unwrap();
        assert_eq!(ids(down), ["c"]);
        sqlx::query(
            "INSERT INTO monitor_tags (tag, monitor_id) VALUES ('team:db', 'b'), ('team:db', 'd'), \
             ('env:prod', 'd')",
        )
        .execute(&store.pool)
        .await
        .unwrap();
        let db = store
            .list_monitors(&kept(None, None, Some("team:db")), &start, 10)
            .await
            .unwrap();
        assert_eq!(ids(db), ["b", "d"]);
        let db_down_in_us = store
            .list_monitors(&kept(Some("down"), Some("us"), Some("team:db")), &start, 10)
            .await
            .unwrap();
        assert_eq!(ids(db_down_in_us), ["d"]);
        assert_eq!(store.monitors_tagged("team:db").await.unwrap(), ["b", "d"]);
        assert!(store.monitors_tagged("team").await.unwrap().is_empty());
    }
}
