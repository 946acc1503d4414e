//! The audit log page (admins): the newest changes, who made them and from where, filtered by
//! kind of object. What is recorded is `service::audit`'s; the API is `GET /api/v1/audit`.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use maud::html;
use serde::Deserialize;
use shared_proto::audit::AuditFilter;

use super::layout::{self, ago, Section};
use super::session::Session;
use super::WebResult;
use crate::service::App;
use crate::store::Cursor;

/// How many entries the page lists.
const SHOWN: u32 = 200;

#[derive(Deserialize)]
pub struct AuditPageQuery {
    #[serde(default)]
    object_kind: Option<String>,
}

pub async fn list(
    State(app): State<Arc<App>>,
    session: Session,
    Query(query): Query<AuditPageQuery>,
) -> WebResult<Response> {
    // Only names the log could hold: anything else shows everything.
    let object_kind = query.object_kind.filter(|k| {
        (1..=32).contains(&k.len()) && k.chars().all(|c| c.is_ascii_lowercase() || c == '-')
    });
    let filter = AuditFilter {
        object_kind: object_kind.clone(),
        ..AuditFilter::default()
    };
    let entries = app.audit_log(&filter, &Cursor::start(), SHOWN).await?.items;
    let now = app.now();
    let body = html! {
        div.heading { h1 { "Audit log" } }
        p.hint { "Every change made through the API or this page, newest first (the "
            (SHOWN) " newest" @if let Some(kind) = &object_kind { ", " (kind) " only" } "). "
            "Secrets are never recorded." }
        div.table-wrap { table {
            thead { tr { th scope="col" { "When" } th scope="col" { "Who" } th scope="col" { "From" }
                th scope="col" { "Action" } th scope="col" { "Object" } } }
            tbody {
                @for entry in &entries { tr {
                    td title=(entry.at.to_rfc3339()) { (ago(entry.at, now)) }
                    td { (entry.actor.name) " " span.small { "(" (entry.actor.kind.replace('_', " ")) ")" } }
                    td { (entry.actor.address.as_deref().unwrap_or("")) }
                    td { (entry.action.replace('_', " ")) }
                    td { a href={ "/audit?object_kind=" (entry.object.kind) } { (entry.object.kind) }
                         @if let Some(name) = entry.after.as_ref().or(entry.before.as_ref())
                             .and_then(|v| v.get("name")).and_then(|n| n.as_str()) { " " (name) } }
                } }
                @if entries.is_empty() { tr { td colspan="5" { "No changes recorded yet." } } }
            }
        } }
    };
    Ok(layout::page(&session, Section::Audit, "Audit log", body).into_response())
}
