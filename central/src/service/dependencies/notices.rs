//! Notices of dependencies' changes (`dependency.down`, `dependency.up`) for monitors that ask
//! for them (`settings.notify_dependencies`). Ingest marks a change that calls for one
//! (`rules::notice_of`) in the result's own transaction; the lease holder's alerting duty
//! calls `send_dependency_notices`, which turns each marked change into one outbox row per
//! channel of its monitor and clears the mark in one transaction (compare-and-set): each
//! notice is queued exactly once, and a crash between the two loses none.
//!
//! Alertmanager channels are left out: Alertmanager's alerts end unless re-sent, and only
//! monitors' and pollers' open problems are re-sent (`duties::delivery`).
//!
//! Cost: the marked changes (a partial index, empty when there is nothing to tell), their
//! monitors, and the channels once per round that has some. Must not: deliver (`notify`).

use std::collections::HashMap;

use shared_proto::notifications::{
    ChannelKind, DependencySubject, Notification, NotificationEvent, Subject,
};
use uuid::Uuid;

use super::super::alerts::outbox_rows;
use super::super::channels::tells;
use super::super::{time_of, App};
use crate::domain::{Monitor, Recipient};
use crate::store::PendingNoticeRow;

/// The most changes one round sends; a full round is followed by another at once.
const ROUND: u32 = 500;

impl App {
    /// Queues the notices of dependencies' changes; returns how many notifications it queued.
    pub async fn send_dependency_notices(&self) -> anyhow::Result<usize> {
        let mut queued = 0;
        loop {
            let pending = self.store.pending_dependency_notices(ROUND).await?;
            if pending.is_empty() {
                break;
            }
            let full = pending.len() == ROUND as usize;
            let mut ids: Vec<String> = pending.iter().map(|p| p.monitor_id.clone()).collect();
            ids.sort_unstable();
            ids.dedup();
            let monitors: HashMap<String, Monitor> = self
                .store
                .monitors_by_ids(&ids)
                .await?
                .into_iter()
                .map(|m| (m.id.clone(), m))
                .collect();
            let channels = self.store.recipients().await?;
            let mut notices = Vec::with_capacity(pending.len());
            for change in &pending {
                // A deleted monitor has nobody to tell: the mark is cleared all the same.
                let rows = match monitors.get(&change.monitor_id) {
                    Some(monitor) => {
                        let targets: Vec<&Recipient> = channels
                            .iter()
                            .filter(|c| c.kind != Some(ChannelKind::Alertmanager))
                            .filter(|c| tells(c, monitor))
                            .collect();
                        let message = message_of(monitor, change)?;
                        outbox_rows(&targets, &message, Some(&monitor.id), None)
                    }
                    None => Vec::new(),
                };
                notices.push((change.id.clone(), rows));
            }
            let sent = self.store.queue_dependency_notices(&notices).await?;
            if sent > 0 {
                tracing::info!(notifications = sent, "dependency notices queued");
                self.cluster.wakes.delivery.notify_one();
            }
            queued += sent;
            if !full {
                break;
            }
        }
        Ok(queued)
    }
}

fn message_of(monitor: &Monitor, change: &PendingNoticeRow) -> anyhow::Result<Notification> {
    let down = change.notice == "dependency.down";
    let region = (!change.region.is_empty()).then(|| change.region.clone());
    let from = region
        .as_deref()
        .map_or(String::new(), |r| format!(" (read from {r})"));
    let message = if down {
        let reason = change
            .error
            .as_deref()
            .map_or(String::new(), |e| format!(": {e}"));
        format!(
            "{}: dependency {} is unhealthy{reason}{from}",
            monitor.name, change.name
        )
    } else {
        format!(
            "{}: dependency {} is healthy again{from}",
            monitor.name, change.name
        )
    };
    Ok(Notification {
        id: Uuid::nil(),
        event: if down {
            NotificationEvent::DependencyDown
        } else {
            NotificationEvent::DependencyUp
        },
        monitor: Some(Subject {
            id: monitor.id.parse()?,
            name: monitor.name.clone(),
        }),
        poller: None,
        status: change.state.clone(),
        previous_status: change.previous.clone(),
        at: time_of(change.at),
        message,
        reminder: false,
        locations: None,
        dependency: Some(DependencySubject {
            name: change.name.clone(),
            region,
            error: down.then(|| change.error.clone()).flatten(),
        }),
        dependents: None,
    })
}
