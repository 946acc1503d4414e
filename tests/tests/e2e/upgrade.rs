//! Upgrades from the previous release, with its real binaries (issue 70): central and an agent
//! of the previous release (built from its git tag by `scripts/previous-release.sh`, cached)
//! beside an agent of this checkout, then this checkout's central on the same database,
//! then this checkout's agent in place of the older one. Every check either agent made is
//! stored once, nobody registers again, the history from before the upgrade stays, and each
//! side names the other's version.
//!
//! The rolling upgrade of two replicas on one PostgreSQL behind HAProxy: both of the previous
//! release, then one upgraded (its migrations run under the other, still serving), then the
//! other; agents of both versions upload through the proxy throughout, a target goes down and
//! comes back across the upgrade, and each change is told once.
//!
//! Both run when `E2E_PREVIOUS_RELEASE_BIN` names the directory holding the previous release's
//! `central` and `poller-agent` (`scripts/test.sh` builds them beside the suites and sets it);
//! without it the test says so and returns, so that a bare `cargo test` needs no second build.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

use e2e::load_balancer::LoadBalancer;
use e2e::postgres::Postgres;
use e2e::receivers::HttpReceiver;
use e2e::{binary, eventually, Agent, Central, Target};
use reqwest::Method;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(90);
/// The previous release's version, as its binaries name themselves.
const PREVIOUS_VERSION: &str = "0.1.0";

fn previous_release() -> Option<PathBuf> {
    let dir = PathBuf::from(std::env::var_os("E2E_PREVIOUS_RELEASE_BIN")?);
    assert!(
        dir.join("central").is_file() && dir.join("poller-agent").is_file(),
        "E2E_PREVIOUS_RELEASE_BIN={} holds no central and poller-agent",
        dir.display()
    );
    Some(dir)
}

/// Every result id central holds for `monitor`, checked to be unique.
async fn stored_once(central: &Central, monitor: &str) -> anyhow::Result<HashSet<String>> {
    let ids = central.result_ids(monitor).await?;
    let unique: HashSet<String> = ids.iter().cloned().collect();
    assert_eq!(
        unique.len(),
        ids.len(),
        "a result of {monitor} stored twice"
    );
    Ok(unique)
}

/// Waits until central holds every result `agent` queued over all its runs, of any version,
/// and nothing it never made.
async fn all_delivered_once(
    central: &Central,
    agent: &Agent,
    monitor: &str,
) -> anyhow::Result<usize> {
    let queued = agent.queued_ids();
    assert!(
        !queued.is_empty(),
        "the agent queued nothing:\n{}",
        agent.log()
    );
    let stored = eventually(WAIT, "central to hold every queued result", || async {
        let stored = stored_once(central, monitor).await.ok()?;
        queued.is_subset(&stored).then_some(stored)
    })
    .await?;
    let made = agent.committing_ids();
    let phantom: Vec<&String> = stored.iter().filter(|id| !made.contains(*id)).collect();
    assert!(phantom.is_empty(), "results nobody made: {phantom:?}");
    Ok(stored.len())
}

async fn versions_of_pollers(central: &Central) -> anyhow::Result<Vec<(String, String)>> {
    let (status, pollers) = central.admin(Method::GET, "/api/v1/pollers", None).await?;
    assert_eq!(status, 200, "{pollers}");
    let mut found: Vec<(String, String)> = pollers["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let field = |name: &str| p[name].as_str().unwrap_or_default().to_string();
            (field("name"), field("version"))
        })
        .collect();
    found.sort();
    Ok(found)
}

async fn results_after(central: &Central, monitor: &str, known: usize) -> anyhow::Result<()> {
    eventually(WAIT, "results after the upgrade", || async {
        let stored = central.result_ids(monitor).await.ok()?;
        (stored.len() >= known + 3).then_some(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_of_the_previous_release_upgrades_without_losing_a_result() -> anyhow::Result<()> {
    let Some(previous) = previous_release() else {
        println!("skipped: set E2E_PREVIOUS_RELEASE_BIN (scripts/previous-release.sh)");
        return Ok(());
    };
    let mut central = Central::start_program(&previous.join("central"), &[]).await?;
    let target = Target::start().await?;
    let mut monitors = Vec::new();
    for region in ["old", "new"] {
        let spec = json!({"name": format!("checked by the {region} agent"), "kind": "http",
            "target": format!("{}?from={region}", target.url), "interval_ms": 5_000,
            "poller_mode": "grouped", "poller_region": region});
        monitors.push(central.create_monitor(spec).await?);
    }
    let token = central.registration_token().await?;
    let mut older = Agent::start_program(
        &previous.join("poller-agent"),
        &central.url,
        Some(token),
        &central.dir.path().join("older"),
        &[("POLLER_NAME", "older"), ("POLLER_REGION", "old")],
    )
    .await?;
    let token = central.registration_token().await?;
    let newer = Agent::start_with(
        &central.url,
        Some(token),
        &central.dir.path().join("newer"),
        &[("POLLER_NAME", "newer"), ("POLLER_REGION", "new")],
    )
    .await?;

    // A current agent in front of the previous central, and the reverse, both check.
    for monitor in &monitors {
        central.wait_for_status(monitor, "up", WAIT).await?;
    }
    let shown = eventually(WAIT, "each poller's version at central", || async {
        let shown = versions_of_pollers(&central).await.ok()?;
        shown.iter().all(|(_, v)| !v.is_empty()).then_some(shown)
    })
    .await?;
    assert_eq!(
        shown,
        [
            ("newer".to_string(), env!("CARGO_PKG_VERSION").to_string()),
            ("older".to_string(), PREVIOUS_VERSION.to_string())
        ]
    );
    let mut before: Vec<usize> = Vec::new();
    for monitor in &monitors {
        results_after(&central, monitor, 0).await?;
        before.push(stored_once(&central, monitor).await?.len());
    }

    // This checkout's central on the previous one's database: its migrations apply.
    central.set_program(&binary("central"));
    central.restart().await?;
    let (status, about) = central.admin(Method::GET, "/api/v1/version", None).await?;
    assert_eq!(
        (status, about["version"].as_str()),
        (200, Some(env!("CARGO_PKG_VERSION")))
    );
    for (monitor, known) in monitors.iter().zip(&before) {
        results_after(&central, monitor, *known).await?;
        // The history from before the upgrade is still there.
        assert!(stored_once(&central, monitor).await?.len() > *known);
        central.wait_for_status(monitor, "up", WAIT).await?;
    }

    // The older agent replaced by this checkout's, on its data directory.
    let known = stored_once(&central, &monitors[0]).await?.len();
    older.set_program(&binary("poller-agent"));
    older.restart().await?;
    results_after(&central, &monitors[0], known).await?;

    let from_older = all_delivered_once(&central, &older, &monitors[0]).await?;
    let from_newer = all_delivered_once(&central, &newer, &monitors[1]).await?;
    println!("stored once: {from_older} results of the upgraded agent, {from_newer} of the other");
    let shown = versions_of_pollers(&central).await?;
    assert_eq!(shown.len(), 2, "nobody registered again: {shown:?}");
    eventually(WAIT, "the upgraded agent's version at central", || async {
        let shown = versions_of_pollers(&central).await.ok()?;
        shown
            .iter()
            .all(|(_, v)| v == env!("CARGO_PKG_VERSION"))
            .then_some(())
    })
    .await?;
    let (_, status) = central
        .admin(
            Method::GET,
            &format!("/api/v1/monitors/{}", monitors[0]),
            None,
        )
        .await?;
    assert_eq!(
        status["status"],
        json!("up"),
        "{}",
        Value::to_string(&status)
    );
    Ok(())
}

const ENROLMENT_SECRET: &str = "e2e-upgrade-enrolment-0123456789";

/// How many `event`s the receiver was told about `monitor`.
fn told(receiver: &HttpReceiver, event: &str, monitor: &str) -> usize {
    receiver.count_matching(|r| r.json["event"] == event && r.json["monitor"]["id"] == monitor)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL and HAProxy: E2E_DATABASE=postgres cargo test -p e2e --test e2e -- --include-ignored"]
async fn a_rolling_upgrade_of_two_replicas_loses_nothing_and_tells_each_change_once(
) -> anyhow::Result<()> {
    let Some(previous) = previous_release() else {
        println!("skipped: set E2E_PREVIOUS_RELEASE_BIN (scripts/previous-release.sh)");
        return Ok(());
    };
    let server = Postgres::start().await?;
    let url = server.create_database("central").await?;
    let env = [
        ("CENTRAL_REGISTRATION_TOKEN", ENROLMENT_SECRET),
        ("CENTRAL_TRUSTED_PROXIES", "127.0.0.1/32"),
    ];
    let old = previous.join("central");
    let mut first = Central::start_replica_program(&old, &url, &env).await?;
    let mut second = Central::start_replica_program(&old, &url, &env).await?;
    let balancer = LoadBalancer::haproxy(&[&first.addr, &second.addr]).await?;

    let target = Target::start().await?;
    let receiver = HttpReceiver::start().await?;
    first
        .create_channel(
            json!({"name": "told", "kind": "webhook", "url": receiver.url,
            "default": true}),
        )
        .await?;
    let mut monitors = Vec::new();
    for region in ["old", "new"] {
        let spec = json!({"name": format!("checked by the {region} agent"), "kind": "http",
            "target": format!("{}?from={region}", target.url), "interval_ms": 5_000,
            "poller_mode": "grouped", "poller_region": region});
        monitors.push(first.create_monitor(spec).await?);
    }
    let dir = tempfile::tempdir()?;
    let older = Agent::start_program(
        &previous.join("poller-agent"),
        &balancer.url,
        Some(ENROLMENT_SECRET.into()),
        &dir.path().join("older"),
        &[("POLLER_NAME", "older"), ("POLLER_REGION", "old")],
    )
    .await?;
    let newer = Agent::start_with(
        &balancer.url,
        Some(ENROLMENT_SECRET.into()),
        &dir.path().join("newer"),
        &[("POLLER_NAME", "newer"), ("POLLER_REGION", "new")],
    )
    .await?;
    for monitor in &monitors {
        first.wait_for_status(monitor, "up", WAIT).await?;
    }

    // The target fails; one replica after the other is upgraded while it is down.
    target.answer_with(503);
    for monitor in &monitors {
        first.wait_for_status(monitor, "down", WAIT).await?;
        eventually(WAIT, "monitor.down told", || async {
            (told(&receiver, "monitor.down", monitor) >= 1).then_some(())
        })
        .await?;
    }
    second.set_program(&binary("central"));
    second.restart().await?;
    let (_, about) = second.admin(Method::GET, "/api/v1/version", None).await?;
    assert_eq!(about["version"].as_str(), Some(env!("CARGO_PKG_VERSION")));
    // The previous release's replica still serves on the migrated schema.
    let (status, listed) = first.admin(Method::GET, "/api/v1/monitors", None).await?;
    assert_eq!(
        status, 200,
        "the older replica on the newer schema: {listed}"
    );
    let known: Vec<usize> = {
        let mut known = Vec::new();
        for monitor in &monitors {
            known.push(first.result_ids(monitor).await?.len());
        }
        known
    };
    for (monitor, known) in monitors.iter().zip(&known) {
        results_after(&first, monitor, *known).await?;
    }
    target.answer_with(200);
    first.set_program(&binary("central"));
    first.restart().await?;
    for monitor in &monitors {
        second.wait_for_status(monitor, "up", WAIT).await?;
    }

    for monitor in &monitors {
        let monitor = monitor.as_str();
        eventually(WAIT, "the recovery told", || async {
            (told(&receiver, "monitor.up", monitor) >= 1).then_some(())
        })
        .await?;
    }
    // Time for a second replica's duplicate, were there one.
    tokio::time::sleep(Duration::from_secs(10)).await;
    for monitor in &monitors {
        assert_eq!(
            (
                told(&receiver, "monitor.down", monitor),
                told(&receiver, "monitor.up", monitor)
            ),
            (1, 1),
            "each change told once across the upgrade: {:?}",
            receiver
                .received()
                .iter()
                .map(|r| &r.json["event"])
                .collect::<Vec<_>>()
        );
    }
    let from_older = all_delivered_once(&second, &older, &monitors[0]).await?;
    let from_newer = all_delivered_once(&second, &newer, &monitors[1]).await?;
    println!("rolling upgrade: stored once: {from_older} + {from_newer} results");
    assert_eq!(versions_of_pollers(&second).await?.len(), 2);
    drop(server);
    Ok(())
}
