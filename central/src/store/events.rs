//! Engine events reported by agents (`engine_events`): written as the agent sent them, read
//! back as `EngineEvent`s (an event whose kind this central does not know is left out of a
//! page, logged). Must not: decide what an event means.

use anyhow::Context;
use shared_proto::poller_api::EngineEvent;
use sqlx::any::AnyRow;
use sqlx::{FromRow, Row};
use uuid::Uuid;

use super::monitors::placeholders;
use super::{Cursor, Paged, Store};

/// An engine event as stored: its kind's name, and the whole event as JSON.
#[derive(Debug, Clone)]
struct EventRow {
    id: String,
    at: i64,
    /// The whole event as JSON.
    detail: String,
}

impl TryFrom<EventRow> for EngineEvent {
    type Error = anyhow::Error;

    /// An error names the event (a kind a newer agent sent, which this central cannot read).
    fn try_from(row: EventRow) -> anyhow::Result<EngineEvent> {
        serde_json::from_str(&row.detail)
            .with_context(|| format!("engine event {}: its stored detail", row.id))
    }
}

impl FromRow<'_, AnyRow> for EventRow {
    fn from_row(row: &AnyRow) -> sqlx::Result<Self> {
        Ok(Self {
            id: row.try_get("id")?,
            at: row.try_get("at")?,
            detail: row.try_get("detail")?,
        })
    }
}

impl Store {
    /// Stores `poller_id`'s events; one sent again (its id, made by the agent) is stored once.
    /// An event without an id gets one of its own.
    pub async fn insert_engine_events(
        &self,
        poller_id: &str,
        events: &[EngineEvent],
    ) -> anyhow::Result<()> {
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
                    .bind(event.id.unwrap_or_else(Uuid::new_v4).to_string())
                    .bind(poller_id)
                    .bind(event.monitor_id.to_string())
                    .bind(event.at.timestamp_millis())
                    .bind(event.kind.name())
                    .bind(serde_json::to_string(event)?)
                    .bind(event.next_due_at.map(|t| t.timestamp_millis()));
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

    /// A page of a poller's events, oldest first.
    pub async fn list_engine_events(
        &self,
        poller_id: &str,
        after: &Cursor,
        limit: u32,
    ) -> anyhow::Result<Paged<EngineEvent>> {
        let rows: Vec<EventRow> = sqlx::query_as(
            "SELECT id, at, detail FROM engine_events \
             WHERE poller_id = $1 AND (at > $2 OR (at = $2 AND id > $3)) ORDER BY at, id LIMIT $4",
        )
        .bind(poller_id)
        .bind(after.key)
        .bind(&after.id)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        Ok(Paged::of("engine event", rows, limit, |r| Cursor {
            key: r.at,
            id: r.id.clone(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing::sqlite_store;

    #[tokio::test]
    async fn an_event_sent_twice_is_stored_once() {
        let (store, _dir) = sqlite_store().await;
        use chrono::TimeZone;
        use shared_proto::poller_api::EventKind;
        let at = |ms| chrono::Utc.timestamp_millis_opt(ms).unwrap();
        let event = EngineEvent {
            id: Some(Uuid::from_u128(1)),
            monitor_id: Uuid::from_u128(2),
            at: at(1_000),
            kind: EventKind::BreakerOpened,
            next_due_at: Some(at(2_000)),
        };
        store
            .insert_engine_events("p1", std::slice::from_ref(&event))
            .await
            .unwrap();
        store
            .insert_engine_events("p1", std::slice::from_ref(&event))
            .await
            .unwrap();
        let stored = store
            .list_engine_events("p1", &Cursor::start(), 10)
            .await
            .unwrap();
        assert_eq!(stored.items, [event]);
        // One whose kind this central does not know (a newer agent's) is left out, and the
        // page still leads on past it.
        sqlx::query("UPDATE engine_events SET detail = '{\"event\": \"teleported\"}'")
            .execute(&store.writer)
            .await
            .unwrap();
        let stored = store
            .list_engine_events("p1", &Cursor::start(), 1)
            .await
            .unwrap();
        assert!(stored.items.is_empty() && stored.next.is_some());
        assert_eq!(
            store.prune_history(1_000).await.unwrap(),
            0,
            "not older than the cutoff"
        );
        assert_eq!(store.prune_history(1_001).await.unwrap(), 1);
    }
}
