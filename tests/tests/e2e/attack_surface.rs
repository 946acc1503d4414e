//! Central's attack surface, from outside: every request's cost is bounded before it is paid
//! (result counts, heartbeat caps, concurrent requests), the auth rate limit cannot be dodged
//! with a forged `X-Forwarded-For`, secrets stay out of logs, and `/metrics` can be kept off
//! the public listener.

use std::time::Duration;

use e2e::{binary, eventually, Central, ADMIN_TOKEN};
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;

async fn post_raw(central: &Central, path: &str, token: &str, body: String) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{}{path}", central.url))
        .bearer_auth(token)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("request");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_uploads_and_heartbeats_are_refused_while_parsing() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let poller = central.register_poller("bounded").await?;

    // A million tiny elements (2 MB): counted without being kept, refused as too many.
    let elements = vec!["0"; 1_000_000].join(",");
    let body = format!(
        r#"{{"batch_id":"{}","results":[{elements}]}}"#,
        uuid::Uuid::new_v4()
    );
    let (status, answer) = post_raw(&central, "/api/poller/results", &poller.access, body).await;
    assert_eq!(status, 413, "{answer}");
    assert_eq!(answer["error"], "payload_too_large");
    let message = answer["message"].as_str().unwrap();
    assert!(
        message.contains("got 1000000") && message.contains("`results`"),
        "{message}"
    );

    // Heartbeats: each list has a cap, and the refusal names the field.
    let event = json!({"monitor_id": uuid::Uuid::new_v4(), "at": "2026-11-23T00:00:00Z",
                       "event": "resumed", "next_due_at": null});
    let cases = [
        (
            "events",
            json!({"version": "1", "events": vec![event; 1_001]}),
        ),
        ("errors", json!({"version": "1", "errors": vec!["e"; 101]})),
        (
            "capabilities",
            json!({"version": "1", "capabilities": vec!["http"; 65]}),
        ),
        ("version", json!({"version": "v".repeat(65)})),
        ("version", json!({"version": ""})),
    ];
    for (field, beat) in cases {
        let (status, answer) = post_raw(
            &central,
            "/api/poller/heartbeat",
            &poller.access,
            beat.to_string(),
        )
        .await;
        assert_eq!(status, 400, "{field}: {answer}");
        let message = answer["message"].as_str().unwrap();
        assert!(message.contains(field), "{field}: {message}");
    }
    // A long reason is cut, not refused: the heartbeat still counts.
    let long = json!({"version": "1", "errors": ["x".repeat(100_000)],
        "events": [{"monitor_id": uuid::Uuid::new_v4(), "at": "2026-11-23T00:00:00Z",
                    "event": "dead_lettered", "reason": "y".repeat(100_000), "next_due_at": null}]});
    let (status, answer) = post_raw(
        &central,
        "/api/poller/heartbeat",
        &poller.access,
        long.to_string(),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let (_, events) = central
        .admin(
            reqwest::Method::GET,
            &format!("/api/v1/pollers/{}/events", poller.id),
            None,
        )
        .await?;
    let reason = events["items"][0]["reason"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        !reason.is_empty() && reason.len() <= 1024,
        "kept {} characters",
        reason.len()
    );
    Ok(())
}

/// Starts a request whose body never finishes arriving: it holds a request slot.
async fn hold_a_request(addr: &str) -> anyhow::Result<tokio::net::TcpStream> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let head = format!(
        "POST /api/v1/monitors HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {ADMIN_TOKEN}\r\n\
         content-type: application/json\r\ncontent-length: 1000\r\n\r\n{{\"name\":"
    );
    stream.write_all(head.as_bytes()).await?;
    Ok(stream)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beyond_the_request_cap_central_sheds_with_503_and_retry_after() -> anyhow::Result<()> {
    let central = Central::start_with(&[("CENTRAL_MAX_CONCURRENT_REQUESTS", "2")]).await?;
    let mut slow = [
        hold_a_request(&central.addr).await?,
        hold_a_request(&central.addr).await?,
    ];
    let http = reqwest::Client::new();
    let list = || {
        http.get(format!("{}/api/v1/pollers", central.url))
            .bearer_auth(ADMIN_TOKEN)
            .send()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let shed = loop {
        // The server takes connections in any order: a probe may get a slot before a hold
        // does, and the hold is then answered 503 and holds nothing. Hold again.
        for stream in slow.iter_mut() {
            let mut byte = [0u8; 1];
            if !matches!(stream.try_read(&mut byte), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
            {
                *stream = hold_a_request(&central.addr).await?;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let response = list().await?;
        if response.status() == 503 {
            break response;
        }
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "no request shed within 10 s"
        );
    };
    assert_eq!(shed.headers()["retry-after"], "1");
    let body: Value = shed.json().await?;
    assert_eq!(body["error"], "overloaded", "{body}");
    // Probes still answer: an overloaded central is alive and ready.
    let health = http.get(format!("{}/healthz", central.url)).send().await?;
    assert_eq!(health.status(), 200);

    drop(slow);
    eventually(Duration::from_secs(10), "slots freed", || async {
        (list().await.ok()?.status() == 200).then_some(())
    })
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_past_its_cap_is_answered_at_once() -> anyhow::Result<()> {
    let central = Central::start_with(&[("CENTRAL_MAX_LONG_POLLS", "0")]).await?;
    let poller = central.register_poller("impatient").await?;
    let http = reqwest::Client::new();
    let version = |since: i64| {
        http.get(format!(
            "{}/api/poller/assignments?since_version={since}&wait=60",
            central.url
        ))
        .bearer_auth(&poller.access)
        .send()
    };
    let first: Value = version(0).await?.json().await?;
    let current = first["version"].as_i64().unwrap();
    // Nothing changes, so a held long poll would take the whole minute; this one must not.
    let answer = tokio::time::timeout(Duration::from_secs(20), version(current)).await;
    let answer: Value = answer.expect("answered without waiting")?.json().await?;
    assert_eq!(answer["full"], false, "{answer}");
    Ok(())
}

async fn token_call(central: &Central, forwarded_for: &str) -> u16 {
    reqwest::Client::new()
        .post(format!("{}/api/poller/token", central.url))
        .header("x-forwarded-for", forwarded_for)
        .json(&json!({"refresh_token": "not-a-token"}))
        .send()
        .await
        .expect("request")
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_for_is_believed_only_from_trusted_proxies() -> anyhow::Result<()> {
    // One call a second, bursts of four: the fifth quick call from one address is refused.
    let limits = [("CENTRAL_AUTH_RATE_LIMIT", "1")];

    // Untrusted peer: a forged header per call does not buy a fresh bucket.
    let direct = Central::start_with(&limits).await?;
    let statuses: Vec<u16> = futures_seq(&direct, |i| format!("198.51.100.{i}")).await;
    assert_eq!(statuses[..4], [401; 4], "{statuses:?}");
    assert_eq!(
        statuses[4], 429,
        "forged X-Forwarded-For dodged the limit: {statuses:?}"
    );

    // Behind a trusted proxy (the test is on 127.0.0.1): each client has its own bucket.
    let proxied = Central::start_with(&[
        limits[0],
        ("CENTRAL_TRUSTED_PROXIES", "10.0.0.0/8, 127.0.0.1"),
    ])
    .await?;
    let statuses = futures_seq(&proxied, |_| "203.0.113.5".to_string()).await;
    assert_eq!(statuses[4], 429, "{statuses:?}");
    assert_eq!(
        token_call(&proxied, "203.0.113.6").await,
        401,
        "another client is not limited"
    );
    // A client forging an entry left of the proxy's own cannot choose its key.
    assert_eq!(token_call(&proxied, "192.0.2.1, 203.0.113.5").await, 429);
    Ok(())
}

async fn futures_seq(central: &Central, forwarded: impl Fn(usize) -> String) -> Vec<u16> {
    let mut statuses = Vec::new();
    for i in 0..5 {
        statuses.push(token_call(central, &forwarded(i)).await);
    }
    statuses
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_password_never_reaches_the_log() -> anyhow::Result<()> {
    let output = tokio::process::Command::new(binary("central"))
        .arg("serve")
        .env("CENTRAL_LISTEN", "127.0.0.1:0")
        .env(
            "CENTRAL_DATABASE_URL",
            "postgres://central:Sup3rS3cret@127.0.0.1:1/central?connect_timeout=2",
        )
        .env("CENTRAL_ADMIN_TOKEN", ADMIN_TOKEN)
        .output()
        .await?;
    assert!(!output.status.success());
    let text = String::from_utf8_lossy(&output.stderr) + String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("cannot open the database"), "{text}");
    assert!(!text.contains("Sup3rS3cret"), "the password leaked: {text}");
    assert!(text.contains("REDACTED"), "{text}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_can_have_a_listener_of_their_own() -> anyhow::Result<()> {
    let central = Central::start_with(&[("CENTRAL_METRICS_LISTEN", "127.0.0.1:0")]).await?;
    let http = reqwest::Client::new();
    let public = http.get(format!("{}/metrics", central.url)).send().await?;
    assert_eq!(public.status(), 404, "metrics are off the public listener");
    let addr = eventually(Duration::from_secs(10), "the metrics address", || async {
        let log = central.log();
        let line = log
            .lines()
            .find(|l| l.contains("metrics listening"))?
            .to_string();
        Some(
            line.split("addr=")
                .nth(1)?
                .split_whitespace()
                .next()?
                .to_string(),
        )
    })
    .await?;
    // Prometheus asks for OpenMetrics and gets it; anything else gets the classic text format.
    let private = http
        .get(format!("http://{addr}/metrics"))
        .header(
            "accept",
            "application/openmetrics-text;version=1.0.0,text/plain;q=0.5",
        )
        .send()
        .await?;
    assert_eq!(private.status(), 200);
    assert!(private.headers()["content-type"]
        .to_str()?
        .starts_with("application/openmetrics-text"));
    assert!(private.text().await?.contains("# EOF"));
    let plain = http.get(format!("http://{addr}/metrics")).send().await?;
    assert!(plain.headers()["content-type"]
        .to_str()?
        .starts_with("text/plain; version=0.0.4"));
    let plain = plain.text().await?;
    assert!(
        plain.contains("# TYPE central_results_accepted_total counter") && !plain.contains("# EOF"),
        "{plain}"
    );
    Ok(())
}

/// Names come from operators and pollers; in `/metrics` they are label values. A quote or a
/// backslash stays inside its label, a line break is refused where the name comes in, and
/// `promtool check metrics` accepts what central serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_names_cannot_break_or_forge_metrics() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let forged = "central_monitor_up{monitor_id=\"forged\",name=\"x\",region=\"\"} 1";
    for (path, body) in [
        (
            "/api/poller/register",
            json!({"registration_token": central.registration_token().await?,
                   "name": format!("x\"}} 1\n{forged}\n# EOF"), "capabilities": ["http"],
                   "version": "test"}),
        ),
        (
            "/api/v1/monitors",
            json!({"name": format!("a\n{forged}"), "kind": "http",
                   "target": "http://127.0.0.1:9/"}),
        ),
    ] {
        let token = if path.starts_with("/api/v1") {
            ADMIN_TOKEN
        } else {
            ""
        };
        let (status, answer) = post_raw(&central, path, token, body.to_string()).await;
        assert_eq!(status, 400, "{path}: {answer}");
        assert!(
            answer["message"]
                .as_str()
                .unwrap_or_default()
                .contains("name"),
            "{answer}"
        );
    }
    // Quotes, backslashes and braces are fine in a name, and stay in their label.
    let hostile = r#"x"} 1 \ central_monitor_up{monitor_id="forged"} # EOF"#;
    central.register_poller(hostile).await?;
    central
        .create_monitor(json!({"name": hostile, "kind": "http", "target": "http://127.0.0.1:9/"}))
        .await?;
    let text = central.metrics().await?;
    assert!(!text.contains("monitor_id=\"forged\"} "), "{text}");
    let mut promtool = tokio::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    promtool
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .await?;
    let checked = promtool.wait_with_output().await?;
    let said = String::from_utf8_lossy(&checked.stdout).to_string()
        + &String::from_utf8_lossy(&checked.stderr);
    assert!(
        checked.status.success() && !said.contains("error"),
        "promtool: {said}\n{text}"
    );
    Ok(())
}

/// A client whose requests come from `from` (one of this machine's 127/8 addresses).
fn client_from(from: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(from.parse::<std::net::IpAddr>().expect("an address"))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("a client")
}

async fn wrong_login(http: &reqwest::Client, central: &Central) -> reqwest::Response {
    http.post(format!("{}/login", central.url))
        .form(&[("token", "guessing-the-admin-token-0000")])
        .send()
        .await
        .expect("answered")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_logins_lock_out_their_client_but_not_pollers_or_operators_there(
) -> anyhow::Result<()> {
    let central = Central::start_with(&[("CENTRAL_AUTH_FAILURES_PER_MINUTE", "10")]).await?;
    let poller = central.register_poller("neighbour").await?;
    let guesser = client_from("127.0.0.2");
    let mut statuses = Vec::new();
    for _ in 0..300 {
        statuses.push(wrong_login(&guesser, &central).await.status().as_u16());
    }
    assert_eq!(statuses[..10], [401; 10], "{statuses:?}");
    assert!(
        statuses[10..].iter().all(|s| *s == 429),
        "past 10 failures a minute the client is refused: {statuses:?}"
    );
    let refused = wrong_login(&guesser, &central).await;
    let wait: u64 = refused.headers()["retry-after"].to_str()?.parse()?;
    assert!(
        (1..=6).contains(&wait),
        "one failure back every 6 s: {wait}"
    );
    let body: Value = refused.json().await?;
    assert_eq!(body["error"], "rate_limited", "{body}");
    assert_eq!(
        central.log().matches("failed authentications").count(),
        1,
        "the lockout is logged once: {}",
        central.log()
    );

    // Another client is not held back.
    let other = wrong_login(&client_from("127.0.0.3"), &central).await;
    assert_eq!(other.status(), 401);
    // A poller and an operator behind the locked-out address are served.
    let heartbeat = guesser
        .post(format!("{}/api/poller/heartbeat", central.url))
        .bearer_auth(&poller.access)
        .json(&json!({"version": "test", "capabilities": ["http"]}))
        .send()
        .await?;
    assert_eq!(heartbeat.status(), 200);
    let list = guesser
        .get(format!("{}/api/v1/monitors", central.url))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await?;
    assert_eq!(list.status(), 200);
    Ok(())
}

/// Valid credentials sent along with a login (an operator's own key or cookie) do not move it
/// out of the pool where failures count: otherwise a viewer could guess other users' passwords
/// without limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logins_count_their_failures_whatever_credentials_come_with_them() -> anyhow::Result<()> {
    let central = Central::start_with(&[("CENTRAL_AUTH_FAILURES_PER_MINUTE", "10")]).await?;
    let guesser = client_from("127.0.0.4");
    let mut statuses = Vec::new();
    for _ in 0..20 {
        let answer = guesser
            .post(format!("{}/login", central.url))
            .bearer_auth(ADMIN_TOKEN)
            .form(&[("email", "someone@example.com"), ("password", "guess-0000")])
            .send()
            .await?;
        statuses.push(answer.status().as_u16());
    }
    assert_eq!(statuses[..10], [401; 10], "{statuses:?}");
    assert!(
        statuses[10..].iter().all(|s| *s == 429),
        "the 11th guess is refused although the admin token came with it: {statuses:?}"
    );
    Ok(())
}

/// Guessing spread over 120 addresses (960 failures, past the shared budget of 600 a minute)
/// slows every guesser to one failure a minute, and locks out nobody with valid credentials:
/// from fresh addresses a password login, an admin-token login, an agent's registration and
/// an agent's refresh all go through, and a guesser stays refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_from_many_addresses_slows_guessing_and_locks_nobody_out() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let (status, body) = central
        .admin(
            reqwest::Method::POST,
            "/api/v1/users",
            Some(
                json!({"name": "Ana", "email": "ana@example.com", "role": "viewer",
                "password": "correct horse battery staple"}),
            ),
        )
        .await?;
    assert_eq!(status, 201, "{body}");
    let registration = central.registration_token().await?;
    let poller = central.register_poller("before the flood").await?;

    // 120 addresses, 8 wrong API keys each (a lookup, no slow hash): under each one's own
    // limit of 10 a minute, 960 in all; 24 addresses at a time, within the unauthenticated
    // pool's places.
    let mut statuses = Vec::new();
    for wave in 0..5u32 {
        let mut floods = tokio::task::JoinSet::new();
        for n in wave * 24..(wave + 1) * 24 {
            let from = format!("127.0.{}.{}", 1 + n / 200, 10 + n % 200);
            let url = format!("{}/api/v1/monitors", central.url);
            floods.spawn(async move {
                let http = client_from(&from);
                let mut statuses = Vec::new();
                for guess in 0..8 {
                    let answer = http
                        .get(&url)
                        .bearer_auth(format!("pkey_{}_guess{guess}", uuid::Uuid::new_v4()))
                        .send()
                        .await
                        .expect("answered");
                    statuses.push(answer.status().as_u16());
                }
                statuses
            });
        }
        while let Some(flood) = floods.join_next().await {
            statuses.extend(flood?);
        }
    }
    assert!(
        statuses.iter().all(|s| *s == 401 || *s == 429),
        "{statuses:?}"
    );
    assert!(
        statuses.contains(&429),
        "past the shared budget each guesser is slowed to one failure a minute"
    );

    // From fresh addresses, each valid credential goes through.
    let login = client_from("127.0.3.1")
        .post(format!("{}/login", central.url))
        .form(&[
            ("email", "ana@example.com"),
            ("password", "correct horse battery staple"),
        ])
        .send()
        .await?;
    assert_eq!(login.status(), 303, "a password login");
    let login = client_from("127.0.3.2")
        .post(format!("{}/login", central.url))
        .form(&[("token", e2e::ADMIN_TOKEN)])
        .send()
        .await?;
    assert_eq!(login.status(), 303, "an admin-token login");
    let registered = client_from("127.0.3.3")
        .post(format!("{}/api/poller/register", central.url))
        .json(
            &json!({"registration_token": registration, "name": "during the flood",
            "capabilities": ["http"], "version": "test"}),
        )
        .send()
        .await?;
    assert_eq!(registered.status(), 200, "a registration");
    let refreshed = client_from("127.0.3.4")
        .post(format!("{}/api/poller/token", central.url))
        .json(&json!({"refresh_token": poller.refresh}))
        .send()
        .await?;
    assert_eq!(refreshed.status(), 200, "a refresh");

    // A fresh address that guesses has its one try a minute, then waits.
    let fresh = client_from("127.0.3.5");
    let guesses = [
        wrong_login(&fresh, &central).await.status(),
        wrong_login(&fresh, &central).await.status(),
    ];
    assert_eq!(
        guesses,
        [401, 429],
        "one failure a minute while the flood lasts"
    );
    let refused: Value = wrong_login(&fresh, &central).await.json().await?;
    assert!(
        refused["message"]
            .as_str()
            .unwrap_or_default()
            .contains("everywhere"),
        "{refused}"
    );
    // Operators with credentials are not strangers.
    let (status, _) = central
        .admin(reqwest::Method::GET, "/api/v1/monitors", None)
        .await?;
    assert_eq!(status, 200);
    Ok(())
}

/// Registering an agent checks the registration secret in its body, so a poller's access
/// token riding along does not lift guesses out of the failure limits; and an agent refreshes
/// its token even from an address that is locked out (a neighbour's failures must not take its
/// poller offline).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registration_guesses_are_limited_whatever_rides_along_and_refreshes_are_not(
) -> anyhow::Result<()> {
    let central = Central::start_with(&[("CENTRAL_AUTH_FAILURES_PER_MINUTE", "10")]).await?;
    let poller = central.register_poller("insider").await?;
    let guesser = client_from("127.0.5.1");
    let mut statuses = Vec::new();
    for guess in 0..14 {
        let answer = guesser
            .post(format!("{}/api/poller/register", central.url))
            .bearer_auth(&poller.access)
            .json(
                &json!({"registration_token": format!("guess-{guess:04}-0123456789abcdef"),
                "name": "guess", "capabilities": ["http"], "version": "test"}),
            )
            .send()
            .await?;
        statuses.push(answer.status().as_u16());
    }
    assert_eq!(statuses[..10], [401; 10], "{statuses:?}");
    assert!(
        statuses[10..].iter().all(|s| *s == 429),
        "past 10 failures a minute the guesser is refused: {statuses:?}"
    );
    // The same address, locked out, still refreshes an agent's token.
    let refreshed = guesser
        .post(format!("{}/api/poller/token", central.url))
        .json(&json!({"refresh_token": poller.refresh}))
        .send()
        .await?;
    assert_eq!(refreshed.status(), 200);
    Ok(())
}

/// A session on the page does not make its holder an operator on the API: the API checks the
/// bearer token, so a viewer guessing the admin token with their cookie along is a stranger
/// whose failures are counted and limited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_guessing_through_a_session_is_counted_and_limited() -> anyhow::Result<()> {
    let central = Central::start_with(&[("CENTRAL_AUTH_FAILURES_PER_MINUTE", "10")]).await?;
    let (status, body) = central
        .admin(
            reqwest::Method::POST,
            "/api/v1/users",
            Some(
                json!({"name": "Vic", "email": "vic@example.com", "role": "viewer",
                "password": "correct horse battery staple"}),
            ),
        )
        .await?;
    assert_eq!(status, 201, "{body}");
    let guesser = client_from("127.0.4.1");
    let login = guesser
        .post(format!("{}/login", central.url))
        .form(&[
            ("email", "vic@example.com"),
            ("password", "correct horse battery staple"),
        ])
        .send()
        .await?;
    assert_eq!(login.status(), 303);
    let cookie = login
        .headers()
        .get(reqwest::header::SET_COOKIE)
        .and_then(|c| c.to_str().ok())
        .and_then(|c| c.split(';').next())
        .unwrap_or_default()
        .to_string();
    let mut statuses = Vec::new();
    for guess in 0..14 {
        let answer = guesser
            .get(format!("{}/api/v1/users", central.url))
            .header(reqwest::header::COOKIE, &cookie)
            .bearer_auth(format!("guessing-the-admin-token-{guess:04}"))
            .send()
            .await?;
        statuses.push(answer.status().as_u16());
    }
    assert_eq!(statuses[..10], [401; 10], "{statuses:?}");
    assert!(
        statuses[10..].iter().all(|s| *s == 429),
        "past 10 failures a minute the guesser is refused, session or not: {statuses:?}"
    );
    // The session itself still works on the page.
    let page = guesser
        .get(format!("{}/", central.url))
        .header(reqwest::header::COOKIE, &cookie)
        .send()
        .await?;
    assert_eq!(page.status(), 200);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guessable_admin_token_is_refused_at_start() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let started = tokio::process::Command::new(binary("central"))
        .arg("serve")
        .env("CENTRAL_LISTEN", "127.0.0.1:0")
        .env(
            "CENTRAL_DATABASE_URL",
            format!("sqlite://{}", dir.path().join("c.db").display()),
        )
        .env("CENTRAL_ADMIN_TOKEN", "change-me-to-a-long-random-string")
        // A central that starts after all must not outlive the test.
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(30), started).await??;
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("too easy to guess"), "{stderr}");
    assert!(
        !stderr.contains("change-me"),
        "the token itself is not printed: {stderr}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn public_metrics_need_a_token_and_are_worked_out_at_most_every_five_seconds(
) -> anyhow::Result<()> {
    const SCRAPER: &str = "scrape-9d2b7e4a1c8f3e6b0a5d";
    let central = Central::start_with(&[("CENTRAL_METRICS_TOKEN", SCRAPER)]).await?;
    let http = reqwest::Client::new();
    let scrape = |token: Option<&'static str>| {
        let mut request = http.get(format!("{}/metrics", central.url));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send()
    };
    let anonymous = scrape(None).await?;
    assert_eq!(
        anonymous.status(),
        401,
        "monitor and poller names are not public"
    );
    let body: Value = anonymous.json().await?;
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("CENTRAL_METRICS_TOKEN"),
        "{body}"
    );
    assert_eq!(scrape(Some("not-the-token")).await?.status(), 401);
    assert_eq!(scrape(Some(ADMIN_TOKEN)).await?.status(), 200);

    let first = scrape(Some(SCRAPER)).await?;
    assert_eq!(first.status(), 200);
    let first = first.text().await?;
    central
        .create_monitor(json!({"name": "added-between-scrapes", "kind": "http",
                               "target": "http://127.0.0.1:9/"}))
        .await?;
    let again = scrape(Some(SCRAPER)).await?.text().await?;
    assert!(
        !again.contains("added-between-scrapes"),
        "a scrape within 5 s of the last one gets the same text"
    );
    assert_eq!(
        first
            .lines()
            .filter(|l| l.starts_with("central_monitor"))
            .count(),
        again
            .lines()
            .filter(|l| l.starts_with("central_monitor"))
            .count()
    );
    eventually(Duration::from_secs(10), "a newer rendering", || async {
        let text = scrape(Some(SCRAPER)).await.ok()?.text().await.ok()?;
        text.contains("added-between-scrapes").then_some(())
    })
    .await?;
    Ok(())
}

/// A scraper that comes every 6 s (past the 5 s a text is kept) finds, from its fourth scrape
/// on, the state rendered just before it came (`service::scrape`, `duties::metrics_ahead`):
/// it waits for no rendering, and the text is younger than 5 s and holds a monitor created
/// after the third scrape.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steady_scraper_finds_its_text_rendered_just_before_it_comes() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let http = reqwest::Client::new();
    let scrape = || async {
        let answer = http
            .get(format!("{}/metrics", central.url))
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await?;
        anyhow::ensure!(answer.status() == 200, "/metrics: {}", answer.status());
        Ok(answer.text().await?)
    };
    let value = |text: &str, series: &str| -> Option<f64> {
        text.lines()
            .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
    };
    let renderings = |text: &str, reason: &str| {
        value(
            text,
            &format!("central_state_renderings_total{{reason=\"{reason}\"}}"),
        )
        .unwrap_or(0.0)
    };
    let start = tokio::time::Instant::now();
    let mut texts = Vec::new();
    for i in 0..5 {
        if i == 3 {
            tokio::time::sleep_until(start + Duration::from_secs(16)).await;
            central
                .create_monitor(
                    json!({"name": "created-after-the-third-scrape", "kind": "http",
                                       "target": "http://127.0.0.1:9/"}),
                )
                .await?;
        }
        tokio::time::sleep_until(start + Duration::from_secs(6 * i)).await;
        texts.push(scrape().await?);
    }
    assert_eq!(
        (
            renderings(&texts[2], "asked"),
            renderings(&texts[2], "ahead")
        ),
        (3.0, 0.0),
        "the first three scrapes each waited for their text: {}",
        texts[2]
    );
    for text in &texts[3..] {
        assert_eq!(renderings(text, "asked"), 3.0, "{text}");
        let age = value(text, "central_state_age_seconds").unwrap();
        assert!(age > 0.0 && age < 5.0, "rendered ahead, still fresh: {age}");
    }
    assert_eq!(renderings(&texts[4], "ahead"), 2.0, "{}", texts[4]);
    assert!(
        texts[3].contains("created-after-the-third-scrape"),
        "the text rendered ahead is the state of then"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_cookie_is_secure_behind_a_trusted_proxy_that_ends_tls() -> anyhow::Result<()> {
    let login = |central: &Central| {
        client_from("127.0.0.1")
            .post(format!("{}/login", central.url))
            .header("x-forwarded-proto", "https")
            .form(&[("token", ADMIN_TOKEN)])
            .send()
    };
    let cookie = |response: &reqwest::Response| {
        response.headers()["set-cookie"]
            .to_str()
            .unwrap_or_default()
            .to_string()
    };
    // The test speaks from 127.0.0.1: as a trusted proxy, its word on the scheme counts.
    let proxied = Central::start_with(&[("CENTRAL_TRUSTED_PROXIES", "127.0.0.1")]).await?;
    let answer = login(&proxied).await?;
    assert!(cookie(&answer).contains("Secure"), "{}", cookie(&answer));
    // From anyone else the header is the client's own claim, and changes nothing.
    let direct = Central::start().await?;
    let answer = login(&direct).await?;
    assert!(!cookie(&answer).contains("Secure"), "{}", cookie(&answer));
    Ok(())
}

/// Failed sign-ins are each an audit entry up to 60 a minute; past that they are counted, and
/// the next entry written says how many were not, so a flood cannot grow the log without bound
/// and none goes unmentioned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_sign_ins_past_sixty_a_minute_are_counted_not_each_recorded() -> anyhow::Result<()> {
    let central = Central::start_with(&[("CENTRAL_AUTH_FAILURES_PER_MINUTE", "1000")]).await?;
    let guesser = client_from("127.0.7.1");
    for _ in 0..80 {
        assert_eq!(wrong_login(&guesser, &central).await.status(), 401);
    }
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    assert_eq!(wrong_login(&guesser, &central).await.status(), 401);
    let (status, audit) = central
        .admin(
            reqwest::Method::GET,
            "/api/v1/audit?object_kind=sessions&limit=200",
            None,
        )
        .await?;
    assert_eq!(status, 200, "{audit}");
    let entries = audit["items"].as_array().cloned().unwrap_or_default();
    let not_recorded: u64 = entries
        .iter()
        .filter_map(|e| e["after"]["not_recorded_before"].as_u64())
        .sum();
    assert!(entries.len() < 81, "{} entries", entries.len());
    assert!(not_recorded > 0);
    assert_eq!(
        entries.len() as u64 + not_recorded,
        81,
        "each failure recorded or counted"
    );
    Ok(())
}

/// The operator pool's quarter per holder is per user, not per credential: an editor whose
/// slow requests hold their quarter is not given more through another of their keys, while
/// the admin is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_shares_one_quarter_of_the_operator_pool_across_their_keys() -> anyhow::Result<()> {
    let central = Central::start_with(&[("CENTRAL_MAX_CONCURRENT_REQUESTS", "8")]).await?;
    let (status, vic) = central
        .admin(
            reqwest::Method::POST,
            "/api/v1/users",
            Some(
                json!({"name": "Vic", "email": "vic@example.com", "role": "editor",
                "password": "correct horse battery staple"}),
            ),
        )
        .await?;
    assert_eq!(status, 201, "{vic}");
    let mut keys = Vec::new();
    for n in 0..3 {
        let (status, key) = central
            .admin(
                reqwest::Method::POST,
                "/api/v1/api-keys",
                Some(json!({"name": format!("vic's {n}"), "user_id": vic["id"]})),
            )
            .await?;
        assert_eq!(status, 201, "{key}");
        let token = key["token"].as_str().unwrap_or_default().to_string();
        // Seen valid once, so that the pool knows whose it is.
        let (status, _) = central
            .call(&token, reqwest::Method::GET, "/api/v1/monitors", None)
            .await?;
        assert_eq!(status, 200);
        keys.push(token);
    }
    // Two requests whose bodies never come, one through each of two keys: Vic's quarter (2
    // of 8 places).
    let mut held = Vec::new();
    for key in &keys[..2] {
        let mut stream = tokio::net::TcpStream::connect(&central.addr).await?;
        stream
            .write_all(
                format!(
                    "POST /api/v1/monitors HTTP/1.1\r\nhost: {}\r\nauthorization: Bearer {key}\r\n\
                     content-type: application/json\r\ncontent-length: 1000\r\n\r\n{{",
                    central.addr
                )
                .as_bytes(),
            )
            .await?;
        held.push(stream);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (status, _) = central
        .call(&keys[2], reqwest::Method::GET, "/api/v1/monitors", None)
        .await?;
    assert_eq!(status, 503, "Vic's third key finds Vic's quarter taken");
    let (status, _) = central
        .admin(reqwest::Method::GET, "/api/v1/monitors", None)
        .await?;
    assert_eq!(status, 200, "the admin is served");
    drop(held);
    Ok(())
}
