//! Poller liveness: `online`, `degraded` or `offline` as derived from its heartbeats, and the
//! recorded changes with their `poller.offline`/`poller.online` notices. Reads what heartbeats
//! stored; never writes a heartbeat.

use shared_proto::notifications::{Notification, NotificationEvent, Subject};
use shared_proto::settings_api::PollerStatus;
use uuid::Uuid;

use super::super::{stored_id, time_of, App};
use crate::domain::Poller;
use crate::domain::Recipient;
use crate::service::error::ServiceResult;

/// A backlog above either figure marks a poller `degraded`.
const DEGRADED_QUEUE_DEPTH: i64 = 10_000;
const DEGRADED_QUEUE_AGE_MS: i64 = 15 * 60 * 1000;

impl App {
    /// Liveness as of `now`.
    pub fn poller_status(&self, poller: &Poller, now: i64) -> PollerStatus {
        let offline_after = self.limits.offline_after.as_millis() as i64;
        // Silence while central itself was down is not the poller's: it counts from central's
        // return at the earliest, so a central outage never makes healthy pollers look offline.
        match poller.last_heartbeat_at {
            Some(at) if now - at.max(self.cluster.watching_since()) <= offline_after => {}
            _ => return PollerStatus::Offline,
        }
        // A problem reported within the offline window keeps the poller degraded that long.
        let recent_error = poller
            .last_error_at
            .is_some_and(|at| now - at <= offline_after);
        let backlog_old = poller
            .oldest_queued_at
            .is_some_and(|oldest| now - oldest > DEGRADED_QUEUE_AGE_MS);
        if poller.queue_depth > DEGRADED_QUEUE_DEPTH || backlog_old || recent_error {
            PollerStatus::Degraded
        } else {
            PollerStatus::Online
        }
    }

    /// Records each poller whose liveness changed since last recorded (called by the liveness
    /// watcher); returns how many changed.
    pub async fn record_status_changes(&self) -> ServiceResult<usize> {
        let now = self.now_ms();
        let mut changed = 0;
        let mut defaults: Option<Vec<Recipient>> = None;
        for poller in self.store.all_pollers().await? {
            let now_status = self.poller_status(&poller, now);
            let recorded = poller.status;
            if recorded == Some(now_status) {
                continue;
            }
            let event = match (recorded, now_status) {
                (Some(PollerStatus::Online | PollerStatus::Degraded), PollerStatus::Offline) => {
                    Some(NotificationEvent::PollerOffline)
                }
                (Some(PollerStatus::Offline), PollerStatus::Online | PollerStatus::Degraded) => {
                    Some(NotificationEvent::PollerOnline)
                }
                _ => None,
            };
            let status = now_status.as_str();
            let notifications = match event {
                Some(event) => {
                    if defaults.is_none() {
                        defaults = Some(self.store.recipients().await?);
                    }
                    let targets: Vec<&Recipient> =
                        defaults.iter().flatten().filter(|c| c.default).collect();
                    let name = poller.alias.clone().unwrap_or_else(|| poller.name.clone());
                    let message = Notification {
                        id: Uuid::nil(),
                        event,
                        monitor: None,
                        poller: Some(Subject {
                            id: stored_id(&poller.id)?,
                            name: name.clone(),
                        }),
                        status: status.to_string(),
                        previous_status: recorded.map(|s| s.as_str().to_string()),
                        at: time_of(now),
                        message: match event {
                            NotificationEvent::PollerOffline => format!(
                                "poller {name} is offline: no heartbeat since {}",
                                poller
                                    .last_heartbeat_at
                                    .map_or("ever".into(), |t| time_of(t).to_rfc3339())
                            ),
                            _ => format!("poller {name} is back online"),
                        },
                        reminder: false,
                        locations: None,
                        dependency: None,
                        dependents: None,
                    };
                    super::super::alerts::outbox_rows(&targets, &message, None, Some(&poller.id))
                }
                None => Vec::new(),
            };
            if self
                .store
                .record_poller_status(&poller.id, recorded, now_status, now, &notifications)
                .await?
            {
                tracing::info!(poller_id = %poller.id, name = %poller.name, status, "poller status changed");
                changed += 1;
            }
        }
        Ok(changed)
    }
}
