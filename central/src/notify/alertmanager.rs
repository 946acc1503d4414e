//! The Alertmanager webhook payload (version 4), so that receivers written for Alertmanager
//! read central's notifications as they are. One alert per message; `resolved` for `up` and
//! `online`.

use shared_proto::notifications::Notification;

pub fn body(message: &Notification) -> String {
    let resolved = matches!(message.event.as_str(), "monitor.up" | "poller.online");
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
        "monitor" => "MonitorDown",
        "poller" => "PollerOffline",
        _ => "CentralTest",
    };
    let labels = serde_json::json!({
        "alertname": alertname,
        "kind": kind,
        "id": subject.id.to_string(),
        "name": subject.name,
        "severity": if message.event.as_str() == "monitor.degraded" { "warning" } else { "critical" },
    });
    let at = message.at.to_rfc3339();
    let alert = serde_json::json!({
        "status": status,
        "labels": labels,
        "annotations": {"summary": message.message, "event": message.event.as_str(), "status": message.status},
        "startsAt": at,
        "endsAt": if resolved { at.clone() } else { "0001-01-01T00:00:00Z".to_string() },
        "generatorURL": "",
        "fingerprint": format!("{:016x}", fingerprint(&subject.id.to_string())),
    });
    serde_json::json!({
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
