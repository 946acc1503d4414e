//! Versioned assignments: deltas converge to exactly what central says a poller owns, and a
//! long poll brings an edit to the agent at once.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use e2e::{Agent, Central, Target};
use reqwest::Method;
use serde_json::{json, Value};

struct FakePoller {
    id: String,
    access: String,
    version: i64,
    /// What this poller believes it runs: monitor id → revision.
    running: BTreeMap<String, i64>,
}

impl FakePoller {
    async fn register(central: &Central, name: &str) -> anyhow::Result<FakePoller> {
        let poller = central.register_poller(name).await?;
        Ok(FakePoller {
            id: poller.id,
            access: poller.access,
            version: 0,
            running: BTreeMap::new(),
        })
    }

    /// Pulls what changed since its version and applies it, as the agent does.
    async fn pull(&mut self, central: &Central, http: &reqwest::Client) -> anyhow::Result<Value> {
        let answer: Value = http
            .get(format!(
                "{}/api/poller/assignments?since_version={}",
                central.url, self.version
            ))
            .bearer_auth(&self.access)
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        if answer["full"] == true {
            self.running.clear();
        }
        for removed in answer["removes"].as_array().unwrap() {
            self.running.remove(removed.as_str().unwrap());
        }
        for monitor in answer["upserts"].as_array().unwrap() {
            self.running.insert(
                monitor["id"].as_str().unwrap().into(),
                monitor["revision"].as_i64().unwrap(),
            );
        }
        self.version = answer["version"].as_i64().unwrap();
        Ok(answer)
    }
}

/// Central's truth: unpaused monitors assigned to `poller`, with their revisions.
async fn owned_by(central: &Central, poller: &str) -> anyhow::Result<BTreeMap<String, i64>> {
    let (_, monitors) = central
        .admin(Method::GET, "/api/v1/monitors?limit=1000", None)
        .await?;
    let mut owned = BTreeMap::new();
    for m in monitors["items"].as_array().unwrap() {
        if m["assigned_poller_id"] == poller && m["paused"] == false {
            owned.insert(m["id"].as_str().unwrap().to_string(), 0);
        }
    }
    Ok(owned)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_changes_and_random_pulls_converge_to_what_central_says() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let http = reqwest::Client::new();
    let mut pollers = [
        FakePoller::register(&central, "a").await?,
        FakePoller::register(&central, "b").await?,
    ];
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_nanos() as u64;
    println!("seed {seed}");
    let mut next = move |n: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    let mut monitors: Vec<String> = Vec::new();
    let mut deltas = 0;
    for step in 0..80 {
        let op = if monitors.is_empty() { 0 } else { next(6) };
        let pick = |n: u64, monitors: &Vec<String>| monitors[n as usize % monitors.len()].clone();
        match op {
            0 | 1 => {
                let pinned = &pollers[next(2) as usize].id;
                let spec = json!({"name": format!("m{step}"), "kind": "http", "target": format!("http://127.0.0.1:9/{step}"),
                                  "poller_mode": "pinned", "poller_id": pinned});
                monitors.push(central.create_monitor(spec).await?);
            }
            2 => {
                let id = pick(next(1000), &monitors);
                let body = json!({"target": format!("http://127.0.0.1:9/edited/{step}")});
                central
                    .admin(Method::PATCH, &format!("/api/v1/monitors/{id}"), Some(body))
                    .await?;
            }
            3 => {
                let id = pick(next(1000), &monitors);
                let to = &pollers[next(2) as usize].id;
                central
                    .admin(
                        Method::PATCH,
                        &format!("/api/v1/monitors/{id}"),
                        Some(json!({"poller_id": to})),
                    )
                    .await?;
            }
            4 => {
                let id = pick(next(1000), &monitors);
                let paused = next(2) == 0;
                central
                    .admin(
                        Method::PATCH,
                        &format!("/api/v1/monitors/{id}"),
                        Some(json!({"paused": paused})),
                    )
                    .await?;
            }
            _ => {
                let id = monitors.remove(next(1000) as usize % monitors.len());
                central
                    .admin(Method::DELETE, &format!("/api/v1/monitors/{id}"), None)
                    .await?;
            }
        }
        for poller in pollers.iter_mut() {
            if next(2) == 0 {
                let answer = poller.pull(&central, &http).await?;
                if answer["full"] == false && poller.version > 0 {
                    deltas += 1;
                }
            }
        }
    }
    for poller in pollers.iter_mut() {
        poller.pull(&central, &http).await?;
        let truth = owned_by(&central, &poller.id).await?;
        let believed: BTreeMap<String, i64> =
            poller.running.keys().map(|k| (k.clone(), 0)).collect();
        assert_eq!(believed, truth, "poller {} converged", poller.id);
        // A pull with nothing new is an empty delta at the current version.
        let again = poller.pull(&central, &http).await?;
        assert_eq!(
            (
                again["full"].as_bool(),
                again["upserts"].as_array().unwrap().len()
            ),
            (Some(false), 0)
        );
    }
    assert!(
        deltas > 10,
        "most pulls were deltas, not full sets ({deltas})"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_reaches_the_agent_through_the_long_poll() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let target = Target::start().await?;
    let token = central.registration_token().await?;
    let monitor = central
        .create_monitor(json!({"name": "m", "kind": "http", "target": format!("{}?v=0", target.url), "interval_ms": 3_600_000}))
        .await?;
    let mut agent = Agent::start(&central.url, None, &central.dir.path().join("agent")).await?;
    agent.kill().await;
    agent.set_env("POLLER_REGISTRATION_TOKEN", &token);
    // Heartbeats far apart: only the long poll can bring the edit quickly.
    agent.set_env("POLLER_HEARTBEAT_INTERVAL", "60s");
    agent.restart().await?;
    e2e::eventually(
        Duration::from_secs(30),
        "the agent to hold its assignment",
        || async { agent.log().contains("assignments updated").then_some(()) },
    )
    .await?;
    tokio::time::sleep(Duration::from_millis(500)).await;

    let mut figures = Vec::new();
    for round in 1..=5 {
        let fragment = format!("v={round}");
        let edited = Instant::now();
        let body = json!({"target": format!("{}?{fragment}", target.url)});
        let (status, _) = central
            .admin(
                Method::PATCH,
                &format!("/api/v1/monitors/{monitor}"),
                Some(body),
            )
            .await?;
        assert_eq!(status, 200);
        // An edited monitor runs at once, so the first request to the new target marks arrival.
        let arrived = e2e::eventually(
            Duration::from_secs(10),
            "the edited target to be checked",
            || async { target.first_hit(&fragment) },
        )
        .await?;
        figures.push(arrived.duration_since(edited));
    }
    figures.sort();
    println!("edit → agent → first check of the new target: {figures:?}");
    Ok(())
}
