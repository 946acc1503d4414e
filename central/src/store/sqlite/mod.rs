//! SQLite's connections through sqlx: a pool of 4 readers and one writing connection (each with
//! the page cache its work wants; ingest's own writing connection is `direct`'s), the pragmas
//! every connection runs with, the URLs central refuses, and the queue writers wait in
//! (`WriteLocks`). Opens; never reads or writes a table.

use std::str::FromStr;
use std::time::Duration;

use anyhow::Context;
use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::Executor;
use tokio::sync::{Mutex, MutexGuard};

use super::{redacted, Backend, Opened};

/// SQLite's page cache of each writing connection (sqlx's and ingest's), in KiB: ingest's
/// index pages stay in its connection's cache between uploads (SQLite drops it only when
/// another connection wrote in between). It is not free: SQLite 3.46 walks
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
pub(super) const WRITER_CACHE_KIB: u32 = 65_536;
/// SQLite's page cache of each reading connection, in KiB (about SQLite's default). SQLite drops
/// a reader's whole cache, page by page, whenever it begins a read after the writer wrote,
/// which under ingest is nearly every read: with 64 MiB per reader, `perf` showed
/// `pcache1TruncateUnsafe` alone in 4 % of central's samples while 100,000 monitors were
/// created, with the `free`s and `malloc_consolidate` around it, and the creation slowed. A
/// scrape reads its pages in storage order within one transaction, which a small cache serves
/// as well (20,000-monitor scale bench: `/metrics` 160 ms, 171 ms before the writer had a
/// connection of its own).
pub(super) const READER_CACHE_KIB: u32 = 2_048;

/// Opens the pool and the writer on a SQLite URL (creating the file unless the URL names a
/// mode).
pub(super) async fn open(url: &str) -> anyhow::Result<Opened> {
    if let Some(why) = url_refusal(url) {
        anyhow::bail!(
            "CENTRAL_DATABASE_URL `{}` {why}; central opens the database from several \
             connections and from a reader thread of its own (behind /metrics), so it \
             must be a file on disk that central can write: `sqlite://<path>`, with no \
             mode, `mode=rwc` or `mode=rw`",
            redacted(url)
        );
    }
    let url = if url.contains("mode=") {
        url.to_string()
    } else {
        let sep = if url.contains('?') { '&' } else { '?' };
        format!("{url}{sep}mode=rwc")
    };
    let invalid = || format!("invalid CENTRAL_DATABASE_URL `{}`", redacted(&url));
    let options = AnyConnectOptions::from_str(&url).with_context(invalid)?;
    let file = sqlx::sqlite::SqliteConnectOptions::from_str(&url)
        .with_context(invalid)?
        .get_filename()
        .to_path_buf();
    let cannot_open = || format!("cannot open the database at `{}`", redacted(&url));
    let pool = pool_options(4, READER_CACHE_KIB)
        .connect_with(options.clone())
        .await
        .with_context(cannot_open)?;
    let writer = pool_options(1, WRITER_CACHE_KIB)
        // Its cache is the point: the connection is never retired while central runs.
        .idle_timeout(None)
        .max_lifetime(None)
        .connect_with(options)
        .await
        .with_context(cannot_open)?;
    Ok(Opened {
        backend: Backend::Sqlite,
        url,
        pool,
        writer,
        sqlite_file: Some(file),
    })
}

/// The pragmas every connection of the pools runs with, and ingest's (`direct`).
pub(super) const CONNECTION_PRAGMAS: &str = "PRAGMA journal_mode = WAL; \
     PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 10000; PRAGMA foreign_keys = ON; \
     PRAGMA temp_store = MEMORY;";

fn pool_options(connections: u32, cache_kib: u32) -> AnyPoolOptions {
    AnyPoolOptions::new()
        .max_connections(connections)
        .acquire_timeout(Duration::from_secs(10))
        // No ping before each use: a SQLite connection is a file that cannot drop, and the
        // ping is one more round trip to its worker thread per transaction.
        .test_before_acquire(false)
        .after_connect(move |conn, _| {
            Box::pin(async move {
                // Sorts and groupings in memory: a temporary file each (an open, a write and
                // an unlink) cost a few dozen system calls a second at 100,000 monitors (seen
                // with strace in the scale benchmark). The page cache's size is the
                // connection's (`WRITER_CACHE_KIB`, `READER_CACHE_KIB`). Pages are cached as
                // they are read, so a small database costs no more than its pages.
                conn.execute(CONNECTION_PRAGMAS).await?;
                conn.execute(&*format!("PRAGMA cache_size = -{cache_kib};"))
                    .await?;
                Ok(())
            })
        })
}

/// SQLite allows one writer at a time; queueing writers here, rather than letting them collide
/// inside SQLite, turns lock contention into a short wait instead of `SQLITE_BUSY`.
#[derive(Default)]
pub(super) struct WriteLocks {
    writer: Mutex<()>,
    /// Ordinary writers queue here before `writer`, so that at most one of them waits there
    /// at a time: a write that must not wait for the whole queue (`first`: the duties lease's
    /// renewal, the outbox's claims and records) waits for the write under way and at most
    /// one more. Under a fleet's recovery at 100,000 monitors the queue held seconds of
    /// writes, the renewal came too late, and the only replica kept losing its own lease
    /// (every duty stopped and started again, tens of times a minute).
    queue: Mutex<()>,
}

impl WriteLocks {
    /// The writer's turn, behind every ordinary writer that asked before.
    pub(super) async fn queued(&self) -> MutexGuard<'_, ()> {
        let _queued = self.queue.lock().await;
        self.writer.lock().await
    }

    /// The writer's turn, behind the write under way and at most one more.
    pub(super) async fn first(&self) -> MutexGuard<'_, ()> {
        self.writer.lock().await
    }
}

/// Why central cannot run on this SQLite URL, if it cannot. The pool and the writer open it
/// through sqlx, but `/metrics` reads the file it names (`get_filename`) with a plain rusqlite
/// connection (`gauges`), which knows nothing of the URL's parameters: an in-memory database,
/// another VFS or an immutable file would have it read another database than the rest of
/// central, and a read-only one fails at central's first write. Names are read as sqlx reads
/// them; a URL sqlx cannot read is left for it to refuse.
pub(super) fn url_refusal(url: &str) -> Option<&'static str> {
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
