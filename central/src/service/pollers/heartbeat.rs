//! Heartbeats: what a poller reports of itself (version, capabilities within its limit,
//! backlog, engine health and events), recorded as it arrives. Liveness is derived from it in
//! `liveness`; nothing here places monitors beyond asking for a placement pass.

use std::time::Instant;

use shared_proto::poller_api::{EngineEvent, HeartbeatRequest, HeartbeatResponse};
use shared_proto::settings::MAX_DELIBERATE_DELAY_MS;

use super::super::{stored_id, time_of, App};
use crate::domain::Poller;
use crate::service::error::ServiceResult;
use crate::store::{HeartbeatUpdate, Reach};
use shared_proto::settings_api::PollerStatus;

impl App {
    pub async fn heartbeat(
        &self,
        poller: &Poller,
        mut beat: HeartbeatRequest,
    ) -> ServiceResult<HeartbeatResponse> {
        let poller_id = stored_id(&poller.id)?;
        self.limits.poller.heartbeat(poller_id, Instant::now())?;
        beat.validate_and_trim()?;
        let now = self.now_ms();
        let (mut capabilities, refused) = within_limit(poller, &beat.capabilities);
        if capabilities != poller.capabilities
            && !self
                .limits
                .poller
                .capability_change(poller_id, Instant::now())
        {
            // Applied by a later heartbeat (each one carries the capabilities again).
            tracing::debug!(poller_id = %poller.id, "capability change deferred: changed within the last minute");
            capabilities = poller.capabilities.clone();
        }
        let was_online = self.poller_status(poller, now) != PollerStatus::Offline;
        let capabilities_changed = capabilities != poller.capabilities;
        for event in &mut beat.events {
            clamp_event_times(event, now);
        }
        self.store
            .insert_engine_events(&poller.id, &beat.events)
            .await?;
        let error = refused.or_else(|| beat.errors.last().map(|e| e.chars().take(500).collect()));
        self.store
            .record_heartbeat(
                &poller.id,
                &HeartbeatUpdate {
                    at: now,
                    version: beat.version,
                    capabilities,
                    queue_depth: beat.queue_depth.min(i64::MAX as u64) as i64,
                    oldest_queued_at: beat.oldest_queued_at.map(|t| t.timestamp_millis()),
                    dropped_results: beat.dropped_results.min(i64::MAX as u64) as i64,
                    held_results: beat.held_results.min(i64::MAX as u64) as i64,
                    assignment_version: beat.assignment_version,
                    scheduler_health: beat
                        .scheduler
                        .as_ref()
                        .and_then(|s| serde_json::to_string(s).ok()),
                    came_online: !was_online,
                    error,
                },
            )
            .await?;
        if !was_online || capabilities_changed {
            self.queue_placement(std::slice::from_ref(&poller.id), Reach::Could)
                .await?;
        }
        Ok(HeartbeatResponse {
            assignment_version: self.store.assignment_version().await?,
            server_time: time_of(now),
            last_upload_at: Some(poller.last_upload_at.map(time_of)),
        })
    }
}

/// The capabilities a heartbeat sets (none reported: unchanged), kept within the poller's
/// limit from its registration token, and the error that names what was left out. Left out,
/// not refused: the heartbeat still says the poller is alive, and the error marks it
/// `degraded` for as long as it keeps asking.
fn within_limit(poller: &Poller, reported: &[String]) -> (Vec<String>, Option<String>) {
    if reported.is_empty() {
        return (poller.capabilities.clone(), None);
    }
    let Some(limit) = &poller.capability_limit else {
        return (reported.to_vec(), None);
    };
    let (within, outside): (Vec<&String>, Vec<&String>) =
        reported.iter().partition(|c| limit.contains(c));
    let within: Vec<String> = within.into_iter().cloned().collect();
    let refused = (!outside.is_empty()).then(|| {
        let outside: Vec<&str> = outside.iter().map(|c| c.as_str()).collect();
        format!(
            "capabilities outside its registration token's limit ({}) are ignored: {}",
            limit.join(", "),
            outside.join(", ")
        )
    });
    (within, refused)
}

/// An agent's clock is its own: an event is never stored as happening after central heard of
/// it, and the next check it announces is at most the longest delay any setting allows
/// after it (a later one would hide a silent monitor from staleness).
fn clamp_event_times(event: &mut EngineEvent, now_ms: i64) {
    let now = time_of(now_ms);
    event.at = event.at.min(now);
    let latest = event.at + chrono::Duration::milliseconds(MAX_DELIBERATE_DELAY_MS as i64);
    event.next_due_at = event.next_due_at.map(|due| due.min(latest));
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn poller(capabilities: &[&str], limit: Option<&[&str]>) -> Poller {
        Poller {
            capabilities: list(capabilities),
            capability_limit: limit.map(list),
            ..Poller::default()
        }
    }

    fn list(items: &[&str]) -> Vec<String> {
        items.iter().map(|c| c.to_string()).collect()
    }

    #[test]
    fn capabilities_outside_the_limit_are_left_out_and_named() {
        let limited = poller(&["http", "tcp"], Some(&["http", "tcp", "dns"]));
        assert_eq!(
            within_limit(&limited, &list(&["http", "dns"])),
            (list(&["http", "dns"]), None)
        );
        let (kept, refused) = within_limit(&limited, &list(&["http", "icmp", "internal"]));
        assert_eq!(kept, ["http"]);
        let refused = refused.unwrap();
        assert!(refused.contains("icmp, internal"), "{refused}");
        assert_eq!(
            within_limit(&limited, &[]),
            (list(&["http", "tcp"]), None),
            "none reported: unchanged"
        );
        let free = poller(&["http"], None);
        assert_eq!(
            within_limit(&free, &list(&["http", "icmp"])),
            (list(&["http", "icmp"]), None)
        );
    }

    #[test]
    fn event_times_are_clamped_to_what_central_can_believe() {
        let now = 1_800_000_000_000;
        let mut event = EngineEvent {
            id: None,
            monitor_id: Uuid::nil(),
            at: time_of(now + 3_600_000),
            kind: shared_proto::poller_api::EventKind::Resumed,
            next_due_at: Some(time_of(now + 400 * 86_400_000)),
        };
        clamp_event_times(&mut event, now);
        assert_eq!(event.at, time_of(now));
        assert_eq!(
            event.next_due_at,
            Some(time_of(now + MAX_DELIBERATE_DELAY_MS as i64))
        );
        let mut honest = EngineEvent {
            at: time_of(now - 5_000),
            next_due_at: Some(time_of(now + 30_000)),
            ..event
        };
        let before = honest.clone();
        clamp_event_times(&mut honest, now);
        assert_eq!(honest, before);
    }
}
