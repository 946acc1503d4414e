//! What `/metrics` shows of monitors and their locations, read as stored: the status each
//! showed at alerting's last look (`shown_status`) and the latency of its newest result. No
//! derivation here or in the caller: a scrape costs one pass over those rows, not a status
//! derived per monitor. Must not: decide a status (that is `service::alerts`, which writes
//! `shown_status`).

use std::path::Path;
use std::time::Duration;

use futures_util::TryStreamExt;
use rusqlite::{OpenFlags, TransactionBehavior};
use tokio::sync::mpsc;

use super::{Backend, Store};

/// One monitor (`region` `None`) or one location of it, as last shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShownRow {
    pub monitor_id: String,
    pub name: String,
    pub region: Option<String>,
    /// `None` before alerting's first look at it.
    pub status: Option<String>,
    pub latency_ms: Option<i64>,
}

/// Rows handed at a time from the SQLite reading thread to the scrape.
const CHUNK: usize = 1_000;

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

impl Source<'_> {
    fn select(&self) -> String {
        let select: Vec<String> = self
            .columns
            .iter()
            .map(|(name, expression)| format!("{expression} AS {name}"))
            .collect();
        format!("SELECT {} {}", select.join(", "), self.from)
    }
}

impl Store {
    /// Every monitor, then every location, as last shown, in no particular order; `each` is
    /// called per row.
    ///
    /// On PostgreSQL each kind is one streamed query (no order asked, so the planner may join
    /// by hashing: 100,000 monitors in about 0.1 s by `EXPLAIN ANALYZE`); monitors and
    /// locations are two reads, not one snapshot: a row that changes between them shows
    /// either state. Memory: a row at a time.
    ///
    /// On SQLite a thread of its own reads them with a connection of its own (`rusqlite`) in
    /// one read transaction, so the scrape is one snapshot, and hands rows over `CHUNK` at a
    /// time while the scrape writes the previous ones. Through sqlx every row is a message
    /// from its worker thread, and the pages of packed JSON read before were SQLite building
    /// and serde parsing every row's JSON (docs/benchmarks.md). Monitors are read in storage
    /// order with their latencies joined here from `monitor_status`, also read in its storage
    /// order: a join seeks the status table's index once per monitor. Memory: three chunks
    /// and a latency per monitor.
    pub async fn each_shown(&self, mut each: impl FnMut(ShownRow)) -> anyhow::Result<()> {
        let Some(file) = self.sqlite_file.clone() else {
            self.each_streamed(&MONITORS, &mut each).await?;
            return self.each_streamed(&LOCATIONS, &mut each).await;
        };
        let (chunks, mut received) = mpsc::channel(1);
        let reading = tokio::task::spawn_blocking(move || read_shown(&file, &chunks));
        while let Some(chunk) = received.recv().await {
            chunk.into_iter().for_each(&mut each);
        }
        reading.await?
    }

    async fn each_streamed(
        &self,
        source: &Source<'_>,
        each: &mut impl FnMut(ShownRow),
    ) -> anyhow::Result<()> {
        debug_assert_eq!(self.backend(), Backend::Postgres);
        type Row = (String, Option<String>, String, Option<String>, Option<i64>);
        let sql = source.select();
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

/// `each_shown` on SQLite, on a blocking thread: sends chunks of rows until done, or until
/// the scrape stops listening.
fn read_shown(file: &Path, chunks: &mpsc::Sender<Vec<ShownRow>>) -> anyhow::Result<()> {
    let mut db = rusqlite::Connection::open_with_flags(
        file,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    db.busy_timeout(Duration::from_secs(10))?;
    let snapshot = db.transaction_with_behavior(TransactionBehavior::Deferred)?;
    let mut latencies = foldhash::HashMap::default();
    let mut read = snapshot.prepare(
        "SELECT monitor_id, latency_ms FROM monitor_status WHERE latency_ms IS NOT NULL",
    )?;
    let mut rows = read.query([])?;
    while let Some(row) = rows.next()? {
        latencies.insert(row.get::<_, String>(0)?, row.get::<_, i64>(1)?);
    }
    drop(rows);
    let mut chunk = Vec::with_capacity(CHUNK);
    // `false` once the scrape is gone: nothing left to read for.
    let hand_over = |row: ShownRow, chunk: &mut Vec<ShownRow>| {
        chunk.push(row);
        chunk.len() < CHUNK
            || chunks
                .blocking_send(std::mem::replace(chunk, Vec::with_capacity(CHUNK)))
                .is_ok()
    };
    let mut read = snapshot.prepare("SELECT id, name, shown_status FROM monitors")?;
    let mut rows = read.query([])?;
    while let Some(row) = rows.next()? {
        let monitor_id: String = row.get(0)?;
        let latency_ms = latencies.remove(&monitor_id);
        let shown = ShownRow {
            monitor_id,
            name: row.get(1)?,
            region: None,
            status: row.get(2)?,
            latency_ms,
        };
        if !hand_over(shown, &mut chunk) {
            return Ok(());
        }
    }
    drop(rows);
    let mut read = snapshot.prepare(&LOCATIONS.select())?;
    let mut rows = read.query([])?;
    while let Some(row) = rows.next()? {
        let shown = ShownRow {
            monitor_id: row.get(0)?,
            region: row.get(1)?,
            name: row.get(2)?,
            status: row.get(3)?,
            latency_ms: row.get(4)?,
        };
        if !hand_over(shown, &mut chunk) {
            return Ok(());
        }
    }
    if !chunk.is_empty() {
        let _ = chunks.blocking_send(chunk);
    }
    Ok(())
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

    /// A scrape on SQLite is one snapshot: what is written while its first rows are being
    /// rendered shows in none of its later rows, monitors' or locations' (read by a later
    /// statement).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_during_a_scrape_shows_in_none_of_its_rows() {
        let (store, _dir) = sqlite_store().await;
        sqlx::query(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3500) \
             INSERT INTO monitors (id, name, kind, target, interval_ms, timeout_ms, settings, \
                poller_mode, created_at, updated_at, revision, shown_status) \
             SELECT printf('m%05d', i), 'n', 'http', 'http://x', 60000, 10000, '{}', 'multi', \
                0, 0, 1, 'up' FROM n",
        )
        .execute(&store.pool)
        .await
        .unwrap();
        sqlx::query(
            "INSERT INTO monitor_locations (monitor_id, region, shown_status) \
             SELECT id, 'eu', 'up' FROM monitors",
        )
        .execute(&store.pool)
        .await
        .unwrap();
        let mut statuses = std::collections::BTreeMap::<(bool, String), usize>::new();
        let mut written = false;
        store
            .each_shown(|row| {
                if !written {
                    written = true;
                    let write = async {
                        let monitors = sqlx::query("UPDATE monitors SET shown_status = 'down'")
                            .execute(&store.writer)
                            .await?;
                        let locations =
                            sqlx::query("UPDATE monitor_locations SET shown_status = 'down'")
                                .execute(&store.writer)
                                .await?;
                        Ok::<_, sqlx::Error>((monitors.rows_affected(), locations.rows_affected()))
                    };
                    let done = tokio::task::block_in_place(|| {
                        tokio::runtime::Handle::current().block_on(write)
                    });
                    assert_eq!(done.unwrap(), (3500, 3500));
                }
                let key = (row.region.is_some(), row.status.unwrap_or_default());
                *statuses.entry(key).or_default() += 1;
            })
            .await
            .unwrap();
        assert_eq!(
            statuses,
            [
                ((false, "up".to_string()), 3500),
                ((true, "up".to_string()), 3500)
            ]
            .into()
        );
    }
}
