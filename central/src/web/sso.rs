//! The page's single sign-on: `/login/sso` sends the browser to the OpenID provider with the
//! pending sign-in in a cookie; the provider sends it back to `/login/sso/callback`, which
//! opens a session. The rules (state, nonce, PKCE, who the user is) are `service::sso`'s.

use crate::service::error::ServiceError;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum_extra::extract::cookie::{Cookie, CookieJar, SameSite};
use maud::html;
use serde::Deserialize;

use super::layout;
use super::session::{login_form, session_cookie};
use super::WebError;
use crate::service::audit::SessionEvent;
use crate::service::sso::{CALLBACK_PATH, PENDING_FOR};
use crate::service::App;

/// Where a sign-in starts (the login page links here).
pub const START_PATH: &str = "/login/sso";
/// The cookie holding the pending sign-in (sealed by central) between the two legs.
const PENDING_COOKIE: &str = "central_sso";
/// The most of a provider's error text shown back.
const MAX_SHOWN_ERROR: usize = 200;

pub async fn start(
    State(app): State<Arc<App>>,
    origin: super::origin::Origin,
    jar: CookieJar,
) -> Result<Response, WebError> {
    match app.sso_start().await {
        Ok(sign_in) => {
            // `Lax`, not `Strict`: the browser comes back from the provider's site, and a
            // `Strict` cookie would not come with it.
            let pending = Cookie::build((PENDING_COOKIE, sign_in.pending))
                .path(CALLBACK_PATH)
                .http_only(true)
                .secure(origin.https)
                .same_site(SameSite::Lax)
                .max_age(cookie::time::Duration::seconds(PENDING_FOR.as_secs() as i64));
            Ok((jar.add(pending), Redirect::to(&sign_in.url)).into_response())
        }
        // The provider is not answering: not the person's failure to authenticate.
        Err(ServiceError::Unauthorized(message)) => {
            Ok(login_form(&app, StatusCode::BAD_GATEWAY, Some(&message)))
        }
        Err(other) => Err(other.into()),
    }
}

/// The provider's redirect back: `code` and `state`, or `error` (RFC 6749 §4.1.2.1).
#[derive(Debug, Default, Deserialize)]
pub struct Callback {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
}

pub async fn callback(
    State(app): State<Arc<App>>,
    origin: super::origin::Origin,
    jar: CookieJar,
    Query(answer): Query<Callback>,
) -> Result<Response, WebError> {
    let Some(pending) = jar.get(PENDING_COOKIE).map(|c| c.value().to_string()) else {
        // No sign-in started in this browser: nobody failed to authenticate, so this is no
        // failure to count (`400`, not `401`). Otherwise any site's `<img>` pointing here
        // would spend the failed-authentication budget from its visitors' browsers.
        return Ok(login_form(
            &app,
            StatusCode::BAD_REQUEST,
            Some("no sign-in is pending in this browser: start again from the login page"),
        ));
    };
    // One use: whatever happens, the pending sign-in is gone.
    let jar = jar.remove(Cookie::build((PENDING_COOKIE, "")).path(CALLBACK_PATH));
    let finished = match (&answer.error, &answer.code, &answer.state) {
        (Some(error), _, _) => {
            let error: String = error.chars().take(MAX_SHOWN_ERROR).collect();
            Err(ServiceError::Unauthorized(
                crate::service::sso::SsoRefusal::Provider(error).to_string(),
            ))
        }
        (None, Some(code), Some(state)) => app.sso_finish(Some(&pending), state, code).await,
        _ => Err(ServiceError::Unauthorized(
            crate::service::sso::SsoRefusal::WrongState.to_string(),
        )),
    };
    match finished {
        Ok(secret) => {
            if let Ok(Some(session)) = app.web_session(&secret).await {
                app.record_session_event(
                    SessionEvent::LogIn(&session.principal),
                    "sso",
                    origin.client.clone(),
                )
                .await;
            }
            // Moved on to `/` by the page itself: a navigation that starts on central's own
            // page carries the `SameSite=Strict` session cookie; a redirect answering the
            // provider's would not, and the first page would ask for a login again.
            let body = html! {
                meta http-equiv="refresh" content="0;url=/";
                main.login {
                    p { "Signed in. " a href="/" { "Continue" } }
                }
            };
            let jar = jar.add(session_cookie(secret, origin.https));
            Ok((jar, layout::bare("Signed in", body)).into_response())
        }
        Err(ServiceError::Unauthorized(message)) => {
            app.record_session_event(
                SessionEvent::Failed {
                    tried: "single sign-on",
                },
                "sso",
                origin.client,
            )
            .await;
            Ok((
                jar,
                login_form(&app, StatusCode::UNAUTHORIZED, Some(&message)),
            )
                .into_response())
        }
        Err(other) => Err(other.into()),
    }
}
