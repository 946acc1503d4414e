//! Nothing is lost: every result an agent produced reaches central exactly once, through
//! central outages, agent crashes (`kill -9`) and restarts. Real binaries, real SQLite files.
//!
//! "Produced" means committed to the agent's queue: the agent logs each result id right after
//! the commit, and the tests compare those ids with the ids central stores. Central may hold
//! no id that the agent did not at least log as being committed (a `kill -9` can fall between
//! the commit and its "queued" line).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use anyhow::Context;
use e2e::{eventually, Agent, Central, Target};
use reqwest::Method;
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(90);

async fn monitors(central: &Central, target: &Target, count: usize) -> anyhow::Result<Vec<String>> {
    let mut ids = Vec::new();
    for i in 0..count {
        let spec = json!({"name": format!("m{i}"), "kind": "http", "target": format!("{}?m={i}", target.url), "interval_ms": 5000});
        ids.push(central.create_monitor(spec).await?);
    }
    Ok(ids)
}

async fn stored_ids(central: &Central, monitors: &[String]) -> anyhow::Result<Vec<String>> {
    let mut all = Vec::new();
    for monitor in monitors {
        all.extend(central.result_ids(monitor).await?);
    }
    Ok(all)
}

/// Waits until central holds every result the agent has queued so far, then checks that it
/// holds nothing else and nothing twice. Returns how many results that was.
async fn assert_all_delivered_once(
    central: &Central,
    agent: &Agent,
    monitors: &[String],
) -> anyhow::Result<usize> {
    let produced = agent.queued_ids();
    anyhow::ensure!(
        !produced.is_empty(),
        "the agent produced nothing:\n{}",
        agent.log()
    );
    let stored = eventually(TIMEOUT, "central to hold every queued result", || async {
        let stored = stored_ids(central, monitors).await.ok()?;
        let set: HashSet<String> = stored.iter().cloned().collect();
        produced.is_subset(&set).then_some(stored)
    })
    .await
    .map_err(|e| {
        let stored: HashSet<String> = HashSet::new();
        let missing = produced.difference(&stored).count();
        anyhow::anyhow!(
            "{e}; {missing} queued results missing\nagent log tail:\n{}",
            tail(&agent.log())
        )
    })?;
    let unique: HashSet<&String> = stored.iter().collect();
    assert_eq!(unique.len(), stored.len(), "a result was stored twice");
    // A result committed just before a `kill -9` may lack its "queued" log line; it was still
    // made by the agent, which logged that it was committing it.
    let known = agent.committing_ids();
    let phantom: Vec<&String> = stored.iter().filter(|id| !known.contains(*id)).collect();
    assert!(
        phantom.is_empty(),
        "central holds results the agent never queued: {phantom:?}"
    );
    Ok(produced.len())
}

/// Central knows one poller: the agent never registered again.
async fn assert_one_poller(central: &Central, why: &str) -> anyhow::Result<()> {
    let (_, pollers) = central.admin(Method::GET, "/api/v1/pollers", None).await?;
    assert_eq!(pollers["items"].as_array().unwrap().len(), 1, "{why}");
    Ok(())
}

fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_central_outage_loses_nothing_and_polling_goes_on() -> anyhow::Result<()> {
    let mut central = Central::start().await?;
    let target = Target::start().await?;
    let token = central.registration_token().await?;
    let monitors = monitors(&central, &target, 3).await?;
    let agent = Agent::start(&central.url, Some(token), &central.dir.path().join("agent")).await?;
    for monitor in &monitors {
        central.wait_for_status(monitor, "up", TIMEOUT).await?;
    }

    central.kill().await;
    let outage_started = Instant::now();
    let hits_before = target.hits();
    tokio::time::sleep(Duration::from_secs(12)).await;
    let checks_during_outage = target.hits() - hits_before;
    assert!(
        checks_during_outage >= 6,
        "the agent kept polling: {checks_during_outage} checks in 12 s"
    );
    central.restart().await?;

    let delivered = assert_all_delivered_once(&central, &agent, &monitors).await?;
    assert!(delivered >= 9, "{delivered}");
    // The outage left no hole in any monitor's history.
    for monitor in &monitors {
        let (_, page) = central
            .admin(
                Method::GET,
                &format!("/api/v1/monitors/{monitor}/results?limit=1000"),
                None,
            )
            .await?;
        let times: Vec<chrono_free::Ts> = page["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| chrono_free::Ts::parse(r["ts"].as_str().unwrap()))
            .collect();
        let widest = times
            .windows(2)
            .map(|w| w[1].0 - w[0].0)
            .fold(0.0, f64::max);
        assert!(
            widest < 8.0,
            "a gap of {widest} s in {monitor}'s results across a {:?} outage",
            outage_started.elapsed()
        );
    }
    Ok(())
}

/// Central's own outage is not its pollers' silence, however short: restarts of a few seconds,
/// shorter than the lease's lapse, with pollers due to be called offline after 3 s of silence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_central_restarts_never_call_a_healthy_poller_offline() -> anyhow::Result<()> {
    let mut central = Central::start_with(&[("CENTRAL_OFFLINE_AFTER", "3s")]).await?;
    let _agent = central.start_agent("eu-1", "eu").await?;
    let poller = eventually(TIMEOUT, "the poller online", || async {
        let (_, pollers) = central
            .admin(Method::GET, "/api/v1/pollers", None)
            .await
            .ok()?;
        let poller = pollers["items"].as_array()?.first()?.clone();
        (poller["status"] == "online").then(|| poller["id"].as_str().map(String::from))?
    })
    .await?;
    // Each restart leaves the agent (heartbeats every second) 2.5 s and a start without
    // central: counted from its last heartbeat, that silence is 4 s more often than not (3 s
    // otherwise); central's own gap in looking at the lease stays under the 5 s lapse.
    for _ in 0..4 {
        central.kill().await;
        tokio::time::sleep(Duration::from_millis(2500)).await;
        central.restart().await?;
        tokio::time::sleep(Duration::from_secs(4)).await;
    }
    assert_eq!(central.poller_statuses(&poller).await?, ["online"]);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_kill_9_of_the_agent_loses_nothing() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let target = Target::start().await?;
    let token = central.registration_token().await?;
    let monitors = monitors(&central, &target, 4).await?;
    let mut agent =
        Agent::start(&central.url, Some(token), &central.dir.path().join("agent")).await?;
    central.wait_for_status(&monitors[0], "up", TIMEOUT).await?;

    // Kill at pseudo-random moments; with uploads every second, many land mid-upload.
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_nanos() as u64;
    println!("kill schedule seed {seed}");
    for _ in 0..10 {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let wait = Duration::from_millis(300 + (seed >> 33) % 2700);
        tokio::time::sleep(wait).await;
        agent.kill().await;
        agent.restart().await?;
    }
    // Enough results for the check to mean something; a loaded machine may need a while.
    eventually(
        TIMEOUT,
        "8 results queued over the agent's runs",
        || async { (agent.queued_ids().len() >= 8).then_some(()) },
    )
    .await?;
    assert_all_delivered_once(&central, &agent, &monitors).await?;
    assert_one_poller(&central, "restarts never re-register").await
}

/// An agent upgraded by hand-over (`poller-agent/src/handover.rs`): a second agent started on
/// the running one's data directory waits for it, without checking or uploading; `SIGUSR1`
/// makes the first finish and exit cleanly, the second takes over with the same identity, the
/// target sees no gap wider than one interval (plus scheduling slack), and every result of
/// both reaches central once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_hands_over_to_its_successor_without_a_gap() -> anyhow::Result<()> {
    const INTERVAL: Duration = Duration::from_secs(5);
    let central = Central::start().await?;
    let target = Target::start().await?;
    let token = central.registration_token().await?;
    let spec = json!({"name": "handed", "kind": "http", "target": target.url,
                      "interval_ms": INTERVAL.as_millis() as u64});
    let monitors = vec![central.create_monitor(spec).await?];
    let dir = central.dir.path().join("agent");
    let mut old = Agent::start(&central.url, Some(token), &dir).await?;
    central.wait_for_status(&monitors[0], "up", TIMEOUT).await?;
    eventually(TIMEOUT, "three checks by the first agent", || async {
        (target.hits() >= 3).then_some(())
    })
    .await?;

    let mut new = Agent::start(&central.url, None, &dir).await?;
    eventually(
        TIMEOUT,
        "the second agent to wait for the first",
        || async {
            new.log()
                .contains("waiting for it to hand over")
                .then_some(())
        },
    )
    .await?;
    // Both alive, one checking: two intervals show two or three checks, not four to six.
    let before = target.hits();
    tokio::time::sleep(2 * INTERVAL + Duration::from_secs(1)).await;
    assert!(old.is_running() && new.exit_status().is_none());
    let during = target.hits() - before;
    assert!(
        during <= 3,
        "{during} checks in 11 s at a 5 s interval: both agents checked"
    );

    old.signal("USR1")?;
    let exited = old
        .wait_exit(TIMEOUT)
        .await
        .context("the first agent did not exit after SIGUSR1")?;
    assert!(exited.success(), "the hand-over ends cleanly: {exited}");
    let handed_at = std::time::Instant::now();
    eventually(TIMEOUT, "the second agent to take over", || async {
        new.log().contains("this one takes over").then_some(())
    })
    .await?;
    // Three intervals after the hand-over, checked by the second agent alone.
    eventually(TIMEOUT, "three checks after the hand-over", || async {
        let after = target.hit_times().into_iter().filter(|at| *at > handed_at);
        (after.count() >= 3).then_some(())
    })
    .await?;

    let hits = target.hit_times();
    let widest = hits
        .windows(2)
        .map(|pair| pair[1] - pair[0])
        .max()
        .unwrap_or_default();
    println!("widest gap between checks across the hand-over: {widest:?}");
    assert!(
        widest <= INTERVAL + Duration::from_millis(1_500),
        "a gap of {widest:?} between checks at a {INTERVAL:?} interval across the hand-over"
    );
    assert_all_delivered_once(&central, &new, &monitors).await?;
    assert_one_poller(&central, "the successor is the same poller").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_starts_and_polls_from_its_cache_while_central_is_down() -> anyhow::Result<()> {
    let mut central = Central::start().await?;
    let target = Target::start().await?;
    let token = central.registration_token().await?;
    let monitors = monitors(&central, &target, 2).await?;
    let mut agent =
        Agent::start(&central.url, Some(token), &central.dir.path().join("agent")).await?;
    for monitor in &monitors {
        central.wait_for_status(monitor, "up", TIMEOUT).await?;
    }
    agent.kill().await;
    central.kill().await;

    let hits = target.hits();
    agent.restart().await?;
    eventually(TIMEOUT, "the agent to poll with central down", || async {
        (target.hits() >= hits + 4).then_some(())
    })
    .await?;
    assert!(
        agent.log().contains("running cached assignments"),
        "{}",
        tail(&agent.log())
    );

    central.restart().await?;
    assert_all_delivered_once(&central, &agent, &monitors).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_drops_old_results_and_says_so() -> anyhow::Result<()> {
    let mut central = Central::start().await?;
    let target = Target::start().await?;
    let token = central.registration_token().await?;
    let monitors = monitors(&central, &target, 3).await?;
    let mut agent = Agent::start(&central.url, None, &central.dir.path().join("agent")).await?;
    agent.kill().await;
    agent.set_env("POLLER_REGISTRATION_TOKEN", &token);
    agent.set_env("POLLER_RETENTION", "2s");
    agent.restart().await?;
    central.wait_for_status(&monitors[0], "up", TIMEOUT).await?;

    central.kill().await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let metrics_url = agent.metrics_url().expect("metrics address in the log");
    let metrics = reqwest::get(&metrics_url).await?.text().await?;
    let dropped: f64 = metrics
        .lines()
        .find(|l| l.starts_with("poller_results_dropped_total"))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0.0);
    assert!(
        dropped >= 1.0,
        "results older than 2 s were dropped while central was down:\n{metrics}"
    );
    assert!(agent
        .log()
        .contains("older than POLLER_RETENTION were dropped"));

    central.restart().await?;
    let poller = eventually(TIMEOUT, "the heartbeat to report the loss", || async {
        let (_, pollers) = central
            .admin(Method::GET, "/api/v1/pollers", None)
            .await
            .ok()?;
        let poller = pollers["items"][0].clone();
        (poller["dropped_results"].as_u64()? >= dropped as u64).then_some(poller)
    })
    .await?;
    assert!(poller["dropped_results"].as_u64().unwrap() >= 1);
    // The loss is reported as a problem too, and the poller shows as degraded meanwhile.
    assert!(
        poller["last_error"]
            .as_str()
            .unwrap_or_default()
            .contains("dropped"),
        "{poller}"
    );
    assert_eq!(poller["status"], "degraded", "{poller}");
    Ok(())
}

/// RFC 3339 to seconds, without pulling a date crate into the tests.
mod chrono_free {
    pub struct Ts(pub f64);

    impl Ts {
        /// `2026-11-21T13:50:47.123Z` → seconds since an arbitrary epoch (only differences matter,
        /// and the tests span minutes within one day).
        pub fn parse(text: &str) -> Ts {
            let time = text
                .split('T')
                .nth(1)
                .unwrap_or_default()
                .trim_end_matches('Z');
            let mut parts = time.split(':');
            let h: f64 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0.0);
            let m: f64 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0.0);
            let s: f64 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0.0);
            Ts(h * 3600.0 + m * 60.0 + s)
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_queue_file_stops_the_agent_with_a_way_out() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let dir = central.dir.path().join("agent");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("poller.db"), vec![0x42u8; 64 * 1024])?;
    let mut agent = Agent::start(&central.url, Some("preg_x_y".into()), &dir).await?;
    let status = agent
        .wait_exit(Duration::from_secs(20))
        .await
        .expect("the agent exits");
    assert!(!status.success());
    let log = agent.log();
    assert!(
        log.contains("move it aside"),
        "the error says what to do:\n{log}"
    );
    assert_eq!(
        std::fs::read(dir.join("poller.db"))?,
        vec![0x42u8; 64 * 1024],
        "the file is left as it was"
    );
    Ok(())
}
