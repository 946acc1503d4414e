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
            query.execute(&self.pool).await?;
        }
        Ok(())
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
