//! The notifications page: the channels (with edit, test and delete) and the newest deliveries.
//! Creating and editing a channel is `channel_form`'s.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use maud::{html, Markup};
use uuid::Uuid;

use super::layout::{self, ago, badge, csrf_field, wire_name, Section};
use super::session::{CsrfForm, Session};
use super::WebResult;
use crate::service::App;
use crate::store::Cursor;

/// How many deliveries the page lists.
const LOG_LENGTH: u32 = 100;

/// What a test of a channel said, shown above the list.
struct Tested {
    channel: String,
    error: Option<String>,
}

async fn page(app: &App, session: &Session, tested: Option<Tested>) -> WebResult<Markup> {
    let channels = app
        .channels()
        .list_channels(&Cursor::start(), 1000)
        .await?
        .items;
    let log = app.channels().recent_notifications(LOG_LENGTH).await?;
    let names: HashMap<Uuid, &str> = channels.iter().map(|c| (c.id, c.name.as_str())).collect();
    let now = app.now();
    let body = html! {
        div.heading { h1 { "Notifications" } a.button.for-editors href="/notifications/channels/new" { "Add a channel" } }
        @if let Some(tested) = &tested {
            @match &tested.error {
                None => p.notice role="status" { "A test message reached " (tested.channel) "." },
                Some(error) => p.form-error role="alert" { "The test message did not reach " (tested.channel) ": " (error) },
            }
        }
        h2 { "Channels" }
        div.table-wrap { table {
            thead { tr { th scope="col" { "Name" } th scope="col" { "Kind" } th scope="col" { "Where" }
                th scope="col" { "Default" } th scope="col" { "Manage" } } }
            tbody {
                @for channel in &channels { tr {
                    td { (channel.name) } td { (wire_name(channel.kind)) }
                    td { (channel.url.as_deref().map(String::from).unwrap_or_default())
                         @if !channel.to.is_empty() { br; span.small { "to " (channel.to.join(", ")) } } }
                    td { @if channel.default { "yes" } @else { "no" } }
                    td {
                        a.for-editors href={ "/notifications/channels/" (channel.id) "/edit" } { "Edit" span.visually-hidden { " " (channel.name) } }
                        " "
                        form.inline method="post" action={ "/notifications/channels/" (channel.id) "/test" } {
                            (csrf_field(session)) button type="submit" { "Test" } }
                        form.inline method="post" action={ "/notifications/channels/" (channel.id) "/delete" }
                            data-confirm="Delete this channel? Monitors stop notifying it." {
                            (csrf_field(session)) button.danger type="submit" { "Delete" } }
                    }
                } }
                @if channels.is_empty() { tr { td colspan="5" {
                    "No channels yet. " a href="/notifications/channels/new" { "Add one" } " to hear when a monitor goes down." } } }
            }
        } }
        h2 { "Delivery log (newest " (LOG_LENGTH) ")" }
        div.table-wrap { table {
            thead { tr { th scope="col" { "When" } th scope="col" { "Event" } th scope="col" { "Channel" }
                th scope="col" { "Delivery" } th scope="col" { "Attempts" } th scope="col" { "Last error" } } }
            tbody {
                @for row in &log { tr {
                    td { (ago(row.created_at, now)) }
                    td { (wire_name(row.event))
                         @if let Some(monitor) = row.monitor_id { " " a href={ "/monitors/" (monitor) } { "monitor" } } }
                    td { (names.get(&row.channel_id).copied().unwrap_or("deleted")) }
                    td { (badge(&wire_name(row.status))) } td { (row.attempts) }
                    td { (row.last_error.as_deref().unwrap_or("")) }
                } }
                @if log.is_empty() { tr { td colspan="6" { "Nothing sent yet." } } }
            }
        } }
    };
    Ok(layout::page(
        session,
        Section::Notifications,
        "Notifications",
        body,
    ))
}

pub async fn list(State(app): State<Arc<App>>, session: Session) -> WebResult<Markup> {
    page(&app, &session, None).await
}

/// Sends a test message now and says how it went.
pub async fn test(
    State(app): State<Arc<App>>,
    session: Session,
    Path(id): Path<Uuid>,
    Form(form): Form<CsrfForm>,
) -> WebResult<Markup> {
    session.check(&form.csrf)?;
    let channel = app.channels().get_channel(id).await?.name;
    let result = app.channels().test_channel(id).await?;
    let error =
        (!result.delivered).then(|| result.error.unwrap_or_else(|| "no reason given".into()));
    page(&app, &session, Some(Tested { channel, error })).await
}

pub async fn delete(
    State(app): State<Arc<App>>,
    session: Session,
    Path(id): Path<Uuid>,
    Form(form): Form<CsrfForm>,
) -> WebResult<Response> {
    session.check(&form.csrf)?;
    app.channels().delete_channel(id).await?;
    Ok(Redirect::to("/notifications").into_response())
}
