//! Placement with real agents: three agents in two regions; pinned, grouped and auto monitors
//! land where they should, and one nobody can run is left unplaced with the reason.

use std::time::Duration;

use e2e::{eventually, Agent, Central, Target};
use reqwest::Method;
use serde_json::json;

async fn start_agent(central: &Central, name: &str, region: &str) -> anyhow::Result<Agent> {
    let token = central.registration_token().await?;
    let mut agent = Agent::start(&central.url, None, &central.dir.path().join(name)).await?;
    agent.kill().await;
    agent.set_env("POLLER_REGISTRATION_TOKEN", &token);
    agent.set_env("POLLER_NAME", name);
    agent.set_env("POLLER_REGION", region);
    agent.restart().await?;
    Ok(agent)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pinned_grouped_and_auto_monitors_land_on_the_right_agents() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let target = Target::start().await?;
    let _agents = [
        start_agent(&central, "eu-1", "eu").await?,
        start_agent(&central, "eu-2", "eu").await?,
        start_agent(&central, "us-1", "us").await?,
    ];
    let pollers = eventually(
        Duration::from_secs(30),
        "three registered pollers",
        || async {
            let (_, list) = central
                .admin(Method::GET, "/api/v1/pollers", None)
                .await
                .ok()?;
            let items = list["items"].as_array()?.clone();
            (items.len() == 3).then_some(items)
        },
    )
    .await?;
    let id_of = |name: &str| {
        pollers.iter().find(|p| p["name"] == name).unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (eu1, eu2, us1) = (id_of("eu-1"), id_of("eu-2"), id_of("us-1"));

    let url = |i: usize| format!("{}?m={i}", target.url);
    let pinned = central
        .create_monitor(
            json!({"name": "pinned", "kind": "http", "target": url(0), "interval_ms": 5000,
                               "poller_mode": "pinned", "poller_id": us1}),
        )
        .await?;
    let mut grouped = Vec::new();
    // Twelve, so that all landing on one agent by chance (2 in 4,096) would be a bug.
    for i in 1..=12 {
        grouped.push(
            central
                .create_monitor(json!({"name": format!("eu {i}"), "kind": "http", "target": url(i), "interval_ms": 5000,
                                       "poller_mode": "grouped", "poller_region": "eu"}))
                .await?,
        );
    }
    let auto = central
        .create_monitor(
            json!({"name": "auto", "kind": "http", "target": url(20), "interval_ms": 5000}),
        )
        .await?;
    let nobody = central
        .create_monitor(
            json!({"name": "needs snmp", "kind": "http", "target": url(21),
                               "poller_capability": "snmp"}),
        )
        .await?;

    let status = central
        .wait_for_status(&pinned, "up", Duration::from_secs(40))
        .await?;
    assert_eq!(status["poller_id"], us1.as_str());
    let mut used = std::collections::HashSet::new();
    for monitor in &grouped {
        let status = central
            .wait_for_status(monitor, "up", Duration::from_secs(40))
            .await?;
        let poller = status["poller_id"].as_str().unwrap().to_string();
        assert!(
            poller == eu1 || poller == eu2,
            "a grouped eu monitor ran on {poller}"
        );
        used.insert(poller);
    }
    assert_eq!(
        used.len(),
        2,
        "the group's monitors spread over both eu agents"
    );
    let status = central
        .wait_for_status(&auto, "up", Duration::from_secs(40))
        .await?;
    assert!([&eu1, &eu2, &us1]
        .iter()
        .any(|p| status["poller_id"] == p.as_str()));

    let unplaced = central.status(&nobody).await?;
    assert_eq!(unplaced["status"], "stale", "{unplaced}");
    assert_eq!(
        unplaced["reason"],
        "no poller can run it: no matching poller has the capability `http` and `snmp`"
    );
    let (_, view) = central
        .admin(Method::GET, &format!("/api/v1/monitors/{nobody}"), None)
        .await?;
    assert_eq!(view["assigned_poller_id"], serde_json::Value::Null);
    Ok(())
}
