//! The pollers page: status with since-when, queue, heartbeat, capabilities, monitors; rename
//! (alias), enable/disable, delete; filters by region, datacenter and status.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::Uri;
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use maud::{html, Markup};
use serde::Deserialize;
use shared_proto::settings_api::{PollerPatch, PollerStatus};
use uuid::Uuid;

use super::fields::optional;
use super::layout::{self, badge, csrf_field, maybe_ago, wire_name, Section};
use super::session::{CsrfForm, Session};
use super::WebResult;
use crate::service::pollers::PollerFilter;
use crate::service::App;
use crate::store::Cursor;

/// The rows hold the alias forms: a refresh while one has the focus would wipe what is typed,
/// so `app.js` skips it (`data-hold-while-focused`: an htmx trigger filter would need `eval`,
/// which the Content Security Policy refuses).
const REFRESH_UNLESS_TYPING: &str = "every 5s";

#[derive(Debug, Default, Deserialize)]
pub struct PollerQuery {
    #[serde(default)]
    region: String,
    #[serde(default)]
    datacenter: String,
    #[serde(default)]
    status: String,
}

pub async fn list(
    State(app): State<Arc<App>>,
    session: Session,
    uri: Uri,
    Query(query): Query<PollerQuery>,
) -> WebResult<Markup> {
    let filter = PollerFilter {
        region: optional(&query.region),
        datacenter: optional(&query.datacenter),
        status: serde_json::from_value(serde_json::Value::String(query.status.clone())).ok(),
    };
    let pollers = app
        .list_pollers(&filter, &Cursor::start(), 1000)
        .await?
        .items;
    let now = app.now();
    let body = html! {
        div.heading { h1 { "Pollers" } a.button href="/tokens" { "Add a poller" } }
        form.filters method="get" action="/pollers" role="search" {
            label { "Region " input type="text" name="region" value=(query.region) size="10"; }
            label { "Datacenter " input type="text" name="datacenter" value=(query.datacenter) size="10"; }
            label { "Status "
                select name="status" {
                    option value="" { "any" }
                    @for status in [PollerStatus::Online, PollerStatus::Degraded, PollerStatus::Offline] {
                        @let status = wire_name(status);
                        option value=(status) selected[query.status == status] { (status) }
                    }
                }
            }
            button type="submit" { "Filter" }
        }
        div.table-wrap #poller-rows hx-get=(uri) hx-trigger=(REFRESH_UNLESS_TYPING) hx-select="#poller-rows" hx-swap="outerHTML" data-hold-while-focused {
            table {
                thead { tr {
                    th scope="col" { "Poller" } th scope="col" { "Status" } th scope="col" { "Region / DC" }
                    th scope="col" { "Version" } th scope="col" { "Queue" } th scope="col" { "Last heartbeat" }
                    th scope="col" { "Capabilities" } th scope="col" { "Monitors" } th scope="col" { "Manage" }
                } }
                tbody {
                    @for poller in &pollers {
                        tr {
                            td { strong { (poller.alias.as_deref().unwrap_or(&poller.name)) }
                                 @if poller.alias.is_some() { br; span.muted.small { (poller.name) } } }
                            td { (badge(&wire_name(poller.status)))
                                 @if !poller.enabled { " " span.badge.badge-paused { "disabled" } }
                                 br; span.small { "since " (maybe_ago(poller.status_since, now)) } }
                            td { (poller.region.as_deref().unwrap_or("–")) " / " (poller.datacenter.as_deref().unwrap_or("–")) }
                            td { (poller.version.as_deref().unwrap_or("–")) }
                            td { (poller.queue_depth)
                                 @if poller.held_results > 0 { br; span.reason.small { (poller.held_results) " refused, held" } }
                                 @if poller.dropped_results > 0 { br; span.reason.small { (poller.dropped_results) " dropped" } } }
                            td { (maybe_ago(poller.last_heartbeat_at, now)) }
                            td { (poller.capabilities.join(", ")) }
                            td { (poller.assigned_monitors) }
                            td {
                                form.inline method="post" action={ "/pollers/" (poller.id) } {
                                    (csrf_field(&session))
                                    label.visually-hidden for={ "alias-" (poller.id) } { "Alias of " (poller.name) }
                                    input id={ "alias-" (poller.id) } type="text" name="alias" size="10"
                                        value=(poller.alias.as_deref().unwrap_or("")) placeholder="alias";
                                    button type="submit" name="action" value="rename" { "Rename" }
                                    @if poller.enabled {
                                        button type="submit" name="action" value="disable" { "Disable" }
                                    } @else {
                                        button type="submit" name="action" value="enable" { "Enable" }
                                    }
                                }
                                form.inline method="post" action={ "/pollers/" (poller.id) "/delete" }
                                    data-confirm="Delete this poller? Its tokens stop working and its monitors move." {
                                    (csrf_field(&session)) button.danger type="submit" { "Delete" }
                                }
                            }
                        }
                    }
                    @if pollers.is_empty() {
                        tr { td colspan="9" { "No pollers yet. " a href="/tokens" { "Make a registration token" } " and start an agent with it." } }
                    }
                }
            }
        }
    };
    Ok(layout::page(&session, Section::Pollers, "Pollers", body))
}

#[derive(Debug, Deserialize)]
pub struct PollerForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    alias: String,
    #[serde(default)]
    action: String,
}

pub async fn update(
    State(app): State<Arc<App>>,
    session: Session,
    Path(id): Path<Uuid>,
    Form(form): Form<PollerForm>,
) -> WebResult<Response> {
    session.check(&form.csrf)?;
    let patch = match form.action.as_str() {
        "enable" => PollerPatch {
            enabled: Some(true),
            ..Default::default()
        },
        "disable" => PollerPatch {
            enabled: Some(false),
            ..Default::default()
        },
        _ => PollerPatch {
            alias: Some(Some(form.alias.trim().to_string()).filter(|a| !a.is_empty())),
            ..Default::default()
        },
    };
    app.update_poller(id, patch).await?;
    Ok(Redirect::to("/pollers").into_response())
}

pub async fn delete(
    State(app): State<Arc<App>>,
    session: Session,
    Path(id): Path<Uuid>,
    Form(form): Form<CsrfForm>,
) -> WebResult<Response> {
    session.check(&form.csrf)?;
    app.delete_poller(id).await?;
    Ok(Redirect::to("/pollers").into_response())
}
