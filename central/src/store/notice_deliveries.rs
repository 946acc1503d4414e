//! The outbox of status pages' notices (`status_notice_deliveries`), for
//! `duties::page_notices`: what is due, the claims that keep another replica off what is
//! being sent, and the record of each attempt with what it means for its subscriber (its
//! failures in a row; turned off, with the page's owner told in the same transaction).
//! Cost: one read of what is due by `(status, next_attempt_at)`, joined by primary keys; a
//! claim for a round's ids; two or three row writes per attempt. Must not: decide what a
//! failure means (`service::status_pages::subscribers`) or send (`notify::notices`).

use sqlx::any::AnyRow;
use sqlx::{Any, FromRow, Row, Transaction};

use super::dialect::listed;
use super::notifications::insert_outbox;
use super::status_subscribers::COLUMNS;
use super::{NoticeRow, Store, SubscriberRow};
use crate::domain::QueuedNotification;

/// A delivery that is due, with what the sender needs: its notice and its subscriber.
#[derive(Debug, Clone)]
pub struct DueDelivery {
    pub id: String,
    pub attempts: i64,
    pub created_at: i64,
    pub notice: NoticeRow,
    pub subscriber: SubscriberRow,
}

impl FromRow<'_, AnyRow> for DueDelivery {
    fn from_row(row: &AnyRow) -> sqlx::Result<Self> {
        Ok(Self {
            id: row.try_get("d_id")?,
            attempts: row.try_get("d_attempts")?,
            created_at: row.try_get("d_created_at")?,
            notice: NoticeRow {
                id: row.try_get("n_id")?,
                page_id: row.try_get("n_page_id")?,
                event: row.try_get("n_event")?,
                content: row.try_get("n_content")?,
                created_at: row.try_get("n_created_at")?,
            },
            subscriber: SubscriberRow::from_row(row)?,
        })
    }
}

/// What became of one delivery attempt.
#[derive(Debug, Clone)]
pub enum NoticeAttempt {
    Delivered,
    /// Tried again at `at`.
    Retry {
        error: String,
        at: i64,
    },
    /// Given up (too old).
    GiveUp {
        error: String,
    },
    /// Tried again at `at` for a fault of central's own (no public address, a page that could
    /// not be read): not the subscriber's failure.
    Postpone {
        error: String,
        at: i64,
    },
    /// Given up, and the subscriber turned off with every delivery still pending for it; the
    /// page's owner told through `tell` (the default channels' outbox rows).
    TurnOff {
        error: String,
        tell: Vec<QueuedNotification>,
    },
}

impl Store {
    /// Up to `limit` deliveries due at `now`, oldest due first, with their notices and
    /// subscribers (index `status_notice_deliveries_due`): only each subscriber's oldest
    /// undelivered one (by `(subscriber_id, status)`), so that a notice being retried, or
    /// claimed by a replica that lost the lease, holds back the later ones to its subscriber:
    /// each hears of an incident in the order it happened.
    pub async fn due_deliveries(&self, now: i64, limit: u32) -> anyhow::Result<Vec<DueDelivery>> {
        let subscriber_columns: String = COLUMNS
            .split(", ")
            .map(|c| format!("s.{c}"))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "SELECT d.id AS d_id, d.attempts AS d_attempts, d.created_at AS d_created_at, \
             n.id AS n_id, n.page_id AS n_page_id, n.event AS n_event, n.content AS n_content, \
             n.created_at AS n_created_at, {subscriber_columns} \
             FROM status_notice_deliveries d \
             JOIN status_notices n ON n.id = d.notice_id \
             JOIN status_subscribers s ON s.id = d.subscriber_id \
             WHERE d.status = 'pending' AND d.next_attempt_at <= $1 \
             AND NOT EXISTS (SELECT 1 FROM status_notice_deliveries o \
                 WHERE o.subscriber_id = d.subscriber_id AND o.status = 'pending' \
                 AND (o.created_at < d.created_at \
                      OR (o.created_at = d.created_at AND o.id < d.id))) \
             ORDER BY d.next_attempt_at, d.id LIMIT $2"
        );
        Ok(sqlx::query_as(&sql)
            .bind(now)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?)
    }

    /// Claims the given deliveries still pending and due at `now` until `until` (another
    /// replica that takes the lease meanwhile leaves them alone); the ids claimed.
    pub async fn claim_deliveries(
        &self,
        ids: &[String],
        now: i64,
        until: i64,
    ) -> anyhow::Result<Vec<String>> {
        let _guard = self.write_lock().await;
        let sql = format!(
            "UPDATE status_notice_deliveries SET next_attempt_at = $3 \
             WHERE {} AND status = 'pending' AND next_attempt_at <= $2 RETURNING id",
            listed(self.backend, "id", "$1")
        );
        let rows: Vec<(String,)> = sqlx::query_as(&sql)
            .bind(serde_json::to_string(ids)?)
            .bind(now)
            .bind(until)
            .fetch_all(&self.writer)
            .await?;
        Ok(rows.into_iter().map(|(id,)| id).collect())
    }

    /// Records one attempt of the delivery `id` to `subscriber_id`, and what it means for the
    /// subscriber (its failures in a row), in one transaction.
    pub async fn record_notice_attempt(
        &self,
        id: &str,
        subscriber_id: &str,
        attempt: &NoticeAttempt,
        now: i64,
    ) -> anyhow::Result<()> {
        let _guard = self.write_lock().await;
        let mut tx = self.writer.begin().await?;
        match attempt {
            NoticeAttempt::Delivered => {
                sqlx::query(
                    "UPDATE status_notice_deliveries SET status = 'delivered', \
                     attempts = attempts + 1, sent_at = $2, last_error = NULL WHERE id = $1",
                )
                .bind(id)
                .bind(now)
                .execute(&mut *tx)
                .await?;
                sqlx::query(
                    "UPDATE status_subscribers SET failures = 0, last_error = NULL WHERE id = $1",
                )
                .bind(subscriber_id)
                .execute(&mut *tx)
                .await?;
            }
            NoticeAttempt::Retry { error, at } => {
                sqlx::query(
                    "UPDATE status_notice_deliveries SET attempts = attempts + 1, \
                     next_attempt_at = $2, last_error = $3 WHERE id = $1",
                )
                .bind(id)
                .bind(at)
                .bind(error)
                .execute(&mut *tx)
                .await?;
                failed(&mut tx, subscriber_id, error).await?;
            }
            NoticeAttempt::Postpone { error, at } => {
                sqlx::query(
                    "UPDATE status_notice_deliveries SET next_attempt_at = $2, last_error = $3 \
                     WHERE id = $1",
                )
                .bind(id)
                .bind(at)
                .bind(error)
                .execute(&mut *tx)
                .await?;
            }
            NoticeAttempt::GiveUp { error } => {
                give_up(&mut tx, id, error).await?;
                failed(&mut tx, subscriber_id, error).await?;
            }
            NoticeAttempt::TurnOff { error, tell } => {
                give_up(&mut tx, id, error).await?;
                failed(&mut tx, subscriber_id, error).await?;
                sqlx::query("UPDATE status_subscribers SET status = 'turned_off' WHERE id = $1")
                    .bind(subscriber_id)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query(
                    "UPDATE status_notice_deliveries SET status = 'failed', \
                     last_error = 'the subscriber was turned off' \
                     WHERE subscriber_id = $1 AND status = 'pending'",
                )
                .bind(subscriber_id)
                .execute(&mut *tx)
                .await?;
                insert_outbox(&mut tx, tell).await?;
            }
        }
        tx.commit().await?;
        Ok(())
    }
}

async fn give_up(tx: &mut Transaction<'_, Any>, id: &str, error: &str) -> sqlx::Result<()> {
    sqlx::query(
        "UPDATE status_notice_deliveries SET status = 'failed', attempts = attempts + 1, \
         last_error = $2 WHERE id = $1",
    )
    .bind(id)
    .bind(error)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

async fn failed(
    tx: &mut Transaction<'_, Any>,
    subscriber_id: &str,
    error: &str,
) -> sqlx::Result<()> {
    sqlx::query(
        "UPDATE status_subscribers SET failures = failures + 1, last_error = $2 WHERE id = $1",
    )
    .bind(subscriber_id)
    .bind(error)
    .execute(&mut **tx)
    .await?;
    Ok(())
}
