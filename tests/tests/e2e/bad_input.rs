//! Bad input gets a 4xx JSON error that names the problem, never a 5xx.

use e2e::{Central, ADMIN_TOKEN};
use serde_json::{json, Value};

async fn send(
    central: &Central,
    method: reqwest::Method,
    path: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> (u16, Value) {
    let mut request = reqwest::Client::new().request(method, format!("{}{path}", central.url));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request
            .header("content-type", "application/json")
            .body(body.to_string());
    }
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    let text = response.text().await.expect("body");
    let body: Value =
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("{path}: not JSON: {text}"));
    (status, body)
}

/// Asserts a 4xx JSON error whose message mentions every one of `words`.
fn assert_error(case: &str, (status, body): (u16, Value), expected_status: u16, words: &[&str]) {
    assert_eq!(status, expected_status, "{case}: {body}");
    assert!(body["error"].is_string(), "{case}: no error code in {body}");
    let message = body["message"]
        .as_str()
        .unwrap_or_else(|| panic!("{case}: no message in {body}"));
    for word in words {
        assert!(
            message.contains(word),
            "{case}: message `{message}` should mention `{word}`"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_request_gets_a_named_4xx() {
    let central = Central::start().await.expect("central");
    let admin = Some(ADMIN_TOKEN);
    let post = reqwest::Method::POST;
    let get = reqwest::Method::GET;
    let monitor = |extra: Value| {
        let mut base = json!({"name": "m", "kind": "http", "target": "http://127.0.0.1:1/"});
        base.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        base.to_string()
    };

    let wrong_registration = json!({
        "registration_token": "preg_00000000000000000000000000000000_nope",
        "name": "x", "capabilities": ["http"], "version": "1"
    })
    .to_string();
    assert_error(
        "wrong registration token",
        send(
            &central,
            post.clone(),
            "/api/poller/register",
            None,
            Some(&wrong_registration),
        )
        .await,
        401,
        &["registration token"],
    );
    let garbage_registration =
        json!({"registration_token": "garbage", "name": "x", "version": "1"}).to_string();
    assert_error(
        "garbage registration token",
        send(
            &central,
            post.clone(),
            "/api/poller/register",
            None,
            Some(&garbage_registration),
        )
        .await,
        401,
        &["registration token"],
    );
    assert_error(
        "malformed body",
        send(
            &central,
            post.clone(),
            "/api/v1/monitors",
            admin,
            Some("{not json"),
        )
        .await,
        400,
        &[],
    );
    assert_error(
        "interval too short",
        send(
            &central,
            post.clone(),
            "/api/v1/monitors",
            admin,
            Some(&monitor(json!({"interval_ms": 10}))),
        )
        .await,
        400,
        &["interval_ms", "5000"],
    );
    assert_error(
        "unknown kind",
        send(
            &central,
            post.clone(),
            "/api/v1/monitors",
            admin,
            Some(&monitor(json!({"kind": "ftp"}))),
        )
        .await,
        400,
        &["kind", "ftp"],
    );
    assert_error(
        "misspelt field",
        send(
            &central,
            post.clone(),
            "/api/v1/monitors",
            admin,
            Some(&monitor(json!({"intervall_ms": 5000}))),
        )
        .await,
        400,
        &["intervall_ms"],
    );
    assert_error(
        "bad target",
        send(
            &central,
            post.clone(),
            "/api/v1/monitors",
            admin,
            Some(&monitor(json!({"target": "nope"}))),
        )
        .await,
        400,
        &["target"],
    );
    // The http kind's target pattern admits a bracketed IPv6 shape; whether it is an
    // address no pattern says.
    assert_error(
        "unusable target",
        send(
            &central,
            post.clone(),
            "/api/v1/monitors",
            admin,
            Some(&monitor(json!({"target": "http://[1:2:3]/"}))),
        )
        .await,
        422,
        &["target", "IPv6"],
    );
    assert_error(
        "setting out of its stated range",
        send(
            &central,
            post.clone(),
            "/api/v1/monitors",
            admin,
            Some(&monitor(json!({"settings": {"retries": 99}}))),
        )
        .await,
        400,
        &["settings.retries"],
    );
    assert_error(
        "settings that contradict each other",
        send(
            &central,
            post.clone(),
            "/api/v1/monitors",
            admin,
            Some(&monitor(
                json!({"settings": {"backoff_base_ms": 5000, "backoff_max_ms": 1000}}),
            )),
        )
        .await,
        422,
        &["settings.backoff_max_ms"],
    );
    assert_error(
        "pinned to nobody",
        send(
            &central,
            post.clone(),
            "/api/v1/monitors",
            admin,
            Some(&monitor(json!({"poller_mode": "pinned", "poller_id": "7f1c1d3e-0000-4000-8000-000000000000"}))),
        )
        .await,
        422,
        &["poller_id"],
    );
    assert_error(
        "wrong type",
        send(
            &central,
            post.clone(),
            "/api/v1/monitors",
            admin,
            Some(&monitor(json!({"interval_ms": "often"}))),
        )
        .await,
        400,
        &["interval_ms"],
    );
    assert_error(
        "no admin token",
        send(&central, get.clone(), "/api/v1/monitors", None, None).await,
        401,
        &["Bearer"],
    );
    assert_error(
        "wrong admin token",
        send(
            &central,
            get.clone(),
            "/api/v1/monitors",
            Some("nope"),
            None,
        )
        .await,
        401,
        &["admin token"],
    );
    assert_error(
        "poller call without a token",
        send(
            &central,
            post.clone(),
            "/api/poller/heartbeat",
            None,
            Some("{}"),
        )
        .await,
        401,
        &[],
    );
    assert_error(
        "poller call with a forged token",
        send(
            &central,
            get.clone(),
            "/api/poller/assignments",
            Some("eyJhbGciOiJub25lIn0.e30."),
            None,
        )
        .await,
        401,
        &[],
    );
    assert_error(
        "admin token is not a poller token",
        send(
            &central,
            get.clone(),
            "/api/poller/assignments",
            admin,
            None,
        )
        .await,
        401,
        &[],
    );
    // An id that is not a UUID names nothing: 404, as an unknown UUID (a `null` followed
    // out of a list arrives as `/users/None`).
    assert_error(
        "bad id",
        send(
            &central,
            get.clone(),
            "/api/v1/monitors/not-a-uuid",
            admin,
            None,
        )
        .await,
        404,
        &["not-a-uuid", "UUID"],
    );
    assert_error(
        "null id",
        send(
            &central,
            reqwest::Method::DELETE,
            "/api/v1/users/None",
            admin,
            None,
        )
        .await,
        404,
        &["None", "UUID"],
    );
    assert_error(
        "unknown monitor",
        send(
            &central,
            get.clone(),
            "/api/v1/monitors/7f1c1d3e-0000-4000-8000-000000000000/status",
            admin,
            None,
        )
        .await,
        404,
        &["no monitor"],
    );
    assert_error(
        "unknown path",
        send(&central, get.clone(), "/api/v1/nothing", admin, None).await,
        404,
        &["/api/v1/nothing"],
    );
    assert_error(
        "bad limit",
        send(
            &central,
            get.clone(),
            "/api/v1/monitors?limit=0",
            admin,
            None,
        )
        .await,
        400,
        &["limit"],
    );
    assert_error(
        "bad cursor",
        send(
            &central,
            get.clone(),
            "/api/v1/monitors?cursor=zzz",
            admin,
            None,
        )
        .await,
        400,
        &["cursor"],
    );
    assert_error(
        "wrong method",
        send(
            &central,
            reqwest::Method::PUT,
            "/api/v1/monitors",
            admin,
            None,
        )
        .await,
        405,
        &["PUT"],
    );
    assert_error(
        "bad registration-token request",
        send(
            &central,
            post.clone(),
            "/api/v1/registration-tokens",
            admin,
            Some(&json!({"name": "t", "expires_in": "soon"}).to_string()),
        )
        .await,
        400,
        &["expires_in"],
    );
    // Updates and filters name their field too.
    let created = send(
        &central,
        post.clone(),
        "/api/v1/monitors",
        admin,
        Some(&monitor(json!({}))),
    )
    .await;
    assert_eq!(created.0, 201, "{}", created.1);
    let path = format!("/api/v1/monitors/{}", created.1["id"].as_str().unwrap());
    let patch = reqwest::Method::PATCH;
    // 400 for what the patch's own schema states; 422 for a patch that does not fit the
    // monitor as it is (settings and targets depend on its kind, pinned needs its poller).
    for (body, status, words) in [
        (json!({"interval_ms": 1}), 400, vec!["interval_ms"]),
        (json!({"kind": "tcp"}), 400, vec!["kind"]),
        (json!({"name": "a\nb"}), 400, vec!["name"]),
        (
            json!({"settings": {"retries": 99}}),
            422,
            vec!["settings.retries"],
        ),
        (json!({"poller_mode": "pinned"}), 422, vec!["poller_id"]),
        (json!({"target": "ftp://x"}), 422, vec!["target"]),
        (json!({"timeout_ms": 60000}), 422, vec!["timeout_ms"]),
    ] {
        let answer = send(
            &central,
            patch.clone(),
            &path,
            admin,
            Some(&body.to_string()),
        )
        .await;
        assert_error(&format!("PATCH monitor {body}"), answer, status, &words);
    }
    let missing_poller = "/api/v1/pollers/7f1c1d3e-0000-4000-8000-000000000000";
    assert_error(
        "PATCH unknown poller",
        send(
            &central,
            patch.clone(),
            missing_poller,
            admin,
            Some(r#"{"enabled": false}"#),
        )
        .await,
        404,
        &["no poller"],
    );
    assert_error(
        "PATCH poller with an unknown field",
        send(
            &central,
            patch.clone(),
            missing_poller,
            admin,
            Some(r#"{"enabld": false}"#),
        )
        .await,
        400,
        &["enabld"],
    );
    assert_error(
        "bad poller status filter",
        send(
            &central,
            get.clone(),
            "/api/v1/pollers?status=sleeping",
            admin,
            None,
        )
        .await,
        400,
        &["sleeping"],
    );
    assert_error(
        "bad since",
        send(
            &central,
            get.clone(),
            &format!("{path}/results?since=yesterday"),
            admin,
            None,
        )
        .await,
        400,
        &["since"],
    );
    assert_error(
        "rotate an unknown token",
        send(
            &central,
            post.clone(),
            "/api/v1/registration-tokens/7f1c1d3e-0000-4000-8000-000000000000/rotate",
            admin,
            None,
        )
        .await,
        404,
        &["registration token"],
    );
    assert!(
        !central.log().contains("internal error"),
        "{}",
        central.log()
    );
    central.stop().await;
}
