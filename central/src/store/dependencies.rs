//! What `health-json` monitors report of their dependencies: the current state of each
//! (`dependencies`), what the newest document of each monitor's location said beside them
//! (`dependency_sources`), their changes and error history (`dependency_events`) and latency
//! buckets (`dependency_latency`); names read through operators' aliases
//! (`store::dependency_aliases` writes them).
//!
//! Cost: ingest reads and writes only the rows of the monitors in the batch whose results
//! carry a document; a dependency's row is written only when what it says changes (its state,
//! error, contact or details), its latency bucket with each document. Must not: decide what
//! counts as a change or what the error history records (`service::dependencies::rules`,
//! applied by `service::ingest::batch`).

use std::collections::HashMap;

use shared_proto::dependencies::DependencyState;
use sqlx::any::AnyRow;
use sqlx::Row;

use super::dialect::listed;
use super::{Backend, Resolution, Store};

/// One dependency as a result reports it (read from the result's `meta` by the service).
#[derive(Debug, Clone, PartialEq)]
pub struct ReportedDependency {
    pub name: String,
    pub state: DependencyState,
    pub latency_ms: Option<f64>,
    pub error: Option<String>,
    /// JSON.
    pub contact: Option<String>,
    /// JSON.
    pub details: Option<String>,
}

/// A result's health document: its dependencies and the warnings of its reading.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DependencyReport {
    pub items: Vec<ReportedDependency>,
    pub warnings: Vec<String>,
}

/// A dependency as stored: one per monitor, location (`region`, `""` for a monitor checked
/// from one place) and name.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct DependencyRow {
    pub monitor_id: String,
    pub region: String,
    pub name: String,
    #[serde(deserialize_with = "state_text")]
    pub state: DependencyState,
    pub error: Option<String>,
    pub contact: Option<String>,
    pub details: Option<String>,
    /// The check time of the result that moved it to `state`.
    pub changed_at: i64,
    /// A `dependency.down` was told and its `dependency.up` not yet.
    #[serde(deserialize_with = "super::packed::flag")]
    pub told: bool,
}

/// A stored dependency with the name its alias gives it, and the monitor's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedDependencyRow {
    pub row: DependencyRow,
    pub canonical: String,
    pub monitor_name: String,
}

/// A change to record (`dependency_events`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewDependencyEvent {
    pub name: String,
    pub at: i64,
    /// `appeared`, `changed`, `error` or `gone`.
    pub kind: &'static str,
    pub state: DependencyState,
    pub error: Option<String>,
    /// The state it had before (none for `appeared`).
    pub previous: Option<DependencyState>,
    /// `dependency.down` or `dependency.up` when the monitor asks for notices and the change
    /// calls for one: sent by `service::dependencies::notices`, which clears it.
    pub notice: Option<&'static str>,
}

/// What one document changes in its location's dependencies.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DependencyDiff {
    /// Rows to write as they are.
    pub upserts: Vec<DependencyRow>,
    /// Names no longer reported: their rows are deleted.
    pub gone: Vec<String>,
    pub events: Vec<NewDependencyEvent>,
}

/// A recorded event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DependencyEventRow {
    pub region: String,
    pub name: String,
    pub at: i64,
    pub kind: String,
    pub state: DependencyState,
    pub error: Option<String>,
}

/// What the newest document of a monitor's location said beside its dependencies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DependencySourceRow {
    pub region: String,
    pub reported_at: i64,
    pub result_id: String,
    /// JSON array of texts.
    pub warnings: Option<String>,
}

/// One latency bucket of a dependency.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyBucketRow {
    pub bucket_start: i64,
    pub count: i64,
    pub sum_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
}

pub(super) const ROW_COLUMNS: &str =
    "d.monitor_id, d.region, d.name, d.state, d.error, d.contact, \
                           d.details, d.changed_at, d.told";

/// A stored state as a state. One this central does not know (a newer replica's, or written
/// past central) is unhealthy: nothing said the dependency works. Never an error: ingest reads
/// these rows to move them, and one it could not read would refuse every upload naming the
/// monitor; the next document that says otherwise rewrites it.
fn state_of(text: String) -> sqlx::Result<DependencyState> {
    Ok(DependencyState::parse(&text).unwrap_or(DependencyState::Unhealthy))
}

/// `state_of` for rows read packed.
fn state_text<'de, D: serde::Deserializer<'de>>(reader: D) -> Result<DependencyState, D::Error> {
    let text = <String as serde::Deserialize>::deserialize(reader)?;
    Ok(DependencyState::parse(&text).unwrap_or(DependencyState::Unhealthy))
}

/// A `dependencies` row from the first columns of a query that selects `ROW_COLUMNS` first.
fn row_of(row: &AnyRow) -> sqlx::Result<DependencyRow> {
    Ok(DependencyRow {
        monitor_id: row.try_get(0)?,
        region: row.try_get(1)?,
        name: row.try_get(2)?,
        state: state_of(row.try_get(3)?)?,
        error: row.try_get(4)?,
        contact: row.try_get(5)?,
        details: row.try_get(6)?,
        changed_at: row.try_get(7)?,
        told: row.try_get::<i64, _>(8)? != 0,
    })
}

/// Whether the monitor `rm` reads health documents: the rule central records, shows and
/// forgets dependencies by (with `still_reported`).
pub(super) fn reads_documents(backend: Backend) -> String {
    format!(
        "{} = 'health-json'",
        super::dialect::json_text(backend, "rm.settings", "format")
    )
}

/// Whether the row `row` (of a table with `monitor_id` and `region`) is one its monitor still
/// reports: the monitor reads health documents and the region is one of its current locations
/// (`''` for a monitor checked from one place). Reads apply it too: a document recorded while
/// an edit forgot its location (PostgreSQL lets the two overlap) is never shown.
fn still_reported(backend: Backend, row: &str) -> String {
    format!(
        "EXISTS (SELECT 1 FROM monitors rm LEFT JOIN monitor_locations rl \
         ON rl.monitor_id = rm.id WHERE rm.id = {row}.monitor_id \
         AND COALESCE(rl.region, '') = {row}.region AND {})",
        reads_documents(backend)
    )
}

/// A change awaiting its notice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingNoticeRow {
    pub id: String,
    pub monitor_id: String,
    pub region: String,
    pub name: String,
    pub at: i64,
    pub state: String,
    pub error: Option<String>,
    pub previous: Option<String>,
    /// `dependency.down` or `dependency.up`.
    pub notice: String,
}

/// The tables a deleted monitor's dependencies live in.
pub(super) const MONITOR_TABLES: [&str; 4] = [
    "dependencies",
    "dependency_sources",
    "dependency_events",
    "dependency_latency",
];

impl Store {
    /// A monitor's dependencies (every location), with their canonical names.
    pub async fn monitor_dependencies(
        &self,
        monitor_id: &str,
    ) -> anyhow::Result<Vec<(DependencyRow, String)>> {
        let rows = sqlx::query(&format!(
            "SELECT {ROW_COLUMNS}, COALESCE(a.canonical, d.name) FROM dependencies d \
             LEFT JOIN dependency_aliases a ON a.alias = d.name \
             WHERE d.monitor_id = $1 AND {} ORDER BY d.region, d.name",
            still_reported(self.backend(), "d")
        ))
        .bind(monitor_id)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .iter()
            .map(|row| Ok((row_of(row)?, row.try_get(9)?)))
            .collect::<sqlx::Result<_>>()?)
    }

    /// Forgets a monitor's current dependencies, and what its documents said beside them, in
    /// the locations it no longer reports (`still_reported`): after an edit that dropped a
    /// region or stopped reading health documents. Their changes and latency stay history,
    /// pruned with it. Locks the source rows first, in the order `record` does, so the two
    /// cannot deadlock on PostgreSQL.
    pub async fn forget_unreported_dependencies(&self, monitor_id: &str) -> anyhow::Result<()> {
        let _guard = self.write_lock().await;
        let mut tx = self.writer.begin().await?;
        sqlx::query(&format!(
            "SELECT 1 FROM dependency_sources WHERE monitor_id = $1{}",
            super::dialect::for_update(self.backend(), "monitor_id, region")
        ))
        .bind(monitor_id)
        .execute(&mut *tx)
        .await?;
        for table in ["dependencies", "dependency_sources"] {
            sqlx::query(&format!(
                "DELETE FROM {table} WHERE monitor_id = $1 AND NOT {}",
                still_reported(self.backend(), table)
            ))
            .bind(monitor_id)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// What each location's newest document of a monitor said beside its dependencies.
    pub async fn dependency_sources(
        &self,
        monitor_id: &str,
    ) -> anyhow::Result<Vec<DependencySourceRow>> {
        let rows: Vec<(String, i64, String, Option<String>)> = sqlx::query_as(&format!(
            "SELECT s.region, s.reported_at, s.result_id, s.warnings FROM dependency_sources s \
             WHERE s.monitor_id = $1 AND {} ORDER BY s.region",
            still_reported(self.backend(), "s")
        ))
        .bind(monitor_id)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(
                |(region, reported_at, result_id, warnings)| DependencySourceRow {
                    region,
                    reported_at,
                    result_id,
                    warnings,
                },
            )
            .collect())
    }

    /// A monitor's newest dependency events, newest first.
    pub async fn dependency_events(
        &self,
        monitor_id: &str,
        limit: u32,
    ) -> anyhow::Result<Vec<DependencyEventRow>> {
        let rows: Vec<(String, String, i64, String, String, Option<String>)> = sqlx::query_as(
            "SELECT region, name, at, kind, state, error FROM dependency_events \
             WHERE monitor_id = $1 ORDER BY at DESC, id DESC LIMIT $2",
        )
        .bind(monitor_id)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(
                |(region, name, at, kind, state, error)| -> sqlx::Result<_> {
                    Ok(DependencyEventRow {
                        region,
                        name,
                        at,
                        kind,
                        state: state_of(state)?,
                        error,
                    })
                },
            )
            .collect::<sqlx::Result<_>>()?)
    }

    /// Every stored dependency with its canonical name and its monitor's name, by canonical
    /// name; at most `limit` rows.
    pub async fn all_dependencies(&self, limit: u32) -> anyhow::Result<Vec<NamedDependencyRow>> {
        let rows = sqlx::query(&format!(
            "SELECT {ROW_COLUMNS}, COALESCE(a.canonical, d.name) AS canonical, m.name \
             FROM dependencies d JOIN monitors m ON m.id = d.monitor_id \
             LEFT JOIN dependency_aliases a ON a.alias = d.name WHERE {} \
             ORDER BY canonical, m.name, d.monitor_id, d.region, d.name LIMIT $1",
            still_reported(self.backend(), "d")
        ))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .iter()
            .map(|row| {
                Ok(NamedDependencyRow {
                    row: row_of(row)?,
                    canonical: row.try_get(9)?,
                    monitor_name: row.try_get(10)?,
                })
            })
            .collect::<sqlx::Result<_>>()?)
    }

    /// A dependency's latency buckets of `resolution` from `since`, oldest first.
    pub async fn dependency_latency(
        &self,
        monitor_id: &str,
        region: &str,
        name: &str,
        resolution: Resolution,
        since: i64,
    ) -> anyhow::Result<Vec<LatencyBucketRow>> {
        let rows: Vec<(i64, i64, f64, f64, f64)> = sqlx::query_as(
            "SELECT bucket_start, count, sum_ms, min_ms, max_ms FROM dependency_latency \
             WHERE monitor_id = $1 AND region = $2 AND name = $3 AND resolution = $4 \
             AND bucket_start >= $5 ORDER BY bucket_start",
        )
        .bind(monitor_id)
        .bind(region)
        .bind(name)
        .bind(resolution.as_str())
        .bind(resolution.bucket_of(since))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(
                |(bucket_start, count, sum_ms, min_ms, max_ms)| LatencyBucketRow {
                    bucket_start,
                    count,
                    sum_ms,
                    min_ms,
                    max_ms,
                },
            )
            .collect())
    }

    /// Deletes up to `limit` latency buckets of `resolution` that start before `before`;
    /// returns how many went.
    pub async fn prune_dependency_latency(
        &self,
        resolution: Resolution,
        before: i64,
        limit: u32,
    ) -> anyhow::Result<u64> {
        let _guard = self.write_lock().await;
        let deleted = sqlx::query(
            "DELETE FROM dependency_latency \
             WHERE (monitor_id, region, name, resolution, bucket_start) IN \
             (SELECT monitor_id, region, name, resolution, bucket_start FROM dependency_latency \
              WHERE resolution = $1 AND bucket_start < $2 LIMIT $3)",
        )
        .bind(resolution.as_str())
        .bind(before)
        .bind(i64::from(limit))
        .execute(&self.writer)
        .await?;
        Ok(deleted.rows_affected())
    }

    /// Deletes up to `limit` dependency events recorded before `before`; returns how many went.
    pub async fn prune_dependency_events(&self, before: i64, limit: u32) -> anyhow::Result<u64> {
        let _guard = self.write_lock().await;
        let deleted = sqlx::query(
            "DELETE FROM dependency_events WHERE id IN \
             (SELECT id FROM dependency_events WHERE at < $1 LIMIT $2)",
        )
        .bind(before)
        .bind(i64::from(limit))
        .execute(&self.writer)
        .await?;
        Ok(deleted.rows_affected())
    }

    /// The `meta` of each result in `ids` that exists, by id.
    pub async fn result_metas(&self, ids: &[String]) -> anyhow::Result<HashMap<String, String>> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let rows: Vec<(String, String)> = sqlx::query_as(&format!(
            "SELECT id, meta FROM results WHERE {}",
            listed(self.backend(), "id", "$1")
        ))
        .bind(serde_json::to_string(ids)?)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().collect())
    }

    /// The oldest changes awaiting their notice (a partial index: nothing to read when none).
    pub async fn pending_dependency_notices(
        &self,
        limit: u32,
    ) -> anyhow::Result<Vec<PendingNoticeRow>> {
        type Row = (
            String,
            String,
            String,
            String,
            i64,
            String,
            Option<String>,
            Option<String>,
            String,
        );
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT id, monitor_id, region, name, at, state, error, previous, notice \
             FROM dependency_events WHERE notice IS NOT NULL ORDER BY at LIMIT $1",
        )
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| PendingNoticeRow {
                id: r.0,
                monitor_id: r.1,
                region: r.2,
                name: r.3,
                at: r.4,
                state: r.5,
                error: r.6,
                previous: r.7,
                notice: r.8,
            })
            .collect())
    }

    /// Queues each change's notifications and clears its mark, in one transaction; a change
    /// whose mark is already cleared (another holder of the lease sent it) queues nothing.
    /// Returns how many notifications were queued.
    pub async fn queue_dependency_notices(
        &self,
        notices: &[(String, Vec<crate::domain::QueuedNotification>)],
    ) -> anyhow::Result<usize> {
        let _guard = self.write_lock().await;
        let mut tx = self.writer.begin().await?;
        let mut queued = 0;
        for (id, rows) in notices {
            let cleared = sqlx::query(
                "UPDATE dependency_events SET notice = NULL WHERE id = $1 AND notice IS NOT NULL",
            )
            .bind(id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if cleared == 1 {
                super::notifications::insert_outbox(&mut tx, rows).await?;
                queued += rows.len();
            }
        }
        tx.commit().await?;
        Ok(queued)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing::sqlite_store;

    use crate::service::ingest::batch::store_standing;
    use crate::service::testing::NewestDecides;
    use crate::store::{AliasInsert, AliasRow, NewResult};

    fn document(id: &str, ts: i64, items: &[(&str, &'static str, Option<&str>)]) -> NewResult {
        NewResult {
            id: id.into(),
            monitor_id: "m1".into(),
            region: None,
            ts,
            status: shared_proto::poller_api::ResultStatus::Up,
            latency_ms: Some(5),
            msg: String::new(),
            meta: "{}".into(),
            next_due_at: None,
            dependencies: Some(DependencyReport {
                items: items
                    .iter()
                    .map(|(name, state, error)| ReportedDependency {
                        name: name.to_string(),
                        state: DependencyState::parse(state).unwrap(),
                        latency_ms: Some(ts as f64 / 1_000.0),
                        error: error.map(str::to_string),
                        contact: None,
                        details: None,
                    })
                    .collect(),
                warnings: vec![format!("warning of {id}")],
            }),
        }
    }

    fn states(rows: &[(DependencyRow, String)]) -> Vec<(&str, &str, i64)> {
        rows.iter()
            .map(|(row, _)| (row.name.as_str(), row.state.as_str(), row.changed_at))
            .collect()
    }

    /// A monitor that reads health documents, from one place or from `regions`.
    async fn health_monitor(store: &Store, id: &str, regions: Option<&[&str]>) {
        let multi: Option<Vec<String>> = regions.map(|r| r.iter().map(|r| r.to_string()).collect());
        store
            .insert_monitor(&crate::domain::Monitor {
                id: id.into(),
                name: id.into(),
                kind: shared_proto::CheckKind::Http,
                target: "http://127.0.0.1:9/health".into(),
                interval_ms: 60_000,
                timeout_ms: 10_000,
                settings: serde_json::json!({"format": "health-json"})
                    .as_object()
                    .unwrap()
                    .clone(),
                poller_mode: if multi.is_some() {
                    shared_proto::PollerMode::Multi
                } else {
                    shared_proto::PollerMode::Auto
                },
                poller_id: None,
                poller_region: None,
                poller_datacenter: None,
                poller_capability: None,
                poller_regions: multi,
                quorum: None,
                channel_ids: Vec::new(),
                tags: Vec::new(),
                parent_ids: Vec::new(),
                failover: None,
                paused: false,
                paused_at: None,
                resumed_at: None,
                created_at: 0,
                updated_at: 0,
                revision: 0,
                assigned_poller_id: None,
                previous_poller_id: None,
                assigned_at: None,
                placement_reason: None,
                shown_status: None,
            })
            .await
            .unwrap();
    }

    /// A dependency's state is read as one of the states central writes; one this central
    /// does not know (a newer replica's) is unhealthy on every read, and never stops ingest:
    /// the next document moves the row as it says.
    #[tokio::test]
    async fn a_dependency_state_this_central_does_not_know_is_unhealthy_and_moves_on() {
        let (store, _dir) = sqlite_store().await;
        health_monitor(&store, "m1", None).await;
        let batch = [document("a", 1_000, &[("db", "healthy", None)])];
        store_standing(&store, "p1", &batch, 2_000, &NewestDecides)
            .await
            .unwrap();
        let rows = store.monitor_dependencies("m1").await.unwrap();
        assert_eq!(rows[0].0.state, DependencyState::Healthy);
        for table in ["dependencies", "dependency_events"] {
            sqlx::query(&format!("UPDATE {table} SET state = 'sideways'"))
                .execute(&store.writer)
                .await
                .unwrap();
        }
        let rows = store.monitor_dependencies("m1").await.unwrap();
        assert_eq!(rows[0].0.state, DependencyState::Unhealthy);
        let events = store.dependency_events("m1", 10).await.unwrap();
        assert_eq!(events[0].state, DependencyState::Unhealthy);
        assert_eq!(store.all_dependencies(10).await.unwrap().len(), 1);
        let batch = [document("b", 3_000, &[("db", "healthy", None)])];
        store_standing(&store, "p1", &batch, 4_000, &NewestDecides)
            .await
            .unwrap();
        let rows = store.monitor_dependencies("m1").await.unwrap();
        assert_eq!(states(&rows), [("db", "healthy", 3_000)]);
    }

    #[tokio::test]
    async fn documents_move_rows_in_check_time_order_and_a_late_one_moves_nothing() {
        let (store, _dir) = sqlite_store().await;
        health_monitor(&store, "m1", None).await;
        // One upload holding two documents, the newer first.
        let batch = [
            document("b", 2_000, &[("db", "unhealthy", Some("timeout"))]),
            document(
                "a",
                1_000,
                &[("db", "healthy", None), ("mail", "skipped", None)],
            ),
        ];
        store_standing(&store, "p1", &batch, 3_000, &NewestDecides)
            .await
            .unwrap();
        let rows = store.monitor_dependencies("m1").await.unwrap();
        assert_eq!(states(&rows), [("db", "unhealthy", 2_000)]);
        let events = store.dependency_events("m1", 10).await.unwrap();
        let mut kinds: Vec<(i64, &str, &str)> = events
            .iter()
            .map(|e| (e.at, e.name.as_str(), e.kind.as_str()))
            .collect();
        assert!(kinds.windows(2).all(|w| w[0].0 >= w[1].0), "newest first");
        kinds.sort();
        assert_eq!(
            kinds,
            [
                (1_000, "db", "appeared"),
                (1_000, "mail", "appeared"),
                (2_000, "db", "changed"),
                (2_000, "mail", "gone"),
            ]
        );
        let sources = store.dependency_sources("m1").await.unwrap();
        assert_eq!(sources[0].result_id, "b");
        assert_eq!(sources[0].warnings.as_deref(), Some("[\"warning of b\"]"));

        // Uploaded late: stored as a result, but older than what the rows say.
        store_standing(
            &store,
            "p1",
            &[document("c", 1_500, &[("db", "healthy", None)])],
            4_000,
            &NewestDecides,
        )
        .await
        .unwrap();
        let rows = store.monitor_dependencies("m1").await.unwrap();
        assert_eq!(states(&rows), [("db", "unhealthy", 2_000)]);
        assert_eq!(store.dependency_events("m1", 10).await.unwrap().len(), 4);

        // Latency buckets hold every document, the late one too.
        let hour = store
            .dependency_latency("m1", "", "db", Resolution::Hour, 0)
            .await
            .unwrap();
        assert_eq!(hour.len(), 1);
        assert_eq!(
            (hour[0].count, hour[0].min_ms, hour[0].max_ms),
            (3, 1.0, 2.0)
        );

        // An alias gives the rows a canonical name; aliases stay one level deep.
        let alias = |alias: &str, canonical: &str| AliasRow {
            alias: alias.into(),
            canonical: canonical.into(),
            created_at: 1,
        };
        let insert = |row: AliasRow, max: u64| {
            let store = &store;
            async move { store.insert_dependency_alias(&row, max).await.unwrap() }
        };
        assert_eq!(
            insert(alias("db", "postgres"), 2).await,
            AliasInsert::Stored
        );
        let rows = store.monitor_dependencies("m1").await.unwrap();
        assert_eq!(rows[0].1, "postgres");
        assert_eq!(insert(alias("db", "pg"), 2).await, AliasInsert::Exists);
        assert_eq!(
            insert(alias("pg", "db"), 2).await,
            AliasInsert::CanonicalIsAlias
        );
        assert_eq!(
            insert(alias("postgres", "pg"), 2).await,
            AliasInsert::AliasIsCanonical
        );
        assert_eq!(insert(alias("pg", "postgres"), 1).await, AliasInsert::Full);
        assert_eq!(store.prune_dependency_events(1_500, 500).await.unwrap(), 2);

        // An edit that stops reading documents forgets the rows, not their history; a
        // document checked before it and uploaded after it brings nothing back.
        sqlx::query("UPDATE monitors SET settings = '{}' WHERE id = 'm1'")
            .execute(&store.writer)
            .await
            .unwrap();
        store.forget_unreported_dependencies("m1").await.unwrap();
        assert!(store.monitor_dependencies("m1").await.unwrap().is_empty());
        assert!(store.dependency_sources("m1").await.unwrap().is_empty());
        assert_eq!(store.dependency_events("m1", 10).await.unwrap().len(), 2);
        store_standing(
            &store,
            "p1",
            &[document("d", 5_000, &[("db", "healthy", None)])],
            6_000,
            &NewestDecides,
        )
        .await
        .unwrap();
        assert!(store.monitor_dependencies("m1").await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_dropped_location_is_forgotten_and_not_brought_back() {
        let (store, _dir) = sqlite_store().await;
        health_monitor(&store, "m1", Some(&["eu", "us"])).await;
        let from = |id: &str, ts: i64, region: &str| NewResult {
            region: Some(region.into()),
            ..document(id, ts, &[("db", "healthy", None)])
        };
        store_standing(
            &store,
            "p1",
            &[from("a", 1_000, "eu"), from("b", 1_000, "us")],
            2_000,
            &NewestDecides,
        )
        .await
        .unwrap();
        let regions = |rows: Vec<(DependencyRow, String)>| -> Vec<String> {
            rows.into_iter().map(|(row, _)| row.region).collect()
        };
        assert_eq!(
            regions(store.monitor_dependencies("m1").await.unwrap()),
            ["eu", "us"]
        );

        // "us" dropped for "ap": its rows go, and its late document is not recorded.
        sqlx::query("DELETE FROM monitor_locations WHERE monitor_id = 'm1' AND region = 'us'")
            .execute(&store.writer)
            .await
            .unwrap();
        store.forget_unreported_dependencies("m1").await.unwrap();
        store_standing(
            &store,
            "p1",
            &[from("c", 3_000, "us")],
            4_000,
            &NewestDecides,
        )
        .await
        .unwrap();
        assert_eq!(
            regions(store.monitor_dependencies("m1").await.unwrap()),
            ["eu"]
        );
    }
}
