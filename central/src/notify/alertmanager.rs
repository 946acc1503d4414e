//! Alertmanager, spoken to as Prometheus speaks to it: `POST {url}/api/v2/alerts` with a list
//! of alerts (`labels`, `annotations`, `startsAt`, `endsAt`, `generatorURL`), sent to every
//! instance of the channel. A firing alert's `endsAt` lies `4 × resend interval` ahead, as
//! Prometheus sets it, and the dispatcher sends firing alerts again every resend interval while
//! they last (`dispatch`): an alert stays active exactly as long as central says the problem
//! lasts, whatever Alertmanager's `resolve_timeout`, and ends by itself soon after central
//! stops saying so. Also the version 4 payload Alertmanager sends to *its* webhooks, for
//! webhook channels whose receivers read that (`format: alertmanager_v4`).
//!
//! Owns: the bodies and the API path. Must not: decide who is told what.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{json, Value};
use shared_proto::notifications::{Notification, NotificationEvent};

/// The path of Alertmanager's alerts API, added to a channel's base URL.
const ALERTS_PATH: &str = "/api/v2/alerts";

/// The alerts API of an instance given by its base URL (`http://am:9093`, or behind a path
/// prefix) or already by the full path.
pub fn alerts_url(url: &str) -> String {
    let base = url.trim_end_matches('/');
    if base.ends_with(ALERTS_PATH) {
        base.to_string()
    } else {
        format!("{base}{ALERTS_PATH}")
    }
}

/// The alert names of a monitor's problems, by status. An alert's identity is its label set,
/// so each problem status is an alert of its own: a message fires its own and resolves the
/// others, and a move from `down` to `degraded` ends the one and starts the other.
const MONITOR_ALERTS: [(&str, &str, &str); 3] = [
    ("down", "MonitorDown", "critical"),
    ("degraded", "MonitorDegraded", "warning"),
    ("stale", "MonitorStale", "warning"),
];

/// The alerts one message says, for `POST /api/v2/alerts`: at `now`, firing until
/// `now + horizon` (or resolved at `now`).
pub fn alerts(
    message: &Notification,
    now: DateTime<Utc>,
    horizon: chrono::Duration,
    public_url: Option<&str>,
) -> Value {
    // Dependency notices are never queued for Alertmanager (`service::dependencies::notices`):
    // drawn as a monitor's, they would resolve the monitor's own alerts.
    if message.dependency.is_some() {
        return Value::Array(Vec::new());
    }
    let time = |t: DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::Millis, true);
    let firing_until = time(now + horizon);
    let resolved_at = time(now);
    let starts_at = time(message.at.min(now));
    let mut annotations = json!({
        "summary": message.message,
        "event": message.event.as_str(),
        "status": message.status,
    });
    if let Some(previous) = &message.previous_status {
        annotations["previous_status"] = json!(previous);
    }
    if let Some(locations) = &message.locations {
        let text: Vec<String> = locations
            .iter()
            .map(|l| format!("{}: {}", l.region, l.status.as_str()))
            .collect();
        annotations["locations"] = json!(text.join(", "));
    }
    let link =
        |path: String| public_url.map(|base| format!("{}{path}", base.trim_end_matches('/')));
    let alert = |labels: Value, firing: bool, link: &Option<String>| {
        let mut alert = json!({
            "labels": labels,
            "annotations": annotations,
            "startsAt": starts_at,
            "endsAt": if firing { &firing_until } else { &resolved_at },
        });
        if let Some(link) = link {
            alert["generatorURL"] = json!(link);
            alert["annotations"]["url"] = json!(link);
        }
        alert
    };
    let mut alerts = Vec::new();
    if let Some(monitor) = &message.monitor {
        let link = link(format!("/monitors/{}", monitor.id));
        // The message's own alert first, then the others of the monitor (resolved).
        let mut named: Vec<_> = MONITOR_ALERTS.iter().collect();
        named.sort_by_key(|(status, _, _)| *status != message.status);
        for (status, name, severity) in named {
            let labels = json!({
                "alertname": name,
                "monitor": monitor.name,
                "monitor_id": monitor.id.to_string(),
                "severity": severity,
                "source": "central",
            });
            let firing = message.event.is_problem() && *status == message.status;
            alerts.push(alert(labels, firing, &link));
        }
    } else if let Some(poller) = &message.poller {
        let labels = json!({
            "alertname": "PollerOffline",
            "poller": poller.name,
            "poller_id": poller.id.to_string(),
            "severity": "critical",
            "source": "central",
        });
        let link = link("/pollers".to_string());
        alerts.push(alert(labels, message.event.is_problem(), &link));
    } else {
        // A test send (a short-lived alert that shows the path works, then ends by itself), or
        // a notice that stands alone the same way.
        let name = match message.event {
            NotificationEvent::SubscriberTurnedOff => "StatusPageSubscriberTurnedOff",
            _ => "CentralTest",
        };
        let labels = json!({"alertname": name, "severity": "none", "source": "central",
                            "test_id": message.id.to_string()});
        alerts.push(alert(labels, message.event.stands_alone(), &None));
    }
    Value::Array(alerts)
}

/// The payload Alertmanager sends to webhook receivers (version 4): one alert per message,
/// `resolved` for `up` and `online`.
pub fn v4_body(message: &Notification) -> String {
    let resolved = !message.event.is_problem() && !message.event.stands_alone();
    let status = if resolved { "resolved" } else { "firing" };
    let (kind, subject) = match (&message.monitor, &message.poller) {
        (Some(monitor), _) => ("monitor", monitor),
        (None, Some(poller)) => ("poller", poller),
        (None, None) => (
            "test",
            &shared_proto::notifications::Subject {
                id: message.id,
                name: "test".into(),
            },
        ),
    };
    let alertname = match kind {
        _ if message.dependency.is_some() => "DependencyUnhealthy",
        "monitor" => "MonitorDown",
        "poller" => "PollerOffline",
        _ => "CentralTest",
    };
    // A dependency's alert is its own, beside its monitor's: named and fingerprinted by both.
    let (kind, name, key) = match &message.dependency {
        Some(dependency) => (
            "dependency",
            format!("{}: {}", subject.name, dependency.name),
            format!(
                "{}/{}/{}",
                subject.id,
                dependency.region.as_deref().unwrap_or(""),
                dependency.name
            ),
        ),
        None => (kind, subject.name.clone(), subject.id.to_string()),
    };
    let labels = json!({
        "alertname": alertname,
        "kind": kind,
        "id": subject.id.to_string(),
        "name": name,
        "severity": if message.event == NotificationEvent::MonitorDegraded { "warning" } else { "critical" },
    });
    let at = message.at.to_rfc3339();
    let alert = json!({
        "status": status,
        "labels": labels,
        "annotations": {"summary": message.message, "event": message.event.as_str(), "status": message.status},
        "startsAt": at,
        "endsAt": if resolved { at.clone() } else { "0001-01-01T00:00:00Z".to_string() },
        "generatorURL": "",
        "fingerprint": format!("{:016x}", fingerprint(&key)),
    });
    json!({
        "version": "4",
        "groupKey": format!("{{}}:{{kind=\"{kind}\", id=\"{}\"}}", subject.id),
        "truncatedAlerts": 0,
        "status": status,
        "receiver": "central",
        "groupLabels": {"kind": kind, "id": subject.id.to_string()},
        "commonLabels": labels,
        "commonAnnotations": {"summary": message.message},
        "externalURL": "",
        "alerts": [alert],
    })
    .to_string()
}

/// FNV-1a of the subject id: stable across firing and resolved, as Alertmanager's is.
fn fingerprint(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared_proto::notifications::Subject;
    use uuid::Uuid;

    fn message(event: NotificationEvent, status: &str) -> Notification {
        Notification {
            id: Uuid::nil(),
            event,
            monitor: Some(Subject {
                id: Uuid::from_u128(7),
                name: "shop".into(),
            }),
            poller: None,
            status: status.into(),
            previous_status: Some("up".into()),
            at: "2026-11-23T10:00:00Z".parse().unwrap(),
            message: "expected 2xx, got 503".into(),
            reminder: false,
            locations: None,
            dependency: None,
            dependents: None,
        }
    }

    #[test]
    fn base_urls_get_the_alerts_path_once() {
        assert_eq!(alerts_url("http://am:9093"), "http://am:9093/api/v2/alerts");
        assert_eq!(
            alerts_url("http://am:9093/"),
            "http://am:9093/api/v2/alerts"
        );
        assert_eq!(alerts_url("http://h/am/"), "http://h/am/api/v2/alerts");
        assert_eq!(
            alerts_url("http://am:9093/api/v2/alerts"),
            "http://am:9093/api/v2/alerts"
        );
    }

    #[test]
    fn a_problem_fires_its_own_alert_and_resolves_the_monitors_others() {
        let now: DateTime<Utc> = "2026-11-23T10:00:05Z".parse().unwrap();
        let horizon = chrono::Duration::minutes(4);
        let down = alerts(
            &message(NotificationEvent::MonitorDown, "down"),
            now,
            horizon,
            Some("https://central.example.com/"),
        );
        let list = down.as_array().unwrap();
        assert_eq!(list.len(), 3);
        assert_eq!(list[0]["labels"]["alertname"], "MonitorDown");
        assert_eq!(list[0]["labels"]["severity"], "critical");
        assert_eq!(
            list[0]["labels"]["monitor_id"],
            Uuid::from_u128(7).to_string()
        );
        assert_eq!(list[0]["startsAt"], "2026-11-23T10:00:00.000Z");
        assert_eq!(list[0]["endsAt"], "2026-11-23T10:04:05.000Z");
        assert_eq!(
            list[0]["generatorURL"],
            format!(
                "https://central.example.com/monitors/{}",
                Uuid::from_u128(7)
            )
        );
        for other in &list[1..] {
            assert_eq!(other["endsAt"], "2026-11-23T10:00:05.000Z", "{other}");
        }

        let up = alerts(
            &message(NotificationEvent::MonitorUp, "up"),
            now,
            horizon,
            None,
        );
        assert!(up
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["endsAt"] == "2026-11-23T10:00:05.000Z" && a.get("generatorURL").is_none()));
    }

    #[test]
    fn a_dependency_alert_is_its_own_and_never_drawn_as_its_monitors() {
        let dependency = |event| Notification {
            dependency: Some(shared_proto::notifications::DependencySubject {
                name: "cache".into(),
                region: None,
                error: Some("timeout".into()),
            }),
            ..message(event, "unhealthy")
        };
        let now: DateTime<Utc> = "2026-11-23T10:00:05Z".parse().unwrap();
        let drawn = alerts(
            &dependency(NotificationEvent::DependencyDown),
            now,
            chrono::Duration::minutes(4),
            None,
        );
        assert_eq!(
            drawn,
            serde_json::json!([]),
            "would resolve the monitor's alerts"
        );
        let down: serde_json::Value =
            serde_json::from_str(&v4_body(&dependency(NotificationEvent::DependencyDown))).unwrap();
        let up: serde_json::Value =
            serde_json::from_str(&v4_body(&dependency(NotificationEvent::DependencyUp))).unwrap();
        let monitor: serde_json::Value =
            serde_json::from_str(&v4_body(&message(NotificationEvent::MonitorDown, "down")))
                .unwrap();
        assert_eq!(
            down["alerts"][0]["labels"]["alertname"],
            "DependencyUnhealthy"
        );
        assert_eq!(down["alerts"][0]["labels"]["name"], "shop: cache");
        assert_eq!(
            (&down["status"], &up["status"]),
            (&"firing".into(), &"resolved".into())
        );
        assert_eq!(
            down["alerts"][0]["fingerprint"],
            up["alerts"][0]["fingerprint"]
        );
        assert_ne!(
            down["alerts"][0]["fingerprint"],
            monitor["alerts"][0]["fingerprint"]
        );
    }
}
