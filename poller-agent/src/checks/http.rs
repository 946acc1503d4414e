//! `http`: a request whose status, body keywords, JSON value or health document must match.
//! `429` is rate limiting (neither up nor down); every other unexpected status, `503`
//! included, is down, with its `Retry-After` passed on to space the next check. With
//! `conditional`, the validators of the last answer that passed are sent, so an unchanged
//! resource costs a `304`. The target is untrusted: the timeout covers the whole exchange,
//! bodies (after decompression) are read up to `MAX_BODY_BYTES`, and header values are parsed
//! in `target_headers`.

use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{json, Value};
use shared_proto::poller_api::ResultStatus;
use shared_proto::settings::{BodyFormat, HttpSettings};

use super::target_headers::{rate_budget, retry_after};
use super::{timeout_message, CheckOutcome, Validators};

/// Bodies are read up to this many bytes (after decompression); assertions see this much.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// One client per (verify TLS, follow redirects) pair: these are client-wide in reqwest.
/// Idle connections are not kept, so every check measures a fresh connection as a real user's
/// first request would.
#[derive(Clone)]
pub struct HttpClients {
    clients: [reqwest::Client; 4],
}

impl HttpClients {
    pub fn new(user_agent: &str) -> anyhow::Result<Self> {
        let build = |verify: bool, follow: bool| {
            reqwest::Client::builder()
                .danger_accept_invalid_certs(!verify)
                .redirect(if follow {
                    reqwest::redirect::Policy::limited(10)
                } else {
                    reqwest::redirect::Policy::none()
                })
                .pool_max_idle_per_host(0)
                .user_agent(user_agent)
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

    /// The whole exchange (connect, headers, body) is bounded by `timeout`.
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
        let now = SystemTime::now();
        let budget = rate_budget(response.headers(), now);
        let wait = retry_after(response.headers(), now);
        let with_target_state = |outcome: CheckOutcome| CheckOutcome {
            budget,
            retry_after: wait,
            ..outcome
        };

        if code == 304 && settings.conditional && validators.is_some() {
            // The validators came from an answer that passed every assertion: unchanged
            // content passes them still.
            let mut outcome = CheckOutcome::up(
                first_byte,
                json!({"status_code": 304, "first_byte_ms": first_byte.as_millis() as u64, "unchanged": true}),
            );
            outcome.fingerprint = validators.as_ref().map(fingerprint_of_validators);
            outcome.validators = validators;
            return with_target_state(outcome);
        }
        // What the target asked for; the engine decides when the next check really runs
        // (`meta.engine.next_due_at`).
        let wait_text = wait.map_or(String::new(), |d| {
            format!(", target asks to retry after {} s", d.as_secs())
        });
        if code == 429 && !settings.expected_status.contains(&429) {
            return with_target_state(CheckOutcome {
                status: ResultStatus::RateLimited,
                ..CheckOutcome::down(
                    Some(first_byte),
                    format!("rate limited (429){wait_text}"),
                    meta,
                )
            });
        }
        if !settings.accepts(code) {
            return with_target_state(
                unexpected_status(settings, code, response, first_byte, meta, &wait_text).await,
            );
        }
        let new_validators = settings
            .conditional
            .then(|| validators_of(&response))
            .flatten();
        let needs_body = settings.keyword.is_some()
            || settings.keyword_absent.is_some()
            || settings.json_path.is_some()
            || settings.format == BodyFormat::HealthJson;
        let mut outcome = if needs_body {
            match read_body(response).await {
                Ok(body) => {
                    let mut outcome = assert_body(
                        settings,
                        &body.text,
                        started.elapsed(),
                        meta,
                        body.truncated,
                    );
                    outcome.fingerprint = Some(fingerprint(code, &body.text));
                    outcome
                }
                Err(e) => CheckOutcome::down(
                    Some(started.elapsed()),
                    format!("reading body failed: {}", error_chain(&e)),
                    meta,
                ),
            }
        } else {
            let mut outcome = CheckOutcome::up(first_byte, meta);
            outcome.fingerprint = Some(match &new_validators {
                Some(v) => fingerprint_of_validators(v),
                None => fingerprint(code, ""),
            });
            outcome
        };
        if outcome.status == ResultStatus::Up {
            outcome.validators = new_validators;
        }
        with_target_state(outcome)
    }
}

/// A status the monitor does not accept: down, with the health document's reasons when the
/// monitor reads one (health endpoints commonly answer 503 with the document that says why).
async fn unexpected_status(
    settings: &HttpSettings,
    code: u16,
    response: reqwest::Response,
    first_byte: Duration,
    mut meta: Value,
    wait_text: &str,
) -> CheckOutcome {
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
    let mut message = format!("expected {expected}, got {code}{wait_text}");
    if settings.format == BodyFormat::HealthJson {
        let document = read_body(response)
            .await
            .ok()
            .and_then(|body| serde_json::from_str::<Value>(&body.text).ok());
        if let Some(document) = document.filter(|d| d.get("dependencies").is_some()) {
            let report = health_json(&document);
            meta["dependencies"] = report.dependencies;
            if let Some(failure) = report.failure {
                message = format!("{message}; {failure}");
            }
        }
    }
    // Credentials will not fix themselves by retrying.
    if code == 401 || code == 403 {
        CheckOutcome::permanent(Some(first_byte), message, meta)
    } else {
        CheckOutcome::down(Some(first_byte), message, meta)
    }
}

fn fingerprint(code: u16, body: &str) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (code, body).hash(&mut hasher);
    hasher.finish()
}

fn fingerprint_of_validators(validators: &Validators) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (&validators.etag, &validators.last_modified).hash(&mut hasher);
    hasher.finish()
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

fn assert_body(
    settings: &HttpSettings,
    body: &str,
    latency: Duration,
    mut meta: Value,
    truncated: bool,
) -> CheckOutcome {
    if truncated {
        meta["body_truncated_at"] = json!(MAX_BODY_BYTES);
    }
    if let Some(keyword) = &settings.keyword {
        if !body.contains(keyword.as_str()) {
            let within = if truncated {
                format!(" in the first {} KiB", MAX_BODY_BYTES / 1024)
            } else {
                String::new()
            };
            return CheckOutcome::down(
                Some(latency),
                format!("keyword `{keyword}` not found{within}"),
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

struct Body {
    text: String,
    /// The body went on past `MAX_BODY_BYTES`; the rest was not read.
    truncated: bool,
}

/// Reads at most `MAX_BODY_BYTES` (decompressed, when the target compressed it): an endless
/// or inflating body costs a bounded amount of memory, and the check decides on what it read.
async fn read_body(mut response: reqwest::Response) -> Result<Body, reqwest::Error> {
    let mut body = Vec::new();
    let mut truncated = false;
    while let Some(chunk) = response.chunk().await? {
        let room = MAX_BODY_BYTES - body.len();
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if chunk.len() >= room {
            truncated = chunk.len() > room || response.chunk().await.ok().flatten().is_some();
            break;
        }
    }
    Ok(Body {
        text: String::from_utf8_lossy(&body).into_owned(),
        truncated,
    })
}

/// Every cause of an error, joined: reqwest's own message alone rarely says what happened.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut parts = vec![error.to_string()];
    let mut source = error.source();
    while let Some(e) = source {
        parts.push(e.to_string());
        source = e.source();
    }
    parts.join(": ")
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
        let clients = HttpClients::new("poller-agent/test (probe)").unwrap();
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
        let clients = HttpClients::new("poller-agent/test (probe)").unwrap();

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
        assert_eq!(
            busy.msg,
            "rate limited (429), target asks to retry after 120 s"
        );

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
        let clients = HttpClients::new("poller-agent/test (probe)").unwrap();
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
}
