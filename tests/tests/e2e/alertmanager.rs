//! The Alertmanager channel against two real Alertmanager instances (an HA pair, sent to
//! each), with a `resolve_timeout` of 2 s: a monitor going down is an active alert with the
//! monitor's labels in both; it stays active through a problem much longer than
//! `resolve_timeout` and than one send's `endsAt` (central sends it again); the recovery
//! ends it.

use std::time::Duration;

use e2e::alertmanager::Alertmanager;
use e2e::{eventually, Central};
use serde_json::{json, Value};

/// The monitor's `MonitorDown` alert, when `manager` holds it active.
async fn active_in(manager: &Alertmanager, monitor: &str) -> Option<Value> {
    manager
        .alert("MonitorDown", "monitor_id", monitor)
        .await
        .ok()
        .flatten()
        .filter(|a| a["status"]["state"] == "active")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_monitor_down_is_an_active_alert_until_it_recovers() -> anyhow::Result<()> {
    let (first, second) = tokio::join!(
        Alertmanager::start(Duration::from_secs(2)),
        Alertmanager::start(Duration::from_secs(2))
    );
    let (first, second) = (first?, second?);
    // Sent again every second, each send ending 4 s later unless sent again.
    let central = Central::start_with(&[
        ("CENTRAL_ALERTMANAGER_RESEND_INTERVAL", "1s"),
        ("CENTRAL_PUBLIC_URL", "https://central.example.test"),
    ])
    .await?;
    let channel = central
        .create_channel(json!({"name": "alertmanager", "kind": "alertmanager",
            "url": first.url, "urls": [second.url]}))
        .await?;
    let poller = central.register_poller("fake-agent").await?;
    let beat = poller.keep_alive(&central.url, Duration::from_secs(1));
    let monitor = central
        .create_monitor(
            json!({"name": "shop", "kind": "http", "target": "http://127.0.0.1:9/",
            "interval_ms": 3_600_000, "poller_mode": "pinned", "poller_id": poller.id,
            "notification_channel_ids": [channel]}),
        )
        .await?;
    let http = reqwest::Client::new();
    let upload = |status: &'static str| {
        let (http, url, token, monitor) = (
            http.clone(),
            central.url.clone(),
            poller.access.clone(),
            monitor.clone(),
        );
        async move {
            let answer: Value = http
                .post(format!("{url}/api/poller/results"))
                .bearer_auth(&token)
                .json(&json!({"batch_id": uuid::Uuid::new_v4(), "results": [{
                    "id": uuid::Uuid::now_v7(), "monitor_id": monitor,
                    "ts": chrono::Utc::now().to_rfc3339(), "status": status,
                    "latency_ms": 3, "msg": if status == "down" { "expected 2xx, got 503" } else { "" },
                    "meta": {}}]}))
                .send()
                .await?
                .json()
                .await?;
            anyhow::ensure!(answer["accepted"] == 1, "{answer}");
            anyhow::Ok(())
        }
    };
    upload("up").await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    upload("down").await?;

    let alert = eventually(
        Duration::from_secs(30),
        "the alert active in the first",
        || active_in(&first, &monitor),
    )
    .await?;
    eventually(
        Duration::from_secs(10),
        "the alert active in the second",
        || active_in(&second, &monitor),
    )
    .await?;
    assert_eq!(alert["labels"]["monitor"], "shop", "{alert}");
    assert_eq!(alert["labels"]["severity"], "critical", "{alert}");
    assert_eq!(alert["labels"]["source"], "central", "{alert}");
    assert_eq!(
        alert["annotations"]["summary"], "shop is down: expected 2xx, got 503",
        "{alert}"
    );
    assert_eq!(
        alert["generatorURL"],
        format!("https://central.example.test/monitors/{monitor}"),
        "{alert}"
    );
    // Only the problem's own alert fires: the monitor's other alerts were sent ended.
    let others = first.alerts().await?;
    assert_eq!(others.len(), 1, "{others:?}");

    // Five times resolve_timeout, and twice one send's endsAt: still active, since central
    // sends it again while the monitor is down, with the start it had.
    tokio::time::sleep(Duration::from_secs(10)).await;
    for manager in [&first, &second] {
        let still = active_in(manager, &monitor).await;
        let still = still.unwrap_or_else(|| panic!("the alert ended while the monitor was down"));
        assert_eq!(still["startsAt"], alert["startsAt"]);
    }

    upload("up").await?;
    for manager in [&first, &second] {
        eventually(Duration::from_secs(20), "the alert ended", || async {
            manager
                .alert("MonitorDown", "monitor_id", &monitor)
                .await
                .ok()?
                .is_none()
                .then_some(())
        })
        .await?;
    }
    beat.abort();
    Ok(())
}
