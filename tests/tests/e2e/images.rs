//! The deploy images run for real (issue 70), with podman (`e2e::images`): central and two
//! agents as containers of one pod, configured as `deploy/compose.yaml` configures them.
//!
//! Runs when `E2E_IMAGES=1` (scripts/test.sh sets it beside the suites; it needs root, podman
//! and debootstrap); without it it returns at once. With `E2E_PREVIOUS_RELEASE_BIN` set too,
//! the previous release's agent image (its own Dockerfile, from its commit) joins the fleet.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use chrono::{DateTime, Utc};
use e2e::images::{build, ensure_base, label, podman, Pod};
use e2e::{admin_request, binary, eventually, ADMIN_TOKEN};
use reqwest::Method;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(120);
const REGISTRATION_TOKEN: &str = "e2e-images-registration-token-5d2c";

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn dockerfile(name: &str) -> anyhow::Result<String> {
    let path = repo_root().join("deploy").join(name);
    std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))
}

/// `deploy/<file>` as the previous release shipped it (from its pinned commit).
async fn previous_dockerfile(file: &str) -> anyhow::Result<String> {
    let script = std::fs::read_to_string(repo_root().join("scripts/previous-release.sh"))?;
    let commit = script
        .lines()
        .find_map(|l| l.strip_prefix("PREVIOUS_COMMIT="))
        .context("PREVIOUS_COMMIT in scripts/previous-release.sh")?;
    let output = tokio::process::Command::new("git")
        .current_dir(repo_root())
        .args(["show", &format!("{commit}:deploy/{file}")])
        .output()
        .await?;
    anyhow::ensure!(output.status.success(), "git show {commit}:deploy/{file}");
    Ok(String::from_utf8(output.stdout)?)
}

/// The value of `key` in the `<<: *agent-env` block of `deploy/compose.yaml`, default taken
/// (`${VAR:-default}`): what every agent of the compose file is given.
fn compose_agent_env() -> anyhow::Result<Vec<(String, String)>> {
    let compose = std::fs::read_to_string(repo_root().join("deploy/compose.yaml"))?;
    let block = compose
        .split("x-agent-env: &agent-env\n")
        .nth(1)
        .context("x-agent-env in compose.yaml")?;
    let mut env = Vec::new();
    for line in block.lines().take_while(|l| l.starts_with("  ")) {
        let (key, value) = line.trim().split_once(": ").context("KEY: value")?;
        let value = match value.strip_prefix("${").and_then(|v| v.strip_suffix('}')) {
            Some(var) => var
                .split_once(":-")
                .map(|(_, d)| d)
                .unwrap_or("")
                .to_string(),
            None => value.to_string(),
        };
        env.push((key.to_string(), value));
    }
    anyhow::ensure!(!env.is_empty(), "no agent environment in compose.yaml");
    Ok(env)
}

/// The pollers central knows: (name, id, version, online).
async fn pollers(http: &reqwest::Client, url: &str) -> Option<Vec<(String, String, String, bool)>> {
    let (status, body) = admin_request(http, url, Method::GET, "/api/v1/pollers?limit=100", None)
        .await
        .ok()?;
    (status == 200).then_some(())?;
    Some(
        body["items"]
            .as_array()?
            .iter()
            .map(|p| {
                (
                    p["name"].as_str().unwrap_or_default().to_string(),
                    p["id"].as_str().unwrap_or_default().to_string(),
                    p["version"].as_str().unwrap_or_default().to_string(),
                    p["status"] == "online",
                )
            })
            .collect(),
    )
}

async fn results(http: &reqwest::Client, url: &str, monitor: &str) -> anyhow::Result<Vec<Value>> {
    let (status, body) = admin_request(
        http,
        url,
        Method::GET,
        &format!("/api/v1/monitors/{monitor}/results?limit=1000"),
        None,
    )
    .await?;
    anyhow::ensure!(status == 200, "results: {status} {body}");
    Ok(body["items"].as_array().context("items")?.clone())
}

async fn create_monitor(http: &reqwest::Client, url: &str, spec: Value) -> anyhow::Result<String> {
    let (status, body) =
        admin_request(http, url, Method::POST, "/api/v1/monitors", Some(spec)).await?;
    anyhow::ensure!(status == 201, "creating a monitor: {status} {body}");
    Ok(body["id"].as_str().context("id")?.to_string())
}

/// An `http` check of central's health from the agents of `region` (central is on the pod's
/// localhost).
fn health_check(region: &str) -> Value {
    json!({"name": format!("central's health from {region}"), "kind": "http",
        "target": "http://127.0.0.1:8080/healthz", "interval_ms": 5000, "timeout_ms": 1000,
        "poller_mode": "grouped", "poller_region": region})
}

/// Waits until `monitor` has an `up` result from the poller `poller_id` checked after `after`.
async fn up_from(
    http: &reqwest::Client,
    url: &str,
    monitor: &str,
    poller_id: &str,
    after: DateTime<Utc>,
) -> anyhow::Result<()> {
    eventually(
        WAIT,
        &format!("an up result of {monitor} from {poller_id}"),
        || async {
            let results = results(http, url, monitor).await.ok()?;
            results
                .iter()
                .any(|r| {
                    r["poller_id"] == poller_id
                        && r["status"] == "up"
                        && r["ts"]
                            .as_str()
                            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                            .is_some_and(|t| t > after)
                })
                .then_some(())
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_images_run_a_fleet_as_the_compose_file_sets_it_up() -> anyhow::Result<()> {
    if std::env::var_os("E2E_IMAGES").is_none() {
        println!(
            "skipped: set E2E_IMAGES=1 (scripts/test.sh does; needs root, podman, debootstrap)"
        );
        return Ok(());
    }
    ensure_base().await?;
    let suffix = format!("e2e{}", std::process::id());
    let central_image = format!("localhost/poller-central:{suffix}");
    let agent_image = format!("localhost/poller-agent:{suffix}");
    let port = e2e::oidc::free_port()?;
    let url = format!("http://127.0.0.1:{port}");
    // The compose file's agents' sysctl: unprivileged ICMP for the image's user.
    let mut pod = Pod::create(&suffix, port, &["net.ipv4.ping_group_range=10001 10001"]).await?;
    pod.owns_image(&central_image);
    pod.owns_image(&agent_image);
    build(
        &central_image,
        &dockerfile("Dockerfile.central")?,
        &binary("central"),
    )
    .await?;
    build(
        &agent_image,
        &dockerfile("Dockerfile.poller-agent")?,
        &binary("poller-agent"),
    )
    .await?;

    // Each image says which release it is.
    let version = env!("CARGO_PKG_VERSION");
    for image in [&central_image, &agent_image] {
        assert_eq!(
            label(image, "org.opencontainers.image.version").await?,
            version,
            "{image}'s version label"
        );
    }

    pod.run(
        "central",
        &central_image,
        &[
            ("CENTRAL_ADMIN_TOKEN", ADMIN_TOKEN),
            ("CENTRAL_REGISTRATION_TOKEN", REGISTRATION_TOKEN),
            ("CENTRAL_OFFLINE_AFTER", "60s"),
        ],
    )
    .await?;
    let http = reqwest::Client::new();
    let ready = eventually(WAIT, "central's container to be ready", || async {
        let answer = http.get(format!("{url}/readyz")).send().await.ok()?;
        answer.status().is_success().then_some(())
    })
    .await;
    if let Err(e) = ready {
        anyhow::bail!("{e}\n{}", pod.logs("central").await);
    }

    // Two agents, with the compose file's environment, each in its own region; the first
    // also runs `icmp` (the compose file's capabilities leave it out by default).
    let compose_env = compose_agent_env()?;
    for (name, region, capabilities) in [
        ("agent-eu", "eu-west", "http,tcp,dns,tls,icmp"),
        ("agent-us", "us-east", "http,tcp,dns,tls"),
    ] {
        let mut env: Vec<(&str, &str)> = compose_env
            .iter()
            .filter(|(k, _)| k != "POLLER_CENTRAL_URL" && k != "POLLER_CAPABILITIES")
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        env.extend([
            // One pod, one network namespace: central is on localhost, as `central:8080`
            // is in the compose project's network.
            ("POLLER_CENTRAL_URL", "http://127.0.0.1:8080"),
            ("POLLER_CAPABILITIES", capabilities),
            ("POLLER_NAME", name),
            ("POLLER_REGION", region),
            ("POLLER_REGISTRATION_TOKEN", REGISTRATION_TOKEN),
            // Sooner than the compose file's 10 s, so the test waits less.
            ("POLLER_BATCH_INTERVAL", "1s"),
            ("POLLER_HEARTBEAT_INTERVAL", "2s"),
            // Each agent its own health port: the pod is one network namespace.
            (
                "POLLER_LISTEN",
                if name == "agent-eu" {
                    "127.0.0.1:9465"
                } else {
                    "127.0.0.1:9466"
                },
            ),
        ]);
        pod.run(name, &agent_image, &env).await?;
    }
    let fleet = eventually(WAIT, "both agents online", || async {
        let pollers = pollers(&http, &url).await?;
        (pollers.iter().filter(|p| p.3).count() == 2).then_some(pollers)
    })
    .await
    .with_context(|| "agents online")?;
    let id_of = |name: &str| {
        fleet
            .iter()
            .find(|p| p.0 == name)
            .map(|p| p.1.clone())
            .with_context(|| format!("{name} in {fleet:?}"))
    };
    let (eu, us) = (id_of("agent-eu")?, id_of("agent-us")?);
    assert!(
        fleet.iter().all(|p| p.2 == version),
        "the agents report the image's version: {fleet:?}"
    );

    // The image's user runs the checks: not root, the Dockerfile's 10001 (the process the
    // container started, as the kernel sees it).
    for name in ["central", "agent-eu", "agent-us"] {
        let uid = podman(&[
            "exec",
            &pod.container(name),
            "grep",
            "^Uid:",
            "/proc/1/status",
        ])
        .await?;
        let ids: Vec<&str> = uid.split_whitespace().skip(1).collect();
        assert_eq!(ids, ["10001"; 4], "{name} runs as {uid:?}");
    }

    let icmp = create_monitor(
        &http,
        &url,
        json!({"name": "loopback ping", "kind": "icmp", "target": "127.0.0.1",
            "interval_ms": 5000, "timeout_ms": 1000, "poller_mode": "grouped",
            "poller_region": "eu-west", "settings": {"count": 1}}),
    )
    .await?;
    let http_check = create_monitor(&http, &url, health_check("us-east")).await?;
    let start = Utc::now();
    up_from(&http, &url, &icmp, &eu, start).await?;
    up_from(&http, &url, &http_check, &us, start).await?;

    // A restart of an agent's container keeps its identity (central still knows two
    // pollers: it did not register again) and its data: it goes on checking as itself, and
    // no result reaches central twice.
    podman(&["restart", "-t", "20", &pod.container("agent-eu")]).await?;
    let restarted = Utc::now();
    up_from(&http, &url, &icmp, &eu, restarted).await?;
    let after = pollers(&http, &url).await.context("pollers")?;
    assert_eq!(after.len(), 2, "no poller registered again: {after:?}");
    let ids: Vec<String> = results(&http, &url, &icmp)
        .await?
        .iter()
        .filter_map(|r| r["id"].as_str().map(str::to_string))
        .collect();
    let unique: HashSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "every result stored once");

    // The previous release's agent image joins the current central.
    if let Some(dir) = std::env::var_os("E2E_PREVIOUS_RELEASE_BIN") {
        let previous_image = format!("localhost/poller-agent:{suffix}-previous");
        pod.owns_image(&previous_image);
        build(
            &previous_image,
            &previous_dockerfile("Dockerfile.poller-agent").await?,
            &PathBuf::from(dir).join("poller-agent"),
        )
        .await?;
        pod.run(
            "agent-previous",
            &previous_image,
            &[
                ("POLLER_CENTRAL_URL", "http://127.0.0.1:8080"),
                ("POLLER_NAME", "agent-previous"),
                ("POLLER_REGION", "ap-south"),
                ("POLLER_REGISTRATION_TOKEN", REGISTRATION_TOKEN),
                ("POLLER_BATCH_INTERVAL", "1s"),
                ("POLLER_HEARTBEAT_INTERVAL", "2s"),
                ("POLLER_LISTEN", "127.0.0.1:9467"),
            ],
        )
        .await?;
        let previous = eventually(WAIT, "the previous release's agent online", || async {
            let pollers = pollers(&http, &url).await?;
            pollers.into_iter().find(|p| p.0 == "agent-previous" && p.3)
        })
        .await?;
        assert_eq!(previous.2, "0.1.0", "{previous:?}");
        let from_previous = create_monitor(&http, &url, health_check("ap-south")).await?;
        up_from(&http, &url, &from_previous, &previous.1, start).await?;
    }
    Ok(())
}
