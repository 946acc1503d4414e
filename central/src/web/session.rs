//! Login with a password or the admin token (single sign-on is `web::sso`'s), the session
//! cookie, CSRF checks and logout.

use crate::service::error::ServiceError;
use std::sync::Arc;

use axum::extract::{FromRequestParts, MatchedPath, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use axum_extra::extract::cookie::{Cookie, CookieJar, SameSite};
use maud::html;
use serde::Deserialize;

use super::layout;
use super::WebError;
use crate::error::ApiError;
use crate::service::access::required_role_on_page;
use crate::service::audit::SessionEvent;
use crate::service::sessions::{WebSession, SESSION_TTL};
use crate::service::App;

/// The session cookie's name (`api::pools` looks for it too).
pub const COOKIE: &str = "central_session";
/// The login form's address. Its `POST` is always served from the unauthenticated pool
/// (`api::pools`), where each failure counts against the client: a valid session or key
/// sent along does not buy password guesses against other users.
pub const LOGIN_PATH: &str = "/login";

/// The logged-in operator's session; pages that need one take it as an argument.
pub struct Session {
    secret: String,
    pub session: WebSession,
}

impl Session {
    /// The CSRF token as this page shows it: a fresh random mask, then the token XORed with it.
    /// No two pages carry the same bytes, so a compressed page's length says nothing about the
    /// token (BREACH), whatever else the page reflects.
    pub fn csrf(&self) -> String {
        let token = self.session.csrf_token.as_bytes();
        let mut mask = vec![0u8; token.len()];
        rand::RngCore::fill_bytes(&mut rand::thread_rng(), &mut mask);
        let masked: Vec<u8> = token.iter().zip(&mask).map(|(t, m)| t ^ m).collect();
        format!("{}{}", hex::encode(&mask), hex::encode(masked))
    }

    /// Every form carries the session's CSRF token (besides `SameSite=Strict`): a form posted
    /// from another site, or from a session that ended, changes nothing.
    pub fn check(&self, submitted: &str) -> Result<(), WebError> {
        let unmasked = unmask(submitted).unwrap_or_default();
        if App::csrf_matches(&self.session, &unmasked) {
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
        // Every page and form takes a session, so this is where the page's roles hold: one
        // rule for all of them (`access::required_role_on_page`), before any form is read.
        let path = parts
            .extensions
            .get::<MatchedPath>()
            .map_or(parts.uri.path(), |matched| matched.as_str());
        let needed = required_role_on_page(&parts.method, path);
        let principal = &session.principal;
        if !principal.may(needed) {
            return Err(WebError::Api(ApiError::Service(
                ServiceError::RoleRequired {
                    needed,
                    has: principal.role,
                    who: principal.describe(),
                },
            )));
        }
        Ok(Session { secret, session })
    }
}

pub async fn login_page(State(app): State<Arc<App>>) -> Response {
    login_form(&app, StatusCode::OK, None)
}

/// The login page, answered with `status`, saying `error` if any.
pub(super) fn login_form(app: &App, status: StatusCode, error: Option<&str>) -> Response {
    let body = html! {
        main.login {
            h1 { "Central" }
            @if app.sso_enabled() {
                p { a.button #sso href=(super::sso::START_PATH) { "Sign in with single sign-on" } }
                p.hint { "Or with a password:" }
            }
            form method="post" action="/login" {
                label for="email" { "Email" }
                input #email type="email" name="email" autocomplete="username";
                label for="password" { "Password" }
                input #password type="password" name="password" autocomplete="current-password";
                p.hint { "Or, for setting up and emergencies:" }
                label for="token" { "Admin token" }
                input #token type="password" name="token" autocomplete="off"
                    aria-describedby=[error.map(|_| "token-error")];
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
    email: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    token: String,
}

pub async fn log_in(
    State(app): State<Arc<App>>,
    origin: super::origin::Origin,
    headers: HeaderMap,
    jar: CookieJar,
    Form(form): Form<LoginForm>,
) -> Result<Response, WebError> {
    if origin.posted_from_elsewhere(&headers) {
        return Ok(login_form(
            &app,
            StatusCode::FORBIDDEN,
            Some("this login was posted from another site: log in on central's own page"),
        ));
    }
    let by_token = !form.token.trim().is_empty();
    // What a refused sign-in tried, for the audit log: an email only if it is one (a
    // password pasted into the email box must not be kept for a year).
    let (method, tried) = if by_token {
        ("admin_token", "admin token")
    } else if shared_proto::users::normalized_email(&form.email).is_ok() {
        ("password", form.email.as_str())
    } else {
        ("password", "(not an email address)")
    };
    let opened = if by_token {
        app.log_in(&form.token).await
    } else {
        app.log_in_user(&form.email, &form.password).await
    };
    match opened {
        Ok(secret) => {
            if let Ok(Some(session)) = app.web_session(&secret).await {
                app.record_session_event(
                    SessionEvent::LogIn(&session.principal),
                    method,
                    origin.client.clone(),
                )
                .await;
            }
            Ok((
                jar.add(session_cookie(secret, origin.https)),
                Redirect::to("/"),
            )
                .into_response())
        }
        Err(ServiceError::Unauthorized(message)) => {
            app.record_session_event(SessionEvent::Failed { tried }, method, origin.client)
                .await;
            Ok(login_form(&app, StatusCode::UNAUTHORIZED, Some(&message)))
        }
        Err(other) => Err(other.into()),
    }
}

/// The cookie of a new session.
pub(super) fn session_cookie(secret: String, https: bool) -> Cookie<'static> {
    Cookie::build((COOKIE, secret))
        .path("/")
        .http_only(true)
        .secure(https)
        .same_site(SameSite::Strict)
        .max_age(cookie::time::Duration::seconds(SESSION_TTL.as_secs() as i64))
        .build()
}

#[derive(Deserialize)]
pub struct CsrfForm {
    #[serde(default)]
    pub csrf: String,
}

pub async fn log_out(
    State(app): State<Arc<App>>,
    origin: super::origin::Origin,
    session: Session,
    jar: CookieJar,
    Form(form): Form<CsrfForm>,
) -> Result<Response, WebError> {
    session.check(&form.csrf)?;
    app.log_out(&session.secret).await?;
    app.record_session_event(
        SessionEvent::LogOut(&session.session.principal),
        "logout",
        origin.client,
    )
    .await;
    let gone = Cookie::build((COOKIE, "")).path("/");
    Ok((jar.remove(gone), Redirect::to("/login")).into_response())
}

/// The token a masked value (`csrf`) stands for; `None` for anything else.
fn unmask(submitted: &str) -> Option<String> {
    let bytes = hex::decode(submitted).ok()?;
    if bytes.is_empty() || bytes.len() % 2 != 0 {
        return None;
    }
    let (mask, masked) = bytes.split_at(bytes.len() / 2);
    String::from_utf8(mask.iter().zip(masked).map(|(m, x)| m ^ x).collect()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_masked_token_differs_each_time_and_unmasks_to_the_token() {
        let token = "6f1c0e0d5a7b4c3d2e1f0a9b8c7d6e5f";
        let mask = |seed: u8| {
            let masked: Vec<u8> = token.bytes().map(|b| b ^ seed).collect();
            format!(
                "{}{}",
                hex::encode(vec![seed; token.len()]),
                hex::encode(masked)
            )
        };
        assert_ne!(mask(1), mask(2));
        assert_eq!(unmask(&mask(1)).as_deref(), Some(token));
        assert_eq!(unmask(&mask(7)).as_deref(), Some(token));
        assert_ne!(
            unmask(token).as_deref(),
            Some(token),
            "the bare token is not a masked one"
        );
        assert_eq!(unmask("zz"), None);
        assert_eq!(unmask(""), None);
    }
}
