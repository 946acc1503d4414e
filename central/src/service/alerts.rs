//! Notification rules: which status changes are told, when, and to which channels. `step` is
//! the pure rule for one monitor (property-tested); `evaluate_alerts` runs it over every
//! monitor's derived status and writes the changed alert states with their notifications
//! (the outbox) in one transaction; poller liveness changes are told from `pollers`.
//! Delivery is `notify`'s job, never this module's.

use std::collections::HashMap;

use shared_proto::notifications::{Notification, NotificationEvent, Subject};
use shared_proto::settings::MonitorSettings;
use shared_proto::settings_api::{MonitorStatusView, PollerStatus};
use shared_proto::CheckKind;
use uuid::Uuid;

use super::{now_ms, stored_id, time_of, App};
use crate::error::ApiResult;
use crate::store::{AlertStateRow, AlertUpdate, ChannelRow, MonitorRow, OutboxRow};

/// The longest a monitor's stale is held for placement to move it off an offline poller:
/// several liveness rounds (at most 5 s each) and a placement pass.
const FAILOVER_HOLD_MS: i64 = 30_000;

/// This many status changes within the flap window make a monitor flapping: its notifications
/// are held until it has changed fewer times within the window.
pub const FLAP_CHANGES: usize = 5;

/// The flap window of a monitor: twenty intervals, and at least ten minutes.
pub fn flap_window_ms(interval_ms: i64) -> i64 {
    interval_ms.saturating_mul(20).max(10 * 60_000)
}

/// What alerting remembers of a monitor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertState {
    pub status: String,
    pub since: i64,
    pub notified_status: Option<String>,
    pub notified_at: Option<i64>,
    /// When the monitor went from working to not or back, recently (within the flap window).
    pub changes: Vec<i64>,
}

/// A notification to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub event: NotificationEvent,
    pub previous: Option<String>,
    pub reminder: bool,
}

/// The rule parameters of one monitor.
#[derive(Debug, Clone, Copy)]
pub struct Rules {
    /// Remind this often while a problem lasts; 0 never.
    pub repeat_ms: i64,
    pub flap_window_ms: i64,
}

fn event_of(status: &str) -> Option<NotificationEvent> {
    match status {
        "down" => Some(NotificationEvent::MonitorDown),
        "degraded" => Some(NotificationEvent::MonitorDegraded),
        "stale" => Some(NotificationEvent::MonitorStale),
        "up" => Some(NotificationEvent::MonitorUp),
        // `pending` and `paused` say nothing about the target: nothing to tell.
        _ => None,
    }
}

/// One evaluation of one monitor: its new alert state and what to tell, if anything.
/// - Each change of status is remembered with its time (for flap damping).
/// - A status worth telling (`down`, `degraded`, `stale`, `up`) that differs from the last one
///   told is told, unless the monitor is flapping; `up` is told only to resolve a problem told
///   before (a new monitor coming up is no news), and `degraded` after `down` is a recovery
///   under way, told only by the `up` that ends it.
/// - While a problem lasts, it is told again every `repeat_ms` (a reminder).
pub fn step(
    previous: Option<&AlertState>,
    current: &str,
    now: i64,
    rules: Rules,
) -> (AlertState, Option<Notice>) {
    let mut state = previous.cloned().unwrap_or_else(|| AlertState {
        status: current.to_string(),
        since: now,
        notified_status: None,
        notified_at: None,
        changes: Vec::new(),
    });
    if state.status != current {
        // Flapping is going between working and not: a move among problems (`degraded` to
        // `down`) or out of `pending` is not a flap.
        let working = |status: &str| match status {
            "up" => Some(true),
            "down" | "degraded" | "stale" => Some(false),
            _ => None,
        };
        if let (Some(was), Some(is)) = (working(&state.status), working(current)) {
            if was != is {
                state.changes.push(now);
            }
        }
        state.status = current.to_string();
        state.since = now;
    }
    state
        .changes
        .retain(|at| now.saturating_sub(*at) < rules.flap_window_ms);
    let Some(event) = event_of(current) else {
        return (state, None);
    };
    let told = state.notified_status.as_deref();
    if told != Some(current) {
        let resolves = matches!(told, Some("down" | "degraded" | "stale"));
        if event == NotificationEvent::MonitorUp && !resolves {
            state.notified_status = Some(current.to_string());
            state.notified_at = Some(now);
            return (state, None);
        }
        // Part of a told outage recovering is no news: `up` resolves it when it is over.
        let improving = told == Some("down") && current == "degraded";
        if improving || state.changes.len() >= FLAP_CHANGES {
            return (state, None);
        }
        let previous = state.notified_status.replace(current.to_string());
        state.notified_at = Some(now);
        return (
            state,
            Some(Notice {
                event,
                previous,
                reminder: false,
            }),
        );
    }
    let due = state
        .notified_at
        .is_some_and(|at| now.saturating_sub(at) >= rules.repeat_ms);
    if event.is_problem() && rules.repeat_ms > 0 && due {
        state.notified_at = Some(now);
        return (
            state,
            Some(Notice {
                event,
                previous: Some(current.to_string()),
                reminder: true,
            }),
        );
    }
    (state, None)
}

fn state_of(row: &AlertStateRow) -> AlertState {
    AlertState {
        status: row.status.clone(),
        since: row.since,
        notified_status: row.notified_status.clone(),
        notified_at: row.notified_at,
        changes: serde_json::from_str(&row.changes).unwrap_or_default(),
    }
}

fn row_of(monitor_id: &str, state: &AlertState) -> AlertStateRow {
    AlertStateRow {
        monitor_id: monitor_id.to_string(),
        status: state.status.clone(),
        since: state.since,
        notified_status: state.notified_status.clone(),
        notified_at: state.notified_at,
        changes: serde_json::Value::from(state.changes.clone()).to_string(),
    }
}

fn repeat_ms(monitor: &MonitorRow) -> i64 {
    let settings: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&monitor.settings).unwrap_or_default();
    CheckKind::parse(&monitor.kind)
        .and_then(|kind| MonitorSettings::parse(kind, &settings).ok())
        .map_or(0, |s| s.common.repeat_interval_ms as i64)
}

/// One outbox row per channel for `message` (each with its own id, which the message carries).
pub(crate) fn outbox_rows(
    channels: &[&ChannelRow],
    message: &Notification,
    monitor_id: Option<&str>,
    poller_id: Option<&str>,
) -> anyhow::Result<Vec<OutboxRow>> {
    let created_at = message.at.timestamp_millis();
    channels
        .iter()
        .map(|channel| {
            let id = Uuid::now_v7();
            let payload = Notification {
                id,
                ..message.clone()
            };
            Ok(OutboxRow {
                id: id.to_string(),
                channel_id: channel.id.clone(),
                event: message.event.as_str().to_string(),
                monitor_id: monitor_id.map(str::to_string),
                poller_id: poller_id.map(str::to_string),
                payload: serde_json::to_string(&payload)?,
                status: "pending".into(),
                attempts: 0,
                last_error: None,
                created_at,
                next_attempt_at: Some(created_at),
                delivered_at: None,
            })
        })
        .collect()
}

fn message_for(
    monitor: &MonitorRow,
    status: &MonitorStatusView,
    notice: &Notice,
    now: i64,
) -> anyhow::Result<Notification> {
    let what = match notice.event {
        NotificationEvent::MonitorDown => "is down",
        NotificationEvent::MonitorDegraded => "is degraded",
        NotificationEvent::MonitorStale => "is stale: nobody is checking it",
        NotificationEvent::MonitorUp => "is up again",
        _ => "changed",
    };
    let detail = status
        .reason
        .clone()
        .or_else(|| status.message.clone().filter(|m| !m.is_empty()));
    let mut message = format!("{} {what}", monitor.name);
    if notice.reminder {
        message.push_str(" (still)");
    }
    if let Some(detail) = detail {
        message.push_str(": ");
        message.push_str(&detail);
    }
    Ok(Notification {
        id: Uuid::nil(),
        event: notice.event,
        monitor: Some(Subject {
            id: stored_id(&monitor.id)?,
            name: monitor.name.clone(),
        }),
        poller: None,
        status: status.status.as_str().to_string(),
        previous_status: notice.previous.clone(),
        at: time_of(now),
        message,
        reminder: notice.reminder,
        locations: (!status.locations.is_empty()).then(|| status.locations.clone()),
    })
}

impl App {
    /// Evaluates every monitor's alerting once; returns how many notifications it queued.
    pub async fn evaluate_alerts(&self) -> ApiResult<usize> {
        let now = now_ms();
        // Read before the monitors and their statuses: when placement's last look is after a
        // poller went offline, the moves it made are in what this round reads. Read after
        // them, a look that finished in between would end the hold while this round still
        // sees the monitors on the lost poller (and tell each of them `stale`).
        let placement_checked = self.placement_checked_at();
        let monitors = self.store.all_monitors().await?;
        if monitors.is_empty() {
            return Ok(0);
        }
        let statuses = self.statuses_of(&monitors).await?;
        let states: HashMap<String, AlertStateRow> = self
            .store
            .alert_states()
            .await?
            .into_iter()
            .map(|s| (s.monitor_id.clone(), s))
            .collect();
        let channels = self.store.all_channels().await?;
        let pollers: HashMap<String, crate::store::PollerRow> = self
            .store
            .all_pollers()
            .await?
            .into_iter()
            .map(|p| (p.id.clone(), p))
            .collect();
        let mut updates = Vec::new();
        for (monitor, status) in monitors.iter().zip(&statuses) {
            let stored = states.get(&monitor.id);
            let previous = stored.map(state_of);
            let mut current = status.status.as_str();
            // Right after central (all of it) was down, results are overdue because nobody
            // could upload them, not because nobody checks: no `stale` until agents had an
            // interval and its grace to deliver. (A poller known offline is real news: its own
            // offline rule already counts from central's return.)
            let grace =
                shared_proto::monitor::staleness_grace_ms(monitor.interval_ms.max(0) as u64) as i64;
            let poller_offline = status
                .poller_id
                .and_then(|id| pollers.get(&id.to_string()))
                .is_some_and(|p| self.poller_status(p, now) == PollerStatus::Offline);
            let catching_up = now - self.watching_since() < monitor.interval_ms + grace;
            // A lost poller is one notice (`poller.offline`), not one per monitor: until
            // placement has seen the poller offline and moved what can fail over, its monitors'
            // `stale` waits. Moved, they have an interval to report from their new poller; one
            // that could not move is told at once after that.
            let failover_pending = status
                .poller_id
                .and_then(|id| pollers.get(&id.to_string()))
                .is_some_and(|p| {
                    let offline_since = p.last_heartbeat_at.unwrap_or(0).max(self.watching_since())
                        + self.offline_after.as_millis() as i64;
                    poller_offline
                        && offline_since >= placement_checked
                        // Never longer than placement needs at worst, even if it keeps failing.
                        && now < offline_since.saturating_add(FAILOVER_HOLD_MS)
                });
            if current == "stale" && ((catching_up && !poller_offline) || failover_pending) {
                if let Some(previous) = &previous {
                    current = previous.status.as_str();
                }
            }
            let rules = Rules {
                repeat_ms: repeat_ms(monitor),
                flap_window_ms: flap_window_ms(monitor.interval_ms),
            };
            let (next, notice) = step(previous.as_ref(), current, now, rules);
            if previous.as_ref() == Some(&next) {
                continue;
            }
            let notifications = match &notice {
                Some(notice) => {
                    let listed = monitor.channel_ids()?;
                    let targets: Vec<&ChannelRow> = channels
                        .iter()
                        .filter(|c| c.is_default || listed.contains(&c.id))
                        .collect();
                    let message = message_for(monitor, status, notice, now)?;
                    tracing::info!(monitor_id = %monitor.id, event = notice.event.as_str(),
                        channels = targets.len(), reminder = notice.reminder, "notifying");
                    outbox_rows(&targets, &message, Some(&monitor.id), None)?
                }
                None => Vec::new(),
            };
            updates.push(AlertUpdate {
                state: row_of(&monitor.id, &next),
                replaces: stored.cloned(),
                notifications,
            });
        }
        let queued: usize = updates.iter().map(|u| u.notifications.len()).sum();
        self.store.record_alerts(&updates).await?;
        Ok(queued)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const RULES: Rules = Rules {
        repeat_ms: 0,
        flap_window_ms: 600_000,
    };

    fn run(statuses: &[&str], rules: Rules, gap: i64) -> Vec<Notice> {
        let mut state = None;
        let mut told = Vec::new();
        for (i, status) in statuses.iter().enumerate() {
            let (next, notice) = step(state.as_ref(), status, i as i64 * gap, rules);
            told.extend(notice);
            state = Some(next);
        }
        told
    }

    #[test]
    fn down_then_up_is_told_once_each_and_a_first_up_is_no_news() {
        let told = run(&["pending", "up", "up", "down", "down", "up"], RULES, 5_000);
        let events: Vec<_> = told.iter().map(|n| n.event).collect();
        assert_eq!(
            events,
            [NotificationEvent::MonitorDown, NotificationEvent::MonitorUp]
        );
        assert_eq!(told[1].previous.as_deref(), Some("down"));
    }

    #[test]
    fn degraded_then_down_then_up() {
        let told = run(&["up", "degraded", "down", "up"], RULES, 5_000);
        let events: Vec<_> = told.iter().map(|n| n.event).collect();
        assert_eq!(
            events,
            [
                NotificationEvent::MonitorDegraded,
                NotificationEvent::MonitorDown,
                NotificationEvent::MonitorUp
            ]
        );
    }

    #[test]
    fn a_recovery_through_degraded_is_told_once_as_up() {
        let told = run(&["up", "down", "degraded", "up"], RULES, 5_000);
        let events: Vec<_> = told.iter().map(|n| n.event).collect();
        assert_eq!(
            events,
            [NotificationEvent::MonitorDown, NotificationEvent::MonitorUp]
        );
    }

    #[test]
    fn reminders_repeat_while_down() {
        let rules = Rules {
            repeat_ms: 60_000,
            ..RULES
        };
        let told = run(&["up", "down", "down", "down", "down", "up"], rules, 30_000);
        let reminders = told.iter().filter(|n| n.reminder).count();
        assert_eq!(
            told.len(),
            3,
            "down, one reminder a minute later, up: {told:?}"
        );
        assert_eq!(reminders, 1);
    }

    #[test]
    fn flapping_is_held_then_the_settled_status_is_told() {
        let mut statuses = vec!["up"];
        for _ in 0..6 {
            statuses.extend(["down", "up"]);
        }
        let told = run(&statuses, RULES, 5_000);
        assert!(told.len() < 5, "flapping is damped: {told:?}");
        // Quiet for a whole window, then down: told again.
        let mut state = None;
        for (i, status) in statuses.iter().enumerate() {
            state = Some(step(state.as_ref(), status, i as i64 * 5_000, RULES).0);
        }
        let later = 13 * 5_000 + RULES.flap_window_ms + 1;
        let (_, notice) = step(state.as_ref(), "down", later, RULES);
        assert_eq!(
            notice.map(|n| n.event),
            Some(NotificationEvent::MonitorDown)
        );
    }

    fn status() -> impl Strategy<Value = &'static str> {
        prop_oneof![
            Just("pending"),
            Just("up"),
            Just("down"),
            Just("degraded"),
            Just("stale"),
            Just("paused")
        ]
    }

    proptest! {
        /// Without reminders, two notices in a row never tell the same status, and an `up`
        /// notice always resolves a problem told before it.
        #[test]
        fn notices_alternate_and_up_resolves(statuses in proptest::collection::vec(status(), 1..60)) {
            let told = run(&statuses, RULES, 60_000);
            for pair in told.windows(2) {
                prop_assert_ne!(pair[0].event, pair[1].event);
            }
            for notice in &told {
                if notice.event == NotificationEvent::MonitorUp {
                    prop_assert!(matches!(notice.previous.as_deref(), Some("down" | "degraded" | "stale")));
                }
            }
        }

        /// A problem that stays put long enough is always told in the end (flapping only delays).
        #[test]
        fn a_settled_problem_is_always_told(statuses in proptest::collection::vec(status(), 0..40), last in prop_oneof![Just("down"), Just("degraded"), Just("stale")]) {
            let mut state = None;
            let mut t = 0;
            for status in &statuses {
                state = Some(step(state.as_ref(), status, t, RULES).0);
                t += 5_000;
            }
            for _ in 0..3 {
                state = Some(step(state.as_ref(), last, t, RULES).0);
                t += RULES.flap_window_ms;
            }
            let told = state.and_then(|s| s.notified_status);
            // A `degraded` after a told `down` is a recovery under way: `down` stays told.
            let recovering = last == "degraded" && told.as_deref() == Some("down");
            prop_assert!(recovering || told.as_deref() == Some(last), "told {:?}", told);
        }
    }
}
