//! The shared renderings of status pages, and the address book they are found in.
//!
//! A page is read most when things go wrong, by many people at once, so no visitor causes a
//! database read: every reader of a page gets one shared rendering (HTML and JSON, each with
//! its `ETag`, each gzipped once; and the feed), put together by the first reader that finds it older than
//! `FRESH_MS` while the others wait for that one (single flight). Pages are found by slug in
//! an address book of every page, read again at most every `FRESH_MS` (or every `MISS_MS` when
//! asked for a slug it lacks, so a page just made is found at once and a flood of unknown slugs
//! reads at most once per `MISS_MS`). Cost: per page being read, one `shown_page` per
//! `FRESH_MS`; per request, a map lookup and a copy of reference-counted bytes. Must not:
//! decide what a page shows (`service::status_pages`) or who may read it (`super`).

use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};

use axum::body::Bytes;
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use shared_proto::status_pages::{StatusSummary, Visibility};
use uuid::Uuid;

use super::history::{self, Month};
use super::html::{render, Offers};
use crate::service::status_pages::StatusPage;
use crate::service::App;
use crate::web::WebError;
use shared_proto::status_subscribers::SubscriberKind;

/// How long one rendering serves every reader, and the address book every lookup.
const FRESH_MS: i64 = 5_000;
/// How often a slug the address book lacks may have it read again.
const MISS_MS: i64 = 1_000;

/// The shared renderings and the address book; one per router.
#[derive(Default)]
pub struct PublicPages {
    book: Mutex<Arc<Book>>,
    /// Held while the address book is read again, so that one reader reads it.
    reading: tokio::sync::Mutex<()>,
    pages: Mutex<HashMap<Uuid, Arc<Shared>>>,
    /// Each page's history by month (`super::history`), made as its renderings are.
    histories: Mutex<HashMap<(Uuid, Month), Arc<SharedHistory>>>,
    /// The key unlock cookies are signed with, read once (`service::status_pages::access`).
    unlock_key: tokio::sync::OnceCell<Vec<u8>>,
}

/// Every page by slug and by domain, as read at `read_at`.
#[derive(Default)]
struct Book {
    read_at: Option<i64>,
    by_slug: HashMap<String, Arc<StatusPage>>,
    by_domain: HashMap<String, Arc<StatusPage>>,
}

/// One page's rendering, and the lock its next one is made under.
#[derive(Default)]
struct Shared {
    making: tokio::sync::Mutex<()>,
    current: Mutex<Option<Arc<Rendered>>>,
}

/// One month of a page's history, and the lock its next rendering is made under.
#[derive(Default)]
struct SharedHistory {
    making: tokio::sync::Mutex<()>,
    /// The rendering, when it was made, and the page's `updated_at` it was made from.
    current: Mutex<Option<(Arc<Body>, i64, i64)>>,
}

pub(crate) struct Rendered {
    /// What the page shows, for badges (`web::badges`).
    pub(crate) summary: StatusSummary,
    made_at: i64,
    /// The page's `updated_at` it was made from: an edit shows at the next read.
    page_updated_at: i64,
    pub(super) html: Body,
    pub(super) json: Body,
    pub(super) feed: Body,
}

pub(crate) struct Body {
    pub(super) bytes: Bytes,
    pub(super) etag: HeaderValue,
    /// The same, gzipped once for every reader that takes gzip (most browsers), with an
    /// `ETag` of its own: compressing hundreds of kilobytes per request is what a rush must
    /// not cost.
    pub(super) gzip: Bytes,
    pub(super) gzip_etag: HeaderValue,
}

impl Body {
    pub(crate) fn of(bytes: Vec<u8>) -> Body {
        let digest = hex::encode(&Sha256::digest(&bytes)[..12]);
        let etag = |suffix: &str| {
            HeaderValue::from_str(&format!("\"{digest}{suffix}\""))
                .expect("hex is a valid header value")
        };
        // The fastest level: a rendering is made while its readers wait, and pages of
        // repeated markup compress nearly as well at it.
        let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
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
    pub(super) async fn page(
        &self,
        app: &App,
        slug: &str,
    ) -> Result<Option<Arc<StatusPage>>, Response> {
        Ok(self.book(app, Some(slug)).await?.by_slug.get(slug).cloned())
    }

    /// The page whose `domain` is `host`. Hosts no page has (central's own, mostly) do not
    /// have the address book read again sooner: a domain just given shows within `FRESH_MS`.
    pub(super) async fn page_at(
        &self,
        app: &App,
        host: &str,
    ) -> Result<Option<Arc<StatusPage>>, Response> {
        Ok(self.book(app, None).await?.by_domain.get(host).cloned())
    }

    /// The public pages, by slug.
    pub(crate) async fn public_pages(&self, app: &App) -> Result<Vec<Arc<StatusPage>>, Response> {
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
            .map_err(|e| WebError::from(e).into_response())?;
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
        self.histories
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|(id, _), _| ids.contains(id));
        let by_domain = by_slug
            .values()
            .filter_map(|page| Some((page.domain.clone()?, page.clone())))
            .collect();
        let book = Arc::new(Book {
            read_at: Some(read_at),
            by_slug,
            by_domain,
        });
        *self.book.lock().unwrap_or_else(PoisonError::into_inner) = book.clone();
        Ok(book)
    }

    /// The page's rendering, made again first if it is older than `FRESH_MS` or was made from
    /// an older version of the page; one reader makes it while the others wait.
    pub(crate) async fn rendered(
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
            .map_err(|e| WebError::from(e).into_response())?;
        let json = Body::of(serde_json::to_vec(&summary).expect("a summary serialises"));
        let service = app.status_pages();
        let offers = Offers {
            email: service.takes(SubscriberKind::Email),
            webhook: service.takes(SubscriberKind::Webhook),
        };
        let logo = page.logo.as_ref().map(|(_, logo)| {
            format!(
                "/status/{}/logo?v={}",
                page.slug,
                logo.etag.trim_matches('"')
            )
        });
        let html = Body::of(
            render(&summary, offers, logo.as_deref())
                .into_string()
                .into_bytes(),
        );
        let feed = Body::of(super::feed::feed(&summary, page.id).into_bytes());
        let rendered = Arc::new(Rendered {
            summary,
            made_at,
            page_updated_at: page.updated_at,
            html,
            json,
            feed,
        });
        *shared
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(rendered.clone());
        Ok(rendered)
    }
}

impl PublicPages {
    /// A month of the page's history (incidents opened in it), made again first if it is older
    /// than `FRESH_MS` or was made from an older version of the page; one reader makes it
    /// while the others wait. `month` is one of the page's months (`history::months_of`).
    pub(super) async fn history(
        &self,
        app: &App,
        page: &StatusPage,
        month: Month,
        months: (Month, Month),
    ) -> Result<Arc<Body>, Response> {
        let shared = self
            .histories
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry((page.id, month))
            .or_default()
            .clone();
        let fresh = |shared: &SharedHistory| {
            let current = shared
                .current
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            current
                .filter(|(_, made_at, updated_at)| {
                    *updated_at == page.updated_at
                        && app.now_ms().saturating_sub(*made_at) < FRESH_MS
                })
                .map(|(body, _, _)| body)
        };
        if let Some(body) = fresh(&shared) {
            return Ok(body);
        }
        let _making = shared.making.lock().await;
        if let Some(body) = fresh(&shared) {
            return Ok(body);
        }
        let made_at = app.now_ms();
        // Affected monitors by the names the page gives them now.
        let rendered = self.rendered(app, page).await?;
        let names: HashMap<Uuid, String> = rendered
            .summary
            .sections
            .iter()
            .flat_map(|s| s.monitors.iter())
            .map(|m| (m.id, m.name.clone()))
            .collect();
        let (from, until) = month.range_ms();
        let incidents = app
            .status_pages()
            .incidents_opened(page, &names, from, until)
            .await
            .map_err(|e| WebError::from(e).into_response())?;
        let html = history::render(&page.title, &page.slug, month, months, &incidents);
        let body = Arc::new(Body::of(html.into_string().into_bytes()));
        *shared
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner) =
            Some((body.clone(), made_at, page.updated_at));
        Ok(body)
    }

    /// The key unlock cookies are signed with.
    pub(super) async fn unlock_key(&self, app: &App) -> Result<&[u8], Response> {
        self.unlock_key
            .get_or_try_init(|| async { app.status_pages().unlock_key().await })
            .await
            .map(Vec::as_slice)
            .map_err(|e| WebError::from(e).into_response())
    }
}
