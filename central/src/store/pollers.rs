//! The poller registry: pollers read into `domain::Poller` (their row stays here) and written
//! back, heartbeats and liveness recorded, and the count of what is placed on each.

use sqlx::any::AnyRow;
use sqlx::{FromRow, Row};

use shared_proto::settings_api::PollerStatus;

use crate::domain::Poller;

use super::monitors::placeholders;
use super::readable::readable;
use super::{flag, Cursor, Paged, Store};

#[derive(Debug, Clone, serde::Deserialize)]
pub(super) struct PollerRow {
    pub id: String,
    pub name: String,
    pub alias: Option<String>,
    pub region: Option<String>,
    pub datacenter: Option<String>,
    /// Comma-separated.
    pub capabilities: String,
    /// What its registration token allowed it to advertise, comma-separated; `None`: anything.
    pub capability_limit: Option<String>,
    pub version: Option<String>,
    #[serde(deserialize_with = "super::packed::flag")]
    pub enabled: bool,
    pub registration_token_id: Option<String>,
    pub created_at: i64,
    pub last_heartbeat_at: Option<i64>,
    pub last_upload_at: Option<i64>,
    pub queue_depth: i64,
    pub oldest_queued_at: Option<i64>,
    pub dropped_results: i64,
    /// Results it keeps because central refused them, as of its newest heartbeat.
    pub held_results: i64,
    pub assignment_version: Option<i64>,
    pub deleted_at: Option<i64>,
    /// JSON `SchedulerHealth` from the newest heartbeat.
    pub scheduler_health: Option<String>,
    /// When it last came online (registration, or a heartbeat after being offline).
    pub online_since: Option<i64>,
    /// Liveness as last recorded (`online`, `offline`, `degraded`), and since when.
    pub status: Option<String>,
    pub status_since: Option<i64>,
    /// The newest problem it reported, and when.
    pub last_error: Option<String>,
    pub last_error_at: Option<i64>,
}

impl TryFrom<PollerRow> for Poller {
    type Error = anyhow::Error;

    /// Reads the row's encodings once: the comma lists, the recorded status and the
    /// scheduler's health (one this central does not read, from an agent of another version,
    /// is left out: it is only shown).
    fn try_from(row: PollerRow) -> anyhow::Result<Poller> {
        Ok(Poller {
            // The liveness last recorded is a cache the next liveness pass rewrites: a status
            // this central does not know (a newer replica's, during a rolling upgrade) reads
            // as none recorded yet, which tells nobody anything.
            status: row.status.as_deref().and_then(PollerStatus::parse),
            capabilities: super::split_list(&row.capabilities),
            capability_limit: row.capability_limit.as_deref().map(super::split_list),
            scheduler_health: row
                .scheduler_health
                .as_deref()
                .and_then(|s| serde_json::from_str(s).ok()),
            id: row.id,
            name: row.name,
            alias: row.alias,
            region: row.region,
            datacenter: row.datacenter,
            version: row.version,
            enabled: row.enabled,
            registration_token_id: row.registration_token_id,
            created_at: row.created_at,
            last_heartbeat_at: row.last_heartbeat_at,
            last_upload_at: row.last_upload_at,
            queue_depth: row.queue_depth,
            oldest_queued_at: row.oldest_queued_at,
            dropped_results: row.dropped_results,
            held_results: row.held_results,
            assignment_version: row.assignment_version,
            deleted_at: row.deleted_at,
            online_since: row.online_since,
            status_since: row.status_since,
            last_error: row.last_error,
            last_error_at: row.last_error_at,
        })
    }
}

impl FromRow<'_, AnyRow> for PollerRow {
    fn from_row(row: &AnyRow) -> sqlx::Result<Self> {
        Ok(Self {
            id: row.try_get("id")?,
            name: row.try_get("name")?,
            alias: row.try_get("alias")?,
            region: row.try_get("region")?,
            datacenter: row.try_get("datacenter")?,
            capabilities: row.try_get("capabilities")?,
            capability_limit: row.try_get("capability_limit")?,
            version: row.try_get("version")?,
            enabled: row.try_get::<i64, _>("enabled")? != 0,
            registration_token_id: row.try_get("registration_token_id")?,
            created_at: row.try_get("created_at")?,
            last_heartbeat_at: row.try_get("last_heartbeat_at")?,
            last_upload_at: row.try_get("last_upload_at")?,
            queue_depth: row.try_get("queue_depth")?,
            oldest_queued_at: row.try_get("oldest_queued_at")?,
            dropped_results: row.try_get("dropped_results")?,
            held_results: row.try_get("held_results")?,
            assignment_version: row.try_get("assignment_version")?,
            deleted_at: row.try_get("deleted_at")?,
            scheduler_health: row.try_get("scheduler_health")?,
            online_since: row.try_get("online_since")?,
            status: row.try_get("status")?,
            status_since: row.try_get("status_since")?,
            last_error: row.try_get("last_error")?,
            last_error_at: row.try_get("last_error_at")?,
        })
    }
}

/// What a heartbeat tells central about a poller.
#[derive(Debug, Clone)]
pub struct HeartbeatUpdate {
    pub at: i64,
    pub version: String,
    pub capabilities: Vec<String>,
    pub queue_depth: i64,
    pub oldest_queued_at: Option<i64>,
    pub dropped_results: i64,
    pub held_results: i64,
    pub assignment_version: Option<i64>,
    pub scheduler_health: Option<String>,
    /// The poller was offline until this heartbeat.
    pub came_online: bool,
    /// The newest problem it reports, if any.
    pub error: Option<String>,
}

const POLLER_COLUMNS: &str =
    "id, name, alias, region, datacenter, capabilities, capability_limit, version, enabled, \
     registration_token_id, created_at, last_heartbeat_at, last_upload_at, queue_depth, \
     oldest_queued_at, dropped_results, held_results, assignment_version, deleted_at, scheduler_health, online_since, status, status_since, last_error, last_error_at";

impl Store {
    pub async fn insert_poller(&self, row: &Poller) -> anyhow::Result<()> {
        let _guard = self.write_lock().await;
        sqlx::query(
            "INSERT INTO pollers (id, name, region, datacenter, capabilities, version, enabled, \
             registration_token_id, created_at, last_heartbeat_at, online_since, capability_limit) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10, $11)",
        )
        .bind(&row.id)
        .bind(&row.name)
        .bind(&row.region)
        .bind(&row.datacenter)
        .bind(row.capabilities.join(","))
        .bind(&row.version)
        .bind(flag(row.enabled))
        .bind(&row.registration_token_id)
        .bind(row.created_at)
        .bind(row.last_heartbeat_at)
        .bind(row.capability_limit.as_ref().map(|l| l.join(",")))
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// A poller that has not been deleted.
    pub async fn poller(&self, id: &str) -> anyhow::Result<Option<Poller>> {
        let sql =
            format!("SELECT {POLLER_COLUMNS} FROM pollers WHERE id = $1 AND deleted_at IS NULL");
        let row: Option<PollerRow> = sqlx::query_as(&sql)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(Poller::try_from).transpose()
    }

    /// Live pollers, optionally of one region and/or datacenter.
    pub async fn list_pollers(
        &self,
        region: Option<&str>,
        datacenter: Option<&str>,
        after: &Cursor,
        limit: u32,
    ) -> anyhow::Result<Paged<Poller>> {
        let sql = super::cursor::by_creation(
            POLLER_COLUMNS,
            "pollers",
            "deleted_at IS NULL AND ($4 IS NULL OR region = $4) \
             AND ($5 IS NULL OR datacenter = $5) AND",
        );
        let rows: Vec<PollerRow> = sqlx::query_as(&sql)
            .bind(after.key)
            .bind(&after.id)
            .bind(i64::from(limit))
            .bind(region)
            .bind(datacenter)
            .fetch_all(&self.pool)
            .await?;
        Ok(Paged::of("poller", rows, limit, |r| Cursor {
            key: r.created_at,
            id: r.id.clone(),
        }))
    }

    /// The live pollers among `ids`.
    pub async fn pollers_by_ids(&self, ids: &[String]) -> anyhow::Result<Vec<Poller>> {
        let rows: Vec<PollerRow> = self
            .packed_where_in(
                POLLER_COLUMNS,
                "FROM pollers WHERE deleted_at IS NULL AND",
                "id",
                ids,
            )
            .await?;
        Ok(readable("poller", rows))
    }

    /// Every live poller, for placement.
    pub async fn all_pollers(&self) -> anyhow::Result<Vec<Poller>> {
        let sql = format!("SELECT {POLLER_COLUMNS} FROM pollers WHERE deleted_at IS NULL");
        Ok(readable(
            "poller",
            sqlx::query_as::<_, PollerRow>(&sql)
                .fetch_all(&self.pool)
                .await?,
        ))
    }

    pub async fn record_heartbeat(&self, id: &str, beat: &HeartbeatUpdate) -> anyhow::Result<()> {
        let _guard = self.write_lock().await;
        sqlx::query(
            "UPDATE pollers SET last_heartbeat_at = $2, version = $3, capabilities = $4, \
             queue_depth = $5, oldest_queued_at = $6, dropped_results = $7, \
             assignment_version = $8, scheduler_health = COALESCE($9, scheduler_health), \
             online_since = CASE WHEN $10 = 1 THEN $2 ELSE COALESCE(online_since, $2) END, \
             last_error = COALESCE($11, last_error), \
             last_error_at = CASE WHEN $11 IS NULL THEN last_error_at ELSE $2 END, \
             held_results = $12 \
             WHERE id = $1",
        )
        .bind(id)
        .bind(beat.at)
        .bind(&beat.version)
        .bind(beat.capabilities.join(","))
        .bind(beat.queue_depth)
        .bind(beat.oldest_queued_at)
        .bind(beat.dropped_results)
        .bind(beat.assignment_version)
        .bind(&beat.scheduler_health)
        .bind(flag(beat.came_online))
        .bind(&beat.error)
        .bind(beat.held_results)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// How many monitors (and monitors' locations) are placed on each of `poller_ids`, keyed
    /// by poller id; a poller with none is left out. Counted in the `assigned` indexes, so the
    /// cost follows the monitors placed on those pollers, not every monitor.
    pub async fn assigned_counts(
        &self,
        poller_ids: &[String],
    ) -> anyhow::Result<Vec<(String, i64)>> {
        let mut counts = Vec::with_capacity(poller_ids.len());
        for chunk in poller_ids.chunks(500) {
            let among = placeholders(1, chunk.len());
            let sql = format!(
                "SELECT assigned_poller_id, COUNT(*) FROM ( \
                     SELECT assigned_poller_id FROM monitors \
                     WHERE assigned_poller_id IN ({among}) \
                     UNION ALL \
                     SELECT assigned_poller_id FROM monitor_locations \
                     WHERE assigned_poller_id IN ({among})) AS placed \
                 GROUP BY assigned_poller_id"
            );
            let mut query = sqlx::query_as(&sql);
            for id in chunk {
                query = query.bind(id);
            }
            counts.extend(query.fetch_all(&self.pool).await?);
        }
        Ok(counts)
    }

    /// Rewrites what an operator may change about a poller.
    pub async fn update_poller(&self, row: &Poller) -> anyhow::Result<()> {
        let _guard = self.write_lock().await;
        sqlx::query(
            "UPDATE pollers SET alias = $2, region = $3, datacenter = $4, enabled = $5 \
             WHERE id = $1 AND deleted_at IS NULL",
        )
        .bind(&row.id)
        .bind(&row.alias)
        .bind(&row.region)
        .bind(&row.datacenter)
        .bind(flag(row.enabled))
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// Marks a poller deleted; its tokens are revoked separately.
    pub async fn delete_poller(&self, id: &str, now: i64) -> anyhow::Result<bool> {
        self.write_one(
            "UPDATE pollers SET deleted_at = $2 WHERE id = $1 AND deleted_at IS NULL",
            id,
            now,
        )
        .await
    }

    /// Records a poller's new liveness status, replacing `previous` (`None`: none recorded, or
    /// one this central does not know), with the notifications the change makes; `false` if
    /// the stored status was no longer `previous` (this or another replica recorded a change
    /// first), so each change is logged and notified once.
    pub async fn record_poller_status(
        &self,
        id: &str,
        previous: Option<PollerStatus>,
        status: PollerStatus,
        at: i64,
        notifications: &[crate::domain::QueuedNotification],
    ) -> anyhow::Result<bool> {
        let _guard = self.write_lock().await;
        let mut tx = self.writer.begin().await?;
        // No previous status (`None`) stands for none recorded and for one this central does
        // not know (a newer replica's: `domain::Poller::status`), which this change replaces.
        let known: Vec<String> = PollerStatus::ALL
            .iter()
            .map(|s| format!("'{}'", s.as_str()))
            .collect();
        let sql = format!(
            "UPDATE pollers SET status = $2, status_since = $3 \
             WHERE id = $1 AND COALESCE(status, '') <> $2 AND (COALESCE(status, '') = $4 \
             OR ($4 = '' AND status NOT IN ({})))",
            known.join(", ")
        );
        let done = sqlx::query(&sql)
            .bind(id)
            .bind(status.as_str())
            .bind(at)
            .bind(previous.map_or("", PollerStatus::as_str))
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() == 0 {
            return Ok(false);
        }
        sqlx::query(
            "INSERT INTO poller_status_changes (id, poller_id, status, at) VALUES ($1, $2, $3, $4)",
        )
        .bind(uuid::Uuid::new_v4().to_string())
        .bind(id)
        .bind(status.as_str())
        .bind(at)
        .execute(&mut *tx)
        .await?;
        super::notifications::insert_outbox(&mut tx, notifications).await?;
        tx.commit().await?;
        Ok(true)
    }

    /// A poller's status changes, oldest first: (id, status, at).
    pub async fn list_poller_status_changes(
        &self,
        poller_id: &str,
        after: &Cursor,
        limit: u32,
    ) -> anyhow::Result<Vec<(String, String, i64)>> {
        Ok(sqlx::query_as(
            "SELECT id, status, at FROM poller_status_changes \
             WHERE poller_id = $1 AND (at > $2 OR (at = $2 AND id > $3)) ORDER BY at, id LIMIT $4",
        )
        .bind(poller_id)
        .bind(after.key)
        .bind(&after.id)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?)
    }
}

#[cfg(test)]
mod tests {
    use crate::store::testing::sqlite_store;

    #[tokio::test]
    async fn counts_cover_the_pollers_asked_about_and_their_monitors_locations() {
        let (store, _dir) = sqlite_store().await;
        for (id, poller) in [("m1", "a"), ("m2", "a"), ("m3", "b"), ("m4", "c")] {
            sqlx::query(
                "INSERT INTO monitors (id, name, kind, target, interval_ms, timeout_ms, \
                 settings, poller_mode, created_at, updated_at, revision, assigned_poller_id) \
                 VALUES ($1, $1, 'http', 'http://127.0.0.1/', 5000, 1000, '{}', 'auto', 0, 0, \
                 1, $2)",
            )
            .bind(id)
            .bind(poller)
            .execute(&store.pool)
            .await
            .unwrap();
        }
        sqlx::query(
            "INSERT INTO monitor_locations (monitor_id, region, assigned_poller_id) \
             VALUES ('m3', 'eu', 'a'), ('m3', 'us', NULL)",
        )
        .execute(&store.pool)
        .await
        .unwrap();
        let mut counts = store
            .assigned_counts(&["a".into(), "b".into(), "idle".into()])
            .await
            .unwrap();
        counts.sort();
        assert_eq!(counts, [("a".to_string(), 3), ("b".to_string(), 1)]);
    }

    /// A poller is read as central writes it: its comma lists as lists, its recorded status
    /// typed. A recorded status this central does not know (a newer replica's) is none
    /// recorded yet, and a scheduler health it does not read is left out (it is only shown):
    /// neither is an error or leaves the poller out.
    #[tokio::test]
    async fn a_poller_is_read_typed_and_a_status_this_central_does_not_know_is_none_recorded() {
        use shared_proto::settings_api::PollerStatus;

        let (store, _dir) = sqlite_store().await;
        for id in ["a", "b"] {
            let mut poller = crate::store::testing::poller_row(1, 1);
            poller.id = id.into();
            poller.capabilities = vec!["http".into(), "icmp".into()];
            poller.capability_limit = Some(vec!["http".into(), "icmp".into(), "dns".into()]);
            store.insert_poller(&poller).await.unwrap();
        }
        sqlx::query(
            "UPDATE pollers SET status = 'degraded', scheduler_health = '{\"from\": \"later\"}'",
        )
        .execute(&store.writer)
        .await
        .unwrap();
        let read = store.poller("a").await.unwrap().unwrap();
        assert_eq!(read.capabilities, ["http", "icmp"]);
        assert_eq!(
            read.capability_limit.as_deref(),
            Some(&["http".to_string(), "icmp".into(), "dns".into()][..])
        );
        assert_eq!(read.status, Some(PollerStatus::Degraded));
        assert_eq!(read.scheduler_health, None);
        sqlx::query("UPDATE pollers SET status = 'asleep' WHERE id = 'a'")
            .execute(&store.writer)
            .await
            .unwrap();
        assert_eq!(store.poller("a").await.unwrap().unwrap().status, None);
        assert_eq!(store.all_pollers().await.unwrap().len(), 2);
        // The next liveness pass replaces it (a compare-and-set against "none recorded").
        assert!(store
            .record_poller_status("a", None, PollerStatus::Online, 5, &[])
            .await
            .unwrap());
        let read = store.poller("a").await.unwrap().unwrap();
        assert_eq!(read.status, Some(PollerStatus::Online));
    }
}
