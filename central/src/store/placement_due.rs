//! `placement_due`: the pollers whose change the lease holder must place monitors for. A
//! request that changes a poller (registration, new capabilities, an operator's edit or
//! delete) and liveness (gone, back, settled) queue the poller here instead of placing every
//! monitor inside the request; the lease holder reads the queue, places the monitors those
//! pollers can affect (`monitors_to_place`), and removes the rows it handled unless they were
//! queued again meanwhile (compare-and-set on `marks`, as `alert_due`).
//!
//! Cost: a queueing is one upsert; a pass reads the monitors the queued pollers ran (`own`),
//! plus, for a poller that may take monitors (`reach`), those it could run: pinned to it,
//! automatic ones, grouped ones of its region, locations in its region, and unplaced ones.
//! Must not: decide a placement (that is `service::placement`).

use sqlx::{FromRow, Row};

use super::dialect::id_source;

use crate::domain::Monitor;

use super::monitor_rows::{MonitorRow, MONITOR_COLUMNS};
use super::readable::readable;
use super::Store;

/// Announced (empty) by every transaction that queues pollers, so the lease holder on any
/// replica places at once.
pub(super) const PLACEMENT_CHANNEL: &str = "central_placement_due";

/// How far a poller's change reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reach {
    /// It can only lose monitors (gone offline, deleted): those it runs.
    Own,
    /// It may also take monitors (registered, back, settled, edited, new capabilities).
    Could,
}

impl Reach {
    fn as_str(self) -> &'static str {
        match self {
            Reach::Own => "own",
            Reach::Could => "could",
        }
    }
}

/// A queued poller as read by a placement pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedPlacement {
    pub poller_id: String,
    pub reach: Reach,
    /// `marks` as read: the row is removed after the pass only if nobody queued it since.
    pub marks: i64,
}

impl Store {
    /// Queues `poller_ids` for placement with at least `reach`.
    pub async fn queue_placement(
        &self,
        poller_ids: &[String],
        reach: Reach,
        now: i64,
    ) -> anyhow::Result<()> {
        if poller_ids.is_empty() {
            return Ok(());
        }
        let _guard = self.write_lock().await;
        let mut tx = self.writer.begin().await?;
        let sql = format!(
            "INSERT INTO placement_due (poller_id, reach, marks, queued_at) \
             SELECT DISTINCT value, CAST($2 AS TEXT), 1, CAST($3 AS BIGINT) FROM {} WHERE true ORDER BY 1 \
             ON CONFLICT (poller_id) DO UPDATE SET marks = placement_due.marks + 1, \
             reach = CASE WHEN excluded.reach = 'could' THEN 'could' ELSE placement_due.reach END",
            id_source(self.backend())
        );
        sqlx::query(&sql)
            .bind(serde_json::to_string(poller_ids)?)
            .bind(reach.as_str())
            .bind(now)
            .execute(&mut *tx)
            .await?;
        super::dialect::notify(self.backend(), &mut tx, PLACEMENT_CHANNEL, "").await?;
        tx.commit().await?;
        Ok(())
    }

    /// Every queued poller (a handful: one row per poller that changed since the last pass).
    pub async fn placement_queue(&self) -> anyhow::Result<Vec<QueuedPlacement>> {
        let rows = sqlx::query("SELECT poller_id, reach, marks FROM placement_due ORDER BY 1")
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| {
                let reach: String = row.try_get(1)?;
                Ok(QueuedPlacement {
                    poller_id: row.try_get(0)?,
                    reach: if reach == "could" {
                        Reach::Could
                    } else {
                        Reach::Own
                    },
                    marks: row.try_get(2)?,
                })
            })
            .collect()
    }

    /// The monitors the queued pollers' changes can move (see the module's cost line). A
    /// superset is harmless: placing a monitor whose decision did not change writes nothing.
    pub async fn monitors_to_place(
        &self,
        queued: &[QueuedPlacement],
    ) -> anyhow::Result<Vec<Monitor>> {
        let all: Vec<&str> = queued.iter().map(|q| q.poller_id.as_str()).collect();
        let could: Vec<&str> = queued
            .iter()
            .filter(|q| q.reach == Reach::Could)
            .map(|q| q.poller_id.as_str())
            .collect();
        if all.is_empty() {
            return Ok(Vec::new());
        }
        let source = id_source(self.backend());
        // $1: every queued poller; $2: those that may take monitors (`$2` as `$1` for the
        // JSON source, so both are a JSON array).
        let could_source = source.replace("$1", "$2");
        let regions = format!(
            "SELECT region FROM pollers WHERE region IS NOT NULL \
             AND id IN (SELECT value FROM {could_source})"
        );
        let sql = format!(
            "SELECT {MONITOR_COLUMNS} FROM monitors WHERE kind <> 'heartbeat' AND ( \
             assigned_poller_id IN (SELECT value FROM {source}) \
             OR id IN (SELECT monitor_id FROM monitor_locations \
                       WHERE assigned_poller_id IN (SELECT value FROM {source})) \
             OR (CAST($3 AS BIGINT) <> 0 AND ( \
                 poller_id IN (SELECT value FROM {could_source}) \
                 OR poller_mode = 'auto' \
                 OR (assigned_poller_id IS NULL AND poller_mode <> 'multi') \
                 OR (poller_mode = 'grouped' AND (poller_region IS NULL OR poller_region IN ({regions}))) \
                 OR id IN (SELECT monitor_id FROM monitor_locations \
                           WHERE assigned_poller_id IS NULL OR region IN ({regions})))))"
        );
        let rows = sqlx::query(&sql)
            .bind(serde_json::to_string(&all)?)
            .bind(serde_json::to_string(&could)?)
            .bind(i64::from(!could.is_empty()))
            .fetch_all(&self.pool)
            .await?;
        let rows = rows
            .iter()
            .map(MonitorRow::from_row)
            .collect::<sqlx::Result<_>>()?;
        Ok(readable("monitor", rows))
    }

    /// Removes the rows a pass handled, except those queued again since it read them.
    pub async fn finish_placement(&self, handled: &[QueuedPlacement]) -> anyhow::Result<()> {
        if handled.is_empty() {
            return Ok(());
        }
        let _guard = self.write_lock().await;
        let mut tx = self.writer.begin().await?;
        for queued in handled {
            sqlx::query("DELETE FROM placement_due WHERE poller_id = $1 AND marks = $2")
                .bind(&queued.poller_id)
                .bind(queued.marks)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing::sqlite_store;

    #[tokio::test]
    async fn a_poller_queued_again_during_a_pass_stays_queued_with_the_wider_reach() {
        let (store, _dir) = sqlite_store().await;
        let ids = ["p1".to_string(), "p2".to_string()];
        store.queue_placement(&ids, Reach::Own, 1).await.unwrap();
        let read = store.placement_queue().await.unwrap();
        assert_eq!(read.len(), 2);
        assert!(read.iter().all(|q| q.reach == Reach::Own && q.marks == 1));
        // p1 comes back while the pass runs.
        store
            .queue_placement(&ids[..1], Reach::Could, 2)
            .await
            .unwrap();
        store.finish_placement(&read).await.unwrap();
        assert_eq!(
            store.placement_queue().await.unwrap(),
            [QueuedPlacement {
                poller_id: "p1".into(),
                reach: Reach::Could,
                marks: 2
            }]
        );
        // A narrower queueing does not narrow it.
        store
            .queue_placement(&ids[..1], Reach::Own, 3)
            .await
            .unwrap();
        assert_eq!(
            store.placement_queue().await.unwrap()[0].reach,
            Reach::Could
        );
    }
}
