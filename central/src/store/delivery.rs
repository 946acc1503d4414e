//! The outbox's delivery bookkeeping, for `duties::delivery`: a channel's queue, the claims
//! that keep other replicas off the rows being sent, and the record of each attempt.
//!
//! Claims and records are taken for several rows at once: at 100,000 monitors a fleet coming
//! back queues a thousand notices a second, and two writes per notice on SQLite's one writer,
//! beside ingest's, were what kept new problems waiting for minutes behind the recoveries.
//! They are small writes that decide how soon a person hears of a problem, so on SQLite they
//! go ahead of the ordinary writers' queue (`Store::write_lock_first`, as the duties lease
//! does): with the queue full of a recovery's uploads and looks, a chunk waited for all of it
//! twice, and delivery fell to one chunk of 20 every 7 s while 98,000 waited.
//! Must not: decide what is sent (`service::alerts`), or send it (`notify`).

use std::collections::HashSet;

use super::dialect::{listed, without_index};
use super::notifications::OUTBOX_COLUMNS;
use super::{Backend, OutboxRow, Store};

/// The outcome of one delivery attempt.
#[derive(Debug, Clone, Copy)]
pub enum Attempt<'a> {
    Delivered,
    Retry { error: &'a str, at: i64 },
    GiveUp { error: &'a str },
}

/// `status` as a claim's or a release's `WHERE` names it. SQLite's planner, without
/// statistics, preferred the `notifications_pending` index for `status = 'pending'` over the
/// primary key for the ids, and read every pending row of every channel (and its table row)
/// to find the chunk's 20: with 98,000 queued (a fleet's recovery at 100,000 monitors) a
/// claim took seconds of the one writer, and delivery fell to 20 notices every 6 s. The
/// unary `+` keeps the term out of index choice (SQLite's documented way); PostgreSQL plans
/// by statistics and has no unary `+` for text.
fn status_term(backend: Backend) -> String {
    without_index(backend, "status")
}

/// Claims the given ids (`$1`) still pending and due at `$2`, until `$3`.
fn claim_sql(backend: Backend) -> String {
    format!(
        "UPDATE notifications SET next_attempt_at = $3 \
         WHERE {} AND {} = 'pending' \
         AND (next_attempt_at IS NULL OR next_attempt_at <= $2) RETURNING id",
        listed(backend, "id", "$1"),
        status_term(backend)
    )
}

/// Gives back, due at `$3`, the given ids (`$1`) still held by the claim that ends at `$2`.
fn release_sql(backend: Backend) -> String {
    format!(
        "UPDATE notifications SET next_attempt_at = $3 \
         WHERE {} AND {} = 'pending' AND next_attempt_at = $2",
        listed(backend, "id", "$1"),
        status_term(backend)
    )
}

impl Store {
    /// A channel's undelivered notifications, oldest first (index `notifications_pending`).
    pub async fn pending_notifications(
        &self,
        channel_id: &str,
        limit: u32,
    ) -> anyhow::Result<Vec<OutboxRow>> {
        let sql = format!(
            "SELECT {OUTBOX_COLUMNS} FROM notifications \
             WHERE status = 'pending' AND channel_id = $1 ORDER BY created_at, id LIMIT $2"
        );
        Ok(sqlx::query_as(&sql)
            .bind(channel_id)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?)
    }

    /// Gives up the pending notifications whose channel no longer exists; how many. Costs a
    /// look at each pending row (the `notifications_pending` index), not at settled ones.
    pub async fn fail_orphaned_notifications(&self) -> anyhow::Result<u64> {
        let _guard = self.write_lock().await;
        let done = sqlx::query(
            "UPDATE notifications SET status = 'failed', last_error = 'the channel was deleted', \
             next_attempt_at = NULL WHERE status = 'pending' AND NOT EXISTS (SELECT 1 FROM notification_channels c \
                 WHERE c.id = notifications.channel_id)",
        )
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected())
    }

    /// Claims due notifications for sending, in one write: moves the next attempt of each
    /// that is still pending and due at `now` to `until`. Returns the ids claimed; one left
    /// out is another replica's (or no longer pending).
    pub async fn claim_notifications(
        &self,
        ids: &[String],
        now: i64,
        until: i64,
    ) -> anyhow::Result<HashSet<String>> {
        let _guard = self.write_lock_first().await;
        let sql = claim_sql(self.backend());
        let claimed: Vec<String> = sqlx::query_scalar(&sql)
            .bind(serde_json::to_string(ids)?)
            .bind(now)
            .bind(until)
            .fetch_all(&self.writer)
            .await?;
        Ok(claimed.into_iter().collect())
    }

    /// Gives back, due at `now`, the claimed notifications that were not sent: only those
    /// still held by the claim that ends at `until` (none another replica took since).
    pub async fn release_claims(&self, ids: &[String], until: i64, now: i64) -> anyhow::Result<()> {
        let _guard = self.write_lock_first().await;
        let sql = release_sql(self.backend());
        sqlx::query(&sql)
            .bind(serde_json::to_string(ids)?)
            .bind(until)
            .bind(now)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Records delivery attempts, each with its notification's id and the time it ended
    /// (delivered, to retry at a time, or given up), in one transaction.
    pub async fn record_attempts(
        &self,
        attempts: &[(&str, Attempt<'_>, i64)],
    ) -> anyhow::Result<()> {
        if attempts.is_empty() {
            return Ok(());
        }
        let _guard = self.write_lock_first().await;
        let mut tx = self.writer.begin().await?;
        for &(id, outcome, at) in attempts {
            let query = match outcome {
                Attempt::Delivered => sqlx::query(
                    "UPDATE notifications SET status = 'delivered', attempts = attempts + 1, \
                     delivered_at = $2, next_attempt_at = NULL WHERE id = $1 AND status = 'pending'",
                )
                .bind(id)
                .bind(at),
                Attempt::Retry { error, at: retry_at } => sqlx::query(
                    "UPDATE notifications SET attempts = attempts + 1, last_error = $2, \
                     next_attempt_at = $3 WHERE id = $1 AND status = 'pending'",
                )
                .bind(id)
                .bind(error)
                .bind(retry_at),
                Attempt::GiveUp { error } => sqlx::query(
                    "UPDATE notifications SET status = 'failed', attempts = attempts + 1, \
                     last_error = $2, next_attempt_at = NULL WHERE id = $1 AND status = 'pending'",
                )
                .bind(id)
                .bind(error),
            };
            query.execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::QueuedNotification;
    use crate::store::notifications::insert_outbox;
    use crate::store::testing::{place_among_queued_writes, sqlite_store};

    fn row(id: &str, channel_id: &str) -> QueuedNotification {
        use chrono::TimeZone;
        use shared_proto::notifications::{Notification, NotificationEvent};
        QueuedNotification {
            id: id.into(),
            channel_id: channel_id.into(),
            monitor_id: None,
            poller_id: None,
            message: Notification {
                id: uuid::Uuid::nil(),
                event: NotificationEvent::MonitorDown,
                monitor: None,
                poller: None,
                status: "down".into(),
                previous_status: None,
                at: chrono::Utc.timestamp_millis_opt(1_000).unwrap(),
                message: String::new(),
                reminder: false,
                locations: None,
                dependency: None,
                dependents: None,
            },
        }
    }

    async fn claim(store: &Store, ids: &[&str], now: i64, until: i64) -> Vec<String> {
        let ids: Vec<String> = ids.iter().map(|id| id.to_string()).collect();
        let mut claimed: Vec<String> = store
            .claim_notifications(&ids, now, until)
            .await
            .unwrap()
            .into_iter()
            .collect();
        claimed.sort();
        claimed
    }

    #[tokio::test]
    async fn a_claim_is_taken_once_and_notices_of_deleted_channels_are_given_up() {
        let (store, _dir) = sqlite_store().await;
        let mut tx = store.pool.begin().await.unwrap();
        insert_outbox(&mut tx, &[row("n1", "gone")]).await.unwrap();
        tx.commit().await.unwrap();

        assert_eq!(claim(&store, &["n1"], 2_000, 32_000).await, ["n1"]);
        assert!(
            claim(&store, &["n1"], 3_000, 33_000).await.is_empty(),
            "claimed and not due again until the claim ends"
        );
        assert_eq!(claim(&store, &["n1"], 32_000, 62_000).await, ["n1"]);

        assert_eq!(store.fail_orphaned_notifications().await.unwrap(), 1);
        let pending = store.pending_notifications("gone", 10).await.unwrap();
        assert!(pending.is_empty(), "{pending:?}");
        assert!(claim(&store, &["n1"], 99_000, 129_000).await.is_empty());
    }

    #[tokio::test]
    async fn claims_are_taken_together_given_back_only_by_their_holder_and_recorded_together() {
        let (store, _dir) = sqlite_store().await;
        let mut tx = store.pool.begin().await.unwrap();
        let rows: Vec<QueuedNotification> = ["a", "b", "c", "d"].map(|id| row(id, "ch")).into();
        insert_outbox(&mut tx, &rows).await.unwrap();
        tx.commit().await.unwrap();

        // Another replica holds "b".
        assert_eq!(claim(&store, &["b"], 2_000, 40_000).await, ["b"]);
        assert_eq!(
            claim(&store, &["a", "b", "c", "d"], 3_000, 33_000).await,
            ["a", "c", "d"]
        );
        // "d" was not sent: given back, due at once; "b" is not this claim's to give.
        let unsent = ["b".to_string(), "d".to_string()];
        store.release_claims(&unsent, 33_000, 4_000).await.unwrap();
        assert_eq!(claim(&store, &["b", "d"], 4_000, 34_000).await, ["d"]);

        store
            .record_attempts(&[
                ("a", Attempt::Delivered, 5_000),
                (
                    "c",
                    Attempt::Retry {
                        error: "refused",
                        at: 9_000,
                    },
                    5_100,
                ),
            ])
            .await
            .unwrap();
        let pending = store.pending_notifications("ch", 10).await.unwrap();
        let left: Vec<(&str, Option<i64>, i64)> = pending
            .iter()
            .map(|r| (r.id.as_str(), r.next_attempt_at, r.attempts))
            .collect();
        assert_eq!(
            left,
            [
                ("b", Some(40_000), 0),
                ("c", Some(9_000), 1),
                ("d", Some(34_000), 0)
            ]
        );
        let log = store.recent_notifications(10).await.unwrap();
        let a = log.iter().find(|r| r.id == "a").unwrap();
        assert_eq!(
            (a.status.as_str(), a.delivered_at),
            ("delivered", Some(5_000))
        );
    }

    /// A claim and a release find their rows by id, whatever else is pending: with the
    /// status index they read every pending row of every channel (seconds with 98,000
    /// queued).
    #[tokio::test]
    async fn claims_and_releases_find_their_rows_by_id_not_by_scanning_the_queue() {
        let (store, _dir) = sqlite_store().await;
        for sql in [claim_sql(Backend::Sqlite), release_sql(Backend::Sqlite)] {
            let plan: Vec<(i64, i64, i64, String)> =
                sqlx::query_as(&format!("EXPLAIN QUERY PLAN {sql}"))
                    .bind("[\"a\",\"b\"]")
                    .bind(1_i64)
                    .bind(2_i64)
                    .fetch_all(&store.pool)
                    .await
                    .unwrap();
            let plan: Vec<&str> = plan.iter().map(|(_, _, _, step)| step.as_str()).collect();
            assert!(
                plan.iter().any(|step| step.contains(
                    "SEARCH notifications USING INDEX sqlite_autoindex_notifications_1 (id=?)"
                )),
                "{sql}: {plan:?}"
            );
            assert!(
                !plan
                    .iter()
                    .any(|step| step.contains("notifications_pending")),
                "{sql}: {plan:?}"
            );
        }
    }

    /// A claim made while a recovery's writes fill the queue waits for the write under way
    /// (and at most one more), not for the queue: delivery keeps pace with what alerting tells.
    #[tokio::test]
    async fn a_claim_goes_ahead_of_the_queued_writes() {
        let (store, _dir) = sqlite_store().await;
        let mut tx = store.pool.begin().await.unwrap();
        insert_outbox(&mut tx, &[row("n1", "ch")]).await.unwrap();
        tx.commit().await.unwrap();
        let claim = |store: std::sync::Arc<Store>| async move {
            let ids = ["n1".to_string()];
            let claimed = store
                .claim_notifications(&ids, 2_000, 32_000)
                .await
                .unwrap();
            assert_eq!(claimed.len(), 1);
        };
        let at = place_among_queued_writes(std::sync::Arc::new(store), claim).await;
        assert!(at <= 1, "the claim came after {at} queued writes");
    }
}
