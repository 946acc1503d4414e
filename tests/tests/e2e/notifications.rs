//! Notifications with real binaries: three agents in three regions check one multi-location
//! monitor (quorum 2) that notifies a signed webhook (a default channel) and an Alertmanager
//! receiver. One failing location is `degraded`, two are `down`, recovery is `up`: each told
//! once per channel. The `up` is made while both receivers are down and central is killed and
//! restarted before they come back: it still arrives, once. A lost agent is `poller.offline`
//! and the monitor only it ran `monitor.stale`; back, they are `poller.online` and `monitor.up`.

use std::collections::HashSet;
use std::time::Duration;

use e2e::receivers::{HttpReceiver, RegionalTarget, SmtpSink};
use e2e::{eventually, Central};
use hmac::{Hmac, Mac};
use reqwest::Method;
use serde_json::{json, Value};
use sha2::Sha256;

const SECRET: &str = "a-webhook-secret-of-some-length";

/// The events a webhook receiver accepted, in order.
fn webhook_events(receiver: &HttpReceiver) -> Vec<String> {
    receiver
        .received()
        .iter()
        .map(|r| r.json["event"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The events an Alertmanager receiver accepted, in order.
fn alertmanager_events(receiver: &HttpReceiver) -> Vec<String> {
    receiver
        .received()
        .iter()
        .map(|r| {
            r.json[0]["annotations"]["event"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

async fn wait_events(
    what: &str,
    receiver: &HttpReceiver,
    events: fn(&HttpReceiver) -> Vec<String>,
    wanted: &[&str],
) -> anyhow::Result<()> {
    eventually(Duration::from_secs(40), what, || async {
        (events(receiver) == wanted).then_some(())
    })
    .await
    .map_err(|e| anyhow::anyhow!("{e}; received {:?}", events(receiver)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_alert_reaches_every_channel_once_through_a_receiver_outage_and_a_restart(
) -> anyhow::Result<()> {
    // Re-sends of firing alerts are tested against a real Alertmanager (alertmanager.rs);
    // here every reception is a notice.
    let mut central = Central::start_with(&[
        ("CENTRAL_OFFLINE_AFTER", "4s"),
        ("CENTRAL_ALERTMANAGER_RESEND_INTERVAL", "1h"),
    ])
    .await?;
    let target = RegionalTarget::start().await?;
    let webhook = HttpReceiver::start().await?;
    let manager = HttpReceiver::start().await?;
    let hook = format!("{}/hook", webhook.url);
    central
        .create_channel(
            json!({"name": "on-call webhook", "kind": "webhook", "url": hook,
            "secret": SECRET, "headers": {"X-Team": "sre"}, "default": true}),
        )
        .await?;
    let manager_url = format!("{}/api/v2/alerts", manager.url);
    let alertmanager = central
        .create_channel(json!({"name": "alertmanager", "kind": "alertmanager", "url": manager_url}))
        .await?;
    let _eu = central.start_agent("eu-1", "eu").await?;
    let _us = central.start_agent("us-1", "us").await?;
    let mut ap = central.start_agent("ap-1", "ap").await?;
    let monitor = central
        .create_monitor(json!({"name": "shop", "kind": "http", "target": target.url,
            "interval_ms": 5000, "poller_mode": "multi", "poller_regions": ["eu", "us", "ap"],
            "notification_channel_ids": [alertmanager]}))
        .await?;
    // A single-location monitor on the Asian agent only: stale when that agent is lost.
    let ap_only = central
        .create_monitor(
            json!({"name": "ap shop", "kind": "http", "target": target.url,
            "interval_ms": 5000, "poller_mode": "grouped", "poller_region": "ap"}),
        )
        .await?;
    central
        .wait_for_status(&monitor, "up", Duration::from_secs(40))
        .await?;
    central
        .wait_for_status(&ap_only, "up", Duration::from_secs(40))
        .await?;

    target.fail_for(&["eu-1"]);
    let webhook_degraded = ["monitor.degraded"];
    wait_events(
        "a degraded alert",
        &webhook,
        webhook_events,
        &webhook_degraded,
    )
    .await?;
    wait_events(
        "a degraded alert",
        &manager,
        alertmanager_events,
        &webhook_degraded,
    )
    .await?;

    target.fail_for(&["eu-1", "us-1"]);
    let down = ["monitor.degraded", "monitor.down"];
    wait_events("a down alert", &webhook, webhook_events, &down).await?;
    wait_events("a down alert", &manager, alertmanager_events, &down).await?;

    // Both receivers go down; the target recovers; central is killed and restarted before
    // the receivers come back.
    webhook.refuse(true);
    manager.refuse(true);
    target.fail_for(&[]);
    central
        .wait_for_status(&monitor, "up", Duration::from_secs(40))
        .await?;
    // Refused by both receivers and recorded as refused, before the kill: a refusal whose
    // record the kill cut off is tried again after the claim expires and counts once.
    eventually(
        Duration::from_secs(20),
        "a refused delivery of `up`, recorded",
        || async {
            let refused = webhook.refused() > 0 && manager.refused() > 0;
            let (_, log) = central
                .admin(
                    Method::GET,
                    &format!("/api/v1/notifications?monitor_id={monitor}"),
                    None,
                )
                .await
                .ok()?;
            let recorded = log["items"]
                .as_array()?
                .iter()
                .filter(|r| r["event"] == "monitor.up" && !r["last_error"].is_null())
                .count();
            (refused && recorded == 2).then_some(())
        },
    )
    .await?;
    central.kill().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    central.restart().await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    webhook.refuse(false);
    manager.refuse(false);
    let resolved = ["monitor.degraded", "monitor.down", "monitor.up"];
    wait_events(
        "the up, after the outage",
        &webhook,
        webhook_events,
        &resolved,
    )
    .await?;
    wait_events(
        "the up, after the outage",
        &manager,
        alertmanager_events,
        &resolved,
    )
    .await?;

    // An agent lost: its location is unknown (the multi-location monitor stays up, nothing to
    // tell about it); the default channel hears that the poller is offline and that the monitor
    // only it ran is stale. It comes back: online, and that monitor is up again.
    ap.kill().await;
    let tail = |from: usize| {
        let mut events: Vec<String> = webhook_events(&webhook).into_iter().skip(from).collect();
        events.sort();
        events
    };
    eventually(
        Duration::from_secs(40),
        "poller offline and monitor stale",
        || async { (tail(3) == ["monitor.stale", "poller.offline"]).then_some(()) },
    )
    .await
    .map_err(|e| anyhow::anyhow!("{e}; received {:?}", webhook_events(&webhook)))?;
    assert_eq!(central.status(&monitor).await?["status"], "up");
    ap.restart().await?;
    eventually(
        Duration::from_secs(40),
        "poller online and monitor up",
        || async { (tail(5) == ["monitor.up", "poller.online"]).then_some(()) },
    )
    .await
    .map_err(|e| anyhow::anyhow!("{e}; received {:?}", webhook_events(&webhook)))?;
    // Time for any duplicate or stray notification to show up.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        webhook_events(&webhook).len(),
        7,
        "{:?}",
        webhook_events(&webhook)
    );
    assert_eq!(&webhook_events(&webhook)[..3], resolved);
    assert_eq!(alertmanager_events(&manager), resolved);

    // Every delivery carries its id, no id came twice, and the webhook's are signed.
    for receiver in [&webhook, &manager] {
        let ids: Vec<String> = receiver
            .received()
            .iter()
            .map(|r| r.notification_id.clone().expect("X-Notification-Id"))
            .collect();
        let distinct: HashSet<&String> = ids.iter().collect();
        assert_eq!(
            distinct.len(),
            ids.len(),
            "a notification came twice: {ids:?}"
        );
    }
    for received in webhook.received() {
        assert_eq!(
            received.json["id"].as_str(),
            received.notification_id.as_deref()
        );
        let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes())?;
        mac.update(received.body.as_bytes());
        let expected = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
        assert_eq!(received.signature.as_deref(), Some(expected.as_str()));
        assert_eq!(received.path, "/hook");
    }
    // Alertmanager's API: the monitor's alerts, all ended by the recovery.
    let last = manager.received().pop().unwrap();
    assert_eq!(last.path, "/api/v2/alerts");
    let alerts = last.json.as_array().unwrap();
    assert_eq!(alerts.len(), 3, "{}", last.json);
    for alert in alerts {
        assert_eq!(alert["labels"]["monitor_id"], monitor.as_str());
        let ends: chrono::DateTime<chrono::Utc> = alert["endsAt"].as_str().unwrap().parse()?;
        assert!(ends <= chrono::Utc::now(), "{alert}");
    }
    let down_alert = &webhook.received()[1].json;
    assert_eq!(down_alert["monitor"]["id"], monitor.as_str());
    assert_eq!(down_alert["previous_status"], "degraded");
    assert_eq!(down_alert["locations"].as_array().unwrap().len(), 3);

    // The delivery log tells the same story, with the retries of the `up`.
    let (_, log) = central
        .admin(
            Method::GET,
            &format!("/api/v1/notifications?monitor_id={monitor}"),
            None,
        )
        .await?;
    let rows = log["items"].as_array().unwrap();
    assert_eq!(rows.len(), 6, "{log}");
    assert!(rows.iter().all(|r| r["status"] == "delivered"), "{log}");
    let ups: Vec<&Value> = rows.iter().filter(|r| r["event"] == "monitor.up").collect();
    assert!(
        ups.iter().all(|r| r["attempts"].as_u64().unwrap() >= 2),
        "the up was refused at least once: {log}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channels_are_validated_tested_and_reach_mail_and_chat() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let sink = SmtpSink::start().await?;
    let chat = HttpReceiver::start().await?;
    let mail = central
        .create_channel(
            json!({"name": "mail", "kind": "email", "url": sink.url, "from": "central@example.com",
               "to": ["ops@example.com", "sre@example.com"]}),
        )
        .await?;
    let chat_url = format!("{}/services/T0/B0/x", chat.url);
    let slack = central
        .create_channel(json!({"name": "chat", "kind": "slack", "url": chat_url}))
        .await?;
    for channel in [&mail, &slack] {
        let (code, answer) = central.test_channel(channel).await?;
        assert_eq!(
            (code, &answer["delivered"]),
            (200, &json!(true)),
            "{answer}"
        );
    }
    let mails = sink.mails();
    assert_eq!(mails.len(), 1);
    assert!(
        mails[0].contains("To: ops@example.com, sre@example.com"),
        "{}",
        mails[0]
    );
    assert!(
        mails[0].contains("a test of the notification channel mail"),
        "{}",
        mails[0]
    );
    let text = chat.received()[0].json["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(text.starts_with("[TEST]"), "{text}");

    // A receiver that refuses is reported, not hidden.
    chat.refuse(true);
    let (_, answer) = central.test_channel(&slack).await?;
    assert_eq!(answer["delivered"], false);
    assert!(
        answer["error"].as_str().unwrap().contains("503"),
        "{answer}"
    );

    // Outside the allowed networks (the harness allows loopback only), nothing is sent.
    let elsewhere = central
        .create_channel(
            json!({"name": "elsewhere", "kind": "webhook", "url": "http://192.0.2.1:9/x"}),
        )
        .await?;
    let (_, answer) = central.test_channel(&elsewhere).await?;
    assert_eq!(answer["delivered"], false);
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("outside CENTRAL_NOTIFY_ALLOWED_NETWORKS"),
        "{answer}"
    );

    // Bad channels and references are refused naming the field.
    for (spec, field) in [
        (
            json!({"name": "x", "kind": "webhook", "url": "ftp://example.com"}),
            "url",
        ),
        (
            json!({"name": "x", "kind": "email", "url": sink.url, "to": ["ops@example.com"]}),
            "from",
        ),
        (
            json!({"name": "x", "kind": "slack", "url": chat.url, "secret": "0123456789abcdef"}),
            "secret",
        ),
    ] {
        let (code, body) = central
            .admin(Method::POST, "/api/v1/notification-channels", Some(spec))
            .await?;
        // Each kind's schema in the OpenAPI document states its fields and URL form.
        assert_eq!(code, 400, "{body}");
        assert!(body["message"].as_str().unwrap().contains(field), "{body}");
    }
    // A login over plain SMTP has the schema's form; the rule between its parts is 422.
    let (code, body) = central
        .admin(
            Method::POST,
            "/api/v1/notification-channels",
            Some(
                json!({"name": "x", "kind": "email", "url": "smtp://u:p@127.0.0.1:2525",
                        "from": "a@example.com", "to": ["b@example.com"]}),
            ),
        )
        .await?;
    assert_eq!(
        (code, body["error"].as_str()),
        (422, Some("invalid_combination")),
        "{body}"
    );
    let (code, body) = central
        .admin(
            Method::POST,
            "/api/v1/monitors",
            Some(json!({"name": "m", "kind": "http", "target": chat.url,
                "notification_channel_ids": [uuid::Uuid::new_v4()]})),
        )
        .await?;
    assert_eq!(code, 422, "{body}");
    assert_eq!(body["error"], "unknown_reference", "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("notification_channel_ids"),
        "{body}"
    );

    // The secret is never shown back; a channel can be changed and deleted.
    let (_, view) = central
        .admin(
            Method::GET,
            &format!("/api/v1/notification-channels/{slack}"),
            None,
        )
        .await?;
    assert!(view.get("secret").is_none());
    let (code, changed) = central
        .admin(
            Method::PATCH,
            &format!("/api/v1/notification-channels/{slack}"),
            Some(json!({"default": true})),
        )
        .await?;
    assert_eq!((code, &changed["default"]), (200, &json!(true)));
    let (code, _) = central
        .admin(
            Method::DELETE,
            &format!("/api/v1/notification-channels/{slack}"),
            None,
        )
        .await?;
    assert_eq!(code, 204);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_are_write_only_and_an_edit_keeps_them() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let receiver = HttpReceiver::start().await?;
    let channel = central
        .create_channel(
            json!({"name": "hook", "kind": "webhook", "url": receiver.url,
                               "headers": {"Authorization": "Bearer s3cret-value"}}),
        )
        .await?;
    let mail = central
        .create_channel(json!({"name": "mail", "kind": "email",
            "url": "smtps://ops:p4ssword@mail.example.com:465", "from": "c@example.com",
            "to": ["ops@example.com"]}))
        .await?;
    for id in [&channel, &mail] {
        let (_, view) = central
            .admin(
                Method::GET,
                &format!("/api/v1/notification-channels/{id}"),
                None,
            )
            .await?;
        let text = view.to_string();
        assert!(
            !text.contains("s3cret-value") && !text.contains("p4ssword"),
            "{text}"
        );
    }
    let (_, listed) = central
        .admin(Method::GET, "/api/v1/notification-channels", None)
        .await?;
    assert!(!listed.to_string().contains("s3cret"), "{listed}");
    let (_, view) = central
        .admin(
            Method::GET,
            &format!("/api/v1/notification-channels/{mail}"),
            None,
        )
        .await?;
    assert_eq!(view["url"], "smtps://ops:REDACTED@mail.example.com:465");

    // Sending back what the view showed (as the page's form does) keeps the secret.
    let (_, view) = central
        .admin(
            Method::GET,
            &format!("/api/v1/notification-channels/{channel}"),
            None,
        )
        .await?;
    assert_eq!(view["headers"]["Authorization"], "REDACTED");
    let (status, _) = central
        .admin(
            Method::PATCH,
            &format!("/api/v1/notification-channels/{channel}"),
            Some(json!({"name": "renamed", "url": view["url"], "headers": view["headers"]})),
        )
        .await?;
    assert_eq!(status, 200);
    let (_, answer) = central.test_channel(&channel).await?;
    assert_eq!(answer["delivered"], true, "{answer}");
    let got = receiver.received();
    assert_eq!(
        got.last().and_then(|r| r.authorization.as_deref()),
        Some("Bearer s3cret-value")
    );
    // The page's edit form shows no secret either.
    let cookie = central.session_cookie().await?;
    let page = reqwest::Client::new()
        .get(format!(
            "{}/notifications/channels/{channel}/edit",
            central.url
        ))
        .header("cookie", cookie)
        .send()
        .await?
        .text()
        .await?;
    assert!(
        page.contains("REDACTED") && !page.contains("s3cret"),
        "{page}"
    );
    Ok(())
}
