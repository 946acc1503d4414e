//! `http`: a request whose status, body keywords, JSON value or health document must match.
//! Honours `Retry-After` on `429`/`503` (rate-limited, not down) and, with `conditional`,
//! sends the previous answer's validators so an unchanged resource costs a `304`.

use std::time::{Duration, Instant, SystemTime};

use serde_json::{json, Value};
use shared_proto::poller_api::ResultStatus;
use shared_proto::settings::{BodyFormat, HttpSettings};

use super::{timeout_message, CheckOutcome, Validators};

/// Bodies larger than this are not read further for assertions.
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
        validators: Option<Validators>,
    ) -> CheckOutcome {
        let started = Instant::now();
        let request = self.request(url, settings, validators, started);
        match tokio::time::timeout(timeout, request).await {
            Ok(outcome) => outcome,
            Err(_) => CheckOutcome::down(None, timeout_message(timeout), json!({})),
        }
    }

    async fn request(
        &self,
        url: &str,
        settings: &HttpSettings,
        validators: Option<Validators>,
        started: Instant,
    ) -> CheckOutcome {
        let method =
            reqwest::Method::from_bytes(settings.method.as_bytes()).unwrap_or(reqwest::Method::GET);
        let mut request = self.client(settings).request(method, url);
        for (name, value) in &settings.headers {
            request = request.header(name, value);
        }
        if let Some(body) = &settings.body {
            request = request.body(body.clone());
        }
        if let (true, Some(v)) = (settings.conditional, &validators) {
            if let Some(etag) = &v.etag {
                request = request.header(reqwest::header::IF_NONE_MATCH, etag);
            }
            if let Some(modified) = &v.last_modified {
                request = request.header(reqwest::header::IF_MODIFIED_SINCE, modified);
            }
        }
        let response = match request.send().await {
            Ok(response) => response,
            Err(e) => return request_failure(&e, started.elapsed()),
        };
        let code = response.status().as_u16();
        let first_byte = started.elapsed();
        let meta = json!({"status_code": code, "first_byte_ms": first_byte.as_millis() as u64});
        let new_validators = settings
            .conditional
            .then(|| validators_of(&response))
            .flatten();

        if code == 304 && settings.conditional && validators.is_some() {
            let mut outcome =
                CheckOutcome::up(first_byte, json!({"status_code": 304, "unchanged": true}));
            outcome.validators = validators;
            return outcome;
        }
        if code == 429
            || (code == 503
                && response
                    .headers()
                    .contains_key(reqwest::header::RETRY_AFTER))
        {
            let retry_after = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| parse_retry_after(v, SystemTime::now()));
            let wait = retry_after.map_or(String::new(), |d| {
                format!(", retry after {} s", d.as_secs())
            });
            return CheckOutcome {
                status: ResultStatus::RateLimited,
                retry_after,
                ..CheckOutcome::down(
                    Some(first_byte),
                    format!("rate limited ({code}){wait}"),
                    meta,
                )
            };
        }
        if !settings.accepts(code) {
            let expected = if settings.expected_status.is_empty() {
                "2xx".to_string()
            } else {
                let codes: Vec<String> = settings
                    .expected_status
                    .iter()
                    .map(u16::to_string)
                    .collect();
                codes.join("/")
            };
            let mut message = format!("expected {expected}, got {code}");
            let mut meta = meta;
            // Health endpoints commonly answer 503 with the document that says why: read it.
            if settings.format == BodyFormat::HealthJson {
                let document = read_body(response)
                    .await
                    .ok()
                    .and_then(|body| serde_json::from_str::<Value>(&body).ok());
                if let Some(document) = document.filter(|d| d.get("dependencies").is_some()) {
                    let report = health_json(&document);
                    meta["dependencies"] = report.dependencies;
                    if let Some(failure) = report.failure {
                        message = format!("{message}; {failure}");
                    }
                }
            }
            // Credentials will not fix themselves by retrying.
            return if code == 401 || code == 403 {
                CheckOutcome::permanent(Some(first_byte), message, meta)
            } else {
                CheckOutcome::down(Some(first_byte), message, meta)
            };
        }
        let needs_body = settings.keyword.is_some()
            || settings.keyword_absent.is_some()
            || settings.json_path.is_some()
            || settings.format == BodyFormat::HealthJson;
        let mut outcome = if needs_body {
            match read_body(response).await {
                Ok(body) => assert_body(settings, &body, started.elapsed(), meta),
                Err(e) => CheckOutcome::down(
                    Some(started.elapsed()),
                    format!("reading body failed: {e}"),
                    meta,
                ),
            }
        } else {
            CheckOutcome::up(first_byte, meta)
        };
        outcome.validators = new_validators;
        outcome
    }
}

fn validators_of(response: &reqwest::Response) -> Option<Validators> {
    let header = |name| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let validators = Validators {
        etag: header(reqwest::header::ETAG),
        last_modified: header(reqwest::header::LAST_MODIFIED),
    };
    (validators.etag.is_some() || validators.last_modified.is_some()).then_some(validators)
}

/// `Retry-After` as seconds or an HTTP date.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

fn assert_body(
    settings: &HttpSettings,
    body: &str,
    latency: Duration,
    mut meta: Value,
) -> CheckOutcome {
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
            return CheckOutcome::down(Some(latency), format!("keyword `{keyword}` present"), meta);
        }
    }
    let document = if settings.json_path.is_some() || settings.format == BodyFormat::HealthJson {
        match serde_json::from_str::<Value>(body) {
            Ok(document) => Some(document),
            Err(e) => {
                return CheckOutcome::down(Some(latency), format!("body is not JSON: {e}"), meta)
            }
        }
    } else {
        None
    };
    if let (Some(path), Some(document)) = (&settings.json_path, &document) {
        let found = document.pointer(path);
        let ok = match (&settings.json_expected, found) {
            (_, None) => false,
            (Some(expected), Some(value)) => value == expected,
            (None, Some(value)) => !value.is_null(),
        };
        if !ok {
            let got = found.map_or("missing".to_string(), Value::to_string);
            let want = settings
                .json_expected
                .as_ref()
                .map_or("present".to_string(), Value::to_string);
            return CheckOutcome::down(
                Some(latency),
                format!("json {path} is {got}, expected {want}"),
                meta,
            );
        }
    }
    if settings.format == BodyFormat::HealthJson {
        let report = health_json(document.as_ref().unwrap_or(&Value::Null));
        meta["dependencies"] = report.dependencies;
        return match report.failure {
            Some(message) => CheckOutcome::down(Some(latency), message, meta),
            None => CheckOutcome::up(latency, meta),
        };
    }
    CheckOutcome::up(latency, meta)
}

struct HealthReport {
    dependencies: Value,
    failure: Option<String>,
}

/// Reads a health document (see docs/health-json.md): each dependency's name, health, latency,
/// skipped flag and error. Skipped dependencies are reported but never fail the check.
fn health_json(document: &Value) -> HealthReport {
    let Some(list) = document.get("dependencies").and_then(Value::as_array) else {
        return HealthReport {
            dependencies: json!([]),
            failure: Some("health document has no `dependencies` list".into()),
        };
    };
    let mut failures = Vec::new();
    let dependencies: Vec<Value> = list
        .iter()
        .map(|dep| {
            let name = dep
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("unnamed")
                .to_string();
            let skipped = dep.get("skipped").and_then(Value::as_bool).unwrap_or(false);
            let healthy = dep.get("healthy").and_then(Value::as_bool).unwrap_or(false);
            let error = dep.get("error").and_then(Value::as_str).map(str::to_string);
            if !skipped && !healthy {
                failures.push(match &error {
                    Some(error) => format!("{name} ({error})"),
                    None => name.clone(),
                });
            }
            json!({
                "name": name,
                "healthy": healthy,
                "skipped": skipped,
                "latency_ms": dep.get("latency_ms").cloned().unwrap_or(Value::Null),
                "error": error,
            })
        })
        .collect();
    let failure =
        (!failures.is_empty()).then(|| format!("unhealthy dependencies: {}", failures.join(", ")));
    HealthReport {
        dependencies: Value::Array(dependencies),
        failure,
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

/// One line, classified: `connection refused` (transient), `dns: name does not resolve`
/// (permanent), `certificate invalid: …` (permanent).
fn request_failure(error: &reqwest::Error, elapsed: Duration) -> CheckOutcome {
    let mut chain = Vec::new();
    let mut source: Option<&dyn std::error::Error> = Some(error);
    while let Some(e) = source {
        chain.push(e.to_string());
        source = e.source();
    }
    let deepest = chain.last().cloned().unwrap_or_default();
    let all = chain.join(": ").to_ascii_lowercase();
    if all.contains("connection refused") {
        CheckOutcome::down(Some(elapsed), "connection refused", json!({}))
    } else if all.contains("name or service not known")
        || all.contains("no such host")
        || all.contains("nodename nor servname")
    {
        CheckOutcome::permanent(None, "dns: name does not resolve", json!({}))
    } else if all.contains("certificate") || all.contains("invalid peer") {
        CheckOutcome::permanent(
            Some(elapsed),
            format!("certificate invalid: {deepest}"),
            json!({}),
        )
    } else if error.is_connect() {
        CheckOutcome::down(
            Some(elapsed),
            format!("connect failed: {deepest}"),
            json!({}),
        )
    } else {
        CheckOutcome::down(Some(elapsed), deepest, json!({}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::{HeaderMap, StatusCode};
    use axum::routing::get;

    async fn serve() -> String {
        let app = axum::Router::new()
            .route("/ok", get(|| async { "all good" }))
            .route(
                "/fail",
                get(|| async { (StatusCode::SERVICE_UNAVAILABLE, "no") }),
            )
            .route("/denied", get(|| async { (StatusCode::FORBIDDEN, "no") }))
            .route(
                "/sick",
                get(|| async {
                    let doc = json!({"dependencies": [{"name": "db", "healthy": false, "error": "timeout"}]});
                    (StatusCode::SERVICE_UNAVAILABLE, axum::Json(doc))
                }),
            )
            .route(
                "/busy",
                get(|| async {
                    (
                        StatusCode::TOO_MANY_REQUESTS,
                        [("retry-after", "120")],
                        "slow down",
                    )
                }),
            )
            .route(
                "/json",
                get(|| async { axum::Json(json!({"status": "ok", "version": 3})) }),
            )
            .route(
                "/health",
                get(|| async {
                    axum::Json(json!({"dependencies": [
                        {"name": "db", "healthy": true, "latency_ms": 3},
                        {"name": "cache", "healthy": false, "error": "connection refused"},
                        {"name": "mail", "healthy": false, "skipped": true},
                    ]}))
                }),
            )
            .route(
                "/etag",
                get(|headers: HeaderMap| async move {
                    if headers.get("if-none-match").is_some_and(|v| v == "\"v1\"") {
                        (StatusCode::NOT_MODIFIED, [("etag", "\"v1\"")], "")
                    } else {
                        (StatusCode::OK, [("etag", "\"v1\"")], "fresh")
                    }
                }),
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

    const TIMEOUT: Duration = Duration::from_secs(2);

    #[tokio::test]
    async fn status_keyword_json_and_timeout_outcomes() {
        let base = serve().await;
        let clients = HttpClients::new().unwrap();
        let check = |path: &str, settings: HttpSettings| {
            let url = format!("{base}{path}");
            let clients = clients.clone();
            async move { clients.check(&url, &settings, TIMEOUT, None).await }
        };

        let ok = check("/ok", HttpSettings::default()).await;
        assert_eq!(ok.status, ResultStatus::Up, "{ok:?}");
        assert_eq!(ok.meta["status_code"], 200);

        let fail = check("/fail", HttpSettings::default()).await;
        assert_eq!(
            (fail.msg.as_str(), fail.permanent),
            ("expected 2xx, got 503", false)
        );
        let expect_503 = HttpSettings {
            expected_status: vec![503],
            ..Default::default()
        };
        assert_eq!(check("/fail", expect_503).await.status, ResultStatus::Up);

        let denied = check("/denied", HttpSettings::default()).await;
        assert!(denied.permanent, "403 is permanent: {denied:?}");

        let keyword = HttpSettings {
            keyword: Some("missing".into()),
            ..Default::default()
        };
        assert_eq!(
            check("/ok", keyword).await.msg,
            "keyword `missing` not found"
        );
        let absent = HttpSettings {
            keyword_absent: Some("good".into()),
            ..Default::default()
        };
        assert_eq!(check("/ok", absent).await.msg, "keyword `good` present");

        let json_ok = HttpSettings {
            json_path: Some("/status".into()),
            json_expected: Some(json!("ok")),
            ..Default::default()
        };
        assert_eq!(check("/json", json_ok).await.status, ResultStatus::Up);
        let json_bad = HttpSettings {
            json_path: Some("/version".into()),
            json_expected: Some(json!(4)),
            ..Default::default()
        };
        assert_eq!(
            check("/json", json_bad).await.msg,
            "json /version is 3, expected 4"
        );
        let not_json = HttpSettings {
            json_path: Some("/x".into()),
            ..Default::default()
        };
        assert!(check("/ok", not_json)
            .await
            .msg
            .starts_with("body is not JSON"));

        let slow = clients
            .check(
                &format!("{base}/slow"),
                &HttpSettings::default(),
                Duration::from_millis(300),
                None,
            )
            .await;
        assert_eq!(slow.msg, "timeout after 300 ms");
    }

    #[tokio::test]
    async fn rate_limits_conditional_requests_and_health_documents() {
        let base = serve().await;
        let clients = HttpClients::new().unwrap();

        let busy = clients
            .check(
                &format!("{base}/busy"),
                &HttpSettings::default(),
                TIMEOUT,
                None,
            )
            .await;
        assert_eq!(busy.status, ResultStatus::RateLimited);
        assert_eq!(busy.retry_after, Some(Duration::from_secs(120)));
        assert_eq!(busy.msg, "rate limited (429), retry after 120 s");

        let conditional = HttpSettings {
            conditional: true,
            ..Default::default()
        };
        let first = clients
            .check(&format!("{base}/etag"), &conditional, TIMEOUT, None)
            .await;
        assert_eq!(first.meta["status_code"], 200);
        let validators = first.validators.clone().expect("etag kept");
        assert_eq!(validators.etag.as_deref(), Some("\"v1\""));
        let second = clients
            .check(
                &format!("{base}/etag"),
                &conditional,
                TIMEOUT,
                Some(validators),
            )
            .await;
        assert_eq!(second.status, ResultStatus::Up);
        assert_eq!(second.meta["unchanged"], true);

        let health = HttpSettings {
            format: BodyFormat::HealthJson,
            ..Default::default()
        };
        let report = clients
            .check(&format!("{base}/health"), &health, TIMEOUT, None)
            .await;
        assert_eq!(report.status, ResultStatus::Down);
        assert_eq!(
            report.msg,
            "unhealthy dependencies: cache (connection refused)"
        );
        let sick = clients
            .check(&format!("{base}/sick"), &health, TIMEOUT, None)
            .await;
        assert_eq!(
            sick.msg,
            "expected 2xx, got 503; unhealthy dependencies: db (timeout)"
        );
        assert_eq!(sick.meta["dependencies"][0]["name"], "db");
        let deps = report.meta["dependencies"].as_array().unwrap();
        assert_eq!(deps.len(), 3);
        assert_eq!(deps[2]["skipped"], true);
        assert_eq!(deps[0]["latency_ms"], 3);
    }

    #[tokio::test]
    async fn refused_and_unresolvable_targets_say_so() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let clients = HttpClients::new().unwrap();
        let refused = clients
            .check(
                &format!("http://{addr}/"),
                &HttpSettings::default(),
                TIMEOUT,
                None,
            )
            .await;
        assert_eq!(
            (refused.msg.as_str(), refused.permanent),
            ("connection refused", false)
        );
        let nowhere = clients
            .check(
                "http://no-such-host.invalid/",
                &HttpSettings::default(),
                TIMEOUT,
                None,
            )
            .await;
        assert!(nowhere.permanent, "{nowhere:?}");
        assert_eq!(nowhere.msg, "dns: name does not resolve");
    }

    #[test]
    fn retry_after_accepts_seconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(parse_retry_after("30", now), Some(Duration::from_secs(30)));
        let later = httpdate::fmt_http_date(now + Duration::from_secs(90));
        assert_eq!(
            parse_retry_after(&later, now),
            Some(Duration::from_secs(90))
        );
        let past = httpdate::fmt_http_date(now - Duration::from_secs(90));
        assert_eq!(parse_retry_after(&past, now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon", now), None);
    }
}
