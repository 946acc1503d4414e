//! A status page's own page for operators (`/status-pages/{id}`): its incidents, open ones
//! first, each with its timeline and a form for the next update, a form to open one (the
//! monitors it affects chosen among those the page shows, by their names there), deleting one;
//! and below them the page's own form (`status_page_form`). Must not: decide what an incident
//! means (`service::status_pages::incidents`).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use maud::{html, Markup, PreEscaped};
use shared_proto::status_incidents::{
    IncidentPatch, IncidentSpec, IncidentStatus, IncidentUpdateSpec, IncidentView,
};
use shared_proto::status_pages::StatusPageView;
use uuid::Uuid;

use super::layout::csrf_field;
use super::session::{CsrfForm, Session};
use super::status_page_form::{edit_page, form_of};
use super::{markdown, WebError, WebResult};
use crate::service::error::ServiceError;
use crate::service::App;
use crate::store::Cursor;

/// The most incidents the page lists (the API pages through all of them).
const LISTED: u32 = 200;

/// What an incident form sent, as typed (`monitor_ids` once per box ticked).
#[derive(Debug, Default)]
struct IncidentForm {
    csrf: String,
    title: String,
    status: String,
    message: String,
    monitor_ids: Vec<Uuid>,
}

impl IncidentForm {
    fn of(pairs: Vec<(String, String)>) -> IncidentForm {
        let mut form = IncidentForm::default();
        for (key, value) in pairs {
            match key.as_str() {
                "csrf" => form.csrf = value,
                "title" => form.title = value,
                "status" => form.status = value,
                "message" => form.message = value,
                // Only ids of boxes the page offers come back; anything else names nothing.
                "monitor_ids" => form.monitor_ids.extend(Uuid::try_parse(&value).ok()),
                _ => {}
            }
        }
        form
    }

    fn status(&self) -> IncidentStatus {
        IncidentStatus::parse(self.status.trim()).unwrap_or_default()
    }
}

fn status_select(selected: IncidentStatus) -> Markup {
    html! {
        select name="status" {
            @for status in IncidentStatus::ALL {
                option value=(status.as_str()) selected[status == selected] { (status.words()) }
            }
        }
    }
}

fn incident(session: &Session, page: Uuid, i: &IncidentView, names: &[(Uuid, String)]) -> Markup {
    let affected: Vec<&str> = i
        .monitor_ids
        .iter()
        .filter_map(|id| names.iter().find(|(m, _)| m == id).map(|(_, n)| n.as_str()))
        .collect();
    let base = format!("/status-pages/{page}/incidents/{}", i.id);
    html! {
        article.incident {
            h3 { (i.title) " · " (i.status.words())
                @if !i.published { " · " span.badge { "Draft: visitors do not see it" } } }
            @if !i.published {
                form.inline.for-editors method="post" action={ (base) "/publish" } {
                    (csrf_field(session)) button type="submit" { "Publish" }
                }
            }
            @if !affected.is_empty() { p.muted { "Affects " (affected.join(", ")) } }
            ol.updates {
                @for u in &i.updates {
                    li {
                        p.muted { strong { (u.status.words()) } " · " (u.created_at.format("%Y-%m-%d %H:%M UTC")) }
                        div { (PreEscaped(markdown::to_html(&u.message))) }
                    }
                }
            }
            form.window-form.for-editors method="post" action={ (base) "/updates" } {
                (csrf_field(session))
                div.field { label { "Where it stands now " (status_select(i.status)) } }
                div.field { label { "What is new (Markdown)" textarea name="message" rows="2" required {} } }
                button type="submit" { "Post update" }
            }
            form.inline.for-editors method="post" action={ (base) "/delete" }
                data-confirm="Delete this incident and its updates? Visitors no longer see it." {
                (csrf_field(session)) button.danger type="submit" { "Delete" }
            }
        }
    }
}

/// The incidents part of a page's own page, with `error` above the form that caused it.
pub async fn incidents(
    app: &App,
    session: &Session,
    view: &StatusPageView,
    error: Option<String>,
) -> Result<Markup, WebError> {
    let pages = app.status_pages();
    let mut listed = pages
        .list_incidents(view.id, &Cursor::start(), LISTED)
        .await?
        .items;
    // Open ones first, newest first in each.
    listed.reverse();
    listed.sort_by_key(|i| i.resolved_at.is_some());
    let names = pages.page_monitors(view.id).await?;
    Ok(html! {
        h2 { "Incidents" }
        @if let Some(error) = &error { p.form-error role="alert" { (error) } }
        @if listed.is_empty() { p.muted { "None yet." } }
        @for i in &listed { (incident(session, view.id, i, &names)) }
        h3.for-editors { "Open an incident" }
        form.window-form.for-editors method="post" action={ "/status-pages/" (view.id) "/incidents" } {
            (csrf_field(session))
            div.field { label for="incident-title" { "Title" } input #incident-title type="text" name="title" required; }
            div.field { label { "Where it stands " (status_select(IncidentStatus::Investigating)) } }
            div.field { label for="incident-message" { "What visitors should know (Markdown)" }
                        textarea #incident-message name="message" rows="3" required {} }
            @if !names.is_empty() {
                fieldset.field { legend { "Affected monitors" }
                    @for (id, name) in &names {
                        label.check { input type="checkbox" name="monitor_ids" value=(id); " " (name) }
                    }
                }
            }
            button type="submit" { "Open incident" }
        }
    })
}

async fn shown(app: &App, session: &Session, id: Uuid, error: Option<String>) -> WebResult<Markup> {
    let view = app.status_pages().get_page(id).await?;
    let incidents = incidents(app, session, &view, error).await?;
    Ok(edit_page(session, &view, &form_of(&view), None, incidents))
}

pub async fn show(
    State(app): State<Arc<App>>,
    session: Session,
    Path(id): Path<Uuid>,
) -> WebResult<Markup> {
    shown(&app, &session, id, None).await
}

/// After a change: back to the page; a refusal: the page again with what to fix.
async fn answered<T>(
    app: &App,
    session: &Session,
    page: Uuid,
    done: Result<T, ServiceError>,
) -> WebResult<Response> {
    match done {
        Ok(_) => Ok(Redirect::to(&format!("/status-pages/{page}")).into_response()),
        Err(ServiceError::Validation(e)) => {
            let message = format!("`{}` {}", e.field, e.message);
            let again = shown(app, session, page, Some(message)).await?;
            Ok((StatusCode::BAD_REQUEST, again).into_response())
        }
        Err(e) => Err(e.into()),
    }
}

pub async fn open(
    State(app): State<Arc<App>>,
    session: Session,
    Path(id): Path<Uuid>,
    Form(pairs): Form<Vec<(String, String)>>,
) -> WebResult<Response> {
    let form = IncidentForm::of(pairs);
    session.check(&form.csrf)?;
    let spec = IncidentSpec {
        title: form.title.trim().to_string(),
        status: form.status(),
        message: form.message.clone(),
        monitor_ids: form.monitor_ids.clone(),
    };
    let done = app.status_pages().create_incident(id, spec).await;
    answered(&app, &session, id, done).await
}

pub async fn update(
    State(app): State<Arc<App>>,
    session: Session,
    Path((id, incident)): Path<(Uuid, Uuid)>,
    Form(pairs): Form<Vec<(String, String)>>,
) -> WebResult<Response> {
    let form = IncidentForm::of(pairs);
    session.check(&form.csrf)?;
    let update = IncidentUpdateSpec {
        status: form.status(),
        message: form.message.clone(),
    };
    let done = app
        .status_pages()
        .add_incident_update(id, incident, update)
        .await;
    answered(&app, &session, id, done).await
}

/// Publishes a draft the page opened itself.
pub async fn publish(
    State(app): State<Arc<App>>,
    session: Session,
    Path((id, incident)): Path<(Uuid, Uuid)>,
    Form(form): Form<CsrfForm>,
) -> WebResult<Response> {
    session.check(&form.csrf)?;
    let patch = IncidentPatch {
        published: Some(true),
        ..IncidentPatch::default()
    };
    let done = app
        .status_pages()
        .update_incident(id, incident, patch)
        .await;
    answered(&app, &session, id, done).await
}

pub async fn delete(
    State(app): State<Arc<App>>,
    session: Session,
    Path((id, incident)): Path<(Uuid, Uuid)>,
    Form(form): Form<CsrfForm>,
) -> WebResult<Response> {
    session.check(&form.csrf)?;
    let done = app.status_pages().delete_incident(id, incident).await;
    answered(&app, &session, id, done).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_form_takes_each_ticked_monitor_and_nothing_that_is_not_one() {
        let id = Uuid::new_v4();
        let form = IncidentForm::of(vec![
            ("title".into(), "Errors".into()),
            ("status".into(), "identified".into()),
            ("monitor_ids".into(), id.to_string()),
            ("monitor_ids".into(), "not-an-id".into()),
        ]);
        assert_eq!(form.monitor_ids, [id]);
        assert_eq!(form.status(), IncidentStatus::Identified);
        assert_eq!(
            IncidentForm::default().status(),
            IncidentStatus::Investigating
        );
    }
}
