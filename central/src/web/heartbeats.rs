//! A heartbeat monitor's part of its page: the last pings (time, source, kind, output) and
//! "New ping URL", whose answer is the one page that shows the URL (it is stored hashed).
//! Rules are `service::push`'s.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::Form;
use chrono::{DateTime, Utc};
use maud::{html, Markup};
use shared_proto::heartbeat::PingList;
use shared_proto::settings_api::MonitorView;
use uuid::Uuid;

use super::layout::{self, csrf_field, Section};
use super::session::{CsrfForm, Session};
use super::WebResult;
use crate::service::App;

/// The pings section and the control that makes a new ping URL.
pub fn section(session: &Session, id: Uuid, pings: &PingList, now: DateTime<Utc>) -> Markup {
    html! {
        h2 { "Pings" }
        p.muted.small { "The job reports at its ping URL (shown once, when the monitor was made); "
            "append " code { "/start" } ", " code { "/fail" } " or " code { "/<exit code>" } "." }
        form.inline method="post" action={ "/monitors/" (id) "/ping-url" }
            data-confirm="Make a new ping URL? The current one stops working." {
            (csrf_field(session)) button type="submit" { "New ping URL" }
        }
        @if pings.pings.is_empty() { p.muted { "No ping yet." } } @else {
            div.table-wrap { table #pings { thead { tr { th scope="col" { "When" } th scope="col" { "Kind" }
                th scope="col" { "From" } th scope="col" { "Output" } } }
                tbody { @for ping in &pings.pings { tr {
                    td { (layout::ago(ping.at, now)) }
                    td { (ping.kind) " " span.muted.small { (ping.method) } }
                    td { (ping.source) }
                    td { @if ping.body.is_empty() { span.muted { "–" } } @else { pre.small { (ping.body) } } }
                } } }
            } }
        }
    }
}

/// `New ping URL`: makes one and shows it, this once.
pub async fn new_url(
    State(app): State<Arc<App>>,
    session: Session,
    Path(id): Path<Uuid>,
    Form(form): Form<CsrfForm>,
) -> WebResult<Markup> {
    session.check(&form.csrf)?;
    let url = app.new_ping_url(id).await?;
    let monitor = app.get_monitor(id).await?;
    Ok(url_page(&session, &monitor, &url.ping_url))
}

/// The page that shows a ping URL, the one time it is shown.
pub fn url_page(session: &Session, monitor: &MonitorView, url: &str) -> Markup {
    let body = html! {
        h1 { "Ping URL of " (monitor.spec.name) }
        p { "Copy it now: central keeps only its hash, so it is not shown again "
            "(a new one can be made on the monitor's page, ending this one)." }
        p { code #ping-url { (url) } }
        p.muted.small { "In the job: " code { "curl -fsS -m 10 --retry 3 " (url) } }
        p { a #to-monitor href={ "/monitors/" (monitor.id) } { "Go to the monitor" } }
    };
    layout::page(session, Section::Monitors, "Ping URL", body)
}
