//! One look of alerting at the monitors due (`store::due`): their derived status, held while
//! central catches up after an outage or placement moves them off a lost poller, moved through
//! `step`; the changed alert states, their notifications and each monitor's next look are
//! written in one transaction, with whether the monitor is steady (`Look::steady`: results
//! that only confirm it then need no look). Runs on the lease holder
//! (`duties::alerting`).
//!
//! Cost: proportional to the monitors due (changed, or reaching an instant `next_look` or
//! `status::changes_at` named), plus the pollers they run on, and the channels once in a round
//! that sends a notice. Must not: read every monitor, or deliver anything (`notify`).

use std::collections::HashMap;

use shared_proto::maintenance::MaintenanceNotify;
use shared_proto::notifications::{Notification, NotificationEvent, Subject};
use shared_proto::settings::MonitorSettings;
use shared_proto::settings_api::{LocationStatus, MonitorStatus, MonitorStatusView, PollerStatus};
use uuid::Uuid;

use super::{flap_window_ms, next_look, step, Notice, Rules};
use crate::domain::{Monitor, Poller, QueuedNotification, Recipient};
use crate::service::channels::tells;
use crate::service::error::ServiceResult;
use crate::service::maintenance::{stopping, STOPPED_PREFIX};
use crate::service::parents::Behind;
use crate::service::push;
use crate::service::status::Lateness;
use crate::service::status_pages::auto::Told;
use crate::service::statuses::Derived;
use crate::service::{stored_id, time_of, App};
use crate::store::{AlertUpdate, Look, StoredAlertState};

/// The longest a monitor's stale is held for placement to move it off an offline poller:
/// several liveness rounds (at most 5 s each) and a placement pass.
const FAILOVER_HOLD_MS: i64 = 30_000;

/// The most monitors one round reads; a round that reads this many is followed by another.
const ROUND: u32 = 2_000;

fn repeat_ms(monitor: &Monitor) -> i64 {
    MonitorSettings::parse(monitor.kind, &monitor.settings)
        .map_or(0, |s| s.common.repeat_interval_ms as i64)
}

/// `message` queued for each channel (each copy with its own id, which the message carries).
pub(crate) fn outbox_rows(
    channels: &[&Recipient],
    message: &Notification,
    monitor_id: Option<&str>,
    poller_id: Option<&str>,
) -> Vec<QueuedNotification> {
    channels
        .iter()
        .map(|channel| QueuedNotification::new(&channel.id, message, monitor_id, poller_id))
        .collect()
}

/// The notification of `notice`, for a monitor whose status alerting took as `current` (its
/// shown status, or `up` for a recovery told inside a maintenance window).
fn message_for(
    monitor: &Monitor,
    status: &MonitorStatusView,
    current: MonitorStatus,
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
        status: current.as_str().to_string(),
        previous_status: notice.previous.map(|s| s.as_str().to_string()),
        at: time_of(now),
        message,
        reminder: notice.reminder,
        locations: (!status.locations.is_empty()).then(|| status.locations.clone()),
        dependency: None,
        dependents: None,
    })
}

impl App {
    /// A problem of a monitor others depend on names them: their own problems are held
    /// behind it (`parents`). Cost: a read of its children, for a monitor that has some.
    async fn name_dependents(
        &self,
        message: &mut Notification,
        monitor_id: &str,
    ) -> ServiceResult<()> {
        let (named, count) = self.parents().dependents_of(monitor_id).await?;
        if count == 0 {
            return Ok(());
        }
        let names: Vec<&str> = named.iter().map(|s| s.name.as_str()).collect();
        let more = count - named.len();
        message.message.push_str(&format!(
            "; {count} monitor{} depend{} on it: {}{}",
            if count == 1 { "" } else { "s" },
            if count == 1 { "s" } else { "" },
            names.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            },
        ));
        message.dependents = Some(named);
        Ok(())
    }

    /// Has alerting look again at every monitor placed on these pollers, whose going offline
    /// or coming back changes their status (cost: those monitors).
    pub async fn look_again_on_pollers(&self, poller_ids: &[String]) -> ServiceResult<()> {
        self.store
            .mark_due_on_pollers(poller_ids, self.now_ms())
            .await?;
        Ok(())
    }

    /// Has alerting look again at the monitors it last saw stale: for a new lease holder,
    /// whose first look at the pollers cannot tell which came back meanwhile.
    pub async fn look_again_at_stale(&self) -> ServiceResult<()> {
        self.store.mark_stale_due(self.now_ms()).await?;
        Ok(())
    }

    /// The monitors whose checks a maintenance window stops now but which are placed, or
    /// which are unplaced by such a window no longer under way (`maintenance::stopping`).
    /// Reads the windows only when some monitor is in maintenance or stopped.
    async fn stop_changed(
        &self,
        monitors: &[Monitor],
        derived: &[Derived],
        now: i64,
    ) -> ServiceResult<Vec<String>> {
        let stopped_placement = |m: &Monitor, d: &Derived| {
            let stopped = |r: Option<&str>| r.is_some_and(|r| r.contains(STOPPED_PREFIX));
            stopped(m.placement_reason.as_deref())
                || d.view
                    .locations
                    .iter()
                    .any(|l| stopped(l.reason.as_deref()))
        };
        let candidates: Vec<(&Monitor, bool)> = monitors
            .iter()
            .zip(derived)
            .filter(|(m, d)| d.windows.inside.is_some() || stopped_placement(m, d))
            .map(|(m, d)| (m, stopped_placement(m, d)))
            .collect();
        if candidates.is_empty() {
            return Ok(Vec::new());
        }
        let windows = self.maintenance().windows_now(now).await?;
        Ok(candidates
            .into_iter()
            .filter(|(m, stopped)| stopping(&windows, &m.id, &m.tags).is_some() != *stopped)
            .map(|(m, _)| m.id.clone())
            .collect())
    }

    /// Looks at every monitor due by now; returns how many notifications it queued.
    pub async fn evaluate_alerts(&self) -> ServiceResult<usize> {
        // The clock stepped back (a wall clock set back by hand or by NTP): a status a look
        // found at a later time may not hold at this one, and the instants it left are
        // later still. Every monitor is looked at again (cost: every monitor, once per step
        // back; the system clock never goes back otherwise).
        let now = self.now_ms();
        let last = self
            .last_look_at
            .swap(now, std::sync::atomic::Ordering::SeqCst);
        if now < last {
            tracing::warn!(
                back_ms = last - now,
                "the clock went back; alerting looks at every monitor again"
            );
            self.store.mark_all_due(now).await?;
        }
        let mut queued = 0;
        loop {
            let now = self.now_ms();
            let due = self.store.due_looks(now, ROUND).await?;
            queued += self.look_at(&due, now).await?;
            if due.len() < ROUND as usize {
                return Ok(queued);
            }
        }
    }

    /// One round over `due` (ids with the `marks` read).
    async fn look_at(&self, due: &[(String, i64)], now: i64) -> ServiceResult<usize> {
        if due.is_empty() {
            return Ok(0);
        }
        // Read before the monitors and their statuses: when placement's last look is after a
        // poller went offline, the moves it made are in what this round reads. Read after
        // them, a look that finished in between would end the hold while this round still
        // sees the monitors on the lost poller (and tell each of them `stale`).
        let placement_checked = self.cluster.placement_checked_at();
        let ids: Vec<String> = due.iter().map(|(id, _)| id.clone()).collect();
        let mut monitors = self.store.monitors_by_ids(&ids).await?;
        let mut derived = self.derived_of(&monitors).await?;
        // A maintenance window that stops checks began or ended for some: they are placed
        // anew (dropped by their pollers, or handed back) before they are looked at.
        let replace = self.stop_changed(&monitors, &derived, now).await?;
        if !replace.is_empty() {
            self.reconcile_monitors(&replace).await?;
            monitors = self.store.monitors_by_ids(&ids).await?;
            derived = self.derived_of(&monitors).await?;
        }
        // Heartbeat monitors whose ping is late: the failure is stored as their result first
        // (as an agent's would be), then they are seen with it.
        let settled = |late: &Lateness| now >= late.at.saturating_add(push::LATE_SETTLE_MS);
        let late: HashMap<String, _> = monitors
            .iter()
            .zip(&derived)
            .filter_map(|(m, d)| Some((m.id.clone(), d.late.clone().filter(settled)?)))
            .collect();
        if !late.is_empty() {
            self.store_late(&monitors, &late, now).await?;
            derived = self.derived_of(&monitors).await?;
        }
        let states: HashMap<String, StoredAlertState> = self
            .store
            .alert_states_of(&ids)
            .await?
            .into_iter()
            .map(|s| (s.monitor_id.clone(), s))
            .collect();
        // Only the pollers these monitors run on: a round follows each upload, and reading
        // every poller per round cost more than the round (200 pollers × 200 uploads a second
        // at 100,000 monitors).
        let placed: std::collections::BTreeSet<String> = derived
            .iter()
            .filter_map(|d| d.view.poller_id.map(|id| id.to_string()))
            .collect();
        let placed: Vec<String> = placed.into_iter().collect();
        let pollers: HashMap<String, Poller> = self
            .store
            .pollers_by_ids(&placed)
            .await?
            .into_iter()
            .map(|p| (p.id.clone(), p))
            .collect();
        // Read when the first notice of the round needs them.
        let mut channels: Option<Vec<Recipient>> = None;
        let marks: HashMap<&str, i64> = due.iter().map(|(id, m)| (id.as_str(), *m)).collect();
        // A monitor deleted since it was marked: its row goes.
        let existing: std::collections::HashSet<&str> =
            monitors.iter().map(|m| m.id.as_str()).collect();
        let mut looks: Vec<Look> = due
            .iter()
            .filter(|(id, _)| !existing.contains(id.as_str()))
            .map(|(id, marks)| Look::settled(id, *marks))
            .collect();
        // What the locations of the multi-location ones showed at their last look.
        let multi: Vec<String> = monitors
            .iter()
            .zip(&derived)
            .filter(|(_, d)| !d.view.locations.is_empty())
            .map(|(m, _)| m.id.clone())
            .collect();
        let location_shown: HashMap<(String, String), Option<LocationStatus>> = if multi.is_empty()
        {
            HashMap::new()
        } else {
            self.store
                .locations_of(Some(&multi))
                .await?
                .into_iter()
                .map(|l| ((l.monitor_id, l.region), l.shown_status))
                .collect()
        };
        let mut updates = Vec::new();
        // Monitors told down or up (not reminders), for pages that open incidents themselves.
        let mut told: Vec<(String, Told)> = Vec::new();
        for (monitor, derived) in monitors.iter().zip(&derived) {
            let (status, changes_at) = (&derived.view, &derived.changes_at);
            let stored = states.get(&monitor.id);
            let previous = stored.map(|s| s.state.clone());
            let mut current = status.status;
            // In maintenance, problems are not told and are told when the window ends if
            // they last; a recovery is told during the window unless it says nothing at all.
            if derived.windows.inside.as_ref().is_some_and(|inside| {
                inside.notify == MaintenanceNotify::Recoveries
                    && derived.beneath == MonitorStatus::Up
            }) {
                current = MonitorStatus::Up;
            }
            // Right after central (all of it) was down, results are overdue because nobody
            // could upload them, not because nobody checks: no `stale` until agents had an
            // interval and its grace to deliver. (A poller known offline is real news: its own
            // offline rule already counts from central's return.)
            let grace =
                shared_proto::monitor::staleness_grace_ms(monitor.interval_ms.max(0) as u64) as i64;
            let poller = status.poller_id.and_then(|id| pollers.get(&id.to_string()));
            let poller_offline =
                poller.is_some_and(|p| self.poller_status(p, now) == PollerStatus::Offline);
            let caught_up_at = self.cluster.watching_since() + monitor.interval_ms + grace;
            let catching_up = now < caught_up_at;
            // A lost poller is one notice (`poller.offline`), not one per monitor: until
            // placement has seen the poller offline and moved what can fail over, its monitors'
            // `stale` waits. Moved, they have an interval to report from their new poller; one
            // that could not move is told at once after that (liveness marks it due then).
            let failover_ends = poller.filter(|_| poller_offline).and_then(|p| {
                let offline_since = p
                    .last_heartbeat_at
                    .unwrap_or(0)
                    .max(self.cluster.watching_since())
                    + self.limits.offline_after.as_millis() as i64;
                // Never longer than placement needs at worst, even if it keeps failing.
                let ends = offline_since.saturating_add(FAILOVER_HOLD_MS);
                (offline_since >= placement_checked && now < ends).then_some(ends)
            });
            let mut held_until = None;
            // A new monitor has its first interval and grace to be placed and to report, as a
            // monitor handed to a poller has to report: a placement that settles meanwhile
            // (its region's poller registering as it is created) is no news.
            let settled_at = monitor.created_at + monitor.interval_ms + grace;
            let never_told = previous
                .as_ref()
                .is_none_or(|p| p.notified_status.is_none());
            if current == MonitorStatus::Stale && never_told && now < settled_at {
                current = MonitorStatus::Pending;
                held_until = Some(settled_at);
            } else if current == MonitorStatus::Stale {
                let hold = if catching_up && !poller_offline {
                    Some(caught_up_at)
                } else {
                    failover_ends
                };
                if let (Some(until), Some(previous)) = (hold, &previous) {
                    current = previous.status;
                    held_until = Some(until);
                }
            }
            // A heartbeat monitor just past its deadline: nothing is told until a ping on its
            // way had the time to land (`push::LATE_SETTLE_MS`) and the failure is stored.
            // Looked at again then, whatever it shows meanwhile (with `confirm_down` it may
            // still show `up`): the failure is stored at that look.
            if let Some(late) = derived.late.as_ref().filter(|l| !settled(l)) {
                if current == MonitorStatus::Down {
                    current = previous
                        .as_ref()
                        .map_or(MonitorStatus::Pending, |p| p.status);
                }
                let until = late.at.saturating_add(push::LATE_SETTLE_MS);
                held_until = Some(held_until.map_or(until, |h: i64| h.min(until)));
            }
            // Behind a parent that shows a problem, a problem is the parent's news (its notice
            // names this monitor): nothing is told until the parent's next change of status
            // marks this monitor due. Failing before its parent was checked again, it waits
            // for that check, at most the parent's interval (`parents::behind`).
            let mut behind_parent = false;
            if matches!(
                current,
                MonitorStatus::Down | MonitorStatus::Degraded | MonitorStatus::Stale
            ) {
                match &derived.behind {
                    Some(Behind::Parent { .. }) => {
                        behind_parent = true;
                        current = previous
                            .as_ref()
                            .map_or(MonitorStatus::Pending, |p| p.status);
                    }
                    Some(Behind::Waiting { until }) => {
                        current = previous
                            .as_ref()
                            .map_or(MonitorStatus::Pending, |p| p.status);
                        held_until = Some(held_until.map_or(*until, |h: i64| h.min(*until)));
                    }
                    None => {}
                }
            }
            let rules = Rules {
                // Behind a parent, a problem told before is not repeated: the parent's is.
                repeat_ms: if behind_parent { 0 } else { repeat_ms(monitor) },
                flap_window_ms: flap_window_ms(monitor.interval_ms),
            };
            let (next, notice) = step(previous.as_ref(), current, now, rules);
            // A window's start or end is a change of the rules' input that time alone brings:
            // a steady monitor's results must not carry it past that instant (`confirm_due`).
            let rule_at = [next_look(&next, rules), derived.windows.next_change]
                .into_iter()
                .flatten()
                .min();
            // Showing its verdict from one place, nothing held: until something marks it, a
            // result that confirms the verdict changes nothing but when time could.
            let steady = (status.locations.is_empty()
                && matches!(status.status, MonitorStatus::Up | MonitorStatus::Down)
                && held_until.is_none()
                && !behind_parent)
                .then_some(monitor.interval_ms);
            let next_at = [*changes_at, held_until, rule_at]
                .into_iter()
                .flatten()
                .min()
                // Never in the past: a look that is due again at once would spin.
                .map(|at| at.max(now + 1));
            looks.push(Look {
                monitor_id: monitor.id.clone(),
                marks: marks.get(monitor.id.as_str()).copied().unwrap_or_default(),
                next_at,
                shown: (monitor.shown_status != Some(status.status)).then_some(status.status),
                shown_locations: status
                    .locations
                    .iter()
                    .filter(|l| {
                        let stored = location_shown.get(&(monitor.id.clone(), l.region.clone()));
                        stored.copied().flatten() != Some(l.status)
                    })
                    .map(|l| (l.region.clone(), l.status))
                    .collect(),
                steady,
                rule_at,
            });
            if previous.as_ref() == Some(&next) {
                continue;
            }
            let notifications = match &notice {
                Some(notice) => {
                    match (notice.event, notice.reminder) {
                        (NotificationEvent::MonitorDown, false) => {
                            told.push((monitor.id.clone(), Told::Down));
                        }
                        (NotificationEvent::MonitorUp, false) => {
                            told.push((monitor.id.clone(), Told::Up));
                        }
                        _ => {}
                    }
                    if channels.is_none() {
                        channels = Some(self.store.recipients().await?);
                    }
                    let targets: Vec<&Recipient> = channels
                        .iter()
                        .flatten()
                        .filter(|c| tells(c, monitor))
                        .collect();
                    let mut message = message_for(monitor, status, current, notice, now)?;
                    if notice.event.is_problem() {
                        self.name_dependents(&mut message, &monitor.id).await?;
                    }
                    tracing::info!(monitor_id = %monitor.id, event = notice.event.as_str(),
                        channels = targets.len(), reminder = notice.reminder, "notifying");
                    outbox_rows(&targets, &message, Some(&monitor.id), None)
                }
                None => Vec::new(),
            };
            updates.push(AlertUpdate {
                monitor_id: monitor.id.clone(),
                state: next,
                replaces: stored.map(|s| s.read_as.clone()),
                notifications,
            });
        }
        let queued: usize = updates.iter().map(|u| u.notifications.len()).sum();
        self.store.record_alerts(&updates, &looks, now).await?;
        if queued > 0 {
            self.cluster.wakes.delivery.notify_one();
        }
        // Pages that open incidents themselves follow what was told; never at the cost of it.
        if let Err(error) = self.status_pages().monitors_told(&told, now).await {
            tracing::warn!(%error, "status pages' own incidents were not opened or resolved");
        }
        Ok(queued)
    }
}
