//! Rollups: hour and day buckets (UTC) of each monitor's results, for the whole monitor
//! (region `''`) and per location: counts, latency, and the time the results stood for up and
//! down. Hours are added to in the results' own transaction, so a result counts exactly when it
//! is stored; days are folded from closed hours (`rollup_folding`), and reads of days add the
//! hours not folded yet. Both are read for uptime and history without touching raw results.
//! Minute buckets are no longer written (`Resolution::STORED`): minute history is derived from
//! the results when read (`store::minutes`, `service::history::minutes`); minute rows written
//! before that are only pruned. Windows and percentiles are the service's (`service::history`), what time a
//! result stands for is `service::uptime`'s (handed in as `TimeCredit`s); neither is this
//! file's.

use std::collections::{BTreeMap, HashMap};
use std::sync::LazyLock;

use sqlx::any::AnyRow;
use sqlx::Row;

use super::statements::{Arg, Columns, Statements};

use super::dialect::json_rows;
use super::results::NewResult;
use super::timeline::Credits;
use super::{monitors::placeholders, Store};

/// Upper bounds (inclusive, ms) of the latency bands counted per bucket; one more band holds
/// everything above the last bound. Enough to estimate a p95 within a band's width.
pub const LATENCY_BOUNDS_MS: [i64; 15] = [
    5, 10, 25, 50, 75, 100, 150, 250, 400, 600, 1_000, 1_500, 2_500, 5_000, 10_000,
];
pub const LATENCY_BANDS: usize = LATENCY_BOUNDS_MS.len() + 1;

/// The width of a bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Resolution {
    Minute,
    Hour,
    Day,
}

impl Resolution {
    pub const ALL: [Resolution; 3] = [Resolution::Minute, Resolution::Hour, Resolution::Day];
    /// The resolutions ingest writes buckets of. A minute bucket would hold one result at the
    /// usual intervals: at 100,000 monitors its row and key were a third of the writes per
    /// result (docs/benchmarks.md), for what the results themselves already say.
    pub const STORED: [Resolution; 2] = [Resolution::Hour, Resolution::Day];
    /// The resolution ingest writes and credits time to: days are folded from closed hours
    /// (`store::rollup_folding`), a day row once per hour rather than once per result.
    pub const WRITTEN: Resolution = Resolution::Hour;

    pub fn width_ms(self) -> i64 {
        match self {
            Resolution::Minute => 60_000,
            Resolution::Hour => 3_600_000,
            Resolution::Day => 86_400_000,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Resolution::Minute => "minute",
            Resolution::Hour => "hour",
            Resolution::Day => "day",
        }
    }

    /// The start of the bucket holding `ts`.
    pub fn bucket_of(self, ts: i64) -> i64 {
        ts.div_euclid(self.width_ms()) * self.width_ms()
    }
}

/// What a bucket (or a sum of buckets) counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RollupSums {
    pub up: i64,
    pub down: i64,
    /// Every result, `rate_limited` ones included.
    pub total: i64,
    /// Latency is counted over `up` results that carry one: a failure's time says how long the
    /// check waited, not how fast the target is.
    pub latency_count: i64,
    pub latency_sum: i64,
    pub latency_min: Option<i64>,
    pub latency_max: Option<i64>,
    /// Counts of `up` latencies per band of `LATENCY_BOUNDS_MS`.
    pub bands: [i64; LATENCY_BANDS],
    /// Milliseconds of the bucket the results stood for up, and for down (`service::uptime`);
    /// the rest of the bucket is unmeasured. Zero in buckets written before migration 21.
    pub up_ms: i64,
    pub down_ms: i64,
}

impl RollupSums {
    /// Counts one result of `status` (and its latency, when up).
    pub fn count(&mut self, status: &str, latency_ms: Option<i64>) {
        self.total += 1;
        match status {
            "up" => self.up += 1,
            "down" => self.down += 1,
            _ => return,
        }
        let Some(latency) = latency_ms.filter(|_| status == "up") else {
            return;
        };
        self.latency_count += 1;
        self.latency_sum += latency;
        self.latency_min = Some(self.latency_min.map_or(latency, |min| min.min(latency)));
        self.latency_max = Some(self.latency_max.map_or(latency, |max| max.max(latency)));
        let band = LATENCY_BOUNDS_MS.partition_point(|&bound| bound < latency);
        self.bands[band] += 1;
    }

    /// Adds another bucket's (or sum's) counts, time and latency to these.
    pub fn add(&mut self, other: &RollupSums) {
        self.up += other.up;
        self.down += other.down;
        self.total += other.total;
        self.latency_count += other.latency_count;
        self.latency_sum += other.latency_sum;
        self.up_ms += other.up_ms;
        self.down_ms += other.down_ms;
        for (band, count) in self.bands.iter_mut().zip(other.bands) {
            *band += count;
        }
        let pick = |a: Option<i64>, b: Option<i64>, f: fn(i64, i64) -> i64| match (a, b) {
            (Some(a), Some(b)) => Some(f(a, b)),
            (a, b) => a.or(b),
        };
        self.latency_min = pick(self.latency_min, other.latency_min, i64::min);
        self.latency_max = pick(self.latency_max, other.latency_max, i64::max);
    }

    /// The delta as ingest's upsert binds it (`upsert`): the key and the extremes
    /// (`DELTA_KEY`), the sums (`COUNTED`), then the bands.
    fn values<'k>(&self, key: &'k RollupKey) -> Vec<Arg<'k>> {
        let mut row = vec![
            Arg::from(key.monitor_id.as_str()),
            key.region.as_str().into(),
            key.resolution.as_str().into(),
            key.bucket_start.into(),
            self.latency_min.into(),
            self.latency_max.into(),
        ];
        row.extend(
            [
                self.up,
                self.down,
                self.total,
                self.latency_count,
                self.latency_sum,
                self.up_ms,
                self.down_ms,
            ]
            .map(Arg::from),
        );
        row.extend(self.bands.map(Arg::from));
        row
    }

    pub(super) fn from_row(row: &AnyRow) -> sqlx::Result<Self> {
        let mut bands = [0; LATENCY_BANDS];
        for (band, count) in bands.iter_mut().enumerate() {
            *count = row.try_get(format!("lat_{band}").as_str())?;
        }
        Ok(Self {
            up: row.try_get("up")?,
            down: row.try_get("down")?,
            total: row.try_get("total")?,
            latency_count: row.try_get("latency_count")?,
            latency_sum: row.try_get("latency_sum")?,
            latency_min: row.try_get("latency_min")?,
            latency_max: row.try_get("latency_max")?,
            bands,
            up_ms: row.try_get("up_ms")?,
            down_ms: row.try_get("down_ms")?,
        })
    }
}

/// One stored bucket.
#[derive(Debug, Clone)]
pub struct RollupRow {
    pub monitor_id: String,
    pub region: String,
    pub bucket_start: i64,
    pub sums: RollupSums,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct RollupKey {
    monitor_id: String,
    region: String,
    resolution: Resolution,
    bucket_start: i64,
}

const HOUR: Resolution = Resolution::WRITTEN;

/// A bucket an upsert wrote, as its `RETURNING` names it: monitor, region, start, `folded`.
type Key = (String, String, i64, i64);

/// The counts newly stored results add to their hour buckets (days are folded from hours,
/// `rollup_folding`), for the whole monitor and for the result's location, with the time they
/// credit; in key order, so that concurrent batches take row locks in one order on PostgreSQL.
fn rollup_deltas(results: &[&NewResult], credits: &Credits) -> BTreeMap<RollupKey, RollupSums> {
    let mut deltas: BTreeMap<RollupKey, RollupSums> = BTreeMap::new();
    let hourly = |credit: &&(String, String, super::TimeCredit)| credit.2.resolution == HOUR;
    for (monitor_id, region, credit) in credits.iter().filter(hourly) {
        let key = RollupKey {
            monitor_id: monitor_id.clone(),
            region: region.clone(),
            resolution: HOUR,
            bucket_start: credit.bucket_start,
        };
        let sums = deltas.entry(key).or_default();
        sums.up_ms += credit.up_ms;
        sums.down_ms += credit.down_ms;
    }
    for result in results {
        let regions = std::iter::once("").chain(result.region.as_deref());
        for region in regions {
            let key = RollupKey {
                monitor_id: result.monitor_id.clone(),
                region: region.to_string(),
                resolution: HOUR,
                bucket_start: HOUR.bucket_of(result.ts),
            };
            deltas
                .entry(key)
                .or_default()
                .count(result.status.as_str(), result.latency_ms);
        }
    }
    deltas
}

fn band_columns() -> impl Iterator<Item = String> {
    (0..LATENCY_BANDS).map(|band| format!("lat_{band}"))
}

/// A delta's first columns (`RollupSums::values`): which bucket, and the extremes.
const DELTA_KEY: [&str; 6] = [
    "monitor_id",
    "region",
    "resolution",
    "bucket_start",
    "latency_min",
    "latency_max",
];

/// The sums a delta adds, in the order of `RollupSums::values`.
const COUNTED: [&str; 7] = [
    "up",
    "down",
    "total",
    "latency_count",
    "latency_sum",
    "up_ms",
    "down_ms",
];

/// Rows of buckets per statement (PostgreSQL; SQLite's upsert is one row a statement).
const ROLLUP_CHUNK: usize = 500;

/// The columns that sum: the counts, the time, the bands.
pub(super) fn summed_columns() -> Vec<String> {
    COUNTED
        .iter()
        .map(|c| c.to_string())
        .chain(band_columns())
        .collect()
}

/// How an insert of buckets meets the buckets already there: it adds to them (the extremes by
/// `MIN` and `MAX`). Ingest's and the fold's (`rollup_folding`).
pub(super) fn adding_on_conflict() -> String {
    let sums = summed_columns()
        .iter()
        .map(|column| format!("{column} = rollups.{column} + excluded.{column}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "ON CONFLICT (monitor_id, region, resolution, bucket_start) DO UPDATE SET {sums}, \
            latency_min = CASE WHEN rollups.latency_min IS NULL \
                OR excluded.latency_min < rollups.latency_min \
                THEN excluded.latency_min ELSE rollups.latency_min END, \
            latency_max = CASE WHEN rollups.latency_max IS NULL \
                OR excluded.latency_max > rollups.latency_max \
                THEN excluded.latency_max ELSE rollups.latency_max END"
    )
}

/// Ingest's upsert of deltas: on SQLite one row a statement, its values bound as `$1`… in the
/// order of `RollupSums::values`; on PostgreSQL a chunk of rows a statement, `$1` a JSON array
/// of them (`statements`' note says why). Hour rows start unfolded, and the statement returns
/// each hour row's key and whether it was folded already; day rows (added to directly, for
/// hours folded already) are folded from the start.
///
/// Built once per backend and resolution: built per call, its text was some 115 allocations,
/// twice an upload.
fn upsert(backend: super::Backend, resolution: Resolution) -> &'static str {
    static TEXTS: LazyLock<[[String; 2]; 2]> = LazyLock::new(|| {
        super::Backend::BOTH.map(|backend| Resolution::STORED.map(|r| build_upsert(backend, r)))
    });
    debug_assert_eq!(Resolution::STORED, [HOUR, Resolution::Day]);
    &TEXTS[backend as usize][usize::from(resolution != HOUR)]
}

/// `upsert`'s text for one backend and resolution.
fn build_upsert(backend: super::Backend, resolution: Resolution) -> String {
    let summed = summed_columns();
    let count = DELTA_KEY.len() + summed.len();
    let source = if backend.binds_each_row() {
        let values: Vec<String> = (1..=count).map(|n| format!("${n}")).collect();
        format!("VALUES ({}, FOLDED)", values.join(", "))
    } else {
        // By position: the key, then the sums.
        let at = |position: usize| format!("r.value ->> {position}");
        let texts = (0..3).map(at);
        let numbers = (3..count).map(|position| format!("CAST({} AS BIGINT)", at(position)));
        format!(
            "SELECT {}, FOLDED FROM {} WHERE true",
            texts.chain(numbers).collect::<Vec<_>>().join(", "),
            json_rows(backend, "$1"),
        )
    };
    let (folded, returning) = match resolution {
        HOUR => (
            "0",
            " RETURNING monitor_id, region, bucket_start, CAST(folded AS BIGINT)",
        ),
        _ => ("1", ""),
    };
    format!(
        "INSERT INTO rollups ({}, {}, folded) {} {}{returning}",
        DELTA_KEY.join(", "),
        summed.join(", "),
        source.replace("FOLDED", folded),
        adding_on_conflict(),
    )
}

/// The first day boundary at or after `ts`: an hour's day starts at or after `ts` exactly when
/// the hour does.
pub(super) fn day_at_or_after(ts: i64) -> i64 {
    let day = Resolution::Day.width_ms();
    ts.saturating_add(day - 1).div_euclid(day) * day
}

/// On SQLite, the hint that reads of unfolded hours take the small partial index
/// (`rollups_unfolded`) rather than the key, which would walk every hour of the window.
pub(super) fn unfolded_index(backend: super::Backend) -> String {
    super::dialect::indexed_by(backend, "rollups_unfolded")
}

impl Store {
    /// Adds the counts of newly stored results to their hour buckets (inside the results'
    /// insert), and to their day buckets for the hours already folded into them (a late
    /// result: `rollup_folding`). A hour row is locked by the upsert until the transaction
    /// ends, so the fold on PostgreSQL either waits for this result or has already set
    /// `folded` when the upsert reads it: the result is in its day exactly once.
    pub(super) async fn add_to_rollups(
        &self,
        tx: &mut impl Statements,
        results: &[&NewResult],
        credits: &Credits,
    ) -> anyhow::Result<()> {
        let hours = rollup_deltas(results, credits);
        let mut days: BTreeMap<RollupKey, RollupSums> = BTreeMap::new();
        for (monitor_id, region, bucket_start, folded) in self.add_deltas(tx, HOUR, &hours).await? {
            if folded == 0 {
                continue;
            }
            let hour = RollupKey {
                monitor_id,
                region,
                resolution: HOUR,
                bucket_start,
            };
            let Some(sums) = hours.get(&hour) else {
                continue;
            };
            let day = RollupKey {
                resolution: Resolution::Day,
                bucket_start: Resolution::Day.bucket_of(bucket_start),
                ..hour
            };
            days.entry(day).or_default().add(sums);
        }
        self.add_deltas(tx, Resolution::Day, &days).await?;
        Ok(())
    }

    /// Adds `deltas` to their buckets of `resolution` (`upsert`), and returns what the
    /// statements returned: for hours, each row's key and flag.
    async fn add_deltas(
        &self,
        tx: &mut impl Statements,
        resolution: Resolution,
        deltas: &BTreeMap<RollupKey, RollupSums>,
    ) -> anyhow::Result<Vec<Key>> {
        // Most uploads add to no day (a day is only added to for a late result's hour).
        if deltas.is_empty() {
            return Ok(Vec::new());
        }
        let sql = upsert(self.backend(), resolution);
        let key = |row: &dyn Columns| Ok((row.text(0)?, row.text(1)?, row.int(2)?, row.int(3)?));
        let rows: Vec<Vec<Arg>> = deltas.iter().map(|(key, sums)| sums.values(key)).collect();
        if self.backend().binds_each_row() {
            return tx.read_each(sql, &rows, key).await;
        }
        let mut written = Vec::new();
        for chunk in rows.chunks(ROLLUP_CHUNK) {
            let chunk: Vec<Vec<serde_json::Value>> = chunk
                .iter()
                .map(|row| row.iter().copied().map(Arg::to_json).collect())
                .collect();
            let chunk = serde_json::to_string(&chunk)?;
            let args = [vec![Arg::from(&chunk)]];
            written.extend(tx.read_each(sql, &args, key).await?);
        }
        Ok(written)
    }

    /// The sums of each monitor's buckets of `resolution` starting in `[from, until)`, for the
    /// whole monitor (`region` `''`) or one location. Monitors without buckets are absent. Day
    /// sums include the hours not folded into their day yet (`rollup_folding`), read in the
    /// same statement, so a fold between them cannot count an hour twice or not at all.
    pub async fn rollup_sums(
        &self,
        monitor_ids: &[String],
        region: &str,
        resolution: Resolution,
        from: i64,
        until: i64,
    ) -> anyhow::Result<HashMap<String, RollupSums>> {
        let summed = summed_columns()
            .into_iter()
            .map(|column| format!("CAST(COALESCE(SUM({column}), 0) AS BIGINT) AS {column}"))
            .collect::<Vec<_>>()
            .join(", ");
        let mut sums = HashMap::with_capacity(monitor_ids.len());
        for chunk in monitor_ids.chunks(500) {
            let ids = placeholders(7, chunk.len());
            let mut buckets = format!(
                "SELECT * FROM rollups WHERE region = $1 AND resolution = $2 \
                    AND bucket_start >= $3 AND bucket_start < $4 AND monitor_id IN ({ids})"
            );
            if resolution == Resolution::Day {
                buckets += &format!(
                    " UNION ALL SELECT * FROM rollups{} WHERE folded = 0 AND region = $1 \
                        AND resolution = 'hour' AND bucket_start >= $5 AND bucket_start < $6 \
                        AND monitor_id IN ({ids})",
                    unfolded_index(self.backend())
                );
            }
            let sql = format!(
                "SELECT monitor_id, {summed}, MIN(latency_min) AS latency_min, \
                    MAX(latency_max) AS latency_max \
                 FROM ({buckets}) AS b GROUP BY monitor_id"
            );
            let mut query = sqlx::query(&sql)
                .bind(region)
                .bind(resolution.as_str())
                .bind(from)
                .bind(until)
                .bind(day_at_or_after(from))
                .bind(day_at_or_after(until));
            for id in chunk {
                query = query.bind(id);
            }
            for row in query.fetch_all(&self.pool).await? {
                sums.insert(row.try_get("monitor_id")?, RollupSums::from_row(&row)?);
            }
        }
        Ok(sums)
    }

    /// A monitor's buckets of `resolution` from `since` on, oldest first: the whole monitor's
    /// (`region` `''`) or one location's. Day buckets include the hours not folded into them
    /// yet (`rollup_folding`), read in the same statement.
    pub async fn rollup_buckets(
        &self,
        monitor_id: &str,
        region: &str,
        resolution: Resolution,
        since: i64,
        limit: u32,
    ) -> anyhow::Result<Vec<RollupRow>> {
        let mut sql = "SELECT * FROM (SELECT * FROM rollups WHERE monitor_id = $1 \
                AND region = $2 AND resolution = $3 AND bucket_start >= $4 \
                ORDER BY bucket_start LIMIT $5) AS b"
            .to_string();
        if resolution == Resolution::Day {
            sql += &format!(
                " UNION ALL SELECT * FROM rollups{} WHERE folded = 0 AND monitor_id = $1 \
                    AND region = $2 AND resolution = 'hour' AND bucket_start >= $6",
                unfolded_index(self.backend())
            );
        }
        let rows = sqlx::query(&sql)
            .bind(monitor_id)
            .bind(region)
            .bind(resolution.as_str())
            .bind(since)
            .bind(i64::from(limit))
            .bind(day_at_or_after(since))
            .fetch_all(&self.pool)
            .await?;
        // Each bucket once: an unfolded hour adds to its day's bucket, stored or not yet.
        let mut buckets: BTreeMap<i64, RollupSums> = BTreeMap::new();
        for row in &rows {
            let start: i64 = row.try_get("bucket_start")?;
            let sums = RollupSums::from_row(row)?;
            buckets
                .entry(resolution.bucket_of(start))
                .or_default()
                .add(&sums);
        }
        Ok(buckets
            .into_iter()
            .take(limit as usize)
            .map(|(bucket_start, sums)| RollupRow {
                monitor_id: monitor_id.to_string(),
                region: region.to_string(),
                bucket_start,
                sums,
            })
            .collect())
    }

    /// Deletes up to `limit` buckets of `resolution` that started before `before`; returns how
    /// many, so the caller can go on in small steps that never hold the writer long. Hours not
    /// folded into their day yet (`rollup_folding`) are kept until they are.
    pub async fn prune_rollups(
        &self,
        resolution: Resolution,
        before: i64,
        limit: u32,
    ) -> anyhow::Result<u64> {
        let _guard = self.write_lock().await;
        let deleted = sqlx::query(
            "DELETE FROM rollups WHERE (monitor_id, region, resolution, bucket_start) IN \
             (SELECT monitor_id, region, resolution, bucket_start FROM rollups \
              WHERE resolution = $1 AND bucket_start < $2 AND folded = 1 LIMIT $3)",
        )
        .bind(resolution.as_str())
        .bind(before)
        .bind(i64::from(limit))
        .execute(&self.writer)
        .await?;
        Ok(deleted.rows_affected())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing::sqlite_store;

    use crate::service::ingest::batch::store_standing;
    use crate::service::testing::NewestDecides;
    fn result(id: &str, ts: i64, status: &str, latency: i64, region: Option<&str>) -> NewResult {
        NewResult {
            id: id.into(),
            monitor_id: "m1".into(),
            region: region.map(Into::into),
            ts,
            status: shared_proto::poller_api::ResultStatus::parse(status).unwrap(),
            latency_ms: Some(latency),
            msg: String::new(),
            meta: "{}".into(),
            next_due_at: None,
            dependencies: None,
        }
    }

    #[test]
    fn latency_bands_hold_their_upper_bound() {
        let mut sums = RollupSums::default();
        for latency in [0, 5, 6, 10_000, 10_001] {
            sums.count("up", Some(latency));
        }
        assert_eq!(sums.bands[0], 2, "0 and 5 ms");
        assert_eq!(sums.bands[1], 1, "6 ms");
        assert_eq!(sums.bands[LATENCY_BANDS - 2], 1, "10 s");
        assert_eq!(sums.bands[LATENCY_BANDS - 1], 1, "above 10 s");
        sums.count("down", Some(30_000));
        sums.count("rate_limited", None);
        assert_eq!((sums.up, sums.down, sums.total), (5, 1, 7));
        assert_eq!((sums.latency_count, sums.latency_max), (5, Some(10_001)));
    }

    /// One batch's results in one bucket make one delta: each of its columns lands in its own.
    #[tokio::test]
    async fn a_delta_fills_each_column_of_its_bucket() {
        let (store, _dir) = sqlite_store().await;
        let hour = 3_600_000;
        let batch = [
            result("x", hour + 1_000, "up", 30, None),
            result("y", hour + 2_000, "up", 700, None),
            result("z", hour + 3_000, "down", 5, None),
        ];
        store_standing(&store, "p1", &batch, 1, &NewestDecides)
            .await
            .unwrap();
        let bucket = &store
            .rollup_buckets("m1", "", Resolution::Hour, hour, 1)
            .await
            .unwrap()[0];
        let sums = &bucket.sums;
        assert_eq!(bucket.bucket_start, hour);
        assert_eq!((sums.up, sums.down, sums.total), (2, 1, 3));
        assert_eq!((sums.latency_count, sums.latency_sum), (2, 730));
        assert_eq!((sums.latency_min, sums.latency_max), (Some(30), Some(700)));
        assert_eq!((sums.up_ms, sums.down_ms), (2_000, 0));
        let mut bands = [0; LATENCY_BANDS];
        bands[3] = 1; // 30 ms: up to 50
        bands[10] = 1; // 700 ms: up to 1,000
        assert_eq!(sums.bands, bands);
    }

    #[tokio::test]
    async fn stored_results_roll_up_once_per_bucket_and_location() {
        let (store, _dir) = sqlite_store().await;
        let hour = 3_600_000;
        let batch = vec![
            result("a", hour + 1_000, "up", 40, Some("eu")),
            result("b", hour + 61_000, "down", 900, Some("us")),
            result("c", 2 * hour + 5, "up", 60, Some("eu")),
        ];
        store_standing(&store, "p1", &batch, 1, &NewestDecides)
            .await
            .unwrap();
        store_standing(&store, "p1", &batch, 2, &NewestDecides)
            .await
            .unwrap();
        let ids = vec!["m1".to_string()];
        let whole = store
            .rollup_sums(&ids, "", Resolution::Hour, 0, 3 * hour)
            .await
            .unwrap()
            .remove("m1")
            .unwrap();
        assert_eq!(
            (whole.up, whole.down, whole.total),
            (2, 1, 3),
            "a re-upload counts nothing"
        );
        assert_eq!((whole.latency_count, whole.latency_sum), (2, 100));
        assert_eq!((whole.latency_min, whole.latency_max), (Some(40), Some(60)));
        let eu = store
            .rollup_sums(&ids, "eu", Resolution::Day, 0, 3 * hour)
            .await
            .unwrap()
            .remove("m1")
            .unwrap();
        assert_eq!((eu.up, eu.total), (2, 2));
        assert!(
            store
                .rollup_buckets("m1", "", Resolution::Minute, 0, 10)
                .await
                .unwrap()
                .is_empty(),
            "minute history is derived from the results, never stored"
        );
        // Time: a stands until b (60 s up), b for its cap of 2 minutes (down), c is the newest
        // and still open; per location, a stands its whole cap (eu has nothing newer until c).
        assert_eq!((whole.up_ms, whole.down_ms), (60_000, 120_000));
        assert_eq!((eu.up_ms, eu.down_ms), (120_000, 0));

        // A late result lands in its own (old) bucket and moves min and max.
        store_standing(
            &store,
            "p1",
            &[result("d", hour + 2_000, "up", 7, None)],
            3,
            &NewestDecides,
        )
        .await
        .unwrap();
        let first = &store
            .rollup_buckets("m1", "", Resolution::Hour, hour, 1)
            .await
            .unwrap()[0];
        assert_eq!((first.sums.up, first.sums.latency_min), (2, Some(7)));
        let whole = store
            .rollup_sums(&ids, "", Resolution::Hour, 0, 3 * hour)
            .await
            .unwrap()
            .remove("m1")
            .unwrap();
        assert_eq!(
            (whole.up_ms, whole.down_ms),
            (60_000, 120_000),
            "a late up result inside an up span moves no time"
        );

        assert_eq!(
            store
                .prune_rollups(Resolution::Hour, 2 * hour, 10)
                .await
                .unwrap(),
            0,
            "hours not folded into their day yet are kept"
        );
        let start = crate::store::HourKey::start();
        store.fold_hours(i64::MAX, &start, 100).await.unwrap();
        assert_eq!(
            store
                .prune_rollups(Resolution::Hour, 2 * hour, 1)
                .await
                .unwrap(),
            1
        );
        assert_eq!(
            store
                .prune_rollups(Resolution::Hour, 2 * hour, 10)
                .await
                .unwrap(),
            2,
            "the other two of the first hour's: the whole monitor's, eu's and us'"
        );
        let left = store
            .rollup_buckets("m1", "", Resolution::Hour, 0, 10)
            .await
            .unwrap();
        assert_eq!(left.len(), 1);
    }
}
