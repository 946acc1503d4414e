//! Registration tokens: create (the secret shown once, with a copy button and the `docker run`
//! line that starts an agent with it), list, revoke, rotate.

use crate::service::error::ServiceError;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Redirect;
use axum::response::{IntoResponse, Response};
use axum::Form;
use maud::{html, Markup};
use serde::Deserialize;
use shared_proto::settings_api::{
    CreateRegistrationToken, RegistrationTokenView, RotateRegistrationToken,
};
use uuid::Uuid;

use super::fields::optional;
use super::layout::{self, ago, badge, csrf_field, Section};
use super::session::{CsrfForm, Session};
use super::WebResult;
use crate::service::App;
use crate::store::Cursor;

fn docker_run(url: &str, token: &RegistrationTokenView, secret: &str) -> String {
    let region = token
        .region
        .as_deref()
        .map(|r| format!(" \\\n  -e POLLER_REGION={r}"))
        .unwrap_or_default();
    let capabilities = token
        .capabilities
        .as_ref()
        .map(|list| format!(" \\\n  -e POLLER_CAPABILITIES={}", list.join(",")))
        .unwrap_or_default();
    format!(
        "docker run -d --name poller-agent --restart unless-stopped \\\n  \
         -e POLLER_CENTRAL_URL={url} \\\n  -e POLLER_REGISTRATION_TOKEN={secret}{region}{capabilities} \\\n  \
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
        .registration_tokens()
        .list_registration_tokens(&Cursor::start(), 1000)
        .await?
        .items;
    let now = app.now();
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
        h2.for-editors { "New token" }
        @if let Some(error) = &error { p.form-error role="alert" { (error) } }
        form.token-form method="post" action="/tokens" {
            (csrf_field(session))
            div.field { label for="token-name" { "Name" } input #token-name type="text" name="name" required; }
            div.field { label for="token-region" { "Region (optional)" } input #token-region type="text" name="region";
                        p.hint { "Pollers registering with it are placed in this region, and may not ask for another." } }
            div.field { label for="token-capabilities" { "Capabilities (optional)" } input #token-capabilities type="text" name="capabilities";
                        p.hint { "e.g. http,tcp: the most its pollers may run; empty for any." } }
            div.field { label for="token-uses" { "Uses" } input #token-uses type="number" name="max_uses" min="1" value="1"; }
            div.field { label for="token-expiry" { "Expires in" } input #token-expiry type="text" name="expires_in" value="24h";
                        p.hint { "e.g. 1h, 7d; empty for never" } }
            button type="submit" { "Create token" }
        }
        h2 { "Tokens" }
        div.table-wrap { table {
            thead { tr { th scope="col" { "Name" } th scope="col" { "Region" } th scope="col" { "Capabilities" } th scope="col" { "Uses" }
                th scope="col" { "Created" } th scope="col" { "Expires" } th scope="col" { "State" } th scope="col" { "Manage" } } }
            tbody { @for token in &tokens { tr {
                td { (token.name) } td { (token.region.as_deref().unwrap_or("–")) }
                td { @match &token.capabilities { Some(list) => (list.join(", ")), None => "any" } }
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
    capabilities: String,
    #[serde(default)]
    max_uses: String,
    #[serde(default)]
    expires_in: String,
}

pub async fn create_token(
    State(app): State<Arc<App>>,
    origin: super::origin::Origin,
    session: Session,
    Form(form): Form<TokenForm>,
) -> WebResult<Response> {
    session.check(&form.csrf)?;
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
        capabilities: optional(&form.capabilities).map(|list| {
            list.split(',')
                .map(|c| c.trim().to_string())
                .filter(|c| !c.is_empty())
                .collect()
        }),
    };
    match app
        .registration_tokens()
        .create_registration_token(request)
        .await
    {
        Ok(token) => {
            let secret = token.token.clone().unwrap_or_default();
            let command = docker_run(&origin.url, &token, &secret);
            let id = token.id;
            Ok(super::made(
                tokens_page(&app, &session, Some((token, command)), None).await?,
                id,
            ))
        }
        Err(e @ (ServiceError::Validation(_) | ServiceError::Invalid { .. })) => {
            let message = match &e {
                ServiceError::Validation(v) => format!("`{}` {}", v.field, v.message),
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
    app.registration_tokens()
        .revoke_registration_token(id)
        .await?;
    Ok(Redirect::to("/tokens").into_response())
}

pub async fn rotate_token(
    State(app): State<Arc<App>>,
    origin: super::origin::Origin,
    session: Session,
    Path(id): Path<Uuid>,
    Form(form): Form<CsrfForm>,
) -> WebResult<Response> {
    session.check(&form.csrf)?;
    let token = app
        .registration_tokens()
        .rotate_registration_token(id, RotateRegistrationToken { overlap: None })
        .await?;
    let secret = token.token.clone().unwrap_or_default();
    let command = docker_run(&origin.url, &token, &secret);
    Ok(tokens_page(&app, &session, Some((token, command)), None)
        .await?
        .into_response())
}
