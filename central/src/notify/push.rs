//! Phone push services: ntfy, Gotify and Pushover. Each gets plain text (none of them is
//! asked to read Markdown or HTML) and a priority by severity, so a `down` rings louder than
//! a recovery.
//!
//! Owns the requests these services document; sending is `super::webhook::post`'s.

use serde_json::json;
use shared_proto::notifications::Notification;

use super::facts::{Facts, Outgoing};

/// ntfy's priorities: 5 urgent, 4 high, 3 default.
fn ntfy_priority(facts: &Facts) -> u8 {
    match facts.severity {
        "critical" => 5,
        "warning" => 4,
        _ => 3,
    }
}

/// ntfy's JSON publishing: `POST {url}` (the server, default `https://ntfy.sh`) with the
/// topic in the body, and `Authorization: Bearer {token}` when the channel has one.
pub fn ntfy(
    url: &str,
    topic: &str,
    token: Option<&str>,
    message: &Notification,
    facts: &Facts,
) -> Outgoing {
    let mut body = json!({
        "topic": topic,
        "title": super::clip(&facts.headline, 250),
        "message": super::clip(&super::text(message), 4096),
        "priority": ntfy_priority(facts),
        "tags": [if facts.is_problem { "rotating_light" } else { "white_check_mark" }],
    });
    if let Some(link) = &facts.link {
        body["click"] = json!(link);
    }
    let headers = token
        .map(|token| vec![("Authorization".to_string(), format!("Bearer {token}"))])
        .unwrap_or_default();
    Outgoing::json(url, body).with_headers(headers)
}

/// Gotify's priorities: 8 and up sound on phones, 4–7 notify, below 4 stay quiet.
fn gotify_priority(facts: &Facts) -> u8 {
    match facts.severity {
        "critical" => 8,
        "warning" => 6,
        _ => 4,
    }
}

/// `POST {url}/message` with `X-Gotify-Key: {application token}`.
pub fn gotify(url: &str, token: &str, message: &Notification, facts: &Facts) -> Outgoing {
    let mut body = json!({
        "title": facts.headline,
        "message": super::text(message),
        "priority": gotify_priority(facts),
    });
    if let Some(link) = &facts.link {
        body["extras"] = json!({"client::notification": {"click": {"url": link}}});
    }
    Outgoing::json(&format!("{}/message", url.trim_end_matches('/')), body)
        .with_headers(vec![("X-Gotify-Key".to_string(), token.to_string())])
}

/// `POST {url}` (default `https://api.pushover.net/1/messages.json`) with the application's
/// token and the user's key; problems at high priority (1: past quiet hours), the rest at 0.
pub fn pushover(
    url: &str,
    token: &str,
    user_key: &str,
    message: &Notification,
    facts: &Facts,
) -> Outgoing {
    let mut body = json!({
        "token": token,
        "user": user_key,
        "title": super::clip(&facts.headline, 250),
        "message": super::clip(&super::text(message), 1024),
        "priority": if facts.severity == "critical" { 1 } else { 0 },
        "timestamp": message.at.timestamp(),
    });
    if let Some(link) = &facts.link {
        body["url"] = json!(super::clip(link, 512));
        body["url_title"] = json!("Open in central");
    }
    Outgoing::json(url, body)
}
