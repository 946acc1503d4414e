//! Hostile targets, end to end: one agent polls, all at once, a target that misbehaves in every
//! way a raw socket allows (absurd `Retry-After` and rate-limit headers, a broken status line,
//! no HTTP at all, huge or countless headers, endless, slow, lying and inflating bodies, a
//! redirect loop, a lying `304`, a flapping target that ends up rate limiting), beside one
//! healthy monitor on the same host.
//!
//! It proves that the agent survives them with bounded memory, that the healthy monitor never
//! misses a check, and that each monitor's status at central is the verdict a person would give.
//! Every failed expectation is collected and reported together, with what central said.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use e2e::hostile::HostileServer;
use e2e::{eventually, Agent, Central};
use reqwest::Method;
use serde_json::{json, Value};

const INTERVAL: Duration = Duration::from_secs(5);
/// How long the monitors run before they are judged.
const RUN: Duration = Duration::from_secs(40);
/// How long after the run a verdict may still take to settle.
const SETTLE: Duration = Duration::from_secs(30);
/// Slack on the healthy monitor's interval.
const JITTER: Duration = Duration::from_millis(1500);
const MAX_PEAK_RSS_MB: u64 = 150;

const UP: &[&str] = &["up"];
const DOWN: &[&str] = &["down"];
/// Only rate-limited results: no verdict yet.
const PENDING: &[&str] = &["pending"];
/// An answer an HTTP client may accept or refuse: either verdict will do, a crash will not.
const UP_OR_DOWN: &[&str] = &["up", "down"];

/// One misbehaviour: the path that serves it, the monitor's settings, and the verdict.
struct Case {
    path: &'static str,
    settings: Value,
    expect: &'static [&'static str],
    /// Text central's `message` must contain.
    message: Option<&'static str>,
    /// Requests the target must have received during the run: the agent kept polling.
    min_hits: usize,
    /// Results central must hold before the verdict is judged.
    min_results: usize,
}

fn case(path: &'static str, settings: Value, expect: &'static [&'static str]) -> Case {
    Case {
        path,
        settings,
        expect,
        message: None,
        min_hits: 0,
        min_results: 1,
    }
}

impl Case {
    fn message(self, text: &'static str) -> Case {
        Case {
            message: Some(text),
            ..self
        }
    }

    fn hit_at_least(self, hits: usize) -> Case {
        Case {
            min_hits: hits,
            ..self
        }
    }

    fn judged_after(self, results: usize) -> Case {
        Case {
            min_results: results,
            ..self
        }
    }
}

/// The misbehaviours served by [`HostileServer`], one monitor each.
fn cases() -> Vec<Case> {
    // The engine caps a target's `Retry-After` at the monitor's `backoff_max_ms`.
    let capped = || json!({"backoff_max_ms": 10000});
    let needle = || json!({"keyword": "needle"});
    vec![
        case("/healthy", json!({}), UP),
        case("/retry-after-huge", capped(), PENDING).hit_at_least(2),
        case("/retry-after-date-far", capped(), PENDING).hit_at_least(2),
        case("/retry-after-garbage", json!({}), PENDING),
        // A 503 is the target being unavailable, even when it says when to come back.
        case("/unavailable-with-retry-after", json!({}), DOWN),
        case("/unavailable", json!({}), DOWN),
        case("/ratelimit-headers-absurd", capped(), UP).hit_at_least(2),
        case("/bad-status", json!({}), DOWN),
        case("/garbage", json!({}), DOWN),
        // Whether the HTTP client takes a 256 KiB header or 2,000 headers is its business;
        // the agent must survive either way. Seen: the 256 KiB header is accepted (up: it fits
        // hyper's ~400 KiB head buffer); 2,000 headers are refused (down: `message head is too
        // large`).
        case("/huge-header", json!({}), UP_OR_DOWN),
        case("/many-headers", json!({}), UP_OR_DOWN),
        case("/invalid-utf8-header", json!({}), UP),
        // The agent stops reading at its 1 MiB body cap and decides on what it read.
        case("/endless", needle(), DOWN),
        case("/endless-with-keyword", needle(), UP),
        // Reaching the cap is not a failure, even with nothing asserted on the body.
        case("/endless-plain", json!({}), UP),
        // Inflated or not, only 1 MiB is looked at; memory is covered by the RSS bound.
        case("/gzip-bomb", needle(), DOWN),
        // The timeout covers the whole check, body included.
        case("/slow-body", json!({"keyword": "x"}), DOWN).message("timeout"),
        // A page that never finishes is down with nothing asserted on its body too: the body
        // is always read to its end within the timeout.
        case("/slow-body-plain", json!({}), DOWN).message("body stalled"),
        case("/slow-headers", json!({}), DOWN).message("timeout"),
        // The body ended before its announced length: the keyword in it does not make it up.
        case("/content-length-lie", needle(), DOWN),
        case("/content-length-lie-plain", json!({}), DOWN).message("reading body failed"),
        case("/redirect-loop", json!({}), DOWN),
        // Validators are kept only from an answer that passed every assertion, so the lying
        // 304 is never asked for.
        case(
            "/conditional-lie",
            json!({"conditional": true, "keyword": "good"}),
            DOWN,
        ),
        // 200, 429, 500, 200, 500, then 429 for ever: the newest verdict (500) stands, however
        // many rate-limited results follow it.
        case(
            "/flip-then-limited",
            json!({"backoff_max_ms": 10000, "dead_letter_after": 1000, "breaker_threshold": 1000}),
            DOWN,
        )
        .judged_after(6),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_survives_hostile_targets_and_gives_each_the_verdict_a_person_would(
) -> anyhow::Result<()> {
    let (central, server) = tokio::join!(Central::start(), HostileServer::start());
    let (central, server) = (central?, server?);
    let token = central.registration_token().await?;
    let mut agent =
        Agent::start(&central.url, Some(token), &central.dir.path().join("agent")).await?;
    eventually(Duration::from_secs(30), "the agent online", || async {
        let (_, pollers) = central
            .admin(Method::GET, "/api/v1/pollers", None)
            .await
            .ok()?;
        pollers["items"]
            .as_array()?
            .iter()
            .any(|p| p["status"] == "online")
            .then_some(())
    })
    .await?;

    let cases = cases();
    let mut monitors = Vec::new();
    for case in &cases {
        let spec = json!({"name": case.path, "kind": "http", "target": server.url(case.path),
                          "interval_ms": INTERVAL.as_millis() as u64, "timeout_ms": 2000,
                          "settings": case.settings});
        monitors.push(central.create_monitor(spec).await?);
    }
    let started = Instant::now();
    tokio::time::sleep(RUN).await;
    let hits_in_run: Vec<usize> = cases.iter().map(|c| server.hits(c.path)).collect();

    let mut failures = Vec::new();
    let deadline = started + RUN + SETTLE;
    for ((case, monitor), hits) in cases.iter().zip(&monitors).zip(&hits_in_run) {
        if let Err(problem) = expect_verdict(&central, case, monitor, deadline).await {
            println!("--- {}: {problem}", case.path);
            println!("status: {}", central.status(monitor).await?);
            println!(
                "agent log about it:\n{}",
                log_tail(&agent.log(), monitor, 8)
            );
            failures.push(format!("{}: {problem}", case.path));
        }
        if *hits < case.min_hits {
            let status = central.status(monitor).await?;
            failures.push(format!(
                "{}: the target was asked {hits} times in {RUN:?}, expected at least {} \
                 (next_check_at {})",
                case.path, case.min_hits, status["next_check_at"]
            ));
        }
    }
    let conditional = server
        .served("/conditional-lie")
        .iter()
        .filter(|s| s.has_header("if-none-match") || s.has_header("if-modified-since"))
        .count();
    if conditional > 0 {
        failures.push(format!(
            "/conditional-lie: {conditional} conditional requests, from validators of an \
             answer that failed its keyword"
        ));
    }
    let healthy = &monitors[cases.iter().position(|c| c.path == "/healthy").unwrap()];
    failures.extend(healthy_never_missed_a_check(&central, healthy).await?);

    if let Some(exit) = agent.exit_status() {
        failures.push(format!("the agent exited: {exit}"));
    }
    if agent.log().contains("panicked") {
        failures.push("the agent's log says it panicked".into());
    }
    match agent.peak_rss_bytes() {
        Some(bytes) => {
            let mb = bytes / (1024 * 1024);
            println!("hostile targets: agent peak RSS {mb} MB");
            if mb >= MAX_PEAK_RSS_MB {
                failures.push(format!(
                    "the agent's peak RSS is {mb} MB, over {MAX_PEAK_RSS_MB} MB"
                ));
            }
        }
        None => failures.push("the agent's peak RSS could not be read".into()),
    }

    println!("\n{:<30} {:>5}  status at central", "path", "hits");
    for (case, monitor) in cases.iter().zip(&monitors) {
        let status = central.status(monitor).await?;
        println!(
            "{:<30} {:>5}  {} ({})",
            case.path,
            server.hits(case.path),
            status["status"],
            status["message"]
        );
        let mut answers: Vec<String> = server
            .served(case.path)
            .into_iter()
            .map(|s| s.answer)
            .collect();
        answers.dedup();
        println!("{:<37}answered: {}", "", answers.join(" | "));
    }
    if !failures.is_empty() {
        let log = agent.log();
        let tail: Vec<&str> = log.lines().rev().take(30).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        println!("\nagent log tail:\n{}", tail.join("\n"));
    }
    agent.kill().await;
    central.stop().await;
    assert!(
        failures.is_empty(),
        "{} expectations failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    Ok(())
}

/// Waits until `deadline` for the case's verdict; on failure, says what central said last.
async fn expect_verdict(
    central: &Central,
    case: &Case,
    monitor: &str,
    deadline: Instant,
) -> Result<(), String> {
    let last = Mutex::new(String::new());
    let wait = deadline.saturating_duration_since(Instant::now());
    let outcome = eventually(wait, case.path, || async {
        match judge(central, case, monitor).await {
            Ok(()) => Some(()),
            Err(problem) => {
                *last.lock().unwrap() = problem;
                None
            }
        }
    })
    .await;
    outcome.map_err(|_| last.into_inner().unwrap())
}

/// Whether the case's verdict holds now; if not, what central says.
async fn judge(central: &Central, case: &Case, monitor: &str) -> Result<(), String> {
    let results = results(central, monitor).await.map_err(|e| e.to_string())?;
    if results.len() < case.min_results {
        return Err(format!(
            "only {} results at central, judged after {}",
            results.len(),
            case.min_results
        ));
    }
    let status = central.status(monitor).await.map_err(|e| e.to_string())?;
    let now = status["status"].as_str().unwrap_or("none");
    let message = status["message"].as_str().unwrap_or("");
    let status_ok = case.expect.contains(&now);
    let message_ok = case.message.is_none_or(|m| message.contains(m));
    if status_ok && message_ok {
        return Ok(());
    }
    let wanted_message = case.message.map_or(String::new(), |m| {
        format!(" with a message containing {m:?}")
    });
    Err(format!(
        "expected {}{wanted_message}; central says {now}, message {message:?}, reason {}",
        case.expect.join(" or "),
        status["reason"]
    ))
}

/// Every gap between the healthy monitor's checks is about one interval, and none is missing.
async fn healthy_never_missed_a_check(
    central: &Central,
    monitor: &str,
) -> anyhow::Result<Vec<String>> {
    let times: Vec<DateTime<Utc>> = results(central, monitor)
        .await?
        .iter()
        .filter_map(|r| r["ts"].as_str())
        .filter_map(|ts| DateTime::parse_from_rfc3339(ts).ok())
        .map(|ts| ts.with_timezone(&Utc))
        .collect();
    let Some(first) = times.first() else {
        return Ok(vec!["/healthy: no results at all".into()]);
    };
    let mut problems = Vec::new();
    let longest = times
        .windows(2)
        .map(|w| (w[1] - w[0]).to_std().unwrap_or_default())
        .max()
        .unwrap_or_default();
    if longest > INTERVAL + JITTER {
        problems.push(format!(
            "/healthy: {longest:?} between two checks, more than {:?}",
            INTERVAL + JITTER
        ));
    }
    let span = (Utc::now() - first).to_std().unwrap_or_default();
    let expected = ((span.as_secs_f64() / INTERVAL.as_secs_f64()) as usize).saturating_sub(1);
    if times.len() < expected {
        problems.push(format!(
            "/healthy: {} results over {span:?}, expected at least {expected}",
            times.len()
        ));
    }
    println!(
        "healthy monitor: {} results over {span:.1?}, longest gap {longest:.1?}",
        times.len()
    );
    Ok(problems)
}

/// The monitor's results at central, oldest first.
async fn results(central: &Central, monitor: &str) -> anyhow::Result<Vec<Value>> {
    let path = format!("/api/v1/monitors/{monitor}/results?limit=1000");
    let (status, page) = central.admin(Method::GET, &path, None).await?;
    anyhow::ensure!(status == 200, "results: {status} {page}");
    Ok(page["items"].as_array().cloned().unwrap_or_default())
}

/// The last `n` lines of the agent's log that mention `monitor`.
fn log_tail(log: &str, monitor: &str, n: usize) -> String {
    let lines: Vec<&str> = log.lines().filter(|l| l.contains(monitor)).collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
