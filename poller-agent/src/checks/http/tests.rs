//! The `http` check against a local server: statuses, assertions, bodies, timeouts.

use super::*;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;

async fn serve() -> String {
    let app = axum::Router::new()
        .route("/ok", get(|| async { "all good" }))
        .route(
            "/fail",
            get(|| async { (StatusCode::SERVICE_UNAVAILABLE, "no") }),
        )
        .route("/denied", get(|| async { (StatusCode::FORBIDDEN, "no") }))
        .route(
            "/sick",
            get(|| async {
                let doc =
                    json!({"dependencies": [{"name": "db", "healthy": false, "error": "timeout"}]});
                (StatusCode::SERVICE_UNAVAILABLE, axum::Json(doc))
            }),
        )
        .route(
            "/busy",
            get(|| async {
                (
                    StatusCode::TOO_MANY_REQUESTS,
                    [("retry-after", "120")],
                    "slow down",
                )
            }),
        )
        .route(
            "/json",
            get(|| async { axum::Json(json!({"status": "ok", "version": 3})) }),
        )
        .route(
            "/health",
            get(|| async {
                axum::Json(json!({"dependencies": [
                    {"name": "db", "healthy": true, "latency_ms": 3},
                    {"name": "cache", "healthy": false, "error": "connection refused"},
                    {"name": "mail", "healthy": false, "skipped": true},
                ]}))
            }),
        )
        .route(
            "/etag",
            get(|headers: HeaderMap| async move {
                if headers.get("if-none-match").is_some_and(|v| v == "\"v1\"") {
                    (StatusCode::NOT_MODIFIED, [("etag", "\"v1\"")], "")
                } else {
                    (StatusCode::OK, [("etag", "\"v1\"")], "fresh")
                }
            }),
        )
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                "late"
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

const TIMEOUT: Duration = Duration::from_secs(2);

#[tokio::test]
async fn status_keyword_json_and_timeout_outcomes() {
    let base = serve().await;
    let clients = HttpClients::new("poller-agent/test (probe)", Default::default()).unwrap();
    let check = |path: &str, settings: HttpSettings| {
        let url = format!("{base}{path}");
        let clients = clients.clone();
        async move { clients.check(&url, &settings, TIMEOUT, None).await }
    };

    let ok = check("/ok", HttpSettings::default()).await;
    assert_eq!(ok.status, ResultStatus::Up, "{ok:?}");
    assert_eq!(ok.meta["status_code"], 200);

    let fail = check("/fail", HttpSettings::default()).await;
    assert_eq!(
        (fail.msg.as_str(), fail.permanent),
        ("expected 2xx, got 503", false)
    );
    let expect_503 = HttpSettings {
        expected_status: vec![503],
        ..Default::default()
    };
    assert_eq!(check("/fail", expect_503).await.status, ResultStatus::Up);

    let denied = check("/denied", HttpSettings::default()).await;
    assert!(denied.permanent, "403 is permanent: {denied:?}");

    let keyword = HttpSettings {
        keyword: Some("missing".into()),
        ..Default::default()
    };
    assert_eq!(
        check("/ok", keyword).await.msg,
        "keyword `missing` not found"
    );
    let absent = HttpSettings {
        keyword_absent: Some("good".into()),
        ..Default::default()
    };
    assert_eq!(check("/ok", absent).await.msg, "keyword `good` present");

    let json_ok = HttpSettings {
        json_path: Some("/status".into()),
        json_expected: Some(json!("ok")),
        ..Default::default()
    };
    assert_eq!(check("/json", json_ok).await.status, ResultStatus::Up);
    let json_bad = HttpSettings {
        json_path: Some("/version".into()),
        json_expected: Some(json!(4)),
        ..Default::default()
    };
    assert_eq!(
        check("/json", json_bad).await.msg,
        "json /version is 3, expected 4"
    );
    let not_json = HttpSettings {
        json_path: Some("/x".into()),
        ..Default::default()
    };
    assert!(check("/ok", not_json)
        .await
        .msg
        .starts_with("body is not JSON"));

    let slow = clients
        .check(
            &format!("{base}/slow"),
            &HttpSettings::default(),
            Duration::from_millis(300),
            None,
        )
        .await;
    assert_eq!(slow.msg, "timeout after 300 ms");
}

#[tokio::test]
async fn rate_limits_conditional_requests_and_health_documents() {
    let base = serve().await;
    let clients = HttpClients::new("poller-agent/test (probe)", Default::default()).unwrap();

    let busy = clients
        .check(
            &format!("{base}/busy"),
            &HttpSettings::default(),
            TIMEOUT,
            None,
        )
        .await;
    assert_eq!(busy.status, ResultStatus::RateLimited);
    assert_eq!(busy.retry_after, Some(Duration::from_secs(120)));
    assert_eq!(
        busy.msg,
        "rate limited (429), target asks to retry after 120 s"
    );

    let conditional = HttpSettings {
        conditional: true,
        ..Default::default()
    };
    let first = clients
        .check(&format!("{base}/etag"), &conditional, TIMEOUT, None)
        .await;
    assert_eq!(first.meta["status_code"], 200);
    let validators = first.validators.clone().expect("etag kept");
    assert_eq!(validators.etag.as_deref(), Some("\"v1\""));
    let second = clients
        .check(
            &format!("{base}/etag"),
            &conditional,
            TIMEOUT,
            Some(validators),
        )
        .await;
    assert_eq!(second.status, ResultStatus::Up);
    assert_eq!(second.meta["unchanged"], true);

    let health = HttpSettings {
        format: BodyFormat::HealthJson,
        ..Default::default()
    };
    let report = clients
        .check(&format!("{base}/health"), &health, TIMEOUT, None)
        .await;
    assert_eq!(report.status, ResultStatus::Down);
    assert_eq!(
        report.msg,
        "unhealthy dependencies: cache (connection refused)"
    );
    let sick = clients
        .check(&format!("{base}/sick"), &health, TIMEOUT, None)
        .await;
    assert_eq!(
        sick.msg,
        "expected 2xx, got 503; unhealthy dependencies: db (timeout)"
    );
    assert_eq!(sick.meta["dependencies"][0]["name"], "db");
    let deps = report.meta["dependencies"].as_array().unwrap();
    assert_eq!(deps.len(), 3);
    assert_eq!(deps[2]["skipped"], true);
    assert_eq!(deps[0]["latency_ms"], 3);
}

#[tokio::test]
async fn refused_and_unresolvable_targets_say_so() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let clients = HttpClients::new("poller-agent/test (probe)", Default::default()).unwrap();
    let refused = clients
        .check(
            &format!("http://{addr}/"),
            &HttpSettings::default(),
            TIMEOUT,
            None,
        )
        .await;
    assert_eq!(
        (refused.msg.as_str(), refused.permanent),
        ("connection refused", false)
    );
    let nowhere = clients
        .check(
            "http://no-such-host.invalid/",
            &HttpSettings::default(),
            TIMEOUT,
            None,
        )
        .await;
    assert!(nowhere.permanent, "{nowhere:?}");
    assert_eq!(nowhere.msg, "dns: name does not resolve");
}

/// A raw server for bodies axum would not send: a `200` announcing `announced` bytes whose
/// body comes one byte every `byte_every`, or `length` bytes in one piece after `delay`; then
/// the connection stays open for a while.
async fn serve_body(
    announced: usize,
    length: usize,
    byte_every: Duration,
    delay: Duration,
) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request).await;
                let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {announced}\r\n\r\n");
                stream.write_all(head.as_bytes()).await?;
                tokio::time::sleep(delay).await;
                if byte_every.is_zero() {
                    stream.write_all(&vec![b'.'; length]).await?;
                } else {
                    for _ in 0..length {
                        stream.write_all(b".").await?;
                        tokio::time::sleep(byte_every).await;
                    }
                }
                tokio::time::sleep(Duration::from_secs(30)).await;
                std::io::Result::Ok(())
            });
        }
    });
    // By name, so the resolver's phase is exercised too.
    format!("http://localhost:{port}/")
}

#[tokio::test]
async fn a_body_that_trickles_past_the_timeout_is_down_without_any_assertion() {
    let url = serve_body(100, 100, Duration::from_millis(100), Duration::ZERO).await;
    let clients = HttpClients::new("poller-agent/test (probe)", Default::default()).unwrap();
    let outcome = clients
        .check(
            &url,
            &HttpSettings::default(),
            Duration::from_millis(700),
            None,
        )
        .await;
    assert_eq!(outcome.status, ResultStatus::Down, "{outcome:?}");
    assert!(
        outcome
            .msg
            .starts_with("body stalled: not finished within the 700 ms timeout"),
        "{outcome:?}"
    );
    // The check ended at its deadline, not at the first byte and not at the body's end.
    let latency = outcome.latency_ms.unwrap();
    assert!((650..1500).contains(&latency), "{outcome:?}");
}

#[tokio::test]
async fn latency_is_the_whole_exchange_and_the_phases_add_up_to_it() {
    let url = serve_body(2000, 2000, Duration::ZERO, Duration::from_millis(300)).await;
    let clients = HttpClients::new("poller-agent/test (probe)", Default::default()).unwrap();
    let outcome = clients
        .check(&url, &HttpSettings::default(), TIMEOUT, None)
        .await;
    assert_eq!(outcome.status, ResultStatus::Up, "{outcome:?}");
    let latency = outcome.latency_ms.unwrap();
    assert!(
        latency >= 300,
        "the body came 300 ms after the headers: {outcome:?}"
    );
    let phases = &outcome.meta["phases"];
    let phase = |name: &str| {
        phases[name]
            .as_u64()
            .unwrap_or_else(|| panic!("{name}: {phases}"))
    };
    assert!(phase("transfer_ms") >= 290, "{phases}");
    assert!(phase("processing_ms") < 250, "{phases}");
    let sum =
        phase("resolve_ms") + phase("connect_ms") + phase("processing_ms") + phase("transfer_ms");
    // Each phase is rounded down to the millisecond on its own.
    assert!(
        sum <= latency && latency <= sum + 4,
        "{latency} vs {phases}"
    );
    let first_byte = outcome.meta["first_byte_ms"].as_u64().unwrap();
    let before_body = phase("resolve_ms") + phase("connect_ms") + phase("processing_ms");
    assert!(
        before_body <= first_byte && first_byte <= before_body + 3,
        "{outcome:?}"
    );
}

#[tokio::test]
async fn a_body_that_fills_the_cap_and_stalls_is_judged_at_the_cap_not_at_the_deadline() {
    let announced = 2 * MAX_BODY_BYTES;
    let url = serve_body(announced, MAX_BODY_BYTES, Duration::ZERO, Duration::ZERO).await;
    let clients = HttpClients::new("poller-agent/test (probe)", Default::default()).unwrap();
    let outcome = clients
        .check(&url, &HttpSettings::default(), Duration::from_secs(5), None)
        .await;
    assert_eq!(outcome.status, ResultStatus::Up, "{outcome:?}");
    assert_eq!(outcome.meta["body_truncated_at"], MAX_BODY_BYTES);
    assert!(outcome.latency_ms.unwrap() < 2_000, "{outcome:?}");
}

/// A server that counts the requests it gets and the `X-API-Key`s among them.
async fn landing() -> (String, Arc<std::sync::Mutex<Vec<Option<String>>>>) {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let app = axum::Router::new().fallback(move |headers: HeaderMap| {
        let log = log.clone();
        async move {
            let key = headers
                .get("x-api-key")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            log.lock().unwrap().push(key);
            "landed"
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), seen)
}

#[tokio::test]
async fn a_monitors_headers_never_follow_a_redirect_to_another_origin() {
    let (elsewhere, seen) = landing().await;
    let target = elsewhere.clone();
    let app = axum::Router::new()
        .route(
            "/away",
            get(move || {
                let to = format!("{target}/landing");
                async move { axum::response::Redirect::temporary(&to) }
            }),
        )
        .route(
            "/here",
            get(|| async { axum::response::Redirect::temporary("/ok") }),
        )
        .route("/ok", get(|| async { "ok" }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let clients = HttpClients::new("poller-agent/test (probe)", Default::default()).unwrap();
    let with_key = HttpSettings {
        headers: [("X-API-Key".to_string(), "k-123".to_string())].into(),
        ..Default::default()
    };

    let away = clients
        .check(&format!("{base}/away"), &with_key, TIMEOUT, None)
        .await;
    assert_eq!(away.status, ResultStatus::Down, "{away:?}");
    assert!(away.msg.contains("another origin"), "{}", away.msg);
    assert!(
        seen.lock().unwrap().is_empty(),
        "nothing reached the other origin"
    );

    let here = clients
        .check(&format!("{base}/here"), &with_key, TIMEOUT, None)
        .await;
    assert_eq!(here.status, ResultStatus::Up, "{here:?}");

    // Without headers or a body there is nothing to leak: the redirect is followed.
    let plain = clients
        .check(
            &format!("{base}/away"),
            &HttpSettings::default(),
            TIMEOUT,
            None,
        )
        .await;
    assert_eq!(plain.status, ResultStatus::Up, "{plain:?}");
    assert_eq!(*seen.lock().unwrap(), vec![None]);
}

/// Cloud metadata services hand out credentials: no check connects to one, directly, through
/// a redirect or through a name, unless `POLLER_ALLOWED_NETWORKS` names it. (Refused before
/// any connection is tried: these tests never send a packet to 169.254.169.254.)
#[tokio::test]
async fn metadata_services_are_refused_unless_the_allow_list_names_them() {
    let app = axum::Router::new()
        .route(
            "/to-metadata",
            get(|| async {
                axum::response::Redirect::temporary("http://169.254.169.254/latest/meta-data/")
            }),
        )
        .route("/ok", get(|| async { "ok" }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let clients = HttpClients::new("poller-agent/test (probe)", Default::default()).unwrap();
    let plain = HttpSettings::default();

    for url in [
        "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
        "http://[fd00:ec2::254]/latest/meta-data/",
        "http://[::ffff:169.254.169.254]/",
    ] {
        let refused = clients.check(url, &plain, TIMEOUT, None).await;
        assert_eq!(refused.status, ResultStatus::Down, "{url}: {refused:?}");
        assert!(
            refused.msg.starts_with(networks::REFUSED) && refused.permanent,
            "{url}: {}",
            refused.msg
        );
    }
    let redirected = clients
        .check(
            &format!("http://127.0.0.1:{port}/to-metadata"),
            &plain,
            TIMEOUT,
            None,
        )
        .await;
    assert!(
        redirected.msg.contains("169.254.169.254"),
        "{}",
        redirected.msg
    );
    assert_eq!(redirected.status, ResultStatus::Down);

    // An allow list replaces the default: a name is judged by what it resolves to.
    let only_other = HttpClients::new(
        "poller-agent/test (probe)",
        Arc::new(Networks::new(vec!["127.0.0.2/32".parse().unwrap()])),
    )
    .unwrap();
    let outside = only_other
        .check(
            &format!("http://localhost:{port}/ok"),
            &plain,
            TIMEOUT,
            None,
        )
        .await;
    assert!(
        outside.msg.contains("outside POLLER_ALLOWED_NETWORKS"),
        "{}",
        outside.msg
    );
    let loopback = HttpClients::new(
        "poller-agent/test (probe)",
        Arc::new(Networks::new(vec!["127.0.0.0/8".parse().unwrap()])),
    )
    .unwrap();
    let inside = loopback
        .check(
            &format!("http://localhost:{port}/ok"),
            &plain,
            TIMEOUT,
            None,
        )
        .await;
    assert_eq!(inside.status, ResultStatus::Up, "{inside:?}");
}
