//! What a visitor of a status page is shown (`StatusSummary`): the page's sections and, for
//! each monitor, the display name the operator chose, a status in visitors' words
//! (`ShownStatus`), its last 90 days as daily uptime (the day rollups), its uptime over them
//! and over 24 hours, 7 and 30 days, and its newest latency; the page's incidents
//! (`incidents`), and maintenance under way or planned over its monitors, by occurrence (the
//! window's name stays with operators). Nothing else of a monitor leaves here: no target,
//! poller, region, message or internal name (when a display name is set).
//!
//! Cost, per call: the monitors the page names (by id, and by tag through the tags' index),
//! capped at `MAX_PAGE_MONITORS`; their derived status (`statuses_of`); one read of their day
//! buckets (at most 91 rows each); their uptime over five windows (`uptimes`, two windows at
//! a time, beside the other reads: at most three of the readers' connections); the page's
//! open and lately resolved incidents; the windows not over yet, walked once each. Called at
//! most every few seconds per page that visitors read (`web::status_pages` shares it between
//! them), never per visitor.

use std::collections::{BTreeMap, HashMap, HashSet};

use chrono::NaiveDate;
use shared_proto::settings_api::MonitorStatus;
use shared_proto::status_incidents::{ShownMaintenance, MAINTENANCE_AHEAD_DAYS};
use shared_proto::status_pages::{
    ShownDay, ShownMonitor, ShownPage, ShownSection, ShownStatus, StatusPageSection, StatusSummary,
    DAYS_SHOWN, MAX_PAGE_MONITORS,
};

use uuid::Uuid;

use super::StatusPage;
use crate::domain::Monitor;
use crate::service::error::ServiceResult;
use crate::service::maintenance::occurrences_ahead;
use crate::service::{stored_id, time_of, App};
use crate::store::Resolution;

const DAY_MS: i64 = 86_400_000;

/// A monitor's status as a visitor is told it: what is not known now (not checked lately,
/// paused, never checked) is `unknown`, never `up`.
pub fn shown_status(status: MonitorStatus) -> ShownStatus {
    match status {
        MonitorStatus::Up => ShownStatus::Up,
        MonitorStatus::Down => ShownStatus::Down,
        MonitorStatus::Degraded => ShownStatus::Degraded,
        MonitorStatus::Maintenance => ShownStatus::Maintenance,
        MonitorStatus::Pending | MonitorStatus::Stale | MonitorStatus::Paused => {
            ShownStatus::Unknown
        }
    }
}

/// Percent up of a measured time; `None` when none was measured.
fn percent(up_ms: i64, down_ms: i64) -> Option<f64> {
    let measured = up_ms + down_ms;
    (measured > 0).then(|| up_ms as f64 * 100.0 / measured as f64)
}

impl App {
    /// What visitors of `page` are shown now.
    pub async fn shown_page(&self, page: &StatusPage) -> ServiceResult<StatusSummary> {
        let now = self.now_ms();
        let (section_ids, rows) = page_monitors(self, page).await?;
        let first_day = Resolution::Day.bucket_of(now) - (DAYS_SHOWN as i64 - 1) * DAY_MS;
        // Today so far is a window of its own, like the others ending now: it holds the time
        // the newest results stand for, which no bucket holds until a later result closes it.
        let today = Resolution::Day.bucket_of(now);
        let windows = [
            DAY_MS,
            7 * DAY_MS,
            30 * DAY_MS,
            DAYS_SHOWN as i64 * DAY_MS,
            (now - today).max(1),
        ];
        let ids: Vec<String> = rows.iter().map(|r| r.id.clone()).collect();
        let names = names_on_page(page, &section_ids, &rows)?;
        // The uptimes (the most reads) beside the rest: a rendering's readers wait for its
        // reads, not for its CPU.
        let history = self.history();
        let uptimes = history.uptimes(&rows, "", &windows);
        let the_rest = async {
            let statuses = self.statuses_of(&rows).await?;
            // Every monitor's day buckets in one read (per 500 monitors), not one per monitor.
            let days = self.store.day_buckets_of(&ids, first_day).await?;
            let incidents = self
                .status_pages()
                .shown_incidents(page, &names, now)
                .await?;
            let maintenance = shown_maintenance(self, &rows, &names, now).await?;
            ServiceResult::Ok((statuses, days, incidents, maintenance))
        };
        let (uptimes, (statuses, days, incidents, maintenance)) =
            tokio::try_join!(uptimes, the_rest)?;
        let statuses: HashMap<String, (ShownStatus, Option<u64>)> = statuses
            .into_iter()
            .map(|view| {
                let shown = (shown_status(view.status), view.latency_ms);
                (view.monitor_id.to_string(), shown)
            })
            .collect();
        let uptime = |window: usize, id: &str| {
            uptimes
                .get(window)
                .and_then(|by_id| by_id.get(id))
                .and_then(|w| w.uptime)
        };
        let days_of: HashMap<String, HashMap<i64, Option<f64>>> = days
            .into_iter()
            .map(|(id, buckets)| {
                let days = buckets
                    .into_iter()
                    .map(|(start, sums)| (start, percent(sums.up_ms, sums.down_ms)))
                    .collect();
                (id, days)
            })
            .collect();
        let by_id: HashMap<&str, &Monitor> = rows.iter().map(|m| (m.id.as_str(), m)).collect();
        let mut sections = Vec::with_capacity(page.sections.len());
        for (section, ids) in page.sections.iter().zip(&section_ids) {
            let mut monitors = Vec::with_capacity(ids.len());
            for id in ids {
                // Deleted since the page was written: not shown.
                let Some(row) = by_id.get(id.as_str()) else {
                    continue;
                };
                let uuid = stored_id(&row.id)?;
                let days = days_of.get(&row.id);
                monitors.push(ShownMonitor {
                    id: uuid,
                    name: display_name(section, uuid, row),
                    status: statuses
                        .get(&row.id)
                        .map_or(ShownStatus::Unknown, |(status, _)| *status),
                    uptime_90d: uptime(3, &row.id),
                    uptime_24h: uptime(0, &row.id),
                    uptime_7d: uptime(1, &row.id),
                    uptime_30d: uptime(2, &row.id),
                    latency_ms: statuses.get(&row.id).and_then(|(_, latency)| *latency),
                    days: (0..DAYS_SHOWN as i64)
                        .map(|d| {
                            let start = first_day + d * DAY_MS;
                            ShownDay {
                                date: day_of(start),
                                uptime: if start == today {
                                    uptime(4, &row.id)
                                } else {
                                    days.and_then(|days| days.get(&start).copied().flatten())
                                },
                            }
                        })
                        .collect(),
                });
            }
            sections.push(ShownSection {
                name: section.name.clone(),
                monitors,
            });
        }
        let (status, outage) = StatusSummary::overall(
            sections
                .iter()
                .flat_map(|s| s.monitors.iter().map(|m| m.status)),
        );
        Ok(StatusSummary {
            page: ShownPage {
                title: page.title.clone(),
                slug: page.slug.clone(),
                description: page.description.clone(),
            },
            status,
            outage,
            sections,
            incidents,
            maintenance,
            generated_at: time_of(now),
        })
    }
}

/// The monitors `page` shows: each section's ids (by id in the operator's order, then by
/// tag, at most `MAX_PAGE_MONITORS` in all) and the rows of those that exist.
pub(super) async fn page_monitors(
    app: &App,
    page: &StatusPage,
) -> ServiceResult<(Vec<Vec<String>>, Vec<Monitor>)> {
    // Each section's monitors: by id in the operator's order, then by tag.
    let mut budget = MAX_PAGE_MONITORS;
    let mut section_ids: Vec<Vec<String>> = Vec::with_capacity(page.sections.len());
    for section in &page.sections {
        let mut ids: Vec<String> = Vec::new();
        let mut seen = HashSet::new();
        let named = section.monitor_ids.iter().map(ToString::to_string);
        let mut tagged = Vec::new();
        for tag in &section.tags {
            tagged.extend(app.store.monitors_tagged(tag).await?);
        }
        tagged.sort();
        for id in named.chain(tagged) {
            if budget > 0 && seen.insert(id.clone()) {
                ids.push(id);
                budget -= 1;
            }
        }
        section_ids.push(ids);
    }
    let all: Vec<String> = {
        let mut all: Vec<String> = section_ids.iter().flatten().cloned().collect();
        all.sort();
        all.dedup();
        all
    };
    let rows: Vec<Monitor> = app.store.monitors_by_ids(&all).await?;
    Ok((section_ids, rows))
}

/// The maintenance over `monitors` under way at `now` or starting within
/// `MAINTENANCE_AHEAD_DAYS`, by occurrence, with the monitors each covers by `names`.
async fn shown_maintenance(
    app: &App,
    monitors: &[Monitor],
    names: &HashMap<Uuid, String>,
    now: i64,
) -> ServiceResult<Vec<ShownMaintenance>> {
    let until = now + MAINTENANCE_AHEAD_DAYS * DAY_MS;
    let spans = maintenance_spans(app, monitors, names, now, until).await?;
    Ok(spans
        .into_iter()
        .map(|((start, end), affected)| ShownMaintenance {
            starts_at: time_of(start),
            ends_at: time_of(end),
            under_way: start <= now && now < end,
            affected,
        })
        .collect())
}

/// The occurrences of maintenance over `monitors` under way at `from` or starting before
/// `until`, each with the monitors it covers by `names` (occurrences of several windows
/// at the same times are one). Cost: one read of the windows not over at `from`; a scope
/// check per window and monitor; a walk of each covering window's rule.
pub(super) async fn maintenance_spans(
    app: &App,
    monitors: &[Monitor],
    names: &HashMap<Uuid, String>,
    from: i64,
    until: i64,
) -> ServiceResult<BTreeMap<(i64, i64), Vec<String>>> {
    let windows = app.maintenance().windows_now(from).await?;
    let mut by_time: BTreeMap<(i64, i64), Vec<String>> = BTreeMap::new();
    if windows.is_empty() {
        return Ok(by_time);
    }
    let mut covered: Vec<Vec<String>> = vec![Vec::new(); windows.len()];
    app.history()
        .each_placement(monitors, |monitor, placement| {
            let name = stored_id(&monitor.id).ok().and_then(|id| names.get(&id));
            for (i, window) in windows.iter().enumerate() {
                if let Some(name) = name.filter(|_| window.window.scope.covers(placement)) {
                    covered[i].push(name.clone());
                }
            }
        })
        .await?;
    for (window, covered) in windows.iter().zip(covered) {
        if covered.is_empty() {
            continue;
        }
        for span in occurrences_ahead(&window.window.schedule, from, until) {
            let affected = by_time.entry(span).or_default();
            for name in &covered {
                if !affected.contains(name) {
                    affected.push(name.clone());
                }
            }
        }
    }
    Ok(by_time)
}

/// Each shown monitor's name on a page: its display name in the first section that shows it,
/// or its own name.
pub(super) fn names_on_page(
    page: &StatusPage,
    section_ids: &[Vec<String>],
    rows: &[Monitor],
) -> anyhow::Result<HashMap<Uuid, String>> {
    let by_id: HashMap<&str, &Monitor> = rows.iter().map(|m| (m.id.as_str(), m)).collect();
    let mut names: HashMap<Uuid, String> = HashMap::new();
    for (section, ids) in page.sections.iter().zip(section_ids) {
        for id in ids {
            let Some(row) = by_id.get(id.as_str()) else {
                continue;
            };
            let uuid = stored_id(&row.id)?;
            names
                .entry(uuid)
                .or_insert_with(|| display_name(section, uuid, row));
        }
    }
    Ok(names)
}

/// A monitor's name in a section: the display name the section gives it, or its own.
fn display_name(section: &StatusPageSection, id: Uuid, row: &Monitor) -> String {
    section
        .display_names
        .iter()
        .find(|d| d.monitor_id == id)
        .map_or_else(|| row.name.clone(), |d| d.name.clone())
}

/// The UTC date a day bucket starts.
fn day_of(start_ms: i64) -> NaiveDate {
    time_of(start_ms).date_naive()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use shared_proto::status_pages::StatusPageSpec;
    use uuid::Uuid;

    use crate::config::ServeArgs;
    use crate::service::clock::Clock;

    /// A day boundary (UTC).
    const DAY_START: i64 = 20_834 * DAY_MS;
    const MIN: i64 = 60_000;

    #[test]
    fn what_is_not_known_now_is_never_shown_up() {
        for status in MonitorStatus::ALL {
            let shown = shown_status(status);
            if status != MonitorStatus::Up {
                assert_ne!(shown, ShownStatus::Up, "{status:?}");
            }
        }
        assert_eq!(shown_status(MonitorStatus::Stale), ShownStatus::Unknown);
        assert_eq!(shown_status(MonitorStatus::Paused), ShownStatus::Unknown);
    }

    #[test]
    fn a_day_without_measured_time_has_no_uptime() {
        assert_eq!(percent(0, 0), None);
        assert_eq!(percent(3, 1), Some(75.0));
        assert_eq!(day_of(0), NaiveDate::from_ymd_opt(1970, 1, 1).unwrap());
    }

    /// Yesterday's cell is its day bucket (half up, half down), today's the time so far; the
    /// days before the monitor existed have none; the monitor shows its display name.
    #[tokio::test]
    async fn the_cells_are_each_days_measured_uptime() {
        let dir = tempfile::tempdir().unwrap();
        let args = ServeArgs::with_sqlite_in(dir.path());
        let now = DAY_START + 60 * MIN;
        let (clock, _handle) = Clock::manual(now);
        let app = App::open_with_clock(&args, clock).await.unwrap();
        let poller = crate::store::testing::poller_row(DAY_START - DAY_MS, now);
        app.store.insert_poller(&poller).await.unwrap();
        let spec = serde_json::from_value(json!({
            "name": "internal-name", "kind": "http", "target": "http://127.0.0.1:9/",
            "interval_ms": 60_000, "timeout_ms": 5_000,
            "poller_mode": "pinned", "poller_id": poller.id,
        }))
        .unwrap();
        let monitor = app.create_monitor(spec).await.unwrap().id;
        // Yesterday from 12:00, ten results a minute apart: five up, then five down; then one
        // up a minute ago.
        let noon = DAY_START - DAY_MS / 2;
        let mut made: Vec<(i64, &str)> = (0..10)
            .map(|i| (noon + i * MIN, if i < 5 { "up" } else { "down" }))
            .collect();
        made.push((now - MIN, "up"));
        let results: Vec<_> = made
            .iter()
            .map(|(ts, status)| {
                json!({"id": Uuid::now_v7(), "monitor_id": monitor,
                    "ts": time_of(*ts).to_rfc3339(), "status": status, "latency_ms": 5,
                    "msg": "", "meta": {}})
            })
            .collect();
        let batch = serde_json::from_value(json!({"batch_id": Uuid::new_v4(), "results": results}))
            .unwrap();
        let stored = app.store.poller(&poller.id).await.unwrap().unwrap();
        app.ingest(&stored, batch).await.unwrap();

        let page: StatusPageSpec = serde_json::from_value(json!({
            "slug": "p", "title": "P",
            "sections": [{"name": "S", "monitor_ids": [monitor],
                "display_names": [{"monitor_id": monitor, "name": "Shown name"}]}],
        }))
        .unwrap();
        app.status_pages().create_page(page).await.unwrap();
        let page = app.status_pages().all_pages().await.unwrap().remove(0);
        let shown = app.shown_page(&page).await.unwrap();
        let monitor = &shown.sections[0].monitors[0];
        assert_eq!(monitor.name, "Shown name");
        let days = &monitor.days;
        assert_eq!(days.len(), DAYS_SHOWN);
        assert_eq!(days[DAYS_SHOWN - 1].date, day_of(DAY_START));
        let yesterday = days[DAYS_SHOWN - 2].uptime.expect("yesterday was measured");
        assert!((40.0..=60.0).contains(&yesterday), "{yesterday}");
        assert_eq!(days[DAYS_SHOWN - 1].uptime, Some(100.0), "today: up so far");
        assert_eq!(days[0].uptime, None, "before the monitor existed");
    }
}
