//! ICMP monitors with real agents, through raw sockets and through unprivileged ones: the
//! loopback addresses (IPv4 and IPv6) are up with their round trips in `meta.icmp`; a host in a
//! network namespace of the test's own, which drops ICMP, is down with its loss; an agent that
//! cannot open the sockets it was told to use says so and does not take `icmp` monitors.
//!
//! One test: the unprivileged part changes the machine's `net.ipv4.ping_group_range` (and
//! puts it back), which no other test may see changing under it.

use std::process::Command;
use std::time::Duration;

use e2e::{eventually, Agent, Central};
use reqwest::Method;
use serde_json::{json, Value};

fn run(args: &[&str]) -> anyhow::Result<String> {
    let output = Command::new(args[0]).args(&args[1..]).output()?;
    anyhow::ensure!(
        output.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(String::from_utf8(output.stdout)?)
}

/// A host at `address` in a network namespace of its own, reachable over a veth pair, whose
/// firewall drops every ICMP packet; removed when dropped.
struct SilentHost {
    namespace: String,
    link: String,
    address: String,
}

impl SilentHost {
    fn start() -> anyhow::Result<SilentHost> {
        let id = std::process::id();
        let (namespace, link, peer) = (
            format!("icmp-e2e-{id}"),
            format!("vh{}", id % 100_000),
            format!("vn{}", id % 100_000),
        );
        let net = format!("10.253.{}", id % 250);
        let host = SilentHost {
            namespace: namespace.clone(),
            link: link.clone(),
            address: format!("{net}.2"),
        };
        let inside = |args: &[&str]| {
            let mut all = vec!["ip", "netns", "exec", namespace.as_str()];
            all.extend_from_slice(args);
            run(&all)
        };
        run(&["ip", "netns", "add", &namespace])?;
        run(&[
            "ip", "link", "add", &link, "type", "veth", "peer", "name", &peer,
        ])?;
        run(&["ip", "link", "set", &peer, "netns", &namespace])?;
        run(&["ip", "addr", "add", &format!("{net}.1/30"), "dev", &link])?;
        run(&["ip", "link", "set", &link, "up"])?;
        inside(&["ip", "addr", "add", &format!("{net}.2/30"), "dev", &peer])?;
        inside(&["ip", "link", "set", &peer, "up"])?;
        inside(&["ip", "link", "set", "lo", "up"])?;
        inside(&[
            "nft",
            "add table inet quiet; add chain inet quiet input { type filter hook input priority 0; policy accept; }; add rule inet quiet input meta l4proto { icmp, ipv6-icmp } drop",
        ])?;
        Ok(host)
    }
}

impl Drop for SilentHost {
    fn drop(&mut self) {
        let _ = run(&["ip", "link", "del", &self.link]);
        let _ = run(&["ip", "netns", "del", &self.namespace]);
    }
}

/// Sets `net.ipv4.ping_group_range` for as long as it lives, then puts the old value back.
struct PingGroups(String);

impl PingGroups {
    fn set(range: &str) -> anyhow::Result<PingGroups> {
        let old = run(&["sysctl", "-n", "net.ipv4.ping_group_range"])?
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        run(&[
            "sysctl",
            "-w",
            &format!("net.ipv4.ping_group_range={range}"),
        ])?;
        Ok(PingGroups(old))
    }
}

impl Drop for PingGroups {
    fn drop(&mut self) {
        let _ = run(&[
            "sysctl",
            "-w",
            &format!("net.ipv4.ping_group_range={}", self.0),
        ]);
    }
}

fn icmp_monitor(name: &str, target: &str, region: &str) -> Value {
    json!({"name": name, "kind": "icmp", "target": target, "interval_ms": 5000,
        "timeout_ms": 1000, "poller_mode": "grouped", "poller_region": region,
        "settings": {"count": 3, "echo_interval_ms": 200}})
}

async fn newest_meta(central: &Central, id: &str) -> anyhow::Result<Value> {
    let (status, body) = central
        .admin(
            Method::GET,
            &format!("/api/v1/monitors/{id}/results?limit=1"),
            None,
        )
        .await?;
    anyhow::ensure!(status == 200, "results: {status} {body}");
    Ok(body["items"][0]["meta"]["icmp"].clone())
}

/// An agent in `region` told to use `socket` (`POLLER_ICMP_SOCKET`) from its first start.
async fn agent_using(
    central: &Central,
    name: &str,
    region: &str,
    socket: &str,
) -> anyhow::Result<Agent> {
    let token = central.registration_token().await?;
    Agent::start_with(
        &central.url,
        Some(token),
        &central.dir.path().join(name),
        &[
            ("POLLER_NAME", name),
            ("POLLER_REGION", region),
            ("POLLER_ICMP_SOCKET", socket),
        ],
    )
    .await
}

/// An agent in `region` told to use `socket`: loopback is up over IPv4 and IPv6, the silent
/// host down with all its echoes lost.
async fn answers_through(
    central: &Central,
    socket: &str,
    region: &str,
    silent: &SilentHost,
) -> anyhow::Result<()> {
    let mut agent = agent_using(central, &format!("icmp-{socket}"), region, socket).await?;
    let said = format!("icmp: checks use {socket} ICMP sockets");
    eventually(
        Duration::from_secs(10),
        "the agent's ICMP socket",
        || async { agent.log().contains(&said).then_some(()) },
    )
    .await?;
    let v4 = central
        .create_monitor(icmp_monitor(&format!("{socket} v4"), "127.0.0.1", region))
        .await?;
    let v6 = central
        .create_monitor(icmp_monitor(&format!("{socket} v6"), "::1", region))
        .await?;
    let quiet = central
        .create_monitor(icmp_monitor(
            &format!("{socket} quiet"),
            &silent.address,
            region,
        ))
        .await?;
    for id in [&v4, &v6] {
        central
            .wait_for_status(id, "up", Duration::from_secs(30))
            .await?;
        let meta = newest_meta(central, id).await?;
        assert_eq!(
            (meta["sent"].as_u64(), meta["received"].as_u64()),
            (Some(3), Some(3)),
            "{meta}"
        );
        assert_eq!(meta["socket"], socket, "{meta}");
        assert!(
            meta["rtt_ms"]["max"].as_f64().unwrap_or(-1.0) >= 0.0,
            "{meta}"
        );
    }
    let down = central
        .wait_for_status(&quiet, "down", Duration::from_secs(30))
        .await?;
    let message = down["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!("3 of 3 echoes to {} unanswered", silent.address))
            && message.contains("100% loss"),
        "{down}"
    );
    let meta = newest_meta(central, &quiet).await?;
    assert_eq!(meta["loss_percent"], 100.0, "{meta}");
    assert!(meta["rtt_ms"].is_null(), "{meta}");
    agent.kill().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn icmp_through_raw_and_unprivileged_sockets() -> anyhow::Result<()> {
    let silent = SilentHost::start()?;
    // The host is there (it refuses a TCP connection at once): only its ICMP goes unanswered.
    let refused = std::net::TcpStream::connect_timeout(
        &format!("{}:9", silent.address).parse()?,
        Duration::from_secs(3),
    )
    .unwrap_err();
    assert_eq!(
        refused.kind(),
        std::io::ErrorKind::ConnectionRefused,
        "{refused}"
    );
    let central = Central::start().await?;

    // Raw sockets (this test runs as root, with CAP_NET_RAW).
    answers_through(&central, "raw", "raw", &silent).await?;

    // Unprivileged sockets, where ping_group_range holds the agent's group.
    {
        let _allowed = PingGroups::set("0 0")?;
        answers_through(&central, "unprivileged", "dgram", &silent).await?;
    }

    // Not allowed: the agent says so and takes no `icmp` monitor.
    let _refused = PingGroups::set("1 0")?;
    let agent = agent_using(&central, "icmp-none", "none", "unprivileged").await?;
    eventually(Duration::from_secs(10), "the agent's warning", || async {
        agent
            .log()
            .contains("the capability icmp is not advertised")
            .then_some(())
    })
    .await?;
    let (status, pollers) = central.admin(Method::GET, "/api/v1/pollers", None).await?;
    assert_eq!(status, 200);
    let unplaced = central
        .create_monitor(icmp_monitor("nowhere", "127.0.0.1", "none"))
        .await?;
    let reason = eventually(Duration::from_secs(10), "the placement reason", || async {
        let (_, monitor) = central
            .admin(Method::GET, &format!("/api/v1/monitors/{unplaced}"), None)
            .await
            .ok()?;
        monitor["placement_reason"]
            .as_str()
            .filter(|r| r.contains("icmp"))
            .map(str::to_string)
    })
    .await?;
    assert!(reason.contains("capability"), "{reason}; pollers {pollers}");
    Ok(())
}
