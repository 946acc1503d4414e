//! All SQL of central, and nothing else: no HTTP, no domain rules.
//!
//! One set of queries serves SQLite and PostgreSQL through sqlx's `Any` driver: times are
//! epoch milliseconds (`BIGINT`), ids are UUID strings, flags are 0/1 and parameters are `$N`,
//! which both dialects accept. Schema changes live in `migrations/<database>/`.

mod assignments;
mod audit;
mod backup;
mod batches;
mod commands;
mod conflicts;
mod cursor;
mod delivery;
mod dependencies;
mod dependency_aliases;
mod dependency_reports;
mod direct;
mod due;
mod events;
mod gauges;
mod head;
mod intake;
mod leases;
mod locations;
mod maintenance;
mod managed;
mod migrations;
mod minutes;
mod monitor_reads;
mod monitors;
mod notifications;
mod packed;
mod placement_due;
mod pollers;
mod push;
mod result_history;
pub mod result_index;
mod result_pruning;
mod results;
mod rollup_folding;
mod rollups;
mod sessions;
mod sso_links;
mod statements;
mod status_moves;
mod status_rows;
mod timeline;
mod tokens;
mod users;
mod wakeups;

pub use assignments::{AssignmentChange, Versioned};
pub use backup::backup_sqlite;
pub use commands::{Acked, CommandRow, NewCommand};
pub use conflicts::is_conflict;
pub use cursor::Cursor;
pub use delivery::Attempt;
pub use dependencies::{
    DependencyDiff, DependencyEventRow, DependencyReport, DependencyRow, DependencySourceRow,
    LatencyBucketRow, NamedDependencyRow, NewDependencyEvent, PendingNoticeRow, ReportedDependency,
};
pub use dependency_aliases::{AliasInsert, AliasRow};
pub use due::Look;
pub use events::EventRow;
pub use gauges::Shown;
pub use intake::Intake;
pub use intake::OwnershipRow;
pub use leases::LeaseState;
pub use locations::{LocationRow, LocationStatusRow};
pub use maintenance::WindowRow;
pub use managed::ManagedRow;
pub use minutes::CountedResult;
pub use monitor_reads::{ListFilter, StatusRow};
pub use monitors::{LinkConflict, MonitorRow};
pub use notifications::{AlertStateRow, AlertUpdate, ChannelOptions, ChannelRow, OutboxRow};
pub use placement_due::{QueuedPlacement, Reach};
pub use pollers::{HeartbeatUpdate, PollerRow};
pub use push::{PingRow, PushState};
pub use result_history::ResultRow;
pub use result_pruning::ExpiringResult;
pub use results::{IngestRules, Ingested, NewResult};
pub use rollup_folding::HourKey;
pub use rollups::{Resolution, RollupRow, RollupSums, LATENCY_BOUNDS_MS};
pub use sessions::SessionRow;
pub use status_moves::StoredVerdict;
pub use timeline::{TimeCredit, TimePoint};

/// A list as columns keep it (capabilities, a token's capability limit): comma-joined.
pub fn split_list(stored: &str) -> Vec<String> {
    stored
        .split(',')
        .filter(|item| !item.is_empty())
        .map(str::to_string)
        .collect()
}
pub use audit::AuditRow;
pub use tokens::{RefreshTokenRow, RegistrationTokenRow};
pub use users::{ApiKeyRow, Ends, KeyScope, UserConflict, UserRow, MADE_WITH_ADMIN_TOKEN};
pub use wakeups::{VersionListener, Wakeup};

use std::str::FromStr;
use std::time::Duration;

use anyhow::Context;
use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::{AnyPool, Executor};
use tokio::sync::{Mutex, MutexGuard};

/// Which database is behind the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite = 0,
    Postgres = 1,
}

impl Backend {
    /// Both, in the order of their discriminants: a statement's texts built once per backend
    /// are kept as `[_; 2]` and indexed by `backend as usize`.
    pub const BOTH: [Backend; 2] = [Backend::Sqlite, Backend::Postgres];
}

/// SQLite's page cache of the one writing connection, in KiB: ingest's index pages stay in it
/// (it is never dropped, since no other connection writes). It is not free: SQLite 3.46 walks
/// every page this cache holds when a write transaction commits after a B-tree split that
/// reordered pages (`balance_nonroot` parks a page at the lock-byte page's number, which
/// `pcache1Truncate` then trims), which ingest's inserts cause in nearly every upload: by
/// `perf` (a uprobe on `pcache1Truncate`) 40 such walks a second over 15,856 cached pages at
/// 20,000 monitors, `pcache1TruncateUnsafe` 8 % of central's samples. Only while the database
/// is smaller than that page's offset (1 GiB at 4 KiB pages): past it the parked number is
/// inside the database and nothing is trimmed (the same uprobe on a database grown to 1.1 GiB
/// first: no walk), which 1,667 results/s reach within the first hour. So the cache stays
/// large; whether a young database would do better with a smaller one is not measured
/// (docs/benchmarks.md).
const WRITER_CACHE_KIB: u32 = 65_536;
/// SQLite's page cache of each reading connection, in KiB (about SQLite's default). SQLite drops
/// a reader's whole cache, page by page, whenever it begins a read after the writer wrote,
/// which under ingest is nearly every read: with 64 MiB per reader, `perf` showed
/// `pcache1TruncateUnsafe` alone in 4 % of central's samples while 100,000 monitors were
/// created, with the `free`s and `malloc_consolidate` around it, and the creation slowed. A
/// scrape reads its pages in storage order within one transaction, which a small cache serves
/// as well (20,000-monitor scale bench: `/metrics` 160 ms, 171 ms before the writer had a
/// connection of its own).
const READER_CACHE_KIB: u32 = 2_048;

pub struct Store {
    /// SQLite's writing connection as ingest runs on it directly (`direct`), with the
    /// statements it keeps there: declared first so that it is dropped before the pools.
    lent: direct::Lent,
    pool: AnyPool,
    /// On SQLite, the one connection writes go through (the same pool as `pool` on
    /// PostgreSQL). SQLite drops a connection's whole page cache when it begins a read and
    /// another connection has written since: with writes spread over the pool, every ingest
    /// re-read its pages from the OS. The writer's cache stays warm as long as it is the only
    /// connection that writes.
    writer: AnyPool,
    backend: Backend,
    /// Kept to open the notification connection of `listen_for_versions` (PostgreSQL only).
    url: String,
    /// The database file on SQLite, for reads that open a connection of their own
    /// (`gauges`).
    sqlite_file: Option<std::path::PathBuf>,
    /// SQLite allows one writer at a time; queueing writers here, rather than letting them
    /// collide inside SQLite, turns lock contention into a short wait instead of `SQLITE_BUSY`.
    sqlite_writer: Mutex<()>,
    /// Ordinary writers queue here before `sqlite_writer`, so that at most one of them waits
    /// there at a time: a write that must not wait for the whole queue (`write_lock_first`:
    /// the duties lease's renewal, the outbox's claims and records) waits for the write under
    /// way and at most one more. Under
    /// a fleet's recovery at 100,000 monitors the queue held seconds of writes, the renewal
    /// came too late, and the only replica kept losing its own lease (every duty stopped and
    /// started again, tens of times a minute).
    sqlite_queue: Mutex<()>,
    /// On SQLite, the rowids of the results stored since the last flush into `result_index`
    /// (`head`, `result_index`); always empty on PostgreSQL.
    head: head::Head,
    /// Held by a flush of the head (`result_index`).
    head_flushing: Mutex<()>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the URL: it may hold the database password.
        f.debug_struct("Store")
            .field("backend", &self.backend)
            .finish_non_exhaustive()
    }
}

/// Guard held by a writer; on PostgreSQL it guards nothing.
pub struct WriteGuard<'a>(#[allow(dead_code)] Option<MutexGuard<'a, ()>>);

impl Store {
    /// `SELECT {columns} {from_where} {column} IN (…ids…)` as `T`s (`from_where` is `FROM …
    /// WHERE`, with any other condition and its `AND`), read packed (`packed`: one value per
    /// chunk of 500 ids): for the reads behind each result and each look.
    pub(crate) async fn packed_where_in<T: serde::de::DeserializeOwned>(
        &self,
        columns: &str,
        from_where: &str,
        column: &str,
        ids: &[String],
    ) -> anyhow::Result<Vec<T>> {
        let columns = packed::columns_of(columns);
        let order = columns.first().map_or("1", |(name, _)| *name);
        let mut rows = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(500) {
            let sql = packed::packed(
                self.backend,
                &columns,
                &format!(
                    "{from_where} {column} IN ({})",
                    monitors::placeholders(1, chunk.len())
                ),
                order,
            );
            let mut query = sqlx::query_as::<_, (String,)>(&sql);
            for id in chunk {
                query = query.bind(id);
            }
            let (text,) = query.fetch_one(&self.pool).await?;
            rows.extend(packed::unpack::<T>(&text)?);
        }
        Ok(rows)
    }

    /// Connects, creating a SQLite file if needed, and applies pending migrations.
    pub async fn connect(url: &str) -> anyhow::Result<Store> {
        sqlx::any::install_default_drivers();
        let backend = if url.starts_with("sqlite:") {
            Backend::Sqlite
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            Backend::Postgres
        } else {
            anyhow::bail!(
                "CENTRAL_DATABASE_URL must start with sqlite:// or postgres://, got `{}`",
                redacted(url)
            );
        };
        if backend == Backend::Sqlite {
            if let Some(why) = sqlite_url_refusal(url) {
                anyhow::bail!(
                    "CENTRAL_DATABASE_URL `{}` {why}; central opens the database from several \
                     connections and from a reader thread of its own (behind /metrics), so it \
                     must be a file on disk that central can write: `sqlite://<path>`, with no \
                     mode, `mode=rwc` or `mode=rw`",
                    redacted(url)
                );
            }
        }
        let url = match backend {
            Backend::Sqlite if !url.contains("mode=") => {
                let sep = if url.contains('?') { '&' } else { '?' };
                format!("{url}{sep}mode=rwc")
            }
            _ => url.to_string(),
        };
        let options = AnyConnectOptions::from_str(&url)
            .with_context(|| format!("invalid CENTRAL_DATABASE_URL `{}`", redacted(&url)))?;
        let sqlite_file = match backend {
            Backend::Sqlite => Some(
                sqlx::sqlite::SqliteConnectOptions::from_str(&url)
                    .with_context(|| format!("invalid CENTRAL_DATABASE_URL `{}`", redacted(&url)))?
                    .get_filename()
                    .to_path_buf(),
            ),
            Backend::Postgres => None,
        };
        if backend == Backend::Sqlite {
            // Before the first connection opens: ingest runs on the writer's handle (`direct`).
            direct::install()?;
        }
        let pool = Self::pool_options(
            backend,
            match backend {
                Backend::Sqlite => 4,
                Backend::Postgres => 16,
            },
            READER_CACHE_KIB,
        )
        .connect_with(options.clone())
        .await
        .with_context(|| format!("cannot open the database at `{}`", redacted(&url)))?;
        let writer = match backend {
            Backend::Sqlite => Self::pool_options(backend, 1, WRITER_CACHE_KIB)
                // Its cache is the point: the connection is never retired while central runs.
                .idle_timeout(None)
                .max_lifetime(None)
                .connect_with(options)
                .await
                .with_context(|| format!("cannot open the database at `{}`", redacted(&url)))?,
            Backend::Postgres => pool.clone(),
        };
        let store = Store {
            lent: direct::Lent::default(),
            pool,
            writer,
            backend,
            url: url.clone(),
            sqlite_file,
            sqlite_writer: Mutex::new(()),
            sqlite_queue: Mutex::new(()),
            head: head::Head::default(),
            head_flushing: Mutex::new(()),
        };
        store.migrate().await?;
        let mut store = store;
        if backend == Backend::Sqlite {
            store.head = store.load_head().await?;
        }
        Ok(store)
    }

    /// Closes every connection, waiting for those in use to come back. On PostgreSQL each
    /// server session then ends, which is when the server counts what it read
    /// (`pg_stat_user_tables`) for certain.
    pub async fn close(&self) {
        self.pool.close().await;
        self.writer.close().await;
    }

    fn pool_options(backend: Backend, connections: u32, cache_kib: u32) -> AnyPoolOptions {
        AnyPoolOptions::new()
            .max_connections(connections)
            .acquire_timeout(Duration::from_secs(10))
            // A ping before each use finds a PostgreSQL connection the network dropped; a
            // SQLite connection is a file that cannot drop, and the ping is one more round
            // trip to its worker thread per transaction.
            .test_before_acquire(backend == Backend::Postgres)
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    if backend == Backend::Sqlite {
                        // Sorts and groupings in memory: a temporary file each (an open, a
                        // write and an unlink) cost a few dozen system calls a second at
                        // 100,000 monitors (seen with strace in the scale benchmark).
                        // The page cache's size is the connection's (`WRITER_CACHE_KIB`,
                        // `READER_CACHE_KIB`). Pages are cached as they are read, so a small
                        // database costs no more than its pages.
                        conn.execute(
                            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; \
                             PRAGMA busy_timeout = 10000; PRAGMA foreign_keys = ON; \
                             PRAGMA temp_store = MEMORY;",
                        )
                        .await?;
                        conn.execute(&*format!("PRAGMA cache_size = -{cache_kib};"))
                            .await?;
                    }
                    Ok(())
                })
            })
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Serialises writers on SQLite; call before a write transaction.
    pub async fn write_lock(&self) -> WriteGuard<'_> {
        match self.backend {
            Backend::Sqlite => {
                let _queued = self.sqlite_queue.lock().await;
                WriteGuard(Some(self.sqlite_writer.lock().await))
            }
            Backend::Postgres => WriteGuard(None),
        }
    }

    /// `write_lock` ahead of the ordinary writers' queue: waits for the write under way and
    /// at most one more (`sqlite_queue`). Only for small writes that must happen in time, at a
    /// rate that cannot keep the others waiting: the lease's renewal (every 2 s) and delivery's
    /// claims and records (two per chunk of notices sent).
    pub async fn write_lock_first(&self) -> WriteGuard<'_> {
        match self.backend {
            Backend::Sqlite => WriteGuard(Some(self.sqlite_writer.lock().await)),
            Backend::Postgres => WriteGuard(None),
        }
    }

    /// Runs one write whose `$1` is a row id and `$2` one more value, under the write lock;
    /// `true` if it changed exactly that row. Conditional updates (`… AND spent_at IS NULL`)
    /// use the answer to tell who won a race.
    async fn write_one<'q, T>(&self, sql: &'q str, id: &'q str, value: T) -> anyhow::Result<bool>
    where
        T: 'q + Send + sqlx::Encode<'q, sqlx::Any> + sqlx::Type<sqlx::Any>,
    {
        let _guard = self.write_lock().await;
        let done = sqlx::query(sql)
            .bind(id)
            .bind(value)
            .execute(&self.writer)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// A cheap round trip, for `/readyz`.
    pub async fn ping(&self) -> anyhow::Result<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    /// Reads a setting.
    pub async fn setting(&self, key: &str) -> anyhow::Result<Option<String>> {
        let value: Option<(String,)> = sqlx::query_as("SELECT value FROM settings WHERE key = $1")
            .bind(key)
            .fetch_optional(&self.pool)
            .await?;
        Ok(value.map(|(v,)| v))
    }

    /// Stores `value` unless the key is set already; returns the value that is stored now, so
    /// that concurrent replicas agree on one generated secret.
    pub async fn setting_or_insert(&self, key: &str, value: &str) -> anyhow::Result<String> {
        let _guard = self.write_lock().await;
        sqlx::query(
            "INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
        )
        .bind(key)
        .bind(value)
        .execute(&self.writer)
        .await?;
        self.setting(key)
            .await?
            .context("setting vanished right after insert")
    }

    /// Overwrites a setting.
    pub async fn put_setting(&self, key: &str, value: &str) -> anyhow::Result<()> {
        let _guard = self.write_lock().await;
        sqlx::query(
            "INSERT INTO settings (key, value) VALUES ($1, $2) \
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        )
        .bind(key)
        .bind(value)
        .execute(&self.writer)
        .await?;
        Ok(())
    }
}

/// A flag column.
fn flag(value: bool) -> i64 {
    i64::from(value)
}

/// Why central cannot run on this SQLite URL, if it cannot. The pool and the writer open it
/// through sqlx, but `/metrics` reads the file it names (`get_filename`) with a plain rusqlite
/// connection (`gauges`), which knows nothing of the URL's parameters: an in-memory database,
/// another VFS or an immutable file would have it read another database than the rest of
/// central, and a read-only one fails at central's first write. Names are read as sqlx reads
/// them; a URL sqlx cannot read is left for it to refuse.
fn sqlite_url_refusal(url: &str) -> Option<&'static str> {
    let options = sqlx::sqlite::SqliteConnectOptions::from_str(url).ok()?;
    let file = options.get_filename().to_string_lossy();
    let rest = url
        .trim_start_matches("sqlite://")
        .trim_start_matches("sqlite:");
    let (database, query) = rest.split_once('?').unwrap_or((rest, ""));
    if database == ":memory:" || file == ":memory:" {
        return Some("is an in-memory database");
    }
    if file.is_empty() {
        return Some("names no file (SQLite would give each connection a temporary one)");
    }
    if file.starts_with("file:") {
        return Some("names a `file:` URI, whose parameters central does not check");
    }
    url::form_urlencoded::parse(query.as_bytes()).find_map(|(key, value)| match (&*key, &*value) {
        ("mode", "memory") => Some("asks for an in-memory database (`mode=memory`)"),
        ("mode", "ro") => Some("opens the database read-only (`mode=ro`), and central writes"),
        ("vfs", _) => Some("names a VFS (`vfs=`)"),
        ("immutable", _) => Some("declares the file immutable (`immutable=`), and central writes"),
        _ => None,
    })
}

/// The database URL as it may be shown: with its password (and any `password=` parameter)
/// replaced, so that no error message or log line carries the secret.
pub fn redacted(url: &str) -> String {
    let Ok(mut parsed) = url::Url::parse(url) else {
        // Unparseable: show the scheme only, the rest could be anything.
        let scheme = url.split_once(':').map_or("", |(scheme, _)| scheme);
        return format!("{scheme}:<unparseable, hidden>");
    };
    if parsed.password().is_some() {
        let _ = parsed.set_password(Some("REDACTED"));
    }
    if parsed
        .query_pairs()
        .any(|(key, _)| key.eq_ignore_ascii_case("password"))
    {
        let pairs: Vec<(String, String)> = parsed
            .query_pairs()
            .map(|(key, value)| {
                let value = if key.eq_ignore_ascii_case("password") {
                    "REDACTED".to_string()
                } else {
                    value.into_owned()
                };
                (key.into_owned(), value)
            })
            .collect();
        parsed.query_pairs_mut().clear().extend_pairs(pairs);
    }
    parsed.to_string()
}

#[cfg(test)]
mod url_tests {
    use super::Store;

    #[tokio::test]
    async fn sqlite_urls_that_are_not_one_writable_file_on_disk_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("central.db").display().to_string();
        for url in [
            "sqlite::memory:".to_string(),
            "sqlite://:memory:".to_string(),
            "sqlite://%3Amemory%3A".to_string(),
            "sqlite://".to_string(),
            format!("sqlite://{file}?mode=memory"),
            format!("sqlite://{file}?mode=ro"),
            format!("sqlite://{file}?vfs=unix-dotfile"),
            format!("sqlite://{file}?mode=rwc&immutable=1"),
            format!("sqlite:file:{file}"),
            format!("sqlite:file:{file}%3Fmode=memory"),
        ] {
            let error = match Store::connect(&url).await {
                Ok(_) => panic!("{url} was accepted"),
                Err(error) => format!("{error:#}"),
            };
            assert!(
                error.contains("CENTRAL_DATABASE_URL") && error.contains("file on disk"),
                "{url}: {error}"
            );
        }
        for url in [
            format!("sqlite://{file}"),
            format!("sqlite://{file}?mode=rwc"),
            format!("sqlite://{file}?mode=rw&cache=private"),
        ] {
            Store::connect(&url)
                .await
                .unwrap_or_else(|e| panic!("{url}: {e:#}"));
        }
    }
}

#[cfg(test)]
mod redaction_tests {
    use super::redacted;

    #[test]
    fn passwords_never_show() {
        let shown = redacted("postgres://central:s3cret@db.internal:5432/central?sslmode=require");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(
            shown.contains("central:REDACTED@db.internal:5432"),
            "{shown}"
        );
        let shown = redacted("postgres://db/central?user=c&password=s3cret");
        assert!(
            !shown.contains("s3cret") && shown.contains("user=c"),
            "{shown}"
        );
        assert_eq!(
            redacted("sqlite://central.db?mode=rwc"),
            "sqlite://central.db?mode=rwc"
        );
        assert!(!redacted("postgres://a:s3cret@[bad").contains("s3cret"));
    }
}

// Test builds only; last, so that nothing after it is taken for shipped code.
#[cfg(test)]
pub(crate) mod testing;
