//! Token and poller lifecycle through the settings and poller APIs of the real binary:
//! rotation and revocation of registration tokens, refresh rotation with reuse detection,
//! disabling and deleting pollers taking effect on their next call.

use std::time::Duration;

use e2e::{eventually, Agent, Central};
use reqwest::Method;
use serde_json::{json, Value};

struct Api {
    http: reqwest::Client,
    base: String,
}

impl Api {
    fn of(central: &Central) -> Api {
        Api {
            http: reqwest::Client::new(),
            base: central.url.clone(),
        }
    }
}

impl Api {
    async fn post(&self, path: &str, bearer: Option<&str>, body: Value) -> (u16, Value) {
        let mut request = self.http.post(format!("{}{path}", self.base)).json(&body);
        if let Some(token) = bearer {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.expect("request");
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn register(&self, token: &str, name: &str, region: &str) -> (u16, Value) {
        let body = json!({"registration_token": token, "name": name, "region": region,
                          "capabilities": ["http"], "version": "test"});
        self.post("/api/poller/register", None, body).await
    }

    async fn refresh(&self, refresh_token: &str) -> (u16, Value) {
        self.post(
            "/api/poller/token",
            None,
            json!({"refresh_token": refresh_token}),
        )
        .await
    }

    async fn heartbeat(&self, access: &str) -> u16 {
        self.post(
            "/api/poller/heartbeat",
            Some(access),
            json!({"version": "test"}),
        )
        .await
        .0
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registration_tokens_rotate_and_revoke() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let api = Api::of(&central);
    let (status, created) = central
        .admin(
            Method::POST,
            "/api/v1/registration-tokens",
            Some(json!({"name": "eu", "max_uses": 3})),
        )
        .await?;
    assert_eq!(status, 201);
    let id = created["id"].as_str().unwrap().to_string();
    let first_secret = created["token"].as_str().unwrap().to_string();

    let (_, listed) = central
        .admin(Method::GET, "/api/v1/registration-tokens", None)
        .await?;
    assert!(
        listed["items"][0].get("token").is_none(),
        "secrets are never listed: {listed}"
    );

    let (status, rotated) = central
        .admin(
            Method::POST,
            &format!("/api/v1/registration-tokens/{id}/rotate"),
            None,
        )
        .await?;
    assert_eq!(status, 200, "{rotated}");
    let second_secret = rotated["token"].as_str().unwrap().to_string();
    assert_ne!(first_secret, second_secret);
    assert_eq!(
        api.register(&first_secret, "a", "eu").await.0,
        401,
        "the old secret is dead"
    );
    assert_eq!(api.register(&second_secret, "a", "eu").await.0, 200);

    let (status, _) = central
        .admin(
            Method::DELETE,
            &format!("/api/v1/registration-tokens/{id}"),
            None,
        )
        .await?;
    assert_eq!(status, 204);
    assert_eq!(
        api.register(&second_secret, "b", "eu").await.0,
        401,
        "revoked"
    );
    let (_, listed) = central
        .admin(Method::GET, "/api/v1/registration-tokens", None)
        .await?;
    assert_eq!(listed["items"][0]["revoked"], true);
    assert_eq!(listed["items"][0]["uses"], 1);
    let (status, _) = central
        .admin(
            Method::POST,
            &format!("/api/v1/registration-tokens/{id}/rotate"),
            None,
        )
        .await?;
    assert_eq!(status, 404, "a revoked token cannot be brought back");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotation_with_overlap_keeps_the_old_secret_working_that_long() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let api = Api::of(&central);
    let (_, created) = central
        .admin(
            Method::POST,
            "/api/v1/registration-tokens",
            Some(json!({"name": "fleet", "max_uses": 10})),
        )
        .await?;
    let id = created["id"].as_str().unwrap().to_string();
    let first = created["token"].as_str().unwrap().to_string();
    let rotate = |overlap: Value| {
        let path = format!("/api/v1/registration-tokens/{id}/rotate");
        let central = &central;
        async move {
            central
                .admin(Method::POST, &path, Some(json!({ "overlap": overlap })))
                .await
        }
    };

    let (status, refused) = rotate(json!("31d")).await?;
    assert_eq!(status, 400, "{refused}");
    assert!(refused["message"].as_str().unwrap().contains("overlap"));

    let (status, rotated) = rotate(json!("3s")).await?;
    assert_eq!(status, 200, "{rotated}");
    assert!(
        rotated["previous_secret_valid_until"].is_string(),
        "{rotated}"
    );
    let second = rotated["token"].as_str().unwrap().to_string();
    assert_eq!(
        api.register(&first, "old-config", "eu").await.0,
        200,
        "overlap"
    );
    assert_eq!(api.register(&second, "new-config", "eu").await.0, 200);
    tokio::time::sleep(std::time::Duration::from_millis(3_200)).await;
    assert_eq!(
        api.register(&first, "late", "eu").await.0,
        401,
        "overlap over"
    );
    assert_eq!(api.register(&second, "new-config-2", "eu").await.0, 200);

    // A second rotation keeps only the secret it replaces: the first one stays dead.
    let (_, rotated) = rotate(json!("1h")).await?;
    let third = rotated["token"].as_str().unwrap().to_string();
    assert_eq!(api.register(&first, "older", "eu").await.0, 401);
    assert_eq!(api.register(&second, "previous", "eu").await.0, 200);
    assert_eq!(api.register(&third, "newest", "eu").await.0, 200);
    let (_, listed) = central
        .admin(Method::GET, "/api/v1/registration-tokens", None)
        .await?;
    assert_eq!(
        listed["items"][0]["uses"], 5,
        "five registrations got in: {listed}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refresh_tokens_rotate_tolerate_a_lost_answer_and_detect_reuse() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let api = Api::of(&central);
    let token = central.registration_token().await?;
    let (_, registered) = api.register(&token, "edge", "eu").await;
    let r1 = registered["refresh_token"].as_str().unwrap().to_string();

    let (status, renewed) = api.refresh(&r1).await;
    assert_eq!(status, 200);
    let r2 = renewed["refresh_token"].as_str().unwrap().to_string();
    assert_eq!(
        api.heartbeat(renewed["access_token"].as_str().unwrap())
            .await,
        200
    );

    // The answer carrying r2 was "lost": the agent retries with r1 and gets a working r3;
    // r2, never used, is superseded (presenting it would now revoke the family, see
    // `a_replayed_refresh_token_is_caught_when_its_victim_refreshes`).
    let (status, retried) = api.refresh(&r1).await;
    assert_eq!(status, 200, "{retried}");
    let _superseded_r2 = r2;
    let r3 = retried["refresh_token"].as_str().unwrap().to_string();
    let (status, renewed) = api.refresh(&r3).await;
    assert_eq!(status, 200);
    let r4 = renewed["refresh_token"].as_str().unwrap().to_string();
    let (status, renewed) = api.refresh(&r4).await;
    assert_eq!(status, 200);
    let r5 = renewed["refresh_token"].as_str().unwrap().to_string();
    let access = renewed["access_token"].as_str().unwrap().to_string();

    // r4, the successor of r3, has been used: presenting r3 again is no retry but reuse,
    // and revokes the whole family.
    let (status, refused) = api.refresh(&r3).await;
    assert_eq!(status, 401);
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("already used"),
        "{refused}"
    );
    assert_eq!(api.refresh(&r5).await.0, 401, "the whole family is revoked");
    // Access tokens already issued stay valid until they expire (at most 15 minutes).
    assert_eq!(api.heartbeat(&access).await, 200);
    Ok(())
}

/// RFC 9700 §4.14.2: a replayer inside the retry grace gets a fresh token and supersedes the
/// victim's; when the victim presents its superseded token, the whole family is revoked, so the
/// theft is revealed instead of silently succeeding.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_refresh_token_is_caught_when_its_victim_refreshes() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let api = Api::of(&central);
    let token = central.registration_token().await?;
    let (_, registered) = api.register(&token, "edge", "eu").await;
    let r1 = registered["refresh_token"].as_str().unwrap().to_string();

    let (status, victim) = api.refresh(&r1).await;
    assert_eq!(status, 200);
    let victims_r2 = victim["refresh_token"].as_str().unwrap().to_string();
    let (status, thief) = api.refresh(&r1).await;
    assert_eq!(
        status, 200,
        "a replay inside the grace looks like a retry: {thief}"
    );
    let thiefs_r3 = thief["refresh_token"].as_str().unwrap().to_string();

    let (status, refused) = api.refresh(&victims_r2).await;
    assert_eq!(status, 401, "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("already used"),
        "{refused}"
    );
    assert_eq!(
        api.refresh(&thiefs_r3).await.0,
        401,
        "the replayer's chain is revoked with the family"
    );
    assert!(
        central.log().contains("suspected theft"),
        "logged as a suspected theft"
    );
    Ok(())
}

/// Two refreshes racing with one token are a retry, not a reuse: both get a pair (the later
/// one superseding the earlier), and the family survives the race.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_refreshes_with_one_token_do_not_revoke_the_family() -> anyhow::Result<()> {
    // Five rounds of a registration and four refreshes from one address, some of them refused
    // by design: the per-client limits (attack_surface.rs) would answer the last ones 429 on a
    // fast machine, which says nothing about the race tested here.
    let central = Central::start_with(&[
        ("CENTRAL_AUTH_RATE_LIMIT", "0"),
        ("CENTRAL_AUTH_FAILURES_PER_MINUTE", "0"),
    ])
    .await?;
    let api = Api::of(&central);
    for round in 0..5 {
        let token = central.registration_token().await?;
        let (_, registered) = api.register(&token, &format!("edge-{round}"), "eu").await;
        let refresh = registered["refresh_token"].as_str().unwrap().to_string();
        let ((a_status, a), (b_status, b)) =
            tokio::join!(api.refresh(&refresh), api.refresh(&refresh));
        assert_eq!((a_status, b_status), (200, 200), "round {round}: {a} {b}");
        for answer in [&a, &b] {
            let access = answer["access_token"].as_str().unwrap();
            assert_eq!(api.heartbeat(access).await, 200, "round {round}");
        }
        // One successor was superseded by the other; the live one keeps the family going.
        let outcomes = [
            api.refresh(b["refresh_token"].as_str().unwrap()).await.0,
            api.refresh(a["refresh_token"].as_str().unwrap()).await.0,
        ];
        assert!(
            outcomes[0] == 200 || outcomes == [401, 401],
            "round {round}: {outcomes:?}"
        );
    }
    assert!(
        !central
            .log()
            .contains("spent refresh token presented again"),
        "no race was taken for a reuse"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabling_and_deleting_a_poller_take_effect_on_its_next_call() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let api = Api::of(&central);
    let (_, eu) = api
        .register(&central.registration_token().await?, "eu-1", "eu")
        .await;
    let (_, _us) = api
        .register(&central.registration_token().await?, "us-1", "us")
        .await;
    let eu_id = eu["poller_id"].as_str().unwrap().to_string();
    let eu_access = eu["access_token"].as_str().unwrap().to_string();
    let monitor = central
        .create_monitor(
            json!({"name": "m", "kind": "http", "target": "http://127.0.0.1:9/",
                               "poller_mode": "grouped", "poller_region": "eu"}),
        )
        .await?;
    assert_eq!(central.status(&monitor).await?["poller_id"], eu_id.as_str());

    let (_, only_us) = central
        .admin(Method::GET, "/api/v1/pollers?region=us", None)
        .await?;
    let names: Vec<&str> = only_us["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["us-1"]);
    let (_, online) = central
        .admin(Method::GET, "/api/v1/pollers?status=online", None)
        .await?;
    assert_eq!(online["items"].as_array().unwrap().len(), 2);

    let (status, patched) = central
        .admin(
            Method::PATCH,
            &format!("/api/v1/pollers/{eu_id}"),
            Some(json!({"alias": "Frankfurt", "enabled": false})),
        )
        .await?;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(
        (patched["alias"].as_str(), patched["enabled"].as_bool()),
        (Some("Frankfurt"), Some(false))
    );
    assert_eq!(
        api.heartbeat(&eu_access).await,
        403,
        "disabled at once, token or not"
    );
    let eu_refresh = eu["refresh_token"].as_str().unwrap();
    assert_eq!(
        api.refresh(eu_refresh).await.0,
        403,
        "no new tokens while disabled"
    );
    // The lease holder places the disabled poller's monitors within moments (placement is
    // queued, not done inside the edit): the monitor then says why nobody runs it.
    let status = eventually(Duration::from_secs(10), "the monitor stale", || async {
        let status = central.status(&monitor).await.ok()?;
        (status["status"] == "stale").then_some(status)
    })
    .await?;
    assert!(
        status["reason"].as_str().unwrap().contains("disabled"),
        "{status}"
    );

    let (status, bad) = central
        .admin(
            Method::PATCH,
            &format!("/api/v1/pollers/{eu_id}"),
            Some(json!({"region": "eu west"})),
        )
        .await?;
    assert_eq!(status, 400);
    assert!(bad["message"].as_str().unwrap().contains("region"), "{bad}");

    central
        .admin(
            Method::PATCH,
            &format!("/api/v1/pollers/{eu_id}"),
            Some(json!({"enabled": true})),
        )
        .await?;
    assert_eq!(api.heartbeat(&eu_access).await, 200);
    let (status, _) = api.refresh(eu_refresh).await;
    assert_eq!(
        status, 200,
        "the refresh refused while disabled did not spend the token"
    );

    let (status, _) = central
        .admin(Method::DELETE, &format!("/api/v1/pollers/{eu_id}"), None)
        .await?;
    assert_eq!(status, 204);
    assert_eq!(
        api.heartbeat(&eu_access).await,
        401,
        "deleted: refused at once"
    );
    assert_eq!(
        api.refresh(eu["refresh_token"].as_str().unwrap()).await.0,
        401,
        "its refresh token is revoked"
    );
    let (status, _) = central
        .admin(Method::GET, &format!("/api/v1/pollers/{eu_id}"), None)
        .await?;
    assert_eq!(status, 404);
    let (status, _) = central
        .admin(Method::DELETE, &format!("/api/v1/pollers/{eu_id}"), None)
        .await?;
    assert_eq!(status, 404);
    let (_, all) = central.admin(Method::GET, "/api/v1/pollers", None).await?;
    assert_eq!(all["items"].as_array().unwrap().len(), 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registration_attempts_are_rate_limited_per_address() -> anyhow::Result<()> {
    let central = Central::start_with(&[("CENTRAL_AUTH_RATE_LIMIT", "2")]).await?;
    let api = Api::of(&central);
    let mut limited = None;
    for _ in 0..30 {
        let response = api
            .http
            .post(format!("{}/api/poller/register", central.url))
            .json(&json!({"registration_token": "guess", "name": "x", "version": "t"}))
            .send()
            .await?;
        if response.status() == 429 {
            let retry_after = response.headers().get("retry-after").cloned();
            limited = Some((retry_after, response.json::<Value>().await?));
            break;
        }
        assert_eq!(response.status(), 401);
    }
    let (retry_after, body) = limited.expect("guessing is throttled");
    assert!(retry_after.is_some(), "Retry-After says when to come back");
    assert_eq!(body["error"], "rate_limited");
    // Authenticated calls are not throttled by it.
    let token = central.registration_token().await;
    assert!(token.is_ok());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotating_the_signing_key_logs_no_poller_out() -> anyhow::Result<()> {
    let first = Central::start().await?;
    let database = first.database_url().to_string();
    let api = Api {
        http: reqwest::Client::new(),
        base: first.url.clone(),
    };
    let (_, registered) = api
        .register(&first.registration_token().await?, "edge", "eu")
        .await;
    let old_access = registered["access_token"].as_str().unwrap().to_string();
    // The `kid` in a JWT's header (base64url JSON before the first dot).
    let kid = |token: &str| -> String {
        let header = token
            .split('.')
            .next()
            .unwrap()
            .replace('-', "+")
            .replace('_', "/");
        let json: Value = serde_json::from_slice(&base64_decode(&header)).unwrap();
        json["kid"].as_str().unwrap().to_string()
    };

    let output = tokio::process::Command::new(e2e::binary("central"))
        .arg("rotate-signing-key")
        .env("CENTRAL_DATABASE_URL", &database)
        .env("CENTRAL_ADMIN_TOKEN", e2e::ADMIN_TOKEN)
        .output()
        .await?;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

    // A second replica on the same database signs with the new key…
    let second = Central::start_with(&[("CENTRAL_DATABASE_URL", &database)]).await?;
    let replica = Api {
        http: reqwest::Client::new(),
        base: second.url.clone(),
    };
    let (status, renewed) = replica
        .refresh(registered["refresh_token"].as_str().unwrap())
        .await;
    assert_eq!(status, 200, "{renewed}");
    let new_access = renewed["access_token"].as_str().unwrap().to_string();
    assert_ne!(
        kid(&new_access),
        kid(&old_access),
        "new tokens carry the new key's id"
    );
    // …the first replica, started before the rotation, accepts it (it loads the key on sight)…
    assert_eq!(api.heartbeat(&new_access).await, 200);
    // …and the token signed with the previous key still works on both.
    assert_eq!(api.heartbeat(&old_access).await, 200);
    assert_eq!(replica.heartbeat(&old_access).await, 200);
    Ok(())
}

/// Standard base64 (with padding) to bytes; JWT headers are tiny, so a plain loop will do.
fn base64_decode(text: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut bits = 0u32;
    let mut count = 0;
    let mut out = Vec::new();
    for byte in text.bytes().filter(|b| *b != b'=') {
        let value = ALPHABET.iter().position(|a| *a == byte).expect("base64") as u32;
        bits = (bits << 6) | value;
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
            bits &= (1 << count) - 1;
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_environment_registration_token_enrols_agents_and_follows_the_environment(
) -> anyhow::Result<()> {
    const VARIABLE: &str = "CENTRAL_REGISTRATION_TOKEN";
    let (first, second) = ("fleet-secret-one-0123456789", "fleet-secret-two-0123456789");
    let mut central = Central::start_with(&[(VARIABLE, first)]).await?;
    let api = Api::of(&central);

    // A real agent enrols with the value from central's environment.
    let agent_dir = tempfile::tempdir()?;
    let mut agent = Agent::start(&central.url, Some(first.into()), agent_dir.path()).await?;
    eventually(Duration::from_secs(20), "the agent registered", || async {
        let (_, pollers) = central
            .admin(Method::GET, "/api/v1/pollers", None)
            .await
            .ok()?;
        (pollers["items"].as_array()?.len() == 1).then_some(())
    })
    .await?;
    agent.kill().await;
    // Reusable, listed under its variable's name, counted.
    assert_eq!(api.register(first, "second", "eu").await.0, 200);
    let (_, tokens) = central
        .admin(Method::GET, "/api/v1/registration-tokens", None)
        .await?;
    let listed = &tokens["items"][0];
    assert_eq!(listed["name"], VARIABLE, "{tokens}");
    assert_eq!(listed["uses"], 2, "{tokens}");

    // A restart with the same value keeps it (and its count); a new value retires the old one.
    central.restart().await?;
    assert_eq!(api.register(first, "third", "eu").await.0, 200);
    central.set_env(VARIABLE, Some(second));
    central.restart().await?;
    assert_eq!(api.register(first, "fourth", "eu").await.0, 401);
    assert_eq!(api.register(second, "fifth", "eu").await.0, 200);

    // Without the variable, no value works; a too-short one stops central at start.
    central.set_env(VARIABLE, None);
    central.restart().await?;
    assert_eq!(api.register(second, "sixth", "eu").await.0, 401);
    let dir = tempfile::tempdir()?;
    let refused = tokio::process::Command::new(e2e::binary("central"))
        .arg("serve")
        .env("CENTRAL_LISTEN", "127.0.0.1:0")
        .env(
            "CENTRAL_DATABASE_URL",
            format!("sqlite://{}", dir.path().join("c.db").display()),
        )
        .env(VARIABLE, "short")
        .output();
    let refused = tokio::time::timeout(Duration::from_secs(30), refused).await??;
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("at least 16 characters"), "{stderr}");
    Ok(())
}
