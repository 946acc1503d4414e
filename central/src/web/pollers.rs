//! The pollers page (status, queue, alias, enable/disable, delete), registration tokens (create
//! with the secret shown once and the `docker run` line that uses it, revoke, rotate) and the
//! notification channels with their delivery log.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Redirect, Response};
use axum::{Extension, Form};
use chrono::Utc;
use maud::{html, Markup};
use serde::Deserialize;
use shared_proto::settings_api::{
    CreateRegistrationToken, PollerPatch, PollerStatus, RegistrationTokenView,
    RotateRegistrationToken,
};
use uuid::Uuid;

use super::layout::{self, ago, badge, csrf_field, maybe_ago, wire_name, Section};
use super::monitors::REFRESH;
use super::session::{CsrfForm, Session};
use super::{WebOptions, WebResult};
use crate::error::ApiError;
use crate::service::pollers::PollerFilter;
use crate::service::App;
use crate::store::Cursor;

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
    let optional = |text: &str| Some(text.trim().to_string()).filter(|t| !t.is_empty());
    let filter = PollerFilter {
        region: optional(&query.region),
        datacenter: optional(&query.datacenter),
        status: serde_json::from_value(serde_json::Value::String(query.status.clone())).ok(),
    };
    let pollers = app
        .list_pollers(&filter, &Cursor::start(), 1000)
        .await?
        .items;
    let now = Utc::now();
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
        div.table-wrap #poller-rows hx-get=(uri) hx-trigger=(REFRESH) hx-select="#poller-rows" hx-swap="outerHTML" {
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
                                    onsubmit="return confirm('Delete this poller? Its tokens stop working and its monitors move.')" {
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

/// Central's own address as the browser reached it, for the `docker run` line.
fn central_url(headers: &HeaderMap, options: WebOptions) -> String {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("central:8080");
    let scheme = if options.secure_cookies {
        "https"
    } else {
        "http"
    };
    format!("{scheme}://{host}")
}

fn docker_run(url: &str, token: &RegistrationTokenView, secret: &str) -> String {
    let region = token
        .region
        .as_deref()
        .map(|r| format!(" \\\n  -e POLLER_REGION={r}"))
        .unwrap_or_default();
    format!(
        "docker run -d --name poller-agent --restart unless-stopped \\\n  \
         -e POLLER_CENTRAL_URL={url} \\\n  -e POLLER_REGISTRATION_TOKEN={secret}{region} \\\n  \
         -v poller-data:/data poller-agent:local"
    )
}

async fn tokens_page(
    app: &App,
    session: &Session,
    created: Option<(RegistrationTokenView, String)>,
    error: Option<String>,
) -> WebResult<Markup> {
    let tokens = app
        .list_registration_tokens(&Cursor::start(), 1000)
        .await?
        .items;
    let now = Utc::now();
    let body = html! {
        h1 { "Registration tokens" }
        p { "An agent registers once with a token, then uses credentials of its own. Each token can be limited in uses and time, and tied to a region." }
        @if let Some((token, command)) = &created {
            section.secret aria-labelledby="secret-title" {
                h2 #secret-title { "Token “" (token.name) "” created" }
                p { strong { "Copy the secret now: it is shown only once." } }
                div.copyable {
                    code #secret { (token.token.as_deref().unwrap_or("")) }
                    button type="button" data-copy="secret" { "Copy" }
                }
                p { "Start an agent with it:" }
                div.copyable {
                    pre #docker-run { (command) }
                    button type="button" data-copy="docker-run" { "Copy" }
                }
            }
        }
        h2 { "New token" }
        @if let Some(error) = &error { p.form-error role="alert" { (error) } }
        form.token-form method="post" action="/tokens" {
            (csrf_field(session))
            div.field { label for="token-name" { "Name" } input #token-name type="text" name="name" required; }
            div.field { label for="token-region" { "Region (optional)" } input #token-region type="text" name="region";
                        p.hint { "Pollers registering with it are placed in this region." } }
            div.field { label for="token-uses" { "Uses" } input #token-uses type="number" name="max_uses" min="1" value="1"; }
            div.field { label for="token-expiry" { "Expires in" } input #token-expiry type="text" name="expires_in" value="24h";
                        p.hint { "e.g. 1h, 7d; empty for never" } }
            button type="submit" { "Create token" }
        }
        h2 { "Tokens" }
        div.table-wrap { table {
            thead { tr { th scope="col" { "Name" } th scope="col" { "Region" } th scope="col" { "Uses" }
                th scope="col" { "Created" } th scope="col" { "Expires" } th scope="col" { "State" } th scope="col" { "Manage" } } }
            tbody { @for token in &tokens { tr {
                td { (token.name) } td { (token.region.as_deref().unwrap_or("–")) }
                td { (token.uses) " / " (token.max_uses) }
                td { (ago(token.created_at, now)) }
                td { @match token.expires_at { Some(at) => (at.format("%Y-%m-%d %H:%M UTC")), None => "never" } }
                td { @if token.revoked { (badge("revoked")) } @else if token.expires_at.is_some_and(|at| at < now) { (badge("expired")) }
                     @else if token.uses >= token.max_uses { (badge("used")) } @else { (badge("usable")) } }
                td { @if !token.revoked {
                    form.inline method="post" action={ "/tokens/" (token.id) "/rotate" } {
                        (csrf_field(session)) button type="submit" { "Rotate" } }
                    form.inline method="post" action={ "/tokens/" (token.id) "/revoke" } {
                        (csrf_field(session)) button.danger type="submit" { "Revoke" } }
                } }
            } } }
        } }
    };
    Ok(layout::page(
        session,
        Section::Tokens,
        "Registration tokens",
        body,
    ))
}

pub async fn tokens(State(app): State<Arc<App>>, session: Session) -> WebResult<Markup> {
    tokens_page(&app, &session, None, None).await
}

#[derive(Debug, Deserialize)]
pub struct TokenForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    region: String,
    #[serde(default)]
    max_uses: String,
    #[serde(default)]
    expires_in: String,
}

pub async fn create_token(
    State(app): State<Arc<App>>,
    Extension(options): Extension<WebOptions>,
    headers: HeaderMap,
    session: Session,
    Form(form): Form<TokenForm>,
) -> WebResult<Response> {
    session.check(&form.csrf)?;
    let optional = |text: &str| Some(text.trim().to_string()).filter(|t| !t.is_empty());
    let max_uses = match form.max_uses.trim() {
        "" => None,
        text => match text.parse() {
            Ok(uses) => Some(uses),
            Err(_) => {
                let page = tokens_page(
                    &app,
                    &session,
                    None,
                    Some(format!("`max_uses` must be a whole number, not `{text}`")),
                )
                .await?;
                return Ok((StatusCode::BAD_REQUEST, page).into_response());
            }
        },
    };
    let request = CreateRegistrationToken {
        name: form.name.trim().to_string(),
        expires_in: optional(&form.expires_in),
        max_uses,
        region: optional(&form.region),
    };
    match app.create_registration_token(request).await {
        Ok(token) => {
            let secret = token.token.clone().unwrap_or_default();
            let command = docker_run(&central_url(&headers, options), &token, &secret);
            Ok(tokens_page(&app, &session, Some((token, command)), None)
                .await?
                .into_response())
        }
        Err(e @ (ApiError::Validation(_) | ApiError::BadRequest { .. })) => {
            let message = match &e {
                ApiError::Validation(v) => format!("`{}` {}", v.field, v.message),
                other => other.to_string(),
            };
            let page = tokens_page(&app, &session, None, Some(message)).await?;
            Ok((StatusCode::BAD_REQUEST, page).into_response())
        }
        Err(e) => Err(e.into()),
    }
}

pub async fn revoke_token(
    State(app): State<Arc<App>>,
    session: Session,
    Path(id): Path<Uuid>,
    Form(form): Form<CsrfForm>,
) -> WebResult<Response> {
    session.check(&form.csrf)?;
    app.revoke_registration_token(id).await?;
    Ok(Redirect::to("/tokens").into_response())
}

pub async fn rotate_token(
    State(app): State<Arc<App>>,
    Extension(options): Extension<WebOptions>,
    headers: HeaderMap,
    session: Session,
    Path(id): Path<Uuid>,
    Form(form): Form<CsrfForm>,
) -> WebResult<Response> {
    session.check(&form.csrf)?;
    let token = app
        .rotate_registration_token(id, RotateRegistrationToken { overlap: None })
        .await?;
    let secret = token.token.clone().unwrap_or_default();
    let command = docker_run(&central_url(&headers, options), &token, &secret);
    Ok(tokens_page(&app, &session, Some((token, command)), None)
        .await?
        .into_response())
}

pub async fn notifications(State(app): State<Arc<App>>, session: Session) -> WebResult<Markup> {
    let channels = app.list_channels(&Cursor::start(), 1000).await?.items;
    let log = app
        .list_notifications(None, None, &Cursor::start(), 1000)
        .await?
        .items;
    let names: std::collections::HashMap<Uuid, &str> =
        channels.iter().map(|c| (c.id, c.name.as_str())).collect();
    let now = Utc::now();
    let newest: Vec<_> = log.iter().rev().take(100).collect();
    let body = html! {
        h1 { "Notifications" }
        p { "Channels are managed through the settings API (" code { "/api/v1/notification-channels" } "); see docs/operations.md." }
        h2 { "Channels" }
        div.table-wrap { table {
            thead { tr { th scope="col" { "Name" } th scope="col" { "Kind" } th scope="col" { "Where" } th scope="col" { "Default" } } }
            tbody {
                @for channel in &channels { tr {
                    td { (channel.name) } td { (wire_name(channel.kind)) }
                    td { (channel.url.as_deref().map(String::from).unwrap_or_else(|| channel.to.join(", "))) }
                    td { @if channel.default { "yes" } @else { "no" } }
                } }
                @if channels.is_empty() { tr { td colspan="4" { "No channels." } } }
            }
        } }
        h2 { "Delivery log (newest 100)" }
        div.table-wrap { table {
            thead { tr { th scope="col" { "When" } th scope="col" { "Event" } th scope="col" { "Channel" }
                th scope="col" { "Delivery" } th scope="col" { "Attempts" } th scope="col" { "Last error" } } }
            tbody { @for row in newest { tr {
                td { (ago(row.created_at, now)) }
                td { (wire_name(row.event))
                     @if let Some(monitor) = row.monitor_id { " " a href={ "/monitors/" (monitor) } { "monitor" } } }
                td { (names.get(&row.channel_id).copied().unwrap_or("deleted")) }
                td { (badge(&wire_name(row.status))) } td { (row.attempts) }
                td { (row.last_error.as_deref().unwrap_or("")) }
            } } }
        } }
    };
    Ok(layout::page(
        &session,
        Section::Notifications,
        "Notifications",
        body,
    ))
}
