//! A poller that central disabled or deleted stops probing its targets (another poller may own
//! them now), keeps its queue, and says so in its log, `/readyz` and metrics; a disabled one
//! resumes when it is enabled again.

use std::time::Duration;

use e2e::{eventually, Agent, Central, Target};
use reqwest::Method;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(40);

/// `/readyz` of the agent's newest run, next to its `/metrics`.
async fn readyz(agent: &Agent) -> Option<(u16, serde_json::Value)> {
    agent.readyz().await
}

async fn metric(agent: &Agent, name: &str) -> Option<f64> {
    let text = reqwest::get(agent.metrics_url()?)
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    text.lines()
        .find(|line| line.starts_with(name))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Waits until the target has not been hit for longer than the monitor's interval.
async fn probing_stops(target: &Target) -> anyhow::Result<u64> {
    eventually(WAIT, "the checks to stop", || async {
        let before = target.hits();
        tokio::time::sleep(Duration::from_secs(7)).await;
        (target.hits() == before).then_some(before)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_or_deleted_poller_stops_probing_and_says_so() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let target = Target::start().await?;
    let token = central.registration_token().await?;
    let monitor = central
        .create_monitor(
            json!({"name": "t", "kind": "http", "target": target.url, "interval_ms": 5000}),
        )
        .await?;
    let agent = Agent::start(&central.url, Some(token), &central.dir.path().join("a")).await?;
    let up = central.wait_for_status(&monitor, "up", WAIT).await?;
    let poller = up["poller_id"].as_str().unwrap().to_string();
    let (status, _) = readyz(&agent).await.expect("readyz");
    assert_eq!(status, 200);

    let set_enabled = |enabled: bool| {
        let (central, poller) = (&central, &poller);
        async move {
            let (status, body) = central
                .admin(
                    Method::PATCH,
                    &format!("/api/v1/pollers/{poller}"),
                    Some(json!({ "enabled": enabled })),
                )
                .await?;
            anyhow::ensure!(status == 200, "{body}");
            anyhow::Ok(())
        }
    };

    set_enabled(false).await?;
    let hits = probing_stops(&target).await?;
    let (status, ready) = readyz(&agent).await.expect("readyz");
    assert_eq!(status, 503, "{ready}");
    let stopped = ready["state"]["checks_stopped"]
        .as_str()
        .unwrap_or_default();
    assert!(stopped.starts_with("disabled:"), "{ready}");
    assert_eq!(metric(&agent, "poller_checks_stopped").await, Some(1.0));
    assert!(agent.log().contains("central disabled this poller"));

    set_enabled(true).await?;
    eventually(WAIT, "the checks to resume", || async {
        (target.hits() > hits).then_some(())
    })
    .await?;
    let (status, _) = readyz(&agent).await.expect("readyz");
    assert_eq!(status, 200, "ready again once enabled");
    assert_eq!(metric(&agent, "poller_checks_stopped").await, Some(0.0));

    let (status, _) = central
        .admin(Method::DELETE, &format!("/api/v1/pollers/{poller}"), None)
        .await?;
    assert_eq!(status, 204);
    probing_stops(&target).await?;
    let (status, ready) = readyz(&agent).await.expect("readyz");
    assert_eq!(status, 503, "{ready}");
    assert!(
        ready["state"]["checks_stopped"]
            .as_str()
            .is_some_and(|s| s.starts_with("deleted:")),
        "{ready}"
    );
    assert!(agent.log().contains("central deleted this poller"));
    assert!(agent.is_running(), "a deleted poller's agent keeps running");
    Ok(())
}
