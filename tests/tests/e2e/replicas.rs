//! Several central replicas on one PostgreSQL database. These need PostgreSQL, so they are
//! ignored in the default (SQLite) run; `.ci/run` runs them with
//! `E2E_DATABASE=postgres cargo test -p e2e --test e2e -- --include-ignored`.

use std::time::{Duration, Instant};

use e2e::postgres::Postgres;
use e2e::{eventually, Central};
use reqwest::Method;
use serde_json::{json, Value};

const LEADING: &str = "this replica now runs the once-only duties";

/// Registers a poller through `central` and sends one heartbeat; returns its id.
async fn poller_that_falls_silent(central: &Central, name: &str) -> anyhow::Result<String> {
    let poller = central.register_poller(name).await?;
    let status = reqwest::Client::new()
        .post(format!("{}/api/poller/heartbeat", central.url))
        .bearer_auth(&poller.access)
        .json(&json!({"version": "test"}))
        .send()
        .await?
        .status();
    anyhow::ensure!(status == 200, "heartbeat: {status}");
    Ok(poller.id)
}

/// The statuses recorded for a poller, oldest first.
async fn recorded(central: &Central, poller_id: &str) -> anyhow::Result<Vec<String>> {
    let (_, changes) = central
        .admin(
            Method::GET,
            &format!("/api/v1/pollers/{poller_id}/status-changes"),
            None,
        )
        .await?;
    Ok(changes["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|c| c["status"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default())
}

fn offline_records(statuses: &[String]) -> usize {
    statuses.iter().filter(|s| *s == "offline").count()
}

fn leads(central: &Central) -> bool {
    central.log().contains(LEADING)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: E2E_DATABASE=postgres cargo test -p e2e --test e2e -- --include-ignored"]
async fn one_replica_runs_the_duties_and_another_takes_over_when_it_is_killed() -> anyhow::Result<()>
{
    let server = Postgres::start().await?;
    let url = server.create_database("central").await?;
    let env = [("CENTRAL_OFFLINE_AFTER", "3s")];
    let mut first = Central::start_replica(&url, &env).await?;
    eventually(Duration::from_secs(10), "a leader", || async {
        leads(&first).then_some(())
    })
    .await?;
    let second = Central::start_replica(&url, &env).await?;

    // Both serve; only one runs the liveness sweep, and a silent poller is recorded offline
    // once, not once per replica.
    let quiet = poller_that_falls_silent(&second, "quiet").await?;
    let quiet_statuses = eventually(
        Duration::from_secs(20),
        "quiet recorded offline",
        || async {
            let statuses = recorded(&first, &quiet).await.ok()?;
            statuses
                .contains(&"offline".to_string())
                .then_some(statuses)
        },
    )
    .await?;
    // Give the other replica time to (wrongly) sweep too.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let quiet_statuses_later = recorded(&first, &quiet).await?;
    assert_eq!(
        quiet_statuses_later, quiet_statuses,
        "one record per change"
    );
    assert_eq!(offline_records(&quiet_statuses), 1, "{quiet_statuses:?}");
    assert!(
        !leads(&second),
        "the second replica must not lead while the first lives"
    );

    // kill -9 of the leader: the other replica takes the duties within the lease time, and a
    // poller that falls silent afterwards is still noticed.
    first.kill().await;
    let killed = Instant::now();
    eventually(Duration::from_secs(30), "the survivor leads", || async {
        leads(&second).then_some(())
    })
    .await?;
    println!(
        "replicas: the survivor took the duties after {:?}",
        killed.elapsed()
    );
    let late = poller_that_falls_silent(&second, "late").await?;
    let statuses = eventually(Duration::from_secs(30), "late recorded offline", || async {
        let statuses = recorded(&second, &late).await.ok()?;
        statuses
            .contains(&"offline".to_string())
            .then_some(statuses)
    })
    .await?;
    assert_eq!(offline_records(&statuses), 1, "{statuses:?}");
    let quiet_after = recorded(&second, &quiet).await?;
    assert_eq!(
        quiet_after, quiet_statuses,
        "the new leader records nothing twice"
    );

    let pollers: Value = second.admin(Method::GET, "/api/v1/pollers", None).await?.1;
    assert_eq!(pollers["items"].as_array().map(Vec::len), Some(2));
    drop(server);
    Ok(())
}

/// Two replicas on one fresh PostgreSQL database.
async fn two_replicas(env: &[(&str, &str)]) -> anyhow::Result<(Postgres, Central, Central)> {
    let server = Postgres::start().await?;
    let url = server.create_database("central").await?;
    let first = Central::start_replica(&url, env).await?;
    let second = Central::start_replica(&url, env).await?;
    Ok((server, first, second))
}

/// Asks the central at `url` for the poller's assignments since `version`, waiting up to
/// `wait_s`.
async fn long_poll(
    http: &reqwest::Client,
    url: &str,
    access: &str,
    version: i64,
    wait_s: u32,
) -> anyhow::Result<Value> {
    Ok(http
        .get(format!(
            "{url}/api/poller/assignments?since_version={version}&wait={wait_s}"
        ))
        .bearer_auth(access)
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?)
}

fn upserted(answer: &Value, monitor: &str) -> bool {
    answer["upserts"]
        .as_array()
        .is_some_and(|u| u.iter().any(|m| m["id"] == monitor))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: E2E_DATABASE=postgres cargo test -p e2e --test e2e -- --include-ignored"]
async fn a_long_poll_on_one_replica_wakes_for_an_edit_made_on_another() -> anyhow::Result<()> {
    let (server, editor, waiter) = two_replicas(&[]).await?;
    let http = reqwest::Client::new();
    let poller = waiter.register_poller("far").await?;
    let monitor = editor
        .create_monitor(
            json!({"name": "m", "kind": "http", "target": "http://127.0.0.1:9/0",
            "poller_mode": "pinned", "poller_id": poller.id, "interval_ms": 3_600_000}),
        )
        .await?;
    let mut version = long_poll(&http, &waiter.url, &poller.access, 0, 0).await?["version"]
        .as_i64()
        .unwrap();

    // Waiting costs no queries and has no periodic re-read: only the database's announcement
    // of the editor's commit can answer these polls before their 30 s are up (at the end of
    // its wait a poll would find the edit too, so the time tells a wake-up from a timeout).
    let mut took = Vec::new();
    for round in 1..=30 {
        if round == 15 {
            // Cut the listening connections: the replicas reopen them and catch up.
            let cut = server
                .psql(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                     WHERE query LIKE 'LISTEN%'",
                )
                .await?;
            assert_eq!(cut, "2", "one listening connection per replica");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let poll = tokio::spawn({
            let (http, url, access) = (http.clone(), waiter.url.clone(), poller.access.clone());
            async move {
                let answer = long_poll(&http, &url, &access, version, 30).await?;
                anyhow::Ok((answer, Instant::now()))
            }
        });
        tokio::time::sleep(Duration::from_millis(150)).await;
        let sent = Instant::now();
        let (status, body) = editor
            .admin(
                Method::PATCH,
                &format!("/api/v1/monitors/{monitor}"),
                Some(json!({"target": format!("http://127.0.0.1:9/{round}")})),
            )
            .await?;
        anyhow::ensure!(status == 200, "edit: {status} {body}");
        let (answer, answered) = poll.await??;
        assert!(
            upserted(&answer, &monitor),
            "round {round}: the poll ended without the edit: {answer}"
        );
        assert_eq!(
            answer["upserts"][0]["target"],
            format!("http://127.0.0.1:9/{round}")
        );
        let took_this = answered.saturating_duration_since(sent);
        assert!(
            took_this < Duration::from_secs(15),
            "round {round}: answered after {took_this:?}, by the poll's deadline, not a wake-up"
        );
        took.push(took_this);
        version = answer["version"].as_i64().unwrap();
    }
    took.sort();
    println!(
        "replicas: edit on one replica → long poll answered on the other: p50 {:?}, p99 {:?}, max {:?} ({} rounds)",
        took[took.len() / 2],
        took[took.len() * 99 / 100],
        took[took.len() - 1],
        took.len()
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: E2E_DATABASE=postgres cargo test -p e2e --test e2e -- --include-ignored"]
async fn one_batch_uploaded_to_two_replicas_at_once_is_stored_once() -> anyhow::Result<()> {
    let (_server, first, second) = two_replicas(&[]).await?;
    let http = reqwest::Client::new();
    let poller = first.register_poller("twice").await?;
    let monitor = first
        .create_monitor(
            json!({"name": "m", "kind": "http", "target": "http://127.0.0.1:9/",
            "poller_mode": "pinned", "poller_id": poller.id}),
        )
        .await?;
    let now = chrono::Utc::now();
    for round in 0..5 {
        let results: Vec<Value> = (0..400)
            .map(|i| {
                let ts = now - chrono::Duration::milliseconds(i64::from(round * 400 + i));
                json!({"id": uuid::Uuid::now_v7(), "monitor_id": monitor, "status": "up",
                    "ts": ts.to_rfc3339_opts(chrono::SecondsFormat::Millis, true), "latency_ms": 3})
            })
            .collect();
        let batch = json!({"batch_id": uuid::Uuid::new_v4(), "results": results});
        // The agent retried through a load balancer: the same batch lands on both replicas,
        // three times each, all at once.
        let uploads = [&first, &second, &first, &second, &first, &second].map(|central| {
            let (http, url, access, batch) = (
                http.clone(),
                format!("{}/api/poller/results", central.url),
                poller.access.clone(),
                batch.clone(),
            );
            tokio::spawn(async move {
                let ack: Value = http
                    .post(url)
                    .bearer_auth(access)
                    .json(&batch)
                    .send()
                    .await?
                    .error_for_status()?
                    .json()
                    .await?;
                anyhow::Ok(ack)
            })
        });
        let (mut accepted, mut duplicates) = (0, 0);
        for upload in uploads {
            let ack = upload.await??;
            accepted += ack["accepted"].as_u64().unwrap();
            duplicates += ack["duplicates"].as_u64().unwrap();
        }
        assert_eq!(
            (accepted, duplicates),
            (400, 5 * 400),
            "round {round}: each result is new exactly once"
        );
    }
    let ids = second.result_ids(&monitor).await?;
    let unique: std::collections::HashSet<_> = ids.iter().collect();
    assert_eq!((ids.len(), unique.len()), (2_000, 2_000));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: E2E_DATABASE=postgres cargo test -p e2e --test e2e -- --include-ignored"]
async fn a_new_admin_token_on_one_replica_holds_on_every_replica_within_seconds(
) -> anyhow::Result<()> {
    const NEW: &str = "rotated-admin-4b7e1d9a2c6f3e8b5a0d7c1e";
    let (server, first, mut second) = two_replicas(&[]).await?;
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let list = |url: String, token: &'static str| {
        http.get(format!("{url}/api/v1/monitors"))
            .bearer_auth(token)
            .send()
    };
    assert_eq!(
        list(first.url.clone(), e2e::ADMIN_TOKEN).await?.status(),
        200
    );
    let session = first.session_cookie().await?;
    let page = http
        .get(format!("{}/", first.url))
        .header("cookie", &session)
        .send()
        .await?;
    assert_eq!(page.status(), 200, "logged in with the old token");

    second.set_env("CENTRAL_ADMIN_TOKEN", Some(NEW));
    second.restart().await?;
    assert_eq!(list(second.url.clone(), NEW).await?.status(), 200);
    assert_eq!(
        list(second.url.clone(), e2e::ADMIN_TOKEN).await?.status(),
        401
    );
    // The other replica, which checked the old token a moment ago and still has it in its
    // environment, follows the stored hash.
    let url = first.url.clone();
    eventually(
        Duration::from_secs(10),
        "the first replica follows",
        || async {
            let old = list(url.clone(), e2e::ADMIN_TOKEN).await.ok()?.status();
            let new = list(url.clone(), NEW).await.ok()?.status();
            (old == 401 && new == 200).then_some(())
        },
    )
    .await?;
    let page = http
        .get(format!("{}/", first.url))
        .header("cookie", &session)
        .send()
        .await?;
    assert_eq!(
        page.status(),
        303,
        "the session opened with the old token is gone"
    );
    drop(server);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: E2E_DATABASE=postgres cargo test -p e2e --test e2e -- --include-ignored"]
async fn a_revoked_key_or_ended_session_stops_on_every_replica_at_once() -> anyhow::Result<()> {
    let server = Postgres::start().await?;
    let url = server.create_database("central").await?;
    let first = Central::start_replica(&url, &[]).await?;
    let second = Central::start_replica(&url, &[]).await?;
    let (status, user) = first
        .admin(
            Method::POST,
            "/api/v1/users",
            Some(
                json!({"name": "Ed", "email": "ed@example.com", "role": "editor",
                        "password": "correct horse battery staple"}),
            ),
        )
        .await?;
    assert_eq!(status, 201, "{user}");
    let ed = user["id"].as_str().unwrap_or_default().to_string();
    let (_, key) = first
        .admin(
            Method::POST,
            "/api/v1/api-keys",
            Some(json!({"name": "ed's", "user_id": ed})),
        )
        .await?;
    let key_id = key["id"].as_str().unwrap_or_default().to_string();
    let key = key["token"].as_str().unwrap_or_default().to_string();
    // Known valid on the second replica first, so that nothing it remembers can keep it.
    let (status, _) = second
        .call(&key, Method::GET, "/api/v1/monitors", None)
        .await?;
    assert_eq!(status, 200);
    let (status, _) = first
        .admin(Method::DELETE, &format!("/api/v1/api-keys/{key_id}"), None)
        .await?;
    assert_eq!(status, 204);
    let (status, _) = second
        .call(&key, Method::GET, "/api/v1/monitors", None)
        .await?;
    assert_eq!(
        status, 401,
        "revoked on the first replica, refused on the second at once"
    );

    // A session opened on the second replica ends when the first ends its user's sessions.
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let login = http
        .post(format!("{}/login", second.url))
        .form(&[
            ("email", "ed@example.com"),
            ("password", "correct horse battery staple"),
        ])
        .send()
        .await?;
    assert_eq!(login.status().as_u16(), 303);
    let cookie = login
        .headers()
        .get(reqwest::header::SET_COOKIE)
        .and_then(|c| c.to_str().ok())
        .and_then(|c| c.split(';').next())
        .unwrap_or_default()
        .to_string();
    let page = |central: &Central| {
        http.get(format!("{}/", central.url))
            .header(reqwest::header::COOKIE, cookie.clone())
            .send()
    };
    assert_eq!(page(&second).await?.status().as_u16(), 200);
    assert_eq!(
        page(&first).await?.status().as_u16(),
        200,
        "a session works on every replica"
    );
    let (status, _) = first
        .admin(Method::POST, &format!("/api/v1/users/{ed}/log-out"), None)
        .await?;
    assert_eq!(status, 204);
    assert_eq!(
        page(&second).await?.status().as_u16(),
        303,
        "ended at once elsewhere"
    );
    Ok(())
}
