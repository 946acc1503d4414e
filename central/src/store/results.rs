//! Storing check results: each stored once (by id), in ingest's transaction (`ingest_tx`),
//! where the service moves its monitor's and location's status rows, confirmed verdicts and
//! time credit with it. Must not read history for pages (`result_history`) or delete
//! results (`result_pruning`).

use std::collections::HashSet;

use shared_proto::poller_api::ResultStatus;

use super::dialect::json_rows;
use super::packed::{packed, unpack};
use super::statements::{Arg, Columns, Statements};
use super::Store;

/// A validated result, ready to store. Serialises to the row shape PostgreSQL's insert unpacks.
#[derive(Debug, Clone, serde::Serialize)]
pub struct NewResult {
    pub id: String,
    pub monitor_id: String,
    /// The location it was checked from, for a multi-location monitor.
    pub region: Option<String>,
    pub ts: i64,
    /// Stored as its text (`up`, `down`, `rate_limited`).
    #[serde(serialize_with = "stored_status")]
    pub status: ResultStatus,
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

/// A status as stored: the text central keeps and shows (`ResultStatus::as_str`), not the
/// wire's spelling.
fn stored_status<S: serde::Serializer>(status: &ResultStatus, to: S) -> Result<S::Ok, S::Error> {
    to.serialize_str(status.as_str())
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

/// Rows per INSERT statement (PostgreSQL).
const INSERT_CHUNK: usize = 1_000;

impl Store {
    /// Inserts the results not stored before, and returns their ids and, on SQLite, the
    /// monitor and rowid of each (for the head, once the transaction commits). A result whose
    /// id is stored already (or earlier in the batch) is skipped. `stored_before`: what
    /// inserts earlier in the same transaction stored (their rowids, on SQLite).
    pub(super) async fn insert_new(
        &self,
        tx: &mut impl Statements,
        poller_id: &str,
        results: &[NewResult],
        received_at: i64,
        stored_before: &[(String, i64)],
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
            // After the head's newest, or after this transaction's own rows (not in the head
            // until it commits) when an insert came before this one.
            let newest = stored_before
                .last()
                .map_or_else(|| self.head.newest(), |(_, rowid)| *rowid);
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

    use crate::service::ingest::batch::store_standing;
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
        store_standing(&store, "p1", &[on("a", "m1", 1_000)], 5, &NewestDecides)
            .await
            .unwrap();
        let batch = [
            on("x", "m2", 2_000),
            on("a", "m1", 1_000),
            on("x", "m2", 2_000),
            on("y", "m3", 3_000),
            on("z", "m2", 4_000),
        ];
        let ingested = store_standing(&store, "p1", &batch, 6, &NewestDecides)
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
        let first = store_standing(&store, "p1", &batch, 5, &NewestDecides)
            .await
            .unwrap();
        assert_eq!(first.stored.len(), 2);
        let again = store_standing(&store, "p1", &batch, 6, &NewestDecides)
            .await
            .unwrap();
        assert!(again.stored.is_empty(), "a re-upload stores nothing");
        assert_eq!(
            store
                .monitor_status("m1")
                .await
                .unwrap()
                .unwrap()
                .status
                .as_str(),
            "down"
        );

        // A late, older result is kept in history but does not change the status.
        let late = store_standing(&store, "p1", &[result("c", 1_500, "up")], 7, &NewestDecides)
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
        store_standing(&store, "p1", &[limited], 8, &NewestDecides)
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
        store_standing(
            &store,
            "p1",
            &[newer_limited, older_down],
            9,
            &NewestDecides,
        )
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
            store_standing(&store, "p1", &[batch], 10, &NewestDecides)
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
        store_standing(
            &store,
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
        store_standing(
            &store,
            "p1",
            &[of("a2", "a", 5_000, "up")],
            5_000,
            &NewestDecides,
        )
        .await
        .unwrap();
        store_standing(
            &store,
            "p1",
            &[of("b2", "b", 6_000, "down")],
            6_000,
            &NewestDecides,
        )
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
