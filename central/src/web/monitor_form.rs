//! Creating and editing a monitor through a form, and its pause, resume and delete buttons.
//! The form's fields are the API's own names, so a validation error from the service lands
//! beside the field it names.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use maud::{html, Markup};
use serde_json::{Map, Value};
use shared_proto::monitor::{DEFAULT_INTERVAL_MS, DEFAULT_TIMEOUT_MS};
use shared_proto::notifications::ChannelView;
use shared_proto::settings_api::{MonitorView, PollerView};
use shared_proto::{CheckKind, MonitorPatch, MonitorSpec, PollerMode};
use uuid::Uuid;

use super::check_settings::{self, FieldValues};
use super::fields::{self, FieldError};
use super::layout::{self, Section};
use super::session::Session;
use super::WebResult;
use crate::error::ApiError;
use crate::service::pollers::PollerFilter;
use crate::service::App;
use crate::store::Cursor;

/// What the form holds, as typed (so a rejected form comes back as the operator left it).
#[derive(Debug, Clone, Default)]
pub struct MonitorForm {
    csrf: String,
    name: String,
    kind: String,
    target: String,
    interval_ms: String,
    timeout_ms: String,
    poller_mode: String,
    poller_region: String,
    poller_datacenter: String,
    poller_id: String,
    poller_capability: String,
    poller_regions: String,
    quorum: String,
    failover: String,
    paused: bool,
    notification_channel_ids: Vec<String>,
    /// The JSON box: settings without a field of their own.
    settings: String,
    /// The fields of the kind's own settings (`settings.method`, …).
    check_values: FieldValues,
}

impl MonitorForm {
    fn from_pairs(pairs: Vec<(String, String)>) -> Self {
        let mut form = MonitorForm::default();
        for (key, value) in pairs {
            match key.as_str() {
                "csrf" => form.csrf = value,
                "name" => form.name = value,
                "kind" => form.kind = value,
                "target" => form.target = value,
                "interval_ms" => form.interval_ms = value,
                "timeout_ms" => form.timeout_ms = value,
                "poller_mode" => form.poller_mode = value,
                "poller_region" => form.poller_region = value,
                "poller_datacenter" => form.poller_datacenter = value,
                "poller_id" => form.poller_id = value,
                "poller_capability" => form.poller_capability = value,
                "poller_regions" => form.poller_regions = value,
                "quorum" => form.quorum = value,
                "failover" => form.failover = value,
                "paused" => form.paused = true,
                "notification_channel_ids" => form.notification_channel_ids.push(value),
                "settings" => form.settings = value,
                key if key.starts_with("settings.") => {
                    form.check_values.insert(key.to_string(), value);
                }
                _ => {}
            }
        }
        form
    }

    fn of(view: &MonitorView) -> Self {
        let spec = &view.spec;
        let text = |v: &Option<String>| v.clone().unwrap_or_default();
        let (check_values, rest) = check_settings::split(spec.kind, &spec.settings);
        MonitorForm {
            csrf: String::new(),
            name: spec.name.clone(),
            kind: spec.kind.as_str().into(),
            target: spec.target.clone(),
            interval_ms: spec.interval_ms.to_string(),
            timeout_ms: spec.timeout_ms.to_string(),
            poller_mode: spec.poller_mode.as_str().into(),
            poller_region: text(&spec.poller_region),
            poller_datacenter: text(&spec.poller_datacenter),
            poller_id: spec.poller_id.map(|id| id.to_string()).unwrap_or_default(),
            poller_capability: text(&spec.poller_capability),
            poller_regions: spec.poller_regions.clone().unwrap_or_default().join(", "),
            quorum: spec.quorum.map(|q| q.to_string()).unwrap_or_default(),
            failover: match spec.failover {
                Some(true) => "yes".into(),
                Some(false) => "no".into(),
                None => String::new(),
            },
            paused: spec.paused,
            notification_channel_ids: spec
                .notification_channel_ids
                .iter()
                .map(Uuid::to_string)
                .collect(),
            settings: if rest.is_empty() {
                String::new()
            } else {
                serde_json::to_string_pretty(&rest).unwrap_or_default()
            },
            check_values,
        }
    }

    /// The spec the form describes, or the first field that cannot be read.
    fn to_spec(&self) -> Result<MonitorSpec, FieldError> {
        fn optional(text: &str) -> Option<String> {
            Some(text.trim().to_string()).filter(|t| !t.is_empty())
        }
        let number = |field: &str, text: &str, default: u64| -> Result<u64, FieldError> {
            match text.trim() {
                "" => Ok(default),
                text => text.parse().map_err(|_| {
                    FieldError::new(
                        field,
                        format!("must be a whole number of milliseconds, not `{text}`"),
                    )
                }),
            }
        };
        let kind = CheckKind::parse(&self.kind)
            .ok_or_else(|| FieldError::new("kind", "choose one of http, tcp, dns, tls"))?;
        let poller_mode = match self.poller_mode.as_str() {
            "" => PollerMode::Auto,
            mode => PollerMode::parse(mode)
                .ok_or_else(|| FieldError::new("poller_mode", "choose a placement"))?,
        };
        let poller_id = match self.poller_id.trim() {
            "" => None,
            id => Some(
                Uuid::try_parse(id)
                    .map_err(|_| FieldError::new("poller_id", "choose a poller from the list"))?,
            ),
        };
        let quorum =
            match self.quorum.trim() {
                "" => None,
                q => Some(q.parse().map_err(|_| {
                    FieldError::new("quorum", "must be a whole number of locations")
                })?),
            };
        let mut settings: Map<String, Value> = match self.settings.trim() {
            "" => Map::new(),
            text => match serde_json::from_str(text) {
                Ok(Value::Object(map)) => map,
                Ok(_) => {
                    return Err(FieldError::new(
                        "settings",
                        "must be a JSON object like {\"confirm_down\": 2}",
                    ))
                }
                Err(e) => {
                    return Err(FieldError::new(
                        "settings",
                        format!("is not valid JSON: {e}"),
                    ))
                }
            },
        };
        check_settings::merge(kind, &self.check_values, &mut settings)
            .map_err(|(field, message)| FieldError::new(&field, message))?;
        let notification_channel_ids = self
            .notification_channel_ids
            .iter()
            .map(|id| {
                Uuid::try_parse(id).map_err(|_| {
                    FieldError::new("notification_channel_ids", "choose channels from the list")
                })
            })
            .collect::<Result<_, _>>()?;
        let poller_regions = optional(&self.poller_regions).map(|regions| {
            regions
                .split(',')
                .map(|r| r.trim().to_string())
                .filter(|r| !r.is_empty())
                .collect()
        });
        Ok(MonitorSpec {
            name: self.name.trim().to_string(),
            kind,
            target: self.target.trim().to_string(),
            interval_ms: number("interval_ms", &self.interval_ms, DEFAULT_INTERVAL_MS)?,
            timeout_ms: number("timeout_ms", &self.timeout_ms, DEFAULT_TIMEOUT_MS)?,
            settings,
            poller_mode,
            poller_id,
            poller_region: optional(&self.poller_region),
            poller_datacenter: optional(&self.poller_datacenter),
            poller_capability: optional(&self.poller_capability),
            poller_regions,
            quorum,
            failover: match self.failover.as_str() {
                "yes" => Some(true),
                "no" => Some(false),
                _ => None,
            },
            paused: self.paused,
            notification_channel_ids,
        })
    }
}

/// Everything in a spec, as a patch (the kind stays: it cannot change).
fn full_patch(spec: MonitorSpec) -> MonitorPatch {
    MonitorPatch {
        name: Some(spec.name),
        target: Some(spec.target),
        interval_ms: Some(spec.interval_ms),
        timeout_ms: Some(spec.timeout_ms),
        settings: Some(spec.settings),
        poller_mode: Some(spec.poller_mode),
        poller_id: Some(spec.poller_id),
        poller_region: Some(spec.poller_region),
        poller_datacenter: Some(spec.poller_datacenter),
        poller_capability: Some(spec.poller_capability),
        poller_regions: Some(spec.poller_regions),
        quorum: Some(spec.quorum),
        failover: spec.failover,
        paused: Some(spec.paused),
        notification_channel_ids: Some(spec.notification_channel_ids),
    }
}

/// The form field a service error names: `settings.expected_status` has its own field,
/// `settings.confirm_down` is in the JSON box, `poller_regions[1]` is the regions box.
fn field_of(error: &ApiError) -> Option<FieldError> {
    let own = match error {
        ApiError::Validation(e) if check_settings::has_field(&e.field) => e.field.as_str(),
        _ => return FieldError::of_service(error),
    };
    FieldError::of_service(error).map(|e| FieldError::new(own, e.message))
}

enum Mode {
    New,
    Edit(Uuid),
}

struct Choices {
    pollers: Vec<PollerView>,
    channels: Vec<ChannelView>,
}

async fn choices(app: &App) -> WebResult<Choices> {
    let pollers = app
        .list_pollers(&PollerFilter::default(), &Cursor::start(), 1000)
        .await?
        .items;
    let channels = app.list_channels(&Cursor::start(), 1000).await?.items;
    Ok(Choices { pollers, channels })
}

fn render(
    session: &Session,
    mode: &Mode,
    form: &MonitorForm,
    error: Option<&FieldError>,
    choices: &Choices,
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
        @if let Some(e) = error.filter(|e| !is_form_field(&e.field)) {
            p.form-error role="alert" { (e.message) }
        }
        form.monitor-form method="post" action=(action) novalidate {
            input type="hidden" name="csrf" value=(session.csrf());
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
            (text_field("target", "Target", &form.target, "http(s)://host/path, host:port (tcp, tls) or a host name (dns)"))
            (text_field("interval_ms", "Check every (ms)", &form.interval_ms, "5000 to 3600000; default 30000"))
            (text_field("timeout_ms", "Timeout (ms)", &form.timeout_ms, "100 to 120000, at most the interval; default 5000"))
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
            div.actions { button type="submit" { "Save" } a href="/" { "Cancel" } }
        }
    }
}

/// Whether an error about `field` shows beside an input (else above the form).
fn is_form_field(field: &str) -> bool {
    KNOWN_FIELDS.contains(&field) || check_settings::has_field(field)
}

const KNOWN_FIELDS: [&str; 16] = [
    "name",
    "kind",
    "target",
    "interval_ms",
    "timeout_ms",
    "poller_mode",
    "poller_region",
    "poller_datacenter",
    "poller_id",
    "poller_capability",
    "poller_regions",
    "quorum",
    "failover",
    "paused",
    "notification_channel_ids",
    "settings",
];

pub async fn new_page(State(app): State<Arc<App>>, session: Session) -> WebResult<Markup> {
    let form = MonitorForm {
        kind: "http".into(),
        interval_ms: DEFAULT_INTERVAL_MS.to_string(),
        timeout_ms: DEFAULT_TIMEOUT_MS.to_string(),
        check_values: check_settings::defaults(),
        ..Default::default()
    };
    let choices = choices(&app).await?;
    let body = render(&session, &Mode::New, &form, None, &choices);
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
    let choices = choices(&app).await?;
    let body = render(
        &session,
        &Mode::Edit(id),
        &MonitorForm::of(&view),
        None,
        &choices,
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
    let choices = choices(app).await?;
    let body = render(session, &mode, form, Some(&error), &choices);
    let page = layout::page(session, Section::Monitors, "Monitor", body);
    Ok((StatusCode::BAD_REQUEST, page).into_response())
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
    match app.create_monitor(spec).await {
        Ok(view) => Ok(Redirect::to(&format!("/monitors/{}", view.id)).into_response()),
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
    match app.update_monitor(id, full_patch(spec)).await {
        Ok(_) => Ok(Redirect::to(&format!("/monitors/{id}")).into_response()),
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
    app.update_monitor(id, patch).await?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_error_lands_beside_its_field() {
        let error = ApiError::Validation(shared_proto::ValidationError::new(
            "settings.expected_status",
            "must list status codes",
        ));
        assert_eq!(field_of(&error).unwrap().field, "settings.expected_status");
        let error = ApiError::Validation(shared_proto::ValidationError::new(
            "settings.confirm_down",
            "must be between 1 and 10",
        ));
        assert_eq!(field_of(&error).unwrap().field, "settings");
        let form = MonitorForm {
            kind: "http".into(),
            interval_ms: "soon".into(),
            ..Default::default()
        };
        assert_eq!(form.to_spec().unwrap_err().field, "interval_ms");
    }
}
