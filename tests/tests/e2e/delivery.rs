//! Notification delivery is per channel: a receiver that never answers, holding more pending
//! notices than any one read of the outbox, delays no other channel's messages.

use std::time::{Duration, Instant};

use e2e::receivers::HttpReceiver;
use e2e::{eventually, Central};
use reqwest::Method;
use serde_json::{json, Value};

/// Accepts connections and never answers: every send to it waits for central's send timeout.
async fn black_hole() -> anyhow::Result<(String, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/hook", listener.local_addr()?);
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    Ok((url, holder))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_receiver_with_a_long_queue_never_delays_another_channel() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let (dead_url, _hole) = black_hole().await?;
    let healthy = HttpReceiver::start().await?;
    let dead = central
        .create_channel(json!({"name": "dead", "kind": "webhook", "url": dead_url}))
        .await?;
    let alive = central
        .create_channel(json!({"name": "alive", "kind": "webhook", "url": healthy.url}))
        .await?;
    let poller = central.register_poller("fake-agent").await?;
    let beat = poller.keep_alive(&central.url, Duration::from_secs(1));
    // More monitors on the dead channel than the old dispatcher read in one round (500).
    let spec = |name: String, channel: &str| {
        json!({"name": name, "kind": "http", "target": "http://127.0.0.1:9/",
               "interval_ms": 3_600_000, "poller_mode": "pinned", "poller_id": poller.id,
               "notification_channel_ids": [channel]})
    };
    let mut crowd = Vec::new();
    for i in 0..520 {
        crowd.push(
            central
                .create_monitor(spec(format!("crowd-{i}"), &dead))
                .await?,
        );
    }
    let watched = central
        .create_monitor(spec("watched".into(), &alive))
        .await?;

    let http = reqwest::Client::new();
    let upload = |monitors: Vec<String>, status: &'static str| {
        let (http, url, token) = (http.clone(), central.url.clone(), poller.access.clone());
        async move {
            let ts = chrono::Utc::now().to_rfc3339();
            let results: Vec<Value> = monitors
                .iter()
                .map(|m| {
                    json!({"id": uuid::Uuid::now_v7(), "monitor_id": m, "ts": ts,
                           "status": status, "latency_ms": 1, "msg": "", "meta": {}})
                })
                .collect();
            let answer: Value = http
                .post(format!("{url}/api/poller/results"))
                .bearer_auth(&token)
                .json(&json!({"batch_id": uuid::Uuid::new_v4(), "results": results}))
                .send()
                .await?
                .json()
                .await?;
            anyhow::ensure!(answer["accepted"] == monitors.len(), "{answer}");
            anyhow::Ok(())
        }
    };
    let mut everyone = crowd.clone();
    everyone.push(watched.clone());
    upload(everyone, "up").await?;
    // The crowd goes down: 520 notices for the dead channel, which takes none of them.
    tokio::time::sleep(Duration::from_secs(2)).await;
    upload(crowd.clone(), "down").await?;
    let dead_queue = format!("/api/v1/notifications?channel_id={dead}&limit=1000");
    eventually(
        Duration::from_secs(30),
        "the dead channel's notices queued",
        || async {
            let (_, log) = central.admin(Method::GET, &dead_queue, None).await.ok()?;
            (log["items"].as_array()?.len() >= 520).then_some(())
        },
    )
    .await?;

    upload(vec![watched.clone()], "down").await?;
    let sent = Instant::now();
    eventually(
        Duration::from_secs(20),
        "the healthy channel's notice",
        || async { (!healthy.received().is_empty()).then_some(()) },
    )
    .await?;
    println!("healthy channel told in {:?}", sent.elapsed());
    let told = healthy.received();
    assert_eq!(
        told.len(),
        1,
        "{:?}",
        told.iter().map(|r| &r.json).collect::<Vec<_>>()
    );
    assert_eq!(told[0].json["event"], "monitor.down");
    assert_eq!(told[0].json["monitor"]["id"], watched.as_str());

    // The dead channel's notices are all still pending, none given up or lost.
    let (_, log) = central.admin(Method::GET, &dead_queue, None).await?;
    let items = log["items"].as_array().unwrap();
    assert_eq!(items.len(), 520);
    assert!(items.iter().all(|n| n["status"] == "pending"), "{log}");
    beat.abort();
    Ok(())
}
