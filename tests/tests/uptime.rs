//! Uptime is time, through the real binaries: a target down for a third of the time is up about
//! two thirds of the time, whatever the agent's backoff does to how often it checks, and a
//! pause stops the clock.

use std::time::Duration;

use chrono::{DateTime, Utc};
use e2e::{eventually, Central, Target};
use reqwest::Method;
use serde_json::{json, Value};

const PHASE: Duration = Duration::from_secs(40);
const INTERVAL_MS: i64 = 5_000;
/// A result stands for at most the interval, the check's timeout (the default, 5 s, capped at
/// the interval) and a second of scheduling.
const CAP_MS: i64 = INTERVAL_MS + 5_000 + 1_000;

fn ms(at: &Value) -> i64 {
    at.as_str()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.timestamp_millis())
        .expect("a timestamp")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_third_of_the_time_down_is_a_third_down_whatever_the_backoff() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let _agent = central.start_agent("agent-eu", "eu").await?;
    let target = Target::start().await?;
    // While the target fails the agent backs off to 10 s between checks: half as many down
    // checks as up checks per minute, as in production (where the backoff grows further).
    let monitor = central
        .create_monitor(
            json!({"name": "third", "kind": "http", "target": target.url,
            "interval_ms": INTERVAL_MS,
            "settings": {"backoff_base_ms": 5_000, "backoff_max_ms": 10_000}}),
        )
        .await?;
    let first_up = eventually(Duration::from_secs(30), "the first result", || async {
        let status = central.status(&monitor).await.ok()?;
        (status["status"] == "up").then_some(())
    })
    .await;
    first_up?;
    tokio::time::sleep(PHASE).await;
    target.answer_with(500);
    tokio::time::sleep(PHASE).await;
    target.answer_with(200);
    tokio::time::sleep(PHASE).await;

    let (status, _) = central
        .admin(
            Method::PATCH,
            &format!("/api/v1/monitors/{monitor}"),
            Some(json!({"paused": true})),
        )
        .await?;
    assert_eq!(status, 200);
    let paused_at = Utc::now().timestamp_millis();
    // A check already under way may still arrive.
    tokio::time::sleep(Duration::from_secs(4)).await;

    let results = central.results(&monitor).await?;
    let uptime = day_uptime(&central, &monitor).await?;
    let (up_ms, down_ms) = (
        uptime["up_ms"].as_i64().unwrap(),
        uptime["down_ms"].as_i64().unwrap(),
    );
    let shown = uptime["uptime"].as_f64().unwrap();

    // The same figure read the slow way from the stored results: each stands until the next,
    // at most the cap, the newest until the pause.
    let points: Vec<(i64, bool)> = results
        .iter()
        .map(|r| (ms(&r["ts"]), r["status"] == "up"))
        .collect();
    let (mut up, mut down) = (0, 0);
    for (i, (ts, is_up)) in points.iter().enumerate() {
        let next = points.get(i + 1).map_or(paused_at, |(next, _)| *next);
        let stands = (next - ts).clamp(0, CAP_MS);
        if *is_up {
            up += stands;
        } else {
            down += stands;
        }
    }
    let by_time = 100.0 * up as f64 / (up + down) as f64;
    let ups = points.iter().filter(|(_, is_up)| *is_up).count();
    let by_count = 100.0 * ups as f64 / points.len() as f64;
    eprintln!("uptime {shown:.2} %, by time {by_time:.2} %, by count {by_count:.2} %");
    assert!(
        by_count - by_time > 3.0,
        "the backoff spaces down checks out, so counting checks overstates uptime \
         ({by_count:.1} % vs {by_time:.1} %): {results:?}"
    );
    assert!(
        (shown - by_time).abs() < 1.0,
        "uptime {shown:.2} % is the results' time ({by_time:.2} %), not their count \
         ({by_count:.2} %): {uptime}"
    );
    assert!(
        (shown - 100.0 * 2.0 / 3.0).abs() < 12.0,
        "down a third of the time, within the checks' delay to notice: {shown:.2} %"
    );
    assert!(
        ((up_ms + down_ms) - (up + down)).abs() < 1_500,
        "measured {} ms, the results stand for {} ms",
        up_ms + down_ms,
        up + down
    );

    // Paused, the clock stops: ten seconds later nothing more is measured.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let later = day_uptime(&central, &monitor).await?;
    assert_eq!(
        (later["up_ms"].clone(), later["down_ms"].clone()),
        (uptime["up_ms"].clone(), uptime["down_ms"].clone()),
        "paused time is not up time"
    );
    Ok(())
}

async fn day_uptime(central: &Central, monitor: &str) -> anyhow::Result<Value> {
    let (status, body) = central
        .admin(
            Method::GET,
            &format!("/api/v1/monitors/{monitor}/uptime"),
            None,
        )
        .await?;
    anyhow::ensure!(status == 200, "uptime: {status} {body}");
    Ok(body["24h"].clone())
}
