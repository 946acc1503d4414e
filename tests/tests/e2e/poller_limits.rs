//! A poller with valid credentials is still held to limits: its registration token's region
//! and capabilities, a heartbeat rate, a share of the long polls, and what central keeps of the
//! times and `meta` it reports.

use std::time::{Duration, Instant};

use e2e::Central;
use reqwest::Method;
use serde_json::{json, Value};

async fn post(central: &Central, path: &str, token: Option<&str>, body: Value) -> (u16, Value) {
    let mut request = reqwest::Client::new()
        .post(format!("{}{path}", central.url))
        .json(&body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.expect("central answers");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registration_tokens_region_and_capabilities_are_limits() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let (status, token) = central
        .admin(
            Method::POST,
            "/api/v1/registration-tokens",
            Some(
                json!({"name": "eu http", "region": "eu", "capabilities": ["http", "tcp"],
                        "max_uses": 2}),
            ),
        )
        .await?;
    assert_eq!(status, 201, "{token}");
    assert_eq!(token["capabilities"], json!(["http", "tcp"]));
    let secret = token["token"].as_str().unwrap();
    let register = |extra: Value| {
        let mut body = json!({"registration_token": secret, "name": "edge", "version": "test"});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };

    let (status, refused) = post(
        &central,
        "/api/poller/register",
        None,
        register(json!({"region": "us"})),
    )
    .await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(refused["error"], "region_not_allowed");
    assert!(refused["message"].as_str().unwrap().contains("`region`"));
    let (status, refused) = post(
        &central,
        "/api/poller/register",
        None,
        register(json!({"capabilities": ["http", "icmp"]})),
    )
    .await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(refused["error"], "capability_not_allowed");
    assert!(refused["message"].as_str().unwrap().contains("icmp"));

    // Refusals spent no use: the token still enrols two pollers.
    let mut ids = Vec::new();
    for name in ["edge-1", "edge-2"] {
        let (status, registered) = post(
            &central,
            "/api/poller/register",
            None,
            register(json!({"name": name})),
        )
        .await;
        assert_eq!(status, 200, "{registered}");
        ids.push((
            registered["poller_id"].as_str().unwrap().to_string(),
            registered["access_token"].as_str().unwrap().to_string(),
        ));
    }
    let (id, access) = &ids[0];
    let (_, poller) = central
        .admin(Method::GET, &format!("/api/v1/pollers/{id}"), None)
        .await?;
    assert_eq!(poller["region"], "eu", "the token's region, given");
    assert_eq!(poller["capabilities"], json!(["http", "tcp"]));

    // A heartbeat cannot widen them: what is outside the limit is left out, and said.
    let (status, answer) = post(
        &central,
        "/api/poller/heartbeat",
        Some(access),
        json!({"version": "test", "capabilities": ["http", "icmp"]}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let (_, poller) = central
        .admin(Method::GET, &format!("/api/v1/pollers/{id}"), None)
        .await?;
    assert_eq!(poller["capabilities"], json!(["http"]));
    assert_eq!(poller["status"], "degraded", "{poller}");
    assert!(
        poller["last_error"].as_str().unwrap().contains("icmp"),
        "{poller}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_poller_cannot_flood_heartbeats_or_hold_many_long_polls() -> anyhow::Result<()> {
    let central = Central::start_with(&[("CENTRAL_POLLER_HEARTBEATS_PER_MINUTE", "6")]).await?;
    let poller = central.register_poller("noisy").await?;
    let other = central.register_poller("quiet").await?;
    let beat = json!({"version": "test", "capabilities": ["http"]});

    // Six a minute: a burst of three, then refused with a time to wait.
    let mut statuses = Vec::new();
    for _ in 0..5 {
        statuses.push(
            post(
                &central,
                "/api/poller/heartbeat",
                Some(&poller.access),
                beat.clone(),
            )
            .await,
        );
    }
    let codes: Vec<u16> = statuses.iter().map(|(s, _)| *s).collect();
    assert_eq!(codes, [200, 200, 200, 429, 429], "{statuses:?}");
    assert_eq!(statuses[3].1["error"], "rate_limited");
    let (status, _) = post(
        &central,
        "/api/poller/heartbeat",
        Some(&other.access),
        beat.clone(),
    )
    .await;
    assert_eq!(status, 200, "another poller is not held back");

    // Two long polls per poller wait; a third is answered at once.
    let long_poll = |token: String| {
        let url = format!("{}/api/poller/assignments?since_version=0", central.url);
        async move {
            let http = reqwest::Client::new();
            // The first answer is the full set; the version it names is then waited on.
            let first: Value = http
                .get(&url)
                .bearer_auth(&token)
                .send()
                .await?
                .json()
                .await?;
            let version = first["version"].as_i64().unwrap_or(0);
            let started = Instant::now();
            let url = url.replace(
                "since_version=0",
                &format!("since_version={version}&wait=6"),
            );
            let status = http.get(&url).bearer_auth(&token).send().await?.status();
            anyhow::ensure!(status == 200, "long poll answered {status}");
            anyhow::Ok(started.elapsed())
        }
    };
    let waiting: Vec<_> = (0..2)
        .map(|_| tokio::spawn(long_poll(poller.access.clone())))
        .collect();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let third = long_poll(poller.access.clone()).await?;
    assert!(
        third < Duration::from_secs(3),
        "a third long poll of one poller waited {third:?}"
    );
    let elsewhere = tokio::spawn(long_poll(other.access.clone()));
    for held in waiting {
        let held = held.await??;
        assert!(held >= Duration::from_secs(5), "held {held:?}");
    }
    assert!(
        elsewhere.await?? >= Duration::from_secs(5),
        "another poller waits"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reported_times_and_meta_are_bounded() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let poller = central.register_poller("p").await?;
    let monitor = central
        .create_monitor(json!({"name": "m", "kind": "http", "target": "http://127.0.0.1:9/"}))
        .await?;
    let (_, view) = central
        .admin(Method::GET, &format!("/api/v1/monitors/{monitor}"), None)
        .await?;
    assert_eq!(view["assigned_poller_id"], poller.id.as_str());

    // An event dated next year is kept as happening when central heard of it.
    let (status, answer) = post(
        &central,
        "/api/poller/heartbeat",
        Some(&poller.access),
        json!({"version": "test", "capabilities": ["http"], "events": [
            {"monitor_id": monitor, "at": "2099-01-01T00:00:00Z", "event": "resumed",
             "next_due_at": "2099-01-01T00:00:00Z"}]}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let (_, events) = central
        .admin(
            Method::GET,
            &format!("/api/v1/pollers/{}/events", poller.id),
            None,
        )
        .await?;
    let at: chrono::DateTime<chrono::Utc> = events["items"][0]["at"].as_str().unwrap().parse()?;
    assert!(at <= chrono::Utc::now(), "{events}");
    let due: chrono::DateTime<chrono::Utc> = events["items"][0]["next_due_at"]
        .as_str()
        .unwrap()
        .parse()?;
    assert!(due <= at + chrono::Duration::days(1), "{events}");

    // A result whose meta is larger than central keeps still counts, with its size noted; and
    // a next check announced for 2099 does not keep the monitor from turning stale.
    let now = chrono::Utc::now();
    let (status, ack) = post(
        &central,
        "/api/poller/results",
        Some(&poller.access),
        json!({"batch_id": uuid::Uuid::new_v4(), "results": [{
            "id": uuid::Uuid::new_v4(), "monitor_id": monitor, "ts": now, "status": "up",
            "latency_ms": 3, "msg": "ok",
            "meta": {"body": "x".repeat(200_000), "engine": {"next_due_at": "2099-01-01T00:00:00Z"}}}]}),
    )
    .await;
    assert_eq!(status, 200, "{ack}");
    assert_eq!(ack["accepted"], 1, "{ack}");
    let results = central.results(&monitor).await?;
    assert!(
        results[0]["meta"]["meta_dropped"]["bytes"]
            .as_u64()
            .unwrap()
            > 200_000
    );
    assert!(results[0]["meta"].get("body").is_none());
    let status = central.status(&monitor).await?;
    let next: chrono::DateTime<chrono::Utc> = status["next_check_at"].as_str().unwrap().parse()?;
    assert!(next <= now + chrono::Duration::days(1), "{status}");
    Ok(())
}

/// A long poll waits up to 60 s, central's shutdown grace is 30 s: on SIGTERM every waiting
/// poll is answered (with what there is) instead of being cut off with the connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_central_answers_its_waiting_long_polls() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let poller = central.register_poller("p").await?;
    let url = format!("{}/api/poller/assignments?since_version=0", central.url);
    let http = reqwest::Client::new();
    let first: Value = http
        .get(&url)
        .bearer_auth(&poller.access)
        .send()
        .await?
        .json()
        .await?;
    let version = first["version"].as_i64().unwrap_or(0);
    let waiting = {
        let url = url.replace(
            "since_version=0",
            &format!("since_version={version}&wait=60"),
        );
        let request = http.get(&url).bearer_auth(&poller.access).send();
        tokio::spawn(async move {
            let response = request.await?;
            let status = response.status().as_u16();
            anyhow::Ok((status, response.json::<Value>().await?))
        })
    };
    // Let the poll reach its wait before central is told to stop.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let pid = central.pid().expect("central runs").to_string();
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()?;
    assert!(sent.success());
    let (status, answer) = waiting.await??;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["version"], version, "{answer}");
    Ok(())
}
