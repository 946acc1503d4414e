//! Notification channels: the operator's CRUD and test sends, and the delivery log.

use std::sync::Arc;

use shared_proto::notifications::{
    ChannelPatch, ChannelSpec, ChannelTestResult, DeliveryStatus, Notification, NotificationEvent,
    NotificationView,
};
use shared_proto::settings_api::Page;
use shared_proto::ValidationError;
use uuid::Uuid;

use super::clock::Clock;
use super::tokens::{page, page_of};
use super::{stored_id, time_of, App};
use crate::domain::{Channel, Monitor, Recipient};
use crate::notify::Notifier;
use crate::service::error::{ServiceError, ServiceResult};
use crate::store::{ChannelRead, Cursor, OutboxRow, Store};

pub use shared_proto::notifications::ChannelView;

/// Whether `channel` is told of `monitor`'s notices: it is a default channel, the monitor
/// lists it, or the monitor carries one of its tags.
pub fn tells(channel: &Recipient, monitor: &Monitor) -> bool {
    channel.default
        || monitor.channel_ids.contains(&channel.id)
        || monitor.tags.iter().any(|t| channel.tags.contains(t))
}

/// Notification channels and what was sent through them: the operators' CRUD, test sends, the outbox's views.
#[derive(Clone)]
pub struct Channels {
    store: Arc<Store>,
    clock: Clock,
    notifier: Notifier,
}

impl App {
    /// The channels service, on this central's parts.
    pub fn channels(&self) -> Channels {
        Channels {
            store: self.store.clone(),
            clock: self.clock.clone(),
            notifier: self.notifier.clone(),
        }
    }
}

impl axum::extract::FromRef<std::sync::Arc<App>> for Channels {
    fn from_ref(app: &std::sync::Arc<App>) -> Self {
        app.channels()
    }
}

impl Channels {
    fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }
    pub async fn create_channel(&self, spec: ChannelSpec) -> ServiceResult<ChannelView> {
        spec.validate()?;
        check_template(&spec)?;
        let now = self.now_ms();
        let channel = channel_of(Uuid::new_v4(), spec, now, now);
        self.store.insert_channel(&channel).await?;
        Ok(channel_view(&channel)?)
    }

    pub async fn get_channel(&self, id: Uuid) -> ServiceResult<ChannelView> {
        Ok(channel_view(&self.channel(id).await?)?)
    }

    async fn channel(&self, id: Uuid) -> ServiceResult<Channel> {
        self.store
            .channel(&id.to_string())
            .await?
            .ok_or_else(|| ServiceError::NotFound(format!("no notification channel with id {id}")))
    }

    pub async fn list_channels(
        &self,
        after: &Cursor,
        limit: u32,
    ) -> ServiceResult<Page<ChannelView>> {
        Ok(page_of(
            self.store.list_channels(after, limit).await?,
            channel_view,
        )?)
    }

    pub async fn update_channel(
        &self,
        id: Uuid,
        patch: ChannelPatch,
    ) -> ServiceResult<ChannelView> {
        patch.validate_fields()?;
        let current = self.channel(id).await?;
        let stored = current.spec;
        let mut spec = stored.clone();
        spec.apply(patch.clone());
        super::channel_secrets::keep(&mut spec, &stored, &patch)?;
        spec.validate()
            .map_err(|e| super::patch_does_not_fit(e.into()))?;
        check_template(&spec)?;
        let channel = channel_of(id, spec, current.created_at, self.now_ms());
        if !self.store.update_channel(&channel).await? {
            return Err(ServiceError::NotFound(format!(
                "no notification channel with id {id}"
            )));
        }
        Ok(channel_view(&channel)?)
    }

    pub async fn delete_channel(&self, id: Uuid) -> ServiceResult<()> {
        if self.store.delete_channel(&id.to_string()).await? {
            Ok(())
        } else {
            Err(ServiceError::NotFound(format!(
                "no notification channel with id {id}"
            )))
        }
    }

    /// Sends a `test` message now, outside the outbox, and says how it went.
    pub async fn test_channel(&self, id: Uuid) -> ServiceResult<ChannelTestResult> {
        // One that does not read is tried all the same, and says why it cannot be sent.
        let channel = match self.store.channel_to_deliver(&id.to_string()).await? {
            ChannelRead::Found(channel) => Ok(*channel),
            ChannelRead::Unreadable(why) => Err(why),
            ChannelRead::Gone => {
                return Err(ServiceError::NotFound(format!(
                    "no notification channel with id {id}"
                )))
            }
        };
        let name = channel
            .as_ref()
            .map_or("(unreadable)", |c| c.spec.name.as_str());
        let message = Notification {
            id: Uuid::now_v7(),
            event: NotificationEvent::Test,
            monitor: None,
            poller: None,
            status: "test".into(),
            previous_status: None,
            at: time_of(self.now_ms()),
            message: format!("a test of the notification channel {name}"),
            reminder: false,
            locations: None,
            dependency: None,
            dependents: None,
        };
        let outcome = match &channel {
            Ok(channel) => self.notifier.deliver(&channel.spec, &message).await,
            Err(why) => Err(format!("the stored channel is unreadable: {why}")),
        };
        Ok(ChannelTestResult {
            delivered: outcome.is_ok(),
            error: outcome.err(),
        })
    }

    /// The newest `limit` deliveries, newest first.
    pub async fn recent_notifications(&self, limit: u32) -> ServiceResult<Vec<NotificationView>> {
        let rows = self.store.recent_notifications(limit).await?;
        Ok(rows
            .iter()
            .map(notification_view)
            .collect::<anyhow::Result<_>>()?)
    }

    /// The delivery log, oldest first.
    pub async fn list_notifications(
        &self,
        monitor_id: Option<Uuid>,
        channel_id: Option<Uuid>,
        after: &Cursor,
        limit: u32,
    ) -> ServiceResult<Page<NotificationView>> {
        let rows = self
            .store
            .list_notifications(
                monitor_id.map(|m| m.to_string()).as_deref(),
                channel_id.map(|c| c.to_string()).as_deref(),
                after,
                limit,
            )
            .await?;
        Ok(page(
            rows,
            limit,
            |r| Cursor {
                key: r.created_at,
                id: r.id.clone(),
            },
            notification_view,
        )?)
    }
}

/// A webhook's template names only fields a notification has (the rest of a channel is
/// `ChannelSpec::validate`'s). A rule no pattern states: `422 invalid_value`.
fn check_template(spec: &ChannelSpec) -> Result<(), ValidationError> {
    match &spec.template {
        Some(template) => crate::notify::template::check(template)
            .map_err(|e| ValidationError::value("template", e)),
        None => Ok(()),
    }
}

/// A channel as written: its name trimmed.
fn channel_of(id: Uuid, spec: ChannelSpec, created_at: i64, updated_at: i64) -> Channel {
    Channel {
        id: id.to_string(),
        spec: ChannelSpec {
            name: spec.name.trim().to_string(),
            ..spec
        },
        created_at,
        updated_at,
    }
}

/// A channel as views show it: its credentials as `HIDDEN` (`shared_proto::redaction::hide_channel`).
fn channel_view(channel: &Channel) -> anyhow::Result<ChannelView> {
    let spec = channel.spec.clone();
    let mut view = ChannelView {
        id: stored_id(&channel.id)?,
        name: spec.name,
        kind: spec.kind,
        url: spec.url,
        has_secret: spec.secret.is_some(),
        headers: spec.headers,
        default: spec.default,
        tags: spec.tags,
        from: spec.from,
        to: spec.to,
        urls: spec.urls,
        format: spec.format,
        template: spec.template,
        chat_id: spec.chat_id,
        user_key: spec.user_key,
        topic: spec.topic,
        created_at: time_of(channel.created_at),
        updated_at: time_of(channel.updated_at),
    };
    shared_proto::redaction::hide_channel(&mut view);
    Ok(view)
}

fn notification_view(row: &OutboxRow) -> anyhow::Result<NotificationView> {
    let event: NotificationEvent =
        serde_json::from_value(serde_json::Value::String(row.event.clone()))?;
    let status = DeliveryStatus::parse(&row.status)
        .ok_or_else(|| anyhow::anyhow!("a stored delivery status `{}`", row.status))?;
    Ok(NotificationView {
        id: stored_id(&row.id)?,
        channel_id: stored_id(&row.channel_id)?,
        event,
        monitor_id: row.monitor_id.as_deref().map(stored_id).transpose()?,
        poller_id: row.poller_id.as_deref().map(stored_id).transpose()?,
        status,
        attempts: row.attempts.clamp(0, i64::from(u32::MAX)) as u32,
        last_error: row.last_error.clone(),
        created_at: time_of(row.created_at),
        next_attempt_at: row.next_attempt_at.map(time_of),
        delivered_at: row.delivered_at.map(time_of),
    })
}
