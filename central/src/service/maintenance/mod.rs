//! Maintenance windows: the operators' CRUD and "mute for", and what a window means for a
//! monitor at an instant (`in_maintenance`), which status derivation (`statuses`), alerting
//! (`alerts::look`) and uptime (`ingest`, `history`) all read through here, so they never
//! disagree.
//!
//! A service of its own (`Maintenance`), holding only the store and the clock; handlers take
//! it from the router's state (`FromRef`), and the rest of central through `App::maintenance`.
//!
//! A write marks the monitors covered due (`store::maintenance`); each look then carries the
//! monitor's next window boundary as an instant of its own, so a window starts and ends on
//! time without any timer over windows or monitors. Cost: per batch of monitors derived (or
//! of results credited), one read of the windows not over yet and one walk of each one's rule
//! (`now_of`, `spans_of`); per monitor, a check of each such window's scope. Must not: tell
//! anything (alerting decides what a status change
//! tells) or write SQL.

pub mod schedule;

use shared_proto::maintenance::{
    MaintenanceNotify, MaintenanceWindowPatch, MaintenanceWindowSpec, MaintenanceWindowView,
    MuteRequest, Occurrence,
};
use shared_proto::settings_api::Page;
use shared_proto::PollerMode;
use uuid::Uuid;

use self::schedule::{Placement, Schedule, Scope, Window};
use super::tokens::page_of;
use std::sync::Arc;

use super::clock::Clock;
use super::{stored_id, time_of, App};
use crate::domain::MaintenanceWindow;
use crate::domain::Monitor;
use crate::service::error::{ServiceError, ServiceResult};
use crate::store::{Cursor, Store};

/// How far back from a result uptime reads the windows that cut the time it stands for: a
/// result stands for at most its interval and grace (about an hour at most).
pub const QUIET_LOOKBACK_MS: i64 = 86_400_000;

/// A monitor inside a window now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InMaintenance {
    pub window: String,
    /// When it is out of every window covering it now.
    pub until: i64,
    /// `None` if any covering window says so, else `Recoveries`.
    pub notify: MaintenanceNotify,
}

/// What the windows say of one monitor at `now`: whether it is inside one, and the next
/// instant that could change (a covering window's start or end).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WindowsOf {
    pub inside: Option<InMaintenance>,
    pub next_change: Option<i64>,
}

/// A window as it stands at one instant, its rule walked once for a whole batch of monitors.
#[derive(Debug, Clone)]
pub struct WindowNow {
    pub window: Window,
    /// The stretch under way at the instant.
    pub under_way: Option<(i64, i64)>,
    /// The first instant after it at which being under way can change.
    pub next_change: Option<i64>,
}

/// What a window covers within a stretch of time, its rule walked once for a whole batch.
#[derive(Debug, Clone)]
pub struct WindowSpans {
    pub window: Window,
    pub spans: Vec<(i64, i64)>,
}

/// The windows as they stand at `now`: one walk of each rule, however many monitors read them.
pub fn now_of(windows: Vec<Window>, now: i64) -> Vec<WindowNow> {
    windows
        .into_iter()
        .map(|window| WindowNow {
            under_way: window.schedule.under_way(now),
            next_change: window.schedule.next_change(now),
            window,
        })
        .collect()
}

/// What the windows cover within `[from, until)`: one walk of each rule.
pub fn spans_of(windows: Vec<Window>, from: i64, until: i64) -> Vec<WindowSpans> {
    windows
        .into_iter()
        .map(|window| WindowSpans {
            spans: window.schedule.covered(from, until),
            window,
        })
        .collect()
}

/// The windows that cover `placement`, and what they say at their instant. Cost: a scope
/// check per window; no rule is walked.
pub fn in_maintenance(windows: &[WindowNow], placement: &Placement<'_>) -> WindowsOf {
    let mut of = WindowsOf::default();
    for now in windows.iter().filter(|w| w.window.scope.covers(placement)) {
        let window = &now.window;
        of.next_change = match (of.next_change, now.next_change) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if let Some((_, end)) = now.under_way {
            let inside = of.inside.get_or_insert(InMaintenance {
                window: window.name.clone(),
                until: end,
                notify: window.notify,
            });
            inside.until = inside.until.max(end);
            if window.notify == MaintenanceNotify::None {
                inside.notify = MaintenanceNotify::None;
            }
        }
    }
    of
}

/// The window under way that stops a monitor's checks (`stop_checks`, naming it by id or by
/// one of its tags), as `InMaintenance` (the last end of such windows covering it). Placement
/// leaves such a monitor unplaced; alerting places it again when this changes. Cost: a scope
/// check per window.
pub fn stopping(windows: &[WindowNow], monitor_id: &str, tags: &[String]) -> Option<InMaintenance> {
    let mut stopped: Option<InMaintenance> = None;
    for now in windows.iter().filter(|w| w.window.stop_checks) {
        let scope = &now.window.scope;
        let names =
            scope.monitors.contains(monitor_id) || tags.iter().any(|t| scope.tags.contains(t));
        if let (true, Some((_, end))) = (names, now.under_way) {
            let stop = stopped.get_or_insert(InMaintenance {
                window: now.window.name.clone(),
                until: end,
                notify: now.window.notify,
            });
            stop.until = stop.until.max(end);
        }
    }
    stopped
}

/// What placement says of a monitor whose checks a window stops (`stopping`); alerting knows
/// such a placement by it.
pub const STOPPED_PREFIX: &str = "checks stopped by the maintenance window";

pub fn stopped_reason(stop: &InMaintenance) -> String {
    format!(
        "{STOPPED_PREFIX} \"{}\" until {}",
        stop.window,
        time_of(stop.until).to_rfc3339()
    )
}

/// Where a monitor runs, as windows see it: on `pollers` (its own and its locations'), from
/// its locations' `regions`, its group's region and the regions of those pollers
/// (`poller_region`).
pub fn placement_of<'a>(
    monitor: &'a Monitor,
    regions: &'a [String],
    pollers: Vec<&'a str>,
    poller_region: impl Fn(&str) -> Option<&'a str>,
) -> Placement<'a> {
    let mut placed: Vec<&str> = regions.iter().map(String::as_str).collect();
    if monitor.poller_mode == PollerMode::Grouped {
        placed.extend(monitor.poller_region.as_deref());
    }
    placed.extend(pollers.iter().filter_map(|id| poller_region(id)));
    Placement {
        monitor_id: &monitor.id,
        pollers,
        regions: placed,
        tags: monitor.tags.clone(),
    }
}

/// A monitor's stored tags (a list that does not read covers no tag: the API stores none).
pub fn tags_of(json: Option<&str>) -> Vec<String> {
    json.and_then(|json| serde_json::from_str(json).ok())
        .unwrap_or_default()
}

/// The time the windows covering `placement` hold within their stretch: disjoint spans in
/// time order, which uptime credits to nobody (`uptime::outside`). Cost: a scope check per
/// window and the spans of those covering; no rule is walked.
pub fn quiet_of(windows: &[WindowSpans], placement: &Placement<'_>) -> Vec<(i64, i64)> {
    let mut spans: Vec<(i64, i64)> = windows
        .iter()
        .filter(|w| w.window.scope.covers(placement))
        .flat_map(|w| w.spans.iter().copied())
        .collect();
    spans.sort_unstable();
    let mut merged: Vec<(i64, i64)> = Vec::with_capacity(spans.len());
    for (start, end) in spans {
        match merged.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    merged
}

/// A window's occurrences as a status page lists them at `now`: the stretch under way, whole
/// (as it began and as it will end), then those starting before `until`. Cost: a walk of its
/// rule per occurrence listed, at most `MAX_LISTED` of them.
pub fn occurrences_ahead(schedule: &Schedule, now: i64, until: i64) -> Vec<(i64, i64)> {
    const MAX_LISTED: usize = 16;
    let mut found: Vec<(i64, i64)> = schedule.under_way(now).into_iter().collect();
    let mut after = found.last().map_or(now, |(_, end)| *end);
    while found.len() < MAX_LISTED {
        match schedule.next_after(after) {
            Some((start, end)) if start < until => {
                found.push((start, end));
                after = start;
            }
            _ => break,
        }
    }
    found
}

/// The windows as schedules and scopes (one whose schedule no longer reads is left out: the
/// API stores none).
pub fn windows_of(stored: &[MaintenanceWindow]) -> Vec<Window> {
    stored
        .iter()
        .filter_map(|stored| {
            Some(Window {
                id: stored.id.clone(),
                name: stored.name.clone(),
                notify: stored.notify,
                stop_checks: stored.stop_checks,
                schedule: Schedule::of_stored(stored)?,
                scope: Scope {
                    monitors: stored.monitor_ids.iter().cloned().collect(),
                    pollers: stored.poller_ids.iter().cloned().collect(),
                    regions: stored.regions.iter().cloned().collect(),
                    tags: stored.tags.iter().cloned().collect(),
                },
            })
        })
        .collect()
}

/// The maintenance windows' service.
#[derive(Clone)]
pub struct Maintenance {
    store: Arc<Store>,
    clock: Clock,
}

impl App {
    /// The maintenance windows' service, on this central's store and clock.
    pub fn maintenance(&self) -> Maintenance {
        Maintenance::new(self.store.clone(), self.clock.clone())
    }
}

impl axum::extract::FromRef<Arc<App>> for Maintenance {
    fn from_ref(app: &Arc<App>) -> Self {
        app.maintenance()
    }
}

impl Maintenance {
    pub(super) fn new(store: Arc<Store>, clock: Clock) -> Self {
        Maintenance { store, clock }
    }

    fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// The windows that can cover a monitor at `at` or later.
    async fn windows_from(&self, at: i64) -> ServiceResult<Vec<Window>> {
        Ok(windows_of(&self.store.windows_not_over(at).await?))
    }

    /// The windows not over by `now`, as they stand then (`now_of`).
    pub async fn windows_now(&self, now: i64) -> ServiceResult<Vec<WindowNow>> {
        Ok(now_of(self.windows_from(now).await?, now))
    }

    /// What the windows cover within `[from, until)` (`spans_of`).
    pub async fn window_spans(&self, from: i64, until: i64) -> ServiceResult<Vec<WindowSpans>> {
        Ok(spans_of(self.windows_from(from).await?, from, until))
    }

    pub async fn create_window(
        &self,
        spec: MaintenanceWindowSpec,
    ) -> ServiceResult<MaintenanceWindowView> {
        spec.validate()?;
        let now = self.now_ms();
        let row = self.window_row(Uuid::new_v4(), &spec, now, now).await?;
        self.store.save_window(&row, None, now).await?;
        Ok(window_view(&row, now)?)
    }

    /// "Mute for": a one-off window over one monitor, from now.
    pub async fn mute_monitor(
        &self,
        id: Uuid,
        request: MuteRequest,
    ) -> ServiceResult<MaintenanceWindowView> {
        request.validate()?;
        let monitor = self
            .store
            .monitor(&id.to_string())
            .await?
            .ok_or_else(|| ServiceError::NotFound(format!("no monitor with id {id}")))?;
        let now = self.now_ms();
        let spec = MaintenanceWindowSpec {
            name: format!("{} muted", monitor.name)
                .chars()
                .take(200)
                .collect(),
            starts_at: time_of(now),
            ends_at: Some(time_of(now + request.duration_ms as i64)),
            recurrence: None,
            monitor_ids: vec![id],
            poller_ids: Vec::new(),
            regions: Vec::new(),
            tags: Vec::new(),
            notify: request.notify,
            stop_checks: false,
        };
        self.create_window(spec).await
    }

    pub async fn get_window(&self, id: Uuid) -> ServiceResult<MaintenanceWindowView> {
        Ok(window_view(&self.stored_window(id).await?, self.now_ms())?)
    }

    async fn stored_window(&self, id: Uuid) -> ServiceResult<MaintenanceWindow> {
        self.store
            .window(&id.to_string())
            .await?
            .ok_or_else(|| ServiceError::NotFound(format!("no maintenance window with id {id}")))
    }

    pub async fn list_windows(
        &self,
        after: &Cursor,
        limit: u32,
    ) -> ServiceResult<Page<MaintenanceWindowView>> {
        let rows = self.store.list_windows(after, limit).await?;
        let now = self.now_ms();
        Ok(page_of(rows, |r| window_view(r, now))?)
    }

    pub async fn update_window(
        &self,
        id: Uuid,
        patch: MaintenanceWindowPatch,
    ) -> ServiceResult<MaintenanceWindowView> {
        patch.validate_fields()?;
        let current = self.stored_window(id).await?;
        let mut spec = spec_of(&current)?;
        spec.apply(patch);
        spec.validate()
            .map_err(|e| super::patch_does_not_fit(e.into()))?;
        let now = self.now_ms();
        let row = self.window_row(id, &spec, current.created_at, now).await?;
        if !self.store.save_window(&row, Some(&current), now).await? {
            return Err(ServiceError::NotFound(format!(
                "no maintenance window with id {id}"
            )));
        }
        Ok(window_view(&row, now)?)
    }

    pub async fn delete_window(&self, id: Uuid) -> ServiceResult<()> {
        if self
            .store
            .delete_window(&id.to_string(), self.now_ms())
            .await?
        {
            Ok(())
        } else {
            Err(ServiceError::NotFound(format!(
                "no maintenance window with id {id}"
            )))
        }
    }

    /// The row for a spec whose fields are valid: its recurrence read (`422` when it does
    /// not), and the monitors and pollers it names existing (`422`).
    async fn window_row(
        &self,
        id: Uuid,
        spec: &MaintenanceWindowSpec,
        created_at: i64,
        now: i64,
    ) -> ServiceResult<MaintenanceWindow> {
        let starts_at = spec.starts_at.timestamp_millis();
        let schedule = match (&spec.recurrence, spec.ends_at) {
            (Some(recurrence), _) => Schedule::recurring(starts_at, recurrence)?,
            (None, Some(ends_at)) => Schedule::Once {
                start: starts_at,
                end: ends_at.timestamp_millis(),
            },
            (None, None) => unreachable!("validated: an end or a recurrence"),
        };
        let ids = |list: &[Uuid]| list.iter().map(Uuid::to_string).collect::<Vec<_>>();
        let monitor_ids = ids(&spec.monitor_ids);
        let known = self.store.monitors_by_ids(&monitor_ids).await?;
        if let Some(missing) = monitor_ids
            .iter()
            .find(|id| !known.iter().any(|m| &m.id == *id))
        {
            return Err(shared_proto::ValidationError::reference(
                "monitor_ids",
                format!("no monitor with id {missing}"),
            )
            .into());
        }
        let poller_ids = ids(&spec.poller_ids);
        let pollers = self.store.pollers_by_ids(&poller_ids).await?;
        if let Some(missing) = poller_ids
            .iter()
            .find(|id| !pollers.iter().any(|p| &p.id == *id))
        {
            return Err(shared_proto::ValidationError::reference(
                "poller_ids",
                format!("no poller with id {missing}"),
            )
            .into());
        }
        Ok(MaintenanceWindow {
            id: id.to_string(),
            name: spec.name.clone(),
            starts_at,
            ends_at: spec.ends_at.map(|t| t.timestamp_millis()),
            recurrence: spec.recurrence.clone(),
            until_at: schedule.last_end(),
            monitor_ids,
            poller_ids,
            regions: spec.regions.clone(),
            tags: spec.tags.clone(),
            notify: spec.notify,
            stop_checks: spec.stop_checks,
            created_at,
            updated_at: now,
        })
    }
}

fn spec_of(stored: &MaintenanceWindow) -> anyhow::Result<MaintenanceWindowSpec> {
    let uuids = |ids: &[String]| -> anyhow::Result<Vec<Uuid>> {
        ids.iter().map(|id| stored_id(id)).collect()
    };
    Ok(MaintenanceWindowSpec {
        name: stored.name.clone(),
        starts_at: time_of(stored.starts_at),
        ends_at: stored.ends_at.map(time_of),
        recurrence: stored.recurrence.clone(),
        monitor_ids: uuids(&stored.monitor_ids)?,
        poller_ids: uuids(&stored.poller_ids)?,
        regions: stored.regions.clone(),
        tags: stored.tags.clone(),
        notify: stored.notify,
        stop_checks: stored.stop_checks,
    })
}

fn window_view(row: &MaintenanceWindow, now: i64) -> anyhow::Result<MaintenanceWindowView> {
    let spec = spec_of(row)?;
    let schedule = Schedule::of_stored(row);
    let occurrence = |(start, end): (i64, i64)| Occurrence {
        starts_at: time_of(start),
        ends_at: time_of(end),
    };
    Ok(MaintenanceWindowView {
        id: stored_id(&row.id)?,
        name: spec.name,
        starts_at: spec.starts_at,
        ends_at: spec.ends_at,
        recurrence: spec.recurrence,
        monitor_ids: spec.monitor_ids,
        poller_ids: spec.poller_ids,
        regions: spec.regions,
        tags: spec.tags,
        notify: spec.notify,
        stop_checks: spec.stop_checks,
        current: schedule
            .as_ref()
            .and_then(|s| s.under_way(now))
            .map(occurrence),
        next: schedule
            .as_ref()
            .and_then(|s| s.next_after(now))
            .map(occurrence),
        created_at: time_of(row.created_at),
        updated_at: time_of(row.updated_at),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(
        name: &str,
        notify: MaintenanceNotify,
        start: i64,
        end: i64,
        monitor: &str,
    ) -> Window {
        Window {
            id: name.into(),
            name: name.into(),
            notify,
            stop_checks: false,
            schedule: Schedule::Once { start, end },
            scope: Scope {
                monitors: [monitor.to_string()].into(),
                ..Scope::default()
            },
        }
    }

    #[test]
    fn a_monitor_is_inside_until_every_covering_window_is_over() {
        let windows = [
            window("a", MaintenanceNotify::Recoveries, 0, 100, "m"),
            window("b", MaintenanceNotify::None, 50, 200, "m"),
            window("c", MaintenanceNotify::None, 0, 500, "other"),
        ];
        let placement = Placement {
            monitor_id: "m",
            ..Placement::default()
        };
        let at = |t| in_maintenance(&now_of(windows.to_vec(), t), &placement);
        assert_eq!(
            at(10).inside.as_ref().map(|i| (i.until, i.notify)),
            Some((100, MaintenanceNotify::Recoveries))
        );
        assert_eq!(at(10).next_change, Some(50));
        assert_eq!(
            at(60).inside.as_ref().map(|i| (i.until, i.notify)),
            Some((200, MaintenanceNotify::None))
        );
        assert_eq!(at(150).inside.as_ref().map(|i| i.until), Some(200));
        assert_eq!(at(250), WindowsOf::default());
    }

    #[test]
    fn a_scope_covers_by_monitor_poller_or_region() {
        let scope = Scope {
            monitors: ["m".to_string()].into(),
            pollers: ["p".to_string()].into(),
            regions: ["eu".to_string()].into(),
            tags: ["team:db".to_string()].into(),
        };
        let placed = |id, pollers: Vec<&'static str>, regions: Vec<&'static str>| Placement {
            monitor_id: id,
            pollers,
            regions,
            tags: Vec::new(),
        };
        assert!(scope.covers(&placed("m", vec![], vec![])));
        let tagged = |tags: &[&str]| Placement {
            tags: tags.iter().map(|t| t.to_string()).collect(),
            ..placed("x", vec![], vec![])
        };
        assert!(scope.covers(&tagged(&["env:prod", "team:db"])));
        assert!(!scope.covers(&tagged(&["team:dba", "Team:db"])));
        assert!(scope.covers(&placed("x", vec!["q", "p"], vec![])));
        assert!(scope.covers(&placed("x", vec![], vec!["us", "eu"])));
        assert!(!scope.covers(&placed("x", vec!["q"], vec!["us"])));
    }
}
