//! The derived status of monitors, many at once: a few reads by id (newest results, locations,
//! the pollers they run on) and of the maintenance windows not over, then `status::derive` per
//! monitor or per location, `quorum::combine` over the locations of a multi-location monitor,
//! and `maintenance` over what the monitor runs on. The status read, the monitor list and
//! alerting all come through here, so they never disagree.

use std::collections::HashMap;

use serde_json::{Map, Value};
use shared_proto::settings::MonitorSettings;
use shared_proto::settings_api::{
    LocationStatus, LocationView, MonitorStatus, MonitorStatusView, PollerStatus,
};
use shared_proto::CheckKind;

use super::maintenance::{in_maintenance, placement_of, WindowNow, WindowsOf};
use super::parents::{behind, parents_by_child, run_since, Behind, Child};
use super::push::{self, schedule::Schedule};
use super::status::{self, Lateness, StatusInputs, Verdict, VerdictState};
use super::{quorum, stored_id, time_of, App};
use crate::domain::Monitor;
use crate::domain::Poller;
use crate::service::error::ServiceResult;
use crate::store::{LocationRow, PushState, StatusRow};

/// What the derivation of a batch of monitors reads once.
struct Known {
    now: i64,
    latest: HashMap<String, StatusRow>,
    locations: HashMap<(String, String), LocationRow>,
    location_latest: HashMap<(String, String), StatusRow>,
    pollers: HashMap<String, Poller>,
    /// The maintenance windows not over by `now`, as they stand then.
    windows: Vec<WindowNow>,
    /// What heartbeat monitors last heard (`push`), by monitor id.
    push: HashMap<String, PushState>,
    /// Since when central has been up without interruption (`cluster::watching_since`).
    watching_since: i64,
}

/// One monitor's status as derived, with what alerting needs beside it.
#[derive(Debug, Clone)]
pub struct Derived {
    pub view: MonitorStatusView,
    /// The first instant its status could change with time alone (`status::changes_at`,
    /// the earliest over its locations), maintenance windows aside.
    pub changes_at: Option<i64>,
    /// The status beneath `maintenance` while it is in a window; `view.status` otherwise.
    pub beneath: MonitorStatus,
    /// What the windows covering it say now, and when that could change.
    pub windows: WindowsOf,
    /// The parent its problem is held behind, or waited for (`parents::behind`).
    pub behind: Option<Behind>,
    /// A heartbeat monitor whose ping is late by now and whose late result is not stored yet
    /// (alerting stores it: `push::store_late`).
    pub late: Option<Lateness>,
}

/// A monitor's confirmation thresholds (`settings.confirm_down`, `settings.confirm_up`).
fn thresholds(monitor: &Monitor) -> (u32, u32) {
    thresholds_of(monitor.kind, &monitor.settings)
}

/// The confirmation thresholds in a kind's settings; `(1, 1)` when they do not parse.
pub(super) fn thresholds_of(kind: CheckKind, settings: &Map<String, Value>) -> (u32, u32) {
    common_settings_of(kind, settings).map_or((1, 1), |s| (s.confirm_down, s.confirm_up))
}

/// The common settings in a kind's settings; `None` when they do not parse.
pub(super) fn common_settings_of(
    kind: CheckKind,
    settings: &Map<String, Value>,
) -> Option<shared_proto::settings::CommonSettings> {
    MonitorSettings::parse(kind, settings)
        .ok()
        .map(|s| s.common)
}

impl App {
    /// The status of each monitor, in the order given.
    pub async fn statuses_of(&self, monitors: &[Monitor]) -> ServiceResult<Vec<MonitorStatusView>> {
        Ok(self
            .derived_of(monitors)
            .await?
            .into_iter()
            .map(|derived| derived.view)
            .collect())
    }

    /// The status of each monitor, in the order given, with what alerting needs beside it.
    pub async fn derived_of(&self, monitors: &[Monitor]) -> ServiceResult<Vec<Derived>> {
        // By id, however many: a caller with every monitor would be reading every row, and none
        // does (`/metrics` renders from stored status).
        let ids: Vec<String> = monitors.iter().map(|m| m.id.clone()).collect();
        let scope = Some(ids.as_slice());
        let locations: HashMap<(String, String), LocationRow> = self
            .store
            .locations_of(scope)
            .await?
            .into_iter()
            .map(|l| ((l.monitor_id.clone(), l.region.clone()), l))
            .collect();
        // Only the pollers they are placed on, not every poller.
        let placed: std::collections::BTreeSet<String> = monitors
            .iter()
            .filter_map(|m| m.assigned_poller_id.clone())
            .chain(
                locations
                    .values()
                    .filter_map(|l| l.assigned_poller_id.clone()),
            )
            .collect();
        let placed: Vec<String> = placed.into_iter().collect();
        let pollers = self.store.pollers_by_ids(&placed).await?;
        let now = self.now_ms();
        let known = Known {
            now,
            latest: self.store.monitor_statuses(scope).await?,
            locations,
            location_latest: self
                .store
                .location_statuses(scope)
                .await?
                .into_iter()
                .map(|l| ((l.monitor_id, l.region), l.status))
                .collect(),
            pollers: pollers.into_iter().map(|p| (p.id.clone(), p)).collect(),
            windows: self.maintenance().windows_now(now).await?,
            push: {
                let heartbeats: Vec<String> = monitors
                    .iter()
                    .filter(|m| m.kind == CheckKind::Heartbeat)
                    .map(|m| m.id.clone())
                    .collect();
                self.store.push_states(&heartbeats).await?
            },
            watching_since: self.cluster.watching_since(),
        };
        let mut views = Vec::with_capacity(monitors.len());
        for monitor in monitors {
            views.push(self.status_of(monitor, &known).await?);
        }
        self.add_parents(monitors, &mut views, &known).await?;
        Ok(views)
    }

    /// Which failing monitors are behind a parent (`parents::behind`), with the reason they
    /// show. Reads the parents of the failing ones only (their rows and newest results).
    async fn add_parents(
        &self,
        monitors: &[Monitor],
        views: &mut [Derived],
        known: &Known,
    ) -> ServiceResult<()> {
        let failing: Vec<Monitor> = monitors
            .iter()
            .zip(views.iter())
            .filter(|(m, d)| {
                !m.parent_ids.is_empty()
                    && matches!(
                        d.view.status,
                        MonitorStatus::Down | MonitorStatus::Degraded | MonitorStatus::Stale
                    )
            })
            .map(|(m, _)| m.clone())
            .collect();
        if failing.is_empty() {
            return Ok(());
        }
        let ids: std::collections::BTreeSet<String> = failing
            .iter()
            .flat_map(|m| m.parent_ids.iter().cloned())
            .collect();
        let ids: Vec<String> = ids.into_iter().collect();
        let rows: HashMap<String, Monitor> = self
            .store
            .monitors_by_ids(&ids)
            .await?
            .into_iter()
            .map(|m| (m.id.clone(), m))
            .collect();
        let latest = self.store.monitor_statuses(Some(&ids)).await?;
        let parents = parents_by_child(&failing, &rows, &latest);
        for (monitor, derived) in monitors.iter().zip(views.iter_mut()) {
            let Some(parents) = parents.get(&monitor.id) else {
                continue;
            };
            let latest = known.latest.get(&monitor.id);
            let child = Child {
                status: derived.view.status,
                failing_since: run_since(latest, Verdict::Down, monitor.interval_ms),
                last_result_at: latest.map(|l| l.last_result_at),
                interval_ms: monitor.interval_ms,
                timeout_ms: monitor.timeout_ms,
            };
            derived.behind = behind(child, parents, known.now);
            if let Some(Behind::Parent { name, status }) = &derived.behind {
                let state = match status {
                    MonitorStatus::Maintenance => "in maintenance",
                    status => status.as_str(),
                };
                let because = format!("because {name} is {state}");
                derived.view.reason = Some(match derived.view.reason.take() {
                    Some(own) => format!("{because}; {own}"),
                    None => because,
                });
            }
        }
        Ok(())
    }

    async fn status_of(&self, monitor: &Monitor, known: &Known) -> ServiceResult<Derived> {
        let latest = known.latest.get(&monitor.id);
        let regions = monitor.regions();
        let mut changes_at = None;
        let late = Schedule::of(monitor.kind, &monitor.settings, monitor.interval_ms).map(|s| {
            let state = known.push.get(&monitor.id).copied().unwrap_or_default();
            let watched_from = push::watched_from(monitor, state, known.watching_since);
            push::lateness(&s, watched_from, latest, state)
        });
        let (status, reason, poller_id, locations, quorum) = if regions.is_empty() {
            let assigned = monitor.assigned_poller_id.as_deref();
            let (status, reason) = self
                .derive_slot(
                    monitor,
                    assigned,
                    monitor.assigned_at,
                    monitor.placement_reason.as_deref(),
                    latest,
                    known,
                    late.clone(),
                    &mut changes_at,
                )
                .await?;
            let poller_id = assigned.map(stored_id).transpose()?;
            (status, reason, poller_id, Vec::new(), None)
        } else {
            let mut locations = Vec::with_capacity(regions.len());
            for region in regions {
                let location = self
                    .location_view(monitor, region, known, &mut changes_at)
                    .await?;
                locations.push(location);
            }
            let quorum = quorum::effective(monitor.quorum, regions.len());
            let (status, reason) = if monitor.paused {
                (MonitorStatus::Paused, Some("paused by an operator".into()))
            } else {
                let each: Vec<LocationStatus> = locations.iter().map(|l| l.status).collect();
                quorum::combine(&each, quorum)
            };
            (status, reason, None, locations, Some(quorum))
        };
        let windows = windows_of(monitor, regions, known);
        let beneath = status;
        let (status, reason) = match &windows.inside {
            Some(inside) if status != MonitorStatus::Paused => (
                MonitorStatus::Maintenance,
                Some(format!(
                    "in the maintenance window \"{}\" until {}",
                    inside.window,
                    time_of(inside.until).to_rfc3339()
                )),
            ),
            _ => (status, reason),
        };
        let view = MonitorStatusView {
            monitor_id: stored_id(&monitor.id)?,
            status,
            poller_id,
            last_result_at: latest.map(|l| time_of(l.last_result_at)),
            latency_ms: latest.and_then(|l| l.latency_ms).map(|l| l.max(0) as u64),
            next_check_at: latest.and_then(|l| l.next_due_at).map(time_of),
            message: latest.map(|l| l.message.clone()),
            reason,
            locations,
            quorum,
            engine: None,
            health: None,
        };
        // Late by now, with nothing stored at or after that instant: alerting stores it.
        let late = late.filter(|l| {
            !monitor.paused && known.now >= l.at && latest.is_none_or(|r| r.last_result_at < l.at)
        });
        Ok(Derived {
            view,
            changes_at,
            beneath,
            windows,
            behind: None,
            late,
        })
    }

    async fn location_view(
        &self,
        monitor: &Monitor,
        region: &str,
        known: &Known,
        changes_at: &mut Option<i64>,
    ) -> ServiceResult<LocationView> {
        let key = (monitor.id.clone(), region.to_string());
        let location = known.locations.get(&key);
        let latest = known.location_latest.get(&key);
        let assigned = location.and_then(|l| l.assigned_poller_id.as_deref());
        let (status, reason) = self
            .derive_slot(
                monitor,
                assigned,
                location.and_then(|l| l.assigned_at),
                location.and_then(|l| l.placement_reason.as_deref()),
                latest,
                known,
                None,
                changes_at,
            )
            .await?;
        let status = match status {
            MonitorStatus::Up => LocationStatus::Up,
            MonitorStatus::Down => LocationStatus::Down,
            MonitorStatus::Pending => LocationStatus::Pending,
            // Nobody can tell what this location sees: its poller is offline or silent, or no
            // poller of the region can run the check.
            MonitorStatus::Stale
            | MonitorStatus::Degraded
            | MonitorStatus::Paused
            | MonitorStatus::Maintenance => LocationStatus::Unknown,
        };
        Ok(LocationView {
            region: region.to_string(),
            poller_id: assigned.map(stored_id).transpose()?,
            status,
            last_result_at: latest.map(|l| time_of(l.last_result_at)),
            latency_ms: latest.and_then(|l| l.latency_ms).map(|l| l.max(0) as u64),
            message: latest.map(|l| l.message.clone()),
            reason,
        })
    }

    /// `status::derive` for one placement: a monitor's own, or one location's; lowers
    /// `changes_at` to the instant this answer could change with time alone.
    #[allow(clippy::too_many_arguments)]
    async fn derive_slot(
        &self,
        monitor: &Monitor,
        assigned: Option<&str>,
        assigned_at: Option<i64>,
        placement_reason: Option<&str>,
        latest: Option<&StatusRow>,
        known: &Known,
        late: Option<Lateness>,
        changes_at: &mut Option<i64>,
    ) -> ServiceResult<(MonitorStatus, Option<String>)> {
        let (confirm_down, confirm_up) = thresholds(monitor);
        let verdict = latest.map_or(VerdictState::default(), |l| VerdictState {
            confirmed: l.confirmed,
            run: l
                .status
                .verdict()
                .map(|v| (v, l.run_length.clamp(1, i64::from(u32::MAX)) as u32)),
        });
        let offline = assigned
            .and_then(|id| known.pollers.get(id))
            .filter(|p| self.poller_status(p, known.now) == PollerStatus::Offline);
        let inputs = StatusInputs {
            now: known.now,
            paused: monitor.paused,
            placement_reason,
            offline_poller: offline.map(|p| (p.id.as_str(), p.last_heartbeat_at)),
            interval_ms: monitor.interval_ms,
            assigned_at,
            changed_at: Some(monitor.updated_at),
            latest: latest.map(|l| (l.status.as_str(), l.last_result_at, l.next_due_at)),
            verdict,
            confirm_down,
            confirm_up,
            late,
        };
        if let Some(at) = status::changes_at(&inputs) {
            *changes_at = Some(changes_at.map_or(at, |earlier| earlier.min(at)));
        }
        Ok(status::derive(&inputs))
    }
}

/// What the maintenance windows say of a monitor, placed as `known` has it.
fn windows_of(monitor: &Monitor, regions: &[String], known: &Known) -> WindowsOf {
    if known.windows.is_empty() {
        return WindowsOf::default();
    }
    let located = regions.iter().filter_map(|region| {
        known
            .locations
            .get(&(monitor.id.clone(), region.clone()))
            .and_then(|l| l.assigned_poller_id.as_deref())
    });
    let pollers = monitor
        .assigned_poller_id
        .as_deref()
        .into_iter()
        .chain(located)
        .collect();
    let placement = placement_of(monitor, regions, pollers, |id| {
        known.pollers.get(id).and_then(|p| p.region.as_deref())
    });
    in_maintenance(&known.windows, &placement)
}
