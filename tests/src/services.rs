//! Local stand-ins for the services notification channels speak to: PagerDuty's Events API v2,
//! Opsgenie's Alert API, a Microsoft Teams workflow, a Discord webhook, Telegram's Bot API,
//! ntfy, Gotify and Pushover. Each checks a request the way that service documents it (its
//! path, method, credentials, required fields and limits) and answers as the service does
//! (PagerDuty `202` with a `dedup_key`, Telegram `{"ok": true}`, …); a request it would refuse
//! gets the service's `400` and is kept with the reason, so a test can show every request was
//! one the service takes. One server; each service under its own first path segment
//! (`{url}/pagerduty/v2/enqueue`, `{url}/telegram/bot…/sendMessage`).

use std::sync::{Arc, Mutex};

use axum::http::{HeaderMap, Method, StatusCode, Uri};
use serde_json::{json, Value};

/// One request a stand-in received.
#[derive(Debug, Clone)]
pub struct ServiceRequest {
    /// The service: the first path segment.
    pub service: String,
    /// The path below the service's segment, and the query.
    pub path: String,
    pub query: Option<String>,
    pub headers: HeaderMap,
    pub json: Value,
    /// Why the service would refuse it; `None` when it takes it.
    pub refused: Option<String>,
}

#[derive(Clone)]
pub struct Services {
    pub url: String,
    received: Arc<Mutex<Vec<ServiceRequest>>>,
}

impl Services {
    pub async fn start() -> anyhow::Result<Services> {
        let received = Arc::new(Mutex::new(Vec::new()));
        let log = received.clone();
        let router = axum::Router::new().fallback(
            move |method: Method, uri: Uri, headers: HeaderMap, body: String| {
                let log = log.clone();
                async move {
                    let path = uri.path().trim_start_matches('/');
                    let (service, rest) = path.split_once('/').unwrap_or((path, ""));
                    let json: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                    let request = ServiceRequest {
                        service: service.to_string(),
                        path: format!("/{rest}"),
                        query: uri.query().map(str::to_string),
                        headers,
                        json,
                        refused: None,
                    };
                    let checked = if method != Method::POST {
                        Err(format!("{method} instead of POST"))
                    } else {
                        check(&request)
                    };
                    let (status, answer) = match &checked {
                        Ok(answer) => answer.clone(),
                        Err(reason) => (StatusCode::BAD_REQUEST, json!({"error": reason})),
                    };
                    log.lock().unwrap().push(ServiceRequest {
                        refused: checked.err(),
                        ..request
                    });
                    (status, axum::Json(answer))
                }
            },
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        tokio::spawn(async move { axum::serve(listener, router).await });
        Ok(Services { url, received })
    }

    /// Every request of `service`, in order.
    pub fn of(&self, service: &str) -> Vec<ServiceRequest> {
        self.received
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.service == service)
            .cloned()
            .collect()
    }

    /// The requests a service would have refused, with why.
    pub fn refused(&self) -> Vec<(String, String)> {
        self.received
            .lock()
            .unwrap()
            .iter()
            .filter_map(|r| r.refused.clone().map(|why| (r.service.clone(), why)))
            .collect()
    }
}

type Answer = (StatusCode, Value);

fn check(request: &ServiceRequest) -> Result<Answer, String> {
    let content_type = header(request, "content-type").unwrap_or_default();
    if !content_type.starts_with("application/json") {
        return Err(format!("Content-Type {content_type}, not application/json"));
    }
    if request.json.is_null() {
        return Err("the body is not JSON".into());
    }
    match request.service.as_str() {
        "pagerduty" => pagerduty(request),
        "opsgenie" => opsgenie(request),
        "teams" => teams(request),
        "discord" => discord(request),
        "telegram" => telegram(request),
        "ntfy" => ntfy(request),
        "gotify" => gotify(request),
        "pushover" => pushover(request),
        other => Err(format!("no service `{other}` here")),
    }
}

fn header(request: &ServiceRequest, name: &str) -> Option<String> {
    request
        .headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// A string field, present and at most `max` characters.
fn text<'a>(json: &'a Value, pointer: &str, max: usize) -> Result<&'a str, String> {
    let value = json
        .pointer(pointer)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("`{pointer}` is missing or not a string"))?;
    if value.is_empty() || value.chars().count() > max {
        return Err(format!("`{pointer}` must be 1 to {max} characters"));
    }
    Ok(value)
}

/// Events API v2 (`POST /v2/enqueue`): `routing_key` (32 characters), `event_action`,
/// `dedup_key` (at most 255); a trigger's `payload` has `summary` (at most 1,024), `source`
/// and a `severity` of critical, error, warning or info. `202` with the `dedup_key`.
fn pagerduty(request: &ServiceRequest) -> Result<Answer, String> {
    if request.path != "/v2/enqueue" {
        return Err(format!("path {}", request.path));
    }
    let json = &request.json;
    if text(json, "/routing_key", 32)?.len() != 32 {
        return Err("`routing_key` must be 32 characters".into());
    }
    let key = text(json, "/dedup_key", 255)?;
    match text(json, "/event_action", 20)? {
        "trigger" => {
            text(json, "/payload/summary", 1024)?;
            text(json, "/payload/source", 255)?;
            let severity = text(json, "/payload/severity", 10)?;
            if !["critical", "error", "warning", "info"].contains(&severity) {
                return Err(format!("severity {severity}"));
            }
            if let Some(timestamp) = json.pointer("/payload/timestamp") {
                let ok = timestamp
                    .as_str()
                    .is_some_and(|t| chrono::DateTime::parse_from_rfc3339(t).is_ok());
                if !ok {
                    return Err(format!("timestamp {timestamp}"));
                }
            }
        }
        "acknowledge" | "resolve" => {}
        other => return Err(format!("event_action {other}")),
    }
    Ok((
        StatusCode::ACCEPTED,
        json!({"status": "success", "message": "Event processed", "dedup_key": key}),
    ))
}

/// Alert API: `Authorization: GenieKey …`; `POST /v2/alerts` with `message` (at most 130),
/// `alias` (at most 512), `priority` P1–P5; `POST /v2/alerts/{alias}/close
/// ?identifierType=alias`. `202` with a request id.
fn opsgenie(request: &ServiceRequest) -> Result<Answer, String> {
    let auth = header(request, "authorization").unwrap_or_default();
    if !auth.starts_with("GenieKey ") || auth.len() <= "GenieKey ".len() {
        return Err(format!("Authorization `{auth}`"));
    }
    let json = &request.json;
    if request.path == "/v2/alerts" {
        text(json, "/message", 130)?;
        text(json, "/alias", 512)?;
        if let Some(description) = json.get("description") {
            let ok = description
                .as_str()
                .is_some_and(|d| d.chars().count() <= 15_000);
            if !ok {
                return Err("description".into());
            }
        }
        let priority = text(json, "/priority", 2)?;
        if !["P1", "P2", "P3", "P4", "P5"].contains(&priority) {
            return Err(format!("priority {priority}"));
        }
        if let Some(details) = json.get("details") {
            let ok = details
                .as_object()
                .is_some_and(|d| d.values().all(Value::is_string));
            if !ok {
                return Err("details must map strings to strings".into());
            }
        }
    } else if request.path.starts_with("/v2/alerts/") && request.path.ends_with("/close") {
        if request.query.as_deref() != Some("identifierType=alias") {
            return Err(format!("query {:?}", request.query));
        }
    } else {
        return Err(format!("path {}", request.path));
    }
    Ok((
        StatusCode::ACCEPTED,
        json!({"result": "Request will be processed", "took": 0.1,
               "requestId": uuid::Uuid::new_v4().to_string()}),
    ))
}

/// A workflow's webhook: `{"type": "message", "attachments": [{"contentType":
/// "application/vnd.microsoft.card.adaptive", "content": {"type": "AdaptiveCard", …}}]}`.
fn teams(request: &ServiceRequest) -> Result<Answer, String> {
    let json = &request.json;
    if json["type"] != "message" {
        return Err("type must be message".into());
    }
    let attachment = &json["attachments"][0];
    if attachment["contentType"] != "application/vnd.microsoft.card.adaptive" {
        return Err("attachments[0].contentType".into());
    }
    let card = &attachment["content"];
    if card["type"] != "AdaptiveCard" || !card["version"].is_string() {
        return Err("an AdaptiveCard with a version".into());
    }
    if card["body"].as_array().is_none_or(|b| b.is_empty()) {
        return Err("an empty card".into());
    }
    Ok((StatusCode::ACCEPTED, Value::Null))
}

/// `POST /api/webhooks/{id}/{token}`: `content` of at most 2,000 characters. `204`.
fn discord(request: &ServiceRequest) -> Result<Answer, String> {
    if !request.path.starts_with("/api/webhooks/") {
        return Err(format!("path {}", request.path));
    }
    text(&request.json, "/content", 2000)?;
    Ok((StatusCode::NO_CONTENT, Value::Null))
}

/// `POST /bot{token}/sendMessage`: `chat_id` (a number or `@name`) and `text` (1 to 4,096).
fn telegram(request: &ServiceRequest) -> Result<Answer, String> {
    let token = request
        .path
        .strip_prefix("/bot")
        .and_then(|rest| rest.strip_suffix("/sendMessage"))
        .ok_or_else(|| format!("path {}", request.path))?;
    if !token.contains(':') {
        return Err(format!("bot token {token}"));
    }
    let json = &request.json;
    let chat = &json["chat_id"];
    if !(chat.is_i64() || chat.as_str().is_some_and(|c| c.starts_with('@'))) {
        return Err(format!("chat_id {chat}"));
    }
    text(json, "/text", 4096)?;
    Ok((
        StatusCode::OK,
        json!({"ok": true, "result": {"message_id": 1, "chat": {"id": chat}, "text": json["text"]}}),
    ))
}

/// JSON publishing: `POST /` with `topic`, `message`, optional `title`, `priority` 1–5,
/// `tags`.
fn ntfy(request: &ServiceRequest) -> Result<Answer, String> {
    if request.path != "/" {
        return Err(format!("path {}", request.path));
    }
    let json = &request.json;
    text(json, "/topic", 64)?;
    text(json, "/message", 4096)?;
    if let Some(priority) = json.get("priority") {
        if !priority.as_u64().is_some_and(|p| (1..=5).contains(&p)) {
            return Err(format!("priority {priority}"));
        }
    }
    Ok((
        StatusCode::OK,
        json!({"id": "x", "event": "message", "topic": json["topic"], "message": json["message"]}),
    ))
}

/// `POST /message` with `X-Gotify-Key`: `message`, optional `title`, `priority` a number.
fn gotify(request: &ServiceRequest) -> Result<Answer, String> {
    if request.path != "/message" {
        return Err(format!("path {}", request.path));
    }
    if header(request, "x-gotify-key").is_none_or(|k| k.is_empty()) {
        return Err("no X-Gotify-Key".into());
    }
    let json = &request.json;
    text(json, "/message", 100_000)?;
    if let Some(priority) = json.get("priority") {
        if !priority.is_u64() {
            return Err(format!("priority {priority}"));
        }
    }
    Ok((StatusCode::OK, json!({"id": 1, "message": json["message"]})))
}

/// `POST /1/messages.json`: `token` and `user` (30 letters and digits each), `message` (at
/// most 1,024), `title` (at most 250), `priority` -2 to 2. `{"status": 1}`.
fn pushover(request: &ServiceRequest) -> Result<Answer, String> {
    if request.path != "/1/messages.json" {
        return Err(format!("path {}", request.path));
    }
    let json = &request.json;
    for field in ["/token", "/user"] {
        let value = text(json, field, 30)?;
        if value.len() != 30 || !value.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(format!("`{field}` must be 30 letters and digits"));
        }
    }
    text(json, "/message", 1024)?;
    if json.get("title").is_some() {
        text(json, "/title", 250)?;
    }
    if let Some(priority) = json.get("priority") {
        if !priority.as_i64().is_some_and(|p| (-2..=2).contains(&p)) {
            return Err(format!("priority {priority}"));
        }
    }
    Ok((
        StatusCode::OK,
        json!({"status": 1, "request": uuid::Uuid::new_v4().to_string()}),
    ))
}
