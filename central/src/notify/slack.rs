//! The Slack incoming-webhook format (also read by Mattermost, Rocket.Chat and others):
//! `{"text": …}`.

use shared_proto::notifications::Notification;

pub fn body(message: &Notification) -> String {
    let mut text = super::headline(message);
    if let Some(locations) = &message.locations {
        for location in locations {
            let status = serde_json::to_value(location.status).unwrap_or_default();
            text.push_str(&format!(
                "\n• {}: {}",
                location.region,
                status.as_str().unwrap_or("?")
            ));
        }
    }
    serde_json::json!({ "text": text }).to_string()
}
