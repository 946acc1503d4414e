//! Maintenance windows on the page: the list (under way, planned, over), a form for a new one
//! (one-off, or recurring with an RRULE, in a time zone; over regions, tags, pollers or monitor
//! ids), deleting one, and "Mute for" from a monitor's page. The form's local time is read
//! in its time zone here; everything else is `service::maintenance`'s.

use crate::service::error::ServiceError;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use chrono::{NaiveDateTime, TimeZone, Utc};
use maud::{html, Markup};
use shared_proto::maintenance::{
    MaintenanceNotify, MaintenanceWindowSpec, MaintenanceWindowView, MuteRequest, Recurrence,
};
use shared_proto::settings_api::PollerView;
use uuid::Uuid;

use super::fields::optional;
use super::layout::{self, badge, csrf_field, Section};
use super::session::{CsrfForm, Session};
use super::WebResult;
use crate::error::ApiError;
use crate::service::pollers::PollerFilter;
use crate::service::App;
use crate::store::Cursor;
use shared_proto::as_code::ManagedKind;

/// What the form sent, as typed.
#[derive(Debug, Default, Clone)]
pub struct WindowForm {
    csrf: String,
    name: String,
    starts: String,
    time_zone: String,
    length: String,
    rule: String,
    regions: String,
    tags: String,
    monitor_ids: String,
    poller_ids: Vec<String>,
    quiet: bool,
    stop_checks: bool,
}

impl WindowForm {
    fn from_pairs(pairs: Vec<(String, String)>) -> Self {
        let mut form = WindowForm::default();
        for (key, value) in pairs {
            match key.as_str() {
                "csrf" => form.csrf = value,
                "name" => form.name = value,
                "starts" => form.starts = value,
                "time_zone" => form.time_zone = value,
                "length" => form.length = value,
                "rule" => form.rule = value,
                "regions" => form.regions = value,
                "tags" => form.tags = value,
                "monitor_ids" => form.monitor_ids = value,
                "poller_ids" => form.poller_ids.push(value),
                "notify" => form.quiet = value == "none",
                "stop_checks" => form.stop_checks = value == "on",
                _ => {}
            }
        }
        form
    }

    /// The spec the form describes, or what to fix (naming the field as the form labels it).
    fn spec(&self) -> Result<MaintenanceWindowSpec, String> {
        let zone_name = optional(&self.time_zone).unwrap_or_else(|| "UTC".into());
        let zone: chrono_tz::Tz = zone_name
            .parse()
            .map_err(|_| format!("Time zone: `{zone_name}` is not an IANA time zone"))?;
        let local = NaiveDateTime::parse_from_str(self.starts.trim(), "%Y-%m-%dT%H:%M")
            .map_err(|_| "Starts: give a date and time (2026-11-28T22:00)".to_string())?;
        // In a change to summer time a local time may not exist; the earliest reading of one
        // that exists twice (the change back) is the first to come.
        let starts_at = zone
            .from_local_datetime(&local)
            .earliest()
            .ok_or_else(|| {
                format!("Starts: {local} does not exist in {zone_name} (the clocks skip it)")
            })?
            .with_timezone(&Utc);
        let length = shared_proto::duration::parse_duration(self.length.trim())
            .map_err(|_| "Length: give a duration (2h, 30m, 1d)".to_string())?;
        let length_ms = length.as_millis().min(u64::MAX as u128) as u64;
        let (ends_at, recurrence) = match optional(&self.rule) {
            Some(rule) => (
                None,
                Some(Recurrence {
                    rule,
                    time_zone: zone_name,
                    duration_ms: length_ms,
                }),
            ),
            None => (
                Some(
                    starts_at
                        + chrono::Duration::milliseconds(length_ms.min(i64::MAX as u64) as i64),
                ),
                None,
            ),
        };
        let list = |text: &str| -> Vec<String> {
            text.split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect()
        };
        let ids = |field: &str, texts: Vec<String>| -> Result<Vec<Uuid>, String> {
            texts
                .iter()
                .map(|t| Uuid::try_parse(t).map_err(|_| format!("{field}: `{t}` is not an id")))
                .collect()
        };
        Ok(MaintenanceWindowSpec {
            name: self.name.trim().to_string(),
            starts_at,
            ends_at,
            recurrence,
            monitor_ids: ids("Monitor ids", list(&self.monitor_ids))?,
            poller_ids: ids("Pollers", self.poller_ids.clone())?,
            regions: list(&self.regions),
            tags: super::monitor_input::split_tags(&self.tags),
            notify: if self.quiet {
                MaintenanceNotify::None
            } else {
                MaintenanceNotify::Recoveries
            },
            stop_checks: self.stop_checks,
        })
    }
}

/// A length as the form takes it: `90m`, `2h`, `1d`.
fn minutes(ms: u64) -> String {
    let minutes = ms / 60_000;
    match minutes {
        m if m % 1440 == 0 => format!("{}d", m / 1440),
        m if m % 60 == 0 => format!("{}h", m / 60),
        m => format!("{m}m"),
    }
}

fn when(window: &MaintenanceWindowView) -> Markup {
    let at = |t: chrono::DateTime<Utc>| t.format("%Y-%m-%d %H:%M UTC").to_string();
    html! {
        @match (&window.recurrence, window.ends_at) {
            (Some(r), _) => { code { (r.rule) } " in " (r.time_zone) ", "
                (minutes(r.duration_ms)) " each, from " (at(window.starts_at)) }
            (None, Some(end)) => { (at(window.starts_at)) " – " (at(end)) }
            (None, None) => { (at(window.starts_at)) }
        }
    }
}

fn scope(window: &MaintenanceWindowView, pollers: &[PollerView]) -> Markup {
    let poller_name = |id: &Uuid| {
        pollers.iter().find(|p| p.id == *id).map_or_else(
            || id.to_string(),
            |p| p.alias.clone().unwrap_or_else(|| p.name.clone()),
        )
    };
    html! {
        @if !window.regions.is_empty() { "regions " (window.regions.join(", ")) br; }
        @if !window.tags.is_empty() { "tags" (super::monitors::tag_links(&window.tags)) br; }
        @if !window.poller_ids.is_empty() {
            "pollers " (window.poller_ids.iter().map(poller_name).collect::<Vec<_>>().join(", ")) br;
        }
        @for id in &window.monitor_ids { a href={ "/monitors/" (id) } { "monitor " (id.to_string()[..8]) } " " }
    }
}

async fn page(
    app: &App,
    session: &Session,
    form: &WindowForm,
    error: Option<String>,
) -> WebResult<Markup> {
    let windows = app
        .maintenance()
        .list_windows(&Cursor::start(), 1000)
        .await?
        .items;
    let managed: std::collections::HashMap<uuid::Uuid, String> = app
        .managed_objects(Some(ManagedKind::MaintenanceWindows))
        .await?
        .into_iter()
        .map(|m| (m.object_id, m.key))
        .collect();
    let pollers = app
        .list_pollers(&PollerFilter::default(), &Cursor::start(), 1000)
        .await?
        .items;
    let time_zone = if form.time_zone.is_empty() {
        "UTC"
    } else {
        form.time_zone.as_str()
    };
    let length = if form.length.is_empty() {
        "1h"
    } else {
        form.length.as_str()
    };
    let body = html! {
        h1 { "Maintenance" }
        p { "While a window is under way the monitors it covers show " (badge("maintenance"))
            ": problems are not told, their time is left out of uptime, and checks go on. "
            "What is still wrong when it ends is told then. To mute one monitor, use “Mute for” on its page." }
        h2.for-editors { "New window" }
        @if let Some(error) = &error { p.form-error role="alert" { (error) } }
        form.window-form method="post" action="/maintenance" {
            (csrf_field(session))
            div.field { label for="window-name" { "Name" } input #window-name type="text" name="name" required value=(form.name); }
            div.field { label for="window-starts" { "Starts" } input #window-starts type="datetime-local" name="starts" required value=(form.starts); }
            div.field { label for="window-zone" { "Time zone" } input #window-zone type="text" name="time_zone" value=(time_zone);
                        p.hint { "An IANA name (Europe/Berlin): the start, and every repeat, is at this wall-clock time, summer or winter." } }
            div.field { label for="window-length" { "Length" } input #window-length type="text" name="length" value=(length);
                        p.hint { "e.g. 30m, 2h, 1d" } }
            div.field { label for="window-rule" { "Repeats (optional)" } input #window-rule type="text" name="rule" value=(form.rule);
                        p.hint { "An RRULE, e.g. FREQ=WEEKLY;BYDAY=SU or FREQ=MONTHLY;BYMONTHDAY=1; empty for once." } }
            div.field { label for="window-regions" { "Regions" } input #window-regions type="text" name="regions" value=(form.regions);
                        p.hint { "Comma-separated: every monitor running from them." } }
            div.field { label for="window-tags" { "Tags" } input #window-tags type="text" name="tags" value=(form.tags);
                        p.hint { "Comma-separated: every monitor carrying one of them." } }
            @if !pollers.is_empty() {
                fieldset { legend { "Pollers" }
                    @for poller in &pollers {
                        @let id = poller.id.to_string();
                        label.check { input type="checkbox" name="poller_ids" value=(id) checked[form.poller_ids.contains(&id)];
                            " " (poller.alias.as_deref().unwrap_or(&poller.name)) }
                    }
                }
            }
            div.field { label for="window-monitors" { "Monitor ids" } input #window-monitors type="text" name="monitor_ids" value=(form.monitor_ids);
                        p.hint { "Comma-separated." } }
            label.check { input type="checkbox" name="notify" value="none" checked[form.quiet]; " Tell nothing until it ends (not even recoveries)" }
            label.check { input type="checkbox" name="stop_checks" value="on" checked[form.stop_checks]; " Stop the checks of the monitors it names by id or tag until it ends" }
            button type="submit" { "Create window" }
        }
        h2 { "Windows" }
        @if windows.is_empty() { p.muted { "None yet." } } @else {
            div.table-wrap { table {
                thead { tr { th scope="col" { "Name" } th scope="col" { "When" } th scope="col" { "Covers" }
                    th scope="col" { "Now" } th scope="col" { "Manage" } } }
                tbody { @for window in &windows { tr {
                    td { (window.name)
                         @if let Some(key) = managed.get(&window.id) {
                             br; span.small.muted { "managed by a configuration file as " code { (key) } }
                         } }
                    td { (when(window)) }
                    td { (scope(window, &pollers)) }
                    td { @if let Some(current) = &window.current { (badge("maintenance")) " until " (current.ends_at.format("%Y-%m-%d %H:%M UTC")) }
                         @else if let Some(next) = &window.next { "next " (next.starts_at.format("%Y-%m-%d %H:%M UTC")) }
                         @else { span.muted { "over" } } }
                    td { form.inline method="post" action={ "/maintenance/" (window.id) "/delete" }
                        data-confirm="Delete this window? Monitors it covers leave maintenance now." {
                        (csrf_field(session)) button.danger type="submit" { "Delete" } } }
                } } }
            } }
        }
    };
    Ok(layout::page(
        session,
        Section::Maintenance,
        "Maintenance",
        body,
    ))
}

pub async fn list(State(app): State<Arc<App>>, session: Session) -> WebResult<Markup> {
    page(&app, &session, &WindowForm::default(), None).await
}

pub async fn create(
    State(app): State<Arc<App>>,
    session: Session,
    Form(pairs): Form<Vec<(String, String)>>,
) -> WebResult<Response> {
    let form = WindowForm::from_pairs(pairs);
    session.check(&form.csrf)?;
    let refused = |message: String| async {
        let page = page(&app, &session, &form, Some(message)).await?;
        Ok::<_, super::WebError>((StatusCode::BAD_REQUEST, page).into_response())
    };
    let spec = match form.spec() {
        Ok(spec) => spec,
        Err(message) => return refused(message).await,
    };
    match app.maintenance().create_window(spec).await {
        Ok(window) => Ok(super::made(Redirect::to("/maintenance"), window.id)),
        Err(ServiceError::Validation(e)) => refused(format!("`{}` {}", e.field, e.message)).await,
        Err(e) => Err(e.into()),
    }
}

pub async fn delete(
    State(app): State<Arc<App>>,
    session: Session,
    Path(id): Path<Uuid>,
    Form(form): Form<CsrfForm>,
) -> WebResult<Response> {
    session.check(&form.csrf)?;
    app.maintenance().delete_window(id).await?;
    Ok(Redirect::to("/maintenance").into_response())
}

/// `Mute for` on a monitor's page: `duration` is one of the choices offered there.
#[derive(Debug, serde::Deserialize)]
pub struct MuteForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    duration: String,
}

pub async fn mute(
    State(app): State<Arc<App>>,
    session: Session,
    Path(id): Path<Uuid>,
    Form(form): Form<MuteForm>,
) -> WebResult<Response> {
    session.check(&form.csrf)?;
    let duration = shared_proto::duration::parse_duration(form.duration.trim()).map_err(|_| {
        ApiError::from(shared_proto::ValidationError::new(
            "duration",
            "must be a duration (1h, 4h, 1d)",
        ))
    })?;
    let request = MuteRequest {
        duration_ms: duration.as_millis().min(u64::MAX as u128) as u64,
        notify: MaintenanceNotify::Recoveries,
    };
    app.maintenance().mute_monitor(id, request).await?;
    Ok(Redirect::to(&format!("/monitors/{id}")).into_response())
}

/// The "Mute for" control of a monitor's page.
pub fn mute_control(session: &Session, id: Uuid) -> Markup {
    html! {
        form.inline method="post" action={ "/monitors/" (id) "/mute" }
            title="A maintenance window over this monitor from now: nothing is told but its recovery, and the time is left out of uptime" {
            (csrf_field(session))
            label for="mute-for" { "Mute for" }
            select #mute-for name="duration" {
                option value="1h" { "1 hour" } option value="4h" { "4 hours" }
                option value="1d" { "1 day" } option value="7d" { "7 days" }
            }
            button type="submit" { "Mute" }
        }
    }
}
