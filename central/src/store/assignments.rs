//! Versioned monitor assignments: the assignment version, placement decisions stored under a
//! new one (compare-and-set on the poller each was decided from), and the assignment log that
//! tells each poller which of its monitors changed since the version it holds. Must not decide
//! placements (`service::assignments`) or write monitors' specs (`store::monitors`).

use sqlx::{Any, Transaction};

use super::Store;

/// A placement decision that differs from what is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssignmentChange {
    pub monitor_id: String,
    /// The location it is about, for a multi-location monitor; `None` for the monitor's one
    /// placement.
    pub region: Option<String>,
    pub from: Option<String>,
    pub to: Option<String>,
    pub reason: Option<String>,
}

/// A new assignment version and the pollers it changed something for (those a change was
/// logged for), so that only their long polls read what changed (`cluster::versions`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versioned {
    pub version: i64,
    pub pollers: Vec<String>,
}

/// Notes that the transaction's version changed what `poller_id` should run about
/// `monitor_id`.
pub(super) async fn log_change(
    tx: &mut Transaction<'_, Any>,
    versioned: &mut Versioned,
    poller_id: &str,
    monitor_id: &str,
    now: i64,
) -> sqlx::Result<()> {
    sqlx::query(
        "INSERT INTO assignment_log (version, poller_id, monitor_id, created_at) VALUES ($1, $2, $3, $4)",
    )
    .bind(versioned.version)
    .bind(poller_id)
    .bind(monitor_id)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    if !versioned.pollers.iter().any(|p| p == poller_id) {
        versioned.pollers.push(poller_id.to_string());
    }
    Ok(())
}

pub(super) async fn bump_version(tx: &mut Transaction<'_, Any>) -> sqlx::Result<Versioned> {
    let (version,): (i64,) = sqlx::query_as(
        "UPDATE assignment_state SET version = version + 1 WHERE id = 1 RETURNING version",
    )
    .fetch_one(&mut **tx)
    .await?;
    Ok(Versioned {
        version,
        pollers: Vec::new(),
    })
}

impl Store {
    /// The current assignment version.
    pub async fn assignment_version(&self) -> anyhow::Result<i64> {
        let (version,): (i64,) =
            sqlx::query_as("SELECT version FROM assignment_state WHERE id = 1")
                .fetch_one(&self.pool)
                .await?;
        Ok(version)
    }

    /// Marks a start of central on this database: the assignment version moves up to at
    /// least `floor` (the start's time in microseconds, which no history of this database can
    /// have reached by issuing one version per change), and the versions skipped are recorded
    /// as never issued. Returns the version and every range of versions never issued, as
    /// (after, before), both ends excluded: one per start that moved the version since the
    /// compacted log's floor (`compact_assignment_log` drops older ones), so few.
    ///
    /// A copy of this database started after its original went on has skipped the versions
    /// the original issued since the copy: an agent that names one is told its full set.
    pub async fn begin_assignment_versions(
        &self,
        floor: i64,
        now: i64,
    ) -> anyhow::Result<(i64, Vec<(i64, i64)>)> {
        let _guard = self.write_lock().await;
        let mut tx = self.writer.begin().await?;
        // The row is taken first (an update that changes nothing holds it on PostgreSQL until
        // the commit; SQLite has one writer), so no other replica issues a version between the
        // read and the raise.
        sqlx::query("UPDATE assignment_state SET version = version WHERE id = 1")
            .execute(&mut *tx)
            .await?;
        let (before,): (i64,) = sqlx::query_as("SELECT version FROM assignment_state WHERE id = 1")
            .fetch_one(&mut *tx)
            .await?;
        let (after,): (i64,) = sqlx::query_as(
            "UPDATE assignment_state SET version = CASE WHEN version < $1 THEN $1 ELSE version END \
             WHERE id = 1 RETURNING version",
        )
        .bind(floor)
        .fetch_one(&mut *tx)
        .await?;
        if after > before + 1 {
            sqlx::query(
                "INSERT INTO assignment_skips (after_version, before_version, at) \
                 VALUES ($1, $2, $3)",
            )
            .bind(before)
            .bind(after)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        }
        let skipped: Vec<(i64, i64)> = sqlx::query_as(
            "SELECT after_version, before_version FROM assignment_skips ORDER BY after_version",
        )
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok((after, skipped))
    }

    /// Stores placement decisions under one new assignment version, which it returns.
    ///
    /// Run again if PostgreSQL aborts it as a conflict (`conflicts`).
    pub async fn apply_assignments(
        &self,
        changes: &[AssignmentChange],
        now: i64,
    ) -> anyhow::Result<Versioned> {
        super::conflicts::retrying("storing placements", || {
            self.apply_assignments_once(changes, now)
        })
        .await
    }

    /// One try of `apply_assignments`.
    async fn apply_assignments_once(
        &self,
        changes: &[AssignmentChange],
        now: i64,
    ) -> anyhow::Result<Versioned> {
        // Rows are touched in id order, so that two writers never wait on each other in a
        // cycle (PostgreSQL would abort one as a deadlock).
        let mut ordered: Vec<&AssignmentChange> = changes.iter().collect();
        ordered.sort_by(|a, b| (&a.monitor_id, &a.region).cmp(&(&b.monitor_id, &b.region)));
        let _guard = self.write_lock().await;
        let mut tx = self.writer.begin().await?;
        let mut versioned = bump_version(&mut tx).await?;
        let mut placed: Vec<&str> = Vec::new();
        for change in ordered {
            // Compare-and-set on the poller the decision was made from: if another decider
            // moved the monitor meanwhile, its move stands and this one is dropped, so the
            // previous poller's reassignment grace is never lost to a double move.
            let moves = change.from != change.to;
            // Parameters: the monitor, what is set, then the compare-and-set poller, then the
            // location (for a multi-location monitor, whose placements are rows of their own).
            let mut next = if moves { 5 } else { 3 };
            let current = match change.from {
                Some(_) => {
                    next += 1;
                    format!("assigned_poller_id = ${}", next - 1)
                }
                None => "assigned_poller_id IS NULL".to_string(),
            };
            let (table, row) = match &change.region {
                Some(_) => (
                    "monitor_locations",
                    format!("monitor_id = $1 AND region = ${next}"),
                ),
                None => ("monitors", "id = $1".to_string()),
            };
            let sql = if moves {
                format!(
                    "UPDATE {table} SET assigned_poller_id = $2, \
                     previous_poller_id = COALESCE(assigned_poller_id, previous_poller_id), \
                     assigned_at = $3, placement_reason = $4 WHERE {row} AND {current}"
                )
            } else {
                format!("UPDATE {table} SET placement_reason = $2 WHERE {row} AND {current}")
            };
            let mut query = sqlx::query(&sql).bind(&change.monitor_id);
            query = if moves {
                query.bind(&change.to).bind(now).bind(&change.reason)
            } else {
                query.bind(&change.reason)
            };
            if let Some(from) = &change.from {
                query = query.bind(from);
            }
            if let Some(region) = &change.region {
                query = query.bind(region);
            }
            let applied = query.execute(&mut *tx).await?.rows_affected() == 1;
            if !applied {
                tracing::debug!(monitor_id = %change.monitor_id,
                    "placement skipped: the monitor moved since it was read");
                continue;
            }
            placed.push(&change.monitor_id);
            if moves {
                for poller in change.from.iter().chain(&change.to) {
                    log_change(&mut tx, &mut versioned, poller, &change.monitor_id, now).await?;
                }
            }
        }
        // Where a monitor runs is part of its status (a new poller has an interval to report).
        if !placed.is_empty() {
            let ids = serde_json::to_string(&placed)?;
            super::due::mark_due(&mut tx, self.backend(), &ids, now).await?;
        }
        tx.commit().await?;
        Ok(versioned)
    }

    /// The pollers whose assignments versions `after + 1 ..= upto` changed (another replica's
    /// writes, heard of by number alone): one indexed read of those versions' log entries.
    pub async fn pollers_changed_between(
        &self,
        after: i64,
        upto: i64,
    ) -> anyhow::Result<Vec<String>> {
        let rows: Vec<(String,)> = sqlx::query_as(
            "SELECT DISTINCT poller_id FROM assignment_log WHERE version > $1 AND version <= $2",
        )
        .bind(after)
        .bind(upto)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(|(p,)| p).collect())
    }

    /// Monitors whose assignment to `poller_id` changed after `since`.
    pub async fn changed_monitors_for(
        &self,
        poller_id: &str,
        since: i64,
    ) -> anyhow::Result<Vec<String>> {
        let rows: Vec<(String,)> = sqlx::query_as(
            "SELECT DISTINCT monitor_id FROM assignment_log WHERE poller_id = $1 AND version > $2",
        )
        .bind(poller_id)
        .bind(since)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(|(id,)| id).collect())
    }

    /// The oldest version a delta can start from.
    pub async fn assignment_log_floor(&self) -> anyhow::Result<i64> {
        let (floor,): (i64,) =
            sqlx::query_as("SELECT log_floor FROM assignment_state WHERE id = 1")
                .fetch_one(&self.pool)
                .await?;
        Ok(floor)
    }

    /// Drops log entries written before `before_ms`; pollers behind them get full sets.
    pub async fn compact_assignment_log(&self, before_ms: i64) -> anyhow::Result<u64> {
        let _guard = self.write_lock().await;
        let mut tx = self.writer.begin().await?;
        let newest: Option<(Option<i64>,)> =
            sqlx::query_as("SELECT MAX(version) FROM assignment_log WHERE created_at < $1")
                .bind(before_ms)
                .fetch_optional(&mut *tx)
                .await?;
        let Some((Some(floor),)) = newest else {
            return Ok(0);
        };
        let done = sqlx::query("DELETE FROM assignment_log WHERE version <= $1")
            .bind(floor)
            .execute(&mut *tx)
            .await?;
        // A version below the floor gets a full set anyway: the ranges skipped below it need
        // not be kept (so they stay as few as the starts of the last day).
        sqlx::query("DELETE FROM assignment_skips WHERE before_version <= $1")
            .bind(floor)
            .execute(&mut *tx)
            .await?;
        sqlx::query("UPDATE assignment_state SET log_floor = $1 WHERE id = 1 AND log_floor < $1")
            .bind(floor)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(done.rows_affected())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing::sqlite_store;

    async fn assigned(store: &Store, monitor: &str) -> (Option<String>, Option<String>) {
        sqlx::query_as("SELECT assigned_poller_id, previous_poller_id FROM monitors WHERE id = $1")
            .bind(monitor)
            .fetch_one(&store.pool)
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn a_move_decided_on_a_stale_read_is_dropped() {
        let (store, _dir) = sqlite_store().await;
        sqlx::query(
            "INSERT INTO monitors (id, name, kind, target, interval_ms, timeout_ms, settings, \
             poller_mode, created_at, updated_at, revision) \
             VALUES ('m1', 'm', 'http', 'http://127.0.0.1/', 5000, 1000, '{}', 'auto', 0, 0, 1)",
        )
        .execute(&store.pool)
        .await
        .unwrap();
        let change = |from: Option<&str>, to: &str| AssignmentChange {
            monitor_id: "m1".into(),
            region: None,
            from: from.map(str::to_string),
            to: Some(to.into()),
            reason: None,
        };
        store
            .apply_assignments(&[change(None, "a")], 1)
            .await
            .unwrap();
        // Two deciders both read `a` and decide: the first move wins.
        store
            .apply_assignments(&[change(Some("a"), "b")], 2)
            .await
            .unwrap();
        store
            .apply_assignments(&[change(Some("a"), "c")], 3)
            .await
            .unwrap();
        assert_eq!(
            assigned(&store, "m1").await,
            (Some("b".into()), Some("a".into())),
            "the second move was decided on a stale read; `a` keeps its grace as previous"
        );
        // A decision from a stale unassigned read does not apply either.
        store
            .apply_assignments(&[change(None, "d")], 4)
            .await
            .unwrap();
        assert_eq!(assigned(&store, "m1").await.0.as_deref(), Some("b"));
    }

    #[tokio::test]
    async fn each_start_moves_the_version_to_its_time_and_records_what_it_skipped() {
        let (store, _dir) = sqlite_store().await;
        let before = store.assignment_version().await.unwrap();
        let (version, skipped) = store.begin_assignment_versions(1_000, 1).await.unwrap();
        assert_eq!((version, skipped.clone()), (1_000, vec![(before, 1_000)]));
        // A start whose clock is behind the version moves nothing and records nothing.
        let (version, again) = store.begin_assignment_versions(500, 2).await.unwrap();
        assert_eq!((version, again), (1_000, skipped));
        let (version, skipped) = store.begin_assignment_versions(9_000, 3).await.unwrap();
        assert_eq!(version, 9_000);
        assert_eq!(skipped, vec![(before, 1_000), (1_000, 9_000)]);
    }
}
