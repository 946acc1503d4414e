//! Alert latency: from central deciding a monitor's status (the upload that makes it `down` or
//! `up` is acknowledged) to a webhook receiver holding the notification. Real `central` binary
//! (`E2E_DATABASE=postgres` for PostgreSQL), a test poller speaking the poller API, a local
//! receiver. Each of N monitors goes down once and up once (two notices, no flapping), one
//! monitor every 100 ms, so samples fall at every phase of the fallback ticks (the upload
//! wakes alerting, and alerting wakes delivery, so the ticks should not matter).
//!
//!   cargo bench -p e2e --bench alert_latency [-- --monitors 40]

use std::collections::HashMap;
use std::time::{Duration, Instant};

use e2e::receivers::HttpReceiver;
use e2e::{eventually, Central};
use serde_json::json;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let monitors: usize = args
        .iter()
        .position(|a| a == "--monitors")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(40);
    let central = Central::start().await?;
    let receiver = HttpReceiver::start().await?;
    central
        .create_channel(
            json!({"name": "bench", "kind": "webhook", "url": receiver.url, "default": true}),
        )
        .await?;
    let poller = central.register_poller("bench-poller").await?;
    let http = reqwest::Client::new();
    let beat = poller.keep_alive(&central.url, Duration::from_secs(1));
    let mut ids = Vec::new();
    for i in 0..monitors {
        ids.push(
            central
                .create_monitor(json!({"name": format!("m{i}"), "kind": "http",
                    "target": "http://127.0.0.1:9/", "interval_ms": 60000,
                    "poller_mode": "pinned", "poller_id": poller.id}))
                .await?,
        );
    }
    let upload = |monitor: String, status: &'static str| {
        let (http, url, token) = (http.clone(), central.url.clone(), poller.access.clone());
        async move {
            let answer: serde_json::Value = http
                .post(format!("{url}/api/poller/results"))
                .bearer_auth(&token)
                .json(&json!({"batch_id": uuid::Uuid::new_v4(), "results": [{
                    "id": uuid::Uuid::now_v7(), "monitor_id": monitor,
                    "ts": chrono::Utc::now().to_rfc3339(), "status": status,
                    "latency_ms": 1, "msg": "", "meta": {}}]}))
                .send()
                .await?
                .json()
                .await?;
            anyhow::ensure!(answer["accepted"] == 1, "{answer}");
            anyhow::Ok(Instant::now())
        }
    };
    // Every monitor up first (no notice: a new monitor coming up is no news).
    for id in &ids {
        upload(id.clone(), "up").await?;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut decided: HashMap<(String, &str), Instant> = HashMap::new();
    for (status, event) in [("down", "monitor.down"), ("up", "monitor.up")] {
        for id in &ids {
            decided.insert((id.clone(), event), upload(id.clone(), status).await?);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let wanted = 2 * monitors;
    eventually(Duration::from_secs(60), "every notification", || async {
        (receiver.received().len() >= wanted).then_some(())
    })
    .await?;
    beat.abort();
    let mut latencies: Vec<f64> = receiver
        .received()
        .iter()
        .filter_map(|r| {
            let monitor = r.json["monitor"]["id"].as_str()?.to_string();
            let event = r.json["event"].as_str()?;
            let event = if event == "monitor.down" {
                "monitor.down"
            } else {
                "monitor.up"
            };
            let at = decided.get(&(monitor, event))?;
            Some(r.at.saturating_duration_since(*at).as_secs_f64() * 1000.0)
        })
        .collect();
    latencies.sort_by(f64::total_cmp);
    let pick = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
    println!(
        "alert latency ({} on {}): {} notifications, p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms \
         (ceiling: the fallback periods, 1000 ms to look plus 250 ms to dispatch)",
        monitors,
        std::env::var("E2E_DATABASE").unwrap_or_else(|_| "sqlite".into()),
        latencies.len(),
        pick(0.5),
        pick(0.99),
        latencies.last().copied().unwrap_or_default()
    );
    Ok(())
}
