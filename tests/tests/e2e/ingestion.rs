//! Result ingestion through the real poller API: idempotent by result id, owner-checked.

use e2e::{Central, RegisteredPoller};
use serde_json::{json, Value};
use uuid::Uuid;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_batch_uploaded_twice_is_stored_once() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let http = reqwest::Client::new();
    let access = central.register_poller("fake-agent").await?.access;
    let monitor = central
        .create_monitor(json!({"name": "m", "kind": "http", "target": "http://127.0.0.1:9/"}))
        .await?;
    let stranger = Uuid::new_v4();
    let result = |ts: &str, status: &str, monitor_id: &str| {
        json!({"id": Uuid::new_v4(), "monitor_id": monitor_id, "ts": ts, "status": status,
               "latency_ms": 7, "msg": "", "meta": {}})
    };
    // Recent times (an old newest result would make the monitor stale), a second apart.
    let base = chrono::Utc::now() - chrono::Duration::seconds(10);
    let at = |s: i64| {
        (base + chrono::Duration::seconds(s)).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    };
    let (t1, t2, t3, t4) = (at(1), at(2), at(3), at(4));
    let first_result = result(&t1, "up", &monitor);
    let batch = json!({"batch_id": Uuid::new_v4(), "results": [
        first_result,
        // The same result twice in one upload is stored once too.
        first_result,
        result(&t3, "down", &monitor),
        result(&t2, "up", &monitor),
        result(&t4, "up", &stranger.to_string()),
    ]});

    // What the schema states about a result refuses the whole batch, naming the result (the
    // agent halves the batch until it can drop that one): a malformed result, and a latency
    // no check can have (summed into the rollups it once overflowed PostgreSQL's BIGINT).
    let late = result(&t4, "up", &monitor);
    for (bad, field) in [
        (
            json!({"id": "not-a-uuid", "monitor_id": monitor, "ts": "yesterday", "status": "up"}),
            "`results[1]`",
        ),
        (
            json!({"id": Uuid::new_v4(), "monitor_id": monitor, "ts": t4, "status": "up",
                   "latency_ms": 9_000_000_000_000_000_000u64}),
            "`results[1].latency_ms`",
        ),
    ] {
        let refused = http
            .post(format!("{}/api/poller/results", central.url))
            .bearer_auth(&access)
            .json(&json!({"batch_id": Uuid::new_v4(), "results": [late, bad]}))
            .send()
            .await?;
        assert_eq!(refused.status(), 400);
        let body: Value = refused.json().await?;
        assert_eq!(body["error"], "invalid_field", "{body}");
        let message = body["message"].as_str().unwrap();
        assert!(message.starts_with(field), "{message}");
        assert!(
            message.contains("nothing of this batch was stored"),
            "{message}"
        );
    }
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
    assert_eq!(first["duplicates"], 1, "{first}");
    let rejected = first["rejected"].as_array().unwrap();
    assert_eq!(rejected.len(), 1, "{first}");
    assert!(
        rejected[0]["reason"]
            .as_str()
            .unwrap()
            .contains("does not exist"),
        "{first}"
    );

    let second = upload().await?;
    assert_eq!(second["accepted"], 0, "{second}");
    assert_eq!(second["duplicates"], 4, "{second}");

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
        [t1.as_str(), t2.as_str(), t3.as_str()],
        "oldest first, once each"
    );

    // The newest result by time decides the status, whatever order they arrived in.
    let status = central.status(&monitor).await?;
    assert_eq!(status["status"], "down", "{status}");
    assert_eq!(status["last_result_at"], t3.as_str());

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
            &format!("/api/v1/monitors/{monitor}/results?since={t2}"),
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

async fn upload(
    central: &Central,
    http: &reqwest::Client,
    poller: &RegisteredPoller,
    batch: &Value,
) -> anyhow::Result<Value> {
    Ok(http
        .post(format!("{}/api/poller/results", central.url))
        .bearer_auth(&poller.access)
        .json(batch)
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?)
}

fn batch_for(monitor: &str, count: usize) -> Value {
    let results: Vec<Value> = (0..count)
        .map(|_| json!({"id": Uuid::new_v4(), "monitor_id": monitor, "ts": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true), "status": "up"}))
        .collect();
    json!({"batch_id": Uuid::new_v4(), "results": results})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_uploads_of_one_batch_store_each_result_once() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let http = reqwest::Client::new();
    let poller = central.register_poller("racer").await?;
    let monitor = central
        .create_monitor(json!({"name": "m", "kind": "http", "target": "http://127.0.0.1:9/"}))
        .await?;
    let batch = batch_for(&monitor, 40);
    let url = format!("{}/api/poller/results", central.url);
    let uploads = (0..8).map(|_| {
        let (http, url, access, batch) = (
            http.clone(),
            url.clone(),
            poller.access.clone(),
            batch.clone(),
        );
        async move {
            http.post(url)
                .bearer_auth(access)
                .json(&batch)
                .send()
                .await?
                .error_for_status()?
                .json::<Value>()
                .await
        }
    });
    let acks = futures_join_all(uploads).await;
    let (mut accepted, mut duplicates) = (0, 0);
    for ack in acks {
        let ack = ack?;
        accepted += ack["accepted"].as_u64().unwrap();
        duplicates += ack["duplicates"].as_u64().unwrap();
    }
    assert_eq!(
        (accepted, duplicates),
        (40, 7 * 40),
        "each result stored by exactly one upload"
    );
    assert_eq!(central.result_ids(&monitor).await?.len(), 40);
    // On SQLite the 40 wait in the results head for its flush (every 5 minutes), which
    // `/metrics` shows; PostgreSQL has no head.
    let metrics = central.metrics().await?;
    let head: Vec<&str> = metrics
        .lines()
        .filter(|line| line.starts_with("central_results_head_rows "))
        .collect();
    let expected = if e2e::postgres::suite_uses_postgres() {
        "central_results_head_rows 0"
    } else {
        "central_results_head_rows 40"
    };
    assert_eq!(head, [expected], "{metrics}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poller_cannot_report_for_another_pollers_monitor() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let http = reqwest::Client::new();
    let owner = central.register_poller("owner").await?;
    let intruder = central.register_poller("intruder").await?;
    let monitor = central
        .create_monitor(
            json!({"name": "m", "kind": "http", "target": "http://127.0.0.1:9/",
                               "poller_mode": "pinned", "poller_id": owner.id}),
        )
        .await?;

    let forged = upload(&central, &http, &intruder, &batch_for(&monitor, 3)).await?;
    assert_eq!(forged["accepted"], 0, "{forged}");
    let reasons: Vec<&str> = forged["rejected"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["reason"].as_str().unwrap())
        .collect();
    assert_eq!(reasons.len(), 3);
    assert!(
        reasons
            .iter()
            .all(|r| r.contains("not assigned to this poller")),
        "{reasons:?}"
    );

    let genuine = upload(&central, &http, &owner, &batch_for(&monitor, 3)).await?;
    assert_eq!(genuine["accepted"], 3, "{genuine}");
    assert_eq!(
        central.result_ids(&monitor).await?.len(),
        3,
        "only the owner's results are stored"
    );

    // Nor can it read the owner's assignments: its own list is empty.
    let assignments: Value = http
        .get(format!(
            "{}/api/poller/assignments?since_version=0",
            central.url
        ))
        .bearer_auth(&intruder.access)
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(assignments["upserts"], json!([]), "{assignments}");
    Ok(())
}

/// Runs futures concurrently (a tiny `join_all`, to keep the test crate's dependencies few).
async fn futures_join_all<F>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.into_iter().map(tokio::spawn).collect();
    let mut outputs = Vec::new();
    for handle in handles {
        outputs.push(handle.await.expect("task"));
    }
    outputs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn down_needs_confirmation_and_a_new_monitor_is_not_stale_at_once() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let http = reqwest::Client::new();
    let poller = central.register_poller("confirmer").await?;
    let monitor = central
        .create_monitor(
            json!({"name": "m", "kind": "http", "target": "http://127.0.0.1:9/",
                               "interval_ms": 5000, "settings": {"confirm_down": 2}}),
        )
        .await?;
    let ago = |seconds: i64| {
        (chrono::Utc::now() - chrono::Duration::seconds(seconds))
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    };
    let one = |ts: String, status: &str| json!({"batch_id": Uuid::new_v4(), "results": [{"id": Uuid::new_v4(), "monitor_id": monitor, "ts": ts, "status": status}]});
    upload(&central, &http, &poller, &one(ago(3), "up")).await?;
    assert_eq!(central.status(&monitor).await?["status"], "up");
    upload(&central, &http, &poller, &one(ago(2), "down")).await?;
    let confirming = central.status(&monitor).await?;
    assert_eq!(confirming["status"], "up", "{confirming}");
    assert_eq!(
        confirming["reason"],
        "confirming down: 1 of 2 consecutive failing results"
    );
    upload(&central, &http, &poller, &one(ago(1), "down")).await?;
    assert_eq!(central.status(&monitor).await?["status"], "down");

    // A monitor its poller got a moment ago is not stale for the age of a result it sends
    // (nor is one resumed or moved): the poller has an interval and the grace from then.
    // Silence past that is `stale` (service::status unit tests; failover.rs and
    // notifications.rs through a lost poller).
    let quiet = central
        .create_monitor(json!({"name": "quiet", "kind": "http", "target": "http://127.0.0.1:9/q", "interval_ms": 5000}))
        .await?;
    let old = json!({"batch_id": Uuid::new_v4(), "results": [{"id": Uuid::new_v4(), "monitor_id": quiet, "ts": ago(300), "status": "up"}]});
    upload(&central, &http, &poller, &old).await?;
    let fresh = central.status(&quiet).await?;
    assert_eq!(fresh["status"], "pending", "{fresh}");
    assert!(
        fresh["reason"]
            .as_str()
            .unwrap()
            .starts_with("waiting for its first result since it was handed to its poller"),
        "{fresh}"
    );
    Ok(())
}

/// Confirmation is state, not a window: with `confirm_down = confirm_up = 3`, a target that
/// fails three times and then answers up, up, down, up, up, down… never had three passing
/// answers in a row, so it is still down, however long that goes on. (A window of the last
/// `confirm_down + confirm_up + 1` results once showed it `up`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flapping_target_stays_down_until_it_passes_three_times_in_a_row() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let http = reqwest::Client::new();
    let poller = central.register_poller("fake-agent").await?;
    let monitor = central
        .create_monitor(
            json!({"name": "flaky", "kind": "http", "target": "http://127.0.0.1:9/",
            "interval_ms": 60000, "poller_mode": "pinned", "poller_id": poller.id,
            "settings": {"confirm_down": 3, "confirm_up": 3}}),
        )
        .await?;
    let base = chrono::Utc::now() - chrono::Duration::seconds(60);
    let mut sequence = vec!["down", "down", "down"];
    for _ in 0..4 {
        sequence.extend(["up", "up", "down"]);
    }
    sequence.extend(["up", "up"]);
    for (i, status) in sequence.iter().enumerate() {
        let ts = (base + chrono::Duration::seconds(i as i64))
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let answer: Value = http
            .post(format!("{}/api/poller/results", central.url))
            .bearer_auth(&poller.access)
            .json(
                &json!({"batch_id": Uuid::new_v4(), "results": [{"id": Uuid::now_v7(),
                "monitor_id": monitor, "ts": ts, "status": status, "latency_ms": 1,
                "msg": "", "meta": {}}]}),
            )
            .send()
            .await?
            .json()
            .await?;
        assert_eq!(answer["accepted"], 1, "{answer}");
        if i == 2 {
            assert_eq!(central.status(&monitor).await?["status"], "down");
        }
    }
    let status = central.status(&monitor).await?;
    assert_eq!(status["status"], "down", "{status}");
    assert_eq!(
        status["reason"], "confirming up: 2 of 3 consecutive passing results",
        "{status}"
    );
    Ok(())
}
