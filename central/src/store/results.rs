//! Ingesting check results: each stored once (by id), moving its monitor's and location's
//! status rows, confirmed verdicts and time credit in the same transaction. Must not read
//! history for pages (`result_history`) or delete results (`result_pruning`).

use std::collections::{BTreeMap, HashSet};

use anyhow::Context;

use super::dialect::json_rows;
use super::intake::{Given, Intake};
use super::packed::{packed, unpack};
use super::statements::{Arg, Columns, Direct, Statements};
use super::status_moves::StoredVerdict;
use super::timeline::{TimeCredit, TimePoint};
use super::Store;

/// A validated result, ready to store. Serialises to the row shape PostgreSQL's insert unpacks.
#[derive(Debug, Clone, serde::Serialize)]
pub struct NewResult {
    pub id: String,
    pub monitor_id: String,
    /// The location it was checked from, for a multi-location monitor.
    pub region: Option<String>,
    pub ts: i64,
    pub status: String,
    pub latency_ms: Option<i64>,
    pub msg: String,
    /// JSON.
    pub meta: String,
    /// When the agent will check again (from `meta.engine.next_due_at`).
    #[serde(skip)]
    pub next_due_at: Option<i64>,
    /// The health document's dependencies, for a `health-json` check that read one.
    #[serde(skip)]
    pub dependencies: Option<super::dependencies::DependencyReport>,
}

impl NewResult {
    /// The monitors `results` name, each once (sorted): what an upload's reads and locks
    /// are taken over.
    pub fn monitors_named(results: &[NewResult]) -> Vec<String> {
        let mut ids: Vec<String> = results.iter().map(|r| r.monitor_id.clone()).collect();
        ids.sort();
        ids.dedup();
        ids
    }
}

/// The service's rules that ingest applies inside the results' transaction; the store only
/// keeps the state they move.
pub trait IngestRules: Sync {
    /// Moves a stored verdict state by one up/down result of `monitor_id`
    /// (`service::status::advance`).
    fn advance(&self, monitor_id: &str, state: StoredVerdict, result: &str) -> StoredVerdict;

    /// The instant before which a monitor whose newest result was checked at `ts` cannot
    /// change its status with time alone (`service::status::unchanged_until`).
    fn unchanged_until(&self, monitor_id: &str, ts: i64) -> i64;

    /// The interval `unchanged_until` assumes for a monitor (as read for this batch).
    fn interval_ms(&self, monitor_id: &str) -> i64;

    /// How far before the time it credits from a monitor's history must reach: the longest a
    /// result of it stands for.
    fn lookback_ms(&self, monitor_id: &str) -> i64;

    /// What new results change in the time credited to a monitor (`region` `None`) or one of
    /// its locations, per bucket (`service::uptime::Timeline::credit`). `history` holds the
    /// results from the earliest new one (or `old_until`, if earlier) minus the lookback to
    /// `new_until`, the location's only for a location; `new` names the new ones; `old_until`
    /// and `new_until` are its newest result time before and after the batch.
    fn credit_time(
        &self,
        monitor_id: &str,
        region: Option<&str>,
        history: &[&TimePoint],
        new: &HashSet<&str>,
        old_until: Option<i64>,
        new_until: i64,
    ) -> Vec<TimeCredit>;

    /// What a document checked at `at` changes in the dependencies of a monitor's location
    /// (`region` `""` for one checked from one place), stored as `before`
    /// (`service::dependencies::rules::diff`).
    fn dependency_diff(
        &self,
        monitor_id: &str,
        region: &str,
        at: i64,
        before: &[super::dependencies::DependencyRow],
        report: &super::dependencies::DependencyReport,
    ) -> super::dependencies::DependencyDiff;
}

/// What `insert_results` did.
#[derive(Debug, Default)]
pub struct Ingested {
    /// The ids it stored (the others were stored before: duplicates).
    pub stored: HashSet<String>,
    /// Whether it marked any monitor due for a look (news, or a monitor not steady).
    pub marked: bool,
    /// Whether a dependency's change awaits a notice (`service::dependencies::notices`).
    pub dependency_notices: bool,
    /// When the poller's previous upload was stored, as the database said before this one
    /// (`Some(None)`: none before; `None`: nothing was stored, so it was not read).
    pub previous_upload_at: Option<Option<i64>>,
}

/// Rows per INSERT statement (PostgreSQL).
const INSERT_CHUNK: usize = 1_000;

impl Store {
    /// Stores the results that are not stored yet and returns their ids; a result whose id is
    /// present already is a duplicate and changes nothing. The derived status of each monitor
    /// moves to its newest result by `ts`, never backwards, so late uploads are harmless; a
    /// `rate_limited` result updates the message and time but keeps the up/down verdict.
    ///
    /// Run again if PostgreSQL aborts it as a conflict (`conflicts`).
    pub async fn insert_results(
        &self,
        poller_id: &str,
        results: &[NewResult],
        received_at: i64,
        rules: &dyn IngestRules,
    ) -> anyhow::Result<Ingested> {
        let given = Given::new(results, rules);
        let (ingested, ()) = self.ingest_upload(poller_id, &given, received_at).await?;
        Ok(ingested)
    }

    /// Stores an upload as `insert_results` does, in one transaction with the reads `intake`
    /// decides from (`intake`): which results stand, and by which rules. Returns what it
    /// stored and the decision.
    ///
    /// Run again if PostgreSQL aborts it as a conflict (`conflicts`).
    pub async fn ingest_upload<I: Intake>(
        &self,
        poller_id: &str,
        intake: &I,
        received_at: i64,
    ) -> anyhow::Result<(Ingested, I::Decision)> {
        super::conflicts::retrying("storing results", || {
            self.ingest_upload_once(poller_id, intake, received_at)
        })
        .await
    }

    /// One try of `ingest_upload`: on SQLite one blocking call on the writing connection
    /// (`direct`), on PostgreSQL a transaction of sqlx; the same statements.
    async fn ingest_upload_once<I: Intake>(
        &self,
        poller_id: &str,
        intake: &I,
        received_at: i64,
    ) -> anyhow::Result<(Ingested, I::Decision)> {
        let _guard = self.write_lock().await;
        if !self.backend().binds_each_row() {
            let mut tx = self.writer.begin().await?;
            let (ingested, _, decision) = self
                .decide_and_ingest(&mut tx, poller_id, intake, received_at)
                .await?;
            tx.commit().await?;
            return Ok((ingested, decision));
        }
        let file = self
            .sqlite_file
            .as_deref()
            .context("a SQLite store without its file")?;
        let mut writer = self.writer.acquire().await?;
        let (ingested, fresh, decision) = self
            .ingest_writer
            .transaction(file, &mut writer, |tx| {
                futures_executor::block_on(self.decide_and_ingest(
                    &mut Direct(tx),
                    poller_id,
                    intake,
                    received_at,
                ))
            })
            .await?;
        // Committed, and still under the write lock: the head gets them in commit order,
        // which is rowid order (`head`).
        self.head.append(fresh);
        Ok((ingested, decision))
    }

    /// `intake`'s reads and decision, then `ingest` of the results that stand.
    async fn decide_and_ingest<I: Intake>(
        &self,
        tx: &mut impl Statements,
        poller_id: &str,
        intake: &I,
        received_at: i64,
    ) -> anyhow::Result<(Ingested, Vec<(String, i64)>, I::Decision)> {
        let decision = super::intake::decide(tx, self.backend(), intake).await?;
        let (results, rules) = intake.batch(&decision);
        let (ingested, fresh) = if results.is_empty() {
            Default::default()
        } else {
            self.ingest(tx, poller_id, results, received_at, rules)
                .await?
        };
        Ok((ingested, fresh, decision))
    }

    /// `insert_results`' statements, in the caller's transaction. Also returns, on SQLite, the
    /// monitor and rowid of each result it stored, for the head once the transaction commits.
    async fn ingest(
        &self,
        tx: &mut impl Statements,
        poller_id: &str,
        results: &[NewResult],
        received_at: i64,
        rules: &dyn IngestRules,
    ) -> anyhow::Result<(Ingested, Vec<(String, i64)>)> {
        // The caller holds the batch's monitors first (`intake::decide`).
        let (inserted, fresh) = self.insert_new(tx, poller_id, results, received_at).await?;
        let stored: Vec<&NewResult> = results
            .iter()
            .filter(|r| inserted.contains(&r.id))
            .collect();
        // Their status rows as they were before them (locked on PostgreSQL), for both the
        // time they stand for and the verdicts they move.
        let rows = self.read_status_rows(tx, &stored).await?;
        let credits = self.credit_time(tx, &stored, &fresh, rules, &rows).await?;
        // Each monitor's status, and each location's (results of multi-location monitors);
        // `flipped`: monitors whose verdict (or a location's) moved to another value, news,
        // looked at before the results that only confirm what was known.
        let flipped = super::status_moves::move_status_rows(
            tx,
            self.backend(),
            poller_id,
            &stored,
            rules,
            &rows,
        )
        .await?;
        self.add_to_rollups(tx, &stored, &credits).await?;
        let dependency_notices =
            super::dependency_reports::record(tx, self.backend(), &stored, rules).await?;
        // Each monitor's newest stored result of the batch: news, a confirmation that keeps
        // it from going overdue for a while (which a steady monitor takes without a look), or
        // one already overdue on arrival (a queue flushed late), which is looked at.
        let mut newest: BTreeMap<&str, i64> = BTreeMap::new();
        for result in &stored {
            let ts = newest
                .entry(result.monitor_id.as_str())
                .or_insert(result.ts);
            *ts = (*ts).max(result.ts);
        }
        let mut news = Vec::new();
        let mut overdue = Vec::new();
        let mut confirmed = Vec::new();
        for (id, ts) in newest {
            let until = rules.unchanged_until(id, ts);
            if flipped.contains(id) {
                news.push(id);
            } else if until > received_at {
                confirmed.push(super::due::Confirmation {
                    id,
                    until,
                    interval: rules.interval_ms(id),
                });
            } else {
                overdue.push(id);
            }
        }
        // Every due row this writes, locked in one pass in id order (PostgreSQL): the
        // confirmations and the two kinds of marks below are several statements.
        let touched: Vec<&str> = confirmed
            .iter()
            .map(|c| c.id)
            .chain(overdue.iter().copied())
            .chain(news.iter().copied())
            .collect();
        super::due::lock_due_rows(tx, self.backend(), &touched).await?;
        let mut marked =
            super::due::confirm_due(tx, self.backend(), &confirmed, received_at).await?;
        for (ids, at) in [
            (overdue, received_at),
            (news, received_at.saturating_sub(super::due::NEWS_AHEAD_MS)),
        ] {
            if !ids.is_empty() {
                super::due::mark_each(tx, self.backend(), &ids, at).await?;
                marked = true;
            }
        }
        // Read in this transaction: what the database held before this upload, whatever
        // stores after it (a restored copy's record, before its first upload moves it on).
        let previous = tx
            .read_each(
                "SELECT last_upload_at FROM pollers WHERE id = $1",
                &[vec![poller_id.into()]],
                |row: &dyn Columns| row.int_or_null(0),
            )
            .await?
            .into_iter()
            .next()
            .flatten();
        tx.execute(
            "UPDATE pollers SET last_upload_at = $2 WHERE id = $1",
            &[poller_id.into(), received_at.into()],
        )
        .await?;
        Ok((
            Ingested {
                stored: inserted,
                marked,
                dependency_notices,
                previous_upload_at: Some(previous),
            },
            fresh,
        ))
    }

    /// Inserts the results not stored before, and returns their ids and, on SQLite, the
    /// monitor and rowid of each (for the head, once the transaction commits). A result whose
    /// id is stored already (or earlier in the batch) is skipped.
    async fn insert_new(
        &self,
        tx: &mut impl Statements,
        poller_id: &str,
        results: &[NewResult],
        received_at: i64,
    ) -> anyhow::Result<(HashSet<String>, Vec<(String, i64)>)> {
        let mut inserted = HashSet::with_capacity(results.len());
        let mut fresh: Vec<(String, i64)> = Vec::new();
        if self.backend().keeps_results_head() {
            // One result a statement (`statements` says why), each given its rowid: the head's
            // newest plus its place in the batch, so that the head knows them without reading
            // them back, and a rowid is never taken again after the newest rows were deleted
            // (SQLite would reuse it: the head's order and the flush's cut rely on rowids only
            // growing). The insert says which rows it stored, and at which rowid.
            const INSERT: &str = "INSERT INTO results (rowid, id, monitor_id, poller_id, ts, \
                status, latency_ms, msg, meta, received_at, region) \
                VALUES ($3, $4, $5, $1, $6, $7, $8, $9, $10, $2, $11) \
                ON CONFLICT (id) DO NOTHING RETURNING id, rowid";
            let newest = self.head.newest();
            let rows: Vec<Vec<Arg>> = (newest + 1..)
                .zip(results)
                .map(|(rowid, r)| {
                    vec![
                        poller_id.into(),
                        received_at.into(),
                        rowid.into(),
                        r.id.as_str().into(),
                        r.monitor_id.as_str().into(),
                        r.ts.into(),
                        r.status.as_str().into(),
                        r.latency_ms.into(),
                        r.msg.as_str().into(),
                        r.meta.as_str().into(),
                        r.region.as_deref().into(),
                    ]
                })
                .collect();
            let pair = |row: &dyn Columns| Ok((row.text(0)?, row.int(1)?));
            for (id, rowid) in tx.read_each(INSERT, &rows, pair).await? {
                // Its rowid is its place in the batch after the newest before it.
                let result = usize::try_from(rowid - newest - 1)
                    .ok()
                    .and_then(|place| results.get(place))
                    .ok_or_else(|| anyhow::anyhow!("rowid {rowid} is not the batch's"))?;
                fresh.push((result.monitor_id.clone(), rowid));
                inserted.insert(id);
            }
        } else {
            // The batch travels as one JSON parameter that the database unpacks itself:
            // binding thousands of parameters one by one costs more than the insert.
            // Concurrent transactions of other replicas may store the same ids: the insert
            // says which rows it stored (packed, `packed`).
            #[derive(serde::Deserialize)]
            struct Stored {
                id: String,
            }
            let insert = format!(
                "INSERT INTO results (id, monitor_id, poller_id, ts, status, latency_ms, \
                 msg, meta, received_at, region) \
                 SELECT r.value ->> 'id', r.value ->> 'monitor_id', $1, \
                 CAST(r.value ->> 'ts' AS BIGINT), r.value ->> 'status', \
                 CAST(r.value ->> 'latency_ms' AS BIGINT), r.value ->> 'msg', \
                 r.value ->> 'meta', $2, r.value ->> 'region' FROM {} WHERE true \
                 ON CONFLICT (id) DO NOTHING",
                json_rows(self.backend(), "$3")
            );
            let sql = packed(self.backend(), &[("id", "id")], "FROM stored", "id");
            let sql = format!("WITH stored AS ({insert} RETURNING id) {sql}");
            for chunk in results.chunks(INSERT_CHUNK) {
                let rows = serde_json::to_string(chunk)?;
                let text = tx
                    .read_text(
                        &sql,
                        &[poller_id.into(), received_at.into(), Arg::from(&rows)],
                    )
                    .await?;
                inserted.extend(unpack::<Stored>(&text)?.into_iter().map(|s| s.id));
            }
        }
        Ok((inserted, fresh))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing::{result, sqlite_store};

    use crate::service::testing::NewestDecides;
    use crate::store::Cursor;

    /// On SQLite the head learns each stored result's rowid from the insert itself: a result
    /// stored before, or the same id again in the batch, is not stored and not in the head,
    /// and every rowid in it is the row of that id and monitor.
    #[tokio::test]
    async fn the_head_holds_exactly_the_rows_an_upload_stored() {
        let (store, _dir) = sqlite_store().await;
        let on = |id: &str, monitor: &str, ts| {
            let mut r = result(id, ts, "up");
            r.monitor_id = monitor.into();
            r
        };
        store
            .insert_results("p1", &[on("a", "m1", 1_000)], 5, &NewestDecides)
            .await
            .unwrap();
        let batch = [
            on("x", "m2", 2_000),
            on("a", "m1", 1_000),
            on("x", "m2", 2_000),
            on("y", "m3", 3_000),
            on("z", "m2", 4_000),
        ];
        let ingested = store
            .insert_results("p1", &batch, 6, &NewestDecides)
            .await
            .unwrap();
        assert_eq!(
            ingested.stored,
            HashSet::from(["x".into(), "y".into(), "z".into()])
        );
        for (monitor, ids) in [("m1", vec!["a"]), ("m2", vec!["x", "z"]), ("m3", vec!["y"])] {
            let mut held = Vec::new();
            for rowid in store.head.rowids_of(monitor) {
                let (id, of): (String, String) =
                    sqlx::query_as("SELECT id, monitor_id FROM results WHERE rowid = $1")
                        .bind(rowid)
                        .fetch_one(&store.pool)
                        .await
                        .unwrap();
                assert_eq!(of, monitor, "rowid {rowid}");
                held.push(id);
            }
            assert_eq!(held, ids, "{monitor}'s rowids in the head");
        }
    }

    #[tokio::test]
    async fn duplicates_are_stored_once_and_status_never_goes_backwards() {
        let (store, _dir) = sqlite_store().await;
        let batch = vec![result("a", 1_000, "up"), result("b", 2_000, "down")];
        let first = store
            .insert_results("p1", &batch, 5, &NewestDecides)
            .await
            .unwrap();
        assert_eq!(first.stored.len(), 2);
        let again = store
            .insert_results("p1", &batch, 6, &NewestDecides)
            .await
            .unwrap();
        assert!(again.stored.is_empty(), "a re-upload stores nothing");
        assert_eq!(
            store.monitor_status("m1").await.unwrap().unwrap().status,
            "down"
        );

        // A late, older result is kept in history but does not change the status.
        let late = store
            .insert_results("p1", &[result("c", 1_500, "up")], 7, &NewestDecides)
            .await
            .unwrap();
        assert_eq!(late.stored.len(), 1);
        let status = store.monitor_status("m1").await.unwrap().unwrap();
        assert_eq!(
            (status.status.as_str(), status.last_result_at),
            ("down", 2_000)
        );

        // Rate limiting says nothing about up or down.
        let mut limited = result("d", 3_000, "rate_limited");
        limited.msg = "rate limited (429)".into();
        store
            .insert_results("p1", &[limited], 8, &NewestDecides)
            .await
            .unwrap();
        let status = store.monitor_status("m1").await.unwrap().unwrap();
        assert_eq!(
            (status.status.as_str(), status.message.as_str()),
            ("down", "rate limited (429)")
        );

        // In one batch, an older `down` still sets the verdict under a newer rate-limited one.
        let mut older_down = result("e", 2_500, "down");
        older_down.monitor_id = "m2".into();
        let mut newer_limited = result("f", 2_600, "rate_limited");
        newer_limited.monitor_id = "m2".into();
        store
            .insert_results("p1", &[newer_limited, older_down], 9, &NewestDecides)
            .await
            .unwrap();
        let m2 = store.monitor_status("m2").await.unwrap().unwrap();
        assert_eq!((m2.status.as_str(), m2.last_result_at), ("down", 2_600));

        // Across batches too: a newer rate-limited result uploaded first, then a late `up`
        // checked before it, and a later `down` older than the verdict it would replace.
        let m3 = |id: &str, ts, status| {
            let mut r = result(id, ts, status);
            r.monitor_id = "m3".into();
            r
        };
        let (limited, late_up, stale_down) = (
            m3("g", 5_000, "rate_limited"),
            m3("h", 4_000, "up"),
            m3("i", 3_000, "down"),
        );
        for batch in [limited, late_up, stale_down] {
            store
                .insert_results("p1", &[batch], 10, &NewestDecides)
                .await
                .unwrap();
        }
        let m3 = store.monitor_status("m3").await.unwrap().unwrap();
        assert_eq!(
            (m3.status.as_str(), m3.last_result_at),
            ("up", 5_000),
            "the late up is the verdict; the older down and the rate limit change nothing"
        );

        let history = store.list_results("m1", &Cursor::start(), 3).await.unwrap();
        let ids: Vec<_> = history.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["a", "c", "b"]);
        let page = store
            .list_results(
                "m1",
                &Cursor {
                    key: 1_500,
                    id: "c".into(),
                },
                10,
            )
            .await
            .unwrap();
        let after_c: Vec<_> = page.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(after_c, ["b", "d"]);
    }

    #[tokio::test]
    async fn a_result_that_changes_a_verdict_is_looked_at_before_earlier_confirmations() {
        let (store, _dir) = sqlite_store().await;
        let of = |id: &str, monitor: &str, ts: i64, status: &str| NewResult {
            monitor_id: monitor.into(),
            ..result(id, ts, status)
        };
        // Both up, and looked at (nothing due).
        store
            .insert_results(
                "p1",
                &[of("a1", "a", 1_000, "up"), of("b1", "b", 1_000, "up")],
                1_000,
                &NewestDecides,
            )
            .await
            .unwrap();
        let due = store.due_looks(1_000, 10).await.unwrap();
        let looks: Vec<_> = due
            .iter()
            .map(|(id, marks)| crate::store::Look::settled(id, *marks))
            .collect();
        store.record_alerts(&[], &looks, 0).await.unwrap();
        // `a` confirmed up, then `b` goes down: `b` is looked at first.
        store
            .insert_results("p1", &[of("a2", "a", 5_000, "up")], 5_000, &NewestDecides)
            .await
            .unwrap();
        store
            .insert_results("p1", &[of("b2", "b", 6_000, "down")], 6_000, &NewestDecides)
            .await
            .unwrap();
        let order: Vec<String> = store
            .due_looks(7_000, 10)
            .await
            .unwrap()
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        assert_eq!(order, ["b", "a"]);
    }
}
