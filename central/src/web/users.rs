//! Users (admins: add, change role, log out everywhere, remove) and API keys (everyone: make one
//! at most at your own role, shown once; revoke). The rules are `service::users`' and
//! `service::api_keys`'; who may open which page is `access::required_role_on_page`'s.

use crate::service::error::ServiceError;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use maud::{html, Markup};
use serde::Deserialize;
use shared_proto::users::{CreateApiKey, CreateUser, Role, UpdateUser};
use uuid::Uuid;

use super::fields::optional;
use super::layout::{self, ago, badge, csrf_field, Section};
use super::session::{CsrfForm, Session};
use super::WebResult;
use crate::service::App;
use crate::store::Cursor;

const ROLES: [Role; 3] = [Role::Viewer, Role::Editor, Role::Admin];

/// A refusal the form shows beside itself; anything else is an error page.
fn shown(error: ServiceError) -> Result<String, ServiceError> {
    match error {
        ServiceError::Validation(v) => Ok(format!("`{}` {}", v.field, v.message)),
        e @ (ServiceError::Conflict(_)
        | ServiceError::RoleRequired { .. }
        | ServiceError::Invalid { .. }) => Ok(e.to_string()),
        other => Err(other),
    }
}

fn role_select(id: &str, chosen: Role, up_to: Role) -> Markup {
    html! {
        select #(id) name="role" {
            @for role in ROLES.into_iter().filter(|r| *r <= up_to) {
                option value=(role.as_str()) selected[role == chosen] { (role.as_str()) }
            }
        }
    }
}

async fn users_page(app: &App, session: &Session, error: Option<String>) -> WebResult<Markup> {
    let users = app.users().list_users(&Cursor::start(), 1000).await?.items;
    let body = html! {
        h1 { "Users" }
        p { "Viewers read everything; editors also change monitors, channels, maintenance, pollers and tokens; admins also manage users and read the audit log." }
        h2 { "New user" }
        @if let Some(error) = &error { p.form-error role="alert" { (error) } }
        form.token-form method="post" action="/users" {
            (csrf_field(session))
            div.field { label for="user-name" { "Name" } input #user-name type="text" name="name" required; }
            div.field { label for="user-email" { "Email" } input #user-email type="email" name="email" required; }
            div.field { label for="user-role" { "Role" } (role_select("user-role", Role::Viewer, Role::Admin)) }
            div.field { label for="user-password" { "Password" } input #user-password type="password" name="password" autocomplete="new-password";
                        p.hint { "At least 12 characters and hard to guess (four or five unrelated words do). Empty: single sign-on only." } }
            button type="submit" { "Add user" }
        }
        h2 { "Users" }
        div.table-wrap { table {
            thead { tr { th scope="col" { "Name" } th scope="col" { "Email" } th scope="col" { "Role" }
                th scope="col" { "Logs in with" } th scope="col" { "Manage" } } }
            tbody { @for user in &users { tr {
                td { (user.name) } td { (user.email) }
                td { form.inline method="post" action={ "/users/" (user.id) } {
                        (csrf_field(session))
                        (role_select(&format!("role-{}", user.id), user.role, Role::Admin))
                        button type="submit" { "Save" span.visually-hidden { " " (user.name) "'s role" } } } }
                td { @if user.has_password { "password" } @if user.has_password && user.single_sign_on { ", " }
                     @if user.single_sign_on { "single sign-on" } }
                td {
                    form.inline method="post" action={ "/users/" (user.id) "/log-out" } {
                        (csrf_field(session)) button type="submit" { "Log out everywhere" } }
                    form.inline method="post" action={ "/users/" (user.id) "/delete" }
                        data-confirm="Remove this user? Their API keys and sessions stop at once." {
                        (csrf_field(session)) button.danger type="submit" { "Remove" } }
                }
            } } }
        } }
    };
    Ok(layout::page(session, Section::Users, "Users", body))
}

pub async fn users(State(app): State<Arc<App>>, session: Session) -> WebResult<Markup> {
    users_page(&app, &session, None).await
}

#[derive(Debug, Deserialize)]
pub struct UserForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    email: String,
    #[serde(default)]
    role: String,
    #[serde(default)]
    password: String,
}

fn role_of(text: &str) -> Role {
    Role::parse(text).unwrap_or(Role::Viewer)
}

pub async fn create_user(
    State(app): State<Arc<App>>,
    session: Session,
    Form(form): Form<UserForm>,
) -> WebResult<Response> {
    session.check(&form.csrf)?;
    let request = CreateUser {
        name: form.name,
        email: form.email,
        role: role_of(&form.role),
        password: optional(&form.password),
    };
    match app.users().create_user(request).await {
        Ok(user) => Ok(super::made(Redirect::to("/users"), user.id)),
        Err(e) => {
            let page = users_page(&app, &session, Some(shown(e)?)).await?;
            Ok((StatusCode::BAD_REQUEST, page).into_response())
        }
    }
}

pub async fn update_user(
    State(app): State<Arc<App>>,
    session: Session,
    Path(id): Path<Uuid>,
    Form(form): Form<UserForm>,
) -> WebResult<Response> {
    session.check(&form.csrf)?;
    let patch = UpdateUser {
        role: Some(role_of(&form.role)),
        ..UpdateUser::default()
    };
    match app.users().update_user(id, patch).await {
        Ok(_) => Ok(Redirect::to("/users").into_response()),
        Err(e) => {
            let page = users_page(&app, &session, Some(shown(e)?)).await?;
            Ok((StatusCode::BAD_REQUEST, page).into_response())
        }
    }
}

pub async fn log_out_user(
    State(app): State<Arc<App>>,
    session: Session,
    Path(id): Path<Uuid>,
    Form(form): Form<CsrfForm>,
) -> WebResult<Response> {
    session.check(&form.csrf)?;
    app.users().end_user_sessions(id, None).await?;
    Ok(Redirect::to("/users").into_response())
}

pub async fn delete_user(
    State(app): State<Arc<App>>,
    session: Session,
    Path(id): Path<Uuid>,
    Form(form): Form<CsrfForm>,
) -> WebResult<Response> {
    session.check(&form.csrf)?;
    match app
        .users()
        .delete_user(id, &session.session.principal)
        .await
    {
        Ok(()) => Ok(Redirect::to("/users").into_response()),
        Err(e) => {
            let page = users_page(&app, &session, Some(shown(e)?)).await?;
            Ok((StatusCode::CONFLICT, page).into_response())
        }
    }
}

async fn keys_page(
    app: &App,
    session: &Session,
    made: Option<(String, String)>,
    error: Option<String>,
) -> WebResult<Markup> {
    let principal = &session.session.principal;
    let keys = app
        .list_api_keys(principal, &Cursor::start(), 1000)
        .await?
        .items;
    let now = app.now();
    let body = html! {
        h1 { "API keys" }
        p { "For scripts and pipelines: " code { "Authorization: Bearer <key>" } " on the settings API. A key acts with its role, never above yours." }
        @if let Some((name, token)) = &made {
            section.secret aria-labelledby="key-title" {
                h2 #key-title { "Key “" (name) "” made" }
                p { strong { "Copy the key now: it is shown only once." } }
                div.copyable { code #api-key { (token) } button type="button" data-copy="api-key" { "Copy" } }
            }
        }
        h2 { "New key" }
        @if let Some(error) = &error { p.form-error role="alert" { (error) } }
        form.token-form.for-anyone method="post" action="/api-keys" {
            (csrf_field(session))
            div.field { label for="key-name" { "Name" } input #key-name type="text" name="name" required; }
            div.field { label for="key-role" { "Role" } (role_select("key-role", principal.role, principal.role)) }
            div.field { label for="key-expiry" { "Expires in" } input #key-expiry type="text" name="expires_in" value="90d";
                        p.hint { "e.g. 30d, 1y; empty for never" } }
            button type="submit" { "Make key" }
        }
        h2 { "Keys" }
        div.table-wrap { table {
            thead { tr { th scope="col" { "Name" } th scope="col" { "Role" } th scope="col" { "Made" }
                th scope="col" { "Expires" } th scope="col" { "Last used" } th scope="col" { "State" } th scope="col" { "Manage" } } }
            tbody { @for key in &keys { tr {
                td { (key.name) } td { (key.role.as_str()) } td { (ago(key.created_at, now)) }
                td { @match key.expires_at { Some(at) => (at.format("%Y-%m-%d %H:%M UTC")), None => "never" } }
                td { @match key.last_used_at { Some(at) => (ago(at, now)), None => "never" } }
                td { @if key.revoked_at.is_some() { (badge("revoked")) }
                     @else if key.expires_at.is_some_and(|at| at < now) { (badge("expired")) }
                     @else { (badge("usable")) } }
                td { @if key.revoked_at.is_none() {
                    form.inline.for-anyone method="post" action={ "/api-keys/" (key.id) "/revoke" } {
                        (csrf_field(session)) button.danger type="submit" { "Revoke" } } } }
            } }
            @if keys.is_empty() { tr { td colspan="7" { "No keys yet." } } } }
        } }
    };
    Ok(layout::page(session, Section::ApiKeys, "API keys", body))
}

pub async fn api_keys(State(app): State<Arc<App>>, session: Session) -> WebResult<Markup> {
    keys_page(&app, &session, None, None).await
}

#[derive(Debug, Deserialize)]
pub struct KeyForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    role: String,
    #[serde(default)]
    expires_in: String,
}

pub async fn make_key(
    State(app): State<Arc<App>>,
    session: Session,
    Form(form): Form<KeyForm>,
) -> WebResult<Response> {
    session.check(&form.csrf)?;
    let request = CreateApiKey {
        name: form.name,
        role: Role::parse(&form.role),
        expires_in: optional(&form.expires_in),
        user_id: None,
    };
    match app
        .create_api_key(request, &session.session.principal)
        .await
    {
        Ok(made) => {
            let id = made.key.id;
            let page = keys_page(&app, &session, Some((made.key.name, made.token)), None).await?;
            Ok(super::made(page, id))
        }
        Err(e) => {
            let page = keys_page(&app, &session, None, Some(shown(e)?)).await?;
            Ok((StatusCode::BAD_REQUEST, page).into_response())
        }
    }
}

pub async fn revoke_key(
    State(app): State<Arc<App>>,
    session: Session,
    Path(id): Path<Uuid>,
    Form(form): Form<CsrfForm>,
) -> WebResult<Response> {
    session.check(&form.csrf)?;
    app.revoke_api_key(id, &session.session.principal).await?;
    Ok(Redirect::to("/api-keys").into_response())
}
