//! What the operators' page shows of many monitors at once: each with its status, its last
//! results (the heartbeat bar) and its uptime over 24 hours and 30 days, read in bulk for a
//! page of monitors. Rendering is `web`'s.

use std::collections::HashMap;

use shared_proto::history::UptimeWindow;
use shared_proto::settings_api::{MonitorStatusView, MonitorView, Page};

use super::monitors::MonitorFilter;
use super::App;
use crate::service::error::ServiceResult;
use crate::store::{Cursor, ResultRow};

/// Results in a heartbeat bar.
pub const BEATS: u32 = 50;
const DAY_MS: i64 = 86_400_000;

#[derive(Debug, Clone)]
pub struct MonitorOverview {
    pub view: MonitorView,
    pub status: MonitorStatusView,
    /// Newest first.
    pub beats: Vec<ResultRow>,
    pub uptime_24h: Option<f64>,
    pub uptime_30d: Option<f64>,
}

impl App {
    pub async fn monitor_overview(
        &self,
        filter: &MonitorFilter,
        after: &Cursor,
        limit: u32,
    ) -> ServiceResult<Page<MonitorOverview>> {
        let page = self.list_monitors_with_status(filter, after, limit).await?;
        let ids: Vec<String> = page
            .items
            .iter()
            .map(|(view, _)| view.id.to_string())
            .collect();
        let mut beats = self.store.recent_results_of(&ids, BEATS).await?;
        let monitors = self.store.monitors_by_ids(&ids).await?;
        let uptimes = self
            .history()
            .uptimes(&monitors, "", &[DAY_MS, 30 * DAY_MS])
            .await?;
        let uptime = |window: &HashMap<String, UptimeWindow>, id: &str| {
            window.get(id).and_then(|w| w.uptime)
        };
        let items = page
            .items
            .into_iter()
            .map(|(view, status)| {
                let id = view.id.to_string();
                MonitorOverview {
                    beats: beats.remove(&id).unwrap_or_default(),
                    uptime_24h: uptime(&uptimes[0], &id),
                    uptime_30d: uptime(&uptimes[1], &id),
                    view,
                    status,
                }
            })
            .collect();
        Ok(Page {
            items,
            next_cursor: page.next_cursor,
        })
    }

    /// A monitor's newest results, newest first.
    pub async fn recent_results(
        &self,
        monitor_id: &str,
        count: u32,
    ) -> ServiceResult<Vec<ResultRow>> {
        let ids = [monitor_id.to_string()];
        Ok(self
            .store
            .recent_results_of(&ids, count)
            .await?
            .remove(monitor_id)
            .unwrap_or_default())
    }
}

/// How a poller is named on the page.
#[derive(Debug, Clone)]
pub struct PollerLabel {
    pub name: String,
    pub region: Option<String>,
}

impl App {
    /// Every live poller's display name (its alias, else its name) and region, by id.
    pub async fn poller_labels(&self) -> ServiceResult<HashMap<String, PollerLabel>> {
        Ok(self
            .store
            .all_pollers()
            .await?
            .into_iter()
            .map(|p| {
                let label = PollerLabel {
                    name: p.alias.unwrap_or(p.name),
                    region: p.region,
                };
                (p.id, label)
            })
            .collect())
    }
}
