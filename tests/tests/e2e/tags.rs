//! Tags with real binaries: the list filters by tag; a channel naming a tag hears of the
//! monitors carrying it and of no other; a maintenance window over a tag covers exactly its
//! monitors; pause and resume by tag change each of them once; an edit of a monitor's tags
//! moves it between tags.

use std::time::Duration;

use chrono::Utc;
use e2e::receivers::HttpReceiver;
use e2e::{eventually, Central, Target};
use reqwest::Method;
use serde_json::{json, Value};

async fn tagged(central: &Central, tag: &str) -> anyhow::Result<Vec<String>> {
    // A tag's characters need no escaping in a query.
    let (status, body) = central
        .admin(Method::GET, &format!("/api/v1/monitors?tag={tag}"), None)
        .await?;
    anyhow::ensure!(status == 200, "list by tag: {status} {body}");
    let mut names: Vec<String> = body["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| m["name"].as_str().unwrap_or_default().to_string())
        .collect();
    names.sort();
    Ok(names)
}

/// Who the receiver heard about: (event, monitor name).
fn told(receiver: &HttpReceiver) -> Vec<(String, String)> {
    receiver
        .received()
        .iter()
        .map(|r| {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
            (text(&r.json["event"]), text(&r.json["monitor"]["name"]))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tag_selects_its_monitors_for_lists_channels_windows_and_pauses() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let db_team = HttpReceiver::start().await?;
    central
        .create_channel(
            json!({"name": "db on-call", "kind": "webhook", "url": db_team.url,
            "tags": ["team:db"]}),
        )
        .await?;
    let _agent = central.start_agent("eu-1", "eu").await?;
    let (primary_target, web_target, replica_target) = (
        Target::start().await?,
        Target::start().await?,
        Target::start().await?,
    );
    let monitor = |name: &str, target: &Target, tags: Value| {
        json!({"name": name, "kind": "http", "target": target.url, "interval_ms": 5000,
               "tags": tags})
    };
    let primary = central
        .create_monitor(monitor(
            "db primary",
            &primary_target,
            json!(["team:db", "env:prod"]),
        ))
        .await?;
    let web = central
        .create_monitor(monitor("web", &web_target, json!(["team:web", "env:prod"])))
        .await?;
    let replica = central
        .create_monitor(monitor("db replica", &replica_target, json!(["team:db"])))
        .await?;
    for id in [&primary, &web, &replica] {
        central
            .wait_for_status(id, "up", Duration::from_secs(40))
            .await?;
    }

    // The list, by tag: whole tags, case-sensitively.
    assert_eq!(
        tagged(&central, "team:db").await?,
        ["db primary", "db replica"]
    );
    assert_eq!(tagged(&central, "env:prod").await?, ["db primary", "web"]);
    assert!(tagged(&central, "team").await?.is_empty());
    assert!(tagged(&central, "Team:db").await?.is_empty());
    let (status, refused) = central
        .admin(Method::GET, "/api/v1/monitors?tag=a%20b", None)
        .await?;
    assert_eq!(status, 400, "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap_or_default()
            .contains("tag"),
        "{refused}"
    );
    let (_, shown) = central
        .admin(Method::GET, &format!("/api/v1/monitors/{primary}"), None)
        .await?;
    assert_eq!(shown["tags"], json!(["team:db", "env:prod"]), "{shown}");

    // The channel of a tag hears of its monitors, and of no other.
    web_target.answer_with(500);
    primary_target.answer_with(500);
    eventually(Duration::from_secs(40), "the primary told down", || async {
        told(&db_team)
            .contains(&("monitor.down".into(), "db primary".into()))
            .then_some(())
    })
    .await?;
    central
        .wait_for_status(&web, "down", Duration::from_secs(30))
        .await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        told(&db_team),
        [("monitor.down".to_string(), "db primary".to_string())],
        "the web monitor's outage is not the db team's"
    );

    // A window over the tag covers its monitors, not the others.
    let now = Utc::now();
    let (status, window) = central
        .admin(
            Method::POST,
            "/api/v1/maintenance-windows",
            Some(
                json!({"name": "db upgrade", "starts_at": now - chrono::Duration::seconds(60),
                "ends_at": now + chrono::Duration::hours(1), "tags": ["team:db"]}),
            ),
        )
        .await?;
    assert_eq!(status, 201, "{window}");
    assert_eq!(window["tags"], json!(["team:db"]));
    for id in [&primary, &replica] {
        central
            .wait_for_status(id, "maintenance", Duration::from_secs(10))
            .await?;
    }
    assert_eq!(central.status(&web).await?["status"], "down");

    // Pause and resume by tag: each monitor once; a second pause changes nothing.
    let by_tag = |action: &str| format!("/api/v1/monitors/{action}");
    let body = json!({"tag": "team:db"});
    let (status, paused) = central
        .admin(Method::POST, &by_tag("pause"), Some(body.clone()))
        .await?;
    assert_eq!(status, 200, "{paused}");
    assert_eq!(
        (paused["matched"].as_u64(), paused["changed"].as_u64()),
        (Some(2), Some(2))
    );
    for id in [&primary, &replica] {
        central
            .wait_for_status(id, "paused", Duration::from_secs(10))
            .await?;
    }
    assert_eq!(
        central.status(&web).await?["status"],
        "down",
        "another tag's monitor"
    );
    let (_, again) = central
        .admin(Method::POST, &by_tag("pause"), Some(body.clone()))
        .await?;
    assert_eq!(again["changed"], 0, "{again}");
    let (status, resumed) = central
        .admin(Method::POST, &by_tag("resume"), Some(body))
        .await?;
    assert_eq!(status, 200, "{resumed}");
    assert_eq!(resumed["changed"], 2, "{resumed}");
    let (status, refused) = central
        .admin(Method::POST, &by_tag("pause"), Some(json!({"tag": ""})))
        .await?;
    assert_eq!(status, 400, "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap_or_default()
            .contains("`tag`"),
        "{refused}"
    );

    // An edit moves a monitor between tags.
    let (status, edited) = central
        .admin(
            Method::PATCH,
            &format!("/api/v1/monitors/{web}"),
            Some(json!({"tags": ["team:db"]})),
        )
        .await?;
    assert_eq!(status, 200, "{edited}");
    assert_eq!(
        tagged(&central, "team:db").await?,
        ["db primary", "db replica", "web"]
    );
    assert!(tagged(&central, "team:web").await?.is_empty());
    assert!(tagged(&central, "env:prod")
        .await?
        .contains(&"db primary".to_string()));
    // ... and under the tag's window now.
    central
        .wait_for_status(&web, "maintenance", Duration::from_secs(10))
        .await?;

    // Tags that are not tags are refused naming the field.
    for tags in [json!(["two words"]), json!(["a", "a"])] {
        let (status, refused) = central
            .admin(
                Method::POST,
                "/api/v1/monitors",
                Some(
                    json!({"name": "bad", "kind": "http", "target": "http://127.0.0.1:9/",
                    "tags": tags}),
                ),
            )
            .await?;
        assert_eq!(status, 400, "{refused}");
        let message = refused["message"].as_str().unwrap_or_default();
        assert!(message.contains("tags"), "{refused}");
    }
    Ok(())
}
