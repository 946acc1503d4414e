//! The walking skeleton, end to end with the real binaries: a monitor polled by a remote agent,
//! its status visible at central.

use std::time::Duration;

use e2e::{Agent, Central, Target};
use reqwest::Method;
use serde_json::json;

const STATUS_TIMEOUT: Duration = Duration::from_secs(40);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_monitor_goes_up_then_down_and_a_restarted_agent_keeps_its_identity() -> anyhow::Result<()>
{
    let central = Central::start().await?;
    let target = Target::start().await?;
    let token = central.registration_token().await?;
    let monitor = central
        .create_monitor(
            json!({"name": "target", "kind": "http", "target": target.url, "interval_ms": 5000}),
        )
        .await?;
    assert_eq!(
        central.status(&monitor).await?["status"],
        "stale",
        "no poller yet"
    );

    let agent_dir = central.dir.path().join("agent");
    let mut agent = Agent::start(&central.url, Some(token), &agent_dir).await?;
    let up = central
        .wait_for_status(&monitor, "up", STATUS_TIMEOUT)
        .await?;
    assert!(up["latency_ms"].is_u64(), "{up}");
    assert!(target.hits() >= 1);

    target.answer_with(503);
    let down = central
        .wait_for_status(&monitor, "down", STATUS_TIMEOUT)
        .await?;
    assert_eq!(down["message"], "expected 2xx, got 503", "{down}");

    assert!(
        down["next_check_at"].is_string(),
        "the agent says when it checks next: {down}"
    );
    let poller_id = down["poller_id"].as_str().unwrap().to_string();
    let report = e2e::eventually(STATUS_TIMEOUT, "the engine's heartbeat report", || async {
        let (_, poller) = central
            .admin(Method::GET, &format!("/api/v1/pollers/{poller_id}"), None)
            .await
            .ok()?;
        let (_, events) = central
            .admin(
                Method::GET,
                &format!("/api/v1/pollers/{poller_id}/events"),
                None,
            )
            .await
            .ok()?;
        let changed_to_down = events["items"].as_array()?.iter().any(|e| {
            e["event"] == "status_changed"
                && e["to"] == "down"
                && e["monitor_id"] == monitor.as_str()
        });
        (poller["scheduler"]["monitors"] == 1 && changed_to_down).then_some(poller)
    })
    .await?;
    assert_eq!(report["scheduler"]["breakers_open"], 0, "{report}");

    // Restart with the (now spent) registration token still configured: the agent must use
    // its stored credentials rather than register again.
    let before_restart = down["last_result_at"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    agent.restart().await?;
    target.answer_with(200);
    let again = central
        .wait_for_status(&monitor, "up", STATUS_TIMEOUT)
        .await?;
    assert!(again["last_result_at"].as_str().unwrap_or_default() > before_restart.as_str());

    let (status, pollers) = central.admin(Method::GET, "/api/v1/pollers", None).await?;
    assert_eq!(status, 200);
    let items = pollers["items"].as_array().expect("items");
    assert_eq!(
        items.len(),
        1,
        "a restart must not register a second poller: {pollers}"
    );
    assert_eq!(items[0]["status"], "online");
    assert_eq!(items[0]["assigned_monitors"], 1);
    assert_eq!(up["poller_id"], items[0]["id"]);
    assert!(
        !agent.log().contains("registration failed"),
        "{}",
        agent.log()
    );

    let (status, results) = central
        .admin(
            Method::GET,
            &format!("/api/v1/monitors/{monitor}/results?limit=1000"),
            None,
        )
        .await?;
    assert_eq!(status, 200);
    let statuses: Vec<&str> = results["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    assert!(
        statuses.contains(&"up") && statuses.contains(&"down"),
        "{statuses:?}"
    );
    agent.kill().await;
    central.stop().await;
    Ok(())
}
