//! What `/metrics` shows of monitors and their locations, read as stored: the status each
//! showed at alerting's last look (`shown_status`) and the latency of its newest result. No
//! derivation here or in the caller: a scrape costs one pass over those rows, not a status
//! derived per monitor. Must not: decide a status (that is `service::alerts`, which writes
//! `shown_status`).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::TryStreamExt;
use rusqlite::{OpenFlags, TransactionBehavior};

use super::Store;

/// One monitor (`region` `None`) or one location of it, as last shown; borrowed from the row
/// being read (on SQLite, from SQLite's own buffers: nothing allocated per row).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shown<'a> {
    pub monitor_id: &'a str,
    pub name: &'a str,
    pub region: Option<&'a str>,
    /// `None` before alerting's first look at it.
    pub status: Option<&'a str>,
    pub latency_ms: Option<i64>,
}

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
    /// Every monitor, then every location, as last shown, in no particular order, folded
    /// into `acc` by `add` (a row at a time; the caller writes each as it comes and keeps
    /// what it wrote, not the rows).
    ///
    /// On PostgreSQL each kind is one streamed query (no order asked, so the planner may join
    /// by hashing: 100,000 monitors in about 0.1 s by `EXPLAIN ANALYZE`); monitors and
    /// locations are two reads, not one snapshot: a row that changes between them shows
    /// either state.
    ///
    /// On SQLite a blocking thread reads them with a connection of its own (`rusqlite`) in
    /// one read transaction, so the scrape is one snapshot, and folds each row as it is read,
    /// borrowed from SQLite's own buffers: through sqlx every row was a message from its
    /// worker thread, and handing owned rows from the reading thread to the scrape cost an
    /// allocation per string and a hand-over per chunk (docs/benchmarks.md). Monitors are
    /// read in storage order with their latencies joined here from `monitor_status`, also
    /// read in its storage order (a join seeks the status table's index once per monitor).
    /// Memory: `acc`, and on SQLite a latency per monitor. If the caller stops waiting (its
    /// future dropped: a scraper gone), the reading thread stops at its next row.
    pub async fn fold_shown<T: Send + 'static>(
        &self,
        mut acc: T,
        mut add: impl FnMut(&mut T, Shown<'_>) + Send + 'static,
    ) -> anyhow::Result<T> {
        let Some(file) = self.sqlite_file.clone() else {
            self.each_streamed(&MONITORS, &mut |row| add(&mut acc, row))
                .await?;
            self.each_streamed(&LOCATIONS, &mut |row| add(&mut acc, row))
                .await?;
            return Ok(acc);
        };
        let abandoned = Arc::new(AtomicBool::new(false));
        let _on_drop = Abandoned(abandoned.clone());
        tokio::task::spawn_blocking(move || {
            read_shown(&file, &abandoned, &mut |row| add(&mut acc, row))?;
            Ok(acc)
        })
        .await?
    }

    async fn each_streamed(
        &self,
        source: &Source<'_>,
        each: &mut impl FnMut(Shown<'_>),
    ) -> anyhow::Result<()> {
        type Row = (String, Option<String>, String, Option<String>, Option<i64>);
        let sql = source.select();
        let mut rows = sqlx::query_as::<_, Row>(&sql).fetch(&self.pool);
        while let Some((monitor_id, region, name, status, latency_ms)) = rows.try_next().await? {
            each(Shown {
                monitor_id: &monitor_id,
                name: &name,
                region: region.as_deref(),
                status: status.as_deref(),
                latency_ms,
            });
        }
        Ok(())
    }
}

/// Set when `fold_shown`'s future is dropped (or done): its reading thread would otherwise read
/// every row on for nobody, and scrapes that time out and come again would pile readings up.
struct Abandoned(Arc<AtomicBool>);

impl Drop for Abandoned {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The newest latency of each monitor, by id. Central makes monitor ids as UUIDs
/// (`service::monitors`), kept here as their 16 bytes: no string allocated per monitor, and a
/// cheap hash. Any other id (the store's tests write some) is kept as text rather than lost.
#[derive(Default)]
struct Latencies {
    by_uuid: foldhash::HashMap<u128, i64>,
    by_text: foldhash::HashMap<String, i64>,
}

impl Latencies {
    fn insert(&mut self, monitor_id: &str, latency_ms: i64) {
        match uuid_key(monitor_id) {
            Some(key) => self.by_uuid.insert(key, latency_ms),
            None => self.by_text.insert(monitor_id.to_string(), latency_ms),
        };
    }

    fn get(&self, monitor_id: &str) -> Option<i64> {
        match uuid_key(monitor_id) {
            Some(key) => self.by_uuid.get(&key).copied(),
            None => self.by_text.get(monitor_id).copied(),
        }
    }
}

/// A UUID as central writes it (hyphenated, lower case) as its 16 bytes; `None` for any other
/// text, so that two spellings of one UUID stay two ids, as they are to the database.
fn uuid_key(id: &str) -> Option<u128> {
    if id.len() != 36 || id.bytes().any(|b| b.is_ascii_uppercase()) {
        return None;
    }
    uuid::Uuid::try_parse(id).ok().map(|id| id.as_u128())
}

/// `fold_shown` on SQLite, on a blocking thread: calls `each` per row, borrowed from the row,
/// until done or `abandoned`.
fn read_shown(
    file: &Path,
    abandoned: &AtomicBool,
    each: &mut dyn FnMut(Shown<'_>),
) -> anyhow::Result<()> {
    let go_on = || {
        anyhow::ensure!(
            !abandoned.load(Ordering::Relaxed),
            "the scrape stopped waiting"
        );
        Ok(())
    };
    let mut db = rusqlite::Connection::open_with_flags(
        file,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    db.busy_timeout(Duration::from_secs(10))?;
    let snapshot = db.transaction_with_behavior(TransactionBehavior::Deferred)?;
    let mut latencies = Latencies::default();
    let mut read = snapshot.prepare(
        "SELECT monitor_id, latency_ms FROM monitor_status WHERE latency_ms IS NOT NULL",
    )?;
    let mut rows = read.query([])?;
    while let Some(row) = rows.next()? {
        latencies.insert(row.get_ref(0)?.as_str()?, row.get(1)?);
    }
    drop(rows);
    let mut read = snapshot.prepare("SELECT id, name, shown_status FROM monitors")?;
    let mut rows = read.query([])?;
    while let Some(row) = rows.next()? {
        go_on()?;
        let monitor_id = row.get_ref(0)?.as_str()?;
        each(Shown {
            monitor_id,
            name: row.get_ref(1)?.as_str()?,
            region: None,
            status: row.get_ref(2)?.as_str_or_null()?,
            latency_ms: latencies.get(monitor_id),
        });
    }
    drop(rows);
    let mut read = snapshot.prepare(&LOCATIONS.select())?;
    let mut rows = read.query([])?;
    while let Some(row) = rows.next()? {
        go_on()?;
        each(Shown {
            monitor_id: row.get_ref(0)?.as_str()?,
            region: row.get_ref(1)?.as_str_or_null()?,
            name: row.get_ref(2)?.as_str()?,
            status: row.get_ref(3)?.as_str_or_null()?,
            latency_ms: row.get(4)?,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::Shown;
    use crate::store::testing::sqlite_store;
    use crate::store::Store;

    /// A row as `fold_shown` lent it, kept.
    #[derive(Debug)]
    struct Row {
        monitor_id: String,
        name: String,
        region: Option<String>,
        status: Option<String>,
        latency_ms: Option<i64>,
    }

    impl From<Shown<'_>> for Row {
        fn from(row: Shown<'_>) -> Row {
            Row {
                monitor_id: row.monitor_id.to_string(),
                name: row.name.to_string(),
                region: row.region.map(str::to_string),
                status: row.status.map(str::to_string),
                latency_ms: row.latency_ms,
            }
        }
    }

    /// A latency is found under the id it was stored under, and under no other spelling.
    #[test]
    fn latencies_are_found_by_the_id_they_were_stored_under() {
        let id = "0b9c1e3a-5f7d-4c2b-9a8e-1d2f3a4b5c6d";
        let mut latencies = super::Latencies::default();
        latencies.insert(id, 12);
        latencies.insert("m00001", 34);
        assert_eq!(latencies.get(id), Some(12));
        assert_eq!(latencies.get("m00001"), Some(34));
        for other in [
            "0B9C1E3A-5F7D-4C2B-9A8E-1D2F3A4B5C6D",
            "0b9c1e3a5f7d4c2b9a8e1d2f3a4b5c6d",
            "{0b9c1e3a-5f7d-4c2b-9a8e-1d2f3a4b5c6d}",
            "0b9c1e3a-5f7d-4c2b-9a8e-1d2f3a4b5c6e",
            "m00002",
        ] {
            assert_eq!(latencies.get(other), None, "{other}");
        }
        assert_eq!(latencies.by_uuid.len(), 1, "a UUID is kept as its bytes");
    }

    async fn every_row(store: &Store) -> Vec<Row> {
        store
            .fold_shown(Vec::new(), |rows, row| rows.push(Row::from(row)))
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn every_monitor_and_location_is_read_once_with_its_latency() {
        let (store, _dir) = sqlite_store().await;
        // 2,345 monitors with ids as central makes them (UUIDs, here numbered in their last
        // group), each with two locations (4,690 rows), and every third one showing `down`.
        sqlx::query(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2345) \
             INSERT INTO monitors (id, name, kind, target, interval_ms, timeout_ms, settings, \
                poller_mode, created_at, updated_at, revision, shown_status) \
             SELECT printf('00000000-0000-4000-8000-%012d', i), printf('name %d', i), 'http', 'http://x', 60000, \
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
             SELECT id, 'up', 'p', 'r', 0, CAST(substr(id, 25) AS INTEGER), '' FROM monitors \
             WHERE CAST(substr(id, 25) AS INTEGER) % 5 = 0",
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
        let rows = every_row(&store).await;
        for row in &rows {
            let number: i64 = row.monitor_id[24..].parse().unwrap();
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
        let third = monitors
            .iter()
            .find(|r| r.monitor_id == "00000000-0000-4000-8000-000000000003")
            .unwrap();
        assert_eq!(third.name, "name 3");
        assert_eq!(third.status.as_deref(), Some("down"));
        assert_eq!(third.latency_ms, None);
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
        let writer = store.writer.clone();
        let runtime = tokio::runtime::Handle::current();
        let statuses = store
            .fold_shown(
                std::collections::BTreeMap::<(bool, String), usize>::new(),
                move |statuses, row| {
                    if statuses.is_empty() {
                        let write = async {
                            let monitors = sqlx::query("UPDATE monitors SET shown_status = 'down'")
                                .execute(&writer)
                                .await?;
                            let locations =
                                sqlx::query("UPDATE monitor_locations SET shown_status = 'down'")
                                    .execute(&writer)
                                    .await?;
                            Ok::<_, sqlx::Error>((
                                monitors.rows_affected(),
                                locations.rows_affected(),
                            ))
                        };
                        // The fold runs on a blocking thread: it may wait for the write.
                        assert_eq!(runtime.block_on(write).unwrap(), (3500, 3500));
                    }
                    let key = (row.region.is_some(), row.status.unwrap_or_default().into());
                    *statuses.entry(key).or_default() += 1;
                },
            )
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

    /// A scrape that stops waiting stops its reading thread: rows are not read on for nobody.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_fold_whose_caller_is_gone_stops_reading() {
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
        let read = Arc::new(AtomicUsize::new(0));
        let counted = read.clone();
        // A millisecond a row: two seconds for all, if nothing stopped it.
        let fold = store.fold_shown((), move |(), _| {
            counted.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(std::time::Duration::from_millis(1));
        });
        let waited = tokio::time::timeout(std::time::Duration::from_millis(100), fold).await;
        assert!(waited.is_err(), "the fold should still be reading");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let soon_after = read.load(Ordering::Relaxed);
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert_eq!(
            read.load(Ordering::Relaxed),
            soon_after,
            "read on for nobody"
        );
        assert!(soon_after < 2_000, "{soon_after}");
    }
}
