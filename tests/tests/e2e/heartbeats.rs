//! Heartbeat (push) monitors with real binaries and curl as the job: a ping makes the monitor
//! up; silence makes it down a period and its grace after the last ping (told once, with the
//! time a ping was expected); `/fail` and a non-zero exit code are down at once; `/start`
//! without a finish is down after the grace; the last pings are kept with their bodies; a new
//! ping URL replaces the old one; wrong URLs are 404 and a flood is 429. No agent runs.

use std::time::{Duration, Instant};

use e2e::receivers::HttpReceiver;
use e2e::{eventually, Central};
use reqwest::Method;
use serde_json::{json, Value};

/// Pings with curl, as a cron job would; returns the HTTP status.
async fn curl(url: &str, data: Option<&str>) -> anyhow::Result<u16> {
    let mut command = tokio::process::Command::new("curl");
    command.args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-m", "10"]);
    if let Some(data) = data {
        command.args(["--data-binary", data]);
    }
    let output = command.arg(url).output().await?;
    anyhow::ensure!(output.status.success(), "curl failed: {output:?}");
    Ok(String::from_utf8(output.stdout)?.trim().parse()?)
}

fn events(receiver: &HttpReceiver) -> Vec<(String, String)> {
    receiver
        .received()
        .iter()
        .map(|r| {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
            (text(&r.json["event"]), text(&r.json["message"]))
        })
        .collect()
}

async fn told(receiver: &HttpReceiver, count: usize, what: &str) -> anyhow::Result<()> {
    eventually(Duration::from_secs(20), what, || async {
        (receiver.count() >= count).then_some(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_pings_is_up_and_its_silence_failure_or_unfinished_start_is_down(
) -> anyhow::Result<()> {
    let mut central = Central::start().await?;
    let receiver = HttpReceiver::start().await?;
    central
        .create_channel(
            json!({"name": "on-call", "kind": "webhook", "url": receiver.url,
            "default": true}),
        )
        .await?;
    let (status, created) = central
        .admin(
            Method::POST,
            "/api/v1/monitors",
            Some(
                json!({"name": "nightly backup", "kind": "heartbeat", "target": "backup job",
                "interval_ms": 5000, "settings": {"grace_ms": 2000}}),
            ),
        )
        .await?;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap_or_default().to_string();
    let path = created["ping_url"].as_str().unwrap_or_default().to_string();
    assert!(path.starts_with("/ping/"), "{created}");
    let ping = format!("{}{path}", central.url);
    assert!(created["assigned_poller_id"].is_null(), "no poller runs it");
    let (_, read) = central
        .admin(Method::GET, &format!("/api/v1/monitors/{id}"), None)
        .await?;
    assert!(read.get("ping_url").is_none(), "shown once: {read}");
    assert_eq!(central.status(&id).await?["status"], "pending");

    // A ping: up.
    assert_eq!(curl(&ping, None).await?, 200);
    let pinged = Instant::now();
    central
        .wait_for_status(&id, "up", Duration::from_secs(5))
        .await?;

    // Silence: still up within the period and its grace, down after them, told once with
    // the time a ping was expected.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(central.status(&id).await?["status"], "up");
    let down = central
        .wait_for_status(&id, "down", Duration::from_secs(10))
        .await?;
    assert!(
        pinged.elapsed() >= Duration::from_secs(7),
        "down after {:?}",
        pinged.elapsed()
    );
    // Shown at once; stored (and told) a few seconds later, once no ping can be on its way.
    assert!(
        down["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("one was expected by"),
        "{down}"
    );
    told(&receiver, 1, "the silence told").await?;
    let first = events(&receiver);
    assert_eq!(first[0].0, "monitor.down", "{first:?}");
    assert!(first[0].1.contains("no ping since"), "{first:?}");

    // Back with a ping, with its output kept.
    assert_eq!(curl(&ping, Some("backup done: 42 files")).await?, 200);
    central
        .wait_for_status(&id, "up", Duration::from_secs(5))
        .await?;
    told(&receiver, 2, "the recovery told").await?;
    // The silence counts as down time: alerting stored it as a result at the late instant.
    let (status, uptime) = central
        .admin(Method::GET, &format!("/api/v1/monitors/{id}/uptime"), None)
        .await?;
    assert_eq!(status, 200, "{uptime}");
    let day = &uptime["24h"];
    assert!(
        day["up_ms"].as_u64().unwrap_or_default() >= 6_500
            && day["down_ms"].as_u64().unwrap_or_default() > 0,
        "{day}"
    );

    // `/fail`: down at once.
    assert_eq!(curl(&format!("{ping}/fail"), None).await?, 200);
    let failed = central
        .wait_for_status(&id, "down", Duration::from_secs(2))
        .await?;
    assert!(
        failed["message"]
            .as_str()
            .unwrap_or_default()
            .contains("reported a failure"),
        "{failed}"
    );
    // Exit codes: 0 is up, anything else down.
    assert_eq!(curl(&format!("{ping}/0"), None).await?, 200);
    central
        .wait_for_status(&id, "up", Duration::from_secs(2))
        .await?;
    assert_eq!(curl(&format!("{ping}/3"), None).await?, 200);
    let exited = central
        .wait_for_status(&id, "down", Duration::from_secs(2))
        .await?;
    assert!(
        exited["message"]
            .as_str()
            .unwrap_or_default()
            .contains("exited with code 3"),
        "{exited}"
    );
    assert_eq!(curl(&ping, None).await?, 200);
    central
        .wait_for_status(&id, "up", Duration::from_secs(2))
        .await?;

    // `/start` and no finish: down after the grace (2 s), well before the period is over.
    assert_eq!(curl(&format!("{ping}/start"), None).await?, 200);
    let started = Instant::now();
    let unfinished = central
        .wait_for_status(&id, "down", Duration::from_secs(6))
        .await?;
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert!(
        unfinished["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("did not finish within its grace"),
        "{unfinished}"
    );
    // A start and its finish: up, with the run's duration as its latency.
    assert_eq!(curl(&format!("{ping}/start"), None).await?, 200);
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(curl(&ping, None).await?, 200);
    let finished = central
        .wait_for_status(&id, "up", Duration::from_secs(2))
        .await?;
    assert!(
        finished["latency_ms"].as_u64().unwrap_or_default() >= 500,
        "{finished}"
    );

    // The kept pings, newest first, with the body sent.
    let (status, pings) = central
        .admin(Method::GET, &format!("/api/v1/monitors/{id}/pings"), None)
        .await?;
    assert_eq!(status, 200, "{pings}");
    let kinds: Vec<&str> = pings["pings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["kind"].as_str())
        .collect();
    assert_eq!(
        kinds,
        [
            "success", "start", "start", "success", "exit 3", "exit 0", "fail", "success",
            "success"
        ],
        "{pings}"
    );
    let with_body = &pings["pings"][7];
    assert_eq!(with_body["body"], "backup done: 42 files", "{pings}");
    assert_eq!(with_body["method"], "POST");
    assert_eq!(with_body["source"], "127.0.0.1");

    // Wrong URLs: 404 as JSON; no agent-side check of a heartbeat.
    let wrong = format!("{}/ping/{}", central.url, "0".repeat(64));
    assert_eq!(curl(&wrong, None).await?, 404);
    assert_eq!(curl(&format!("{ping}/finish"), None).await?, 404);
    let (status, refused) = central
        .admin(
            Method::POST,
            &format!("/api/v1/monitors/{id}/check"),
            Some(json!({})),
        )
        .await?;
    assert_eq!(status, 409, "{refused}");

    // A new ping URL: the old one stops working.
    let (status, renewed) = central
        .admin(
            Method::POST,
            &format!("/api/v1/monitors/{id}/ping-url"),
            None,
        )
        .await?;
    assert_eq!(status, 200, "{renewed}");
    let renewed = format!(
        "{}{}",
        central.url,
        renewed["ping_url"].as_str().unwrap_or_default()
    );
    assert_eq!(curl(&ping, None).await?, 404);
    assert_eq!(curl(&renewed, None).await?, 200);

    // Central down for longer than the period and its grace: the job's pings could not be
    // heard, so its clock starts again when central is back (not down at once).
    assert_eq!(curl(&renewed, None).await?, 200);
    central
        .wait_for_status(&id, "up", Duration::from_secs(2))
        .await?;
    central.kill().await;
    tokio::time::sleep(Duration::from_secs(9)).await;
    central.restart().await?;
    let back = Instant::now();
    assert_eq!(central.status(&id).await?["status"], "up");
    central
        .wait_for_status(&id, "down", Duration::from_secs(12))
        .await?;
    assert!(
        back.elapsed() >= Duration::from_secs(4),
        "{:?}",
        back.elapsed()
    );

    // A flood on one URL is refused past its burst.
    let mut statuses = Vec::new();
    for _ in 0..30 {
        statuses.push(curl(&renewed, None).await?);
    }
    assert!(statuses.contains(&429), "{statuses:?}");

    // Refusals: a heartbeat has no poller; a cron expression must mean something.
    let refused = |body: Value| {
        let central = &central;
        async move {
            central
                .admin(Method::POST, "/api/v1/monitors", Some(body))
                .await
        }
    };
    let (status, body) = refused(json!({"name": "x", "kind": "heartbeat", "target": "job",
        "poller_mode": "grouped", "poller_region": "eu"}))
    .await?;
    assert_eq!(
        (status, body["error"].as_str()),
        (422, Some("invalid_combination")),
        "{body}"
    );
    let (status, body) = refused(json!({"name": "x", "kind": "heartbeat", "target": "job",
        "settings": {"cron": "61 * * * *"}}))
    .await?;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap_or_default()
            .contains("settings.cron"),
        "{body}"
    );
    let (status, cron) = refused(
        json!({"name": "nightly", "kind": "heartbeat", "target": "job",
        "settings": {"cron": "30 3 * * *", "time_zone": "Europe/Paris", "grace_ms": 3600000}}),
    )
    .await?;
    assert_eq!(status, 201, "{cron}");
    Ok(())
}
