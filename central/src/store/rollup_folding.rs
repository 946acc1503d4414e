//! Folding closed hours into their days: a rollups' hour row not yet in its day (`folded` 0)
//! is added to the day row and marked folded, in steps of a few hundred rows. Ingest writes
//! hours only (`rollups`), so a day row is written once per hour of each monitor and location
//! instead of once per result (docs/rollup-folding.md). Owns only the fold; when it runs is
//! `duties::upkeep`'s, and what a bucket holds is `rollups`'.
//!
//! Exactly once, per row rather than per watermark: the fold locks the hour rows it takes (on
//! PostgreSQL; SQLite has one writer) and marks them in the transaction that adds them to their
//! days, and ingest's upsert of an hour row returns whether it was folded (`rollups`), adding
//! to the day itself when it was. A row that ingest creates after a fold passed its hour (a late
//! result) starts unfolded and is taken by the next fold. A step can stop anywhere.

use sqlx::Row;

use super::batches::json_rows;
use super::rollups::{adding_on_conflict, summed_columns};
use super::{Backend, Resolution, Store};

/// An hour row's key: where a round of folding has got to, so that its next step starts after
/// it instead of walking again the unfolded rows of the open hour it passed (`fold_hours`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HourKey {
    pub monitor_id: String,
    pub region: String,
    pub bucket_start: i64,
}

impl HourKey {
    /// Before every row: monitor ids are never empty.
    pub fn start() -> Self {
        HourKey {
            monitor_id: String::new(),
            region: String::new(),
            bucket_start: i64::MIN,
        }
    }
}

impl Store {
    /// Folds up to `limit` hour rows that started before `before` into their days, the first
    /// ones after `after` in key order; returns how many and the last one, so that the caller
    /// goes on from there in steps that never hold the writer long. Cost: the rows folded,
    /// found through the index of unfolded rows (`rollups_unfolded`), which holds only the
    /// hours not folded yet; a round that starts each step after the last (rather than at the
    /// index's start) never walks the open hour's rows twice.
    pub async fn fold_hours(
        &self,
        before: i64,
        after: &HourKey,
        limit: u32,
    ) -> anyhow::Result<(u64, HourKey)> {
        let _guard = self.write_lock().await;
        let mut tx = self.writer.begin().await?;
        // In key order, locked on PostgreSQL: ingest locks hour rows in the same order, and
        // then waits for this step (or this step for it) instead of crossing it.
        let lock = match self.backend() {
            Backend::Postgres => " FOR UPDATE",
            Backend::Sqlite => "",
        };
        let rows = sqlx::query(&format!(
            "SELECT monitor_id, region, bucket_start FROM rollups \
             WHERE folded = 0 AND bucket_start < $1 \
                AND (monitor_id, region, bucket_start) > ($3, $4, $5) \
             ORDER BY monitor_id, region, bucket_start LIMIT $2{lock}"
        ))
        .bind(before)
        .bind(i64::from(limit))
        .bind(&after.monitor_id)
        .bind(&after.region)
        .bind(after.bucket_start)
        .fetch_all(&mut *tx)
        .await?;
        let mut last = after.clone();
        let mut keys = Vec::with_capacity(rows.len());
        for row in &rows {
            last = HourKey {
                monitor_id: row.try_get(0)?,
                region: row.try_get(1)?,
                bucket_start: row.try_get(2)?,
            };
            keys.push(serde_json::json!([
                last.monitor_id,
                last.region,
                last.bucket_start
            ]));
        }
        if keys.is_empty() {
            return Ok((0, last));
        }
        let count = keys.len() as u64;
        let keys = serde_json::to_string(&keys)?;
        let summed = summed_columns();
        let sums = summed
            .iter()
            .map(|column| format!("SUM(h.{column})"))
            .collect::<Vec<_>>()
            .join(", ");
        let taken = format!(
            "{rows} JOIN rollups h ON h.monitor_id = r.value ->> 0 \
                AND h.region = r.value ->> 1 AND h.resolution = 'hour' \
                AND h.bucket_start = CAST(r.value ->> 2 AS BIGINT)",
            rows = json_rows(self.backend(), "$1")
        );
        // Days in key order, as ingest takes them (a late result adding to its day). The day
        // is floored as `Resolution::bucket_of` floors it: SQL's `%` truncates toward zero.
        let day = Resolution::Day.width_ms();
        sqlx::query(&format!(
            "INSERT INTO rollups (monitor_id, region, resolution, bucket_start, {}, \
                latency_min, latency_max, folded) \
             SELECT h.monitor_id, h.region, 'day', \
                h.bucket_start - ((h.bucket_start % {day}) + {day}) % {day}, \
                {sums}, MIN(h.latency_min), MAX(h.latency_max), 1 \
             FROM {taken} WHERE true GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4 {}",
            summed.join(", "),
            adding_on_conflict(),
        ))
        .bind(&keys)
        .execute(&mut *tx)
        .await?;
        // A join, not `(…) IN (SELECT …)`: SQLite searched that by three columns of the key
        // only, walking every hour of the monitor (seen with `EXPLAIN QUERY PLAN`).
        sqlx::query(&format!(
            "UPDATE rollups SET folded = 1 FROM {} \
             WHERE rollups.monitor_id = r.value ->> 0 AND rollups.region = r.value ->> 1 \
                AND rollups.resolution = 'hour' \
                AND rollups.bucket_start = CAST(r.value ->> 2 AS BIGINT)",
            json_rows(self.backend(), "$1")
        ))
        .bind(&keys)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok((count, last))
    }
}

#[cfg(test)]
mod tests;
