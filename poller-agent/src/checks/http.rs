//! `http`: a request whose status (and optionally body) must match expectations.

use std::time::{Duration, Instant};

use serde_json::json;
use shared_proto::monitor::HttpSettings;

use super::{timeout_message, CheckOutcome};

/// Bodies larger than this are not read for keyword checks.
const MAX_BODY_BYTES: usize = 1024 * 1024;

/// One client per (verify TLS, follow redirects) pair: these are client-wide in reqwest.
/// Idle connections are not kept, so every check measures a fresh connection as a real user's
/// first request would.
#[derive(Clone)]
pub struct HttpClients {
    clients: [reqwest::Client; 4],
}

impl HttpClients {
    pub fn new() -> anyhow::Result<Self> {
        let build = |verify: bool, follow: bool| {
            reqwest::Client::builder()
                .danger_accept_invalid_certs(!verify)
                .redirect(if follow {
                    reqwest::redirect::Policy::limited(10)
                } else {
                    reqwest::redirect::Policy::none()
                })
                .pool_max_idle_per_host(0)
                .user_agent(concat!("poller-agent/", env!("CARGO_PKG_VERSION")))
                .build()
        };
        Ok(Self {
            clients: [
                build(true, true)?,
                build(true, false)?,
                build(false, true)?,
                build(false, false)?,
            ],
        })
    }

    fn client(&self, settings: &HttpSettings) -> &reqwest::Client {
        let index = usize::from(!settings.verify_tls) * 2 + usize::from(!settings.follow_redirects);
        &self.clients[index]
    }

    pub async fn check(
        &self,
        url: &str,
        settings: &HttpSettings,
        timeout: Duration,
    ) -> CheckOutcome {
        let started = Instant::now();
        let outcome = tokio::time::timeout(timeout, self.request(url, settings, started)).await;
        outcome.unwrap_or_else(|_| CheckOutcome::down(None, timeout_message(timeout), json!({})))
    }

    async fn request(&self, url: &str, settings: &HttpSettings, started: Instant) -> CheckOutcome {
        let method =
            reqwest::Method::from_bytes(settings.method.as_bytes()).unwrap_or(reqwest::Method::GET);
        let mut request = self.client(settings).request(method, url);
        for (name, value) in &settings.headers {
            request = request.header(name, value);
        }
        if let Some(body) = &settings.body {
            request = request.body(body.clone());
        }
        let response = match request.send().await {
            Ok(response) => response,
            Err(e) => {
                return CheckOutcome::down(Some(started.elapsed()), request_error(&e), json!({}))
            }
        };
        let code = response.status().as_u16();
        let first_byte = started.elapsed();
        let meta = json!({"status_code": code, "first_byte_ms": first_byte.as_millis() as u64});
        if !settings.accepts(code) {
            let expected = if settings.expected_status.is_empty() {
                "2xx".to_string()
            } else {
                settings
                    .expected_status
                    .iter()
                    .map(u16::to_string)
                    .collect::<Vec<_>>()
                    .join("/")
            };
            return CheckOutcome::down(
                Some(first_byte),
                format!("expected {expected}, got {code}"),
                meta,
            );
        }
        if settings.keyword.is_none() && settings.keyword_absent.is_none() {
            return CheckOutcome::up(first_byte, meta);
        }
        let body = match read_body(response).await {
            Ok(body) => body,
            Err(e) => {
                return CheckOutcome::down(
                    Some(started.elapsed()),
                    format!("reading body failed: {e}"),
                    meta,
                )
            }
        };
        let latency = started.elapsed();
        if let Some(keyword) = &settings.keyword {
            if !body.contains(keyword.as_str()) {
                return CheckOutcome::down(
                    Some(latency),
                    format!("keyword `{keyword}` not found"),
                    meta,
                );
            }
        }
        if let Some(keyword) = &settings.keyword_absent {
            if body.contains(keyword.as_str()) {
                return CheckOutcome::down(
                    Some(latency),
                    format!("keyword `{keyword}` present"),
                    meta,
                );
            }
        }
        CheckOutcome::up(latency, meta)
    }
}

async fn read_body(mut response: reqwest::Response) -> Result<String, reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        body.extend_from_slice(&chunk);
        if body.len() >= MAX_BODY_BYTES {
            break;
        }
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// One line, without reqwest's nesting: `connection refused`, `dns error: …`.
fn request_error(error: &reqwest::Error) -> String {
    let mut source: Option<&dyn std::error::Error> = Some(error);
    let mut deepest = error.to_string();
    while let Some(e) = source {
        deepest = e.to_string();
        source = e.source();
    }
    if deepest.to_ascii_lowercase().contains("connection refused") {
        "connection refused".into()
    } else if error.is_connect() {
        format!("connect failed: {deepest}")
    } else {
        deepest
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::StatusCode;
    use axum::routing::get;
    use shared_proto::poller_api::ResultStatus;

    async fn serve() -> String {
        let app = axum::Router::new()
            .route("/ok", get(|| async { "all good" }))
            .route(
                "/fail",
                get(|| async { (StatusCode::SERVICE_UNAVAILABLE, "no") }),
            )
            .route(
                "/slow",
                get(|| async {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    "late"
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{addr}")
    }

    #[tokio::test]
    async fn status_keyword_and_timeout_outcomes() {
        let base = serve().await;
        let clients = HttpClients::new().unwrap();
        let timeout = Duration::from_secs(2);
        let defaults = HttpSettings::default();

        let ok = clients
            .check(&format!("{base}/ok"), &defaults, timeout)
            .await;
        assert_eq!(ok.status, ResultStatus::Up, "{ok:?}");
        assert_eq!(ok.meta["status_code"], 200);

        let fail = clients
            .check(&format!("{base}/fail"), &defaults, timeout)
            .await;
        assert_eq!(fail.msg, "expected 2xx, got 503");

        let expect_503 = HttpSettings {
            expected_status: vec![503],
            ..Default::default()
        };
        assert_eq!(
            clients
                .check(&format!("{base}/fail"), &expect_503, timeout)
                .await
                .status,
            ResultStatus::Up
        );

        let keyword = HttpSettings {
            keyword: Some("missing".into()),
            ..Default::default()
        };
        let missing = clients
            .check(&format!("{base}/ok"), &keyword, timeout)
            .await;
        assert_eq!(missing.msg, "keyword `missing` not found");

        let slow = clients
            .check(
                &format!("{base}/slow"),
                &defaults,
                Duration::from_millis(300),
            )
            .await;
        assert_eq!(slow.msg, "timeout after 300 ms");
    }

    #[tokio::test]
    async fn refused_connection_says_so() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let clients = HttpClients::new().unwrap();
        let outcome = clients
            .check(
                &format!("http://{addr}/"),
                &HttpSettings::default(),
                Duration::from_secs(2),
            )
            .await;
        assert_eq!(outcome.msg, "connection refused");
    }
}
