//! Ingest's transaction, as the service drives it: a unit of work (`IngestWork`) run in one
//! transaction that this module opens, commits and, on PostgreSQL, runs again when the
//! database aborts it as a conflict; and the typed reads and writes it offers the work
//! (`IngestTx`), each a step of storing an upload whose SQL lives in its own module. The
//! service decides between the steps (which results stand, how verdicts move, what time they
//! credit, what is news); this module owns the transaction and the order of nothing else.
//!
//! On SQLite the whole work runs as one blocking call on ingest's own writing connection
//! (`direct`): its statements are ready at once, so the work's future is driven to its end
//! on that thread (`futures_executor::block_on`, which never waits: no step awaits anything
//! but a statement). On PostgreSQL it is a transaction of sqlx. Must not: decide anything.

use std::collections::{BTreeMap, HashSet};
use std::future::Future;

use anyhow::Context;
use sqlx::{Any, Transaction};

use super::dependency_reports::DependencyLedger;
use super::intake::OwnershipRow;
use super::results::NewResult;
use super::statements::{Arg, Columns, Direct, Statements};
use super::status_moves::{StatusKey, StatusTable, StoredVerdict};
use super::status_rows::StatusesBefore;
use super::timeline::{Credits, TimeSpan};
use super::Store;
use crate::domain::MaintenanceWindow;

/// What the service runs in ingest's transaction (`Store::ingest`). Run again from the start
/// when PostgreSQL aborts the transaction as a conflict, so it must decide from what its
/// reads return only.
pub trait IngestWork: Sync {
    /// What the work returns once its transaction committed.
    type Output: Send;

    /// The work's reads, decisions and writes, on `tx`.
    fn run(
        &self,
        tx: &mut IngestTx<'_>,
    ) -> impl Future<Output = anyhow::Result<Self::Output>> + Send;
}

/// Ingest's transaction, offered to an `IngestWork`: an upload's reads and writes, in the
/// order the work calls them. Each step's cost is that of the batch's monitors and results.
pub struct IngestTx<'t> {
    conn: Conn<'t>,
    store: &'t Store,
    poller_id: &'t str,
    received_at: i64,
    /// On SQLite, the monitor and rowid of each result stored, for the head once the
    /// transaction commits (`head`).
    fresh: Vec<(String, i64)>,
}

/// Where the statements run: ingest's own SQLite connection, or a PostgreSQL transaction.
enum Conn<'t> {
    Sqlite(Direct<'t>),
    Postgres(&'t mut Transaction<'static, Any>),
}

impl Statements for Conn<'_> {
    async fn execute(&mut self, sql: &str, args: &[Arg<'_>]) -> anyhow::Result<u64> {
        match self {
            Conn::Sqlite(direct) => direct.execute(sql, args).await,
            Conn::Postgres(tx) => tx.execute(sql, args).await,
        }
    }

    async fn read_text(&mut self, sql: &str, args: &[Arg<'_>]) -> anyhow::Result<String> {
        match self {
            Conn::Sqlite(direct) => direct.read_text(sql, args).await,
            Conn::Postgres(tx) => tx.read_text(sql, args).await,
        }
    }

    async fn execute_each(&mut self, sql: &str, rows: &[Vec<Arg<'_>>]) -> anyhow::Result<Vec<u64>> {
        match self {
            Conn::Sqlite(direct) => direct.execute_each(sql, rows).await,
            Conn::Postgres(tx) => tx.execute_each(sql, rows).await,
        }
    }

    async fn read_each<T>(
        &mut self,
        sql: &str,
        rows: &[Vec<Arg<'_>>],
        read: fn(&dyn Columns) -> anyhow::Result<T>,
    ) -> anyhow::Result<Vec<T>> {
        match self {
            Conn::Sqlite(direct) => direct.read_each(sql, rows, read).await,
            Conn::Postgres(tx) => tx.read_each(sql, rows, read).await,
        }
    }
}

impl Store {
    /// Runs `work` for an upload of `poller_id` received at `received_at`, in one
    /// transaction under the write lock, committed if the work returns `Ok`; run again if
    /// PostgreSQL aborts it as a conflict (`conflicts`).
    pub async fn ingest<W: IngestWork>(
        &self,
        poller_id: &str,
        received_at: i64,
        work: &W,
    ) -> anyhow::Result<W::Output> {
        super::conflicts::retrying("storing results", || {
            self.ingest_once(poller_id, received_at, work)
        })
        .await
    }

    /// One try of `ingest`.
    async fn ingest_once<W: IngestWork>(
        &self,
        poller_id: &str,
        received_at: i64,
        work: &W,
    ) -> anyhow::Result<W::Output> {
        let _guard = self.write_lock().await;
        if !self.backend().binds_each_row() {
            let mut tx = self.writer.begin().await?;
            let mut ingest = IngestTx::new(Conn::Postgres(&mut tx), self, poller_id, received_at);
            let output = work.run(&mut ingest).await?;
            tx.commit().await?;
            return Ok(output);
        }
        let file = self
            .sqlite_file
            .as_deref()
            .context("a SQLite store without its file")?;
        let mut writer = self.writer.acquire().await?;
        let (output, fresh) = self
            .ingest_writer
            .transaction(file, &mut writer, |db| {
                let mut ingest =
                    IngestTx::new(Conn::Sqlite(Direct(db)), self, poller_id, received_at);
                let output = futures_executor::block_on(work.run(&mut ingest))?;
                Ok((output, ingest.fresh))
            })
            .await?;
        // Committed, and still under the write lock: the head gets them in commit order,
        // which is rowid order (`head`).
        self.head.append(fresh);
        Ok(output)
    }
}

impl<'t> IngestTx<'t> {
    fn new(conn: Conn<'t>, store: &'t Store, poller_id: &'t str, received_at: i64) -> Self {
        IngestTx {
            conn,
            store,
            poller_id,
            received_at,
            fresh: Vec::new(),
        }
    }

    /// Holds the monitors `monitor_ids` names (sorted, each once), before any other row, and
    /// reads their placements (an unknown monitor has none). Two uploads sharing a monitor
    /// queue whole, and on PostgreSQL a move of a monitor's own placement (its `monitors` row)
    /// waits for this transaction or is seen by this read (`conflicts::hold_monitors`; on
    /// SQLite the write lock does both).
    pub async fn placements(
        &mut self,
        monitor_ids: &[String],
    ) -> anyhow::Result<Vec<OwnershipRow>> {
        let backend = self.store.backend();
        super::conflicts::hold_monitors(
            &mut self.conn,
            backend,
            monitor_ids.iter().map(String::as_str),
        )
        .await?;
        super::intake::ownership(&mut self.conn, backend, monitor_ids).await
    }

    /// The maintenance windows not over by `from`.
    pub async fn windows_not_over(&mut self, from: i64) -> anyhow::Result<Vec<MaintenanceWindow>> {
        super::maintenance::windows_not_over_in(&mut self.conn, self.store.backend(), from).await
    }

    /// Inserts the results not stored before and returns their ids; a result whose id is
    /// stored already (or earlier in the batch, or in this transaction) is a duplicate, skipped.
    pub async fn insert_new(&mut self, results: &[NewResult]) -> anyhow::Result<HashSet<String>> {
        let (inserted, fresh) = self
            .store
            .insert_new(
                &mut self.conn,
                self.poller_id,
                results,
                self.received_at,
                &self.fresh,
            )
            .await?;
        self.fresh.extend(fresh);
        Ok(inserted)
    }

    /// The status rows of `stored`'s monitors (and of their locations, if any is located) as
    /// they are before this batch: locked on PostgreSQL until the transaction ends.
    pub async fn status_before(&mut self, stored: &[&NewResult]) -> anyhow::Result<StatusesBefore> {
        self.store.read_status_rows(&mut self.conn, stored).await
    }

    /// What the time `stored` stands for is credited from: per monitor and location, its
    /// history around the new results (`timeline`), each monitor's reaching `lookback_ms` of
    /// it further back, given the status rows `before`.
    pub async fn time_spans(
        &mut self,
        stored: &[&NewResult],
        before: &StatusesBefore,
        lookback_ms: &BTreeMap<&str, i64>,
    ) -> anyhow::Result<Vec<TimeSpan>> {
        self.store
            .time_spans(&mut self.conn, stored, &self.fresh, lookback_ms, before)
            .await
    }

    /// Adds `stored`'s counts and the time `credits` to the rollups.
    pub async fn add_to_rollups(
        &mut self,
        stored: &[&NewResult],
        credits: &Credits,
    ) -> anyhow::Result<()> {
        self.store
            .add_to_rollups(&mut self.conn, stored, credits)
            .await
    }

    /// Moves `table`'s status rows to `results` (the batch's stored results that have a row
    /// there) and, where `moved` holds one, to the verdict state the service moved them to.
    pub async fn move_status_rows<'a>(
        &mut self,
        table: StatusTable,
        results: &[&'a NewResult],
        moved: &std::collections::HashMap<StatusKey<'a>, StoredVerdict>,
    ) -> anyhow::Result<()> {
        super::status_moves::write_status_rows(
            &mut self.conn,
            self.store.backend(),
            self.poller_id,
            table,
            results,
            moved,
        )
        .await
    }

    /// The dependencies recorded for the locations whose documents are among `stored`, to be
    /// moved by the service and written back (`record_dependencies`); `None` when `stored`
    /// has no document to record.
    pub async fn dependency_ledger<'a>(
        &mut self,
        stored: &[&'a NewResult],
    ) -> anyhow::Result<Option<DependencyLedger<'a>>> {
        DependencyLedger::read(&mut self.conn, self.store.backend(), stored).await
    }

    /// Writes what `ledger` was moved to; returns whether a change awaits a notice.
    pub async fn record_dependencies(
        &mut self,
        ledger: DependencyLedger<'_>,
    ) -> anyhow::Result<bool> {
        ledger.write(&mut self.conn, self.store.backend()).await
    }

    /// Marks monitors due for alerting's look: `confirmed` keep theirs steady (`due`),
    /// `overdue` are looked at now and `news` first. Returns whether any was marked.
    pub async fn mark_due(
        &mut self,
        confirmed: &[super::due::Confirmation<'_>],
        overdue: &[&str],
        news: &[&str],
    ) -> anyhow::Result<bool> {
        let backend = self.store.backend();
        let at = self.received_at;
        // Every due row this writes, locked in one pass in id order (PostgreSQL): the
        // confirmations and the two kinds of marks below are several statements.
        let touched: Vec<&str> = confirmed
            .iter()
            .map(|c| c.id)
            .chain(overdue.iter().copied())
            .chain(news.iter().copied())
            .collect();
        super::due::lock_due_rows(&mut self.conn, backend, &touched).await?;
        let mut marked = super::due::confirm_due(&mut self.conn, backend, confirmed, at).await?;
        for (ids, at) in [
            (overdue, at),
            (news, at.saturating_sub(super::due::NEWS_AHEAD_MS)),
        ] {
            if !ids.is_empty() {
                super::due::mark_each(&mut self.conn, backend, ids, at).await?;
                marked = true;
            }
        }
        Ok(marked)
    }

    /// Records the upload's time for its poller; returns when its previous upload was stored
    /// as the database held it before this one (`None`: none before), whatever stores after
    /// it (a restored copy's record, before its first upload moves it on).
    pub async fn record_upload(&mut self) -> anyhow::Result<Option<i64>> {
        let previous = self
            .conn
            .read_each(
                "SELECT last_upload_at FROM pollers WHERE id = $1",
                &[vec![self.poller_id.into()]],
                |row: &dyn Columns| row.int_or_null(0),
            )
            .await?
            .into_iter()
            .next()
            .flatten();
        self.conn
            .execute(
                "UPDATE pollers SET last_upload_at = $2 WHERE id = $1",
                &[self.poller_id.into(), self.received_at.into()],
            )
            .await?;
        Ok(previous)
    }

    /// When the upload was received.
    pub fn received_at(&self) -> i64 {
        self.received_at
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::service::ingest::batch::{store_batch, Ingested};
    use crate::service::testing::NewestDecides;
    use crate::store::testing::{result, sqlite_store};

    /// Lets every result stand, and records whom the placements it read assign `m1` to.
    struct Recording {
        results: Vec<NewResult>,
        seen: Mutex<Vec<Option<String>>>,
    }

    impl IngestWork for Recording {
        type Output = Ingested;

        async fn run(&self, tx: &mut IngestTx<'_>) -> anyhow::Result<Ingested> {
            let owners = tx.placements(&["m1".to_string()]).await?;
            let assigned = owners.into_iter().find_map(|o| o.assigned_poller_id);
            self.seen.lock().unwrap().push(assigned);
            store_batch(tx, &self.results, &NewestDecides).await
        }
    }

    /// An upload waiting for its turn to write is decided by the placements as they are when
    /// it stores, not as they were when it arrived: a move committed meanwhile is seen.
    #[tokio::test]
    async fn an_upload_is_decided_by_the_placements_it_is_stored_against() {
        let (store, _dir) = sqlite_store().await;
        let store = Arc::new(store);
        sqlx::query(
            "INSERT INTO monitors (id, name, kind, target, interval_ms, timeout_ms, settings, \
             poller_mode, created_at, updated_at, revision, assigned_poller_id) \
             VALUES ('m1', 'm', 'http', 'http://127.0.0.1/', 5000, 1000, '{}', 'auto', 0, 0, 1, \
             'a')",
        )
        .execute(&store.pool)
        .await
        .unwrap();
        let work = Arc::new(Recording {
            results: vec![result("r1", 1_000, "up")],
            seen: Mutex::default(),
        });
        let under_way = store.write_lock().await;
        let upload = tokio::spawn({
            let (store, work) = (store.clone(), work.clone());
            async move { store.ingest("a", 2_000, &*work).await.unwrap() }
        });
        // The upload runs until it waits for the write under way (one thread: it runs only
        // when this task waits).
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        sqlx::query("UPDATE monitors SET assigned_poller_id = 'b' WHERE id = 'm1'")
            .execute(&store.writer)
            .await
            .unwrap();
        drop(under_way);
        let ingested = upload.await.unwrap();
        assert_eq!(ingested.stored.len(), 1);
        assert_eq!(*work.seen.lock().unwrap(), vec![Some("b".to_string())]);
    }

    /// Two batches in one transaction.
    struct Twice {
        first: Vec<NewResult>,
        second: Vec<NewResult>,
    }

    impl IngestWork for Twice {
        type Output = (Ingested, Ingested);

        async fn run(&self, tx: &mut IngestTx<'_>) -> anyhow::Result<(Ingested, Ingested)> {
            tx.placements(&["m1".to_string()]).await?;
            let first = store_batch(tx, &self.first, &NewestDecides).await?;
            let second = store_batch(tx, &self.second, &NewestDecides).await?;
            Ok((first, second))
        }
    }

    /// A unit of work may insert more than once: on SQLite each insert numbers its rows after
    /// the ones this transaction stored already (the head learns them only at the commit), and
    /// every row is read back where it belongs.
    #[tokio::test]
    async fn a_transaction_may_insert_twice() {
        let (store, _dir) = sqlite_store().await;
        let work = Twice {
            first: vec![result("a", 1_000, "up"), result("b", 2_000, "up")],
            second: vec![result("b", 2_000, "up"), result("c", 3_000, "down")],
        };
        let (first, second) = store.ingest("p1", 4_000, &work).await.unwrap();
        assert_eq!(first.stored.len(), 2);
        assert_eq!(second.stored, ["c".to_string()].into());
        let start = crate::store::Cursor {
            key: 0,
            id: String::new(),
        };
        let read: Vec<(String, i64)> = store
            .list_results("m1", &start, 10)
            .await
            .unwrap()
            .into_iter()
            .map(|r| (r.id, r.ts))
            .collect();
        let expected =
            [("a", 1_000), ("b", 2_000), ("c", 3_000)].map(|(id, ts)| (id.to_string(), ts));
        assert_eq!(read, expected);
    }
}
