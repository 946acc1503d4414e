//! Deleting old results for retention (`service::retention` decides which): walking the
//! monitors that have results, paging a monitor's oldest, and deleting rows with their
//! `result_index` entries on SQLite. Must not decide what expires.

use shared_proto::poller_api::ResultStatus;

use super::result_index::{by_monitor, Order};
use super::{Cursor, Store};

/// What pruning needs to know of an old result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpiringResult {
    pub id: String,
    pub region: Option<String>,
    pub ts: i64,
    pub status: ResultStatus,
}

impl Store {
    /// The first monitor id after `after` that has results (a skip scan over the index, so
    /// pruning can walk monitors, deleted ones included, without reading every result). On
    /// SQLite, results still in the head are not seen: pruning reaches them after a flush.
    pub async fn next_monitor_with_results(&self, after: &str) -> anyhow::Result<Option<String>> {
        let table = if self.backend().keeps_results_head() {
            "result_index"
        } else {
            "results"
        };
        let row: Option<(String,)> = sqlx::query_as(&format!(
            "SELECT monitor_id FROM {table} WHERE monitor_id > $1 ORDER BY monitor_id LIMIT 1",
        ))
        .bind(after)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|(id,)| id))
    }

    /// A page of a monitor's results checked before `before`, oldest first, after `after`.
    pub async fn expiring_results(
        &self,
        monitor_id: &str,
        before: i64,
        after: &Cursor,
        limit: u32,
    ) -> anyhow::Result<Vec<ExpiringResult>> {
        let sql = by_monitor(
            self.backend(),
            "r.id, r.region, r.ts, r.status",
            "$1",
            "$6",
            &|t| format!(" AND {t}.ts < $2 AND ({t}.ts > $3 OR ({t}.ts = $3 AND {t}.id > $4))"),
            Order::Oldest,
            "$5",
        );
        let mut query = sqlx::query_as(&sql)
            .bind(monitor_id)
            .bind(before)
            .bind(after.key)
            .bind(&after.id)
            .bind(i64::from(limit));
        if self.backend().keeps_results_head() {
            query = query.bind(self.head_rowids(monitor_id));
        }
        let rows: Vec<(String, Option<String>, i64, String)> = query.fetch_all(&self.pool).await?;
        rows.into_iter()
            .map(|(id, region, ts, status)| {
                let status = ResultStatus::parse(&status)
                    .ok_or_else(|| anyhow::anyhow!("a stored status `{status}`"))?;
                Ok(ExpiringResult {
                    id,
                    region,
                    ts,
                    status,
                })
            })
            .collect()
    }

    /// Deletes these results (a pruning step: a few hundred at a time), and on SQLite their
    /// entries in `result_index` (those still in the head are left there: a flush finds no
    /// row for them).
    pub async fn delete_results(&self, ids: &[String]) -> anyhow::Result<u64> {
        let _guard = self.write_lock().await;
        let mut deleted = 0;
        for chunk in ids.chunks(500) {
            let ids = serde_json::to_string(chunk)?;
            let listed = super::dialect::id_list(self.backend(), "$1");
            let mut tx = self.writer.begin().await?;
            if self.backend().keeps_results_head() {
                sqlx::query(&format!(
                    "DELETE FROM result_index WHERE (monitor_id, ts, id) IN \
                     (SELECT monitor_id, ts, id FROM results WHERE id IN ({listed}))"
                ))
                .bind(&ids)
                .execute(&mut *tx)
                .await?;
            }
            deleted += sqlx::query(&format!("DELETE FROM results WHERE id IN ({listed})"))
                .bind(&ids)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            tx.commit().await?;
        }
        Ok(deleted)
    }

    /// Deletes up to `limit` of a monitor's results checked before `before`.
    pub async fn delete_results_before(
        &self,
        monitor_id: &str,
        before: i64,
        limit: u32,
    ) -> anyhow::Result<u64> {
        let _guard = self.write_lock().await;
        if !self.backend().keeps_results_head() {
            return Ok(sqlx::query(
                "DELETE FROM results WHERE id IN (SELECT id FROM results \
                 WHERE monitor_id = $1 AND ts < $2 LIMIT $3)",
            )
            .bind(monitor_id)
            .bind(before)
            .bind(i64::from(limit))
            .execute(&self.writer)
            .await?
            .rows_affected());
        }
        // SQLite: the oldest `limit` entries of the index (results still in the head wait for
        // a flush), their rows, then that prefix of the monitor's index entries.
        let mut tx = self.writer.begin().await?;
        let oldest: Vec<(i64, String)> = sqlx::query_as(
            "SELECT ts, id FROM result_index WHERE monitor_id = $1 AND ts < $2 \
             ORDER BY ts, id LIMIT $3",
        )
        .bind(monitor_id)
        .bind(before)
        .bind(i64::from(limit))
        .fetch_all(&mut *tx)
        .await?;
        let Some((last_ts, last_id)) = oldest.last().cloned() else {
            return Ok(0);
        };
        let ids: Vec<&str> = oldest.iter().map(|(_, id)| id.as_str()).collect();
        let deleted =
            sqlx::query("DELETE FROM results WHERE id IN (SELECT value FROM json_each($1))")
                .bind(serde_json::to_string(&ids)?)
                .execute(&mut *tx)
                .await?
                .rows_affected();
        sqlx::query("DELETE FROM result_index WHERE monitor_id = $1 AND (ts, id) <= ($2, $3)")
            .bind(monitor_id)
            .bind(last_ts)
            .bind(&last_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(deleted)
    }
}
