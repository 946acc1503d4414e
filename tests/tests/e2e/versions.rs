//! Both sides say which version they are (issue 70's compatibility promise): central in
//! `GET /api/v1/version` and in every poller-API answer (`X-Central-Version`), the agent in
//! every request (`X-Poller-Version`) and its heartbeats; the agent's `/readyz` names the
//! central it talks to, and central shows each poller's version.

use std::time::Duration;

use e2e::{eventually, Central};
use reqwest::Method;

const WAIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_side_names_its_version() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let (status, about) = central.admin(Method::GET, "/api/v1/version", None).await?;
    assert_eq!(status, 200, "{about}");
    let version = about["version"].as_str().unwrap().to_string();
    assert_eq!(
        version,
        env!("CARGO_PKG_VERSION"),
        "the workspace's version"
    );
    let kinds: Vec<&str> = about["check_kinds"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|k| k.as_str())
        .collect();
    assert!(
        kinds.contains(&"http") && kinds.contains(&"heartbeat"),
        "{about}"
    );

    let poller = central.register_poller("by-hand").await?;
    let answer = reqwest::Client::new()
        .get(format!(
            "{}/api/poller/assignments?since_version=0",
            central.url
        ))
        .bearer_auth(&poller.access)
        .send()
        .await?;
    assert_eq!(answer.status(), 200);
    assert_eq!(
        answer
            .headers()
            .get("x-central-version")
            .map(|v| v.to_str().unwrap()),
        Some(version.as_str())
    );

    let agent = central.start_agent("agent", "eu").await?;
    let ready = eventually(WAIT, "the agent to name its central", || async {
        let (_, body) = agent.readyz().await?;
        (body["state"]["central_version"].as_str()? == version).then_some(body)
    })
    .await?;
    let poller_id = ready["state"]["poller_id"].as_str().unwrap();
    let (_, shown) = central
        .admin(Method::GET, &format!("/api/v1/pollers/{poller_id}"), None)
        .await?;
    assert_eq!(shown["version"], version.as_str(), "{shown}");
    Ok(())
}
