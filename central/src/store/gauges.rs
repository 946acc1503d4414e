//! What `/metrics` shows of monitors and their locations, read as stored: the status each
//! showed at alerting's last look (`shown_status`) and the latency of its newest result. No
//! derivation here or in the caller: a scrape costs one pass over those rows, not a status
//! derived per monitor. Must not: decide a status (that is `service::alerts`, which writes
//! `shown_status`).

use futures_util::TryStreamExt;
use sqlx::{Any, Transaction};

use super::packed::{packed, unpack};
use super::{Backend, Store};

/// One monitor (`region` `None`) or one location of it, as last shown.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct ShownRow {
    pub monitor_id: String,
    pub name: String,
    #[serde(default)]
    pub region: Option<String>,
    /// `None` before alerting's first look at it.
    pub status: Option<String>,
    pub latency_ms: Option<i64>,
}

/// Rows per read on SQLite: one packed value each (`packed`), so a scrape of 100,000 monitors
/// is a hundred reads, not 100,000 rows handed over one by one from sqlx's worker thread.
const PAGE: i64 = 1_000;

/// The columns every read selects, as (name, expression); `region` is NULL for monitors.
type Columns<'a> = [(&'a str, &'a str); 5];

/// What one kind of row is read from: its columns and its tables.
struct Source<'a> {
    columns: Columns<'a>,
    from: &'a str,
}

const MONITORS: Source = Source {
    columns: [
        ("monitor_id", "m.id"),
        ("region", "CAST(NULL AS TEXT)"),
        ("name", "m.name"),
        ("status", "m.shown_status"),
        ("latency_ms", "s.latency_ms"),
    ],
    from: "FROM monitors m LEFT JOIN monitor_status s ON s.monitor_id = m.id",
};

const LOCATIONS: Source = Source {
    columns: [
        ("monitor_id", "l.monitor_id"),
        ("region", "l.region"),
        ("name", "m.name"),
        ("status", "l.shown_status"),
        ("latency_ms", "s.latency_ms"),
    ],
    from: "FROM monitor_locations l JOIN monitors m ON m.id = l.monitor_id \
           LEFT JOIN location_status s ON s.monitor_id = l.monitor_id AND s.region = l.region",
};

/// On SQLite monitors are read alone (their latencies joined here, from `monitor_status`
/// read in its own storage order): a join per page seeks the status table's index once per
/// monitor, and those seeks were most of a scrape.
const MONITORS_ALONE: Source = Source {
    columns: [
        ("monitor_id", "m.id"),
        ("region", "CAST(NULL AS TEXT)"),
        ("name", "m.name"),
        ("status", "m.shown_status"),
        ("latency_ms", "CAST(NULL AS INTEGER)"),
    ],
    from: "FROM monitors m",
};

/// A row of a SQLite page, with where it is stored (the next page starts after it).
trait Paged: serde::de::DeserializeOwned {
    fn position(&self) -> i64;
}

#[derive(serde::Deserialize)]
struct PagedRow {
    position: i64,
    monitor_id: String,
    name: String,
    #[serde(default)]
    region: Option<String>,
    status: Option<String>,
    latency_ms: Option<i64>,
}

impl Paged for PagedRow {
    fn position(&self) -> i64 {
        self.position
    }
}

#[derive(serde::Deserialize)]
struct LatencyRow {
    position: i64,
    monitor_id: String,
    latency_ms: Option<i64>,
}

impl Paged for LatencyRow {
    fn position(&self) -> i64 {
        self.position
    }
}

impl Store {
    /// Every monitor, then every location, as last shown, in no particular order; `each` is
    /// called per row. On PostgreSQL each kind is one streamed query (no order asked, so the
    /// planner may join by hashing: 100,000 monitors in about 0.1 s by `EXPLAIN ANALYZE`). On
    /// SQLite pages of `PAGE` rows follow each table's storage order (its rowid): a
    /// sequential stretch of the table each, instead of an index walk with a seek into the
    /// table per row; monitors' latencies are read the same way and joined here
    /// (`MONITORS_ALONE`), all in one read transaction. On PostgreSQL monitors and locations are
    /// two reads, not one snapshot: a row that changes between them shows either state.
    /// Memory: a row at a time on PostgreSQL; on SQLite two pages, plus a latency per
    /// monitor while monitors are read.
    pub async fn each_shown(&self, mut each: impl FnMut(ShownRow)) -> anyhow::Result<()> {
        if self.backend() == Backend::Postgres {
            self.each_streamed(&MONITORS, &mut each).await?;
            return self.each_streamed(&LOCATIONS, &mut each).await;
        }
        // One read transaction for every page: SQLite drops a connection's page cache when
        // a read begins after another connection wrote, so under ingest a read per page
        // fetched its pages from the OS again; within one transaction the cache holds, and
        // the scrape is one snapshot.
        let tx = self.pool.begin().await?;
        let mut latencies = foldhash::HashMap::default();
        let latency = [
            ("monitor_id", "s.monitor_id"),
            ("latency_ms", "s.latency_ms"),
            ("position", "s.rowid"),
        ];
        let from = "FROM monitor_status s";
        let tx = each_paged(tx, &latency, from, "s", |row: LatencyRow| {
            if let Some(ms) = row.latency_ms {
                latencies.insert(row.monitor_id, ms);
            }
        })
        .await?;
        let mut columns = MONITORS_ALONE.columns.to_vec();
        columns.push(("position", "m.rowid"));
        let tx = each_paged(tx, &columns, MONITORS_ALONE.from, "m", |row: PagedRow| {
            let latency_ms = latencies.remove(&row.monitor_id);
            each(row.shown(latency_ms));
        })
        .await?;
        let mut columns = LOCATIONS.columns.to_vec();
        columns.push(("position", "l.rowid"));
        let tx = each_paged(tx, &columns, LOCATIONS.from, "l", |row: PagedRow| {
            let latency_ms = row.latency_ms;
            each(row.shown(latency_ms));
        })
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn each_streamed(
        &self,
        source: &Source<'_>,
        each: &mut impl FnMut(ShownRow),
    ) -> anyhow::Result<()> {
        let select: Vec<String> = source
            .columns
            .iter()
            .map(|(name, expression)| format!("{expression} AS {name}"))
            .collect();
        let sql = format!("SELECT {} {}", select.join(", "), source.from);
        type Row = (String, Option<String>, String, Option<String>, Option<i64>);
        let mut rows = sqlx::query_as::<_, Row>(&sql).fetch(&self.pool);
        while let Some((monitor_id, region, name, status, latency_ms)) = rows.try_next().await? {
            each(ShownRow {
                monitor_id,
                name,
                region,
                status,
                latency_ms,
            });
        }
        Ok(())
    }
}

/// `SELECT columns from`, in pages of `PAGE` rows in the storage order of the table `alias`
/// names, on SQLite, inside `tx`; `columns` include that table's rowid as `position`. The
/// next page is being read by SQLite (on sqlx's worker thread, the transaction handed to a
/// task and back) while `each` takes this one's rows, so reading and rendering overlap
/// instead of taking turns.
async fn each_paged<T: Paged>(
    tx: Transaction<'static, Any>,
    columns: &[(&str, &str)],
    from: &str,
    alias: &str,
    mut each: impl FnMut(T),
) -> anyhow::Result<Transaction<'static, Any>> {
    let rest = format!("{from} WHERE {alias}.rowid > $1 ORDER BY {alias}.rowid LIMIT {PAGE}");
    let sql = packed(Backend::Sqlite, columns, &rest, "position");
    let read = |mut tx: Transaction<'static, Any>, after: i64| {
        let sql = sql.clone();
        tokio::spawn(async move {
            let page: Result<(String,), _> =
                sqlx::query_as(&sql).bind(after).fetch_one(&mut *tx).await;
            (tx, page)
        })
    };
    let mut reading = read(tx, 0);
    loop {
        let (tx, page) = reading.await?;
        let rows: Vec<T> = unpack(&page?.0)?;
        if rows.len() as i64 != PAGE {
            rows.into_iter().for_each(each);
            return Ok(tx);
        }
        let after = rows.iter().map(Paged::position).max().unwrap_or_default();
        reading = read(tx, after);
        rows.into_iter().for_each(&mut each);
    }
}

impl PagedRow {
    fn shown(self, latency_ms: Option<i64>) -> ShownRow {
        ShownRow {
            monitor_id: self.monitor_id,
            name: self.name,
            region: self.region,
            status: self.status,
            latency_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::store::testing::sqlite_store;

    #[tokio::test]
    async fn every_monitor_and_location_is_read_once_across_pages() {
        let (store, _dir) = sqlite_store().await;
        // 2,345 monitors (pages of 1,000 and a part), each with two locations (4,690 rows),
        // and every third one showing `down`.
        sqlx::query(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2345) \
             INSERT INTO monitors (id, name, kind, target, interval_ms, timeout_ms, settings, \
                poller_mode, created_at, updated_at, revision, shown_status) \
             SELECT printf('m%05d', i), printf('name %d', i), 'http', 'http://x', 60000, \
                10000, '{}', 'multi', 0, 0, 1, CASE WHEN i % 3 = 0 THEN 'down' END FROM n",
        )
        .execute(&store.pool)
        .await
        .unwrap();
        sqlx::query(
            "INSERT INTO monitor_locations (monitor_id, region) \
             SELECT id, 'eu' FROM monitors UNION ALL SELECT id, 'us' FROM monitors",
        )
        .execute(&store.pool)
        .await
        .unwrap();
        // Latencies of every fifth monitor and of each one's `us` location, joined by key
        // whatever order pages follow.
        sqlx::query(
            "INSERT INTO monitor_status (monitor_id, status, poller_id, last_result_id, \
                last_result_at, latency_ms, message) \
             SELECT id, 'up', 'p', 'r', 0, CAST(substr(id, 2) AS INTEGER), '' FROM monitors \
             WHERE CAST(substr(id, 2) AS INTEGER) % 5 = 0",
        )
        .execute(&store.pool)
        .await
        .unwrap();
        sqlx::query(
            "INSERT INTO location_status (monitor_id, region, status, poller_id, \
                last_result_id, last_result_at, latency_ms, message) \
             SELECT id, 'us', 'up', 'p', 'r', 0, 7, '' FROM monitors",
        )
        .execute(&store.pool)
        .await
        .unwrap();
        let mut rows = Vec::new();
        store.each_shown(|row| rows.push(row)).await.unwrap();
        for row in &rows {
            let number: i64 = row.monitor_id[1..].parse().unwrap();
            let latency = match row.region.as_deref() {
                None => (number % 5 == 0).then_some(number),
                Some("us") => Some(7),
                Some(_) => None,
            };
            assert_eq!(row.latency_ms, latency, "{row:?}");
        }
        let monitors: Vec<_> = rows.iter().filter(|r| r.region.is_none()).collect();
        let locations: Vec<_> = rows.iter().filter(|r| r.region.is_some()).collect();
        assert_eq!(monitors.len(), 2345);
        assert_eq!(locations.len(), 4690);
        let distinct: std::collections::BTreeSet<_> = locations
            .iter()
            .map(|r| (&r.monitor_id, &r.region))
            .collect();
        assert_eq!(distinct.len(), 4690, "a location read twice");
        assert_eq!(
            monitors
                .iter()
                .filter(|r| r.status.as_deref() == Some("down"))
                .count(),
            781
        );
        let third = monitors.iter().find(|r| r.monitor_id == "m00003").unwrap();
        assert_eq!(third.name, "name 3");
        assert_eq!(third.status.as_deref(), Some("down"));
        assert_eq!(third.latency_ms, None);
    }

    /// A last page that is exactly full is followed by an empty one, and nothing is lost.
    #[tokio::test]
    async fn a_table_of_exactly_full_pages_is_read_whole() {
        let (store, _dir) = sqlite_store().await;
        sqlx::query(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000) \
             INSERT INTO monitors (id, name, kind, target, interval_ms, timeout_ms, settings, \
                poller_mode, created_at, updated_at, revision) \
             SELECT printf('m%05d', i), 'n', 'http', 'http://x', 60000, 10000, '{}', 'auto', \
                0, 0, 1 FROM n",
        )
        .execute(&store.pool)
        .await
        .unwrap();
        let mut ids = std::collections::BTreeSet::new();
        store
            .each_shown(|row| assert!(ids.insert(row.monitor_id), "read twice"))
            .await
            .unwrap();
        assert_eq!(ids.len(), 2_000);
    }

    /// A scrape on SQLite is one snapshot: what is written while its first page is being
    /// rendered shows in none of its later pages.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_during_a_scrape_shows_in_none_of_its_pages() {
        let (store, _dir) = sqlite_store().await;
        sqlx::query(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3500) \
             INSERT INTO monitors (id, name, kind, target, interval_ms, timeout_ms, settings, \
                poller_mode, created_at, updated_at, revision, shown_status) \
             SELECT printf('m%05d', i), 'n', 'http', 'http://x', 60000, 10000, '{}', 'auto', \
                0, 0, 1, 'up' FROM n",
        )
        .execute(&store.pool)
        .await
        .unwrap();
        let mut statuses = std::collections::BTreeMap::<String, usize>::new();
        let mut written = false;
        store
            .each_shown(|row| {
                if !written {
                    written = true;
                    let write = sqlx::query("UPDATE monitors SET shown_status = 'down'")
                        .execute(&store.writer);
                    let done = tokio::task::block_in_place(|| {
                        tokio::runtime::Handle::current().block_on(write)
                    });
                    assert_eq!(done.unwrap().rows_affected(), 3500);
                }
                *statuses.entry(row.status.unwrap_or_default()).or_default() += 1;
            })
            .await
            .unwrap();
        assert_eq!(statuses, [("up".to_string(), 3500)].into());
    }
}
