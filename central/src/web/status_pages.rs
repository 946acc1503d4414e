//! Status pages as visitors read them: `/status/{slug}` (HTML that reads fine without
//! JavaScript, light and dark from `prefers-color-scheme`, nothing loaded from elsewhere) and
//! `/status/{slug}/summary.json` (CORS open for `GET`, for widgets).
//!
//! A page is read most when things go wrong, by many people at once, so no visitor causes a
//! database read: every reader of a page gets one shared rendering (HTML and JSON, each with
//! its `ETag`), put together by the first reader that finds it older than `FRESH_MS` while
//! the others wait for that one (single flight), and answered `304` when they hold it
//! already. Pages are found by slug in an address book of every page, read again at most
//! every `FRESH_MS` (or every `MISS_MS` when asked for a slug it lacks, so a page just made is
//! found at once and a flood of unknown slugs reads at most once per `MISS_MS`). Cost: per page
//! being read, one `shown_page` per `FRESH_MS`; per request, a map lookup and a copy of
//! reference-counted bytes. Must not: decide what a page shows (`service::status_pages`).

use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use maud::{html, Markup, DOCTYPE};
use sha2::{Digest, Sha256};
use shared_proto::status_pages::{
    OutageScale, PageStatus, ShownDay, ShownMonitor, ShownStatus, StatusSummary, Visibility,
};
use uuid::Uuid;

use crate::service::status_pages::StatusPage;
use crate::service::App;

/// Where visitors read a page, and its summary.
pub const PAGE_PATH: &str = "/status/{slug}";
pub const SUMMARY_PATH: &str = "/status/{slug}/summary.json";
/// What every status page's address starts with (`api::pools` serves them apart).
pub const PREFIX: &str = "/status/";

/// How long one rendering serves every reader, and the address book every lookup.
const FRESH_MS: i64 = 5_000;
/// How often a slug the address book lacks may have it read again.
const MISS_MS: i64 = 1_000;
/// What readers and caches between them may keep a rendering for.
const CACHE_CONTROL: &str = "public, max-age=5";

/// The shared renderings and the address book; one per router.
#[derive(Default)]
pub struct PublicPages {
    book: Mutex<Arc<Book>>,
    /// Held while the address book is read again, so that one reader reads it.
    reading: tokio::sync::Mutex<()>,
    pages: Mutex<HashMap<Uuid, Arc<Shared>>>,
}

/// Every page by slug, as read at `read_at`.
#[derive(Default)]
struct Book {
    read_at: Option<i64>,
    by_slug: HashMap<String, Arc<StatusPage>>,
}

/// One page's rendering, and the lock its next one is made under.
#[derive(Default)]
struct Shared {
    making: tokio::sync::Mutex<()>,
    current: Mutex<Option<Arc<Rendered>>>,
}

pub(super) struct Rendered {
    /// What the page shows, for badges (`web::badges`).
    pub(super) summary: StatusSummary,
    made_at: i64,
    /// The page's `updated_at` it was made from: an edit shows at the next read.
    page_updated_at: i64,
    html: Body,
    json: Body,
}

pub(super) struct Body {
    bytes: Bytes,
    etag: HeaderValue,
    /// The same, gzipped once for every reader that takes gzip (most browsers), with an
    /// `ETag` of its own: compressing hundreds of kilobytes per request is what a rush must
    /// not cost.
    gzip: Bytes,
    gzip_etag: HeaderValue,
}

impl Body {
    pub(super) fn of(bytes: Vec<u8>) -> Body {
        let digest = hex::encode(&Sha256::digest(&bytes)[..12]);
        let etag = |suffix: &str| {
            HeaderValue::from_str(&format!("\"{digest}{suffix}\""))
                .expect("hex is a valid header value")
        };
        let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gzip.write_all(&bytes).expect("writing to memory");
        Body {
            bytes: Bytes::from(bytes),
            etag: etag(""),
            gzip: Bytes::from(gzip.finish().expect("writing to memory")),
            gzip_etag: etag("-gzip"),
        }
    }
}

impl PublicPages {
    /// The page with this slug, from the address book.
    async fn page(&self, app: &App, slug: &str) -> Result<Option<Arc<StatusPage>>, Response> {
        Ok(self.book(app, Some(slug)).await?.by_slug.get(slug).cloned())
    }

    /// The public pages, by slug.
    pub(super) async fn public_pages(&self, app: &App) -> Result<Vec<Arc<StatusPage>>, Response> {
        let book = self.book(app, None).await?;
        let mut public: Vec<Arc<StatusPage>> = book
            .by_slug
            .values()
            .filter(|page| page.visibility == Visibility::Public)
            .cloned()
            .collect();
        public.sort_by(|a, b| a.slug.cmp(&b.slug));
        Ok(public)
    }

    /// The address book, read again first if it is older than `FRESH_MS` (or `MISS_MS` when
    /// it lacks `wanted`); one reader reads it while the others wait.
    async fn book(&self, app: &App, wanted: Option<&str>) -> Result<Arc<Book>, Response> {
        let current = || {
            self.book
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
        };
        let usable = |book: &Book| {
            let age = book
                .read_at
                .map_or(i64::MAX, |at| app.now_ms().saturating_sub(at));
            let missing = wanted.is_some_and(|slug| !book.by_slug.contains_key(slug));
            age < FRESH_MS && (!missing || age < MISS_MS)
        };
        let book = current();
        if usable(&book) {
            return Ok(book);
        }
        let _reading = self.reading.lock().await;
        // Read by the reader this one waited for.
        let book = current();
        if usable(&book) {
            return Ok(book);
        }
        let read_at = app.now_ms();
        let pages = app
            .status_pages()
            .all_pages()
            .await
            .map_err(|e| super::WebError::from(e).into_response())?;
        let by_slug: HashMap<String, Arc<StatusPage>> = pages
            .into_iter()
            .map(|page| (page.slug.clone(), Arc::new(page)))
            .collect();
        // Renderings of pages that are gone go with them.
        let ids: std::collections::HashSet<Uuid> = by_slug.values().map(|p| p.id).collect();
        self.pages
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|id, _| ids.contains(id));
        let book = Arc::new(Book {
            read_at: Some(read_at),
            by_slug,
        });
        *self.book.lock().unwrap_or_else(PoisonError::into_inner) = book.clone();
        Ok(book)
    }

    /// The page's rendering, made again first if it is older than `FRESH_MS` or was made from
    /// an older version of the page; one reader makes it while the others wait.
    pub(super) async fn rendered(
        &self,
        app: &App,
        page: &StatusPage,
    ) -> Result<Arc<Rendered>, Response> {
        let shared = self
            .pages
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(page.id)
            .or_default()
            .clone();
        let fresh = |shared: &Shared| {
            let current = shared
                .current
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            current.filter(|r| {
                r.page_updated_at == page.updated_at
                    && app.now_ms().saturating_sub(r.made_at) < FRESH_MS
            })
        };
        if let Some(rendered) = fresh(&shared) {
            return Ok(rendered);
        }
        let _making = shared.making.lock().await;
        // Made by the reader this one waited for.
        if let Some(rendered) = fresh(&shared) {
            return Ok(rendered);
        }
        let made_at = app.now_ms();
        let summary = app
            .shown_page(page)
            .await
            .map_err(|e| super::WebError::from(e).into_response())?;
        let json = Body::of(serde_json::to_vec(&summary).expect("a summary serialises"));
        let html = Body::of(render(&summary).into_string().into_bytes());
        let rendered = Arc::new(Rendered {
            summary,
            made_at,
            page_updated_at: page.updated_at,
            html,
            json,
        });
        *shared
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(rendered.clone());
        Ok(rendered)
    }
}

/// The rendering of the page with this slug, or the answer that refuses it.
async fn find(app: &App, pages: &PublicPages, slug: &str) -> Result<Arc<Rendered>, Response> {
    let Some(page) = pages.page(app, slug).await? else {
        return Err(refusal(
            StatusCode::NOT_FOUND,
            "There is no status page here.",
        ));
    };
    if page.visibility != Visibility::Public {
        // Password and users-only pages are not served yet: shown to nobody rather than to
        // everybody.
        return Err(refusal(
            StatusCode::UNAUTHORIZED,
            "This status page is private.",
        ));
    }
    pages.rendered(app, &page).await
}

pub(super) fn refusal(status: StatusCode, message: &str) -> Response {
    let body = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (message) }
                link rel="stylesheet" href=(super::assets::path("status.css"));
            }
            body { main { h1 { (message) } } }
        }
    };
    (status, body).into_response()
}

/// `200` with the body (gzipped for a reader that takes gzip), or `304` when the reader
/// holds it already.
pub(super) fn answer(
    request: &HeaderMap,
    body: &Body,
    content_type: &'static str,
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
        HeaderValue::from_static(CACHE_CONTROL),
    );
    headers.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    if takes_gzip && !held {
        headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    if cors {
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_ORIGIN,
            HeaderValue::from_static("*"),
        );
    }
    response
}

pub async fn page(
    State(app): State<Arc<App>>,
    Extension(pages): Extension<Arc<PublicPages>>,
    Path(slug): Path<String>,
    headers: HeaderMap,
) -> Response {
    match find(&app, &pages, &slug).await {
        Ok(rendered) => answer(&headers, &rendered.html, "text/html; charset=utf-8", false),
        Err(refused) => refused,
    }
}

pub async fn summary(
    State(app): State<Arc<App>>,
    Extension(pages): Extension<Arc<PublicPages>>,
    Path(slug): Path<String>,
    headers: HeaderMap,
) -> Response {
    match find(&app, &pages, &slug).await {
        Ok(rendered) => answer(&headers, &rendered.json, "application/json", true),
        Err(refused) => refused,
    }
}

fn banner(summary: &StatusSummary) -> (&'static str, &'static str) {
    match (summary.status, summary.outage) {
        (PageStatus::Operational, _) => ("operational", "All systems operational"),
        (PageStatus::Degraded, _) => ("degraded", "Degraded performance"),
        (PageStatus::Outage, Some(OutageScale::Major)) => ("major", "Major outage"),
        (PageStatus::Outage, _) => ("partial", "Partial outage"),
        (PageStatus::Maintenance, _) => ("maintenance", "Under maintenance"),
        (PageStatus::Unknown, _) => ("unknown", "Status unknown"),
    }
}

fn status_words(status: ShownStatus) -> (&'static str, &'static str) {
    match status {
        ShownStatus::Up => ("up", "Operational"),
        ShownStatus::Degraded => ("degraded", "Degraded"),
        ShownStatus::Down => ("down", "Down"),
        ShownStatus::Maintenance => ("maintenance", "Maintenance"),
        ShownStatus::Unknown => ("unknown", "No data"),
    }
}

/// A day's cell: its class by uptime, and its tooltip.
fn day_cell(day: &ShownDay) -> (&'static str, String) {
    match day.uptime {
        None => ("none", format!("{}: no data", day.date)),
        Some(uptime) => {
            let class = if uptime >= 99.9 {
                "up"
            } else if uptime >= 95.0 {
                "partial"
            } else {
                "down"
            };
            (class, format!("{}: {} up", day.date, percent(uptime)))
        }
    }
}

/// Percent with two decimals, cut rather than rounded (99.996 % is not 100 %).
pub(super) fn percent(uptime: f64) -> String {
    if uptime >= 100.0 {
        "100%".into()
    } else {
        format!("{:.2}%", (uptime * 100.0).floor() / 100.0)
    }
}

fn monitor(m: &ShownMonitor) -> Markup {
    let (class, words) = status_words(m.status);
    let uptime = m.uptime_90d.map_or("no data".to_string(), percent);
    html! {
        li.monitor {
            div.line {
                span.name { (m.name) }
                span class=(format!("status status-{class}")) { (words) }
            }
            div.bars role="img" aria-label=(format!("{}: uptime over 90 days {uptime}", m.name)) {
                @for day in &m.days {
                    @let (class, tip) = day_cell(day);
                    // Short markup: 90 cells a monitor are most of the page's bytes.
                    i class=(class) title=(tip) {}
                }
            }
            div.legend aria-hidden="true" {
                span { "90 days ago" }
                span { (uptime) " uptime" }
                span { "Today" }
            }
        }
    }
}

/// The page's HTML: one rendering for every reader.
pub fn render(summary: &StatusSummary) -> Markup {
    let (class, words) = banner(summary);
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (summary.page.title) }
                link rel="stylesheet" href=(super::assets::path("status.css"));
                link rel="alternate" type="application/json"
                    href=(format!("/status/{}/summary.json", summary.page.slug));
            }
            body {
                main {
                    header {
                        h1 { (summary.page.title) }
                        @if let Some(description) = &summary.page.description {
                            p.description { (description) }
                        }
                    }
                    section class=(format!("banner banner-{class}")) aria-label="Overall status" {
                        p.headline { (words) }
                        p.updated {
                            "As of "
                            time datetime=(summary.generated_at.to_rfc3339()) {
                                (summary.generated_at.format("%Y-%m-%d %H:%M UTC"))
                            }
                        }
                    }
                    @for section in &summary.sections {
                        section.group aria-label=(section.name) {
                            h2 { (section.name) }
                            ul.monitors {
                                @for m in &section.monitors { (monitor(m)) }
                            }
                        }
                    }
                }
                footer { p { "Status page served by central." } }
            }
        }
    }
}
