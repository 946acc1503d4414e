//! A status page's subscribers: subscribing (double opt-in: nothing but the confirmation goes
//! to an address until someone who reads it confirms), confirming and unsubscribing through
//! links that act on a `POST` only, what each change of an incident tells them, and what a
//! failed delivery means (tried again with backoff, given up after a day; a webhook that fails
//! `FAILURES_TO_TURN_OFF` times in a row is turned off, and the page's owner told through the
//! default channels).
//!
//! Links carry a token, an HMAC of the subscriber's id under a key central makes once (as the
//! unlock cookies are): nothing secret is stored per subscriber, and a token opens only its
//! own subscription. Subscribing never says whether the address was subscribed already (the
//! answer is the same `202` whatever happened), and is limited per address: a pending
//! subscription's confirmation is sent again at most every `CONFIRM_AGAIN_AFTER_MS` (checked in
//! the write itself, so requests at once send one), and one address gets confirmations from at
//! most `CONFIRMATIONS_PER_HOUR` pages an hour; a page keeps at most `MAX_PENDING` unconfirmed
//! and `MAX_SUBSCRIBERS` subscriptions in all. What is not limited: variants of one address
//! (`ana+1@…`, another path on one host) count as other addresses, up to those caps. Must not: send (`notify::notices`)
//! or loop (`duties::page_notices`).

use hmac::{Hmac, Mac};
use sha2::Sha256;
use shared_proto::notifications::{Notification, NotificationEvent};
use shared_proto::settings_api::Page;
use shared_proto::status_incidents::IncidentStatus;
use shared_proto::status_subscribers::{
    webhook_shown, Notice, NoticeContent, NoticeEvent, NoticeIncident, NoticePage,
    SubscribeRequest, SubscriberKind, SubscriberStatus, SubscriberView, FAILURES_TO_TURN_OFF,
};
use shared_proto::ValidationError;
use uuid::Uuid;

use super::{StatusPage, StatusPages};
use crate::domain::{PageNotice, QueuedNotification, Recipient};
use crate::service::error::{ServiceError, ServiceResult};
use crate::service::tokens::page;
use crate::service::{stored_id, time_of};
use crate::store::{Cursor, DueDelivery, NoticeAttempt, SubscriberRow};

/// The most rows upkeep deletes in one transaction (`Store::prune_subscriptions`).
const PRUNE_BATCH: u32 = 5_000;
/// The setting holding the key subscription links are signed with (one for the cluster).
const SUBSCRIBER_KEY_SETTING: &str = "status_subscriber_key";
/// A pending subscription's confirmation is sent again at most this often (so one address
/// gets at most one an hour from each page).
const CONFIRM_AGAIN_AFTER_MS: i64 = 3600 * 1000;
/// The most pages whose confirmation one address gets in an hour.
const CONFIRMATIONS_PER_HOUR: i64 = 5;
/// The most subscriptions a page keeps, confirmed or not.
const MAX_SUBSCRIBERS: i64 = 10_000;
/// The most unconfirmed subscriptions a page keeps: past it, a stranger's form posts are
/// answered as always and nothing is written.
const MAX_PENDING: i64 = 1_000;
/// How many times a confirmation is tried.
const CONFIRMATION_TRIES: i64 = 3;
/// How long settled deliveries, and subscriptions nobody confirmed, are kept.
const KEPT_MS: i64 = 7 * 24 * 3600 * 1000;
/// Delivery attempts stop this long after the notice was made.
const GIVE_UP_AFTER_MS: i64 = 24 * 3600 * 1000;

/// The token in a subscription's links: an HMAC of its id.
pub fn subscriber_token(key: &[u8], id: Uuid) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(b"status-subscriber:");
    mac.update(id.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

/// Whether `token` is the subscription `id`'s (compared in constant time).
pub fn token_opens(key: &[u8], id: Uuid, token: &str) -> bool {
    let Ok(given) = hex::decode(token) else {
        return false;
    };
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(b"status-subscriber:");
    mac.update(id.as_bytes());
    mac.verify_slice(&given).is_ok()
}

/// What a change of an incident tells subscribers: its publication (a draft published, or an
/// incident written published), a new update while published (its resolution when it moves to
/// `resolved`), nothing for a draft or a change that adds no update.
pub fn incident_event(
    was_published: bool,
    was: IncidentStatus,
    published: bool,
    update: Option<IncidentStatus>,
) -> Option<NoticeEvent> {
    if !published {
        return None;
    }
    if !was_published {
        return Some(NoticeEvent::IncidentCreated);
    }
    match update? {
        IncidentStatus::Resolved if was != IncidentStatus::Resolved => {
            Some(NoticeEvent::IncidentResolved)
        }
        _ => Some(NoticeEvent::IncidentUpdated),
    }
}

/// What to do after a failed delivery attempt to a subscriber of `kind` and `status`.
pub fn after_failure(
    kind: SubscriberKind,
    status: SubscriberStatus,
    failures_before: i64,
    notice_made_at: i64,
    attempts_before: i64,
    now: i64,
    jitter: f64,
) -> Failure {
    if status != SubscriberStatus::Confirmed {
        // A stranger's address that nobody confirmed: a few tries, then nothing, and nobody
        // told (or the form would page the owner for every dead URL typed into it).
        if attempts_before + 1 >= CONFIRMATION_TRIES {
            return Failure::GiveUp;
        }
    } else if kind == SubscriberKind::Webhook
        && failures_before + 1 >= i64::from(FAILURES_TO_TURN_OFF)
    {
        // A mail server's failure is central's, not the subscriber's: mail is never turned off.
        return Failure::TurnOff;
    }
    let at = now
        + crate::notify::retry_delay_ms(u32::try_from(attempts_before).unwrap_or(u32::MAX), jitter);
    if at - notice_made_at > GIVE_UP_AFTER_MS {
        Failure::GiveUp
    } else {
        Failure::Retry { at }
    }
}

/// `after_failure`'s answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    Retry { at: i64 },
    GiveUp,
    TurnOff,
}

fn kind_of(row: &SubscriberRow) -> anyhow::Result<SubscriberKind> {
    SubscriberKind::parse(&row.kind)
        .ok_or_else(|| anyhow::anyhow!("the database holds an unknown subscriber kind"))
}

fn status_of(row: &SubscriberRow) -> anyhow::Result<SubscriberStatus> {
    SubscriberStatus::parse(&row.status)
        .ok_or_else(|| anyhow::anyhow!("the database holds an unknown subscriber status"))
}

fn view(row: &SubscriberRow) -> anyhow::Result<SubscriberView> {
    let kind = kind_of(row)?;
    Ok(SubscriberView {
        id: stored_id(&row.id)?,
        kind,
        address: match kind {
            SubscriberKind::Email => row.address.clone(),
            SubscriberKind::Webhook => webhook_shown(&row.address),
        },
        status: status_of(row)?,
        failures: u32::try_from(row.failures).unwrap_or(u32::MAX),
        last_error: row.last_error.clone(),
        created_at: time_of(row.created_at),
        confirmed_at: row.confirmed_at.map(time_of),
    })
}

/// Where a subscription's links point, under central's public address.
pub fn links(base: &str, slug: &str, id: Uuid, token: &str) -> (String, String) {
    let at = format!("{base}/status/{slug}/subscription/{id}");
    (
        format!("{at}/confirm?token={token}"),
        format!("{at}/unsubscribe?token={token}"),
    )
}

/// A notice as `delivery`'s subscriber receives it, with its own links.
pub fn notice_for(
    delivery: &DueDelivery,
    page: &StatusPage,
    base: &str,
    key: &[u8],
) -> anyhow::Result<Notice> {
    let content: NoticeContent = serde_json::from_str(&delivery.notice.content)?;
    let id = stored_id(&delivery.subscriber.id)?;
    let (confirm, unsubscribe) = links(base, &page.slug, id, &subscriber_token(key, id));
    Ok(Notice {
        id: delivery.id.clone(),
        event: content.event,
        at: content.at,
        page: NoticePage {
            slug: page.slug.clone(),
            title: page.title.clone(),
            url: format!("{base}/status/{}", page.slug),
        },
        incident: content.incident,
        maintenance: content.maintenance,
        confirm_url: (content.event == NoticeEvent::SubscriptionConfirm).then_some(confirm),
        unsubscribe_url: unsubscribe,
    })
}

/// The notice of an incident's change.
pub(super) fn incident_notice(
    page_id: Uuid,
    event: NoticeEvent,
    incident: NoticeIncident,
    now: i64,
) -> PageNotice {
    PageNotice {
        id: Uuid::now_v7().to_string(),
        page_id: page_id.to_string(),
        content: NoticeContent {
            event,
            at: time_of(now),
            incident: Some(incident),
            maintenance: None,
        },
        created_at: now,
    }
}

/// The message that tells the page's owner a webhook subscriber was turned off, for the
/// default channels.
pub fn turned_off_message(
    page: &StatusPage,
    subscriber: &SubscriberRow,
    error: &str,
    now: i64,
) -> Notification {
    Notification {
        id: Uuid::nil(),
        event: NotificationEvent::SubscriberTurnedOff,
        monitor: None,
        poller: None,
        status: SubscriberStatus::TurnedOff.as_str().into(),
        previous_status: Some(subscriber.status.clone()),
        at: time_of(now),
        message: format!(
            "status page {}: the webhook subscriber {} was turned off after \
             {FAILURES_TO_TURN_OFF} failed deliveries in a row (the last: {error}); it is told \
             nothing more until it subscribes again",
            page.title,
            webhook_shown(&subscriber.address)
        ),
        reminder: false,
        locations: None,
        dependency: None,
        dependents: None,
    }
}

/// `message` queued for the default channels.
pub fn owner_rows(channels: &[Recipient], message: &Notification) -> Vec<QueuedNotification> {
    let defaults: Vec<&Recipient> = channels.iter().filter(|c| c.default).collect();
    crate::service::alerts::outbox_rows(&defaults, message, None, None)
}

/// The attempt to record for a failure; `tell` tells the page's owner when it turns the
/// subscriber off.
pub fn failure_attempt(
    failure: Failure,
    error: String,
    tell: Vec<QueuedNotification>,
) -> NoticeAttempt {
    match failure {
        Failure::Retry { at } => NoticeAttempt::Retry { error, at },
        Failure::GiveUp => NoticeAttempt::GiveUp { error },
        Failure::TurnOff => NoticeAttempt::TurnOff { error, tell },
    }
}

impl StatusPages {
    /// The key subscription links are signed with: made by the first replica that needs it.
    pub async fn subscriber_key(&self) -> ServiceResult<Vec<u8>> {
        // Read first: every visitor's link is checked with it, and making it takes the writer.
        if let Some(key) = self.store.setting(SUBSCRIBER_KEY_SETTING).await? {
            return Ok(key.into_bytes());
        }
        let key = self
            .store
            .setting_or_insert(SUBSCRIBER_KEY_SETTING, &crate::service::auth::new_secret())
            .await?;
        Ok(key.into_bytes())
    }

    /// Whether this central can take subscribers of each kind: it needs its public address
    /// for the links every notice carries, and a mail server for mail.
    pub fn takes(&self, kind: SubscriberKind) -> bool {
        self.public_url.is_some() && (kind == SubscriberKind::Webhook || self.sends_mail)
    }

    /// A visitor asks to subscribe `page`: a confirmation to the address unless it is
    /// subscribed already, was sent one lately, or had too many this hour. The same `Ok` in
    /// every case; only a malformed request or a kind this central cannot send is refused.
    pub async fn subscribe(
        &self,
        page: &StatusPage,
        request: &SubscribeRequest,
    ) -> ServiceResult<()> {
        let address = request.address()?;
        let kind = address.kind();
        if !self.takes(kind) {
            let field = match kind {
                SubscriberKind::Email => "email",
                SubscriberKind::Webhook => "webhook_url",
            };
            let why = if self.public_url.is_none() {
                "this central has no public address (CENTRAL_PUBLIC_URL) for the links every \
                 notice carries"
            } else {
                "this central sends no mail (CENTRAL_MAIL_URL); subscribe a webhook or read \
                 the Atom feed"
            };
            return Err(ValidationError::combination(field, why).into());
        }
        let now = self.now_ms();
        let page_id = page.id.to_string();
        let stored = self.store.subscriber_at(&page_id, address.text()).await?;
        let id = match &stored {
            Some(row) => {
                let status = status_of(row)?;
                let lately = row
                    .confirm_sent_at
                    .is_some_and(|at| now - at < CONFIRM_AGAIN_AFTER_MS);
                if status == SubscriberStatus::Confirmed
                    || (status == SubscriberStatus::Pending && lately)
                {
                    return Ok(());
                }
                stored_id(&row.id)?
            }
            None => {
                let (pending, all) = self.store.subscriber_counts(&page_id).await?;
                if pending >= MAX_PENDING || all >= MAX_SUBSCRIBERS {
                    tracing::warn!(page = %page.slug, pending, all, "a status page has as many subscriptions as it keeps; taking no more");
                    return Ok(());
                }
                Uuid::now_v7()
            }
        };
        let hour_ago = now - 3600 * 1000;
        if self
            .store
            .confirmations_sent_to(address.text(), hour_ago)
            .await?
            >= CONFIRMATIONS_PER_HOUR
        {
            return Ok(());
        }
        let secret = match &address {
            shared_proto::status_subscribers::Address::Webhook { secret, .. } => secret.clone(),
            shared_proto::status_subscribers::Address::Email(_) => None,
        };
        let row = SubscriberRow {
            id: id.to_string(),
            page_id: page_id.clone(),
            kind: kind.as_str().into(),
            address: address.text().to_string(),
            secret,
            status: SubscriberStatus::Pending.as_str().into(),
            failures: 0,
            last_error: None,
            confirm_sent_at: Some(now),
            created_at: stored.as_ref().map_or(now, |row| row.created_at),
            confirmed_at: None,
        };
        let content = NoticeContent {
            event: NoticeEvent::SubscriptionConfirm,
            at: time_of(now),
            incident: None,
            maintenance: None,
        };
        let notice = PageNotice {
            id: Uuid::now_v7().to_string(),
            page_id,
            content,
            created_at: now,
        };
        // Written only if no other request sent one meanwhile (`ask_confirmation` checks again
        // in its write), so requests at once cannot multiply confirmations.
        self.store
            .ask_confirmation(&row, &notice, now - CONFIRM_AGAIN_AFTER_MS)
            .await?;
        Ok(())
    }

    /// The subscription `id` of `page` if `token` opens it.
    pub async fn subscription(
        &self,
        page: &StatusPage,
        id: Uuid,
        token: &str,
    ) -> ServiceResult<Option<SubscriberView>> {
        let key = self.subscriber_key().await?;
        if !token_opens(&key, id, token) {
            return Ok(None);
        }
        match self.store.subscriber(&id.to_string()).await? {
            Some(row) if row.page_id == page.id.to_string() => Ok(Some(view(&row)?)),
            _ => Ok(None),
        }
    }

    /// Confirms the subscription `id` if `token` opens it; whether there was one to confirm
    /// (a confirmed one stays confirmed).
    pub async fn confirm_subscription(
        &self,
        page: &StatusPage,
        id: Uuid,
        token: &str,
    ) -> ServiceResult<bool> {
        let Some(found) = self.subscription(page, id, token).await? else {
            return Ok(false);
        };
        if found.status != SubscriberStatus::Confirmed {
            self.store
                .confirm_subscriber(&id.to_string(), self.now_ms())
                .await?;
        }
        Ok(true)
    }

    /// Ends the subscription `id` if `token` opens it; whether there was one.
    pub async fn unsubscribe(
        &self,
        page: &StatusPage,
        id: Uuid,
        token: &str,
    ) -> ServiceResult<bool> {
        if self.subscription(page, id, token).await?.is_none() {
            return Ok(false);
        }
        Ok(self
            .store
            .delete_subscriber(&page.id.to_string(), &id.to_string())
            .await?)
    }

    /// A page of a status page's subscribers, for its operators.
    pub async fn list_subscribers(
        &self,
        page_id: Uuid,
        cursor: &Cursor,
        limit: u32,
    ) -> ServiceResult<Page<SubscriberView>> {
        self.stored(page_id).await?;
        let rows = self
            .store
            .list_subscribers(&page_id.to_string(), cursor, limit)
            .await?;
        Ok(page(
            rows,
            limit,
            |row| Cursor {
                key: row.created_at,
                id: row.id.clone(),
            },
            view,
        )?)
    }

    /// Upkeep: forgets settled deliveries and their notices after `KEPT_MS`, and
    /// subscriptions nobody confirmed within it; how many rows.
    pub async fn prune_subscriptions(&self) -> ServiceResult<u64> {
        Ok(self
            .store
            .prune_subscriptions(self.now_ms() - KEPT_MS, PRUNE_BATCH)
            .await?)
    }

    /// An operator removes a subscriber.
    pub async fn delete_subscriber(&self, page_id: Uuid, id: Uuid) -> ServiceResult<()> {
        if self
            .store
            .delete_subscriber(&page_id.to_string(), &id.to_string())
            .await?
        {
            Ok(())
        } else {
            Err(ServiceError::NotFound(format!(
                "status page {page_id} has no subscriber {id}"
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use IncidentStatus::*;

    #[test]
    fn a_token_opens_its_own_subscription_only() {
        let (one, two) = (Uuid::new_v4(), Uuid::new_v4());
        let token = subscriber_token(b"key", one);
        assert!(token_opens(b"key", one, &token));
        assert!(!token_opens(b"key", two, &token));
        assert!(!token_opens(b"other key", one, &token));
        assert!(!token_opens(b"key", one, "not hex"));
        assert!(!token_opens(b"key", one, &token[..10]));
    }

    #[test]
    fn subscribers_hear_of_published_incidents_only() {
        assert_eq!(incident_event(false, Investigating, false, None), None);
        assert_eq!(
            incident_event(false, Investigating, false, Some(Identified)),
            None,
            "a draft's updates are not told"
        );
        assert_eq!(
            incident_event(false, Investigating, true, None),
            Some(NoticeEvent::IncidentCreated),
            "publishing a draft tells it"
        );
        assert_eq!(incident_event(true, Investigating, true, None), None);
        assert_eq!(
            incident_event(true, Investigating, true, Some(Identified)),
            Some(NoticeEvent::IncidentUpdated)
        );
        assert_eq!(
            incident_event(true, Monitoring, true, Some(Resolved)),
            Some(NoticeEvent::IncidentResolved)
        );
        assert_eq!(
            incident_event(true, Resolved, true, Some(Resolved)),
            Some(NoticeEvent::IncidentUpdated),
            "a note on a resolved incident does not resolve it again"
        );
        assert_eq!(
            incident_event(true, Investigating, false, Some(Identified)),
            None,
            "unpublished"
        );
    }

    #[test]
    fn webhooks_are_turned_off_after_failures_in_a_row_and_mail_never() {
        use SubscriberKind::{Email, Webhook};
        use SubscriberStatus::{Confirmed, Pending};
        let limit = i64::from(FAILURES_TO_TURN_OFF);
        let now = 1_000_000;
        assert_eq!(
            after_failure(Webhook, Confirmed, limit - 1, now, 0, now, 0.0),
            Failure::TurnOff
        );
        assert_eq!(
            after_failure(Webhook, Confirmed, limit - 2, now, 0, now, 0.0),
            Failure::Retry { at: now + 1_000 }
        );
        assert_eq!(
            after_failure(Email, Confirmed, limit * 10, now, 3, now, 0.0),
            Failure::Retry { at: now + 8_000 }
        );
        assert_eq!(
            after_failure(Email, Confirmed, 0, 0, 20, GIVE_UP_AFTER_MS, 0.0),
            Failure::GiveUp,
            "a day after the notice was made"
        );
        assert_eq!(
            after_failure(Webhook, Pending, limit * 10, now, 1, now, 0.0),
            Failure::Retry { at: now + 2_000 },
            "an unconfirmed webhook is never turned off (nobody is told of strangers' URLs)"
        );
        assert_eq!(
            after_failure(Webhook, Pending, 0, now, CONFIRMATION_TRIES - 1, now, 0.0),
            Failure::GiveUp
        );
    }
}
