//! Operators' commands to pollers with real binaries: check now, reset (releasing a dead
//! letter and an open breaker), test before saving; across two locations; and the poller
//! side of the protocol spoken by hand (acknowledged once, only by the poller asked).

use std::time::Duration;

use chrono::{DateTime, Utc};
use e2e::{eventually, Central, Target};
use reqwest::Method;
use serde_json::{json, Value};

/// Waits until every poller is online.
async fn online(central: &Central) -> anyhow::Result<()> {
    eventually(
        Duration::from_secs(30),
        "the pollers are online",
        || async {
            let (_, pollers) = central
                .admin(Method::GET, "/api/v1/pollers", None)
                .await
                .ok()?;
            let items = pollers["items"].as_array()?;
            (!items.is_empty() && items.iter().all(|p| p["status"] == "online")).then_some(())
        },
    )
    .await
}

fn time(value: &Value) -> DateTime<Utc> {
    value
        .as_str()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("not a time: {value}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_now_answers_with_a_result_made_after_the_call_stored_once() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let target = Target::start().await?;
    let _agent = central.start_agent("edge-1", "eu").await?;
    online(&central).await?;
    // An hour between scheduled checks (the first falls anywhere in it): the check asked for
    // is all there is to see.
    let monitor = central
        .create_monitor(json!({"name": "api", "kind": "http", "target": target.url,
            "interval_ms": 3_600_000}))
        .await?;
    target.answer_with(503);

    let asked_at = Utc::now();
    let (code, answer) = central
        .admin(
            Method::POST,
            &format!("/api/v1/monitors/{monitor}/check?wait=20"),
            None,
        )
        .await?;
    assert_eq!(code, 200, "{answer}");
    assert_eq!(answer["complete"], true, "{answer}");
    let command = &answer["commands"][0];
    assert_eq!(command["state"], "done", "{answer}");
    assert_eq!(command["kind"], "check");
    let result = &command["result"];
    assert_eq!(result["status"], "down", "the target fails now: {answer}");
    assert!(
        time(&result["ts"]) >= asked_at,
        "made after the call: {answer}"
    );

    // Ingested with the acknowledgement: the status already says so.
    let status = central.status(&monitor).await?;
    // (Central keeps milliseconds.)
    assert_eq!(
        time(&status["last_result_at"]).timestamp_millis(),
        time(&result["ts"]).timestamp_millis(),
        "{status}"
    );
    // The agent uploads the same result as well: still stored once.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let ids = central.result_ids(&monitor).await?;
    let id = result["id"].as_str().unwrap();
    assert_eq!(ids.iter().filter(|i| *i == id).count(), 1, "{ids:?}");

    let (code, again) = central
        .admin(
            Method::GET,
            &format!("/api/v1/commands/{}", command["id"].as_str().unwrap()),
            None,
        )
        .await?;
    assert_eq!((code, &again["state"]), (200, &json!("done")), "{again}");

    // A paused monitor runs nowhere: nobody to ask.
    central
        .admin(
            Method::PATCH,
            &format!("/api/v1/monitors/{monitor}"),
            Some(json!({"paused": true})),
        )
        .await?;
    let (code, refused) = central
        .admin(
            Method::POST,
            &format!("/api/v1/monitors/{monitor}/check"),
            None,
        )
        .await?;
    assert_eq!(
        (code, &refused["error"]),
        (409, &json!("conflict")),
        "{refused}"
    );
    assert!(
        refused["message"].as_str().unwrap().contains("paused"),
        "{refused}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_test_runs_an_unsaved_monitor_once_and_stores_nothing() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let target = Target::start().await?;
    let _agent = central.start_agent("edge-1", "eu").await?;
    online(&central).await?;

    let url = format!("{}?probe=unsaved", target.url);
    let (code, answer) = central
        .admin(
            Method::POST,
            "/api/v1/monitors/test?wait=20",
            Some(json!({"name": "draft", "kind": "http", "target": url,
                "settings": {"expected_status": [204], "headers": {"X-Key": "test-run-key-77"}}})),
        )
        .await?;
    assert_eq!(code, 200, "{answer}");
    let result = &answer["commands"][0]["result"];
    assert_eq!(
        result["status"], "down",
        "200 is not the 204 it expects: {answer}"
    );
    assert!(result["msg"].as_str().unwrap().contains("200"), "{answer}");
    assert_eq!(answer["commands"][0]["monitor_id"], Value::Null);
    assert!(target.first_hit("probe=unsaved").is_some(), "it really ran");

    let (_, monitors) = central.admin(Method::GET, "/api/v1/monitors", None).await?;
    assert_eq!(monitors["items"], json!([]), "nothing saved: {monitors}");
    // But it acted from a poller, so it is in the audit log: who tested what, secrets hidden.
    let (_, audit) = central
        .admin(Method::GET, "/api/v1/audit?object_kind=monitors", None)
        .await?;
    let entry = &audit["items"][0];
    assert_eq!(entry["action"], "test", "{audit}");
    assert_eq!(entry["actor"]["kind"], "admin_token", "{audit}");
    assert_eq!(
        entry["after"]["target"],
        json!(format!("{}?REDACTED", target.url)),
        "the target's query is as secret as a view shows it: {audit}"
    );
    assert_eq!(entry["after"]["settings"]["headers"]["X-Key"], "REDACTED");
    assert!(!audit.to_string().contains("test-run-key-77"), "{audit}");
    let hits = target.hits();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(target.hits(), hits, "once, not on a schedule");

    // A test run reads nothing from a cloud metadata service: the agent refuses to connect,
    // so no packet leaves (a document found at `json_path` is shown by its size only:
    // `checks::http::body`'s unit test).
    let (code, answer) = central
        .admin(
            Method::POST,
            "/api/v1/monitors/test?wait=20",
            Some(json!({"name": "draft", "kind": "http",
                "target": "http://169.254.169.254/latest/meta-data/iam/security-credentials/"})),
        )
        .await?;
    assert_eq!(code, 200, "{answer}");
    let msg = answer["commands"][0]["result"]["msg"]
        .as_str()
        .unwrap_or_default();
    assert!(msg.contains("cloud metadata"), "{answer}");
    // A spec that could never be saved is refused as a create would refuse it.
    let (code, refused) = central
        .admin(
            Method::POST,
            "/api/v1/monitors/test",
            Some(json!({"name": "draft", "kind": "http", "target": url, "interval_ms": 10})),
        )
        .await?;
    assert_eq!(code, 400, "{refused}");
    assert!(
        refused["message"].as_str().unwrap().contains("interval_ms"),
        "{refused}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_releases_a_dead_letter_and_an_open_breaker_and_runs_at_once() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let target = Target::start().await?;
    target.answer_with(503);
    let _agent = central.start_agent("edge-1", "eu").await?;
    let monitor = central
        .create_monitor(
            json!({"name": "flaky", "kind": "http", "target": target.url,
            "interval_ms": 5000, "settings": {"retries": 0, "dead_letter_after": 3,
            "breaker_threshold": 3, "breaker_cooldown_ms": 600000}}),
        )
        .await?;
    let engine_of = |result: &Value| result["meta"]["engine"].clone();
    eventually(Duration::from_secs(40), "dead-lettered", || async {
        let results = central.results(&monitor).await.ok()?;
        results
            .iter()
            .any(|r| engine_of(r)["dead_letter"] == true)
            .then_some(())
    })
    .await?;
    // Central shows both, in the status answer, the poller's scheduler and the page.
    let status = central.status(&monitor).await?;
    let notes = status["engine"]["notes"].to_string();
    assert!(
        notes.contains("breaker open") && notes.contains("dead-lettered: expected"),
        "{status}"
    );
    assert_eq!(status["health"], "declining", "{status}");
    let poller = status["poller_id"].as_str().unwrap().to_string();
    let scheduler = eventually(
        Duration::from_secs(20),
        "reported by a heartbeat",
        || async {
            let (_, view) = central
                .admin(
                    Method::GET,
                    &format!("/api/v1/pollers/{poller}/scheduler"),
                    None,
                )
                .await
                .ok()?;
            let scheduler = view["scheduler"].clone();
            (scheduler["dead_letters"][0]["monitor_id"] == json!(monitor)).then_some(scheduler)
        },
    )
    .await?;
    assert_eq!(scheduler["breakers"][0]["state"], "open", "{scheduler}");
    assert!(
        scheduler["dead_letters"][0]["next_recheck"].is_string(),
        "{scheduler}"
    );
    let page = reqwest::Client::new()
        .get(format!("{}/monitors/{monitor}", central.url))
        .header("Cookie", central.session_cookie().await?)
        .send()
        .await?
        .text()
        .await?;
    assert!(page.contains("dead-lettered: expected"), "the page says so");
    assert!(page.contains(">Release<"), "and offers to release it");

    target.answer_with(200);
    let before = central.result_ids(&monitor).await?.len();
    // Left alone, a dead letter is rechecked in 30 minutes.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(central.result_ids(&monitor).await?.len(), before, "parked");

    let (code, answer) = central
        .admin(
            Method::POST,
            &format!("/api/v1/monitors/{monitor}/reset?wait=20"),
            None,
        )
        .await?;
    assert_eq!(code, 200, "{answer}");
    let message = answer["commands"][0]["message"].as_str().unwrap();
    assert!(
        message.contains("breaker open") && message.contains("dead letter"),
        "{answer}"
    );
    let status = central
        .wait_for_status(&monitor, "up", Duration::from_secs(30))
        .await?;
    let results = central.results(&monitor).await?;
    let last = results.last().unwrap();
    assert_eq!(engine_of(last)["dead_letter"], false, "{last}");
    assert_eq!(engine_of(last)["breaker"], "closed", "{last}");
    assert_eq!(status["status"], "up");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_closes_a_half_open_breaker_while_its_probe_is_under_way() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let target = Target::start().await?;
    target.answer_with(503);
    let _agent = central.start_agent("edge-1", "eu").await?;
    let monitor = central
        .create_monitor(
            json!({"name": "probed", "kind": "http", "target": target.url,
            "interval_ms": 5000, "timeout_ms": 5000, "settings": {"retries": 0,
            "breaker_threshold": 1, "breaker_cooldown_ms": 5000}}),
        )
        .await?;
    // The first failure opens the breaker; its probe, a cooldown later, hangs for 4 s.
    eventually(Duration::from_secs(30), "a first failure", || async {
        (target.hits() >= 1).then_some(())
    })
    .await?;
    target.answer_after(Duration::from_secs(4));
    eventually(Duration::from_secs(30), "the probe under way", || async {
        (target.hits() >= 2).then_some(())
    })
    .await?;
    let (code, answer) = central
        .admin(
            Method::POST,
            &format!("/api/v1/monitors/{monitor}/reset?wait=20"),
            None,
        )
        .await?;
    assert_eq!(code, 200, "{answer}");
    let message = answer["commands"][0]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(message.contains("breaker half-open"), "{answer}");
    // The probe still fails after the reset (the engine's tests show it does not count against
    // the fresh state); the target recovers, and so does the monitor.
    target.answer_after(Duration::ZERO);
    target.answer_with(200);
    central
        .wait_for_status(&monitor, "up", Duration::from_secs(30))
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_location_monitor_is_checked_everywhere_or_where_asked() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let target = Target::start().await?;
    let _eu = central.start_agent("eu-1", "eu").await?;
    let _us = central.start_agent("us-1", "us").await?;
    online(&central).await?;
    let monitor = central
        .create_monitor(
            json!({"name": "everywhere", "kind": "http", "target": target.url,
            "interval_ms": 3_600_000, "poller_mode": "multi", "poller_regions": ["eu", "us"]}),
        )
        .await?;
    // Each location checks once an hour, at its share of it: nothing comes before the check.
    let status = eventually(Duration::from_secs(40), "both locations placed", || async {
        let status = central.status(&monitor).await.ok()?;
        let each = status["locations"].as_array()?;
        (each.len() == 2 && each.iter().all(|l| l["poller_id"].is_string())).then_some(status)
    })
    .await?;
    let pollers: Vec<String> = status["locations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["poller_id"].as_str().unwrap().to_string())
        .collect();

    let (code, answer) = central
        .admin(
            Method::POST,
            &format!("/api/v1/monitors/{monitor}/check?wait=20"),
            None,
        )
        .await?;
    assert_eq!(code, 200, "{answer}");
    let mut answered: Vec<String> = answer["commands"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["state"] == "done" && c["result"]["status"] == "up")
        .map(|c| c["poller_id"].as_str().unwrap().to_string())
        .collect();
    answered.sort();
    let mut expected = pollers.clone();
    expected.sort();
    assert_eq!(answered, expected, "each location answered: {answer}");

    let one = &pollers[0];
    let (code, answer) = central
        .admin(
            Method::POST,
            &format!("/api/v1/monitors/{monitor}/check?wait=20&poller_id={one}"),
            None,
        )
        .await?;
    assert_eq!(code, 200, "{answer}");
    assert_eq!(answer["commands"].as_array().unwrap().len(), 1);
    assert_eq!(answer["commands"][0]["poller_id"], json!(one));

    let stranger = uuid::Uuid::new_v4();
    let (code, refused) = central
        .admin(
            Method::POST,
            &format!("/api/v1/monitors/{monitor}/reset?poller_id={stranger}"),
            None,
        )
        .await?;
    assert_eq!(code, 422, "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("does not run"),
        "{refused}"
    );
    Ok(())
}

/// The poller side by hand: a command rides on the long poll, is offered again until
/// acknowledged, and is acknowledged once, only by the poller it was for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_rides_the_long_poll_and_is_acknowledged_once_by_its_poller() -> anyhow::Result<()>
{
    let central = Central::start().await?;
    let asked = central.register_poller("asked").await?;
    let other = central.register_poller("other").await?;
    let _beats = asked.keep_alive(&central.url, Duration::from_secs(1));
    let _other_beats = other.keep_alive(&central.url, Duration::from_secs(1));
    let monitor = central
        .create_monitor(json!({"name": "pinned", "kind": "http",
            "target": "http://127.0.0.1:9/", "poller_mode": "pinned", "poller_id": asked.id}))
        .await?;
    let http = reqwest::Client::new();
    let poll = |token: String, since: i64| {
        let (http, url) = (http.clone(), central.url.clone());
        async move {
            let answer: Value = http
                .get(format!(
                    "{url}/api/poller/assignments?since_version={since}&wait=20"
                ))
                .bearer_auth(token)
                .send()
                .await?
                .json()
                .await?;
            anyhow::Ok(answer)
        }
    };
    let first = poll(asked.access.clone(), 0).await?;
    let version = first["version"].as_i64().unwrap();
    assert!(first.get("commands").is_none(), "none yet: {first}");

    // The long poll is waiting when the command is issued: it is answered with it at once.
    let waiting = tokio::spawn(poll(asked.access.clone(), version));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (code, queued) = central
        .admin(
            Method::POST,
            &format!("/api/v1/monitors/{monitor}/check?wait=0"),
            None,
        )
        .await?;
    assert_eq!(code, 202, "nobody answered yet: {queued}");
    let command_id = queued["commands"][0]["id"].as_str().unwrap().to_string();
    let started = std::time::Instant::now();
    let answer = waiting.await??;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "woken, not timed out"
    );
    assert_eq!(answer["commands"][0]["id"], json!(command_id), "{answer}");
    assert_eq!(answer["commands"][0]["kind"], "check");
    assert_eq!(answer["commands"][0]["monitor_id"], json!(monitor));
    let (_, sent) = central
        .admin(Method::GET, &format!("/api/v1/commands/{command_id}"), None)
        .await?;
    assert_eq!(sent["state"], "sent", "{sent}");
    // Not acknowledged (the answer might have been lost): a waiting long poll is offered it
    // again 15 s after it was handed over, not before.
    let started = std::time::Instant::now();
    let again = poll(asked.access.clone(), version).await?;
    assert_eq!(again["commands"][0]["id"], json!(command_id), "{again}");
    let waited = started.elapsed();
    assert!(
        waited > Duration::from_secs(12) && waited < Duration::from_secs(19),
        "offered again after {waited:?}"
    );

    let ack = |token: String, body: Value| {
        let (http, url, id) = (http.clone(), central.url.clone(), command_id.clone());
        async move {
            let answer = http
                .post(format!("{url}/api/poller/commands/{id}/ack"))
                .bearer_auth(token)
                .json(&body)
                .send()
                .await?;
            let code = answer.status().as_u16();
            anyhow::Ok((code, answer.json::<Value>().await?))
        }
    };
    let result = json!({"id": uuid::Uuid::now_v7(), "monitor_id": monitor,
        "ts": Utc::now(), "status": "up", "latency_ms": 3, "msg": "", "meta": {}});
    let (code, refused) = ack(
        other.access.clone(),
        json!({"done": true, "result": result}),
    )
    .await?;
    assert_eq!(
        (code, &refused["error"]),
        (404, &json!("not_found")),
        "{refused}"
    );
    let mut wrong = result.clone();
    wrong["monitor_id"] = json!(uuid::Uuid::new_v4());
    let (code, refused) = ack(asked.access.clone(), json!({"done": true, "result": wrong})).await?;
    assert_eq!(code, 422, "{refused}");
    let (code, first_ack) = ack(
        asked.access.clone(),
        json!({"done": true, "message": "checked now",
        "result": result}),
    )
    .await?;
    assert_eq!(
        (code, &first_ack["already"]),
        (200, &json!(false)),
        "{first_ack}"
    );
    let (code, second) = ack(
        asked.access.clone(),
        json!({"done": false, "message": "again"}),
    )
    .await?;
    assert_eq!((code, &second["already"]), (200, &json!(true)), "{second}");

    let (_, done) = central
        .admin(Method::GET, &format!("/api/v1/commands/{command_id}"), None)
        .await?;
    assert_eq!(done["state"], "done", "the first answer stands: {done}");
    assert_eq!(done["message"], "checked now");
    assert_eq!(done["result"]["id"], result["id"]);
    assert_eq!(
        central.result_ids(&monitor).await?,
        [result["id"].as_str().unwrap()]
    );
    // Acknowledged: no longer offered, however long the poll waits (past the 15 s at which
    // an unanswered one comes back).
    let quiet =
        tokio::time::timeout(Duration::from_secs(18), poll(asked.access.clone(), version)).await;
    assert!(quiet.is_err(), "the long poll waits: nothing to hand over");

    // A result ingestion refuses (a clock an hour ahead) still answers its command, as not
    // done, saying why.
    let (code, queued) = central
        .admin(
            Method::POST,
            &format!("/api/v1/monitors/{monitor}/check?wait=0"),
            None,
        )
        .await?;
    assert_eq!(code, 202, "{queued}");
    let second = queued["commands"][0]["id"].as_str().unwrap().to_string();
    let offered = poll(asked.access.clone(), version).await?;
    assert_eq!(offered["commands"][0]["id"], json!(second), "{offered}");
    let ahead = json!({"id": uuid::Uuid::now_v7(), "monitor_id": monitor,
        "ts": Utc::now() + chrono::Duration::hours(1), "status": "up", "msg": "", "meta": {}});
    let answer = http
        .post(format!("{}/api/poller/commands/{second}/ack", central.url))
        .bearer_auth(&asked.access)
        .json(&json!({"done": true, "message": "checked now", "result": ahead}))
        .send()
        .await?;
    assert_eq!(answer.status(), 200);
    let (_, failed) = central
        .admin(Method::GET, &format!("/api/v1/commands/{second}"), None)
        .await?;
    assert_eq!(failed["state"], "failed", "{failed}");
    assert!(
        failed["message"].as_str().unwrap().contains("refused"),
        "{failed}"
    );
    assert_eq!(central.result_ids(&monitor).await?.len(), 1, "not stored");
    Ok(())
}
