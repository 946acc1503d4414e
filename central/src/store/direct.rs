//! Ingest's transaction on SQLite, run with `rusqlite` on a writing connection of its own, as
//! one blocking call. Owns that connection and the statements it keeps prepared; the SQL
//! stays in its modules, shared with sqlx's path (`statements`).
//!
//! sqlx-sqlite runs each statement on a worker thread of the connection's own, and hands it
//! over and its answer back as messages; ingest's transaction is a few dozen statements per
//! upload (a statement per row, `statements`), each such a hand-off (a context switch and a
//! futex wake on each side). So ingest runs its statements with `rusqlite`, one blocking call
//! per upload (at 100,000 monitors and 1,667 results a second: central's steady CPU 39 → 33 %
//! of a core, docs/benchmarks.md).
//!
//! The connection is central's own, opened on the database file like `gauges`' reader: no
//! handle borrowed from sqlx, no FFI, no `unsafe`. While ingest writes on it, it holds sqlx's
//! one writing connection out of its pool (`Store::writer`), so the two never write at once
//! whatever lock a caller took.

use std::path::Path;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use rusqlite::OpenFlags;
use sqlx::pool::PoolConnection;
use sqlx::Any;

use super::sqlite::{CONNECTION_PRAGMAS, WRITER_CACHE_KIB};

/// Ingest's writing connection, opened at its first transaction and kept from one to the next
/// with the statements it prepared: preparing ingest's dozen statements again for every upload
/// was a fourteenth of central's CPU at 1,667 results a second (`perf`, 20,000 monitors).
#[derive(Default)]
pub(super) struct IngestWriter(Mutex<Option<rusqlite::Connection>>);

/// How many of its statements the connection keeps: ingest's, with room for the few shapes
/// whose text varies with the batch (a late result's lookups).
const KEPT_STATEMENTS: usize = 64;

/// Opens the database `file` for writing, with the pragmas every connection of central's runs
/// with and the writer's page cache.
fn open(file: &Path) -> anyhow::Result<rusqlite::Connection> {
    let db = rusqlite::Connection::open_with_flags(
        file,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    db.execute_batch(CONNECTION_PRAGMAS)?;
    db.execute_batch(&format!("PRAGMA cache_size = -{WRITER_CACHE_KIB};"))?;
    db.busy_timeout(Duration::from_secs(10))?;
    db.set_prepared_statement_cache_capacity(KEPT_STATEMENTS);
    Ok(db)
}

/// A transaction begun on ingest's connection, rolled back when dropped before its commit.
/// The work is handed the connection itself (`&mut`), not a `rusqlite::Transaction`, whose
/// shared borrow of the connection could not travel in the service's unit of work
/// (`store::ingest_tx`), which must be `Send`.
struct Open<'c>(&'c mut rusqlite::Connection);

impl Drop for Open<'_> {
    fn drop(&mut self) {
        if !self.0.is_autocommit() {
            // What failed has been told already; a failed rollback leaves the connection
            // in its transaction, which the next `BEGIN` reports.
            let _ = self.0.execute_batch("ROLLBACK");
        }
    }
}

impl IngestWriter {
    /// Runs `work` in one `IMMEDIATE` transaction on the connection to `file`, committed if
    /// `work` returns `Ok` and rolled back otherwise, while `writer` (sqlx's writing
    /// connection, held out of its pool by the caller) stays unused. Blocks the calling thread
    /// for the transaction; on a multi-threaded runtime the thread's other tasks move to the
    /// other workers meanwhile.
    pub(super) async fn transaction<T>(
        &self,
        file: &Path,
        _writer: &mut PoolConnection<Any>,
        work: impl FnOnce(&mut rusqlite::Connection) -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        let run = || {
            let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            let db = match &mut *kept {
                Some(db) => db,
                None => kept.insert(open(file)?),
            };
            db.execute_batch("BEGIN IMMEDIATE")?;
            // Dropped on an error or a panic, the transaction rolls back: the connection is
            // left outside any transaction either way.
            let open = Open(db);
            let outcome = work(open.0)?;
            open.0.execute_batch("COMMIT")?;
            Ok(outcome)
        };
        match tokio::runtime::Handle::current().runtime_flavor() {
            tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(run),
            // A single-threaded runtime (tests) has no other worker to hand its tasks to.
            _ => run(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use crate::store::testing::{result, sqlite_store};

    use crate::service::ingest::batch::store_standing;
    use crate::service::ingest::batch::IngestRules;
    use crate::service::testing::NewestDecides;
    use crate::store::{
        DependencyDiff, DependencyReport, DependencyRow, StoredVerdict, TimeCredit, TimePoint,
    };

    /// `NewestDecides`, except that working out the time results stand for panics: midway
    /// through ingest's transaction, after the results' insert.
    struct PanicsMidway;

    impl IngestRules for PanicsMidway {
        fn advance(
            &self,
            id: &str,
            state: StoredVerdict,
            result: shared_proto::poller_api::Verdict,
        ) -> StoredVerdict {
            NewestDecides.advance(id, state, result)
        }
        fn unchanged_until(&self, id: &str, ts: i64) -> i64 {
            NewestDecides.unchanged_until(id, ts)
        }
        fn interval_ms(&self, id: &str) -> i64 {
            NewestDecides.interval_ms(id)
        }
        fn lookback_ms(&self, id: &str) -> i64 {
            NewestDecides.lookback_ms(id)
        }
        fn credit_time(
            &self,
            _: &str,
            _: Option<&str>,
            _: &[&TimePoint],
            _: &HashSet<&str>,
            _: Option<i64>,
            _: i64,
        ) -> Vec<TimeCredit> {
            panic!("a rule failed midway");
        }
        fn dependency_diff(
            &self,
            id: &str,
            region: &str,
            at: i64,
            before: &[DependencyRow],
            report: &DependencyReport,
        ) -> DependencyDiff {
            NewestDecides.dependency_diff(id, region, at, before, report)
        }
    }

    /// A transaction that fails midway on the blocked worker leaves nothing stored, and the
    /// writing connection goes back to its pool outside any transaction: the next ingest
    /// stores the same results.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failure_midway_leaves_nothing_and_the_writer_usable() {
        let (store, _dir) = sqlite_store().await;
        let store = std::sync::Arc::new(store);
        let batch = vec![result("a", 1_000, "up"), result("b", 2_000, "up")];
        let failing = {
            let (store, batch) = (store.clone(), batch.clone());
            tokio::spawn(
                async move { store_standing(&store, "p1", &batch, 3_000, &PanicsMidway).await },
            )
        };
        assert!(failing.await.unwrap_err().is_panic());
        let ingested = store_standing(&store, "p1", &batch, 4_000, &NewestDecides)
            .await
            .unwrap();
        assert_eq!(ingested.stored, HashSet::from(["a".into(), "b".into()]));
        let again = store_standing(&store, "p1", &batch, 5_000, &NewestDecides)
            .await
            .unwrap();
        assert!(again.stored.is_empty(), "stored once: {:?}", again.stored);
    }

    /// A dropped store closes every connection, ingest's too, so this process holds no file of the database open any more
    /// (with a statement left, the writer's close fails and its file stays open). Not the
    /// write-ahead log's removal: two connections closing at once can each find the other
    /// still open, and then neither removes it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dropped_store_closes_the_ingest_connection() {
        let (store, dir) = sqlite_store().await;
        let batch = vec![result("a", 1_000, "up"), result("b", 2_000, "up")];
        store_standing(&store, "p1", &batch, 3_000, &NewestDecides)
            .await
            .unwrap();
        assert!(
            open_files_under(dir.path()) > 0,
            "the store holds its files"
        );
        drop(store);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while open_files_under(dir.path()) > 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "a connection is still open 10 s after the store was dropped"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// How many of this process's open file descriptors name a file under `dir` (Linux).
    fn open_files_under(dir: &std::path::Path) -> usize {
        std::fs::read_dir("/proc/self/fd")
            .expect("/proc/self/fd")
            .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
            .filter(|target| target.starts_with(dir))
            .count()
    }
}
