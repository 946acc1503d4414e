//! Many monitors' day buckets at once, for a status page's 90 daily cells: what
//! `Store::rollup_buckets` reads for one monitor (its day buckets since an instant, with the
//! hours not folded into their day yet added to it), in one statement per 500 monitors
//! instead of one per monitor. Cost: the page's monitors' day rows in the window (at most 91
//! each) and their unfolded hours, by the key and the `rollups_unfolded` index. Must not:
//! decide what a cell shows (`service::status_pages::shown`).

use std::collections::{BTreeMap, HashMap};

use sqlx::Row;

use super::monitors::placeholders;
use super::rollups::{day_at_or_after, unfolded_index};
use super::{Resolution, RollupSums, Store};

impl Store {
    /// Each monitor's day buckets (overall, not per region) starting at `since` or later, by
    /// day start; a monitor with none is absent.
    pub async fn day_buckets_of(
        &self,
        monitor_ids: &[String],
        since: i64,
    ) -> anyhow::Result<HashMap<String, BTreeMap<i64, RollupSums>>> {
        let mut found: HashMap<String, BTreeMap<i64, RollupSums>> = HashMap::new();
        for chunk in monitor_ids.chunks(500) {
            let ids = placeholders(3, chunk.len());
            let sql = format!(
                "SELECT * FROM rollups WHERE monitor_id IN ({ids}) AND region = '' \
                 AND resolution = 'day' AND bucket_start >= $1 \
                 UNION ALL SELECT * FROM rollups{} WHERE folded = 0 AND monitor_id IN ({ids}) \
                 AND region = '' AND resolution = 'hour' AND bucket_start >= $2",
                unfolded_index(self.backend())
            );
            let mut query = sqlx::query(&sql).bind(since).bind(day_at_or_after(since));
            for id in chunk {
                query = query.bind(id);
            }
            for row in query.fetch_all(&self.pool).await? {
                let monitor: String = row.try_get("monitor_id")?;
                let start: i64 = row.try_get("bucket_start")?;
                // An unfolded hour adds to its day's bucket, stored or not yet.
                found
                    .entry(monitor)
                    .or_default()
                    .entry(Resolution::Day.bucket_of(start))
                    .or_default()
                    .add(&RollupSums::from_row(&row)?);
            }
        }
        Ok(found)
    }
}
