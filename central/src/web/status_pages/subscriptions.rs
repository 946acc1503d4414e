//! Subscribing to a status page, as its visitors and their mail programs do it:
//! `POST /status/{slug}/subscribe` (the page's form, or JSON: `202` whatever the address's
//! standing, so the answer tells nobody who is subscribed), and a subscription's two links,
//! `…/subscription/{id}/confirm` and `…/unsubscribe`, which show a page with a button on `GET`
//! and act only on `POST` (a mail scanner that follows links changes nothing; a mail program's
//! one-click unsubscribe, RFC 8058, is a `POST`). Must not: decide who is told what
//! (`service::status_pages::subscribers`).

use std::sync::Arc;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use maud::html;
use serde::Deserialize;
use shared_proto::status_subscribers::{SubscribeRequest, SubscriberStatus};
use shared_proto::ValidationError;
use uuid::Uuid;

use super::{documented, html::message_page, open, refusal, PublicPages};
use crate::error::ApiError;
use crate::service::error::ServiceError;
use crate::service::status_pages::StatusPage;
use crate::service::App;

/// How long every answer to subscribing takes at least: longer than the work for a new
/// address takes on an idle central.
const ANSWER_FLOOR: std::time::Duration = std::time::Duration::from_millis(250);

pub const SUBSCRIBE_PATH: &str = "/status/{slug}/subscribe";
pub const CONFIRM_PATH: &str = "/status/{slug}/subscription/{id}/confirm";
pub const UNSUBSCRIBE_PATH: &str = "/status/{slug}/subscription/{id}/unsubscribe";

/// What the page's form sends (a form has no `null`: an empty field is none).
#[derive(Deserialize)]
struct SubscribeForm {
    #[serde(default)]
    email: String,
    #[serde(default)]
    webhook_url: String,
    #[serde(default)]
    secret: String,
}

fn some(text: String) -> Option<String> {
    (!text.trim().is_empty()).then_some(text)
}

#[utoipa::path(post, path = "/status/{slug}/subscribe", tag = "status-pages", operation_id = "subscribe_to_status_page",
    security(), summary = "A visitor subscribes to a status page: a mail address or a webhook (double opt-in)",
    description = "JSON gets JSON; the page's own form (`application/x-www-form-urlencoded`, the same fields, an empty one is none) gets a page for people. Only a confirmation is sent (a mail with a link, or a `subscription.confirm` body holding `confirm_url`); nothing else until it is confirmed. The same `202` whether the address is new, waiting for its confirmation or subscribed already, and whether or not a confirmation was sent now (at most one per address every 10 minutes, 5 an hour).",
    params(("slug" = String, Path, description = "The page's slug")),
    request_body(content = serde_json::Value, content_type = "application/json", description = "`{email}` or `{webhook_url, secret?}` (`secret` signs each notice: `X-Signature-256`)."),
    responses((status = 202, description = "Taken (whatever the address's standing).", body = serde_json::Value),
        (status = 400, description = "`invalid_body` or `invalid_field`: not a subscription; the message names the field.", content((shared_proto::ErrorBody = "application/json"), (String = "text/html"))),
        (status = 422, description = "`invalid_combination` or `invalid_value`: an address this central cannot take (no `CENTRAL_PUBLIC_URL` for links, no `CENTRAL_MAIL_URL` for mail, a URL with no usable host); the message names the field.", content((shared_proto::ErrorBody = "application/json"), (String = "text/html"))),
        documented::PageAnswers))]
/// `POST /status/{slug}/subscribe`: JSON gets JSON (`202`, or `422` naming the field), a form
/// gets a page saying what happens next.
pub async fn subscribe(
    State(app): State<Arc<App>>,
    Extension(pages): Extension<Arc<PublicPages>>,
    Path(slug): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let page = match open(&app, &pages, &slug, &headers).await {
        Ok(page) => page,
        Err(refused) => return refused,
    };
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let request = if json {
        match serde_json::from_slice::<SubscribeRequest>(&body) {
            Ok(request) => request,
            Err(e) => {
                let error = ValidationError::new("body", format!("not a subscription: {e}"));
                return ApiError::from(error).into_response();
            }
        }
    } else {
        match serde_urlencoded::from_bytes::<SubscribeForm>(&body) {
            Ok(form) => SubscribeRequest {
                email: some(form.email),
                webhook_url: some(form.webhook_url),
                secret: some(form.secret),
            },
            Err(_) => return refusal(StatusCode::BAD_REQUEST, "That form could not be read."),
        }
    };
    // Every answer waits until the same instant after the request began: a new or pending
    // address takes writes a confirmed one does not, and the answer's time must not tell
    // which (as its body does not). Past the floor (a database slower than it) it can.
    let floor = tokio::time::Instant::now() + ANSWER_FLOOR;
    let done = app.status_pages().subscribe(&page, &request).await;
    tokio::time::sleep_until(floor).await;
    match done {
        Ok(()) if json => (
            StatusCode::ACCEPTED,
            Json(serde_json::json!({
                "accepted": true,
                "message": "if the address is not subscribed yet, a confirmation is on its way",
            })),
        )
            .into_response(),
        Ok(()) => {
            let back = format!("/status/{}", page.slug);
            let body = message_page(
                "Check your inbox",
                html! {
                    p { "If this address is not subscribed yet, a message asking you to confirm is on its way. Nothing else is sent until you do." }
                    p { a href=(back) { "Back to " (page.title) } }
                },
            );
            (StatusCode::ACCEPTED, body).into_response()
        }
        Err(error) if json => ApiError::from(error).into_response(),
        Err(error) => {
            let message = match ApiError::from(error) {
                ApiError::Service(ServiceError::Validation(e)) => e.message,
                _ => "The subscription could not be taken; try again later.".into(),
            };
            refusal(StatusCode::UNPROCESSABLE_ENTITY, &message)
        }
    }
}

#[derive(Deserialize)]
pub struct TokenQuery {
    #[serde(default)]
    token: String,
}

/// The link's token; a query that is not one `token` (twice, say) names none, and opens
/// nothing, as a wrong token does.
fn token_of(query: Result<Query<TokenQuery>, QueryRejection>) -> Query<TokenQuery> {
    query.unwrap_or(Query(TokenQuery {
        token: String::new(),
    }))
}

/// What a link's page is for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Act {
    Confirm,
    Unsubscribe,
}

#[utoipa::path(get, path = "/status/{slug}/subscription/{id}/confirm", tag = "status-pages", operation_id = "confirmation_page",
    security(), summary = "A confirmation link: a page with the button that confirms (nothing changes on GET)",
    params(("slug" = String, Path, description = "The page's slug"),
        ("id" = String, Path, description = "The subscription, as the link names it"),
        ("token" = Option<String>, Query, description = "The link's proof (an HMAC of the subscription)")),
    responses((status = 200, description = "The page with the button (or that the subscription is confirmed already).", body = String, content_type = "text/html"),
        documented::LinkAnswers))]
/// `GET …/confirm` and `GET …/unsubscribe`: the page with the button (nothing changes).
pub async fn confirm_page(
    state: State<Arc<App>>,
    pages: Extension<Arc<PublicPages>>,
    path: Path<(String, String)>,
    query: Result<Query<TokenQuery>, QueryRejection>,
) -> Response {
    link_page(state, pages, path, token_of(query), Act::Confirm).await
}

#[utoipa::path(get, path = "/status/{slug}/subscription/{id}/unsubscribe", tag = "status-pages", operation_id = "unsubscribe_page",
    security(), summary = "An unsubscribe link: a page with the button that unsubscribes (nothing changes on GET)",
    params(("slug" = String, Path, description = "The page's slug"),
        ("id" = String, Path, description = "The subscription, as the link names it"),
        ("token" = Option<String>, Query, description = "The link's proof (an HMAC of the subscription)")),
    responses((status = 200, description = "The page with the button.", body = String, content_type = "text/html"),
        documented::LinkAnswers))]
pub async fn unsubscribe_page(
    state: State<Arc<App>>,
    pages: Extension<Arc<PublicPages>>,
    path: Path<(String, String)>,
    query: Result<Query<TokenQuery>, QueryRejection>,
) -> Response {
    link_page(state, pages, path, token_of(query), Act::Unsubscribe).await
}

async fn link_page(
    State(app): State<Arc<App>>,
    Extension(pages): Extension<Arc<PublicPages>>,
    Path((slug, id)): Path<(String, String)>,
    Query(query): Query<TokenQuery>,
    act: Act,
) -> Response {
    let (page, id) = match linked(&app, &pages, &slug, &id).await {
        Ok(found) => found,
        Err(refused) => return refused,
    };
    let found = match app
        .status_pages()
        .subscription(&page, id, &query.token)
        .await
    {
        Ok(Some(found)) => found,
        Ok(None) => return gone(),
        Err(error) => return super::super::WebError::from(error).into_response(),
    };
    let action = format!(
        "/status/{}/subscription/{id}/{}?token={}",
        page.slug,
        match act {
            Act::Confirm => "confirm",
            Act::Unsubscribe => "unsubscribe",
        },
        query.token
    );
    let body = match act {
        Act::Confirm if found.status == SubscriberStatus::Confirmed => message_page(
            "You are subscribed",
            html! { p { "Changes on " (page.title) " are sent to " (found.address) "." } },
        ),
        Act::Confirm => message_page(
            "Confirm your subscription",
            html! {
                p { "Changes on " (page.title) " will be sent to " (found.address) "." }
                form method="post" action=(action) { button type="submit" { "Confirm" } }
            },
        ),
        Act::Unsubscribe => message_page(
            "Unsubscribe",
            html! {
                p { "Stop sending changes on " (page.title) " to " (found.address) "?" }
                form method="post" action=(action) { button type="submit" { "Unsubscribe" } }
            },
        ),
    };
    body.into_response()
}

#[utoipa::path(post, path = "/status/{slug}/subscription/{id}/confirm", tag = "status-pages", operation_id = "confirm_subscription",
    security(), summary = "Confirms a subscription (the confirmation page's button, or a webhook subscriber's POST to its `confirm_url`)",
    params(("slug" = String, Path, description = "The page's slug"),
        ("id" = String, Path, description = "The subscription, as the link names it"),
        ("token" = Option<String>, Query, description = "The link's proof (an HMAC of the subscription)")),
    responses((status = 200, description = "Subscribed.", body = String, content_type = "text/html"),
        documented::LinkAnswers))]
/// `POST …/confirm`.
pub async fn confirm(
    state: State<Arc<App>>,
    pages: Extension<Arc<PublicPages>>,
    path: Path<(String, String)>,
    query: Result<Query<TokenQuery>, QueryRejection>,
) -> Response {
    act(state, pages, path, token_of(query), Act::Confirm).await
}

#[utoipa::path(post, path = "/status/{slug}/subscription/{id}/unsubscribe", tag = "status-pages", operation_id = "unsubscribe",
    security(), summary = "Ends a subscription (the page's button, or a mail program's one-click unsubscribe, RFC 8058)",
    params(("slug" = String, Path, description = "The page's slug"),
        ("id" = String, Path, description = "The subscription, as the link names it"),
        ("token" = Option<String>, Query, description = "The link's proof (an HMAC of the subscription)")),
    responses((status = 200, description = "Unsubscribed.", body = String, content_type = "text/html"),
        documented::LinkAnswers))]
/// `POST …/unsubscribe` (the page's button, or a mail program's one-click; the body is not
/// read).
pub async fn unsubscribe(
    state: State<Arc<App>>,
    pages: Extension<Arc<PublicPages>>,
    path: Path<(String, String)>,
    query: Result<Query<TokenQuery>, QueryRejection>,
) -> Response {
    act(state, pages, path, token_of(query), Act::Unsubscribe).await
}

async fn act(
    State(app): State<Arc<App>>,
    Extension(pages): Extension<Arc<PublicPages>>,
    Path((slug, id)): Path<(String, String)>,
    Query(query): Query<TokenQuery>,
    act: Act,
) -> Response {
    let (page, id) = match linked(&app, &pages, &slug, &id).await {
        Ok(found) => found,
        Err(refused) => return refused,
    };
    let service = app.status_pages();
    let done = match act {
        Act::Confirm => service.confirm_subscription(&page, id, &query.token).await,
        Act::Unsubscribe => service.unsubscribe(&page, id, &query.token).await,
    };
    let back = format!("/status/{}", page.slug);
    match done {
        Ok(true) => {
            let (title, words) = match act {
                Act::Confirm => (
                    "You are subscribed",
                    "You will be told of incidents and maintenance on this page.",
                ),
                Act::Unsubscribe => ("You are unsubscribed", "Nothing more will be sent."),
            };
            message_page(
                title,
                html! { p { (words) } p { a href=(back) { "Back to " (page.title) } } },
            )
            .into_response()
        }
        Ok(false) => gone(),
        Err(error) => super::super::WebError::from(error).into_response(),
    }
}

/// The page and subscription a link names, or the answer that it opens nothing.
async fn linked(
    app: &App,
    pages: &PublicPages,
    slug: &str,
    id: &str,
) -> Result<(Arc<StatusPage>, Uuid), Response> {
    let page = pages.page(app, slug).await?.ok_or_else(gone)?;
    let id = Uuid::try_parse(id).map_err(|_| gone())?;
    Ok((page, id))
}

/// A link that opens no subscription (a wrong token, or one already ended): the same answer
/// either way.
fn gone() -> Response {
    refusal(
        StatusCode::NOT_FOUND,
        "This link opens no subscription (it may have ended already).",
    )
}
