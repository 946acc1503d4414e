//! The browser headers every page carries: a Content Security Policy that allows only the
//! page's own scripts, styles and requests (no inline script, no inline handlers, no eval, no
//! framing), `nosniff`, no referrer, and `Cache-Control: no-store` so that no page (tokens,
//! `docker run` lines with secrets, monitors' targets) is kept by a browser or a proxy; assets,
//! which say how long they keep, keep their own, and a response with a stricter policy of its
//! own (a status page's logo) keeps it. HSTS when central serves HTTPS itself.
//! What it must not do: change a page's body.

use axum::extract::Request;
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;

/// Only the page's own origin, for everything a page loads or sends; images may be `data:`
/// (inline SVG needs nothing). htmx requests are same-origin (`connect-src`).
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
    style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; \
    frame-ancestors 'none'; base-uri 'none'";

/// A year, as browsers' preload lists ask.
const HSTS: &str = "max-age=31536000";

pub async fn add(https: bool, request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    let set = [
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        ),
        (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
        (
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ),
    ];
    for (name, value) in set {
        // A handler that sets its own policy sets a stricter one (a status page's logo is
        // sandboxed): kept.
        if name == header::CONTENT_SECURITY_POLICY && headers.contains_key(&name) {
            continue;
        }
        headers.insert(name, value);
    }
    if !headers.contains_key(header::CACHE_CONTROL) {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    if https {
        headers.insert(
            header::STRICT_TRANSPORT_SECURITY,
            HeaderValue::from_static(HSTS),
        );
    }
    response
}
