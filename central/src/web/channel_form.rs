//! Creating and editing a notification channel through a form: the fields of its kind (URL and
//! headers for webhooks, Slack and Alertmanager; a signing secret for webhooks; sender and
//! recipients for email), each validation error beside its field.

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

const KINDS: [ChannelKind; 4] = [
    ChannelKind::Webhook,
    ChannelKind::Slack,
    ChannelKind::Alertmanager,
    ChannelKind::Email,
];
const HTTP_KINDS: &str = "webhook slack alertmanager";

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
    from: String,
    /// Comma- or line-separated.
    to: String,
}

impl ChannelForm {
    fn of(view: &ChannelView) -> Self {
        ChannelForm {
            name: view.name.clone(),
            kind: view.kind.as_str().into(),
            url: view.url.clone().unwrap_or_default(),
            headers: fields::headers_text(view.headers.iter().map(|(k, v)| (k, v.as_str()))),
            default: view.default.then(|| "on".into()),
            from: view.from.clone().unwrap_or_default(),
            to: view.to.join(", "),
            ..Default::default()
        }
    }

    fn kind(&self) -> Result<ChannelKind, FieldError> {
        ChannelKind::parse(&self.kind)
            .ok_or_else(|| FieldError::new("kind", "choose webhook, slack, alertmanager or email"))
    }

    /// The spec the form describes; fields of other kinds (shown with script off) are ignored.
    fn to_spec(&self) -> Result<ChannelSpec, FieldError> {
        let kind = self.kind()?;
        let email = kind == ChannelKind::Email;
        Ok(ChannelSpec {
            name: self.name.trim().to_string(),
            kind,
            url: fields::optional(&self.url),
            secret: fields::optional(&self.secret).filter(|_| kind == ChannelKind::Webhook),
            headers: if email {
                Default::default()
            } else {
                fields::parse_headers("headers", &self.headers)?
            },
            default: self.default.is_some(),
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
        Ok(ChannelPatch {
            name: Some(spec.name),
            // An emptied URL is sent as such, for central to refuse beside the field.
            url: Some(spec.url.unwrap_or_default()),
            secret,
            headers: Some(spec.headers),
            default: Some(spec.default),
            from: if email { spec.from } else { None },
            to: email.then_some(spec.to),
            urls: None,
            format: None,
        })
    }
}

enum Mode {
    New,
    Edit { id: Uuid, has_secret: bool },
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
        !["name", "kind", "url", "secret", "headers", "from", "to"].contains(&e.field.as_str())
    });
    html! {
        h1 { (title) }
        @if let Some(e) = unplaced { p.form-error role="alert" { (e.message) } }
        form.channel-form method="post" action=(action) novalidate {
            (csrf_field(session))
            (fields::text_field("name", "Name", &form.name, "", error))
            div.field {
                label for="kind" { "Kind" }
                @match mode {
                    Mode::New => select #kind.kind-choice name="kind" {
                        @for kind in KINDS {
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
                "http(s)://… for webhook, Slack and Alertmanager; smtp://host:port (smtps://, with user:password@ when the server wants a login) for email",
                error))
            @if shown("webhook") {
                fieldset data-kinds="webhook" {
                    legend { "Signature (webhook)" }
                    @let failed = fields::error_for(error, "secret").is_some();
                    div.field {
                        label for="secret" { "Signing secret" }
                        input #secret name="secret" type="password" autocomplete="new-password" value=(form.secret)
                            aria-invalid=[failed.then_some("true")] aria-describedby=[failed.then_some("secret-error")];
                        p.hint { "16 to 256 characters; each body is signed with it (X-Signature-256)."
                            @if let Mode::Edit { has_secret: true, .. } = mode { " Leave empty to keep the current one." } }
                        (fields::message("secret", error))
                    }
                    @if let Mode::Edit { has_secret: true, .. } = mode {
                        label.check { input type="checkbox" name="remove_secret" checked[form.remove_secret.is_some()]; " Remove the secret" }
                    }
                }
            }
            @if shown(HTTP_KINDS) {
                fieldset data-kinds=(HTTP_KINDS) {
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
    let view = app.get_channel(id).await?;
    let mode = Mode::Edit {
        id,
        has_secret: view.has_secret,
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
    match app.create_channel(spec).await {
        Ok(_) => Ok(Redirect::to("/notifications").into_response()),
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
    let has_secret = app.get_channel(id).await?.has_secret;
    let mode = Mode::Edit { id, has_secret };
    let patch = match form.to_patch() {
        Ok(patch) => patch,
        Err(error) => return Ok(rejected(&session, mode, &form, error)),
    };
    match app.update_channel(id, patch).await {
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
