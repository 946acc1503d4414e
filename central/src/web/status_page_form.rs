//! Status pages on the operators' page: the list (each with its visitors' address), a form for a
//! new one, a page's own form to change it, and deleting one. Sections are written as the
//! settings API takes them (JSON), so the page and the API name the same fields; what a page
//! shows is `service::status_pages`'. A page's incidents are `incident_form`'s.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use maud::{html, Markup};
use serde::Deserialize;
use shared_proto::status_pages::{
    AutoIncidents, StatusPagePatch, StatusPageSection, StatusPageSpec, StatusPageView, Visibility,
};
use uuid::Uuid;

use super::fields::optional;
use super::layout::{self, csrf_field, Section};
use super::session::{CsrfForm, Session};
use super::WebResult;
use crate::service::error::ServiceError;
use crate::service::App;
use crate::store::Cursor;

const EXAMPLE: &str = r#"[{"name": "API", "monitor_ids": ["<monitor id>"],
  "display_names": [{"monitor_id": "<monitor id>", "name": "Public API"}]},
 {"name": "Web", "tags": ["web"]}]"#;

/// What the form sent, as typed.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct PageForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    slug: String,
    #[serde(default)]
    title: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    visibility: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    sections: String,
    #[serde(default)]
    domain: String,
    #[serde(default)]
    auto_incidents: String,
}

impl PageForm {
    /// The spec the form describes, or what to fix (naming the field as the form labels it).
    fn spec(&self) -> Result<StatusPageSpec, String> {
        let sections: Vec<StatusPageSection> = match optional(&self.sections) {
            None => Vec::new(),
            Some(text) => serde_json::from_str(&text)
                .map_err(|e| format!("Sections: not the API's sections ({e})"))?,
        };
        let visibility = Visibility::parse(self.visibility.trim()).unwrap_or_default();
        Ok(StatusPageSpec {
            slug: self.slug.trim().to_string(),
            title: self.title.trim().to_string(),
            description: optional(&self.description),
            sections,
            visibility,
            password: (!self.password.is_empty()).then(|| self.password.clone()),
            domain: optional(&self.domain),
            auto_incidents: AutoIncidents::parse(self.auto_incidents.trim()).unwrap_or_default(),
            // Set through the API or `central apply` (a form would need an upload).
            logo: None,
        })
    }

    /// The form of a stored page (its password is never shown: left empty, it is kept).
    fn of(view: &StatusPageView) -> PageForm {
        PageForm {
            csrf: String::new(),
            slug: view.slug.clone(),
            title: view.title.clone(),
            description: view.description.clone().unwrap_or_default(),
            visibility: view.visibility.as_str().to_string(),
            password: String::new(),
            sections: serde_json::to_string_pretty(&view.sections).unwrap_or_default(),
            domain: view.domain.clone().unwrap_or_default(),
            auto_incidents: view.auto_incidents.as_str().to_string(),
        }
    }

    /// The change the form describes to a stored page: every field as typed, the password
    /// only when one was typed.
    fn patch(&self) -> Result<StatusPagePatch, String> {
        let spec = self.spec()?;
        Ok(StatusPagePatch {
            slug: Some(spec.slug),
            title: Some(spec.title),
            description: Some(spec.description),
            sections: Some(spec.sections),
            visibility: Some(spec.visibility),
            password: spec.password,
            domain: Some(spec.domain),
            auto_incidents: Some(spec.auto_incidents),
            // Kept: the form does not show it.
            logo: None,
        })
    }
}

/// The fields a page is written with, new or changed.
fn page_fields(form: &PageForm, editing: bool) -> Markup {
    let sections = if form.sections.is_empty() {
        "[]"
    } else {
        form.sections.as_str()
    };
    html! {
        div.field { label for="page-slug" { "Slug" } input #page-slug type="text" name="slug" required value=(form.slug);
                    p.hint { "Its address: lower-case letters, digits and -." } }
        div.field { label for="page-title" { "Title" } input #page-title type="text" name="title" required value=(form.title); }
        div.field { label for="page-description" { "Description (optional)" }
                    textarea #page-description name="description" rows="2" { (form.description) } }
        div.field { label for="page-visibility" { "Who may read it" }
            select #page-visibility name="visibility" {
                @for (value, label) in [("public", "Anyone"), ("password", "Whoever has its password"), ("users", "Signed-in users of central")] {
                    option value=(value) selected[form.visibility == value] { (label) }
                }
            } }
        div.field { label for="page-password" {
                        @if editing { "New password (a password page only; empty keeps the one it has)" }
                        @else { "Password (a password page only)" } }
                    input #page-password type="password" name="password" autocomplete="new-password"; }
        div.field { label for="page-domain" { "Its own domain (optional)" }
                    input #page-domain type="text" name="domain" value=(form.domain) placeholder="status.example.com";
                    p.hint { "A host name that serves this page at /, pointed at central." } }
        div.field { label for="page-auto" { "When a monitor it shows goes down" }
            select #page-auto name="auto_incidents" {
                @for (value, label) in [("off", "Do nothing (open incidents by hand)"),
                                        ("draft", "Open a draft incident to publish"),
                                        ("publish", "Open an incident at once")] {
                    option value=(value) selected[form.auto_incidents == value] { (label) }
                }
            }
            p.hint { "The incident names the monitor by its name on this page, and is resolved when it is back." } }
        div.field { label for="page-sections" { "Sections" }
                    textarea #page-sections name="sections" rows="6" { (sections) }
                    p.hint { "As the settings API takes them (docs/protocol.md, Status pages), e.g. " code { (EXAMPLE) } } }
    }
}

async fn page(
    app: &App,
    session: &Session,
    form: &PageForm,
    error: Option<String>,
) -> WebResult<Markup> {
    let pages = app
        .status_pages()
        .list_pages(&Cursor::start(), 1000)
        .await?
        .items;
    let body = html! {
        h1 { "Status pages" }
        p { "What your users see: chosen monitors under names you choose, their status and 90 days of "
            "history, at " code { "/status/<slug>" } ". Nothing else of a monitor is shown." }
        p.muted { "A page's logo is set through the API (" code { "logo" } ", a " code { "data:" }
            " URL) or " code { "central apply" } "; these forms keep it." }
        h2.for-editors { "New status page" }
        @if let Some(error) = &error { p.form-error role="alert" { (error) } }
        form.window-form.for-editors method="post" action="/status-pages" {
            (csrf_field(session))
            (page_fields(form, false))
            button type="submit" { "Create status page" }
        }
        h2 { "Pages" }
        @if pages.is_empty() { p.muted { "None yet." } } @else {
            div.table-wrap { table {
                thead { tr { th scope="col" { "Title" } th scope="col" { "Address" } th scope="col" { "Who may read it" }
                    th scope="col" { "Sections" } th scope="col" { "Manage" } } }
                tbody { @for p in &pages { tr {
                    td { a href={ "/status-pages/" (p.id) } { (p.title) } }
                    td { a href=(p.path) { (p.path) } }
                    td { (p.visibility.as_str()) }
                    td { (p.sections.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", ")) }
                    td { form.inline method="post" action={ "/status-pages/" (p.id) "/delete" }
                        data-confirm="Delete this status page? Its visitors get 404." {
                        (csrf_field(session)) button.danger type="submit" { "Delete" } } }
                } } }
            } }
        }
    };
    Ok(layout::page(
        session,
        Section::StatusPages,
        "Status pages",
        body,
    ))
}

pub async fn list(State(app): State<Arc<App>>, session: Session) -> WebResult<Markup> {
    page(&app, &session, &PageForm::default(), None).await
}

pub async fn create(
    State(app): State<Arc<App>>,
    session: Session,
    Form(form): Form<PageForm>,
) -> WebResult<Response> {
    session.check(&form.csrf)?;
    let refused = |message: String| async {
        let page = page(&app, &session, &form, Some(message)).await?;
        Ok::<_, super::WebError>((StatusCode::BAD_REQUEST, page).into_response())
    };
    let spec = match form.spec() {
        Ok(spec) => spec,
        Err(message) => return refused(message).await,
    };
    match app.status_pages().create_page(spec).await {
        Ok(created) => Ok(super::made(Redirect::to("/status-pages"), created.id)),
        Err(ServiceError::Validation(e)) => refused(format!("`{}` {}", e.field, e.message)).await,
        Err(ServiceError::Conflict(message)) => refused(message).await,
        Err(e) => Err(e.into()),
    }
}

/// A page's own form: the page as stored, to change; its incidents below
/// (`incident_form`).
pub fn edit_page(
    session: &Session,
    view: &StatusPageView,
    form: &PageForm,
    error: Option<String>,
    incidents: Markup,
) -> Markup {
    let body = html! {
        p { a href="/status-pages" { "Status pages" } }
        h1 { (view.title) }
        p { "Read by visitors at " a href=(view.path) { (view.path) } "." }
        (incidents)
        h2.for-editors { "Change this page" }
        @if let Some(error) = &error { p.form-error role="alert" { (error) } }
        form.window-form.for-editors method="post" action={ "/status-pages/" (view.id) } {
            (csrf_field(session))
            (page_fields(form, true))
            button type="submit" { "Save" }
        }
    };
    layout::page(session, Section::StatusPages, &view.title, body)
}

/// The form of a stored page, for `edit_page`.
pub fn form_of(view: &StatusPageView) -> PageForm {
    PageForm::of(view)
}

pub async fn update(
    State(app): State<Arc<App>>,
    session: Session,
    Path(id): Path<Uuid>,
    Form(form): Form<PageForm>,
) -> WebResult<Response> {
    session.check(&form.csrf)?;
    let pages = app.status_pages();
    let view = pages.get_page(id).await?;
    let refused = |message: String| async {
        let incidents = super::incident_form::incidents(&app, &session, &view, None).await?;
        let page = edit_page(&session, &view, &form, Some(message), incidents);
        Ok::<_, super::WebError>((StatusCode::BAD_REQUEST, page).into_response())
    };
    let patch = match form.patch() {
        Ok(patch) => patch,
        Err(message) => return refused(message).await,
    };
    match pages.update_page(id, patch).await {
        Ok(_) => Ok(Redirect::to(&format!("/status-pages/{id}")).into_response()),
        Err(ServiceError::Validation(e)) => refused(format!("`{}` {}", e.field, e.message)).await,
        Err(ServiceError::Conflict(message)) => refused(message).await,
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
    app.status_pages().delete_page(id).await?;
    Ok(Redirect::to("/status-pages").into_response())
}
