//! Dependencies on the page: a monitor's dependency table (with its documents' warnings and
//! changes) on the monitor's page, and the Dependencies page, which shows which services share
//! a failing dependency and manages aliases. What is shown is `service::dependencies`'.

use crate::service::error::ServiceError;
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use chrono::{DateTime, Utc};
use maud::{html, Markup};
use serde::Deserialize;
use shared_proto::dependencies::{MonitorDependencies, NewDependencyAlias};

use super::layout::{self, ago, badge, csrf_field, wire_name, Section};
use super::session::Session;
use super::WebResult;
use crate::service::App;

/// How many changes a monitor's page lists.
const CHANGES_SHOWN: usize = 20;

fn latency(ms: Option<f64>) -> String {
    ms.map_or_else(String::new, |ms| format!("{} ms", ms.round()))
}

/// A monitor's dependencies, for its page (nothing when it reads no health document).
pub fn monitor_section(deps: &MonitorDependencies, now: DateTime<Utc>) -> Markup {
    if deps.dependencies.is_empty() && deps.warnings.is_empty() && deps.history.is_empty() {
        return html! {};
    }
    let located = deps.dependencies.iter().any(|d| d.region.is_some());
    html! {
        h2 { "Dependencies" }
        @if !deps.warnings.is_empty() {
            div.warning role="status" {
                p { "The newest health document could not be read in full:" }
                ul { @for w in &deps.warnings {
                    li { @if let Some(region) = &w.region { (region) ": " } (w.warning) }
                } }
            }
        }
        div.table-wrap { table aria-label="Dependencies" {
            thead { tr {
                th scope="col" { "Name" }
                @if located { th scope="col" { "Region" } }
                th scope="col" { "Health" } th scope="col" { "Latency" } th scope="col" { "Error" }
                th scope="col" { "Since" } th scope="col" { "Contact" }
            } }
            tbody { @for d in &deps.dependencies { tr {
                td { (d.name) @if d.canonical != d.name { br; span.small.muted { "as " (d.canonical) } } }
                @if located { td { (d.region.as_deref().unwrap_or("")) } }
                td { (badge(&wire_name(d.state))) }
                td { (latency(d.latency_ms)) }
                td { (d.error.as_deref().unwrap_or("")) }
                td { (ago(d.last_change_at, now)) }
                td { @if let Some(contact) = &d.contact { code.small { (contact) } } }
            } } }
        } }
        @if !deps.history.is_empty() {
            h3 { "Dependency changes" }
            ul.events { @for change in deps.history.iter().take(CHANGES_SHOWN) {
                li { (ago(change.at, now)) ": " (change.name) " " (wire_name(change.kind)) " "
                     (badge(&wire_name(change.state)))
                     @if let Some(error) = &change.error { " " span.reason { (error) } }
                     @if let Some(region) = &change.region { " in " (region) } }
            } }
        }
    }
}

async fn page(app: &App, session: &Session, error: Option<String>) -> WebResult<Markup> {
    let list = app.dependencies().all_dependencies().await?;
    let aliases = app.dependencies().dependency_aliases().await?;
    let now = app.now();
    let body = html! {
        h1 { "Dependencies" }
        p.muted { "What health-json monitors report of the services they depend on, grouped through aliases; "
            "unhealthy ones first, so services that share a failing dependency show together." }
        @if list.truncated { p.warning role="status" { "Only the first 10,000 reports are shown." } }
        div.table-wrap { table aria-label="Dependencies" {
            thead { tr { th scope="col" { "Dependency" } th scope="col" { "Health" }
                th scope="col" { "Reported by" } } }
            tbody {
                @for group in &list.dependencies { tr {
                    td { (group.canonical) }
                    td { (badge(&wire_name(group.state))) br;
                         span.small { (group.unhealthy) " unhealthy, " (group.healthy) " healthy"
                             @if group.skipped > 0 { ", " (group.skipped) " skipped" } } }
                    td { ul.plain { @for r in &group.reporters { li {
                        a href={ "/monitors/" (r.monitor_id) } { (r.monitor_name) }
                        @if let Some(region) = &r.region { " (" (region) ")" }
                        @if r.name != group.canonical { " as " code { (r.name) } }
                        " " (badge(&wire_name(r.state)))
                        @if let Some(error) = &r.error { " " span.reason { (error) } }
                        " " span.small.muted { "since " (ago(r.last_change_at, now)) }
                    } } } }
                } }
                @if list.dependencies.is_empty() { tr { td colspan="3" {
                    "No dependencies reported yet. An http monitor with the response format "
                    "health-json reports those its service lists." } } }
            }
        } }
        h2 { "Aliases" }
        p.muted.small { "An alias makes a reported name stand for another, for every monitor: "
            "pg-main, postgres and db reported by three services become one dependency." }
        @if let Some(error) = &error { p.form-error role="alert" { (error) } }
        form.alias-form method="post" action="/dependencies/aliases" {
            (csrf_field(session))
            label { "Reported name " input name="alias" required maxlength="200"; }
            " "
            label { "stands for " input name="canonical" required maxlength="200"; }
            " "
            button type="submit" { "Add the alias" }
        }
        div.table-wrap { table aria-label="Aliases" {
            thead { tr { th scope="col" { "Reported name" } th scope="col" { "Stands for" }
                th scope="col" { "Manage" } } }
            tbody {
                @for alias in &aliases { tr {
                    td { (alias.alias) } td { (alias.canonical) }
                    td { form.inline method="post" action="/dependencies/aliases/delete" {
                        (csrf_field(session))
                        input type="hidden" name="alias" value=(alias.alias);
                        button.danger type="submit" { "Delete" span.visually-hidden { " " (alias.alias) } }
                    } }
                } }
                @if aliases.is_empty() { tr { td colspan="3" { "No aliases." } } }
            }
        } }
    };
    Ok(layout::page(
        session,
        Section::Dependencies,
        "Dependencies",
        body,
    ))
}

pub async fn list(State(app): State<Arc<App>>, session: Session) -> WebResult<Markup> {
    page(&app, &session, None).await
}

#[derive(Debug, Deserialize)]
pub struct AliasForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    alias: String,
    #[serde(default)]
    canonical: String,
}

/// Adds an alias; a refused one is said above the form.
pub async fn create_alias(
    State(app): State<Arc<App>>,
    session: Session,
    Form(form): Form<AliasForm>,
) -> WebResult<Response> {
    session.check(&form.csrf)?;
    let new = NewDependencyAlias {
        alias: form.alias.trim().to_string(),
        canonical: form.canonical.trim().to_string(),
    };
    match app.dependencies().create_dependency_alias(new).await {
        Ok(alias) => Ok(super::made(Redirect::to("/dependencies"), alias.alias)),
        // Refused: the page again with why, answered as the refusal it is (so the audit
        // layer records no change).
        Err(ServiceError::Validation(e)) => {
            let message = format!("`{}` {}", e.field, e.message);
            let page = page(&app, &session, Some(message)).await?;
            Ok((StatusCode::BAD_REQUEST, page).into_response())
        }
        Err(ServiceError::Conflict(message)) => {
            let page = page(&app, &session, Some(message)).await?;
            Ok((StatusCode::CONFLICT, page).into_response())
        }
        Err(other) => Err(other.into()),
    }
}

pub async fn delete_alias(
    State(app): State<Arc<App>>,
    session: Session,
    Form(form): Form<AliasForm>,
) -> WebResult<Response> {
    session.check(&form.csrf)?;
    app.dependencies()
        .delete_dependency_alias(&form.alias)
        .await?;
    Ok(Redirect::to("/dependencies").into_response())
}
