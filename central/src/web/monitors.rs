//! The monitors list (the home page) and a monitor's own page.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::Uri;
use maud::{html, Markup};
use serde::Deserialize;
use shared_proto::history::HistoryResolution;
use shared_proto::poller_api::Verdict;
use shared_proto::settings_api::{MonitorStatus, MonitorStatusView, MonitorView};
use shared_proto::PollerMode;
use uuid::Uuid;

use super::charts::{heartbeat_bar, latency_chart};
use super::layout::{self, ago, badge, csrf_field, duration, maybe_ago, millis, percent, Section};
use super::session::Session;
use super::WebResult;
use crate::error::ApiError;
use crate::service::monitors::MonitorFilter;
use crate::service::overview::{PollerLabel, BEATS};
use crate::service::{time_of, App};
use crate::store::Cursor;

const PAGE_SIZE: u32 = 50;
/// Live parts of a page reload themselves this often (htmx; without script, a reload does).
pub const REFRESH: &str = "every 5s";

#[derive(Debug, Default, Deserialize)]
pub struct ListQuery {
    #[serde(default)]
    status: String,
    #[serde(default)]
    region: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    tag: String,
    #[serde(default)]
    cursor: String,
}

fn parse_status(text: &str) -> Option<MonitorStatus> {
    serde_json::from_value(serde_json::Value::String(text.to_string())).ok()
}

const STATUSES: [&str; 7] = [
    "up",
    "down",
    "degraded",
    "stale",
    "maintenance",
    "paused",
    "pending",
];

pub async fn list(
    State(app): State<Arc<App>>,
    session: Session,
    uri: Uri,
    Query(query): Query<ListQuery>,
) -> WebResult<Markup> {
    let filter = MonitorFilter {
        status: parse_status(&query.status),
        region: Some(query.region.trim().to_string()).filter(|r| !r.is_empty()),
        name: Some(query.name.trim().to_string()).filter(|n| !n.is_empty()),
        tag: Some(query.tag.trim().to_string()).filter(|t| !t.is_empty()),
    };
    let cursor = match query.cursor.as_str() {
        "" => Cursor::start(),
        text => Cursor::decode(text).ok_or_else(|| {
            ApiError::bad_request(
                "invalid_query",
                "`cursor` is not one this page made; start over",
            )
        })?,
    };
    let page = app.monitor_overview(&filter, &cursor, PAGE_SIZE).await?;
    let pollers = app.poller_labels().await?;
    let now = app.now();
    let next = page.next_cursor.as_ref().map(|next| {
        let query = serde_urlencoded::to_string([
            ("status", query.status.as_str()),
            ("region", query.region.as_str()),
            ("name", query.name.as_str()),
            ("tag", query.tag.as_str()),
            ("cursor", next.as_str()),
        ])
        .unwrap_or_default();
        format!("/?{query}")
    });
    let body = html! {
        div.heading {
            h1 { "Monitors" }
            a.button.for-editors href="/monitors/new" { "New monitor" }
        }
        form.filters method="get" action="/" role="search" {
            label { "Name " input type="search" name="name" value=(query.name); }
            label { "Status "
                select name="status" {
                    option value="" { "any" }
                    @for status in STATUSES {
                        option value=(status) selected[query.status == status] { (status) }
                    }
                }
            }
            label { "Region " input type="text" name="region" value=(query.region) size="10"; }
            label { "Tag " input type="text" name="tag" value=(query.tag) size="12"; }
            button type="submit" { "Filter" }
        }
        @if let Some(tag) = &filter.tag {
            form.actions method="post" action="/monitors/tagged" {
                (csrf_field(&session))
                input type="hidden" name="tag" value=(tag);
                span { "Every monitor tagged " code { (tag) } ": " }
                button type="submit" name="action" value="pause" { "Pause all" }
                button type="submit" name="action" value="resume" { "Resume all" }
            }
        }
        div.table-wrap {
            table.monitors {
                caption.visually-hidden { "Monitors and their status" }
                thead { tr {
                    th scope="col" { "Status" } th scope="col" { "Monitor" }
                    th scope="col" { "Last " (BEATS) " results" }
                    th scope="col" { "24 h" } th scope="col" { "30 d" }
                    th scope="col" { "Latency" } th scope="col" { "Poller / region" }
                } }
                tbody #monitor-rows hx-get=(uri) hx-trigger=(REFRESH) hx-select="#monitor-rows"
                    hx-swap="outerHTML" {
                    @for item in &page.items {
                        tr {
                            td { (status_cell(&item.status)) }
                            td { a href={ "/monitors/" (item.view.id) } { (item.view.spec.name) }
                                 br; span.muted.small { (item.view.spec.kind.as_str()) " " (item.view.spec.target) }
                                 (tag_links(&item.view.spec.tags)) }
                            td { (heartbeat_bar(&item.beats, BEATS as usize)) }
                            td { (percent(item.uptime_24h)) }
                            td { (percent(item.uptime_30d)) }
                            td { (millis(item.status.latency_ms)) }
                            td { (placement_cell(&item.view, &pollers)) }
                        }
                    }
                    @if page.items.is_empty() {
                        tr { td colspan="7" { "No monitors match. " a href="/monitors/new" { "Create one." } } }
                    }
                }
            }
        }
        nav.pager aria-label="Pages" {
            @if !query.cursor.is_empty() { a href="/" { "First page" } }
            @if let Some(next) = next { a href=(next) rel="next" { "Next page" } }
        }
        p.muted.small { "Updated " (ago(now, now)) "; the list refreshes itself every 5 s." }
    };
    Ok(layout::page(&session, Section::Monitors, "Monitors", body))
}

/// A monitor's tags, each a link to the list of the monitors carrying it.
pub fn tag_links(tags: &[String]) -> Markup {
    html! {
        @if !tags.is_empty() {
            br;
            @for tag in tags {
                a.tag href={ "/?" (serde_urlencoded::to_string([("tag", tag)]).unwrap_or_default()) } { (tag) } " "
            }
        }
    }
}

fn status_cell(status: &MonitorStatusView) -> Markup {
    html! {
        (badge(status.status.as_str()))
        @if let Some(reason) = &status.reason {
            @if matches!(status.status, MonitorStatus::Stale | MonitorStatus::Pending) {
                br; span.reason.small { (reason) }
            }
        }
    }
}

fn placement_cell(view: &MonitorView, pollers: &HashMap<String, PollerLabel>) -> Markup {
    if view.spec.poller_mode == PollerMode::Multi {
        let regions = view
            .spec
            .poller_regions
            .clone()
            .unwrap_or_default()
            .join(", ");
        return html! { "multi: " (regions) };
    }
    match view.assigned_poller_id.map(|id| id.to_string()) {
        Some(id) => match pollers.get(&id) {
            Some(label) => html! {
                (label.name) @if let Some(region) = &label.region { br; span.muted.small { (region) } }
            },
            None => html! { span.muted { "a deleted poller" } },
        },
        None => html! { span.muted { (view.placement_reason.as_deref().unwrap_or("unplaced")) } },
    }
}

#[derive(Debug, Default, Deserialize)]
pub struct DetailQuery {
    #[serde(default)]
    range: String,
    /// Commands just given from this page ("Check now", "Reset"), to show what came of them.
    #[serde(default)]
    commands: String,
}

/// The chart ranges: (query value, label, resolution, span).
const RANGES: [(&str, &str, HistoryResolution, i64); 4] = [
    ("1h", "Recent (1 h)", HistoryResolution::Minute, 3_600_000),
    ("24h", "24 h", HistoryResolution::Minute, 86_400_000),
    ("7d", "7 d", HistoryResolution::Hour, 7 * 86_400_000),
    ("30d", "30 d", HistoryResolution::Hour, 30 * 86_400_000),
];

pub async fn detail(
    State(app): State<Arc<App>>,
    session: Session,
    Path(id): Path<Uuid>,
    uri: Uri,
    Query(query): Query<DetailQuery>,
) -> WebResult<Markup> {
    let monitor = app.get_monitor(id).await?;
    let status = app.monitor_status(id).await?;
    let uptime = app.history().monitor_uptime(id, None).await?;
    let range = RANGES
        .iter()
        .find(|r| r.0 == query.range)
        .unwrap_or(&RANGES[0]);
    let since = app.now_ms() - range.3;
    let history = app
        .history()
        .monitor_history(id, range.2, Some(since), None)
        .await?;
    // One read: the newest 500 give the status changes, their first 20 the results table.
    let newest = app.recent_results(&id.to_string(), 500).await?;
    let recent = &newest[..newest.len().min(20)];
    let pollers = app.poller_labels().await?;
    let parents = app
        .parents()
        .monitor_names(&monitor.spec.parent_ids)
        .await?;
    let now = app.now();
    let delayed = delay_warning(monitor.spec.paused, &status);
    let changes = status_changes(&newest);
    let commands = super::commands::named(&app, &query.commands).await?;
    let dependencies = app.dependencies().monitor_dependencies(id).await?;
    let heartbeat = monitor.spec.kind == shared_proto::CheckKind::Heartbeat;
    let pings = if heartbeat {
        Some(app.pings(id).await?)
    } else {
        None
    };
    let windows = [
        ("24 h", &uptime.windows.day),
        ("7 d", &uptime.windows.week),
        ("30 d", &uptime.windows.month),
        ("1 year", &uptime.windows.year),
    ];
    let body = html! {
        div.heading {
            h1 { (monitor.spec.name) }
            div.actions {
                a.button.for-editors href={ "/monitors/" (id) "/edit" } { "Edit" }
                @let (action, label) = if monitor.spec.paused { ("resume", "Resume") } else { ("pause", "Pause") };
                form method="post" action={ "/monitors/" (id) "/" (action) } {
                    (csrf_field(&session)) button type="submit" { (label) }
                }
                @if !monitor.spec.paused && !heartbeat {
                    form method="post" action={ "/monitors/" (id) "/check" } {
                        (csrf_field(&session)) button type="submit" { "Check now" }
                    }
                    @let dead = status.engine.as_ref().is_some_and(|e| e.dead_letter.is_some());
                    form method="post" action={ "/monitors/" (id) "/reset" }
                        title="Forget the breaker, backoff, auto-pause and dead letter, and run now" {
                        (csrf_field(&session)) button type="submit" { @if dead { "Release" } @else { "Reset" } }
                    }
                }
                (super::maintenance::mute_control(&session, id))
                form method="post" action={ "/monitors/" (id) "/delete" }
                    data-confirm="Delete this monitor and its history?" {
                    (csrf_field(&session)) button.danger type="submit" { "Delete" }
                }
            }
        }
        p.muted { (monitor.spec.kind.as_str()) " " code { (monitor.spec.target) }
            @if heartbeat { " · pinged by its job; central answers" }
            @else { " · every " (monitor.spec.interval_ms / 1000) " s · " (placement_cell(&monitor, &pollers)) }
            (tag_links(&monitor.spec.tags))
            @if !parents.is_empty() {
                br; "Depends on "
                @for (i, (parent, name)) in parents.iter().enumerate() {
                    @if i > 0 { ", " }
                    a href={ "/monitors/" (parent) } { (name) }
                }
            } }
        @if !commands.is_empty() {
            (super::commands::outcome(super::commands::title_of(&commands[0].kind), &commands))
        }
        div #live hx-get=(uri) hx-trigger=(REFRESH) hx-select="#live" hx-swap="outerHTML" {
            @if let Some(warning) = delayed {
                p.warning role="status" { (warning) }
            }
            dl.facts {
                dt { "Status" } dd { (status_cell(&status)) }
                dt { "Last result" } dd { (maybe_ago(status.last_result_at, now)) " " (status.message.as_deref().unwrap_or("")) }
                dt { "Latency" } dd { (millis(status.latency_ms)) }
                dt { "Next check" } dd { (maybe_ago(status.next_check_at, now)) }
                @if let Some(health) = status.health {
                    dt { "Lately" } dd.health { (layout::wire_name(health)) }
                }
                @if let Some(engine) = status.engine.as_ref().filter(|e| !e.notes.is_empty()) {
                    dt { "Engine" } dd.engine-notes { @for note in &engine.notes { span.reason { (note) } br; } }
                }
            }
            @if !status.locations.is_empty() {
                h2 { "Locations" @if let Some(q) = status.quorum { " (down at " (q) ")" } }
                table { thead { tr { th scope="col" { "Region" } th scope="col" { "Status" } th scope="col" { "Poller" }
                    th scope="col" { "Last result" } th scope="col" { "Latency" } } }
                    tbody { @for location in &status.locations { tr {
                        td { (location.region) }
                        td { (badge(&layout::wire_name(location.status)))
                             @if let Some(reason) = &location.reason { br; span.reason.small { (reason) } } }
                        td { @match location.poller_id.and_then(|p| pollers.get(&p.to_string())) {
                            Some(label) => (label.name), None => span.muted { "none" } } }
                        td { (maybe_ago(location.last_result_at, now)) }
                        td { (millis(location.latency_ms)) }
                    } } }
                }
            }
            @if let Some(pings) = &pings { (super::heartbeats::section(&session, id, pings, now)) }
            (super::dependencies::monitor_section(&dependencies, now))
            h2 { "Uptime" }
            p.muted.small { "Uptime is time: each result stands until the next, at most an interval and the check's timeout "
                "(a heartbeat's: its wait for a ping and the grace); "
                "unmeasured time (silence, pauses, before the monitor existed) counts neither way." }
            @if let Some(note) = recovery_note(&monitor) { p.notice.recovery-late { (note) } }
            div.table-wrap { table.uptime { thead { tr { th scope="col" { "Window" } th scope="col" { "Uptime" } th scope="col" { "Down" }
                th scope="col" { "Unmeasured" } th scope="col" { "Checks" }
                th scope="col" { "Mean latency" } th scope="col" { "p95" } } }
                tbody { @for (label, window) in windows { tr {
                    td { (label) } td { (percent(window.uptime)) } td { (duration(window.down_ms)) }
                    td { (duration(window.unmeasured_ms)) } td { (window.checks) }
                    td { (millis(window.latency_ms_mean.map(|m| m.round() as u64))) } td { (millis(window.latency_ms_p95)) }
                } } }
            } }
            @if !uptime.locations.is_empty() {
                div.table-wrap { table.uptime aria-label="Uptime per location" { thead { tr { th scope="col" { "Location" }
                    @for (label, _) in windows { th scope="col" { (label) } } } }
                    tbody { @for location in &uptime.locations { tr {
                        td { (location.region) }
                        @for window in [&location.windows.day, &location.windows.week, &location.windows.month, &location.windows.year] {
                            td { (percent(window.uptime)) }
                        }
                    } } }
                } }
            }
            h2 { "Latency" }
            nav.ranges aria-label="Chart range" {
                @for (value, label, _, _) in RANGES {
                    a href={ "?range=" (value) } aria-current=[(value == range.0).then_some("true")] { (label) }
                }
            }
            (latency_chart(&history.buckets, &format!("Latency, {}", range.1)))
            h2 { "Recent results" }
            div.table-wrap { table { thead { tr { th scope="col" { "When" } th scope="col" { "Result" }
                th scope="col" { "Latency" } th scope="col" { "Message" } th scope="col" { "From" } } }
                tbody { @for result in recent { tr {
                    td { (ago(time_of(result.ts), now)) } td { (badge(result.status.as_str())) }
                    td { (millis(result.latency_ms.and_then(|l| u64::try_from(l).ok()))) }
                    td { (result.msg) }
                    td { @match &result.region { Some(region) => (region), None => (pollers.get(&result.poller_id).map(|p| p.name.as_str()).unwrap_or("")) } }
                } } }
            } }
            h2 { "Status changes" }
            @if changes.is_empty() { p.muted { "None among the last 500 results." } }
            ul.events { @for (at, region, from, to) in &changes {
                li { (ago(time_of(*at), now)) ": " (badge(from)) " → " (badge(to))
                     @if let Some(region) = region { " in " (region) } }
            } }
        }
    };
    Ok(layout::page(
        &session,
        Section::Monitors,
        &monitor.spec.name,
        body,
    ))
}

/// What the protections a monitor opted into cost (issue 68): with the defaults a failing
/// target is checked every interval; longer backoff, the breaker, auto-pause or dead letters
/// make it wait longer, and its recovery may be seen that late.
fn recovery_note(monitor: &MonitorView) -> Option<String> {
    let common =
        shared_proto::settings::MonitorSettings::parse(monitor.spec.kind, &monitor.spec.settings)
            .ok()?
            .common;
    let late = common.recovery_late_by_ms(monitor.spec.interval_ms)?;
    let mut chosen = Vec::new();
    if common.backoff_max_ms > monitor.spec.interval_ms {
        chosen.push("a backoff past its interval");
    }
    if common.breaker_threshold > 0 {
        chosen.push("the circuit breaker");
    }
    if common.auto_pause_threshold > 0.0 {
        chosen.push("auto-pause");
    }
    if common.dead_letter_after > 0 {
        chosen.push("dead letters");
    }
    Some(format!(
        "This monitor opted into {} (for polling APIs that must not be hammered): while its \
         target fails, a recovery may be seen up to {} late.",
        chosen.join(", "),
        super::layout::duration_text(late)
    ))
}

/// A sentence when the monitor's data is late: when status derivation (`service::status`)
/// says it is stale, with its reason. The page has no rule of its own, so the warning and the
/// status beside it never disagree.
fn delay_warning(paused: bool, status: &MonitorStatusView) -> Option<String> {
    if paused || status.status != MonitorStatus::Stale {
        return None;
    }
    Some(format!(
        "Data is delayed: {}",
        status.reason.as_deref().unwrap_or("no recent results")
    ))
}

/// The verdict changes among results given newest first, newest change first, per location:
/// (when, location, from, to).
fn status_changes(
    results_newest_first: &[crate::store::ResultRow],
) -> Vec<(i64, Option<String>, String, String)> {
    let mut last: HashMap<Option<&str>, Verdict> = HashMap::new();
    let mut changes = Vec::new();
    for result in results_newest_first.iter().rev() {
        let Some(verdict) = result.status.verdict() else {
            continue;
        };
        let region = result.region.as_deref();
        if let Some(previous) = last.insert(region, verdict) {
            if previous != verdict {
                changes.push((
                    result.ts,
                    result.region.clone(),
                    previous.as_str().to_string(),
                    verdict.as_str().to_string(),
                ));
            }
        }
    }
    changes.reverse();
    changes
}

#[cfg(test)]
mod delay_tests {
    use super::*;
    use chrono::Utc;

    fn status(status: &str, last_result_ago_ms: i64) -> MonitorStatusView {
        let at = Utc::now() - chrono::Duration::milliseconds(last_result_ago_ms);
        serde_json::from_value(serde_json::json!({
            "monitor_id": uuid::Uuid::nil(), "status": status, "poller_id": null,
            "last_result_at": at, "latency_ms": 3, "message": "ok", "next_check_at": null,
            "reason": (status == "stale").then_some("no result for 3m"),
        }))
        .unwrap()
    }

    #[test]
    fn the_page_calls_data_delayed_exactly_when_the_status_is_stale() {
        // Older than two 5 s intervals plus 10 s, yet within the staleness grace: the status
        // is up, and the page says nothing else (it once had a rule of its own).
        assert_eq!(delay_warning(false, &status("up", 25_000)), None);
        assert_eq!(
            delay_warning(false, &status("stale", 180_000)).as_deref(),
            Some("Data is delayed: no result for 3m")
        );
        assert_eq!(delay_warning(true, &status("stale", 180_000)), None);
    }
}
