//! The Slack incoming-webhook format (also read by Mattermost, Rocket.Chat and others):
//! `{"text": …}`. Text in it may come from a target (a check's message quotes what the target
//! answered) or an operator; Slack reads `<…>` as links and mentions (`<!channel>` pages a
//! whole channel), so `&`, `<` and `>` are escaped as Slack asks, and nothing from outside
//! can mention anyone.

use shared_proto::notifications::Notification;

/// Text as Slack shows it literally (its three control characters escaped).
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

pub fn body(message: &Notification) -> String {
    let mut text = escape(&super::headline(message));
    if let Some(locations) = &message.locations {
        for location in locations {
            text.push_str(&escape(&format!(
                "\n• {}: {}",
                location.region,
                location.status.as_str()
            )));
        }
    }
    serde_json::json!({ "text": text }).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared_proto::notifications::{NotificationEvent, Subject};

    #[test]
    fn nothing_from_outside_can_mention_anyone() {
        let message = Notification {
            id: uuid::Uuid::nil(),
            event: NotificationEvent::MonitorDown,
            monitor: Some(Subject {
                id: uuid::Uuid::from_u128(7),
                name: "shop <@U123>".into(),
            }),
            poller: None,
            status: "down".into(),
            previous_status: Some("up".into()),
            at: "2026-11-23T10:00:00Z".parse().unwrap(),
            // A target's answer, quoted in the check's message.
            message: "keyword missing: <!channel> <https://x|click> & more".into(),
            reminder: false,
            locations: None,
            dependency: None,
            dependents: None,
        };
        let body: serde_json::Value = serde_json::from_str(&body(&message)).unwrap();
        let text = body["text"].as_str().unwrap();
        assert!(
            text.contains("&lt;!channel&gt; &lt;https://x|click&gt; &amp; more"),
            "{text}"
        );
        assert!(!text.contains('<') && !text.contains('>'), "{text}");
    }
}
