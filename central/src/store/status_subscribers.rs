//! `status_subscribers`, `status_notices` and `status_notice_deliveries`: who asked to be told
//! of a status page, what there was to tell, and the outbox of each telling. A notice is
//! written in the transaction of what it tells (`tell_subscribers`, called by the incidents'
//! writes), with a delivery for each subscriber confirmed at that moment, so an incident
//! change and its notices are kept or lost together.
//!
//! Cost: a subscription by `(page_id, address)`; the per-address limit by `(address,
//! confirm_sent_at)`; a fan-out one `INSERT … SELECT` over the page's subscribers; the pages
//! to tell of maintenance, each probed by `(page_id, …)`. The deliveries' bookkeeping is
//! `notice_deliveries`. Must not: decide who is told what, or when (`service::status_pages::
//! subscribers`), or send (`duties::page_notices`).

use sqlx::any::AnyRow;
use sqlx::{Any, FromRow, Row, Transaction};

use super::readable::kept;
use super::status_pages::StatusPageRow;
use super::{Cursor, Store};
use crate::domain::{PageNotice, StatusPage};

pub(super) const COLUMNS: &str =
    "id, page_id, kind, address, secret, status, failures, last_error, \
     confirm_sent_at, created_at, confirmed_at";

/// A subscriber as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriberRow {
    pub id: String,
    pub page_id: String,
    pub kind: String,
    /// A mail address (lowercased) or a webhook URL.
    pub address: String,
    /// A webhook's signing secret.
    pub secret: Option<String>,
    pub status: String,
    pub failures: i64,
    pub last_error: Option<String>,
    pub confirm_sent_at: Option<i64>,
    pub created_at: i64,
    pub confirmed_at: Option<i64>,
}

impl FromRow<'_, AnyRow> for SubscriberRow {
    fn from_row(row: &AnyRow) -> sqlx::Result<Self> {
        Ok(Self {
            id: row.try_get("id")?,
            page_id: row.try_get("page_id")?,
            kind: row.try_get("kind")?,
            address: row.try_get("address")?,
            secret: row.try_get("secret")?,
            status: row.try_get("status")?,
            failures: row.try_get("failures")?,
            last_error: row.try_get("last_error")?,
            confirm_sent_at: row.try_get("confirm_sent_at")?,
            created_at: row.try_get("created_at")?,
            confirmed_at: row.try_get("confirmed_at")?,
        })
    }
}

/// A notice as stored: what it tells (`content`, JSON), once for all its deliveries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoticeRow {
    pub id: String,
    pub page_id: String,
    pub event: String,
    pub content: String,
    pub created_at: i64,
}

async fn insert_notice(tx: &mut Transaction<'_, Any>, notice: &PageNotice) -> anyhow::Result<()> {
    sqlx::query(
        "INSERT INTO status_notices (id, page_id, event, content, created_at) \
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(&notice.id)
    .bind(&notice.page_id)
    .bind(notice.content.event.as_str())
    .bind(serde_json::to_string(&notice.content)?)
    .bind(notice.created_at)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Writes `notice` with a delivery, due at once, for each subscriber of its page confirmed
/// now; part of the transaction of what it tells. A page nobody subscribed to writes nothing.
pub(super) async fn tell_subscribers(
    tx: &mut Transaction<'_, Any>,
    notice: &PageNotice,
) -> anyhow::Result<()> {
    let (told,): (i64,) = sqlx::query_as(
        "SELECT COUNT(*) FROM status_subscribers WHERE page_id = $1 AND status = 'confirmed'",
    )
    .bind(&notice.page_id)
    .fetch_one(&mut **tx)
    .await?;
    if told == 0 {
        return Ok(());
    }
    insert_notice(tx, notice).await?;
    // A delivery's id is its notice's and its subscriber's: the same on every retry, sent as
    // `X-Notification-Id`, by which a receiver drops a copy.
    sqlx::query(
        "INSERT INTO status_notice_deliveries \
         (id, notice_id, subscriber_id, page_id, status, attempts, next_attempt_at, created_at) \
         SELECT $1 || '.' || id, $1, id, page_id, 'pending', 0, $2, $2 \
         FROM status_subscribers WHERE page_id = $3 AND status = 'confirmed'",
    )
    .bind(&notice.id)
    .bind(notice.created_at)
    .bind(&notice.page_id)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Deletes every subscriber of a page with its notices and deliveries (the page is deleted
/// in the same transaction).
pub(super) async fn forget_page(tx: &mut Transaction<'_, Any>, page_id: &str) -> sqlx::Result<()> {
    for table in [
        "status_notice_deliveries",
        "status_notices",
        "status_subscribers",
    ] {
        sqlx::query(&format!("DELETE FROM {table} WHERE page_id = $1"))
            .bind(page_id)
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

impl Store {
    /// A page's subscription of `address`, if there is one.
    pub async fn subscriber_at(
        &self,
        page_id: &str,
        address: &str,
    ) -> anyhow::Result<Option<SubscriberRow>> {
        let sql =
            format!("SELECT {COLUMNS} FROM status_subscribers WHERE page_id = $1 AND address = $2");
        Ok(sqlx::query_as(&sql)
            .bind(page_id)
            .bind(address)
            .fetch_optional(&self.pool)
            .await?)
    }

    pub async fn subscriber(&self, id: &str) -> anyhow::Result<Option<SubscriberRow>> {
        let sql = format!("SELECT {COLUMNS} FROM status_subscribers WHERE id = $1");
        Ok(sqlx::query_as(&sql)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?)
    }

    /// How many confirmations went to `address` (any page) at `since` or later.
    pub async fn confirmations_sent_to(&self, address: &str, since: i64) -> anyhow::Result<i64> {
        let (count,): (i64,) = sqlx::query_as(
            "SELECT COUNT(*) FROM status_subscribers WHERE address = $1 AND confirm_sent_at >= $2",
        )
        .bind(address)
        .bind(since)
        .fetch_one(&self.pool)
        .await?;
        Ok(count)
    }

    /// How many of a page's subscriptions are not confirmed, and how many it has in all.
    pub async fn subscriber_counts(&self, page_id: &str) -> anyhow::Result<(i64, i64)> {
        let (pending, all): (i64, i64) = sqlx::query_as(
            "SELECT COALESCE(SUM(CASE WHEN status = 'pending' THEN 1 ELSE 0 END), 0), COUNT(*) \
             FROM status_subscribers WHERE page_id = $1",
        )
        .bind(page_id)
        .fetch_one(&self.pool)
        .await?;
        Ok((pending, all))
    }

    /// Writes `subscriber` and `notice`, its confirmation, with one delivery to it, in one
    /// transaction; `false`, writing nothing, when another request got there first: the
    /// subscription exists already (new), or is confirmed or had a confirmation sent after
    /// `again_after` (stored). A stored subscription keeps its secret unless it was turned off
    /// (a stranger re-subscribing a pending webhook does not choose how it is signed).
    pub async fn ask_confirmation(
        &self,
        subscriber: &SubscriberRow,
        notice: &PageNotice,
        again_after: i64,
    ) -> anyhow::Result<bool> {
        let _guard = self.write_lock().await;
        let mut tx = self.writer.begin().await?;
        let changed = sqlx::query(
            "UPDATE status_subscribers SET secret = CASE WHEN status = 'turned_off' THEN $2 \
             ELSE secret END, status = 'pending', failures = 0, last_error = NULL, \
             confirm_sent_at = $3 WHERE id = $1 AND status <> 'confirmed' \
             AND (confirm_sent_at IS NULL OR confirm_sent_at < $4)",
        )
        .bind(&subscriber.id)
        .bind(&subscriber.secret)
        .bind(subscriber.confirm_sent_at)
        .bind(again_after)
        .execute(&mut *tx)
        .await?;
        if changed.rows_affected() == 0 {
            let inserted = sqlx::query(&format!(
                "INSERT INTO status_subscribers ({COLUMNS}) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
                 ON CONFLICT DO NOTHING"
            ))
            .bind(&subscriber.id)
            .bind(&subscriber.page_id)
            .bind(&subscriber.kind)
            .bind(&subscriber.address)
            .bind(&subscriber.secret)
            .bind(&subscriber.status)
            .bind(subscriber.failures)
            .bind(&subscriber.last_error)
            .bind(subscriber.confirm_sent_at)
            .bind(subscriber.created_at)
            .bind(subscriber.confirmed_at)
            .execute(&mut *tx)
            .await?;
            if inserted.rows_affected() == 0 {
                return Ok(false);
            }
        }
        insert_notice(&mut tx, notice).await?;
        sqlx::query(
            "INSERT INTO status_notice_deliveries \
             (id, notice_id, subscriber_id, page_id, status, attempts, next_attempt_at, created_at) \
             VALUES ($1 || '.' || $2, $1, $2, $3, 'pending', 0, $4, $4)",
        )
        .bind(&notice.id)
        .bind(&subscriber.id)
        .bind(&subscriber.page_id)
        .bind(notice.created_at)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Confirms a pending subscription; `false` if it was not pending.
    /// Its confirmations still being sent are given up in the same transaction: they would
    /// say nothing new, and hold back its first notices (each subscriber's are sent in order).
    pub async fn confirm_subscriber(&self, id: &str, at: i64) -> anyhow::Result<bool> {
        let _guard = self.write_lock().await;
        let mut tx = self.writer.begin().await?;
        let done = sqlx::query(
            "UPDATE status_subscribers SET status = 'confirmed', confirmed_at = $2, \
             failures = 0, last_error = NULL WHERE id = $1 AND status = 'pending'",
        )
        .bind(id)
        .bind(at)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() != 1 {
            return Ok(false);
        }
        sqlx::query(
            "UPDATE status_notice_deliveries SET status = 'failed', \
             last_error = 'confirmed before it was delivered' \
             WHERE subscriber_id = $1 AND status = 'pending' AND notice_id IN \
             (SELECT id FROM status_notices WHERE event = 'subscription.confirm')",
        )
        .bind(id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Deletes a subscription with its deliveries; `false` if there was none.
    pub async fn delete_subscriber(&self, page_id: &str, id: &str) -> anyhow::Result<bool> {
        let _guard = self.write_lock().await;
        let mut tx = self.writer.begin().await?;
        let done = sqlx::query("DELETE FROM status_subscribers WHERE id = $1 AND page_id = $2")
            .bind(id)
            .bind(page_id)
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() != 1 {
            return Ok(false);
        }
        sqlx::query("DELETE FROM status_notice_deliveries WHERE subscriber_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// A page of a status page's subscribers, oldest first.
    pub async fn list_subscribers(
        &self,
        page_id: &str,
        after: &Cursor,
        limit: u32,
    ) -> anyhow::Result<Vec<SubscriberRow>> {
        let sql = super::cursor::by_creation(COLUMNS, "status_subscribers", "page_id = $4 AND");
        Ok(sqlx::query_as(&sql)
            .bind(after.key)
            .bind(&after.id)
            .bind(i64::from(limit))
            .bind(page_id)
            .fetch_all(&self.pool)
            .await?)
    }
}

impl Store {
    /// The pages with a confirmed subscriber, each with where its maintenance was told up to
    /// (`None`: never yet), and the ids of the pages without one that still hold such an
    /// instant (to forget it). Cost: the pages, each probed by the subscribers'
    /// `(page_id, …)` index.
    pub async fn pages_told_maintenance(
        &self,
    ) -> anyhow::Result<(Vec<(StatusPage, Option<i64>)>, Vec<String>)> {
        let columns: String = super::status_pages::COLUMNS
            .split(", ")
            .map(|c| format!("p.{c}"))
            .collect::<Vec<_>>()
            .join(", ");
        let listened = "EXISTS (SELECT 1 FROM status_subscribers s \
             WHERE s.page_id = p.id AND s.status = 'confirmed')";
        let sql = format!(
            "SELECT {columns}, p.maintenance_told_until FROM status_pages p WHERE {listened}"
        );
        let rows = sqlx::query(&sql).fetch_all(&self.pool).await?;
        let mut told = Vec::with_capacity(rows.len());
        for row in &rows {
            let until: Option<i64> = row.try_get("maintenance_told_until")?;
            let page = StatusPage::try_from(StatusPageRow::from_row(row)?);
            if let Some(page) = kept("status page", page) {
                told.push((page, until));
            }
        }
        let quiet: Vec<(String,)> = sqlx::query_as(&format!(
            "SELECT p.id FROM status_pages p \
             WHERE p.maintenance_told_until IS NOT NULL AND NOT {listened}"
        ))
        .fetch_all(&self.pool)
        .await?;
        Ok((told, quiet.into_iter().map(|(id,)| id).collect()))
    }

    /// Forgets where a page's maintenance was told up to (it has no confirmed subscriber: its
    /// next one starts from the pass after it confirms, not from the old instant).
    pub async fn forget_maintenance_told(&self, page_id: &str) -> anyhow::Result<()> {
        let _guard = self.write_lock().await;
        sqlx::query("UPDATE status_pages SET maintenance_told_until = NULL WHERE id = $1")
            .bind(page_id)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Writes `notices` (each to the page's confirmed subscribers) and moves where the page's
    /// maintenance was told up to from `from` to `until`, in one transaction; `false`, writing
    /// nothing, if another replica moved it meanwhile.
    pub async fn tell_maintenance(
        &self,
        page_id: &str,
        from: Option<i64>,
        until: i64,
        notices: &[PageNotice],
    ) -> anyhow::Result<bool> {
        let _guard = self.write_lock().await;
        let mut tx = self.writer.begin().await?;
        let moved = sqlx::query(
            "UPDATE status_pages SET maintenance_told_until = $2 \
             WHERE id = $1 AND COALESCE(maintenance_told_until, -1) = $3",
        )
        .bind(page_id)
        .bind(until)
        .bind(from.unwrap_or(-1))
        .execute(&mut *tx)
        .await?;
        if moved.rows_affected() != 1 {
            return Ok(false);
        }
        for notice in notices {
            tell_subscribers(&mut tx, notice).await?;
        }
        tx.commit().await?;
        Ok(true)
    }
}

impl Store {
    /// Deletes what subscribers no longer need: deliveries settled (delivered or given up)
    /// and made before `before`, notices of that age with no delivery left, and subscriptions
    /// whose confirmation was sent before `before` and never confirmed, with their deliveries;
    /// how many rows. Cost: the rows old enough, by the `…_by_age` and `…_unconfirmed` indexes.
    pub async fn prune_subscriptions(&self, before: i64, batch: u32) -> anyhow::Result<u64> {
        let mut pruned = 0;
        // In this order, so that nothing is left pointing at what went first; each at most
        // `batch` rows a transaction, so that a week of a busy page's deliveries never holds
        // the writer long (the next batch waits behind whatever queued meanwhile).
        for (table, chosen) in [
            (
                "status_notice_deliveries",
                "subscriber_id IN (SELECT id FROM status_subscribers \
                 WHERE status = 'pending' AND confirm_sent_at < $1)",
            ),
            (
                "status_subscribers",
                "status = 'pending' AND confirm_sent_at < $1",
            ),
            (
                "status_notice_deliveries",
                "created_at < $1 AND status <> 'pending'",
            ),
            // A delivery written for a subscriber deleted at that moment (PostgreSQL: the
            // fan-out and the deletion in concurrent transactions) is never sent.
            (
                "status_notice_deliveries",
                "created_at < $1 AND NOT EXISTS \
                 (SELECT 1 FROM status_subscribers s WHERE s.id = subscriber_id)",
            ),
            (
                "status_notices",
                "created_at < $1 AND NOT EXISTS (SELECT 1 FROM status_notice_deliveries d \
                 WHERE d.notice_id = status_notices.id)",
            ),
        ] {
            let sql = format!(
                "DELETE FROM {table} WHERE id IN (SELECT id FROM {table} WHERE {chosen} LIMIT $2)"
            );
            loop {
                let _guard = self.write_lock().await;
                let done = sqlx::query(&sql)
                    .bind(before)
                    .bind(i64::from(batch))
                    .execute(&self.writer)
                    .await?
                    .rows_affected();
                pruned += done;
                if done < u64::from(batch) {
                    break;
                }
            }
        }
        Ok(pruned)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing::sqlite_store;
    use crate::store::NoticeAttempt;

    fn subscriber(id: &str, address: &str, status: &str, sent_at: i64) -> SubscriberRow {
        SubscriberRow {
            id: id.into(),
            page_id: "p".into(),
            kind: "webhook".into(),
            address: address.into(),
            secret: None,
            status: status.into(),
            failures: 0,
            last_error: None,
            confirm_sent_at: Some(sent_at),
            created_at: sent_at,
            confirmed_at: None,
        }
    }

    fn notice(id: &str, at: i64) -> PageNotice {
        use chrono::TimeZone;
        use shared_proto::status_subscribers::{NoticeContent, NoticeEvent};
        PageNotice {
            id: id.into(),
            page_id: "p".into(),
            content: NoticeContent {
                event: NoticeEvent::IncidentCreated,
                at: chrono::Utc.timestamp_millis_opt(at).unwrap(),
                incident: None,
                maintenance: None,
            },
            created_at: at,
        }
    }

    /// A confirmation is written once however many requests ask at once, and a stranger's
    /// request does not change how a pending webhook is signed.
    #[tokio::test]
    async fn a_confirmation_is_claimed_in_its_write() {
        let (store, _dir) = sqlite_store().await;
        let mut first = subscriber("s1", "https://a/", "pending", 1_000);
        first.secret = Some("owner's".into());
        assert!(store
            .ask_confirmation(&first, &notice("c1", 1_000), 0)
            .await
            .unwrap());
        // The same address again (another id, as a second request at once would make).
        let twin = subscriber("s9", "https://a/", "pending", 1_000);
        assert!(!store
            .ask_confirmation(&twin, &notice("c9", 1_000), 0)
            .await
            .unwrap());
        // Again before `again_after`: nothing.
        let mut again = subscriber("s1", "https://a/", "pending", 1_500);
        again.secret = Some("stranger's".into());
        assert!(!store
            .ask_confirmation(&again, &notice("c2", 1_500), 1_000)
            .await
            .unwrap());
        // After it: sent again, the secret kept.
        assert!(store
            .ask_confirmation(&again, &notice("c3", 5_000), 1_200)
            .await
            .unwrap());
        let stored = store.subscriber("s1").await.unwrap().unwrap();
        assert_eq!(stored.secret.as_deref(), Some("owner's"));
        assert_eq!(stored.confirm_sent_at, Some(1_500));
        // Confirmed: never again.
        assert!(store.confirm_subscriber("s1", 6_000).await.unwrap());
        assert!(!store
            .ask_confirmation(&again, &notice("c4", 9_000), 8_000)
            .await
            .unwrap());
        assert_eq!(
            store.due_deliveries(i64::MAX, 10).await.unwrap().len(),
            1,
            "c1, then c3"
        );
    }

    /// Upkeep forgets what is settled and old, and subscriptions nobody confirmed; never a
    /// delivery still to be sent, nor its notice.
    #[tokio::test]
    async fn pruning_keeps_what_is_still_to_be_sent() {
        let (store, _dir) = sqlite_store().await;
        store
            .ask_confirmation(
                &subscriber("s1", "https://a/", "pending", 10),
                &notice("c1", 10),
                0,
            )
            .await
            .unwrap();
        store
            .ask_confirmation(
                &subscriber("s2", "https://b/", "pending", 10),
                &notice("c2", 10),
                0,
            )
            .await
            .unwrap();
        assert!(store.confirm_subscriber("s2", 20).await.unwrap());
        let _guard = store.write_lock().await;
        let mut tx = store.writer.begin().await.unwrap();
        tell_subscribers(&mut tx, &notice("n1", 30)).await.unwrap();
        tell_subscribers(&mut tx, &notice("n2", 40)).await.unwrap();
        tx.commit().await.unwrap();
        drop(_guard);
        store
            .record_notice_attempt("n1.s2", "s2", &NoticeAttempt::Delivered, 31)
            .await
            .unwrap();
        store
            .record_notice_attempt("c2.s2", "s2", &NoticeAttempt::Delivered, 11)
            .await
            .unwrap();
        // A row a batch: every batch is taken until none is left.
        let pruned = store.prune_subscriptions(100, 1).await.unwrap();
        assert!(
            store.subscriber("s1").await.unwrap().is_none(),
            "never confirmed"
        );
        assert!(store.subscriber("s2").await.unwrap().is_some());
        let due: Vec<String> = store
            .due_deliveries(i64::MAX, 10)
            .await
            .unwrap()
            .into_iter()
            .map(|d| d.id)
            .collect();
        assert_eq!(due, ["n2.s2"], "still to be sent, with its notice");
        // s1 and its confirmation's delivery; c2.s2 and n1.s2; notices c1, c2 and n1.
        assert_eq!(pruned, 2 + 2 + 3);
    }
}
