//! `result_index` on SQLite (docs/results-head.md): the head loaded at start, flushed into the
//! index in chunks, and the statements that read one monitor's results through both. Owns
//! every statement that writes `result_index` and the shape of every read by monitor; the
//! head's bookkeeping is `head`'s, and what a read is for is its caller's. On PostgreSQL there
//! is no head: its reads go through `results_monitor_ts` as they always did.
//!
//! Costs: loading is a range read of `results` after the cut (the results of one flush
//! period); a flush is proportional to the rowids it takes (each chunk one `INSERT … SELECT`
//! by rowid, sorted by the database into the index's order); a read adds to its plain indexed
//! read the monitor's rowids still in the head, read by rowid.

use std::time::Duration;

use sqlx::Row;

use super::head::{self, Head};
use super::{Backend, Store};

/// How often the flush duty flushes the head (or sooner, once it holds `head::FLUSH_AT`
/// rowids). Longer periods put more of a monitor's results on each index page written (at a
/// 60 s interval, five per page instead of one), and keep more in memory.
pub const FLUSH_EVERY: Duration = Duration::from_secs(300);

/// Rowids per flush transaction: uploads wait for one chunk at most.
const CHUNK: usize = 5_000;

/// The greatest rowid whose result is in `result_index` (every smaller one too).
const CUT: &str = "result_index_cut";

/// Which way a read orders a monitor's results (by time, then id).
#[derive(Debug, Clone, Copy)]
pub(super) enum Order {
    Oldest,
    Newest,
}

impl Order {
    fn by(self, table: &str) -> String {
        let dir = match self {
            Order::Oldest => "",
            Order::Newest => " DESC",
        };
        format!("{table}.ts{dir}, {table}.id{dir}")
    }

    fn of_result(self) -> &'static str {
        match self {
            Order::Oldest => "ts, id",
            Order::Newest => "ts DESC, id DESC",
        }
    }
}

/// A statement reading one monitor's results: `columns` of `results` as `r` (they must
/// include `r.id` and `r.ts`: a result read from both the head and the index is dropped as a
/// duplicate by its whole row), those passing `filter` (conditions on the result's time
/// written against the table alias it is given, other columns against `r`, each starting with
/// ` AND`), in `order`, at most `limit` (a parameter or a number). `monitor` is the
/// monitor's parameter; `head` (SQLite) the parameter holding its rowids in the head, a JSON
/// array (`Store::head_rowids`) taken before the statement runs. The statement can be
/// wrapped as a subquery (`SELECT * FROM (…) AS name`).
pub(super) fn by_monitor(
    backend: Backend,
    columns: &str,
    monitor: &str,
    head: &str,
    filter: &dyn Fn(&str) -> String,
    order: Order,
    limit: &str,
) -> String {
    if !backend.keeps_results_head() {
        return format!(
            "SELECT {columns} FROM results r WHERE r.monitor_id = {monitor}{} \
             ORDER BY {} LIMIT {limit}",
            filter("r"),
            order.by("r"),
        );
    }
    // The head's rows by rowid, then the index's in its order joined to their rows by id;
    // `UNION` drops a row read from both (its chunk committed after the head was read).
    format!(
        "SELECT {columns} FROM results r WHERE r.rowid IN (SELECT value FROM json_each({head})) \
         AND r.monitor_id = {monitor}{} \
         UNION SELECT * FROM (SELECT {columns} FROM result_index x JOIN results r ON r.id = x.id \
         WHERE x.monitor_id = {monitor}{} ORDER BY {} LIMIT {limit}) \
         ORDER BY {} LIMIT {limit}",
        filter("r"),
        filter("x"),
        order.by("x"),
        order.of_result(),
    )
}

impl Store {
    /// The monitor's rowids in the head as `by_monitor` takes them (`[]` on PostgreSQL). Take
    /// them before the read's statement runs: that order keeps the read whole (`head`).
    pub(super) fn head_rowids(&self, monitor_id: &str) -> String {
        let rowids = self.head.rowids_of(monitor_id);
        serde_json::to_string(&rowids).unwrap_or_else(|_| "[]".into())
    }

    /// The monitor's rowids in the head and in `fresh` (what the transaction under way stored,
    /// not yet in the head): for reads inside ingest's own transaction.
    pub(super) fn unflushed_rowids(&self, monitor_id: &str, fresh: &[(String, i64)]) -> Vec<i64> {
        let mut rowids = self.head.rowids_of(monitor_id);
        rowids.extend(
            fresh
                .iter()
                .filter(|(monitor, _)| monitor == monitor_id)
                .map(|(_, rowid)| *rowid),
        );
        rowids
    }

    /// `unflushed_rowids` as `by_monitor` takes them.
    pub(super) fn unflushed(&self, monitor_id: &str, fresh: &[(String, i64)]) -> String {
        serde_json::to_string(&self.unflushed_rowids(monitor_id, fresh))
            .unwrap_or_else(|_| "[]".into())
    }

    /// The head as the database leaves it (SQLite): the rowids after the cut. A cut whose
    /// rows were renumbered (a database restored from a `VACUUM INTO` copy: `VACUUM` may
    /// renumber the rowids of a table without an `INTEGER PRIMARY KEY`, and then a result not
    /// yet flushed may sit at or below the cut) is found by the newest row at or below it not
    /// being in the index; then every result is indexed again (as a `CREATE INDEX` would) and
    /// the cut moved to the newest.
    pub(super) async fn load_head(&self) -> anyhow::Result<Head> {
        let cut = self.index_cut().await?;
        let below: Option<(String, i64, String)> = sqlx::query_as(
            "SELECT monitor_id, ts, id FROM results WHERE rowid <= $1 ORDER BY rowid DESC LIMIT 1",
        )
        .bind(cut)
        .fetch_optional(&self.pool)
        .await?;
        let cut = match below {
            Some((monitor_id, ts, id)) if !self.indexed(&monitor_id, ts, &id).await? => {
                tracing::warn!(
                    "results were renumbered since the index was last flushed (a restored \
                     copy?): indexing every result again"
                );
                self.index_everything().await?
            }
            _ => cut,
        };
        let rows = sqlx::query(
            "SELECT rowid AS at, monitor_id FROM results WHERE rowid > $1 ORDER BY rowid",
        )
        .bind(cut)
        .fetch_all(&self.pool)
        .await?;
        let mut stored = Vec::with_capacity(rows.len());
        for row in rows {
            stored.push((row.try_get::<String, _>("monitor_id")?, row.try_get("at")?));
        }
        let (newest,): (i64,) = sqlx::query_as("SELECT COALESCE(MAX(rowid), 0) FROM results")
            .fetch_one(&self.pool)
            .await?;
        Ok(Head::starting_after(newest.max(cut), stored))
    }

    async fn index_cut(&self) -> anyhow::Result<i64> {
        let cut: Option<(String,)> = sqlx::query_as("SELECT value FROM settings WHERE key = $1")
            .bind(CUT)
            .fetch_optional(&self.pool)
            .await?;
        Ok(cut.and_then(|(v,)| v.parse().ok()).unwrap_or(0))
    }

    async fn indexed(&self, monitor_id: &str, ts: i64, id: &str) -> anyhow::Result<bool> {
        let found: Option<(i64,)> = sqlx::query_as(
            "SELECT 1 FROM result_index WHERE monitor_id = $1 AND ts = $2 AND id = $3",
        )
        .bind(monitor_id)
        .bind(ts)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(found.is_some())
    }

    /// Indexes every stored result and moves the cut to the newest; returns the cut.
    async fn index_everything(&self) -> anyhow::Result<i64> {
        let _guard = self.write_lock().await;
        let mut tx = self.writer.begin().await?;
        sqlx::query(
            "INSERT OR IGNORE INTO result_index (monitor_id, ts, id) \
             SELECT monitor_id, ts, id FROM results ORDER BY monitor_id, ts, id",
        )
        .execute(&mut *tx)
        .await?;
        let (cut,): (i64,) = sqlx::query_as("SELECT COALESCE(MAX(rowid), 0) FROM results")
            .fetch_one(&mut *tx)
            .await?;
        store_cut(&mut tx, cut).await?;
        tx.commit().await?;
        Ok(cut)
    }

    /// Flushes the head into `result_index` up to its newest rowid, a chunk of whole monitors
    /// per transaction; returns how many rowids it took. A no-op on PostgreSQL.
    pub async fn flush_results_head(&self) -> anyhow::Result<usize> {
        if !self.backend.keeps_results_head() {
            return Ok(0);
        }
        // One flush at a time (the duty's and retention's): a second would insert the same
        // rows again, harmless but wasted.
        let _flushing = self.head_flushing.lock().await;
        let cut = self.head.newest();
        let chunks = head::chunks(self.head.to_flush(cut), CHUNK);
        let taken = chunks
            .iter()
            .flat_map(|c| c.iter().map(|(_, rowids)| rowids.len()))
            .sum();
        let count = chunks.len();
        for (n, chunk) in chunks.into_iter().enumerate() {
            self.flush_chunk(&chunk, (n + 1 == count).then_some(cut))
                .await?;
            self.head
                .flushed(chunk.iter().map(|(monitor, _)| monitor.as_str()), cut);
        }
        // Nothing taken, nothing written: the rows after the stored cut are then those of
        // deleted monitors, which a start reads nothing of.
        Ok(taken)
    }

    /// One transaction of a flush: the chunk's results into the index (from `results`, so
    /// that what a deletion removed meanwhile stays out; sorted into the index's order by the
    /// database), and the cut with the last chunk.
    async fn flush_chunk(&self, chunk: &head::Taken, cut: Option<i64>) -> anyhow::Result<()> {
        let rowids: Vec<i64> = chunk
            .iter()
            .flat_map(|(_, rowids)| rowids.iter().copied())
            .collect();
        let rowids = serde_json::to_string(&rowids)?;
        let _guard = self.write_lock().await;
        let mut tx = self.writer.begin().await?;
        sqlx::query(
            "INSERT OR IGNORE INTO result_index (monitor_id, ts, id) \
             SELECT monitor_id, ts, id FROM results \
             WHERE rowid IN (SELECT value FROM json_each($1)) ORDER BY monitor_id, ts, id",
        )
        .bind(&rowids)
        .execute(&mut *tx)
        .await?;
        if let Some(cut) = cut {
            store_cut(&mut tx, cut).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Resolves when the head should be flushed before its period is up (`head::FLUSH_AT`).
    pub async fn results_head_filled(&self) {
        self.head.filled().await
    }

    /// How many results the head holds (not yet in `result_index`).
    pub fn results_head_len(&self) -> usize {
        self.head.len()
    }
}

async fn store_cut(tx: &mut sqlx::Transaction<'_, sqlx::Any>, cut: i64) -> anyhow::Result<()> {
    sqlx::query(
        "INSERT INTO settings (key, value) VALUES ($1, $2) \
         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
    )
    .bind(CUT)
    .bind(cut.to_string())
    .execute(&mut **tx)
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing::{result, sqlite_store};

    use crate::domain::Monitor;
    use crate::service::ingest::batch::store_standing;
    use crate::service::testing::NewestDecides;
    use crate::store::{Cursor, NewResult};

    fn of(id: &str, monitor: &str, ts: i64) -> NewResult {
        NewResult {
            monitor_id: monitor.into(),
            ..result(id, ts, "up")
        }
    }

    async fn store_results(store: &Store, batch: &[NewResult]) {
        store_standing(store, "p1", batch, 1, &NewestDecides)
            .await
            .unwrap();
    }

    /// Every read by monitor, as ids: the API's list, a page's newest, minute history and
    /// what retention walks.
    async fn reads(store: &Store, monitor: &str) -> [Vec<String>; 4] {
        let listed = store
            .list_results(monitor, &Cursor::start(), 100)
            .await
            .unwrap();
        let recent = store
            .recent_results_of(&[monitor.to_string()], 3)
            .await
            .unwrap();
        let between = store
            .results_between(&[(monitor.to_string(), 0)], i64::MAX, None, 100)
            .await
            .unwrap();
        let expiring = store
            .expiring_results(monitor, 3_500, &Cursor::start(), 100)
            .await
            .unwrap();
        [
            listed.into_iter().map(|r| r.id).collect(),
            recent
                .get(monitor)
                .map(|rows| rows.iter().map(|r| r.id.clone()).collect())
                .unwrap_or_default(),
            between
                .get(monitor)
                .map(|rows| rows.iter().map(|r| r.point.id.clone()).collect())
                .unwrap_or_default(),
            expiring.into_iter().map(|r| r.id).collect(),
        ]
    }

    fn expected(ids: &[&str], newest_three: &[&str], expiring: &[&str]) -> [Vec<String>; 4] {
        let owned = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        [owned(ids), owned(newest_three), owned(ids), owned(expiring)]
    }

    async fn listed(store: &Store, monitor: &str) -> Vec<String> {
        store
            .list_results(monitor, &Cursor::start(), 100)
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.id)
            .collect()
    }

    async fn index_rows(store: &Store, monitor: &str) -> i64 {
        let (n,): (i64,) =
            sqlx::query_as("SELECT count(*) FROM result_index WHERE monitor_id = $1")
                .bind(monitor)
                .fetch_one(&store.pool)
                .await
                .unwrap();
        n
    }

    /// Results read the same from the head, from the index, and from both at once (a chunk
    /// that committed after a reader took the head's rowids): never missing, never twice.
    #[tokio::test]
    async fn every_read_by_monitor_finds_results_in_the_head_and_in_the_index() {
        let (store, _dir) = sqlite_store().await;
        store_results(&store, &[of("a", "m1", 1_000), of("b", "m1", 2_000)]).await;
        store_results(&store, &[of("x", "m2", 1_500)]).await;
        let all = expected(&["a", "b"], &["b", "a"], &["a", "b"]);
        assert_eq!(reads(&store, "m1").await, all, "from the head");
        assert_eq!(index_rows(&store, "m1").await, 0, "nothing flushed yet");

        assert_eq!(store.flush_results_head().await.unwrap(), 3);
        assert_eq!(store.results_head_len(), 0);
        assert_eq!(index_rows(&store, "m1").await, 2);
        assert_eq!(reads(&store, "m1").await, all, "from the index");

        store_results(&store, &[of("c", "m1", 3_000), of("d", "m1", 4_000)]).await;
        let all = expected(&["a", "b", "c", "d"], &["d", "c", "b"], &["a", "b", "c"]);
        assert_eq!(reads(&store, "m1").await, all, "from both");

        // The index holds the head's results too, as when a chunk commits between a reader
        // taking the head's rowids and opening its snapshot.
        let mut tx = store.writer.begin().await.unwrap();
        let rowids = store.head_rowids("m1");
        sqlx::query(
            "INSERT INTO result_index (monitor_id, ts, id) SELECT monitor_id, ts, id \
             FROM results WHERE rowid IN (SELECT value FROM json_each($1))",
        )
        .bind(&rowids)
        .execute(&mut *tx)
        .await
        .unwrap();
        tx.commit().await.unwrap();
        assert_eq!(reads(&store, "m1").await, all, "in both at once: each once");
        assert_eq!(
            reads(&store, "m2").await[0],
            ["x"],
            "another monitor's untouched"
        );
    }

    /// A restart rebuilds the head from the rows after the stored cut; a `kill -9` in the
    /// middle of a flush leaves the cut where it was, and the next flush inserts again what
    /// the first did (`OR IGNORE`).
    #[tokio::test]
    async fn a_restart_finds_what_was_not_flushed() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("central.db").display());
        let store = Store::connect(&url).await.unwrap();
        store_results(&store, &[of("a", "m1", 1_000)]).await;
        store.flush_results_head().await.unwrap();
        store_results(&store, &[of("b", "m1", 2_000), of("x", "m2", 2_000)]).await;
        // A flush cut short: m1's chunk committed, the cut never stored.
        let taken = store.head.to_flush(store.head.newest());
        store.flush_chunk(&taken[..1].to_vec(), None).await.unwrap();
        drop(store);

        let store = Store::connect(&url).await.unwrap();
        assert_eq!(store.results_head_len(), 2, "b and x, after the cut");
        assert_eq!(listed(&store, "m1").await, ["a", "b"]);
        assert_eq!(store.flush_results_head().await.unwrap(), 2);
        assert_eq!(index_rows(&store, "m1").await, 2, "b once");
        assert_eq!(listed(&store, "m2").await, ["x"]);
        drop(store);
        let store = Store::connect(&url).await.unwrap();
        assert_eq!(
            store.results_head_len(),
            0,
            "all flushed: nothing after the cut"
        );
    }

    /// A database whose rowids were renumbered after the last flush (as `VACUUM` may, and a
    /// copy made with `VACUUM INTO` is restored): results not yet flushed now sit at or below
    /// the cut. The start finds it and indexes every result again.
    #[tokio::test]
    async fn renumbered_rowids_are_found_and_everything_is_indexed_again() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("central.db").display());
        let store = Store::connect(&url).await.unwrap();
        store_results(&store, &[of("a", "m1", 1_000)]).await;
        store.flush_results_head().await.unwrap();
        store_results(&store, &[of("b", "m1", 2_000)]).await;
        // What renumbering does to the cut's meaning: b, not flushed, at or below it.
        let mut tx = store.writer.begin().await.unwrap();
        store_cut(&mut tx, store.head.newest()).await.unwrap();
        tx.commit().await.unwrap();
        drop(store);

        let store = Store::connect(&url).await.unwrap();
        assert_eq!(index_rows(&store, "m1").await, 2, "b indexed at the start");
        assert_eq!(listed(&store, "m1").await, ["a", "b"]);
        assert_eq!(store.results_head_len(), 0);
    }

    /// Deleting a monitor takes its results from the head, the index and `results`; rowids
    /// after the newest deleted ones are not given again (the head's order relies on it).
    #[tokio::test]
    async fn a_deleted_monitors_results_go_everywhere_and_rowids_only_grow() {
        let (store, _dir) = sqlite_store().await;
        for id in ["m1", "m2"] {
            let monitor: Monitor = serde_json::from_value(serde_json::json!({
                "id": id, "name": id, "kind": "http", "target": "http://127.0.0.1:9/",
                "interval_ms": 60_000, "timeout_ms": 10_000, "settings": {},
                "poller_mode": "auto", "poller_regions": null, "failover": null, "paused": false,
                "created_at": 1_000, "updated_at": 1_000, "revision": 1,
            }))
            .unwrap();
            store.insert_monitor(&monitor).await.unwrap();
        }
        store_results(&store, &[of("a", "m1", 1_000), of("x", "m2", 1_000)]).await;
        store.flush_results_head().await.unwrap();
        store_results(&store, &[of("y", "m2", 2_000), of("b", "m1", 2_000)]).await;
        let before = store.head.newest();
        assert!(store.delete_monitor("m1", 3_000).await.unwrap().is_some());
        let (left,): (i64,) =
            sqlx::query_as("SELECT count(*) FROM results WHERE monitor_id = 'm1'")
                .fetch_one(&store.pool)
                .await
                .unwrap();
        assert_eq!(left, 0, "its rows, from the index and the head");
        assert_eq!(index_rows(&store, "m1").await, 0);
        assert!(store.head_rowids("m1") == "[]");
        assert_eq!(listed(&store, "m2").await, ["x", "y"]);
        store_results(&store, &[of("z", "m2", 3_000)]).await;
        let (rowid,): (i64,) = sqlx::query_as("SELECT rowid FROM results WHERE id = 'z'")
            .fetch_one(&store.pool)
            .await
            .unwrap();
        assert!(
            rowid > before,
            "rowid {rowid} given again (newest was {before})"
        );
    }

    /// Retention deletes rows and their index entries together, so that a monitor whose
    /// results are all gone is not walked again.
    #[tokio::test]
    async fn retention_deletes_index_entries_with_their_rows() {
        let (store, _dir) = sqlite_store().await;
        let batch: Vec<NewResult> = (1..=6)
            .map(|i| of(&format!("r{i}"), "m1", i * 1_000))
            .collect();
        store_results(&store, &batch).await;
        store.flush_results_head().await.unwrap();
        assert_eq!(
            store.delete_results_before("m1", 3_500, 2).await.unwrap(),
            2
        );
        assert_eq!(listed(&store, "m1").await, ["r3", "r4", "r5", "r6"]);
        assert_eq!(
            index_rows(&store, "m1").await,
            4,
            "the oldest two entries went"
        );
        assert_eq!(
            store
                .delete_results(&["r4".into(), "r6".into()])
                .await
                .unwrap(),
            2
        );
        assert_eq!(index_rows(&store, "m1").await, 2);
        assert_eq!(
            store
                .delete_results_before("m1", 10_000, 100)
                .await
                .unwrap(),
            2
        );
        assert_eq!(index_rows(&store, "m1").await, 0);
        assert_eq!(store.next_monitor_with_results("").await.unwrap(), None);
    }

    /// The migration on a database of the schema before it: every result indexed, the cut at
    /// the newest, `results_monitor_ts` gone.
    #[tokio::test]
    async fn the_migration_indexes_existing_results() {
        let dir = tempfile::tempdir().unwrap();
        let db = rusqlite::Connection::open(dir.path().join("old.db")).unwrap();
        db.execute_batch(
            "CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
             CREATE TABLE results (id TEXT PRIMARY KEY, monitor_id TEXT NOT NULL, ts BIGINT NOT NULL);
             CREATE INDEX results_monitor_ts ON results (monitor_id, ts, id);
             INSERT INTO results VALUES ('a', 'm2', 5), ('b', 'm1', 7), ('c', 'm1', 6);",
        )
        .unwrap();
        db.execute_batch(include_str!(
            "../../../migrations/sqlite/20261215000040_result_index.sql"
        ))
        .unwrap();
        let indexed: Vec<(String, i64, String)> = db
            .prepare("SELECT monitor_id, ts, id FROM result_index")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            indexed,
            [
                ("m1".into(), 6, "c".into()),
                ("m1".into(), 7, "b".into()),
                ("m2".into(), 5, "a".into())
            ]
        );
        let cut: String = db
            .query_row(
                "SELECT value FROM settings WHERE key = 'result_index_cut'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(cut, "3");
        let old: i64 = db
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE name = 'results_monitor_ts'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(old, 0);
    }
}
