//! Status pages' notices to their subscribers, a lease holder's duty: every `MAINTENANCE_EVERY`
//! rounds, the notices of maintenance begun or ended (`service::status_pages::
//! maintenance_notices`); every second (the
//! notices are about incidents people read on a page; a second is soon enough), the deliveries
//! that are due, oldest first, at most one per subscriber a round (so each subscriber gets its
//! notices in order), claimed in one write so that a replica taking the lease meanwhile
//! leaves them alone, sent a few at a time, and each attempt recorded with what it means
//! (`service::status_pages::subscribers`: retried with backoff, given up after a day, a
//! webhook turned off after failures in a row and the page's owner told).
//!
//! Cost: a round is one indexed read of what is due (`status_notice_deliveries_due`), and a
//! page read per page with something due; nothing is read when nothing is due. Delivery is at
//! least once, as channels' is: a send whose record is lost with the lease is sent again by
//! the next holder, with the same `X-Notification-Id`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use rand::Rng;
use shared_proto::status_subscribers::{SubscriberKind, SubscriberStatus};

use crate::notify::notices::Recipient;
use crate::notify::SEND_TIMEOUT;
use crate::service::error::ServiceError;
use crate::service::status_pages::maintenance_notices::tell_maintenance;
use crate::service::status_pages::subscribers::{
    after_failure, failure_attempt, notice_for, owner_rows, turned_off_message, Failure,
};
use crate::service::status_pages::StatusPage;
use crate::service::App;
use crate::store::{DueDelivery, NoticeAttempt};

const TICK: Duration = Duration::from_secs(1);
/// Maintenance's starts and ends are looked for every this many rounds: told within 30 s.
const MAINTENANCE_EVERY: u64 = 30;
/// Deliveries read a round.
const BATCH: u32 = 100;
/// Sends under way at once.
const AT_ONCE: usize = 8;
/// How long claimed deliveries are left alone by other replicas: longer than a round's sends
/// can take (`BATCH / AT_ONCE` waves of sends cut off at `SEND_TIMEOUT` + 5 s), and a wave more.
const CLAIM_MS: i64 =
    (BATCH as i64 / AT_ONCE as i64 + 2) * (SEND_TIMEOUT.as_millis() as i64 + 5_000);
/// How long a delivery waits after a fault of central's own.
const POSTPONE_MS: i64 = 60_000;

pub async fn run(app: Arc<App>) {
    let mut ticker = tokio::time::interval(TICK);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut rounds: u64 = 0;
    loop {
        ticker.tick().await;
        // Maintenance begun or ended is looked for at once when the lease is taken, then
        // every `MAINTENANCE_EVERY` rounds (its cost: `maintenance_notices`).
        if rounds.is_multiple_of(MAINTENANCE_EVERY) {
            if let Err(e) = tell_maintenance(&app).await {
                tracing::warn!("telling subscribers of maintenance failed: {e:#}");
            }
        }
        rounds += 1;
        if let Err(e) = round(&app).await {
            tracing::warn!("sending status pages' notices failed: {e:#}");
        }
    }
}

/// One round: what is due, sent.
async fn round(app: &App) -> anyhow::Result<()> {
    let now = app.now_ms();
    let due = app.store.due_deliveries(now, BATCH).await?;
    if due.is_empty() {
        return Ok(());
    }
    // One a subscriber: the next waits for the round after this one's is recorded.
    let mut subscribers = HashSet::new();
    let due: Vec<DueDelivery> = due
        .into_iter()
        .filter(|d| subscribers.insert(d.subscriber.id.clone()))
        .collect();
    let ids: Vec<String> = due.iter().map(|d| d.id.clone()).collect();
    let claimed: HashSet<String> = app
        .store
        .claim_deliveries(&ids, now, now + CLAIM_MS)
        .await?
        .into_iter()
        .collect();
    let pages = app.status_pages();
    let key = pages.subscriber_key().await?;
    // A page that could not be read now is not a deleted page: its deliveries wait.
    let mut found: HashMap<String, Result<Arc<StatusPage>, Fault>> = HashMap::new();
    for delivery in &due {
        if !found.contains_key(&delivery.notice.page_id) {
            let page = match uuid::Uuid::try_parse(&delivery.notice.page_id) {
                Ok(id) => match pages.page_by_id(id).await {
                    Ok(page) => Ok(Arc::new(page)),
                    Err(ServiceError::NotFound(_)) => Err(Fault::Deleted),
                    Err(e) => Err(Fault::Central(format!("reading the status page: {e}"))),
                },
                Err(_) => Err(Fault::Deleted),
            };
            found.insert(delivery.notice.page_id.clone(), page);
        }
    }
    let base = pages.public_url().map(str::to_string);
    let sends = due
        .into_iter()
        .filter(|d| claimed.contains(&d.id))
        .map(|delivery| {
            let page = found
                .get(&delivery.notice.page_id)
                .cloned()
                .unwrap_or(Err(Fault::Deleted));
            let (key, base) = (key.clone(), base.clone());
            async move {
                let outcome = match (&page, base.as_deref()) {
                    (Ok(page), Some(base)) => send(app, &delivery, page, base, &key)
                        .await
                        .map_err(Fault::Receiver),
                    (Err(fault), _) => Err(fault.clone()),
                    (_, None) => Err(Fault::Central(
                        "CENTRAL_PUBLIC_URL is unset: a notice needs its links".to_string(),
                    )),
                };
                (delivery, page.ok(), outcome)
            }
        });
    let mut sends = futures_util::stream::iter(sends).buffer_unordered(AT_ONCE);
    while let Some((delivery, page, outcome)) = sends.next().await {
        let now = app.now_ms();
        let attempt = match outcome {
            Ok(()) => NoticeAttempt::Delivered,
            Err(Fault::Central(error)) => NoticeAttempt::Postpone {
                error,
                at: now + POSTPONE_MS,
            },
            Err(Fault::Deleted) => NoticeAttempt::GiveUp {
                error: "the status page was deleted".into(),
            },
            Err(Fault::Receiver(error)) => {
                let kind = SubscriberKind::parse(&delivery.subscriber.kind)
                    .unwrap_or(SubscriberKind::Webhook);
                let jitter = rand::thread_rng().gen_range(-0.2..=0.2);
                let status = SubscriberStatus::parse(&delivery.subscriber.status)
                    .unwrap_or(SubscriberStatus::Pending);
                let failure = after_failure(
                    kind,
                    status,
                    delivery.subscriber.failures,
                    delivery.notice.created_at,
                    delivery.attempts,
                    now,
                    jitter,
                );
                let tell = match (failure, page.as_deref()) {
                    (Failure::TurnOff, Some(page)) => owner_rows(
                        &app.store.recipients().await?,
                        &turned_off_message(page, &delivery.subscriber, &error, now),
                    ),
                    _ => Vec::new(),
                };
                failure_attempt(failure, error, tell)
            }
        };
        app.store
            .record_notice_attempt(&delivery.id, &delivery.subscriber.id, &attempt, now)
            .await?;
        if let NoticeAttempt::TurnOff { .. } = attempt {
            tracing::warn!(subscriber = %delivery.subscriber.id, "a status page's webhook subscriber was turned off");
        }
    }
    Ok(())
}

/// Why a delivery was not made: whose fault decides what it means for the subscriber.
#[derive(Debug, Clone)]
enum Fault {
    /// The receiver or the network (or the notice did not read): counts against the
    /// subscriber.
    Receiver(String),
    /// Central's own (no public address, a page that could not be read): the delivery waits.
    Central(String),
    /// The page is gone: nothing to tell.
    Deleted,
}

/// Sends one delivery to its subscriber.
async fn send(
    app: &App,
    delivery: &DueDelivery,
    page: &StatusPage,
    base: &str,
    key: &[u8],
) -> Result<(), String> {
    let notice = notice_for(delivery, page, base, key).map_err(|e| format!("{e:#}"))?;
    let subscriber = &delivery.subscriber;
    let recipient = match SubscriberKind::parse(&subscriber.kind) {
        Some(SubscriberKind::Email) => Recipient::Email(&subscriber.address),
        Some(SubscriberKind::Webhook) => Recipient::Webhook {
            url: &subscriber.address,
            secret: subscriber.secret.as_deref(),
        },
        None => return Err("the subscriber's kind is unknown to this central".into()),
    };
    // Cut off whatever a receiver does: the claim must outlast every send.
    match tokio::time::timeout(
        SEND_TIMEOUT + Duration::from_secs(5),
        app.notifier.send_notice(recipient, &notice),
    )
    .await
    {
        Ok(outcome) => outcome,
        Err(_) => Err("the receiver took too long".into()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use shared_proto::status_subscribers::{SubscribeRequest, FAILURES_TO_TURN_OFF};

    use super::*;
    use crate::config::ServeArgs;
    use crate::service::clock::Clock;

    /// A webhook subscriber whose receiver fails is retried with backoff and, after
    /// `FAILURES_TO_TURN_OFF` failures in a row, turned off, with the page's owner told once
    /// through the default channel; an unconfirmed one is tried a few times and nobody told.
    #[tokio::test]
    async fn a_failing_webhook_is_turned_off_and_the_owner_told() {
        let dir = tempfile::tempdir().unwrap();
        let mut args = ServeArgs::with_sqlite_in(dir.path());
        // Loopback is outside the destination policy here: every send fails, as a dead
        // receiver's would.
        args.public_url = Some("https://status.example.com".into());
        let start = 1_800_000_000_000;
        let (clock, handle) = Clock::manual(start);
        let app = App::open_with_clock(&args, clock).await.unwrap();
        let channel = serde_json::from_value(json!({
            "name": "owner", "kind": "webhook", "url": "https://hooks.example.com/x",
            "default": true,
        }))
        .unwrap();
        app.channels().create_channel(channel).await.unwrap();
        let pages = app.status_pages();
        let spec = serde_json::from_value(json!({"slug": "acme", "title": "Acme", "sections": []}))
            .unwrap();
        let page_id = pages.create_page(spec).await.unwrap().id;
        let page = pages.page_by_id(page_id).await.unwrap();
        let subscribe = |url: &str| SubscribeRequest {
            webhook_url: Some(url.into()),
            ..Default::default()
        };
        pages
            .subscribe(&page, &subscribe("http://127.0.0.1:9/confirmed"))
            .await
            .unwrap();
        pages
            .subscribe(&page, &subscribe("http://127.0.0.1:9/stranger"))
            .await
            .unwrap();
        let confirmed = app
            .store
            .subscriber_at(&page_id.to_string(), "http://127.0.0.1:9/confirmed")
            .await
            .unwrap()
            .unwrap();
        assert!(app
            .store
            .confirm_subscriber(&confirmed.id, start)
            .await
            .unwrap());
        let incident = serde_json::from_value(json!({
            "title": "Slow logins", "message": "Looking into it."
        }))
        .unwrap();
        pages.create_incident(page_id, incident).await.unwrap();
        let told = |app: Arc<App>| async move {
            app.store
                .list_notifications(None, None, &crate::store::Cursor::start(), 100)
                .await
                .unwrap()
                .into_iter()
                .filter(|n| n.event == "status_page.subscriber_turned_off")
                .count()
        };
        // A round, then past the longest backoff (ten minutes), as many times as it takes.
        for _ in 0..FAILURES_TO_TURN_OFF + 2 {
            round(&app).await.unwrap();
            handle.advance(12 * 60 * 1000);
        }
        let after = app.store.subscriber(&confirmed.id).await.unwrap().unwrap();
        assert_eq!(after.status, "turned_off");
        assert_eq!(after.failures, i64::from(FAILURES_TO_TURN_OFF));
        assert_eq!(told(app.clone()).await, 1, "the owner is told once");
        let stranger = app
            .store
            .subscriber_at(&page_id.to_string(), "http://127.0.0.1:9/stranger")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(stranger.status, "pending", "never turned off, never told");
        assert_eq!(stranger.failures, 3, "a confirmation is tried three times");
        assert!(
            app.store
                .due_deliveries(i64::MAX, 10)
                .await
                .unwrap()
                .is_empty(),
            "nothing is left to send"
        );
    }
}
