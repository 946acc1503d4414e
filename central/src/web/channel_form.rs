//! Creating and editing a notification channel through a form: the fields of its kind (a URL;
//! headers for the HTTP kinds that take them; the secret of the kinds that have one, a
//! webhook's template, Telegram's chat and Pushover's user key; sender and recipients for
//! email), each validation error beside its field.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use maud::{html, Markup};
use serde::Deserialize;
use shared_proto::notifications::{ChannelKind, ChannelPatch, ChannelSpec, ChannelView};
use uuid::Uuid;

use super::fields::{self, FieldError};
use super::layout::{self, csrf_field, Section};
use super::session::Session;
use super::WebResult;
use crate::service::App;
use shared_proto::as_code::ManagedKind;

/// The kinds whose fieldset shows each field (as `shared_proto::channel_fields` has them).
fn kinds_taking(field: &str) -> String {
    ChannelKind::ALL
        .into_iter()
        .filter(|kind| shared_proto::channel_fields::takes(*kind, field))
        .map(ChannelKind::as_str)
        .collect::<Vec<_>>()
        .join(" ")
}

/// What the form holds, as typed.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ChannelForm {
    csrf: String,
    name: String,
    kind: String,
    url: String,
    /// Empty on an edit: keep the current secret.
    secret: String,
    remove_secret: Option<String>,
    headers: String,
    default: Option<String>,
    /// Comma- or space-separated.
    tags: String,
    from: String,
    /// Comma- or line-separated.
    to: String,
    template: String,
    chat_id: String,
    user_key: String,
    topic: String,
}

impl ChannelForm {
    fn of(view: &ChannelView) -> Self {
        ChannelForm {
            name: view.name.clone(),
            kind: view.kind.as_str().into(),
            url: view.url.clone().unwrap_or_default(),
            headers: fields::headers_text(view.headers.iter().map(|(k, v)| (k, v.as_str()))),
            default: view.default.then(|| "on".into()),
            tags: view.tags.join(", "),
            from: view.from.clone().unwrap_or_default(),
            to: view.to.join(", "),
            template: view.template.clone().unwrap_or_default(),
            chat_id: view.chat_id.clone().unwrap_or_default(),
            user_key: view.user_key.clone().unwrap_or_default(),
            topic: view.topic.clone().unwrap_or_default(),
            ..Default::default()
        }
    }

    fn kind(&self) -> Result<ChannelKind, FieldError> {
        ChannelKind::parse(&self.kind)
            .ok_or_else(|| FieldError::new("kind", "choose one of the kinds listed"))
    }

    /// The spec the form describes; fields of other kinds (shown with script off) are ignored.
    fn to_spec(&self) -> Result<ChannelSpec, FieldError> {
        let kind = self.kind()?;
        let email = kind == ChannelKind::Email;
        let takes = |field| shared_proto::channel_fields::takes(kind, field);
        Ok(ChannelSpec {
            name: self.name.trim().to_string(),
            kind,
            url: fields::optional(&self.url),
            secret: fields::optional(&self.secret).filter(|_| takes("secret")),
            headers: if takes("headers") {
                fields::parse_headers("headers", &self.headers)?
            } else {
                Default::default()
            },
            default: self.default.is_some(),
            tags: super::monitor_input::split_tags(&self.tags),
            from: fields::optional(&self.from).filter(|_| email),
            to: if email {
                self.to
                    .split([',', '\n'])
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(String::from)
                    .collect()
            } else {
                Vec::new()
            },
            // Further Alertmanager instances and the webhook format are set through the API;
            // an edit on the page leaves them as they are (its patch sends neither).
            urls: Vec::new(),
            format: None,
            // Kept as typed (not trimmed): a template's spaces are the body's.
            template: Some(self.template.clone())
                .filter(|t| !t.trim().is_empty() && takes("template")),
            chat_id: fields::optional(&self.chat_id).filter(|_| takes("chat_id")),
            user_key: fields::optional(&self.user_key).filter(|_| takes("user_key")),
            topic: fields::optional(&self.topic).filter(|_| takes("topic")),
        })
    }

    /// Everything but the kind (fixed) and the secret, which changes only when typed or removed.
    fn to_patch(&self) -> Result<ChannelPatch, FieldError> {
        let spec = self.to_spec()?;
        let secret = match (self.remove_secret.is_some(), spec.secret) {
            (true, Some(_)) => {
                return Err(FieldError::new(
                    "secret",
                    "type a new secret or tick \"Remove the secret\", not both",
                ))
            }
            (true, None) => Some(None),
            (false, typed) => typed.map(Some),
        };
        let email = spec.kind == ChannelKind::Email;
        let takes = |field| shared_proto::channel_fields::takes(spec.kind, field);
        Ok(ChannelPatch {
            name: Some(spec.name),
            // An emptied URL is sent as such, for central to refuse beside the field; a kind
            // with the service's own address goes back to it.
            url: match (spec.url, spec.kind.default_url()) {
                (Some(url), _) => Some(url),
                (None, Some(default)) => Some(default.to_string()),
                (None, None) => Some(String::new()),
            },
            secret,
            headers: takes("headers").then_some(spec.headers),
            default: Some(spec.default),
            tags: Some(spec.tags),
            from: if email { spec.from } else { None },
            to: email.then_some(spec.to),
            urls: None,
            format: None,
            // An emptied template goes back to the webhook's format.
            template: takes("template").then_some(spec.template),
            chat_id: spec.chat_id,
            user_key: spec.user_key,
            topic: spec.topic,
        })
    }
}

enum Mode {
    New,
    Edit {
        id: Uuid,
        has_secret: bool,
        /// The key of the configuration file that manages the channel, if one does.
        managed_key: Option<String>,
    },
}

fn render(
    session: &Session,
    mode: &Mode,
    form: &ChannelForm,
    error: Option<&FieldError>,
) -> Markup {
    let (title, action) = match mode {
        Mode::New => (
            "New channel".to_string(),
            "/notifications/channels".to_string(),
        ),
        Mode::Edit { id, .. } => (
            format!("Edit {}", form.name),
            format!("/notifications/channels/{id}"),
        ),
    };
    let shown = |kinds: &str| match mode {
        Mode::New => true,
        Mode::Edit { .. } => kinds.split(' ').any(|k| k == form.kind),
    };
    let unplaced = error.filter(|e| {
        ![
            "name", "kind", "url", "secret", "headers", "from", "to", "template", "chat_id",
            "user_key", "topic",
        ]
        .contains(&e.field.as_str())
    });
    html! {
        h1 { (title) }
        @if let Mode::Edit { managed_key: Some(key), .. } = mode { (super::layout::managed_note(key)) }
        @if let Some(e) = unplaced { p.form-error role="alert" { (e.message) } }
        form.channel-form method="post" action=(action) novalidate {
            (csrf_field(session))
            (fields::text_field("name", "Name", &form.name, "", error))
            div.field {
                label for="kind" { "Kind" }
                @match mode {
                    Mode::New => select #kind.kind-choice name="kind" {
                        @for kind in ChannelKind::ALL {
                            option value=(kind.as_str()) selected[form.kind == kind.as_str()] { (kind.as_str()) }
                        }
                    },
                    Mode::Edit { .. } => {
                        input #kind type="text" value=(form.kind) readonly;
                        input type="hidden" name="kind" value=(form.kind);
                        p.hint { "The kind of a channel cannot change; add a new one." }
                    },
                }
                (fields::message("kind", error))
            }
            (fields::text_field("url", "URL", &form.url,
                "http(s)://… for the HTTP kinds (a Gotify server's, like https://gotify.example.com); smtp://host:port (smtps://, with user:password@ when the server wants a login) for email. Leave empty for PagerDuty, Opsgenie, Telegram, ntfy and Pushover to use the service's own address.",
                error))
            @let secret_kinds = kinds_taking("secret");
            @if shown(&secret_kinds) {
                fieldset data-kinds=(secret_kinds) {
                    legend { "Secret" }
                    @let failed = fields::error_for(error, "secret").is_some();
                    div.field {
                        label for="secret" { "Secret" }
                        input #secret name="secret" type="password" autocomplete="new-password" value=(form.secret)
                            aria-invalid=[failed.then_some("true")] aria-describedby=[failed.then_some("secret-error")];
                        p.hint {
                            "Never shown again. "
                            @for kind in ChannelKind::ALL {
                                @if let Some((role, _)) = kind.secret_role() {
                                    (kind.as_str()) ": " (role) ". "
                                }
                            }
                            "A webhook's is 16 to 256 characters; each body is signed with it (X-Signature-256)."
                            @if let Mode::Edit { has_secret: true, .. } = mode { " Leave empty to keep the current one." } }
                        (fields::message("secret", error))
                    }
                    @if let Mode::Edit { has_secret: true, .. } = mode {
                        label.check { input type="checkbox" name="remove_secret" checked[form.remove_secret.is_some()]; " Remove the secret" }
                    }
                }
            }
            @if shown("webhook") {
                fieldset data-kinds="webhook" {
                    legend { "Body (webhook)" }
                    (fields::text_area("template", "Template", &form.template,
                        "Empty: the notification as JSON. Otherwise JSON (or any text) with placeholders like {{ monitor.name }}, {{ status }}, {{ headline }}, {{ severity }}, {{ link }}; a string that is one placeholder alone keeps the field's type.",
                        error))
                }
            }
            @if shown("telegram") {
                fieldset data-kinds="telegram" {
                    legend { "Telegram" }
                    (fields::text_field("chat_id", "Chat", &form.chat_id, "the chat's number, like -1001234567890, or @channelname", error))
                }
            }
            @if shown("ntfy") {
                fieldset data-kinds="ntfy" {
                    legend { "ntfy" }
                    (fields::text_field("topic", "Topic", &form.topic, "letters, digits, _ and -", error))
                }
            }
            @if shown("pushover") {
                fieldset data-kinds="pushover" {
                    legend { "Pushover" }
                    (fields::text_field("user_key", "User key", &form.user_key, "the user's or group's key", error))
                }
            }
            @let header_kinds = kinds_taking("headers");
            @if shown(&header_kinds) {
                fieldset data-kinds=(header_kinds) {
                    legend { "HTTP" }
                    (fields::text_area("headers", "Extra headers", &form.headers, "one per line, like Authorization: Bearer …", error))
                }
            }
            @if shown("email") {
                fieldset data-kinds="email" {
                    legend { "Email" }
                    (fields::text_field("from", "From", &form.from, "the sender address", error))
                    (fields::text_field("to", "To", &form.to, "recipients, comma-separated (up to 20)", error))
                }
            }
            label.check { input type="checkbox" name="default" checked[form.default.is_some()]; " Every monitor notifies this channel" }
            (fields::text_field("tags", "Tags", &form.tags, "monitors carrying one of these tags notify this channel too (comma-separated)", error))
            div.actions { button type="submit" { "Save" } a href="/notifications" { "Cancel" } }
        }
    }
}

fn form_page(
    session: &Session,
    mode: &Mode,
    form: &ChannelForm,
    error: Option<&FieldError>,
) -> Markup {
    layout::page(
        session,
        Section::Notifications,
        "Notification channel",
        render(session, mode, form, error),
    )
}

fn rejected(session: &Session, mode: Mode, form: &ChannelForm, error: FieldError) -> Response {
    (
        StatusCode::BAD_REQUEST,
        form_page(session, &mode, form, Some(&error)),
    )
        .into_response()
}

pub async fn new_page(session: Session) -> Markup {
    let form = ChannelForm {
        kind: ChannelKind::Webhook.as_str().into(),
        ..Default::default()
    };
    form_page(&session, &Mode::New, &form, None)
}

pub async fn edit_page(
    State(app): State<Arc<App>>,
    session: Session,
    Path(id): Path<Uuid>,
) -> WebResult<Markup> {
    let view = app.channels().get_channel(id).await?;
    let mode = Mode::Edit {
        id,
        has_secret: view.has_secret,
        managed_key: app
            .managed_key(ManagedKind::NotificationChannels, id)
            .await?,
    };
    Ok(form_page(&session, &mode, &ChannelForm::of(&view), None))
}

pub async fn create(
    State(app): State<Arc<App>>,
    session: Session,
    Form(form): Form<ChannelForm>,
) -> WebResult<Response> {
    session.check(&form.csrf)?;
    let spec = match form.to_spec() {
        Ok(spec) => spec,
        Err(error) => return Ok(rejected(&session, Mode::New, &form, error)),
    };
    match app.channels().create_channel(spec).await {
        Ok(channel) => Ok(super::made(Redirect::to("/notifications"), channel.id)),
        Err(e) => match FieldError::of_service(&e) {
            Some(error) => Ok(rejected(&session, Mode::New, &form, error)),
            None => Err(e.into()),
        },
    }
}

pub async fn update(
    State(app): State<Arc<App>>,
    session: Session,
    Path(id): Path<Uuid>,
    Form(form): Form<ChannelForm>,
) -> WebResult<Response> {
    session.check(&form.csrf)?;
    let has_secret = app.channels().get_channel(id).await?.has_secret;
    let managed_key = app
        .managed_key(ManagedKind::NotificationChannels, id)
        .await?;
    let mode = Mode::Edit {
        id,
        has_secret,
        managed_key,
    };
    let patch = match form.to_patch() {
        Ok(patch) => patch,
        Err(error) => return Ok(rejected(&session, mode, &form, error)),
    };
    match app.channels().update_channel(id, patch).await {
        Ok(_) => Ok(Redirect::to("/notifications").into_response()),
        Err(e) => match FieldError::of_service(&e) {
            Some(error) => Ok(rejected(&session, mode, &form, error)),
            None => Err(e.into()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_of_other_kinds_are_ignored() {
        let form = ChannelForm {
            name: "ops".into(),
            kind: "slack".into(),
            url: "https://hooks.example/x".into(),
            secret: "a-secret-of-enough-length".into(),
            from: "a@example.com".into(),
            to: "b@example.com".into(),
            headers: "X-A: 1".into(),
            ..Default::default()
        };
        let spec = form.to_spec().unwrap();
        assert_eq!((&spec.secret, &spec.from, spec.to.len()), (&None, &None, 0));
        assert_eq!(spec.headers["X-A"], "1");
        spec.validate().expect("a valid slack channel");
    }

    #[test]
    fn an_edit_keeps_the_secret_unless_typed_or_removed() {
        let mut form = ChannelForm {
            name: "hook".into(),
            kind: "webhook".into(),
            url: "https://hooks.example/x".into(),
            ..Default::default()
        };
        assert_eq!(form.to_patch().unwrap().secret, None);
        form.secret = "a-new-secret-of-length".into();
        assert_eq!(
            form.to_patch().unwrap().secret,
            Some(Some("a-new-secret-of-length".into()))
        );
        form.remove_secret = Some("on".into());
        assert_eq!(form.to_patch().unwrap_err().field, "secret");
        form.secret.clear();
        assert_eq!(form.to_patch().unwrap().secret, Some(None));
    }

    /// An emptied URL sends a kind with a service address of its own back to that address
    /// (a patch without `url` would keep the one typed before); other kinds send it empty,
    /// for central to refuse beside the field.
    #[test]
    fn an_emptied_url_goes_back_to_the_service_address() {
        let mut form = ChannelForm {
            name: "pager".into(),
            kind: "pagerduty".into(),
            ..Default::default()
        };
        assert_eq!(
            form.to_patch().unwrap().url.as_deref(),
            Some("https://events.pagerduty.com/v2/enqueue")
        );
        form.kind = "webhook".into();
        assert_eq!(form.to_patch().unwrap().url.as_deref(), Some(""));
    }

    #[test]
    fn recipients_split_on_commas_and_lines() {
        let form = ChannelForm {
            name: "mail".into(),
            kind: "email".into(),
            to: "a@example.com, b@example.com\nc@example.com,".into(),
            ..Default::default()
        };
        assert_eq!(form.to_spec().unwrap().to.len(), 3);
    }
}
