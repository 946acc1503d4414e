//! The monitor form drawn (every field with its hint and its error beside it, placement,
//! each kind's settings) and its routes: create, edit (each also "Test": run once, save
//! nothing), pause, resume, delete. What the form holds and how it becomes a spec is
//! `monitor_input`'s.

use crate::service::error::ServiceError;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use maud::{html, Markup};
use serde::Deserialize;
use shared_proto::monitor::{DEFAULT_INTERVAL_MS, DEFAULT_TIMEOUT_MS};
use shared_proto::notifications::ChannelView;
use shared_proto::settings_api::{CommandsAnswer, PollerView};
use shared_proto::{CheckKind, MonitorPatch};
use uuid::Uuid;

use super::check_settings;
use super::commands;
use super::fields::{self, FieldError};
use super::layout::{self, Section};
use super::monitor_input::{field_of, full_patch, is_form_field, MonitorForm};
use super::session::Session;
use super::WebResult;
use crate::service::pollers::PollerFilter;
use crate::service::App;
use crate::store::Cursor;
use shared_proto::as_code::ManagedKind;

enum Mode {
    New,
    Edit(Uuid),
}

struct Choices {
    pollers: Vec<PollerView>,
    channels: Vec<ChannelView>,
    /// The key of the configuration file that manages the monitor edited, if one does.
    managed_key: Option<String>,
}

async fn choices(app: &App, mode: &Mode) -> WebResult<Choices> {
    let pollers = app
        .list_pollers(&PollerFilter::default(), &Cursor::start(), 1000)
        .await?
        .items;
    let channels = app
        .channels()
        .list_channels(&Cursor::start(), 1000)
        .await?
        .items;
    let managed_key = match mode {
        Mode::Edit(id) => app.managed_key(ManagedKind::Monitors, *id).await?,
        Mode::New => None,
    };
    Ok(Choices {
        pollers,
        channels,
        managed_key,
    })
}

fn render(
    session: &Session,
    mode: &Mode,
    form: &MonitorForm,
    error: Option<&FieldError>,
    choices: &Choices,
    tested: Option<&CommandsAnswer>,
) -> Markup {
    let error_for = |field: &str| fields::error_for(error, field).map(str::to_string);
    let described = |field: &str| error_for(field).map(|_| format!("{field}-error"));
    let message = |field: &str| fields::message(field, error);
    let text_field = |field: &str, label: &str, value: &str, hint: &str| {
        fields::text_field(field, label, value, hint, error)
    };
    let (title, action) = match mode {
        Mode::New => ("New monitor".to_string(), "/monitors".to_string()),
        Mode::Edit(id) => (format!("Edit {}", form.name), format!("/monitors/{id}")),
    };
    // The kind of an existing monitor is fixed: only its own settings are offered.
    let kinds: Vec<CheckKind> = match mode {
        Mode::New => CheckKind::ALL.to_vec(),
        Mode::Edit(_) => CheckKind::parse(&form.kind).into_iter().collect(),
    };
    let mode_value = if form.poller_mode.is_empty() {
        "auto"
    } else {
        form.poller_mode.as_str()
    };
    html! {
        h1 { (title) }
        @if let Some(key) = &choices.managed_key { (super::layout::managed_note(key)) }
        @if let Some(e) = error.filter(|e| !is_form_field(&e.field)) {
            p.form-error role="alert" { (e.message) }
        }
        @if let Some(answer) = tested {
            (commands::outcome("Test", &answer.commands))
        }
        form.monitor-form method="post" action=(action) novalidate {
            input type="hidden" name="csrf" value=(session.csrf());
            @if let Mode::Edit(_) = mode {
                input type="hidden" name="revision" value=(form.revision);
            }
            (text_field("name", "Name", &form.name, ""))
            div.field {
                label for="kind" { "Kind" }
                @match mode {
                    Mode::New => select #kind.kind-choice name="kind" aria-describedby=[described("kind")] {
                        @for kind in CheckKind::ALL {
                            option value=(kind.as_str()) selected[form.kind == kind.as_str()] { (kind.as_str()) }
                        }
                    },
                    Mode::Edit(_) => {
                        input #kind type="text" value=(form.kind) readonly;
                        input type="hidden" name="kind" value=(form.kind);
                        p.hint { "The kind of a monitor cannot change; create a new one." }
                    },
                }
                (message("kind"))
            }
            (text_field("target", "Target", &form.target, "http(s)://host/path, host:port (tcp, tls), a host name (dns), a host name or IP (icmp), or what pings (heartbeat)"))
            (text_field("interval_ms", "Check every (ms)", &form.interval_ms, "5000 to 3600000; default 30000"))
            (text_field("timeout_ms", "Timeout (ms)", &form.timeout_ms, "100 to 120000, at most the interval; default 5000"))
            (text_field("tags", "Tags", &form.tags, "e.g. team:db, env:prod; windows, channels and pause by tag target them"))
            (text_field("parent_ids", "Depends on", &form.parent_ids, "ids of the monitors this one sits behind (a switch, a host), comma-separated: while one is down, this one's problems are told with it, not alone"))
            fieldset {
                legend { "Placement" }
                div.field {
                    label for="poller_mode" { "Where it runs" }
                    select #poller_mode name="poller_mode" aria-describedby=[described("poller_mode")] {
                        @for (value, label) in [("auto", "auto: any online poller"), ("grouped", "grouped: a region (and datacenter)"),
                                                ("pinned", "pinned: one poller"), ("multi", "multi: several regions, with a quorum")] {
                            option value=(value) selected[mode_value == value] { (label) }
                        }
                    }
                    (message("poller_mode"))
                }
                (text_field("poller_region", "Region (grouped)", &form.poller_region, ""))
                (text_field("poller_datacenter", "Datacenter (grouped, optional)", &form.poller_datacenter, ""))
                div.field {
                    label for="poller_id" { "Poller (pinned)" }
                    select #poller_id name="poller_id" aria-describedby=[described("poller_id")] {
                        option value="" { "—" }
                        @for poller in &choices.pollers {
                            option value=(poller.id) selected[form.poller_id == poller.id.to_string()] {
                                (poller.alias.as_deref().unwrap_or(&poller.name))
                                @if let Some(region) = &poller.region { " (" (region) ")" }
                            }
                        }
                    }
                    (message("poller_id"))
                }
                (text_field("poller_capability", "Capability (optional)", &form.poller_capability, "only pollers that announce it"))
                (text_field("poller_regions", "Regions (multi)", &form.poller_regions, "comma-separated, two or more"))
                (text_field("quorum", "Quorum (multi)", &form.quorum, "locations that must see it down for down; default a majority"))
                div.field {
                    label for="failover" { "Failover" }
                    select #failover name="failover" {
                        @for (value, label) in [("", "default (on, off when pinned)"), ("yes", "on"), ("no", "off")] {
                            option value=(value) selected[form.failover == value] { (label) }
                        }
                    }
                }
            }
            (check_settings::render(&kinds, &form.check_values, &error_for))
            div.field {
                label for="settings" { "More settings (JSON)" }
                textarea #settings name="settings" rows="4" aria-describedby=[described("settings")]
                    aria-invalid=[error_for("settings").map(|_| "true")] { (form.settings) }
                p.hint { "Keys every kind takes, e.g. {\"confirm_down\": 2, \"retries\": 1}; see docs/protocol.md." }
                (message("settings"))
            }
            @if !choices.channels.is_empty() {
                fieldset {
                    legend { "Notify (besides the default channels)" }
                    @for channel in &choices.channels {
                        @let id = channel.id.to_string();
                        label.check { input type="checkbox" name="notification_channel_ids" value=(id)
                            checked[form.notification_channel_ids.contains(&id)];
                            " " (channel.name) " (" (layout::wire_name(channel.kind)) ")" }
                    }
                    (message("notification_channel_ids"))
                }
            }
            label.check { input type="checkbox" name="paused" checked[form.paused]; " Paused" }
            div.actions {
                button type="submit" { "Save" }
                button type="submit" name="action" value="test" { "Test" }
                a href="/" { "Cancel" }
            }
        }
    }
}

pub async fn new_page(State(app): State<Arc<App>>, session: Session) -> WebResult<Markup> {
    let form = MonitorForm {
        kind: "http".into(),
        interval_ms: DEFAULT_INTERVAL_MS.to_string(),
        timeout_ms: DEFAULT_TIMEOUT_MS.to_string(),
        check_values: check_settings::defaults(),
        ..Default::default()
    };
    let choices = choices(&app, &Mode::New).await?;
    let body = render(&session, &Mode::New, &form, None, &choices, None);
    Ok(layout::page(
        &session,
        Section::Monitors,
        "New monitor",
        body,
    ))
}

pub async fn edit_page(
    State(app): State<Arc<App>>,
    session: Session,
    Path(id): Path<Uuid>,
) -> WebResult<Markup> {
    let view = app.get_monitor(id).await?;
    let choices = choices(&app, &Mode::Edit(id)).await?;
    let body = render(
        &session,
        &Mode::Edit(id),
        &MonitorForm::of(&view),
        None,
        &choices,
        None,
    );
    Ok(layout::page(
        &session,
        Section::Monitors,
        "Edit monitor",
        body,
    ))
}

async fn rejected(
    app: &App,
    session: &Session,
    mode: Mode,
    form: &MonitorForm,
    error: FieldError,
) -> WebResult<Response> {
    let choices = choices(app, &mode).await?;
    let body = render(session, &mode, form, Some(&error), &choices, None);
    let page = layout::page(session, Section::Monitors, "Monitor", body);
    Ok((StatusCode::BAD_REQUEST, page).into_response())
}

/// The form's "Test": runs the spec once where it would run, and draws the form again, as
/// typed, with the outcome above it. Saves nothing.
async fn tested(
    app: &App,
    session: &Session,
    mode: Mode,
    form: &MonitorForm,
    spec: shared_proto::MonitorSpec,
) -> WebResult<Response> {
    let wait = crate::service::commands::DEFAULT_WAIT;
    let tried_spec = spec.clone();
    let tried = match mode {
        Mode::Edit(id) => app.test_monitor_edit(id, spec, wait).await,
        Mode::New => app.test_monitor(spec, wait).await,
    };
    let answer = match tried {
        Ok(answer) => answer,
        Err(e @ (ServiceError::Internal(_) | ServiceError::WriteConflict(_))) => {
            return Err(e.into())
        }
        Err(e) => {
            return match field_of(&e) {
                Some(error) => rejected(app, session, mode, form, error).await,
                None => {
                    let error = FieldError::new("test", e.to_string());
                    rejected(app, session, mode, form, error).await
                }
            }
        }
    };
    let choices = choices(app, &mode).await?;
    let body = render(session, &mode, form, None, &choices, Some(&answer));
    Ok(super::tested(
        layout::page(session, Section::Monitors, "Monitor", body),
        &tried_spec,
    ))
}

pub async fn create(
    State(app): State<Arc<App>>,
    session: Session,
    Form(pairs): Form<Vec<(String, String)>>,
) -> WebResult<Response> {
    let form = MonitorForm::from_pairs(pairs);
    session.check(&form.csrf)?;
    let spec = match form.to_spec() {
        Ok(spec) => spec,
        Err(error) => return rejected(&app, &session, Mode::New, &form, error).await,
    };
    if form.test {
        return tested(&app, &session, Mode::New, &form, spec).await;
    }
    match app.create_monitor(spec).await {
        // A heartbeat monitor's ping URL is shown this once.
        Ok(view) => match &view.ping_url {
            Some(url) => Ok(super::made(
                super::heartbeats::url_page(&session, &view, url),
                view.id,
            )),
            None => Ok(super::made(
                Redirect::to(&format!("/monitors/{}", view.id)),
                view.id,
            )),
        },
        Err(e) => match field_of(&e) {
            Some(error) => rejected(&app, &session, Mode::New, &form, error).await,
            None => Err(e.into()),
        },
    }
}

pub async fn update(
    State(app): State<Arc<App>>,
    session: Session,
    Path(id): Path<Uuid>,
    Form(pairs): Form<Vec<(String, String)>>,
) -> WebResult<Response> {
    let form = MonitorForm::from_pairs(pairs);
    session.check(&form.csrf)?;
    let spec = match form.to_spec() {
        Ok(spec) => spec,
        Err(error) => return rejected(&app, &session, Mode::Edit(id), &form, error).await,
    };
    if form.test {
        return tested(&app, &session, Mode::Edit(id), &form, spec).await;
    }
    // A form without a readable revision (hand-made) edits whatever is there now.
    let if_match = form.revision.trim().parse::<u64>().ok();
    match app.update_monitor(id, full_patch(spec), if_match).await {
        Ok(_) => Ok(Redirect::to(&format!("/monitors/{id}")).into_response()),
        Err(ServiceError::Conflict(_)) => {
            let error = FieldError::new(
                "revision",
                "This monitor was changed since this form was opened (edited, paused or \
                 resumed elsewhere). Nothing was saved, so that the newer change is not undone: \
                 open the edit form again to change the monitor as it is now.",
            );
            rejected(&app, &session, Mode::Edit(id), &form, error).await
        }
        Err(e) => match field_of(&e) {
            Some(error) => rejected(&app, &session, Mode::Edit(id), &form, error).await,
            None => Err(e.into()),
        },
    }
}

async fn set_paused(
    app: &App,
    session: &Session,
    id: Uuid,
    pairs: Vec<(String, String)>,
    paused: bool,
) -> WebResult<Response> {
    session.check(&MonitorForm::from_pairs(pairs).csrf)?;
    let patch = MonitorPatch {
        paused: Some(paused),
        ..Default::default()
    };
    app.update_monitor(id, patch, None).await?;
    Ok(Redirect::to(&format!("/monitors/{id}")).into_response())
}

pub async fn pause(
    State(app): State<Arc<App>>,
    session: Session,
    Path(id): Path<Uuid>,
    Form(pairs): Form<Vec<(String, String)>>,
) -> WebResult<Response> {
    set_paused(&app, &session, id, pairs, true).await
}

pub async fn resume(
    State(app): State<Arc<App>>,
    session: Session,
    Path(id): Path<Uuid>,
    Form(pairs): Form<Vec<(String, String)>>,
) -> WebResult<Response> {
    set_paused(&app, &session, id, pairs, false).await
}

/// The list's "Pause all" / "Resume all" when it shows one tag's monitors.
#[derive(Deserialize)]
pub struct TaggedForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    tag: String,
    #[serde(default)]
    action: String,
}

pub async fn tagged(
    State(app): State<Arc<App>>,
    session: Session,
    Form(form): Form<TaggedForm>,
) -> WebResult<Response> {
    session.check(&form.csrf)?;
    let selection = shared_proto::tags::TagSelection {
        tag: form.tag.trim().to_string(),
    };
    let back = format!(
        "/?{}",
        serde_urlencoded::to_string([("tag", selection.tag.as_str())]).unwrap_or_default()
    );
    app.pause_tagged(selection, form.action == "pause").await?;
    Ok(Redirect::to(&back).into_response())
}

pub async fn delete(
    State(app): State<Arc<App>>,
    session: Session,
    Path(id): Path<Uuid>,
    Form(pairs): Form<Vec<(String, String)>>,
) -> WebResult<Response> {
    session.check(&MonitorForm::from_pairs(pairs).csrf)?;
    app.delete_monitor(id).await?;
    Ok(Redirect::to("/").into_response())
}
