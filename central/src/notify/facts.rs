//! What every channel kind tells beside the message itself: the headline, the severity, the
//! problem's key and the link to central's page (`Facts`), the text of a chat message or a
//! push, and the request a service's API wants (`Outgoing`). Must not: send, or decide who is
//! told (`service::alerts`).

use shared_proto::notifications::Notification;

/// A one-line human summary of a message, for chat and mail subjects.
pub(super) fn headline(message: &Notification) -> String {
    let mark = match message.event.as_str() {
        "monitor.up" | "poller.online" | "dependency.up" => "RESOLVED",
        "test" => "TEST",
        _ => "ALERT",
    };
    format!("[{mark}] {}", message.message)
}

/// One HTTP request a service's API wants for a message.
pub(super) struct Outgoing {
    pub url: String,
    /// The service's own (credentials); the channel's are added when sending.
    pub headers: Vec<(String, String)>,
    pub body: String,
    pub content_type: &'static str,
}

impl Outgoing {
    pub fn json(url: &str, body: serde_json::Value) -> Outgoing {
        Outgoing {
            url: url.to_string(),
            headers: Vec::new(),
            body: body.to_string(),
            content_type: "application/json",
        }
    }

    pub fn with_headers(mut self, headers: Vec<(String, String)>) -> Outgoing {
        self.headers = headers;
        self
    }
}

/// What every kind tells beside the message, worked out once per send.
pub struct Facts {
    /// `[ALERT] …`, `[RESOLVED] …` or `[TEST] …` and the message.
    pub headline: String,
    /// `critical` (down, offline), `warning` (degraded, stale, a dependency down) or `info`
    /// (recoveries and tests).
    pub severity: &'static str,
    pub is_problem: bool,
    /// The page of the monitor (or the pollers), when `CENTRAL_PUBLIC_URL` is set.
    pub link: Option<String>,
    /// The same for every message about one problem, for services that fold messages into an
    /// incident and resolve it (PagerDuty's `dedup_key`, Opsgenie's `alias`): per monitor, per
    /// poller, per dependency of a monitor (and location); a test's own. At most 255 bytes.
    pub key: String,
    /// The monitor's or poller's name, or `central`.
    pub subject: String,
}

impl Facts {
    pub fn of(message: &Notification, public_url: Option<&str>) -> Facts {
        use shared_proto::notifications::NotificationEvent as E;
        let severity = match message.event {
            E::MonitorDown | E::PollerOffline => "critical",
            E::MonitorDegraded | E::MonitorStale | E::DependencyDown => "warning",
            _ => "info",
        };
        let base = public_url.map(|u| u.trim_end_matches('/').to_string());
        let (key, link, subject) = match (&message.monitor, &message.poller) {
            (Some(monitor), _) => {
                let mut key = format!("central/monitor/{}", monitor.id);
                if let Some(dependency) = &message.dependency {
                    key.push_str("/dependency/");
                    key.push_str(&dependency.name);
                    if let Some(region) = &dependency.region {
                        key.push('/');
                        key.push_str(region);
                    }
                }
                let link = base.map(|b| format!("{b}/monitors/{}", monitor.id));
                (key, link, monitor.name.clone())
            }
            (None, Some(poller)) => (
                format!("central/poller/{}", poller.id),
                base.map(|b| format!("{b}/pollers")),
                poller.name.clone(),
            ),
            (None, None) => (
                format!("central/test/{}", message.id),
                base,
                "central".to_string(),
            ),
        };
        // A dependency's name is the health document's, of any length: a long key is its hash.
        let key = if key.len() > 255 {
            use sha2::Digest;
            format!("central/sha256/{}", hex::encode(sha2::Sha256::digest(&key)))
        } else {
            key
        };
        Facts {
            headline: headline(message),
            severity,
            is_problem: message.event.is_problem(),
            link,
            key,
            subject,
        }
    }
}

/// The headline and a line per location: the text of a chat message or a push.
pub(super) fn text(message: &Notification) -> String {
    let mut text = headline(message);
    if let Some(locations) = &message.locations {
        for location in locations {
            text.push_str(&format!(
                "\n• {}: {}",
                location.region,
                location.status.as_str()
            ));
        }
    }
    text
}

/// `text` cut to at most `max` characters (a service's limit), marked with `…` when cut.
pub(super) fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut clipped: String = text.chars().take(max.saturating_sub(1)).collect();
    clipped.push('…');
    clipped
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared_proto::notifications::{DependencySubject, NotificationEvent, Subject};

    fn message(event: NotificationEvent) -> Notification {
        Notification {
            id: uuid::Uuid::from_u128(1),
            event,
            monitor: Some(Subject {
                id: uuid::Uuid::from_u128(7),
                name: "shop".into(),
            }),
            poller: None,
            status: "down".into(),
            previous_status: None,
            at: "2026-11-23T10:00:00Z".parse().unwrap(),
            message: "shop is down".into(),
            reminder: false,
            locations: None,
            dependency: None,
            dependents: None,
        }
    }

    /// One key per problem: the monitor's for its own messages, whatever the status, and one
    /// per dependency (and location), hashed when a document names it at length.
    #[test]
    fn a_problem_keeps_its_key_from_trigger_to_resolve() {
        let down = Facts::of(&message(NotificationEvent::MonitorDown), None);
        let up = Facts::of(&message(NotificationEvent::MonitorUp), None);
        let monitor = "central/monitor/00000000-0000-0000-0000-000000000007";
        assert_eq!((down.key.as_str(), up.key.as_str()), (monitor, monitor));
        assert_eq!((down.severity, up.severity), ("critical", "info"));
        assert!(down.is_problem && !up.is_problem);
        assert_eq!(down.link, None);

        let mut dependency = message(NotificationEvent::DependencyDown);
        dependency.dependency = Some(DependencySubject {
            name: "postgres".into(),
            region: Some("eu".into()),
            error: None,
        });
        let facts = Facts::of(&dependency, Some("https://central.example/"));
        assert_eq!(facts.key, format!("{monitor}/dependency/postgres/eu"));
        assert_eq!(facts.severity, "warning");
        assert_eq!(
            facts.link.as_deref(),
            Some("https://central.example/monitors/00000000-0000-0000-0000-000000000007")
        );
        dependency.dependency.as_mut().unwrap().name = "d".repeat(300);
        let long = Facts::of(&dependency, None).key;
        assert!(
            long.starts_with("central/sha256/") && long.len() <= 255,
            "{long}"
        );
        assert_eq!(long, Facts::of(&dependency, None).key, "the same each time");
    }

    #[test]
    fn clipped_text_stays_within_a_limit_in_characters() {
        assert_eq!(clip("ääää", 4), "ääää");
        assert_eq!(clip("äääää", 4), "äää…");
    }
}
