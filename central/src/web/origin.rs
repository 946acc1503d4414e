//! How the browser reached central, for what the page writes with it: whether the connection
//! was HTTPS (the session cookie is then `Secure`) and central's address for the `docker run`
//! line. Behind a reverse proxy that ends TLS, central sees plain HTTP from the proxy: it
//! believes `X-Forwarded-Proto` and `X-Forwarded-Host` from peers in `CENTRAL_TRUSTED_PROXIES`
//! only, as it does `X-Forwarded-For`. `CENTRAL_PUBLIC_URL`, when set, is the address.
//!
//! Owns that reading only; cookies and pages are `session`'s and `tokens`'.

use std::sync::Arc;

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap};

use super::{WebError, WebOptions};
use crate::server::PeerAddr;
use crate::service::App;

pub struct Origin {
    /// The browser's connection is HTTPS all the way to central or to its trusted proxy.
    pub https: bool,
    /// Central's address as agents should use it (`https://central.example.com`).
    pub url: String,
    /// The browser's address (through trusted proxies), for the audit log.
    pub client: Option<String>,
}

impl Origin {
    /// Whether a form was posted from a page of another site, as the browser says: a login
    /// posted from elsewhere would sign the visitor in as the attacker (login CSRF). Browsers
    /// say it in `Sec-Fetch-Site` (only `same-origin`, or `none` for a typed address, is
    /// ours); one that does not send it is judged by `Origin` (central's own address or the
    /// host the request went to; `null`, which the page's `no-referrer` policy makes a
    /// same-origin post send too, is not enough without `Sec-Fetch-Site`). A client that
    /// sends neither header (a script, `curl`) is no browser being tricked, and is let be.
    pub fn posted_from_elsewhere(&self, headers: &HeaderMap) -> bool {
        if let Some(site) = headers.get("sec-fetch-site") {
            let site = site.as_bytes();
            return !(site.eq_ignore_ascii_case(b"same-origin")
                || site.eq_ignore_ascii_case(b"none"));
        }
        let Some(origin) = headers.get(header::ORIGIN) else {
            return false;
        };
        // `Origin: null` (a sandboxed frame, a redirect from elsewhere) or unreadable: not ours.
        let Some(theirs) = origin.to_str().ok().and_then(|o| url::Url::parse(o).ok()) else {
            return true;
        };
        let authority = |url: &url::Url| {
            url.host_str()
                .map(|host| (host.to_ascii_lowercase(), url.port_or_known_default()))
        };
        // Central's own address, or the host the browser sent this very request to (the
        // page may be reached by another name than `CENTRAL_PUBLIC_URL`'s).
        let ours = [
            url::Url::parse(&self.url).ok(),
            headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .and_then(|host| url::Url::parse(&format!("{}://{host}", theirs.scheme())).ok()),
        ];
        let theirs = authority(&theirs);
        !ours
            .iter()
            .flatten()
            .any(|ours| theirs.is_some() && authority(ours) == theirs)
    }
}

/// The first value of a header a trusted proxy set, if it is a plain token (no spaces,
/// quotes or control characters) of the expected kind.
fn forwarded<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    let value = headers.get(name)?.to_str().ok()?;
    let first = value.split(',').next()?.trim();
    let plain = !first.is_empty()
        && first
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b));
    plain.then_some(first)
}

/// The host name a request was sent to, lower-case and without its port: the forwarded host
/// from a trusted proxy, else `Host`; `None` when neither is a plain host.
pub(crate) fn host_of(
    options: &WebOptions,
    peer: Option<PeerAddr>,
    headers: &HeaderMap,
) -> Option<String> {
    let trusted = peer.is_some_and(|peer| options.proxies.trusts(peer.addr.ip()));
    let host = trusted
        .then(|| forwarded(headers, "x-forwarded-host"))
        .flatten()
        .or_else(|| forwarded(headers, header::HOST.as_str()))?;
    // A bracketed IPv6 address is no page's domain; a name's port goes.
    let name = if host.starts_with('[') {
        host
    } else {
        host.split(':').next()?
    };
    Some(name.trim_end_matches('.').to_ascii_lowercase())
}

fn read(options: &WebOptions, peer: Option<PeerAddr>, headers: &HeaderMap) -> Origin {
    let trusted = peer.is_some_and(|peer| options.proxies.trusts(peer.addr.ip()));
    let forwarded_proto = trusted
        .then(|| forwarded(headers, "x-forwarded-proto"))
        .flatten();
    let https = options.tls || forwarded_proto.is_some_and(|p| p.eq_ignore_ascii_case("https"));
    let url = match &options.public_url {
        Some(url) => url.clone(),
        None => {
            let host = trusted
                .then(|| forwarded(headers, "x-forwarded-host"))
                .flatten()
                .or_else(|| forwarded(headers, header::HOST.as_str()))
                .unwrap_or("central:8080");
            format!("{}://{host}", if https { "https" } else { "http" })
        }
    };
    let client = peer.map(|peer| {
        options
            .proxies
            .client_ip(peer.addr.ip(), headers)
            .to_string()
    });
    Origin { https, url, client }
}

impl FromRequestParts<Arc<App>> for Origin {
    type Rejection = WebError;

    async fn from_request_parts(parts: &mut Parts, _: &Arc<App>) -> Result<Self, WebError> {
        let options = parts
            .extensions
            .get::<WebOptions>()
            .cloned()
            .unwrap_or_default();
        let peer = parts
            .extensions
            .get::<ConnectInfo<PeerAddr>>()
            .map(|ConnectInfo(peer)| *peer);
        Ok(read(&options, peer, &parts.headers))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::client_addr::TrustedProxies;

    fn peer(ip: &str) -> Option<PeerAddr> {
        Some(PeerAddr {
            addr: std::net::SocketAddr::new(ip.parse().unwrap(), 40000),
            client_certified: false,
        })
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn forwarded_scheme_and_host_are_believed_from_trusted_proxies_only() {
        let options = WebOptions {
            proxies: Arc::new(TrustedProxies::new(vec!["10.0.0.0/8".parse().unwrap()])),
            ..WebOptions::default()
        };
        let sent = headers(&[
            ("host", "central.internal:8080"),
            ("x-forwarded-proto", "https"),
            ("x-forwarded-host", "central.example.com"),
        ]);
        let proxied = read(&options, peer("10.0.0.5"), &sent);
        assert!(proxied.https);
        assert_eq!(proxied.url, "https://central.example.com");
        let direct = read(&options, peer("203.0.113.9"), &sent);
        assert!(!direct.https, "a client cannot claim HTTPS for itself");
        assert_eq!(direct.url, "http://central.internal:8080");
        let forged = read(
            &options,
            peer("203.0.113.9"),
            &headers(&[("host", "evil\"><script>")]),
        );
        assert_eq!(
            forged.url, "http://central:8080",
            "a host that is not a host is not used"
        );
    }

    #[test]
    fn the_host_is_the_trusted_proxys_or_the_requests_own() {
        let options = WebOptions {
            proxies: Arc::new(TrustedProxies::new(vec!["10.0.0.0/8".parse().unwrap()])),
            ..WebOptions::default()
        };
        let sent = headers(&[
            ("host", "central.internal:8080"),
            ("x-forwarded-host", "Status.Acme.Example"),
        ]);
        let host = |ip: &str, sent: &HeaderMap| host_of(&options, peer(ip), sent);
        assert_eq!(
            host("10.0.0.5", &sent).as_deref(),
            Some("status.acme.example")
        );
        assert_eq!(
            host("203.0.113.9", &sent).as_deref(),
            Some("central.internal"),
            "a client cannot name another host than the one it reached"
        );
        let dotted = headers(&[("host", "status.acme.example.:443")]);
        assert_eq!(
            host("203.0.113.9", &dotted).as_deref(),
            Some("status.acme.example")
        );
        assert_eq!(host("203.0.113.9", &headers(&[("host", "a b")])), None);
    }

    #[test]
    fn a_post_from_another_site_is_told_from_ours_and_from_a_script() {
        let options = WebOptions {
            public_url: Some("https://central.example.com".into()),
            ..WebOptions::default()
        };
        let origin = read(&options, peer("203.0.113.9"), &headers(&[]));
        let from = |pairs: &[(&'static str, &str)]| origin.posted_from_elsewhere(&headers(pairs));
        assert!(!from(&[]), "a script sends neither header");
        assert!(!from(&[("origin", "https://central.example.com")]));
        assert!(!from(&[
            ("origin", "http://127.0.0.1:8080"),
            ("host", "127.0.0.1:8080")
        ]));
        assert!(from(&[
            ("origin", "https://evil.example"),
            ("host", "central.example.com")
        ]));
        assert!(from(&[("origin", "null")]));
        assert!(from(&[("sec-fetch-site", "cross-site")]));
        assert!(from(&[("sec-fetch-site", "same-site")]), "a sibling host");
        assert!(!from(&[("sec-fetch-site", "same-origin")]));
        assert!(
            !from(&[("sec-fetch-site", "same-origin"), ("origin", "null")]),
            "what the page's `no-referrer` makes a browser send"
        );
    }

    #[test]
    fn tls_or_a_public_url_decide_without_any_header() {
        let options = WebOptions {
            tls: true,
            public_url: Some("https://central.example.com".into()),
            ..WebOptions::default()
        };
        let origin = read(&options, peer("203.0.113.9"), &headers(&[("host", "x")]));
        assert!(origin.https);
        assert_eq!(origin.url, "https://central.example.com");
    }
}
