//! Status pages as visitors read them: `/status/{slug}` (HTML),
//! `/status/{slug}/summary.json` (CORS open for `GET` on public pages, for widgets) and
//! `/status/{slug}/feed.atom`, from the shared renderings (`shared`), and the incident history
//! by month (`history`), answered `304` to a reader who holds one already; and who may
//! read a page that is not public: a `password` page's visitors once they gave its password
//! (`POST /status/{slug}/unlock`, a cookie of the page's own), a `users` page's signed-in users.
//! Subscribing and a subscription's links are `subscriptions`.
//! Must not: decide what a page shows (`service::status_pages`).

pub(crate) mod documented;
mod feed;
mod history;
mod html;
mod shared;
pub(crate) mod subscriptions;

use std::sync::Arc;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Extension;
use axum_extra::extract::cookie::{Cookie, CookieJar, SameSite};
use maud::html;
use serde::Deserialize;
use shared_proto::status_pages::Visibility;

pub(crate) use self::html::percent;
pub(crate) use self::shared::{Body, PublicPages, Rendered};
pub use self::subscriptions::{
    confirm, confirm_page, subscribe, unsubscribe, unsubscribe_page, CONFIRM_PATH, SUBSCRIBE_PATH,
    UNSUBSCRIBE_PATH,
};
use super::origin::Origin;
use crate::service::status_pages::access::{unlock_cookie_name, unlock_value, unlocks};
use crate::service::status_pages::StatusPage;
use crate::service::App;

/// Where visitors read a page, its summary, and give a page's password.
pub const PAGE_PATH: &str = "/status/{slug}";
pub const SUMMARY_PATH: &str = "/status/{slug}/summary.json";
pub const UNLOCK_PATH: &str = "/status/{slug}/unlock";
pub const FEED_PATH: &str = "/status/{slug}/feed.atom";
pub const HISTORY_PATH: &str = "/status/{slug}/history";
pub const LOGO_PATH: &str = "/status/{slug}/logo";
/// What every status page's address starts with (`api::pools` serves them apart).
pub const PREFIX: &str = "/status/";

/// How long a public page's rendering may be kept by readers and the caches between them.
const PUBLIC_CACHE: &str = "public, max-age=5";
/// The same for a page that is not public: by the reader's browser only.
const PRIVATE_CACHE: &str = "private, max-age=5";
/// How long a page's password unlocks it in a browser.
const UNLOCKED_FOR: cookie::time::Duration = cookie::time::Duration::days(7);

/// The rendering of the page with this slug and whether it is private, or the answer that
/// refuses it.
async fn find(
    app: &App,
    pages: &PublicPages,
    slug: &str,
    headers: &HeaderMap,
) -> Result<(Arc<Rendered>, bool), Response> {
    let page = open(app, pages, slug, headers).await?;
    let private = page.visibility != Visibility::Public;
    Ok((pages.rendered(app, &page).await?, private))
}

/// The page with this slug if this reader may read it, or the answer that refuses it.
async fn open(
    app: &App,
    pages: &PublicPages,
    slug: &str,
    headers: &HeaderMap,
) -> Result<Arc<StatusPage>, Response> {
    let Some(page) = pages.page(app, slug).await? else {
        return Err(refusal(
            StatusCode::NOT_FOUND,
            "There is no status page here.",
        ));
    };
    may_read(app, pages, page, headers).await
}

/// `page` if this reader may read it, or the answer that refuses it.
async fn may_read(
    app: &App,
    pages: &PublicPages,
    page: Arc<StatusPage>,
    headers: &HeaderMap,
) -> Result<Arc<StatusPage>, Response> {
    let jar = CookieJar::from_headers(headers);
    match page.visibility {
        Visibility::Public => {}
        Visibility::Password => {
            let key = pages.unlock_key(app).await?;
            let open = jar
                .get(&unlock_cookie_name(&page))
                .is_some_and(|cookie| unlocks(key, &page, cookie.value()));
            if !open {
                return Err(password_form(&page, None));
            }
        }
        Visibility::Users => {
            // A session of central's page; its validity is read, as every page of central's
            // does (a users-only page's readers are the operators themselves, not a rush).
            let signed_in = match jar.get(super::session::COOKIE) {
                Some(cookie) => matches!(app.web_session(cookie.value()).await, Ok(Some(_))),
                None => false,
            };
            if !signed_in {
                return Err(signed_in_only());
            }
        }
    }
    Ok(page)
}

/// A page with one message, for a visitor who gets no status page.
pub(crate) fn refusal(status: StatusCode, message: &str) -> Response {
    (status, html::message_page(message, html! {})).into_response()
}

/// `401` with the page's password form (its title is not shown: a private page says nothing
/// of itself to strangers).
fn password_form(page: &StatusPage, failed: Option<&str>) -> Response {
    let form = html! {
        @if let Some(failed) = failed {
            p role="alert" { (failed) }
        }
        form method="post" action=(format!("/status/{}/unlock", page.slug)) {
            label for="password" { "Password" }
            input #password type="password" name="password" required autocomplete="current-password";
            button type="submit" { "Open" }
        }
    };
    let body = html::message_page("This status page needs its password.", form);
    (StatusCode::UNAUTHORIZED, body).into_response()
}

/// `401` for a users-only page: the way to sign in.
fn signed_in_only() -> Response {
    let link = html! {
        p { a href=(super::session::LOGIN_PATH) { "Sign in to central" } ", then open this page again." }
    };
    let body = html::message_page("This status page is for signed-in users.", link);
    (StatusCode::UNAUTHORIZED, body).into_response()
}

/// `200` with the body (gzipped for a reader that takes gzip), or `304` when the reader
/// holds it already.
pub(crate) fn answer(
    request: &HeaderMap,
    body: &Body,
    content_type: &'static str,
    private: bool,
    cors: bool,
) -> Response {
    let takes_gzip = request
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|coding| {
            let mut parts = coding.split(';').map(str::trim);
            parts.next() == Some("gzip") && parts.all(|p| p.replace(' ', "") != "q=0")
        });
    let (bytes, etag) = if takes_gzip {
        (&body.gzip, &body.gzip_etag)
    } else {
        (&body.bytes, &body.etag)
    };
    let held = request
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|tags| {
            tags.split(',')
                .map(str::trim)
                .any(|tag| tag == "*" || tag.trim_start_matches("W/") == etag)
        });
    let mut response = if held {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        ([(header::CONTENT_TYPE, content_type)], bytes.clone()).into_response()
    };
    let headers = response.headers_mut();
    headers.insert(header::ETAG, etag.clone());
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(if private { PRIVATE_CACHE } else { PUBLIC_CACHE }),
    );
    headers.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    if takes_gzip && !held {
        headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    if cors && !private {
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_ORIGIN,
            HeaderValue::from_static("*"),
        );
    }
    response
}

/// Which of a page's shared renderings an answer is.
#[derive(Clone, Copy)]
enum Part {
    Html,
    /// `summary.json`, CORS-open on public pages.
    Json,
    /// The Atom feed, CORS-open on public pages.
    Feed,
}

/// `rendered`'s `part`, as `answer` sends it.
fn respond(request: &HeaderMap, rendered: &Rendered, private: bool, part: Part) -> Response {
    let (body, content_type, cors) = match part {
        Part::Html => (&rendered.html, "text/html; charset=utf-8", false),
        Part::Json => (&rendered.json, "application/json", true),
        Part::Feed => (&rendered.feed, "application/atom+xml", true),
    };
    answer(request, body, content_type, private, cors)
}

/// The page with this slug's `part`, or the answer that refuses it.
async fn serve(
    app: &App,
    pages: &PublicPages,
    slug: &str,
    headers: &HeaderMap,
    part: Part,
) -> Response {
    match find(app, pages, slug, headers).await {
        Ok((rendered, private)) => respond(headers, &rendered, private, part),
        Err(refused) => refused,
    }
}

#[utoipa::path(get, path = "/status/{slug}", tag = "status-pages", operation_id = "status_page",
    security(), summary = "A status page as visitors read it (HTML, readable without JavaScript)",
    params(("slug" = String, Path, description = "The page's slug")),
    responses((status = 200, description = "The page, shared by every reader and made again at most every 5 s (gzipped for a reader that takes it).", body = String, content_type = "text/html"),
        documented::PageAnswers))]
pub async fn page(
    State(app): State<Arc<App>>,
    Extension(pages): Extension<Arc<PublicPages>>,
    Path(slug): Path<String>,
    headers: HeaderMap,
) -> Response {
    serve(&app, &pages, &slug, &headers, Part::Html).await
}

#[utoipa::path(get, path = "/status/{slug}/summary.json", tag = "status-pages", operation_id = "status_page_summary",
    security(), summary = "Everything a status page shows, for widgets and dashboards (CORS open on public pages)",
    params(("slug" = String, Path, description = "The page's slug")),
    responses((status = 200, description = "What the page shows, as of `generated_at`.", body = shared_proto::status_pages::StatusSummary),
        documented::PageAnswers))]
pub async fn summary(
    State(app): State<Arc<App>>,
    Extension(pages): Extension<Arc<PublicPages>>,
    Path(slug): Path<String>,
    headers: HeaderMap,
) -> Response {
    serve(&app, &pages, &slug, &headers, Part::Json).await
}

/// `GET /`: the status page whose `domain` the request was sent to (the `Host`, or the
/// forwarded host behind `CENTRAL_TRUSTED_PROXIES`); any other host gets central's own page.
pub async fn home(State(app): State<Arc<App>>, request: axum::extract::Request) -> Response {
    use axum::handler::Handler;
    let pages = request.extensions().get::<Arc<PublicPages>>().cloned();
    let options = request
        .extensions()
        .get::<super::WebOptions>()
        .cloned()
        .unwrap_or_default();
    let peer = request
        .extensions()
        .get::<axum::extract::ConnectInfo<crate::server::PeerAddr>>()
        .map(|info| info.0);
    let host = super::origin::host_of(&options, peer, request.headers());
    if let (Some(pages), Some(host)) = (pages, host) {
        let found = match pages.page_at(&app, &host).await {
            Ok(found) => found,
            Err(refused) => return refused,
        };
        if let Some(page) = found {
            let headers = request.headers();
            return match may_read(&app, &pages, page, headers).await {
                Ok(page) => match pages.rendered(&app, &page).await {
                    Ok(rendered) => {
                        let private = page.visibility != Visibility::Public;
                        respond(headers, &rendered, private, Part::Html)
                    }
                    Err(refused) => refused,
                },
                Err(refused) => refused,
            };
        }
    }
    super::monitors::list.call(request, app).await
}

/// The page's Atom feed: its incidents and maintenance.
#[utoipa::path(get, path = "/status/{slug}/feed.atom", tag = "status-pages", operation_id = "status_page_feed",
    security(), summary = "A status page's incidents, their updates and its maintenance, as Atom",
    params(("slug" = String, Path, description = "The page's slug")),
    responses((status = 200, description = "The feed (CORS open on public pages).", body = String, content_type = "application/atom+xml"),
        documented::PageAnswers))]
pub async fn feed(
    State(app): State<Arc<App>>,
    Extension(pages): Extension<Arc<PublicPages>>,
    Path(slug): Path<String>,
    headers: HeaderMap,
) -> Response {
    serve(&app, &pages, &slug, &headers, Part::Feed).await
}

const MONTH_FORMAT: &str = "month: write it as YYYY-MM (2026-12).";

#[derive(Deserialize)]
pub struct HistoryQuery {
    month: Option<String>,
}

#[utoipa::path(get, path = "/status/{slug}/history", tag = "status-pages", operation_id = "status_page_history",
    security(), summary = "A status page's past incidents, a month at a time",
    params(("slug" = String, Path, description = "The page's slug"),
        ("month" = Option<String>, Query, description = "`YYYY-MM`, between the page's first month and this one (this month without it)", pattern = r"^[0-9]{4}-(0[1-9]|1[0-2])$")),
    responses((status = 200, description = "The month's incidents (HTML).", body = String, content_type = "text/html"),
        (status = 400, description = "`month` is not one `YYYY-MM` (a page for people, in HTML).", body = String, content_type = "text/html"),
        documented::PageAnswers))]
/// A month of the page's incident history (this month without `month`).
pub async fn history(
    State(app): State<Arc<App>>,
    Extension(pages): Extension<Arc<PublicPages>>,
    Path(slug): Path<String>,
    query: Result<Query<HistoryQuery>, QueryRejection>,
    headers: HeaderMap,
) -> Response {
    // A query that is not one `month` (twice, say) gets the page's own answer, not axum's.
    let Ok(Query(query)) = query else {
        return refusal(StatusCode::BAD_REQUEST, MONTH_FORMAT);
    };
    let page = match open(&app, &pages, &slug, &headers).await {
        Ok(page) => page,
        Err(refused) => return refused,
    };
    let months = history::months_of(page.created_at, app.now_ms());
    let month = match query.month.as_deref() {
        None => months.1,
        Some(text) => match history::Month::parse(text) {
            Some(month) => month,
            None => return refusal(StatusCode::BAD_REQUEST, MONTH_FORMAT),
        },
    };
    if month < months.0 || month > months.1 {
        return refusal(
            StatusCode::NOT_FOUND,
            "This status page has no history for that month.",
        );
    }
    match pages.history(&app, &page, month, months).await {
        Ok(body) => {
            let private = page.visibility != Visibility::Public;
            answer(&headers, &body, "text/html; charset=utf-8", private, false)
        }
        Err(refused) => refused,
    }
}

#[derive(Deserialize, utoipa::ToSchema)]
pub struct UnlockForm {
    /// The page's password.
    #[serde(default)]
    password: String,
}

#[utoipa::path(post, path = "/status/{slug}/unlock", tag = "status-pages", operation_id = "unlock_status_page",
    security(), summary = "A visitor gives a `password` page's password",
    params(("slug" = String, Path, description = "The page's slug")),
    request_body(content = UnlockForm, content_type = "application/x-www-form-urlencoded", description = "Read as a form whatever its `Content-Type` says (what cannot be read gives no password)."),
    responses((status = 303, description = "The password opens the page: a cookie for it (7 days), and back to the page."),
        (status = 401, description = "The password does not open the page: the form again (counted against the client, as a failed login).", body = String, content_type = "text/html"),
        (status = 404, description = "No `password` page with this slug.", body = String, content_type = "text/html"),
        (status = 429, description = "`rate_limited`: too many failed passwords from this client; retry after `Retry-After` seconds.", body = shared_proto::ErrorBody),
        (status = 503, description = "`overloaded`: retry after `Retry-After` seconds.", body = shared_proto::ErrorBody)))]
/// A visitor gives a `password` page's password: the page's cookie and back to the page, or
/// `401` with the form again (which the request pools count against the client, as a failed
/// login).
pub async fn unlock(
    State(app): State<Arc<App>>,
    Extension(pages): Extension<Arc<PublicPages>>,
    Path(slug): Path<String>,
    origin: Origin,
    jar: CookieJar,
    body: axum::body::Bytes,
) -> Response {
    // Read as a form whatever the request says it is: anything else opens nothing, as a wrong
    // password does (and is counted as one).
    let form: UnlockForm = serde_urlencoded::from_bytes(&body).unwrap_or(UnlockForm {
        password: String::new(),
    });
    let page = match pages.page(&app, &slug).await {
        Ok(Some(page)) if page.visibility == Visibility::Password => page,
        Ok(_) => return refusal(StatusCode::NOT_FOUND, "There is no password page here."),
        Err(refused) => return refused,
    };
    match app
        .status_pages()
        .password_opens(&page, form.password)
        .await
    {
        Ok(true) => {
            let key = match pages.unlock_key(&app).await {
                Ok(key) => key,
                Err(refused) => return refused,
            };
            let Some(value) = unlock_value(key, &page) else {
                return password_form(&page, None);
            };
            let cookie = Cookie::build((unlock_cookie_name(&page), value))
                .path(format!("/status/{}", page.slug))
                .http_only(true)
                .secure(origin.https)
                .same_site(SameSite::Lax)
                .max_age(UNLOCKED_FOR)
                .build();
            let back = format!("/status/{}", page.slug);
            (jar.add(cookie), Redirect::to(&back)).into_response()
        }
        Ok(false) => password_form(&page, Some("That password does not open this page.")),
        Err(error) => super::WebError::from(error).into_response(),
    }
}

#[utoipa::path(get, path = "/status/{slug}/logo", tag = "status-pages", operation_id = "status_page_logo",
    security(), summary = "A status page's logo",
    params(("slug" = String, Path, description = "The page's slug")),
    responses((status = 200, description = "The logo as it was checked to be, `nosniff`, sandboxed, kept a day (its address on the page changes with it).",
            content((String = "image/png"), (String = "image/jpeg"), (String = "image/webp"), (String = "image/svg+xml"))),
        documented::PageAnswers))]
/// The page's logo, to whoever may read the page: its bytes under the type they were checked
/// to be, never sniffed, and sandboxed (an SVG opened by itself runs nothing, loads nothing).
pub async fn logo(
    State(app): State<Arc<App>>,
    Extension(pages): Extension<Arc<PublicPages>>,
    Path(slug): Path<String>,
    headers: HeaderMap,
) -> Response {
    let page = match open(&app, &pages, &slug, &headers).await {
        Ok(page) => page,
        Err(refused) => return refused,
    };
    let Some((_, logo)) = &page.logo else {
        return refusal(StatusCode::NOT_FOUND, "This status page has no logo.");
    };
    let held = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|tags| tags.split(',').any(|t| t.trim() == logo.etag));
    let mut response = if held {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            [(header::CONTENT_TYPE, logo.content_type)],
            logo.bytes.clone(),
        )
            .into_response()
    };
    let private = page.visibility != Visibility::Public;
    let out = response.headers_mut();
    if let Ok(etag) = HeaderValue::from_str(&logo.etag) {
        out.insert(header::ETAG, etag);
    }
    // Its address on the page changes with it (`?v=`): kept a day.
    out.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(if private {
            "private, max-age=86400"
        } else {
            "public, max-age=86400"
        }),
    );
    out.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    out.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; style-src 'unsafe-inline'; sandbox"),
    );
    response
}
