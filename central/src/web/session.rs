//! Login with the admin token, the session cookie, CSRF checks and logout.

use std::sync::Arc;

use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::{Extension, Form};
use axum_extra::extract::cookie::{Cookie, CookieJar, SameSite};
use maud::html;
use serde::Deserialize;

use super::layout;
use super::{WebError, WebOptions};
use crate::error::ApiError;
use crate::service::sessions::{WebSession, SESSION_TTL};
use crate::service::App;

const COOKIE: &str = "central_session";

/// The logged-in operator's session; pages that need one take it as an argument.
pub struct Session {
    secret: String,
    pub session: WebSession,
}

impl Session {
    pub fn csrf(&self) -> &str {
        &self.session.csrf_token
    }

    /// Every form carries the session's CSRF token (besides `SameSite=Strict`): a form posted
    /// from another site, or from a session that ended, changes nothing.
    pub fn check(&self, submitted: &str) -> Result<(), WebError> {
        if App::csrf_matches(&self.session, submitted) {
            Ok(())
        } else {
            Err(WebError::Csrf)
        }
    }
}

impl FromRequestParts<Arc<App>> for Session {
    type Rejection = WebError;

    async fn from_request_parts(parts: &mut Parts, app: &Arc<App>) -> Result<Self, WebError> {
        let jar = CookieJar::from_headers(&parts.headers);
        let secret = jar
            .get(COOKIE)
            .map(|c| c.value().to_string())
            .ok_or(WebError::LoggedOut)?;
        let session = app.web_session(&secret).await?.ok_or(WebError::LoggedOut)?;
        Ok(Session { secret, session })
    }
}

pub async fn login_page() -> Response {
    login_form(StatusCode::OK, None)
}

fn login_form(status: StatusCode, error: Option<&str>) -> Response {
    let body = html! {
        main.login {
            h1 { "Central" }
            form method="post" action="/login" {
                label for="token" { "Admin token" }
                input #token type="password" name="token" autocomplete="current-password"
                    required autofocus aria-describedby=[error.map(|_| "token-error")];
                @if let Some(error) = error {
                    p.field-error #token-error role="alert" { (error) }
                }
                p.hint { "CENTRAL_ADMIN_TOKEN, or the token central printed on its first start." }
                button type="submit" { "Log in" }
            }
        }
    };
    (status, layout::bare("Log in", body)).into_response()
}

#[derive(Deserialize)]
pub struct LoginForm {
    #[serde(default)]
    token: String,
}

pub async fn log_in(
    State(app): State<Arc<App>>,
    Extension(options): Extension<WebOptions>,
    jar: CookieJar,
    Form(form): Form<LoginForm>,
) -> Result<Response, WebError> {
    match app.log_in(&form.token).await {
        Ok(secret) => {
            let cookie = Cookie::build((COOKIE, secret))
                .path("/")
                .http_only(true)
                .secure(options.secure_cookies)
                .same_site(SameSite::Strict)
                .max_age(cookie::time::Duration::seconds(SESSION_TTL.as_secs() as i64));
            Ok((jar.add(cookie), Redirect::to("/")).into_response())
        }
        Err(ApiError::Unauthorized(message)) => {
            Ok(login_form(StatusCode::UNAUTHORIZED, Some(&message)))
        }
        Err(other) => Err(other.into()),
    }
}

#[derive(Deserialize)]
pub struct CsrfForm {
    #[serde(default)]
    pub csrf: String,
}

pub async fn log_out(
    State(app): State<Arc<App>>,
    session: Session,
    jar: CookieJar,
    Form(form): Form<CsrfForm>,
) -> Result<Response, WebError> {
    session.check(&form.csrf)?;
    app.log_out(&session.secret).await?;
    let gone = Cookie::build((COOKIE, "")).path("/");
    Ok((jar.remove(gone), Redirect::to("/login")).into_response())
}
