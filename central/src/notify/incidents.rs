//! The incident tools: PagerDuty's Events API v2 and Opsgenie's Alert API. Both open an
//! incident for a problem and close it when the problem ends, by a key of central's
//! (`Facts::key`: one per monitor, poller or dependency), so a monitor that goes from `down`
//! to `stale` updates its one open incident and `monitor.up` resolves it; a reminder repeats
//! the trigger, which the tool folds into the open incident. A test send opens an incident
//! and resolves it at once, so it shows the path works and leaves nothing open.
//!
//! Owns the requests these APIs document; sending is `super::webhook::post`'s.

use chrono::SecondsFormat;
use serde_json::{json, Value};
use shared_proto::notifications::Notification;

use super::facts::{Facts, Outgoing};

/// PagerDuty's limits: a summary of 1,024 characters, a `dedup_key` of 255.
const PAGERDUTY_SUMMARY: usize = 1024;

/// PagerDuty's severities by central's.
fn pagerduty_severity(facts: &Facts) -> &'static str {
    match facts.severity {
        "critical" => "critical",
        "warning" => "warning",
        _ => "info",
    }
}

/// `POST {url}` (default `https://events.pagerduty.com/v2/enqueue`): a trigger for a problem,
/// a resolve for its end, each with the integration's routing key.
pub fn pagerduty(
    url: &str,
    routing_key: &str,
    message: &Notification,
    facts: &Facts,
) -> Vec<Outgoing> {
    let trigger = || {
        let mut event = json!({
            "routing_key": routing_key,
            "event_action": "trigger",
            "dedup_key": facts.key,
            "payload": {
                "summary": super::clip(&facts.headline, PAGERDUTY_SUMMARY),
                "source": facts.subject,
                "severity": pagerduty_severity(facts),
                "timestamp": message.at.to_rfc3339_opts(SecondsFormat::Millis, true),
                "component": facts.subject,
                "class": message.event.as_str(),
                "custom_details": details(message),
            },
            "client": "central",
        });
        if let Some(link) = &facts.link {
            event["client_url"] = json!(link);
            event["links"] = json!([{"href": link, "text": "Open in central"}]);
        }
        event
    };
    let resolve = || {
        json!({
            "routing_key": routing_key,
            "event_action": "resolve",
            "dedup_key": facts.key,
        })
    };
    let bodies = match message.event {
        event if event.stands_alone() => vec![trigger(), resolve()],
        _ if facts.is_problem => vec![trigger()],
        _ => vec![resolve()],
    };
    bodies
        .into_iter()
        .map(|body| Outgoing::json(url, body))
        .collect()
}

/// Opsgenie's limits: a message of 130 characters, a description of 15,000.
const OPSGENIE_MESSAGE: usize = 130;
const OPSGENIE_DESCRIPTION: usize = 15_000;

/// Opsgenie's priorities by central's severities.
fn opsgenie_priority(facts: &Facts) -> &'static str {
    match facts.severity {
        "critical" => "P1",
        "warning" => "P3",
        _ => "P5",
    }
}

/// `POST {url}/v2/alerts` to create (by `alias`), `POST {url}/v2/alerts/{alias}/close
/// ?identifierType=alias` to close, with `Authorization: GenieKey {key}`. `url` is the API's
/// base (default `https://api.opsgenie.com`; `https://api.eu.opsgenie.com` for the EU).
pub fn opsgenie(url: &str, key: &str, message: &Notification, facts: &Facts) -> Vec<Outgoing> {
    let base = url.trim_end_matches('/');
    let auth = vec![("Authorization".to_string(), format!("GenieKey {key}"))];
    let create = || {
        let mut body = json!({
            "message": super::clip(&facts.headline, OPSGENIE_MESSAGE),
            "alias": facts.key,
            "description": super::clip(&super::text(message), OPSGENIE_DESCRIPTION),
            "priority": opsgenie_priority(facts),
            "source": "central",
            "entity": facts.subject,
            "details": flat_details(message),
            "tags": ["central", message.event.as_str()],
        });
        if let Some(link) = &facts.link {
            body["details"]["link"] = json!(link);
        }
        Outgoing::json(&format!("{base}/v2/alerts"), body).with_headers(auth.clone())
    };
    let close = || {
        // The channel's URL was checked when stored, so it parses; were it not to, the alias
        // is escaped by hand and the send says what the receiver made of it.
        let url = match url::Url::parse(&format!("{base}/v2/alerts/")) {
            Ok(mut url) => {
                if let Ok(mut segments) = url.path_segments_mut() {
                    segments.pop_if_empty().push(&facts.key).push("close");
                }
                url.query_pairs_mut().append_pair("identifierType", "alias");
                url.to_string()
            }
            Err(_) => {
                let alias: String =
                    url::form_urlencoded::byte_serialize(facts.key.as_bytes()).collect();
                format!("{base}/v2/alerts/{alias}/close?identifierType=alias")
            }
        };
        let body = json!({"source": "central", "note": super::clip(&facts.headline, 25_000)});
        Outgoing::json(&url, body).with_headers(auth.clone())
    };
    match message.event {
        event if event.stands_alone() => vec![create(), close()],
        _ if facts.is_problem => vec![create()],
        _ => vec![close()],
    }
}

/// The notification's fields beside the summary, for PagerDuty's `custom_details`.
fn details(message: &Notification) -> Value {
    let mut details = json!({
        "event": message.event.as_str(),
        "status": message.status,
        "previous_status": message.previous_status,
        "message": message.message,
        "reminder": message.reminder,
    });
    if let Some(monitor) = &message.monitor {
        details["monitor_id"] = json!(monitor.id);
        details["monitor"] = json!(monitor.name);
    }
    if let Some(poller) = &message.poller {
        details["poller_id"] = json!(poller.id);
        details["poller"] = json!(poller.name);
    }
    if let Some(locations) = &message.locations {
        details["locations"] = json!(locations);
    }
    if let Some(dependency) = &message.dependency {
        details["dependency"] = json!(dependency);
    }
    details
}

/// Opsgenie's `details` are a map of strings to strings.
fn flat_details(message: &Notification) -> Value {
    let details = match details(message) {
        Value::Object(map) => map,
        _ => Default::default(),
    };
    Value::Object(
        details
            .into_iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| {
                let text = match v {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                (k, Value::String(super::clip(&text, 8_000)))
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use shared_proto::notifications::{NotificationEvent, Subject};

    use super::*;

    /// The close URL names the alert by its alias, escaped as one path segment, whether the
    /// channel's URL parses (as every stored one does) or not.
    #[test]
    fn opsgenie_closes_by_the_escaped_alias() {
        let message = Notification {
            id: uuid::Uuid::from_u128(1),
            event: NotificationEvent::MonitorUp,
            monitor: Some(Subject {
                id: uuid::Uuid::from_u128(7),
                name: "shop".into(),
            }),
            poller: None,
            status: "up".into(),
            previous_status: Some("down".into()),
            at: "2026-11-23T10:00:00Z".parse().unwrap(),
            message: "shop is up again".into(),
            reminder: false,
            locations: None,
            dependency: None,
            dependents: None,
        };
        let facts = Facts::of(&message, None);
        let alias = "central%2Fmonitor%2F00000000-0000-0000-0000-000000000007";
        for (base, wanted) in [
            (
                "https://api.opsgenie.com/",
                format!("https://api.opsgenie.com/v2/alerts/{alias}/close?identifierType=alias"),
            ),
            (
                "not a url",
                format!("not a url/v2/alerts/{alias}/close?identifierType=alias"),
            ),
        ] {
            let sent = opsgenie(base, "key", &message, &facts);
            assert_eq!(sent.len(), 1);
            assert_eq!(sent[0].url, wanted);
        }
    }
}
