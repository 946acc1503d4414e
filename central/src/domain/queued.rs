//! A notification queued for one channel: the message, whom it is about, and the channel.
//! What alerting, poller liveness, dependency notices and status pages hand the store to
//! write in the transaction that decided it (the outbox); the store keeps its delivery
//! bookkeeping. Must not: hold a rule or deliver.

use shared_proto::notifications::Notification;
use uuid::Uuid;

#[derive(Debug, Clone, PartialEq)]
pub struct QueuedNotification {
    /// The message's own id (`message.id`), which its receiver sees.
    pub id: String,
    pub channel_id: String,
    pub monitor_id: Option<String>,
    pub poller_id: Option<String>,
    pub message: Notification,
}

impl QueuedNotification {
    /// `message` for `channel_id`, with an id of its own (each channel's copy is its own
    /// message).
    pub fn new(
        channel_id: &str,
        message: &Notification,
        monitor_id: Option<&str>,
        poller_id: Option<&str>,
    ) -> QueuedNotification {
        let id = Uuid::now_v7();
        QueuedNotification {
            id: id.to_string(),
            channel_id: channel_id.to_string(),
            monitor_id: monitor_id.map(str::to_string),
            poller_id: poller_id.map(str::to_string),
            message: Notification {
                id,
                ..message.clone()
            },
        }
    }
}
