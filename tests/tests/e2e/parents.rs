//! Dependencies between monitors with real binaries: a switch and five monitors behind it fail
//! together (as a dead switch makes them): one notice, the switch's, naming the five; none of
//! theirs. The switch recovers with four of them; the fifth, still down, is told then. Cycles,
//! self-dependence and unknown parents are refused; deleting a parent frees its children.

use std::time::Duration;

use e2e::receivers::HttpReceiver;
use e2e::{eventually, Central, Target};
use reqwest::Method;
use serde_json::{json, Value};

/// What the receiver heard: (event, monitor name, the message as received).
fn told(receiver: &HttpReceiver) -> Vec<(String, String, Value)> {
    receiver
        .received()
        .iter()
        .map(|r| {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
            (
                text(&r.json["event"]),
                text(&r.json["monitor"]["name"]),
                r.json.clone(),
            )
        })
        .collect()
}

fn about(receiver: &HttpReceiver, name: &str) -> Vec<String> {
    told(receiver)
        .into_iter()
        .filter(|(_, monitor, _)| monitor == name)
        .map(|(event, _, _)| event)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_switch_is_one_notice_naming_what_is_behind_it() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let webhook = HttpReceiver::start().await?;
    central
        .create_channel(
            json!({"name": "on-call", "kind": "webhook", "url": webhook.url, "default": true}),
        )
        .await?;
    let _agent = central.start_agent("eu-1", "eu").await?;
    let switch_target = Target::start().await?;
    let switch = central
        .create_monitor(
            json!({"name": "switch", "kind": "http", "target": switch_target.url,
            "interval_ms": 5000}),
        )
        .await?;
    let mut targets = Vec::new();
    let mut children = Vec::new();
    for i in 1..=5 {
        let target = Target::start().await?;
        let id = central
            .create_monitor(json!({"name": format!("host {i}"), "kind": "http",
                "target": target.url, "interval_ms": 5000, "parent_ids": [switch]}))
            .await?;
        targets.push(target);
        children.push(id);
    }
    for id in std::iter::once(&switch).chain(&children) {
        central
            .wait_for_status(id, "up", Duration::from_secs(40))
            .await?;
    }
    let (_, child) = central
        .admin(
            Method::GET,
            &format!("/api/v1/monitors/{}", children[0]),
            None,
        )
        .await?;
    assert_eq!(child["parent_ids"], json!([switch]), "{child}");

    // The switch dies, and everything behind it with it.
    switch_target.answer_with(500);
    for target in &targets {
        target.answer_with(500);
    }
    let notice = eventually(Duration::from_secs(40), "the switch told down", || async {
        told(&webhook)
            .into_iter()
            .find(|(event, name, _)| event == "monitor.down" && name == "switch")
            .map(|(_, _, message)| message)
    })
    .await?;
    let named: Vec<&str> = notice["dependents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d["name"].as_str())
        .collect();
    assert_eq!(
        named,
        ["host 1", "host 2", "host 3", "host 4", "host 5"],
        "{notice}"
    );
    let text = notice["message"].as_str().unwrap_or_default();
    assert!(text.contains("5 monitors depend on it"), "{text}");
    for id in &children {
        let shown = central
            .wait_for_status(id, "down", Duration::from_secs(20))
            .await?;
        assert_eq!(shown["reason"], "because switch is down", "{shown}");
    }
    // Long enough for each child to have been looked at several times.
    tokio::time::sleep(Duration::from_secs(12)).await;
    let heard: Vec<String> = told(&webhook).into_iter().map(|(_, n, _)| n).collect();
    assert_eq!(heard, ["switch"], "only the switch is told: {heard:?}");

    // The switch comes back with four of them; the fifth is still down, and is told.
    switch_target.answer_with(200);
    for target in &targets[..4] {
        target.answer_with(200);
    }
    eventually(Duration::from_secs(40), "host 5 told down", || async {
        (about(&webhook, "host 5") == ["monitor.down"]).then_some(())
    })
    .await?;
    assert_eq!(about(&webhook, "switch"), ["monitor.down", "monitor.up"]);
    let shown = central.status(&children[4]).await?;
    assert_eq!(shown["status"], "down");
    assert!(shown["reason"].is_null(), "no parent to blame now: {shown}");
    tokio::time::sleep(Duration::from_secs(6)).await;
    for name in ["host 1", "host 2", "host 3", "host 4"] {
        assert!(
            about(&webhook, name).is_empty(),
            "{name} was never told: its outage was the switch's"
        );
    }
    assert_eq!(about(&webhook, "host 5"), ["monitor.down"], "told once");

    // A cycle, the monitor itself, an unknown monitor: refused naming the field.
    let patch = |id: &str, parents: Value| {
        let path = format!("/api/v1/monitors/{id}");
        let central = &central;
        async move {
            central
                .admin(Method::PATCH, &path, Some(json!({"parent_ids": parents})))
                .await
        }
    };
    for (parents, code) in [
        (json!([children[0]]), "invalid_combination"),
        (json!([switch]), "invalid_combination"),
        (json!([uuid::Uuid::new_v4()]), "unknown_reference"),
    ] {
        let (status, refused) = patch(&switch, parents.clone()).await?;
        assert_eq!(
            (status, refused["error"].as_str()),
            (422, Some(code)),
            "{parents}: {refused}"
        );
        assert!(
            refused["message"]
                .as_str()
                .unwrap_or_default()
                .contains("parent_ids"),
            "{refused}"
        );
    }

    // A deleted parent leaves its children's lists.
    let (status, _) = central
        .admin(Method::DELETE, &format!("/api/v1/monitors/{switch}"), None)
        .await?;
    assert_eq!(status, 204);
    let (_, child) = central
        .admin(
            Method::GET,
            &format!("/api/v1/monitors/{}", children[4]),
            None,
        )
        .await?;
    assert_eq!(child["parent_ids"], json!([]), "{child}");
    Ok(())
}
