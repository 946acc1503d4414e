//! Multi-location monitors with real agents: three agents in three regions check one target,
//! which fails for the locations the test chooses (it tells them apart by the `User-Agent`).
//! One failing location makes the monitor `degraded`, two (the quorum) `down`; a location
//! whose agent is gone is `unknown` and counts neither way.

use std::collections::HashSet;
use std::time::Duration;

use e2e::receivers::RegionalTarget;
use e2e::{eventually, Central};
use reqwest::Method;
use serde_json::{json, Value};

/// Waits until the monitor's status is `wanted` with these location statuses (by region).
async fn wait_for(
    central: &Central,
    monitor: &str,
    wanted: &str,
    locations: &[(&str, &str)],
) -> anyhow::Result<Value> {
    eventually(
        Duration::from_secs(40),
        &format!("status {wanted} with locations {locations:?}"),
        || async {
            let status = central.status(monitor).await.ok()?;
            let each = status["locations"].as_array()?;
            let matches = locations.iter().all(|(region, expected)| {
                each.iter()
                    .any(|l| l["region"] == *region && l["status"] == *expected)
            });
            (status["status"] == wanted && matches).then_some(status)
        },
    )
    .await
}

/// `GET /api/v1/monitors/{id}/uptime`.
async fn uptime_of(central: &Central, monitor: &str) -> anyhow::Result<Value> {
    let (code, uptime) = central
        .admin(
            Method::GET,
            &format!("/api/v1/monitors/{monitor}/uptime"),
            None,
        )
        .await?;
    anyhow::ensure!(code == 200, "uptime: {code} {uptime}");
    Ok(uptime)
}

async fn listed(central: &Central, query: &str) -> anyhow::Result<Vec<Value>> {
    let (code, page) = central
        .admin(Method::GET, &format!("/api/v1/monitors?{query}"), None)
        .await?;
    anyhow::ensure!(code == 200, "listing monitors: {code} {page}");
    Ok(page["items"].as_array().cloned().unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quorum_of_locations_decides_down_and_a_lone_failure_is_degraded() -> anyhow::Result<()> {
    let central = Central::start_with(&[("CENTRAL_OFFLINE_AFTER", "4s")]).await?;
    let target = RegionalTarget::start().await?;
    let _eu = central.start_agent("eu-1", "eu").await?;
    let _us = central.start_agent("us-1", "us").await?;
    let mut ap = central.start_agent("ap-1", "ap").await?;

    // Regions with no poller yet are fine: their location waits, unplaced, for one.
    let monitor = central
        .create_monitor(
            json!({"name": "everywhere", "kind": "http", "target": target.url,
            "interval_ms": 5000, "poller_mode": "multi", "poller_regions": ["eu", "us", "ap"]}),
        )
        .await?;
    let all_up = [("eu", "up"), ("us", "up"), ("ap", "up")];
    let status = wait_for(&central, &monitor, "up", &all_up).await?;
    assert_eq!(status["quorum"], 2, "a majority of three: {status}");

    // Each location runs on the agent of its region.
    let (_, pollers) = central.admin(Method::GET, "/api/v1/pollers", None).await?;
    for location in status["locations"].as_array().unwrap() {
        let poller = pollers["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["id"] == location["poller_id"])
            .expect("the location's poller is registered");
        assert_eq!(poller["region"], location["region"], "{location}");
    }

    // The three locations check at different thirds of the interval, not together: their first
    // results' offsets within the 5 s interval are at least a second apart (1.67 s planned).
    let first = central.results(&monitor).await?;
    let mut offsets: Vec<i64> = ["eu", "us", "ap"]
        .iter()
        .map(|region| {
            let result = first
                .iter()
                .find(|r| r["region"] == *region)
                .expect("a result");
            let ts = chrono::DateTime::parse_from_rfc3339(result["ts"].as_str().unwrap()).unwrap();
            ts.timestamp_millis().rem_euclid(5_000)
        })
        .collect();
    offsets.sort();
    let gaps = [
        offsets[1] - offsets[0],
        offsets[2] - offsets[1],
        offsets[0] + 5_000 - offsets[2],
    ];
    assert!(gaps.iter().all(|gap| *gap >= 1_000), "offsets {offsets:?}");

    target.fail_for(&["eu-1"]);
    let degraded = wait_for(
        &central,
        &monitor,
        "degraded",
        &[("eu", "down"), ("us", "up"), ("ap", "up")],
    )
    .await?;
    assert!(
        degraded["reason"].as_str().unwrap().contains("1 of 3"),
        "{degraded}"
    );
    let ids = |items: &[Value]| -> Vec<String> {
        items
            .iter()
            .map(|m| m["id"].as_str().unwrap().to_string())
            .collect()
    };
    // The list filters by the stored status, which alerting's look writes just after the
    // result's ingest (`docs/alerting.md`), while the status answer derives from the
    // newest results: on a slow machine the list may follow a moment later, never otherwise.
    eventually(
        Duration::from_secs(10),
        "the list shows it degraded",
        || async {
            let listed = ids(&listed(&central, "status=degraded").await.ok()?);
            (listed == [monitor.as_str()]).then_some(())
        },
    )
    .await?;
    assert!(listed(&central, "status=down").await?.is_empty());
    // Prometheus sees the same: the monitor and each location, by region.
    let metrics = central.metrics().await?;
    for (region, up) in [("", 0), ("eu", 0), ("us", 1), ("ap", 1)] {
        let series = format!(
            "central_monitor_up{{monitor_id=\"{monitor}\",name=\"everywhere\",region=\"{region}\"}} {up}"
        );
        assert!(metrics.contains(&series), "{series} in\n{metrics}");
    }
    assert!(metrics.contains(&format!(
        "central_monitor_state{{monitor_id=\"{monitor}\",name=\"everywhere\",region=\"\",status=\"degraded\"}} 1"
    )));
    assert!(metrics.contains("central_poller_up{"), "{metrics}");

    target.fail_for(&["eu-1", "us-1"]);
    wait_for(
        &central,
        &monitor,
        "down",
        &[("eu", "down"), ("us", "down"), ("ap", "up")],
    )
    .await?;
    let down = eventually(
        Duration::from_secs(10),
        "the list shows it down",
        || async {
            let down = listed(&central, "status=down&region=ap").await.ok()?;
            (ids(&down) == [monitor.as_str()]).then_some(down)
        },
    )
    .await?;
    assert_eq!(down[0]["status"], "down", "the list carries the status");
    assert!(listed(&central, "region=sa").await?.is_empty());

    target.fail_for(&[]);
    wait_for(&central, &monitor, "up", &all_up).await?;

    // Uptime follows the combined status: down only while the quorum saw it down (degraded is
    // up), each location's own beside it.
    let uptime = uptime_of(&central, &monitor).await?;
    let down_ms = |window: &Value| window["down_ms"].as_u64().unwrap();
    let location = |region: &str| {
        uptime["locations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["region"] == region)
            .unwrap_or_else(|| panic!("{region} in {uptime}"))
            .clone()
    };
    let (whole, eu, us, asia) = (
        down_ms(&uptime["24h"]),
        down_ms(&location("eu")["24h"]),
        down_ms(&location("us")["24h"]),
        down_ms(&location("ap")["24h"]),
    );
    assert!(whole > 0 && eu > whole && us > 0 && asia == 0, "{uptime}");

    // Every result names the location it was checked from, and came from that region's agent.
    let results = central.results(&monitor).await?;
    let regions: HashSet<&str> = results
        .iter()
        .map(|r| r["region"].as_str().expect("a located result"))
        .collect();
    assert_eq!(regions, HashSet::from(["eu", "us", "ap"]));

    // The Asian agent goes away: its location is unknown, not down, and the monitor stays up.
    ap.kill().await;
    let status = wait_for(
        &central,
        &monitor,
        "up",
        &[("eu", "up"), ("us", "up"), ("ap", "unknown")],
    )
    .await?;
    assert!(
        status["reason"]
            .as_str()
            .unwrap()
            .contains("1 location unknown"),
        "{status}"
    );
    // Unknown never counts as down: one real failure more is still only degraded.
    target.fail_for(&["eu-1"]);
    wait_for(
        &central,
        &monitor,
        "degraded",
        &[("eu", "down"), ("us", "up"), ("ap", "unknown")],
    )
    .await?;
    Ok(())
}

/// Issue 68 for `multi` monitors: after an outage everywhere of 90 s (past the 10th failure,
/// where the previous release's breaker opened for five minutes), each location's first check
/// after the recovery comes within one interval and two seconds of it, the combined status is
/// `up` at central within one interval and eight seconds, and each location's downtime and
/// the quorum's are the outage's length within one interval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_location_sees_a_recovery_within_one_interval() -> anyhow::Result<()> {
    const INTERVAL_MS: i64 = 5_000;
    let ms = |at: &Value| {
        chrono::DateTime::parse_from_rfc3339(at.as_str().unwrap_or_default())
            .map(|t| t.timestamp_millis())
            .unwrap_or_default()
    };
    let central = Central::start().await?;
    let target = RegionalTarget::start().await?;
    let _eu = central.start_agent("eu-1", "eu").await?;
    let _us = central.start_agent("us-1", "us").await?;
    let monitor = central
        .create_monitor(
            json!({"name": "two places", "kind": "http", "target": target.url,
            "interval_ms": INTERVAL_MS, "poller_mode": "multi", "poller_regions": ["eu", "us"],
            "quorum": 2}),
        )
        .await?;
    wait_for(&central, &monitor, "up", &[("eu", "up"), ("us", "up")]).await?;

    let down_from = chrono::Utc::now().timestamp_millis();
    target.fail_for(&["eu-1", "us-1"]);
    wait_for(
        &central,
        &monitor,
        "down",
        &[("eu", "down"), ("us", "down")],
    )
    .await?;
    tokio::time::sleep(
        Duration::from_millis(90_000).saturating_sub(Duration::from_millis(
            (chrono::Utc::now().timestamp_millis() - down_from) as u64,
        )),
    )
    .await;
    target.fail_for(&[]);
    let recovered = chrono::Utc::now().timestamp_millis();
    let seen = eventually(
        Duration::from_millis(INTERVAL_MS as u64 + 8_000),
        "the recovery at central",
        || async {
            let status = central.status(&monitor).await.ok()?;
            (status["status"] == "up").then(|| chrono::Utc::now().timestamp_millis())
        },
    )
    .await?;
    eprintln!("up at central {} ms after the recovery", seen - recovered);

    let results = central.results(&monitor).await?;
    for region in ["eu", "us"] {
        // The first up after the location's last down: a check started just before the
        // recovery and answered after it counts (its `ts` is when it started).
        let here = || results.iter().filter(|r| r["region"] == region);
        let last_down = here()
            .filter(|r| r["status"] == "down")
            .map(|r| ms(&r["ts"]))
            .max()
            .unwrap_or(i64::MAX);
        let first_up = here()
            .filter(|r| r["status"] == "up")
            .map(|r| ms(&r["ts"]))
            .filter(|ts| *ts > last_down)
            .min();
        let first_up = first_up.unwrap_or_else(|| panic!("{region}: an up result after it"));
        assert!(
            first_up - recovered <= INTERVAL_MS + 2_000,
            "{region}: the first check after the recovery came {} ms after it",
            first_up - recovered
        );
    }
    let uptime = uptime_of(&central, &monitor).await?;
    let truth = recovered - down_from;
    let down_ms = |window: &Value| window["down_ms"].as_i64().unwrap_or(-1);
    let mut counted = vec![("quorum".to_string(), down_ms(&uptime["24h"]))];
    for location in uptime["locations"].as_array().into_iter().flatten() {
        counted.push((
            location["region"].as_str().unwrap_or("?").to_string(),
            down_ms(&location["24h"]),
        ));
    }
    assert_eq!(counted.len(), 3, "{uptime}");
    for (whose, down) in counted {
        assert!(
            (down - truth).abs() <= INTERVAL_MS + 2_000,
            "{whose}: an outage of {truth} ms counted as {down} ms down"
        );
    }
    Ok(())
}
