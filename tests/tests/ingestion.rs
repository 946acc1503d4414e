//! Result ingestion through the real poller API: idempotent by result id, owner-checked.

use e2e::Central;
use serde_json::{json, Value};
use uuid::Uuid;

/// Registers a poller the way an agent does and returns its access token.
async fn register(central: &Central, http: &reqwest::Client) -> anyhow::Result<String> {
    let token = central.registration_token().await?;
    let answer: Value = http
        .post(format!("{}/api/poller/register", central.url))
        .json(&json!({"registration_token": token, "name": "fake-agent", "capabilities": ["http"], "version": "test"}))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    Ok(answer["access_token"].as_str().unwrap().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_batch_uploaded_twice_is_stored_once() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let http = reqwest::Client::new();
    let access = register(&central, &http).await?;
    let monitor = central
        .create_monitor(json!({"name": "m", "kind": "http", "target": "http://127.0.0.1:9/"}))
        .await?;
    let stranger = Uuid::new_v4();
    let result = |ts: &str, status: &str, monitor_id: &str| {
        json!({"id": Uuid::new_v4(), "monitor_id": monitor_id, "ts": ts, "status": status,
               "latency_ms": 7, "msg": "", "meta": {}})
    };
    let batch = json!({"batch_id": Uuid::new_v4(), "results": [
        result("2026-01-01T00:00:01Z", "up", &monitor),
        result("2026-01-01T00:00:03Z", "down", &monitor),
        result("2026-01-01T00:00:02Z", "up", &monitor),
        result("2026-01-01T00:00:04Z", "up", &stranger.to_string()),
        {"id": "not-a-uuid", "monitor_id": monitor, "ts": "yesterday", "status": "up"},
    ]});
    let upload = || async {
        http.post(format!("{}/api/poller/results", central.url))
            .bearer_auth(&access)
            .json(&batch)
            .send()
            .await?
            .error_for_status()?
            .json::<Value>()
            .await
    };
    let first = upload().await?;
    assert_eq!(first["accepted"], 3, "{first}");
    assert_eq!(first["duplicates"], 0, "{first}");
    let rejected = first["rejected"].as_array().unwrap();
    assert_eq!(rejected.len(), 2, "{first}");
    assert!(
        rejected
            .iter()
            .any(|r| r["reason"].as_str().unwrap().contains("does not exist")),
        "{first}"
    );
    assert!(
        rejected
            .iter()
            .any(|r| r["reason"].as_str().unwrap().contains("malformed")),
        "{first}"
    );

    let second = upload().await?;
    assert_eq!(second["accepted"], 0, "{second}");
    assert_eq!(second["duplicates"], 3, "{second}");

    let (_, stored) = central
        .admin(
            reqwest::Method::GET,
            &format!("/api/v1/monitors/{monitor}/results"),
            None,
        )
        .await?;
    let times: Vec<&str> = stored["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["ts"].as_str().unwrap())
        .collect();
    assert_eq!(
        times,
        [
            "2026-01-01T00:00:01Z",
            "2026-01-01T00:00:02Z",
            "2026-01-01T00:00:03Z"
        ],
        "oldest first, once each"
    );

    // The newest result by time decides the status, whatever order they arrived in.
    let status = central.status(&monitor).await?;
    assert_eq!(status["status"], "down", "{status}");
    assert_eq!(status["last_result_at"], "2026-01-01T00:00:03Z");

    let (_, paged) = central
        .admin(
            reqwest::Method::GET,
            &format!("/api/v1/monitors/{monitor}/results?limit=2"),
            None,
        )
        .await?;
    let cursor = paged["next_cursor"].as_str().expect("a next page");
    let (_, rest) = central
        .admin(
            reqwest::Method::GET,
            &format!("/api/v1/monitors/{monitor}/results?limit=2&cursor={cursor}"),
            None,
        )
        .await?;
    assert_eq!(rest["items"].as_array().unwrap().len(), 1);
    let (_, since) = central
        .admin(
            reqwest::Method::GET,
            &format!("/api/v1/monitors/{monitor}/results?since=2026-01-01T00:00:02Z"),
            None,
        )
        .await?;
    assert_eq!(
        since["items"].as_array().unwrap().len(),
        2,
        "since is inclusive"
    );
    central.stop().await;
    Ok(())
}
