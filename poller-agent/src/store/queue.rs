//! The result queue: a result is committed here before it counts as produced, and leaves it
//! only after central stored it (or had it already): for `poller_delivered`, where it is kept
//! `POLLER_REDELIVERY_WINDOW` to be sent again to a central restored from a copy that lacks
//! it (`redeliver_missing`). A result central refused is never
//! deleted for that: it is held with central's reason and offered again later (`hold`), and
//! leaves only when central takes it or `POLLER_RETENTION` ends it, counted as dropped.

use chrono::{DateTime, Utc};
use rusqlite::params;
use shared_proto::poller_api::{CheckResult, ResultStatus};
use uuid::Uuid;

use super::LocalStore;

/// `poller_state` key of the reason central gave for its newest refusal.
const NEWEST_REFUSAL: &str = "newest_refusal";

/// A queued result and its delivery bookkeeping.
#[derive(Debug, Clone, PartialEq)]
pub struct QueuedResult {
    pub result: CheckResult,
    pub attempts: u32,
    /// Central refused it before: it is held, and offered again.
    pub refused: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueueStats {
    pub depth: u64,
    pub oldest_ms: Option<i64>,
    /// Of `depth`, the results central refused, held to be offered again.
    pub held: u64,
}

impl LocalStore {
    /// Appends results in one transaction.
    pub async fn enqueue(&self, results: Vec<CheckResult>) -> anyhow::Result<()> {
        self.with_conn(move |c| {
            let tx = c.transaction()?;
            {
                let mut insert = tx.prepare_cached(
                    "INSERT OR IGNORE INTO poller_queue \
                     (result_id, monitor_id, ts, ts_ms, status, latency_ms, msg, meta) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                )?;
                for r in &results {
                    insert.execute(params![
                        r.id.to_string(),
                        r.monitor_id.to_string(),
                        r.ts.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                        r.ts.timestamp_millis(),
                        r.status.as_str(),
                        r.latency_ms.map(|l| l as i64),
                        r.msg,
                        r.meta.to_string(),
                    ])?;
                }
            }
            tx.commit()
        })
        .await
    }

    /// The next results to deliver at `now_ms`: mostly the oldest, so a backlog drains in
    /// order, plus up to `newest` of the most recent, so that while a large backlog drains the
    /// status view at central still gets fresh results with every batch.
    pub async fn next_batch_with_newest(
        &self,
        limit: u32,
        newest: u32,
        now_ms: i64,
    ) -> anyhow::Result<Vec<QueuedResult>> {
        let newest = newest.min(limit);
        let mut batch = self.select_due(now_ms, newest, "DESC").await?;
        let mut oldest = self.select_due(now_ms, limit, "ASC").await?;
        let taken: std::collections::HashSet<Uuid> = batch.iter().map(|q| q.result.id).collect();
        oldest.retain(|q| !taken.contains(&q.result.id));
        oldest.truncate(limit as usize - batch.len());
        oldest.append(&mut batch);
        Ok(oldest)
    }

    /// The oldest results due for (re)delivery at `now_ms`.
    pub async fn next_batch(&self, limit: u32, now_ms: i64) -> anyhow::Result<Vec<QueuedResult>> {
        self.select_due(now_ms, limit, "ASC").await
    }

    async fn select_due(
        &self,
        now_ms: i64,
        limit: u32,
        order: &'static str,
    ) -> anyhow::Result<Vec<QueuedResult>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let rows = self
            .with_conn(move |c| {
                let mut select = c.prepare_cached(&format!(
                    "SELECT result_id, monitor_id, ts, status, latency_ms, msg, meta, attempts, \
                     refused IS NOT NULL \
                     FROM poller_queue WHERE next_retry_at <= ?1 ORDER BY id {order} LIMIT ?2"
                ))?;
                let rows = select
                    .query_map(params![now_ms, limit], |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, String>(1)?,
                            r.get::<_, String>(2)?,
                            r.get::<_, String>(3)?,
                            r.get::<_, Option<i64>>(4)?,
                            r.get::<_, String>(5)?,
                            r.get::<_, String>(6)?,
                            r.get::<_, u32>(7)?,
                            r.get::<_, bool>(8)?,
                        ))
                    })?
                    .collect::<rusqlite::Result<Vec<_>>>()?;
                Ok(rows)
            })
            .await?;
        rows.into_iter()
            .map(
                |(id, monitor_id, ts, status, latency_ms, msg, meta, attempts, refused)| {
                    Ok(QueuedResult {
                        result: CheckResult {
                            id: Uuid::try_parse(&id)?,
                            monitor_id: Uuid::try_parse(&monitor_id)?,
                            ts: DateTime::parse_from_rfc3339(&ts)?.with_timezone(&Utc),
                            status: ResultStatus::parse(&status)
                                .ok_or_else(|| anyhow::anyhow!("queued status `{status}`"))?,
                            latency_ms: latency_ms.map(|l| l.max(0) as u64),
                            msg,
                            meta: serde_json::from_str(&meta)?,
                        },
                        attempts,
                        refused,
                    })
                },
            )
            .collect()
    }

    /// Takes delivered results out of the queue (central stored them, or had them already).
    /// With `kept_at_ms` they move to `poller_delivered`, stamped with it, to be sent again if
    /// central turns out to be a restored copy that never got them (`redeliver`); without, they
    /// are deleted.
    pub async fn acknowledge(&self, ids: Vec<Uuid>, kept_at_ms: Option<i64>) -> anyhow::Result<()> {
        self.with_conn(move |c| {
            let tx = c.transaction()?;
            {
                let mut keep = tx.prepare_cached(
                    "INSERT INTO poller_delivered \
                     (result_id, monitor_id, ts, ts_ms, status, latency_ms, msg, meta, delivered_at) \
                     SELECT result_id, monitor_id, ts, ts_ms, status, latency_ms, msg, meta, ?2 \
                     FROM poller_queue WHERE result_id = ?1",
                )?;
                let mut delete =
                    tx.prepare_cached("DELETE FROM poller_queue WHERE result_id = ?1")?;
                for id in &ids {
                    if let Some(at) = kept_at_ms {
                        keep.execute(params![id.to_string(), at])?;
                    }
                    delete.execute([id.to_string()])?;
                }
            }
            tx.commit()
        })
        .await
    }

    /// Puts delivered results back in the queue when central's database lacks an upload it
    /// acknowledged: one delivered before `asked_ms` (when the agent asked, so central had
    /// stored it before it read its newest upload) yet after `stored_ms + margin_ms` (central's
    /// newest stored upload, on the agent's clock; `None`: none stored). Then every kept result delivered from `stored_ms - margin_ms` on is queued
    /// again (central keeps a result once by its id, so what it has costs only the upload);
    /// returns how many (0: nothing is missing).
    pub async fn redeliver_missing(
        &self,
        stored_ms: Option<i64>,
        asked_ms: i64,
        margin_ms: i64,
    ) -> anyhow::Result<u64> {
        self.with_conn(move |c| {
            let tx = c.transaction()?;
            let (after, from) = match stored_ms {
                Some(stored) => (stored.saturating_add(margin_ms), stored - margin_ms),
                None => (i64::MIN, i64::MIN),
            };
            // The newest deliveries are the last rows: asked is a heartbeat ago at most, so
            // the last thousand hold the newest one before it.
            let missing: bool = tx.query_row(
                "SELECT EXISTS (SELECT 1 FROM (SELECT delivered_at FROM poller_delivered \
                 ORDER BY rowid DESC LIMIT 1000) WHERE delivered_at > ?1 AND delivered_at < ?2)",
                params![after, asked_ms],
                |r| r.get(0),
            )?;
            if !missing {
                return Ok(0);
            }
            let queued = tx.execute(
                "INSERT OR IGNORE INTO poller_queue \
                 (result_id, monitor_id, ts, ts_ms, status, latency_ms, msg, meta) \
                 SELECT result_id, monitor_id, ts, ts_ms, status, latency_ms, msg, meta \
                 FROM poller_delivered WHERE delivered_at >= ?1 ORDER BY rowid",
                [from],
            )?;
            tx.execute(
                "DELETE FROM poller_delivered WHERE delivered_at >= ?1",
                [from],
            )?;
            tx.commit()?;
            Ok(queued as u64)
        })
        .await
    }

    /// Forgets delivered results kept since before `cutoff_ms` (or all, with `i64::MAX`);
    /// returns how many. They were delivered: nothing is lost but the chance to send them again.
    /// The oldest are the first rows: each step looks at the next 10,000 at most.
    pub async fn forget_delivered_before(&self, cutoff_ms: i64) -> anyhow::Result<u64> {
        self.with_conn(move |c| {
            if cutoff_ms == i64::MAX {
                return c
                    .execute("DELETE FROM poller_delivered", [])
                    .map(|n| n as u64);
            }
            let mut forgotten = 0u64;
            loop {
                let n = c.execute(
                    "DELETE FROM poller_delivered WHERE rowid <= (SELECT max(rowid) FROM \
                     (SELECT rowid, delivered_at FROM poller_delivered ORDER BY rowid LIMIT 10000) \
                     WHERE delivered_at < ?1)",
                    [cutoff_ms],
                )?;
                forgotten += n as u64;
                if n < 10_000 {
                    return Ok(forgotten);
                }
            }
        })
        .await
    }

    /// Records a failed delivery: the results wait until `retry_at_ms`.
    pub async fn defer(&self, ids: Vec<Uuid>, retry_at_ms: i64) -> anyhow::Result<()> {
        self.with_conn(move |c| {
            let tx = c.transaction()?;
            {
                let mut update = tx.prepare_cached(
                    "UPDATE poller_queue SET attempts = attempts + 1, next_retry_at = ?2 \
                     WHERE result_id = ?1",
                )?;
                for id in &ids {
                    update.execute(params![id.to_string(), retry_at_ms])?;
                }
            }
            tx.commit()
        })
        .await
    }

    /// Keeps results central refused, each with its reason, until `retry_at_ms`: a refusal
    /// may end (a newer central, a monitor restored), and a result deleted for it is lost.
    pub async fn hold(&self, refused: Vec<(Uuid, String)>, retry_at_ms: i64) -> anyhow::Result<()> {
        self.with_conn(move |c| {
            let tx = c.transaction()?;
            {
                let mut update = tx.prepare_cached(
                    "UPDATE poller_queue SET attempts = attempts + 1, next_retry_at = ?2, \
                     refused = ?3 WHERE result_id = ?1",
                )?;
                for (id, reason) in &refused {
                    update.execute(params![id.to_string(), retry_at_ms, reason])?;
                }
                if let Some((_, reason)) = refused.last() {
                    tx.execute(
                        "INSERT INTO poller_state (key, value) VALUES (?1, ?2) \
                         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                        params![NEWEST_REFUSAL, reason],
                    )?;
                }
            }
            tx.commit()
        })
        .await
    }

    /// Depth, the oldest result waiting for delivery (a held one is not waiting: it was
    /// delivered and refused, and central's backlog alarm is not about it) and how many are
    /// held; one pass over the queue (its size is bounded by `POLLER_QUEUE_MAX_BYTES` and
    /// retention).
    pub async fn queue_stats(&self) -> anyhow::Result<QueueStats> {
        self.with_conn(|c| {
            c.query_row(
                "SELECT COUNT(*), MIN(CASE WHEN refused IS NULL THEN ts_ms END), COUNT(refused) \
                 FROM poller_queue",
                [],
                |r| {
                    Ok(QueueStats {
                        depth: r.get::<_, i64>(0)?.max(0) as u64,
                        oldest_ms: r.get(1)?,
                        held: r.get::<_, i64>(2)?.max(0) as u64,
                    })
                },
            )
        })
        .await
    }

    /// The reason central gave for its newest refusal (kept with the queue's state).
    pub async fn newest_refusal(&self) -> anyhow::Result<Option<String>> {
        self.state_value(NEWEST_REFUSAL).await
    }

    /// Bytes the queue file holds in live pages (free pages are reused, so they do not count).
    pub async fn used_bytes(&self) -> anyhow::Result<u64> {
        self.with_conn(|c| {
            let pages: i64 = c.query_row("PRAGMA page_count", [], |r| r.get(0))?;
            let free: i64 = c.query_row("PRAGMA freelist_count", [], |r| r.get(0))?;
            let size: i64 = c.query_row("PRAGMA page_size", [], |r| r.get(0))?;
            Ok(((pages - free).max(0) * size) as u64)
        })
        .await
    }

    /// Deletes the oldest `count` results; returns how many went.
    pub async fn drop_oldest(&self, count: u64) -> anyhow::Result<u64> {
        self.with_conn(move |c| {
            c.execute(
                "DELETE FROM poller_queue WHERE id IN (SELECT id FROM poller_queue ORDER BY id LIMIT ?1)",
                [count as i64],
            )
            .map(|n| n as u64)
        })
        .await
    }

    /// Deletes results measured before `cutoff_ms`; returns how many were lost.
    pub async fn prune_older_than(&self, cutoff_ms: i64) -> anyhow::Result<u64> {
        self.with_conn(move |c| {
            c.execute("DELETE FROM poller_queue WHERE ts_ms < ?1", [cutoff_ms])
                .map(|n| n as u64)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(ts_ms: i64) -> CheckResult {
        CheckResult {
            id: Uuid::new_v4(),
            monitor_id: Uuid::new_v4(),
            ts: DateTime::from_timestamp_millis(ts_ms).unwrap(),
            status: ResultStatus::Up,
            latency_ms: Some(3),
            msg: "ok".into(),
            meta: serde_json::json!({"status_code": 200}),
        }
    }

    #[tokio::test]
    async fn results_survive_reopening_and_leave_only_when_acknowledged() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        let results: Vec<_> = (0..5).map(|i| result(1_000 + i)).collect();
        store.enqueue(results.clone()).await.unwrap();
        drop(store);

        let store = LocalStore::open(dir.path()).unwrap();
        let batch = store.next_batch(3, 0).await.unwrap();
        let got: Vec<_> = batch.iter().map(|q| q.result.clone()).collect();
        assert_eq!(got, results[..3], "oldest first, intact");

        store
            .acknowledge(vec![results[0].id, results[1].id], None)
            .await
            .unwrap();
        store.defer(vec![results[2].id], 10_000).await.unwrap();
        let stats = store.queue_stats().await.unwrap();
        assert_eq!(stats.depth, 3);
        assert_eq!(stats.oldest_ms, Some(1_002));

        let due_now: Vec<_> = store
            .next_batch(10, 5_000)
            .await
            .unwrap()
            .iter()
            .map(|q| q.result.id)
            .collect();
        assert_eq!(
            due_now,
            [results[3].id, results[4].id],
            "a deferred result waits"
        );
        let later = store.next_batch(10, 10_000).await.unwrap();
        assert_eq!(later.len(), 3);
        assert_eq!(later[0].attempts, 1);

        assert_eq!(store.prune_older_than(1_004).await.unwrap(), 2);
        assert_eq!(store.queue_stats().await.unwrap().depth, 1);
        assert!(store.used_bytes().await.unwrap() > 0);
        assert_eq!(store.drop_oldest(5).await.unwrap(), 1);
        assert_eq!(store.queue_stats().await.unwrap().depth, 0);
    }

    /// Delivered results kept for a restored central come back into the queue whole (same
    /// ids, same content) when asked, and are forgotten after their window.
    #[tokio::test]
    async fn delivered_results_are_kept_to_be_sent_again_and_then_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        let results: Vec<_> = (0..4).map(|i| result(1_000 + i)).collect();
        store.enqueue(results.clone()).await.unwrap();
        store
            .acknowledge(vec![results[0].id, results[1].id], Some(10_000))
            .await
            .unwrap();
        store
            .acknowledge(vec![results[2].id], Some(20_000))
            .await
            .unwrap();
        assert_eq!(store.queue_stats().await.unwrap().depth, 1);

        assert_eq!(store.forget_delivered_before(15_000).await.unwrap(), 2);
        // Central stored an upload at 19.5 s: what was delivered at 20 s is within the margin.
        assert_eq!(
            store
                .redeliver_missing(Some(19_500), 90_000, 1_000)
                .await
                .unwrap(),
            0
        );
        // Central's newest stored upload is at 5 s, and 20 s was acknowledged: it lost it.
        assert_eq!(
            store
                .redeliver_missing(Some(5_000), 90_000, 1_000)
                .await
                .unwrap(),
            1
        );
        let mut again: Vec<CheckResult> = store
            .next_batch(10, 0)
            .await
            .unwrap()
            .into_iter()
            .map(|q| q.result)
            .collect();
        again.sort_by_key(|r| r.ts);
        assert_eq!(again, vec![results[2].clone(), results[3].clone()]);
        assert_eq!(
            store.redeliver_missing(None, 90_000, 1_000).await.unwrap(),
            0,
            "taken once"
        );

        // Not kept: deleted at once. A delivery after the heartbeat was asked for is not
        // missing (central may have read its newest upload before storing it).
        store.acknowledge(vec![results[3].id], None).await.unwrap();
        store.enqueue(vec![result(2_000)]).await.unwrap();
        let late = store.next_batch(10, 0).await.unwrap();
        let late: Vec<Uuid> = late.iter().map(|q| q.result.id).collect();
        store.acknowledge(late, Some(89_500)).await.unwrap();
        assert_eq!(
            store.redeliver_missing(None, 89_500, 1_000).await.unwrap(),
            0
        );
        assert_eq!(
            store.redeliver_missing(None, 89_501, 1_000).await.unwrap(),
            2
        );
    }

    #[tokio::test]
    async fn batches_mix_the_oldest_with_a_few_of_the_newest() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        let results: Vec<_> = (0..10).map(|i| result(1_000 + i)).collect();
        store.enqueue(results.clone()).await.unwrap();
        let batch: Vec<Uuid> = store
            .next_batch_with_newest(4, 1, 0)
            .await
            .unwrap()
            .iter()
            .map(|q| q.result.id)
            .collect();
        assert_eq!(
            batch,
            [results[0].id, results[1].id, results[2].id, results[9].id]
        );
        let small: Vec<Uuid> = store
            .next_batch_with_newest(20, 2, 0)
            .await
            .unwrap()
            .iter()
            .map(|q| q.result.id)
            .collect();
        assert_eq!(small.len(), 10, "no result twice when everything fits");
    }

    #[tokio::test]
    async fn a_refused_result_is_held_with_its_reason_until_offered_again() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        let results: Vec<_> = (0..3).map(|i| result(1_000 + i)).collect();
        store.enqueue(results.clone()).await.unwrap();
        assert_eq!(store.newest_refusal().await.unwrap(), None);

        store
            .hold(
                vec![(results[1].id, "monitor m does not exist".into())],
                60_000,
            )
            .await
            .unwrap();
        let stats = store.queue_stats().await.unwrap();
        assert_eq!((stats.depth, stats.held), (3, 1), "held, not deleted");
        assert_eq!(
            store.newest_refusal().await.unwrap().as_deref(),
            Some("monitor m does not exist")
        );
        let due: Vec<Uuid> = store
            .next_batch(10, 59_999)
            .await
            .unwrap()
            .iter()
            .map(|q| q.result.id)
            .collect();
        assert_eq!(due, [results[0].id, results[2].id], "held until its retry");
        assert_eq!(store.next_batch(10, 60_000).await.unwrap().len(), 3);

        store.acknowledge(vec![results[1].id], None).await.unwrap();
        assert_eq!(store.queue_stats().await.unwrap().held, 0);
    }

    #[tokio::test]
    async fn a_queue_made_by_an_older_agent_gains_the_new_column_and_keeps_its_results() {
        let dir = tempfile::tempdir().unwrap();
        {
            // The queue as the first release made it: no `refused` column.
            let conn = rusqlite::Connection::open(dir.path().join("poller.db")).unwrap();
            conn.execute_batch(
                "CREATE TABLE poller_queue (id INTEGER PRIMARY KEY AUTOINCREMENT, \
                 result_id TEXT NOT NULL UNIQUE, monitor_id TEXT NOT NULL, ts TEXT NOT NULL, \
                 ts_ms INTEGER NOT NULL, status TEXT NOT NULL, latency_ms INTEGER, \
                 msg TEXT NOT NULL, meta TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, \
                 next_retry_at INTEGER NOT NULL DEFAULT 0); \
                 INSERT INTO poller_queue (result_id, monitor_id, ts, ts_ms, status, msg, meta) \
                 VALUES ('6d3c4f4e-8f0a-4c1e-9a53-0d6f1c9f2a11', \
                 '0b8e2f5a-1c3d-4e6f-8a9b-7c5d3e1f2a4b', '2026-12-06T00:00:00.000Z', 1000, \
                 'up', 'ok', '{}');",
            )
            .unwrap();
        }
        let store = LocalStore::open(dir.path()).unwrap();
        let stats = store.queue_stats().await.unwrap();
        assert_eq!((stats.depth, stats.held), (1, 0));
        let queued = store.next_batch(10, 0).await.unwrap();
        store
            .hold(vec![(queued[0].result.id, "refused".into())], 5)
            .await
            .unwrap();
        assert_eq!(store.queue_stats().await.unwrap().held, 1);
        drop(store);
        LocalStore::open(dir.path()).expect("opened again, the column is not added twice");
    }
}
