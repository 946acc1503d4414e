//! A transaction run directly on SQLite's writing connection, as one blocking call: ingest's.
//!
//! sqlx-sqlite runs each statement on a worker thread of the connection's own, and hands it
//! over and its answer back as messages; ingest's transaction was about fifteen statements per
//! upload (more now: a statement per row, `statements`), each such a hand-off (a context switch and a futex wake on each side). So ingest
//! runs its statements with `rusqlite` on the same connection, one blocking call per upload,
//! while it holds that connection out of sqlx's pool (at 100,000 monitors and 1,667 results a
//! second: central's steady CPU 39 → 33 % of a core, docs/benchmarks.md). The same
//! connection, so that its page cache stays warm (`Store::writer`): SQLite drops a
//! connection's cache whenever another connection has written.
//!
//! sqlx's `Any` driver does not lend a connection's handle, so every SQLite connection central
//! opens gets a function that returns its own (`central_connection_handle()`, registered by an
//! automatic extension, `install`). Owns only that lending; the SQL stays in its modules,
//! shared with sqlx's path (`statements`).

use std::os::raw::{c_char, c_int};
use std::sync::{Mutex, PoisonError};

use rusqlite::ffi;
use sqlx::pool::PoolConnection;
use sqlx::Any;

/// The SQL function that returns the connection's own handle (an address).
const HANDLE_FUNCTION: &std::ffi::CStr = c"central_connection_handle";

/// Registers `HANDLE_FUNCTION` on every SQLite connection opened from now on in this process
/// (SQLite's automatic extensions; registering it again does nothing).
pub(super) fn install() -> anyhow::Result<()> {
    // Safety: the extension opens no database, closes none and registers no extension.
    unsafe { rusqlite::auto_extension::register_auto_extension(register_on) }?;
    Ok(())
}

/// The automatic extension: adds `HANDLE_FUNCTION` to the connection being opened. Only
/// central's own statements can call it: `SQLITE_DIRECTONLY` keeps it out of triggers and
/// views, which a database file could otherwise bring.
unsafe extern "C" fn register_on(
    db: *mut ffi::sqlite3,
    _error: *mut *mut c_char,
    _api: *const ffi::sqlite3_api_routines,
) -> c_int {
    ffi::sqlite3_create_function_v2(
        db,
        HANDLE_FUNCTION.as_ptr(),
        0,
        ffi::SQLITE_UTF8 | ffi::SQLITE_DIRECTONLY,
        std::ptr::null_mut(),
        Some(handle_of),
        None,
        None,
        None,
    )
}

unsafe extern "C" fn handle_of(
    context: *mut ffi::sqlite3_context,
    _argc: c_int,
    _argv: *mut *mut ffi::sqlite3_value,
) {
    let db = ffi::sqlite3_context_db_handle(context);
    ffi::sqlite3_result_int64(context, db as usize as i64);
}

/// The writing connection as `rusqlite` sees it, kept from one transaction to the next with
/// the statements it prepared: preparing ingest's dozen statements again for every upload was
/// a fourteenth of central's CPU at 1,667 results a second (`perf`, 20,000 monitors).
///
/// The statements live on the writer's connection between transactions, reset, which SQLite
/// allows beside the statements sqlx prepares on it. A connection with statements left cannot
/// be closed (`sqlite3_close` answers `SQLITE_BUSY`, which sqlx reports as a panic of its
/// worker thread), so the `Store` drops this before its pools. sqlx never retires the writer
/// while central runs (no lifetime, no idle timeout, no ping before use); were it replaced
/// anyway, its handle's address would differ from the one kept here (the old connection could
/// not be freed while this held statements on it), and these would be dropped for the new one.
#[derive(Default)]
pub(super) struct Lent(Mutex<Option<LentConnection>>);

struct LentConnection {
    address: i64,
    db: rusqlite::Connection,
}

/// How many of its statements the lent connection keeps: ingest's, with room for the few
/// shapes whose text varies with the batch (a late result's lookups).
const KEPT_STATEMENTS: usize = 64;

impl Lent {
    /// Runs `work` in one `IMMEDIATE` transaction directly on `connection` (the writing
    /// connection, held out of its pool by the caller), committed if `work` returns `Ok` and
    /// rolled back otherwise. Blocks the calling thread for the transaction; on a
    /// multi-threaded runtime the thread's other tasks move to the other workers meanwhile.
    pub(super) async fn transaction<T>(
        &self,
        connection: &mut PoolConnection<Any>,
        work: impl FnOnce(&rusqlite::Transaction<'_>) -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        let address: i64 = sqlx::query_scalar(&format!(
            "SELECT {}()",
            HANDLE_FUNCTION.to_str().expect("ASCII")
        ))
        .fetch_one(&mut **connection)
        .await?;
        // Safety, for every use of the handle below (creating the rusqlite connection on it,
        // and running its statements, kept or new): the handle is `connection`'s, which the
        // caller holds out of the pool for this whole call, so it stays open, and sqlx's worker
        // thread, which only touches it to run a statement sent to it, runs none meanwhile:
        // one thread uses the connection at a time, as SQLite's multi-thread mode (sqlx opens
        // connections `NOMUTEX`) asks. The rusqlite connection does not own the handle:
        // dropping it finalizes its statements and closes nothing.
        let run = || {
            let mut lent = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            if lent.as_ref().is_some_and(|l| l.address != address) {
                *lent = None;
            }
            let lent = match &mut *lent {
                Some(lent) => lent,
                None => {
                    let db =
                        unsafe { rusqlite::Connection::from_handle(address as usize as *mut _) }?;
                    db.set_prepared_statement_cache_capacity(KEPT_STATEMENTS);
                    lent.insert(LentConnection { address, db })
                }
            };
            let tx = lent
                .db
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            // Dropped on an error or a panic, the transaction rolls back: the connection goes
            // back to the pool outside any transaction either way.
            let outcome = work(&tx)?;
            tx.commit()?;
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

    use crate::service::testing::NewestDecides;
    use crate::store::{
        DependencyDiff, DependencyReport, DependencyRow, IngestRules, StoredVerdict, TimeCredit,
        TimePoint,
    };

    /// `NewestDecides`, except that working out the time results stand for panics: midway
    /// through ingest's transaction, after the results' insert.
    struct PanicsMidway;

    impl IngestRules for PanicsMidway {
        fn advance(&self, id: &str, state: StoredVerdict, result: &str) -> StoredVerdict {
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
            tokio::spawn(async move {
                store
                    .insert_results("p1", &batch, 3_000, &PanicsMidway)
                    .await
            })
        };
        assert!(failing.await.unwrap_err().is_panic());
        let ingested = store
            .insert_results("p1", &batch, 4_000, &NewestDecides)
            .await
            .unwrap();
        assert_eq!(ingested.stored, HashSet::from(["a".into(), "b".into()]));
        let again = store
            .insert_results("p1", &batch, 5_000, &NewestDecides)
            .await
            .unwrap();
        assert!(again.stored.is_empty(), "stored once: {:?}", again.stored);
    }

    /// The statements kept on the writing connection do not keep it open: a dropped store
    /// closes every connection, so this process holds no file of the database open any more
    /// (with a statement left, the writer's close fails and its file stays open). Not the
    /// write-ahead log's removal: two connections closing at once can each find the other
    /// still open, and then neither removes it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dropped_store_closes_the_lent_connection() {
        let (store, dir) = sqlite_store().await;
        let batch = vec![result("a", 1_000, "up"), result("b", 2_000, "up")];
        store
            .insert_results("p1", &batch, 3_000, &NewestDecides)
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
