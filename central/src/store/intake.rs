//! What an upload is checked against, read inside the transaction that stores it: the
//! placements of the monitors it names (`OwnershipRow`) and the maintenance windows around its
//! results. The service decides from them which results stand and by which rules (`Intake`);
//! this module owns only the reads and their order, not a decision.
//!
//! Why inside the transaction: a result is judged by the placements it is stored against. An
//! upload waiting for its turn to write sees a move committed meanwhile (on SQLite the reads
//! run under the write lock; on PostgreSQL after the monitors' rows are held, which a move of
//! a monitor's own placement must wait for), where a read made on arrival was stale by then.
//! And on SQLite the reads run on the writing connection within ingest's one blocking call
//! (`direct`): before, each was a statement of its own handed to sqlx's worker thread and back,
//! two crossings more per upload.

use super::dialect::listed;
use super::maintenance::windows_not_over_in;
use super::packed::{columns_of, packed, unpack};
use super::statements::{Arg, Statements};
use super::{Backend, IngestRules, NewResult, WindowRow};

/// The service's side of an upload, asked by `Store::ingest_upload` inside its transaction.
/// Asked again from the start if PostgreSQL aborts the transaction as a conflict, so it must
/// decide from what it is given only.
pub trait Intake: Sync {
    /// What the service decided: the results that stand, their rules, and what it tells of
    /// the others.
    type Decision: Send;

    /// The monitors the upload names, sorted, each once (`NewResult::monitors_named`).
    fn monitor_ids(&self) -> &[String];

    /// Decides which results stand and by which rules, given the placements of
    /// `monitor_ids` as stored now (an unknown monitor has none).
    fn accept(&self, owners: Vec<OwnershipRow>) -> Self::Decision;

    /// From when maintenance windows matter to the results that stand: the windows not over
    /// by then are read for `cover`. `None`: none matter, and none is read.
    fn windows_from(&self, decision: &Self::Decision) -> Option<i64>;

    /// Gives the rules the time those windows cover.
    fn cover(&self, decision: &mut Self::Decision, windows: Vec<WindowRow>);

    /// The results that stand (each stored unless it was before) and the rules ingest
    /// applies to them.
    fn batch<'d>(&'d self, decision: &'d Self::Decision) -> (&'d [NewResult], &'d dyn IngestRules);
}

/// Results whose rules are known already, which all stand (`Store::insert_results`).
pub(super) struct Given<'a> {
    results: &'a [NewResult],
    rules: &'a dyn IngestRules,
    monitor_ids: Vec<String>,
}

impl<'a> Given<'a> {
    pub(super) fn new(results: &'a [NewResult], rules: &'a dyn IngestRules) -> Self {
        let monitor_ids = NewResult::monitors_named(results);
        Given {
            results,
            rules,
            monitor_ids,
        }
    }
}

impl Intake for Given<'_> {
    type Decision = ();

    fn monitor_ids(&self) -> &[String] {
        &self.monitor_ids
    }

    fn accept(&self, _: Vec<OwnershipRow>) {}

    fn windows_from(&self, _: &()) -> Option<i64> {
        None
    }

    fn cover(&self, _: &mut (), _: Vec<WindowRow>) {}

    fn batch<'d>(&'d self, _: &'d ()) -> (&'d [NewResult], &'d dyn IngestRules) {
        (self.results, self.rules)
    }
}

/// What `intake` decides, from the rows it asks for, read in `tx` once the monitors it names
/// are held.
pub(super) async fn decide<I: Intake>(
    tx: &mut impl Statements,
    backend: Backend,
    intake: &I,
) -> anyhow::Result<I::Decision> {
    let named = intake.monitor_ids();
    // Before any other row: two uploads sharing a monitor queue whole, and on PostgreSQL a
    // move of a monitor's own placement (its `monitors` row) waits for this transaction or is
    // seen by the read below (`conflicts::hold_monitors`; on SQLite the write lock does both).
    super::conflicts::hold_monitors(tx, backend, named.iter().map(String::as_str)).await?;
    let owners = ownership(tx, backend, named).await?;
    let mut decision = intake.accept(owners);
    if let Some(from) = intake.windows_from(&decision) {
        let windows = windows_not_over_in(tx, backend, from).await?;
        intake.cover(&mut decision, windows);
    }
    Ok(decision)
}

/// Who may upload results for a monitor, or for one of its locations.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct OwnershipRow {
    pub id: String,
    /// The location, for a multi-location monitor (one row per location).
    pub region: Option<String>,
    pub assigned_poller_id: Option<String>,
    pub previous_poller_id: Option<String>,
    pub assigned_at: Option<i64>,
    /// The monitor's kind and settings (its confirmation thresholds).
    pub kind: String,
    pub settings: String,
    /// How its results stand for time (`service::uptime`): its interval and timeout, quorum
    /// and last pause.
    pub interval_ms: i64,
    pub timeout_ms: i64,
    pub quorum: Option<i64>,
    pub paused_at: Option<i64>,
    pub resumed_at: Option<i64>,
    /// Its tags (JSON array), which maintenance windows may cover.
    pub tags: Option<String>,
}

impl OwnershipRow {
    /// A row of `store::intake`'s read, by place: the columns in the order of the fields.
    pub(super) fn read(row: &dyn super::statements::Columns) -> anyhow::Result<Self> {
        Ok(OwnershipRow {
            id: row.text(0)?,
            region: row.text_or_null(1)?,
            assigned_poller_id: row.text_or_null(2)?,
            previous_poller_id: row.text_or_null(3)?,
            assigned_at: row.int_or_null(4)?,
            kind: row.text(5)?,
            settings: row.text(6)?,
            interval_ms: row.int(7)?,
            timeout_ms: row.int(8)?,
            quorum: row.int_or_null(9)?,
            paused_at: row.int_or_null(10)?,
            resumed_at: row.int_or_null(11)?,
            tags: row.text_or_null(12)?,
        })
    }
}

/// Who owns each of these monitors (unknown ids are simply absent): one row for a
/// single-location monitor, one per location for a multi-location one, by id, then region. On SQLite one monitor a statement, its rows read as they
/// are (`statements` says why); on PostgreSQL one statement, its rows packed (`packed`) with
/// the ids as one JSON parameter, so that the statement's text is the same for every upload.
async fn ownership(
    tx: &mut impl Statements,
    backend: Backend,
    monitor_ids: &[String],
) -> anyhow::Result<Vec<OwnershipRow>> {
    if monitor_ids.is_empty() {
        return Ok(Vec::new());
    }
    let owned = |single: &str, multi: &str| {
        format!(
            "SELECT id, NULL AS region, assigned_poller_id, previous_poller_id, assigned_at, \
             kind, settings, interval_ms, timeout_ms, quorum, paused_at, resumed_at, tags \
             FROM monitors WHERE {single} AND poller_mode <> 'multi' \
             UNION ALL \
             SELECT l.monitor_id, l.region, l.assigned_poller_id, l.previous_poller_id, \
             l.assigned_at, m.kind, m.settings, m.interval_ms, m.timeout_ms, m.quorum, m.paused_at, \
             m.resumed_at, m.tags FROM monitor_locations l \
             JOIN monitors m ON m.id = l.monitor_id \
             WHERE {multi} AND m.poller_mode = 'multi'"
        )
    };
    if backend.binds_each_row() {
        let sql = format!("{} ORDER BY region", owned("id = $1", "l.monitor_id = $1"));
        let rows: Vec<Vec<Arg>> = monitor_ids.iter().map(|id| vec![id.into()]).collect();
        return tx.read_each(&sql, &rows, OwnershipRow::read).await;
    }
    let owned = owned(
        &listed(backend, "id", "$1"),
        &listed(backend, "l.monitor_id", "$1"),
    );
    let sql = packed(
        backend,
        &columns_of(
            "id, region, assigned_poller_id, previous_poller_id, assigned_at, kind, \
             settings, interval_ms, timeout_ms, quorum, paused_at, resumed_at, tags",
        ),
        &format!("FROM ({owned}) AS owned"),
        "id, region",
    );
    let ids = serde_json::to_string(monitor_ids)?;
    unpack(&tx.read_text(&sql, &[(&ids).into()]).await?)
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::store::testing::{result, sqlite_store};

    use crate::service::testing::NewestDecides;
    /// Lets every result stand, and records whom the placements it was given assign `m1` to.
    struct Recording {
        ids: Vec<String>,
        results: Vec<NewResult>,
        seen: Mutex<Vec<Option<String>>>,
    }

    impl Intake for Recording {
        type Decision = ();

        fn monitor_ids(&self) -> &[String] {
            &self.ids
        }

        fn accept(&self, owners: Vec<OwnershipRow>) {
            let assigned = owners.into_iter().find_map(|o| o.assigned_poller_id);
            self.seen.lock().unwrap().push(assigned);
        }

        fn windows_from(&self, _: &()) -> Option<i64> {
            None
        }

        fn cover(&self, _: &mut (), _: Vec<WindowRow>) {}

        fn batch<'d>(&'d self, _: &'d ()) -> (&'d [NewResult], &'d dyn IngestRules) {
            (&self.results, &NewestDecides)
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
        let intake = Arc::new(Recording {
            ids: vec!["m1".into()],
            results: vec![result("r1", 1_000, "up")],
            seen: Mutex::default(),
        });
        let under_way = store.write_lock().await;
        let upload = tokio::spawn({
            let (store, intake) = (store.clone(), intake.clone());
            async move { store.ingest_upload("a", &*intake, 2_000).await.unwrap() }
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
        let (ingested, ()) = upload.await.unwrap();
        assert_eq!(ingested.stored.len(), 1);
        assert_eq!(*intake.seen.lock().unwrap(), vec![Some("b".to_string())]);
    }
}
