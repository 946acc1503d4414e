//! Badges for READMEs and dashboards: SVG in the shields.io style (a grey label, a coloured
//! message), for a monitor's status, uptime (`?window=24h|7d|30d|90d`) and latency, and for a
//! page's overall status. Only monitors shown on a `public` page have badges (`404` for any
//! other, so a badge tells nothing a public page does not), and they say what that page says:
//! they are read from the pages' shared renderings (`web::status_pages`), never from the
//! database per request. Cacheable: `ETag` (and `304`), `Cache-Control: public, max-age=30`.
//!
//! Written by hand rather than with a crate: the badge is one line of SVG, and the crates that
//! draw shields-style badges bring font metrics tables for a width this approximates well
//! enough (Verdana 11 px, at most a few pixels off, which the padding absorbs).
//!
//! Cost per request: the public pages' renderings (each made at most every 5 s, shared with
//! their visitors) and a walk of their monitors (at most 500 each). Must not: read the store.

use std::sync::Arc;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use shared_proto::status_pages::{OutageScale, PageStatus, ShownMonitor, ShownStatus};
use shared_proto::ValidationError;
use uuid::Uuid;

use super::status_pages::{answer, documented, percent, refusal, Body, PublicPages};
use crate::error::ApiError;
use crate::service::App;

/// Where badges are: a monitor's three, and a page's.
pub const PREFIX: &str = "/badge/";
pub const STATUS_PATH: &str = "/badge/{monitor_id}/status.svg";
pub const UPTIME_PATH: &str = "/badge/{monitor_id}/uptime.svg";
pub const LATENCY_PATH: &str = "/badge/{monitor_id}/latency.svg";
pub const PAGE_PATH: &str = "/status/{slug}/badge.svg";

const SVG: &str = "image/svg+xml";

const GREEN: &str = "#2e7d32";
const AMBER: &str = "#b26a00";
const RED: &str = "#c62828";
const BLUE: &str = "#1565c0";
const GREY: &str = "#616161";

/// Text as XML character data or an attribute value.
fn xml(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&apos;")
}

/// About how wide `text` is in Verdana 11 px: narrow letters, wide ones, and the rest.
fn text_width(text: &str) -> u32 {
    text.chars()
        .map(|c| match c {
            'i' | 'j' | 'l' | '.' | ',' | ':' | ';' | '!' | '|' | '\'' | ' ' => 4,
            'm' | 'w' | 'M' | 'W' | '%' => 10,
            c if c.is_ascii_uppercase() || c.is_ascii_digit() => 8,
            _ => 7,
        })
        .sum()
}

/// A shields-style badge: `label` on grey, `message` on `colour`.
pub fn badge(label: &str, message: &str, colour: &str) -> String {
    let (left, right) = (text_width(label) + 10, text_width(message) + 10);
    let width = left + right;
    let (label, message) = (xml(label), xml(message));
    format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="20" role="img" aria-label="{label}: {message}"><title>{label}: {message}</title><linearGradient id="s" x2="0" y2="100%"><stop offset="0" stop-color="#bbb" stop-opacity=".1"/><stop offset="1" stop-opacity=".1"/></linearGradient><clipPath id="r"><rect width="{width}" height="20" rx="3" fill="#fff"/></clipPath><g clip-path="url(#r)"><rect width="{left}" height="20" fill="#555"/><rect x="{left}" width="{right}" height="20" fill="{colour}"/><rect width="{width}" height="20" fill="url(#s)"/></g><g fill="#fff" text-anchor="middle" font-family="Verdana,Geneva,DejaVu Sans,sans-serif" font-size="11"><text x="{lx}" y="14">{label}</text><text x="{mx}" y="14">{message}</text></g></svg>"##,
        lx = left / 2,
        mx = left + right / 2,
    )
}

fn status_badge(status: ShownStatus) -> (&'static str, &'static str) {
    match status {
        ShownStatus::Up => ("up", GREEN),
        ShownStatus::Degraded => ("degraded", AMBER),
        ShownStatus::Down => ("down", RED),
        ShownStatus::Maintenance => ("maintenance", BLUE),
        ShownStatus::Unknown => ("unknown", GREY),
    }
}

fn uptime_colour(uptime: f64) -> &'static str {
    if uptime >= 99.9 {
        GREEN
    } else if uptime >= 99.0 {
        AMBER
    } else {
        RED
    }
}

/// A monitor shown on a public page, as that page shows it (the first such page by slug).
async fn shown(app: &App, pages: &PublicPages, id: &str) -> Result<ShownMonitor, Response> {
    let not_shown = || refusal(StatusCode::NOT_FOUND, "No public status page shows this.");
    let Ok(id) = Uuid::try_parse(id) else {
        return Err(not_shown());
    };
    for page in pages.public_pages(app).await? {
        let rendered = pages.rendered(app, &page).await?;
        let found = rendered
            .summary
            .sections
            .iter()
            .flat_map(|s| s.monitors.iter())
            .find(|m| m.id == id);
        if let Some(monitor) = found {
            return Ok(monitor.clone());
        }
    }
    Err(not_shown())
}

fn svg(headers: &HeaderMap, text: String) -> Response {
    let mut response = answer(headers, &Body::of(text.into_bytes()), SVG, false, true);
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=30"),
    );
    response
}

#[utoipa::path(get, path = "/badge/{monitor_id}/status.svg", tag = "status-pages", operation_id = "status_badge",
    security(), summary = "A monitor's status as a badge, under the name a public page shows it by",
    params(("monitor_id" = String, Path, description = "The monitor's id")),
    responses((status = 200, description = "The badge (kept 30 s).", body = String, content_type = "image/svg+xml"),
        documented::BadgeAnswers))]
pub async fn status(
    State(app): State<Arc<App>>,
    Extension(pages): Extension<Arc<PublicPages>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    match shown(&app, &pages, &id).await {
        Ok(monitor) => {
            let (message, colour) = status_badge(monitor.status);
            svg(&headers, badge(&monitor.name, message, colour))
        }
        Err(refused) => refused,
    }
}

#[derive(Debug, serde::Deserialize)]
pub struct UptimeQuery {
    window: Option<String>,
}

/// The windows an uptime badge can show.
#[derive(Clone, Copy, serde::Deserialize, utoipa::ToSchema)]
enum Window {
    #[serde(rename = "24h")]
    Day,
    #[serde(rename = "7d")]
    Week,
    #[serde(rename = "30d")]
    Month,
    #[serde(rename = "90d")]
    Quarter,
}

impl Window {
    fn parse(text: &str) -> Option<Window> {
        serde_json::from_value(serde_json::Value::String(text.into())).ok()
    }

    /// The monitor's uptime over this window, as its page shows it.
    fn of(self, monitor: &ShownMonitor) -> Option<f64> {
        match self {
            Window::Day => monitor.uptime_24h,
            Window::Week => monitor.uptime_7d,
            Window::Month => monitor.uptime_30d,
            Window::Quarter => monitor.uptime_90d,
        }
    }
}

#[utoipa::path(get, path = "/badge/{monitor_id}/uptime.svg", tag = "status-pages", operation_id = "uptime_badge",
    security(), summary = "A monitor's uptime over a window as a badge",
    params(("monitor_id" = String, Path, description = "The monitor's id"),
        ("window" = inline(Option<Window>), Query, description = "`24h`, `7d`, `30d` (without it) or `90d`")),
    responses((status = 200, description = "The badge (kept 30 s).", body = String, content_type = "image/svg+xml"),
        (status = 400, description = "`invalid_field`: `window` is none of them.", body = shared_proto::ErrorBody),
        documented::BadgeAnswers))]
pub async fn uptime(
    State(app): State<Arc<App>>,
    Extension(pages): Extension<Arc<PublicPages>>,
    Path(id): Path<String>,
    query: Result<Query<UptimeQuery>, QueryRejection>,
    headers: HeaderMap,
) -> Response {
    // A query that is not one `window` (twice, say) is refused as a wrong one is.
    let query = query.map(|Query(q)| q).unwrap_or(UptimeQuery {
        window: Some(String::new()),
    });
    let window = query.window.as_deref().unwrap_or("30d");
    let Some(pick) = Window::parse(window) else {
        return ApiError::from(crate::service::error::ServiceError::Validation(
            ValidationError::new("window", "must be 24h, 7d, 30d or 90d"),
        ))
        .into_response();
    };
    match shown(&app, &pages, &id).await {
        Ok(monitor) => {
            let label = format!("uptime {window}");
            let text = match pick.of(&monitor) {
                Some(uptime) => badge(&label, &percent(uptime), uptime_colour(uptime)),
                None => badge(&label, "no data", GREY),
            };
            svg(&headers, text)
        }
        Err(refused) => refused,
    }
}

#[utoipa::path(get, path = "/badge/{monitor_id}/latency.svg", tag = "status-pages", operation_id = "latency_badge",
    security(), summary = "A monitor's newest latency as a badge",
    params(("monitor_id" = String, Path, description = "The monitor's id")),
    responses((status = 200, description = "The badge (kept 30 s).", body = String, content_type = "image/svg+xml"),
        documented::BadgeAnswers))]
pub async fn latency(
    State(app): State<Arc<App>>,
    Extension(pages): Extension<Arc<PublicPages>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    match shown(&app, &pages, &id).await {
        Ok(monitor) => {
            let text = match monitor.latency_ms {
                Some(ms) => badge("latency", &format!("{ms} ms"), BLUE),
                None => badge("latency", "no data", GREY),
            };
            svg(&headers, text)
        }
        Err(refused) => refused,
    }
}

#[utoipa::path(get, path = "/status/{slug}/badge.svg", tag = "status-pages", operation_id = "status_page_badge",
    security(), summary = "A public status page's overall status as a badge",
    params(("slug" = String, Path, description = "The page's slug")),
    responses((status = 200, description = "The badge (kept 30 s).", body = String, content_type = "image/svg+xml"),
        documented::BadgeAnswers))]
/// A page's overall status, for the page's own link.
pub async fn page(
    State(app): State<Arc<App>>,
    Extension(pages): Extension<Arc<PublicPages>>,
    Path(slug): Path<String>,
    headers: HeaderMap,
) -> Response {
    let summary = match pages.public_pages(&app).await {
        Ok(public) => match public.into_iter().find(|p| p.slug == slug) {
            Some(page) => match pages.rendered(&app, &page).await {
                Ok(rendered) => rendered.summary.clone(),
                Err(refused) => return refused,
            },
            None => return refusal(StatusCode::NOT_FOUND, "No public status page is here."),
        },
        Err(refused) => return refused,
    };
    let (message, colour) = match (summary.status, summary.outage) {
        (PageStatus::Operational, _) => ("operational", GREEN),
        (PageStatus::Degraded, _) => ("degraded", AMBER),
        (PageStatus::Outage, Some(OutageScale::Major)) => ("major outage", RED),
        (PageStatus::Outage, _) => ("partial outage", RED),
        (PageStatus::Maintenance, _) => ("maintenance", BLUE),
        (PageStatus::Unknown, _) => ("unknown", GREY),
    };
    svg(&headers, badge(&summary.page.title, message, colour))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_escaped_and_the_badge_is_one_svg() {
        let svg = badge("a<b & \"c\"", "up", GREEN);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert!(svg.contains("a&lt;b &amp; &quot;c&quot;"));
        assert!(!svg.contains("a<b"));
    }

    #[test]
    fn an_uptime_is_never_rounded_up_to_a_hundred() {
        assert_eq!(percent(99.996), "99.99%");
        assert_eq!(percent(100.0), "100%");
        assert_eq!(percent(12.345), "12.34%");
    }
}
