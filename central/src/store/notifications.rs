//! Each monitor's alerting state and the outbox of notifications (which is also the delivery
//! log). Alert-state changes and the notifications they cause are written in one transaction,
//! so a notification is never lost nor made twice by a restart. The channels themselves are
//! `channels`'.

use sqlx::any::AnyRow;
use sqlx::{Any, FromRow, Row, Transaction};

use super::{Cursor, Store};
use crate::domain::QueuedNotification;

/// The newest message a channel took about an open problem (`open_problems_told`).
#[derive(Debug, Clone)]
pub struct ToldProblem {
    pub monitor_id: Option<String>,
    pub poller_id: Option<String>,
    pub payload: String,
}

/// One notification to one channel.
#[derive(Debug, Clone)]
pub struct OutboxRow {
    pub id: String,
    pub channel_id: String,
    pub event: String,
    pub monitor_id: Option<String>,
    pub poller_id: Option<String>,
    /// The message, as JSON.
    pub payload: String,
    pub status: String,
    pub attempts: i64,
    pub last_error: Option<String>,
    pub created_at: i64,
    pub next_attempt_at: Option<i64>,
    pub delivered_at: Option<i64>,
}

impl FromRow<'_, AnyRow> for OutboxRow {
    fn from_row(row: &AnyRow) -> sqlx::Result<Self> {
        Ok(Self {
            id: row.try_get("id")?,
            channel_id: row.try_get("channel_id")?,
            event: row.try_get("event")?,
            monitor_id: row.try_get("monitor_id")?,
            poller_id: row.try_get("poller_id")?,
            payload: row.try_get("payload")?,
            status: row.try_get("status")?,
            attempts: row.try_get("attempts")?,
            last_error: row.try_get("last_error")?,
            created_at: row.try_get("created_at")?,
            next_attempt_at: row.try_get("next_attempt_at")?,
            delivered_at: row.try_get("delivered_at")?,
        })
    }
}

pub(super) const OUTBOX_COLUMNS: &str =
    "id, channel_id, event, monitor_id, poller_id, payload, status, \
    attempts, last_error, created_at, next_attempt_at, delivered_at";

/// Writes `notifications` to the outbox, pending and due at once (their message's time).
pub(super) async fn insert_outbox(
    tx: &mut Transaction<'_, Any>,
    notifications: &[QueuedNotification],
) -> anyhow::Result<()> {
    for queued in notifications {
        let created_at = queued.message.at.timestamp_millis();
        sqlx::query(
            "INSERT INTO notifications (id, channel_id, event, monitor_id, poller_id, payload, \
             status, attempts, created_at, next_attempt_at) \
             VALUES ($1, $2, $3, $4, $5, $6, 'pending', 0, $7, $7)",
        )
        .bind(&queued.id)
        .bind(&queued.channel_id)
        .bind(queued.message.event.as_str())
        .bind(&queued.monitor_id)
        .bind(&queued.poller_id)
        .bind(serde_json::to_string(&queued.message)?)
        .bind(created_at)
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

impl Store {
    /// The problems this channel was told of that are not over: for each monitor whose last
    /// told status is a problem, and each offline poller, the newest message this channel
    /// took about it (its payload, and the monitor or poller). The caller keeps those that are
    /// problems. Costs a look per open problem (`alert_state_notified`, then the
    /// `notifications_monitor` and `notifications_poller` indexes), not per monitor.
    pub async fn open_problems_told(&self, channel_id: &str) -> anyhow::Result<Vec<ToldProblem>> {
        let newest = |subject: &str| {
            format!(
                "n.status = 'delivered' AND n.created_at = (SELECT MAX(m.created_at) \
                 FROM notifications m WHERE m.{subject} = n.{subject} \
                 AND m.channel_id = $1 AND m.status = 'delivered')"
            )
        };
        let sql = format!(
            "SELECT n.monitor_id, n.poller_id, n.payload FROM alert_state a \
             JOIN notifications n ON n.monitor_id = a.monitor_id AND n.channel_id = $1 \
             WHERE a.notified_status IN ('down', 'degraded', 'stale') AND {monitors} \
             UNION ALL \
             SELECT n.monitor_id, n.poller_id, n.payload FROM pollers p \
             JOIN notifications n ON n.poller_id = p.id AND n.channel_id = $1 \
             WHERE p.status = 'offline' AND p.deleted_at IS NULL AND {pollers}",
            monitors = newest("monitor_id"),
            pollers = newest("poller_id"),
        );
        let rows: Vec<(Option<String>, Option<String>, String)> = sqlx::query_as(&sql)
            .bind(channel_id)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows
            .into_iter()
            .map(|(monitor_id, poller_id, payload)| ToldProblem {
                monitor_id,
                poller_id,
                payload,
            })
            .collect())
    }

    /// The delivery log, oldest first, optionally for one monitor and/or channel.
    pub async fn list_notifications(
        &self,
        monitor_id: Option<&str>,
        channel_id: Option<&str>,
        after: &Cursor,
        limit: u32,
    ) -> anyhow::Result<Vec<OutboxRow>> {
        let sql = format!(
            "SELECT {OUTBOX_COLUMNS} FROM notifications \
             WHERE (created_at > $1 OR (created_at = $1 AND id > $2)) \
             AND ($3 = '' OR monitor_id = $3) AND ($4 = '' OR channel_id = $4) \
             ORDER BY created_at, id LIMIT $5"
        );
        Ok(sqlx::query_as(&sql)
            .bind(after.key)
            .bind(&after.id)
            .bind(monitor_id.unwrap_or_default())
            .bind(channel_id.unwrap_or_default())
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?)
    }

    /// The newest `limit` deliveries, newest first (the page's log).
    pub async fn recent_notifications(&self, limit: u32) -> anyhow::Result<Vec<OutboxRow>> {
        let sql = format!(
            "SELECT {OUTBOX_COLUMNS} FROM notifications ORDER BY created_at DESC, id DESC LIMIT $1"
        );
        Ok(sqlx::query_as(&sql)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?)
    }

    /// Drops delivered and failed notifications created before `before`.
    pub async fn prune_notifications(&self, before: i64) -> anyhow::Result<u64> {
        let _guard = self.write_lock().await;
        let done =
            sqlx::query("DELETE FROM notifications WHERE status <> 'pending' AND created_at < $1")
                .bind(before)
                .execute(&self.writer)
                .await?;
        Ok(done.rows_affected())
    }
}
