//! Maintenance windows with real binaries: a monitor that fails inside a window shows
//! `maintenance`, tells nobody and loses no uptime; the window ends by itself and the outage
//! that lasts is told then, once. "Mute for" over the down monitor tells its recovery (a
//! window tells recoveries unless it says otherwise), and deleting the window ends it at once.

use std::time::{Duration, Instant};

use chrono::Utc;
use e2e::receivers::HttpReceiver;
use e2e::{eventually, Central, Target};
use reqwest::Method;
use serde_json::{json, Value};

fn events(receiver: &HttpReceiver) -> Vec<String> {
    receiver
        .received()
        .iter()
        .map(|r| r.json["event"].as_str().unwrap_or_default().to_string())
        .collect()
}

async fn day_uptime(central: &Central, monitor: &str) -> anyhow::Result<Value> {
    let path = format!("/api/v1/monitors/{monitor}/uptime");
    let (status, body) = central.admin(Method::GET, &path, None).await?;
    anyhow::ensure!(status == 200, "uptime: {status} {body}");
    Ok(body["24h"].clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_keeps_a_failing_monitor_quiet_and_what_lasts_is_told_when_it_ends(
) -> anyhow::Result<()> {
    let central = Central::start().await?;
    let webhook = HttpReceiver::start().await?;
    central
        .create_channel(
            json!({"name": "on-call", "kind": "webhook", "url": webhook.url,
            "default": true}),
        )
        .await?;
    let _agent = central.start_agent("eu-1", "eu").await?;
    let target = Target::start().await?;
    let monitor = central
        .create_monitor(json!({"name": "api", "kind": "http", "target": target.url,
            "interval_ms": 5000}))
        .await?;
    central
        .wait_for_status(&monitor, "up", Duration::from_secs(40))
        .await?;

    // A deploy window that began a minute ago (so no earlier time is in it to speak of) and
    // ends by itself 25 s from now.
    let now = Utc::now();
    let ends_at = now + chrono::Duration::seconds(25);
    let (status, window) = central
        .admin(
            Method::POST,
            "/api/v1/maintenance-windows",
            Some(
                json!({"name": "deploy", "starts_at": now - chrono::Duration::seconds(60),
                "ends_at": ends_at, "monitor_ids": [monitor]}),
            ),
        )
        .await?;
    assert_eq!(status, 201, "{window}");
    assert!(window["current"].is_object(), "under way: {window}");
    let shown = central
        .wait_for_status(&monitor, "maintenance", Duration::from_secs(10))
        .await?;
    assert!(
        shown["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("deploy"),
        "the reason names the window: {shown}"
    );
    // Listed by the status alerting stored, once it looked.
    eventually(Duration::from_secs(10), "listed in maintenance", || async {
        let path = "/api/v1/monitors?status=maintenance";
        let (_, listed) = central.admin(Method::GET, path, None).await.ok()?;
        (listed["items"].as_array().map(Vec::len) == Some(1)).then_some(())
    })
    .await?;

    target.answer_with(500);
    eventually(Duration::from_secs(20), "two down results", || async {
        let results = central.results(&monitor).await.ok()?;
        let down = results.iter().filter(|r| r["status"] == "down").count();
        (down >= 2).then_some(())
    })
    .await?;
    assert_eq!(central.status(&monitor).await?["status"], "maintenance");
    let during = day_uptime(&central, &monitor).await?;
    assert_eq!(
        during["down_ms"], 0,
        "down time inside the window is nobody's: {during}"
    );
    assert!(
        events(&webhook).is_empty(),
        "told during the window: {:?}",
        events(&webhook)
    );

    // The window ends by itself; the outage that lasts is told then, once.
    eventually(
        Duration::from_secs(60),
        "monitor.down after the window",
        || async { (events(&webhook) == ["monitor.down"]).then_some(()) },
    )
    .await?;
    let told_at = Utc::now();
    assert!(
        told_at >= ends_at,
        "told at {told_at}, before the window's end {ends_at}"
    );
    assert_eq!(central.status(&monitor).await?["status"], "down");
    eventually(
        Duration::from_secs(30),
        "down time counted again",
        || async {
            let after = day_uptime(&central, &monitor).await.ok()?;
            (after["down_ms"].as_i64() > Some(0)).then_some(())
        },
    )
    .await?;
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(events(&webhook), ["monitor.down"], "told once");

    // Muted while down: the recovery inside the window is told.
    let (status, muted) = central
        .admin(
            Method::POST,
            &format!("/api/v1/monitors/{monitor}/mute"),
            Some(json!({"duration_ms": 600_000})),
        )
        .await?;
    assert_eq!(status, 201, "{muted}");
    central
        .wait_for_status(&monitor, "maintenance", Duration::from_secs(10))
        .await?;
    target.answer_with(200);
    eventually(
        Duration::from_secs(40),
        "monitor.up inside the window",
        || async { (events(&webhook) == ["monitor.down", "monitor.up"]).then_some(()) },
    )
    .await?;
    let up = &webhook.received()[1].json;
    assert_eq!(up["status"], "up", "{up}");
    assert_eq!(central.status(&monitor).await?["status"], "maintenance");

    // Deleting the window ends it at once.
    let id = muted["id"].as_str().unwrap_or_default();
    let started = Instant::now();
    let (status, _) = central
        .admin(
            Method::DELETE,
            &format!("/api/v1/maintenance-windows/{id}"),
            None,
        )
        .await?;
    assert_eq!(status, 204);
    central
        .wait_for_status(&monitor, "up", Duration::from_secs(10))
        .await?;
    eprintln!("unmuted in {:?}", started.elapsed());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn windows_that_cannot_be_kept_are_refused_naming_the_field() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let window = |extra: Value| {
        let mut spec = json!({"name": "w", "starts_at": "2027-03-27T02:00:00Z",
            "regions": ["eu"]});
        spec.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        spec
    };
    let recurring = |rule: &str, zone: &str| {
        window(json!({"recurrence": {"rule": rule, "time_zone": zone, "duration_ms": 3_600_000}}))
    };
    for (spec, status, field) in [
        (
            recurring("FREQ=DAILY", "Mars/Olympus"),
            422,
            "recurrence.time_zone",
        ),
        (
            recurring("FREQ=HOURLY;BYMINUTE=0", "UTC"),
            422,
            "recurrence.rule",
        ),
        (recurring("FREQ=FORTNIGHTLY", "UTC"), 422, "recurrence.rule"),
        (window(json!({})), 422, "ends_at"),
        (
            window(json!({"ends_at": "2027-03-27T02:00:30Z"})),
            422,
            "ends_at",
        ),
        (
            json!({"name": "w", "starts_at": "2027-03-27T02:00:00Z",
                "ends_at": "2027-03-27T04:00:00Z"}),
            422,
            "monitor_ids",
        ),
        (
            window(json!({"ends_at": "2027-03-27T04:00:00Z",
                "monitor_ids": ["00000000-0000-0000-0000-000000000001"]})),
            422,
            "monitor_ids",
        ),
    ] {
        let (got, body) = central
            .admin(
                Method::POST,
                "/api/v1/maintenance-windows",
                Some(spec.clone()),
            )
            .await?;
        let message = body["message"].as_str().unwrap_or_default();
        assert_eq!(got, status, "{spec}: {body}");
        assert!(message.contains(field), "{spec}: {body} names {field}");
    }
    // A rule that reads: its first occurrence is next.
    let (status, body) = central
        .admin(
            Method::POST,
            "/api/v1/maintenance-windows",
            Some(
                json!({"name": "nightly", "starts_at": "2027-03-28T01:00:00Z",
                "recurrence": {"rule": "FREQ=DAILY;COUNT=2", "time_zone": "Europe/Berlin",
                    "duration_ms": 3_600_000}, "regions": ["eu"]}),
            ),
        )
        .await?;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["next"]["starts_at"], "2027-03-28T01:00:00Z", "{body}");
    Ok(())
}

/// A window with `stop_checks`: its monitor's poller drops it while the window is under way (no
/// result comes in, the monitor shows `maintenance`), and gets it back when the window ends;
/// nothing is told of the pause in its results. A window that names no monitor by id or tag
/// cannot stop checks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_that_stops_checks_takes_the_monitor_off_its_poller_until_it_ends(
) -> anyhow::Result<()> {
    let central = Central::start().await?;
    let receiver = HttpReceiver::start().await?;
    central
        .create_channel(
            json!({"name": "ops", "kind": "webhook", "url": receiver.url, "default": true}),
        )
        .await?;
    let _agent = central.start_agent("eu-1", "eu").await?;
    let target = Target::start().await?;
    let monitor = central
        .create_monitor(json!({"name": "api", "kind": "http", "target": target.url,
            "interval_ms": 5000}))
        .await?;
    central
        .wait_for_status(&monitor, "up", Duration::from_secs(40))
        .await?;

    // A window under way for 15 s more (a window lasts a minute at least).
    let now = Utc::now();
    let ends_at = now + chrono::Duration::seconds(15);
    let (status, window) = central
        .admin(
            Method::POST,
            "/api/v1/maintenance-windows",
            Some(
                json!({"name": "deploy", "starts_at": now - chrono::Duration::seconds(50),
                "ends_at": ends_at, "monitor_ids": [monitor], "stop_checks": true}),
            ),
        )
        .await?;
    assert_eq!(status, 201, "{window}");
    assert_eq!(window["stop_checks"], true);
    let path = format!("/api/v1/monitors/{monitor}");
    let reason = eventually(Duration::from_secs(10), "the checks stopped", || async {
        let (_, read) = central.admin(Method::GET, &path, None).await.ok()?;
        read["placement_reason"]
            .as_str()
            .filter(|r| r.contains("checks stopped by the maintenance window \"deploy\""))
            .map(str::to_string)
    })
    .await?;
    assert_eq!(
        central.status(&monitor).await?["status"],
        "maintenance",
        "{reason}"
    );
    // The poller dropped it: no result for more than an interval.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = central.result_ids(&monitor).await?.len();
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert_eq!(
        central.result_ids(&monitor).await?.len(),
        before,
        "checked while stopped"
    );

    // It ends: placed again, checked again, and nothing was told.
    let until_end = (ends_at - Utc::now()).to_std().unwrap_or_default();
    tokio::time::sleep(until_end).await;
    eventually(
        Duration::from_secs(20),
        "checks again after the window",
        || async {
            let count = central.result_ids(&monitor).await.ok()?.len();
            (count > before).then_some(())
        },
    )
    .await?;
    central
        .wait_for_status(&monitor, "up", Duration::from_secs(10))
        .await?;
    let (_, read) = central.admin(Method::GET, &path, None).await?;
    assert!(read["assigned_poller_id"].is_string(), "{read}");
    assert!(events(&receiver).is_empty(), "{:?}", events(&receiver));

    // Only monitors named by id or tag can be stopped.
    let (status, refused) = central
        .admin(
            Method::POST,
            "/api/v1/maintenance-windows",
            Some(json!({"name": "region", "starts_at": now,
                "ends_at": now + chrono::Duration::hours(1), "regions": ["eu"],
                "stop_checks": true})),
        )
        .await?;
    assert_eq!(
        (status, refused["error"].as_str()),
        (422, Some("invalid_combination")),
        "{refused}"
    );
    assert!(
        refused["message"]
            .as_str()
            .unwrap_or_default()
            .contains("stop_checks"),
        "{refused}"
    );
    Ok(())
}
