//! Engine events reported by agents.

use sqlx::any::AnyRow;
use sqlx::{FromRow, Row};

use super::monitors::placeholders;
use super::{Cursor, Store};

#[derive(Debug, Clone)]
pub struct EventRow {
    pub id: String,
    pub poller_id: String,
    pub monitor_id: String,
    pub at: i64,
    pub event: String,
    /// The whole event as JSON.
    pub detail: String,
    pub next_due_at: Option<i64>,
}

impl FromRow<'_, AnyRow> for EventRow {
    fn from_row(row: &AnyRow) -> sqlx::Result<Self> {
        Ok(Self {
            id: row.try_get("id")?,
            poller_id: row.try_get("poller_id")?,
            monitor_id: row.try_get("monitor_id")?,
            at: row.try_get("at")?,
            event: row.try_get("event")?,
            detail: row.try_get("detail")?,
            next_due_at: row.try_get("next_due_at")?,
        })
    }
}

impl Store {
    pub async fn insert_engine_events(&self, events: &[EventRow]) -> anyhow::Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        let _guard = self.write_lock().await;
        for chunk in events.chunks(500) {
            let values = (0..chunk.len())
                .map(|i| format!("({})", placeholders(i * 7 + 1, 7)))
                .collect::<Vec<_>>()
                .join(", ");
            let sql = format!(
                "INSERT INTO engine_events (id, poller_id, monitor_id, at, event, detail, next_due_at) \
                 VALUES {values} ON CONFLICT (id) DO NOTHING"
            );
            let mut query = sqlx::query(&sql);
            for event in chunk {
                query = query
                    .bind(&event.id)
                    .bind(&event.poller_id)
                    .bind(&event.monitor_id)
                    .bind(event.at)
                    .bind(&event.event)
                    .bind(&event.detail)
                    .bind(event.next_due_at);
            }
            query.execute(&self.writer).await?;
        }
        Ok(())
    }

    /// Deletes engine events and poller status changes older than `before_ms`.
    pub async fn prune_history(&self, before_ms: i64) -> anyhow::Result<u64> {
        let _guard = self.write_lock().await;
        let events = sqlx::query("DELETE FROM engine_events WHERE at < $1")
            .bind(before_ms)
            .execute(&self.writer)
            .await?;
        let changes = sqlx::query("DELETE FROM poller_status_changes WHERE at < $1")
            .bind(before_ms)
            .execute(&self.writer)
            .await?;
        Ok(events.rows_affected() + changes.rows_affected())
    }

    /// A poller's events, oldest first.
    pub async fn list_engine_events(
        &self,
        poller_id: &str,
        after: &Cursor,
        limit: u32,
    ) -> anyhow::Result<Vec<EventRow>> {
        Ok(sqlx::query_as(
            "SELECT id, poller_id, monitor_id, at, event, detail, next_due_at FROM engine_events \
             WHERE poller_id = $1 AND (at > $2 OR (at = $2 AND id > $3)) ORDER BY at, id LIMIT $4",
        )
        .bind(poller_id)
        .bind(after.key)
        .bind(&after.id)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing::sqlite_store;

    #[tokio::test]
    async fn an_event_sent_twice_is_stored_once() {
        let (store, _dir) = sqlite_store().await;
        let event = EventRow {
            id: "e1".into(),
            poller_id: "p1".into(),
            monitor_id: "m1".into(),
            at: 1_000,
            event: "breaker_opened".into(),
            detail: "{}".into(),
            next_due_at: Some(2_000),
        };
        store
            .insert_engine_events(std::slice::from_ref(&event))
            .await
            .unwrap();
        store.insert_engine_events(&[event]).await.unwrap();
        let stored = store
            .list_engine_events("p1", &Cursor::start(), 10)
            .await
            .unwrap();
        assert_eq!(stored.len(), 1);
        assert_eq!(
            store.prune_history(1_000).await.unwrap(),
            0,
            "not older than the cutoff"
        );
        assert_eq!(store.prune_history(1_001).await.unwrap(), 1);
    }
}
