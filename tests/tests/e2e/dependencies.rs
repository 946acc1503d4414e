//! Dependencies of `health-json` monitors with real binaries: a service whose health document
//! lists three dependencies (one under an alias, one skipped, one flipping unhealthy then
//! healthy), a second service whose document is read through a mapping with an item it cannot
//! read; central's dependency list, change history (deduplicated), alias grouping, warnings,
//! latency buckets and the notices of a monitor that asks for them.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use e2e::receivers::HttpReceiver;
use e2e::{eventually, Central};
use reqwest::Method;
use serde_json::{json, Value};

/// A service answering its health document, which the test changes at will.
struct HealthService {
    url: String,
    document: Arc<Mutex<Value>>,
}

impl HealthService {
    async fn start(document: Value) -> anyhow::Result<HealthService> {
        let document = Arc::new(Mutex::new(document));
        let shared = document.clone();
        let router = axum::Router::new().fallback(move || {
            let shared = shared.clone();
            async move { axum::Json(shared.lock().unwrap().clone()) }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        tokio::spawn(async move { axum::serve(listener, router).await });
        Ok(HealthService {
            url: format!("http://{addr}/health"),
            document,
        })
    }

    fn answer(&self, document: Value) {
        *self.document.lock().unwrap() = document;
    }
}

async fn dependencies_of(central: &Central, monitor: &str) -> anyhow::Result<Value> {
    let (code, body) = central
        .admin(
            Method::GET,
            &format!("/api/v1/monitors/{monitor}/dependencies"),
            None,
        )
        .await?;
    anyhow::ensure!(code == 200, "{code}: {body}");
    Ok(body)
}

/// The dependency `name` of `answer`, if listed.
fn named<'a>(answer: &'a Value, name: &str) -> Option<&'a Value> {
    answer["dependencies"]
        .as_array()?
        .iter()
        .find(|d| d["name"] == name)
}

/// Waits until `monitor`'s dependency `name` is in `state`.
async fn until_state(
    central: &Central,
    monitor: &str,
    name: &str,
    state: &str,
) -> anyhow::Result<Value> {
    eventually(
        Duration::from_secs(60),
        &format!("{name} is {state}"),
        || async {
            let answer = dependencies_of(central, monitor).await.ok()?;
            (named(&answer, name)?["state"] == state).then_some(answer)
        },
    )
    .await
}

fn shop_document(cache: Value) -> Value {
    json!({"status": "ok", "dependencies": [
        {"name": "pg-main", "healthy": true, "latency_ms": 4, "contact": {"team": "dba"}},
        cache,
        // A NUL, which PostgreSQL cannot store, in what a target says.
        {"name": "mail", "healthy": false, "skipped": true, "error": "smtp\u{0}down"},
    ]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dependencies_are_kept_grouped_by_alias_and_their_changes_deduplicated(
) -> anyhow::Result<()> {
    let central = Central::start().await?;
    let _agent = central.start_agent("edge-1", "eu").await?;
    let receiver = HttpReceiver::start().await?;
    central
        .create_channel(
            json!({"name": "hooks", "kind": "webhook", "url": receiver.url,
            "default": true}),
        )
        .await?;
    let (code, alias) = central
        .admin(
            Method::POST,
            "/api/v1/dependency-aliases",
            Some(json!({"alias": "pg-main", "canonical": "postgres"})),
        )
        .await?;
    assert_eq!(code, 201, "{alias}");
    let (code, chained) = central
        .admin(
            Method::POST,
            "/api/v1/dependency-aliases",
            Some(json!({"alias": "db", "canonical": "pg-main"})),
        )
        .await?;
    assert_eq!(code, 422, "an alias of an alias: {chained}");
    assert!(
        chained["message"]
            .as_str()
            .unwrap()
            .starts_with("`canonical`"),
        "{chained}"
    );

    let shop =
        HealthService::start(shop_document(json!({"name": "cache", "healthy": true}))).await?;
    let billing = HealthService::start(json!({"checks": {
        "postgres": {"status": "UP", "ms": 7},
        "queue": {"status": "UP"},
        "broken": 5,
    }}))
    .await?;
    let shop_id = central
        .create_monitor(json!({"name": "shop", "kind": "http", "target": shop.url,
            "interval_ms": 5_000,
            "settings": {"format": "health-json", "notify_dependencies": true}}))
        .await?;
    let billing_id = central
        .create_monitor(
            json!({"name": "billing", "kind": "http", "target": billing.url,
            "interval_ms": 5_000, "settings": {"format": "health-json", "health_mapping": {
                "list": "/checks", "name": "$key",
                "healthy": {"pointer": "/status", "equals": "UP"}, "latency_ms": "/ms"}}}),
        )
        .await?;

    let answer = until_state(&central, &shop_id, "cache", "healthy").await?;
    let pg = named(&answer, "pg-main").unwrap();
    assert_eq!(pg["canonical"], "postgres", "{answer}");
    assert_eq!(pg["latency_ms"], 4.0, "{answer}");
    assert_eq!(pg["contact"], json!({"team": "dba"}), "{answer}");
    assert_eq!(named(&answer, "mail").unwrap()["state"], "skipped");
    assert_eq!(answer["warnings"], json!([]), "{answer}");

    // The mapped document: read by key and by value, and what it could not read is said.
    let billing_deps = until_state(&central, &billing_id, "postgres", "healthy").await?;
    assert_eq!(named(&billing_deps, "postgres").unwrap()["latency_ms"], 7.0);
    assert_eq!(
        named(&billing_deps, "broken").unwrap()["state"],
        "unhealthy"
    );
    assert_eq!(
        named(&billing_deps, "broken").unwrap()["error"],
        "Unhealthy",
        "the marker of an unhealthy dependency without an error: {billing_deps}"
    );
    let warnings: Vec<&str> = billing_deps["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w["warning"].as_str())
        .collect();
    assert_eq!(
        warnings,
        ["\"broken\": no value at /status; counted unhealthy"],
        "{billing_deps}"
    );

    // Grouped through the alias: one postgres, reported by both services.
    let (_, list) = central
        .admin(Method::GET, "/api/v1/dependencies", None)
        .await?;
    let groups = list["dependencies"].as_array().unwrap();
    let postgres = groups
        .iter()
        .find(|g| g["canonical"] == "postgres")
        .unwrap();
    let mut reporters: Vec<(&str, &str)> = postgres["reporters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["monitor_name"].as_str().unwrap(),
                r["name"].as_str().unwrap(),
            )
        })
        .collect();
    reporters.sort();
    assert_eq!(reporters, [("billing", "postgres"), ("shop", "pg-main")]);
    assert_eq!(postgres["state"], "healthy");
    assert_eq!(
        groups[0]["canonical"], "broken",
        "unhealthy ones first: {list}"
    );

    // The cache fails for several checks, with one error, then recovers.
    shop.answer(shop_document(
        json!({"name": "cache", "healthy": false, "error": "timeout"}),
    ));
    until_state(&central, &shop_id, "cache", "unhealthy").await?;
    let before = central.result_ids(&shop_id).await?.len();
    eventually(
        Duration::from_secs(30),
        "two more unhealthy documents",
        || async {
            let now = central.result_ids(&shop_id).await.ok()?.len();
            (now >= before + 2).then_some(())
        },
    )
    .await?;
    shop.answer(shop_document(json!({"name": "cache", "healthy": true})));
    let answer = until_state(&central, &shop_id, "cache", "healthy").await?;
    let mut history: Vec<(String, String, Value)> = answer["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "cache")
        .map(|e| {
            (
                e["kind"].as_str().unwrap().to_string(),
                e["state"].as_str().unwrap().to_string(),
                e["error"].clone(),
            )
        })
        .collect();
    history.reverse();
    assert_eq!(
        history,
        [
            ("appeared".into(), "healthy".into(), Value::Null),
            ("changed".into(), "unhealthy".into(), json!("timeout")),
            ("changed".into(), "healthy".into(), Value::Null),
        ],
        "one error recorded however many documents repeated it: {answer}"
    );

    // Told once when it failed and once when it recovered; billing, which does not ask, never.
    let notices = eventually(
        Duration::from_secs(30),
        "two dependency notices",
        || async {
            let notices: Vec<Value> = receiver
                .received()
                .into_iter()
                .map(|r| r.json)
                .filter(|n| {
                    n["event"]
                        .as_str()
                        .is_some_and(|e| e.starts_with("dependency."))
                })
                .collect();
            (notices.len() >= 2).then_some(notices)
        },
    )
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let all = receiver.received();
    let told: Vec<(&str, &str)> = all
        .iter()
        .filter(|r| {
            r.json["event"]
                .as_str()
                .is_some_and(|e| e.starts_with("dependency."))
        })
        .map(|r| {
            (
                r.json["event"].as_str().unwrap(),
                r.json["dependency"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        told,
        [("dependency.down", "cache"), ("dependency.up", "cache")],
        "{notices:?}"
    );
    assert_eq!(notices[0]["monitor"]["name"], "shop");
    assert_eq!(
        notices[0]["message"], "shop: dependency cache is unhealthy: timeout",
        "{notices:?}"
    );

    // Latency buckets per dependency.
    let (code, latency) = central
        .admin(
            Method::GET,
            &format!(
                "/api/v1/monitors/{shop_id}/dependencies/latency?name=pg-main&resolution=hour"
            ),
            None,
        )
        .await?;
    assert_eq!(code, 200, "{latency}");
    // Summed over the buckets: the checks may fall on both sides of an hour's turn.
    let buckets = latency["buckets"].as_array().unwrap();
    let checked: u64 = buckets.iter().filter_map(|b| b["count"].as_u64()).sum();
    assert!(checked >= 3, "{latency}");
    assert!(buckets.iter().all(|b| b["mean_ms"] == 4.0), "{latency}");

    // Deleting the alias: pg-main stands for itself again.
    let (code, _) = central
        .admin(Method::DELETE, "/api/v1/dependency-aliases/pg-main", None)
        .await?;
    assert_eq!(code, 204);
    let answer = dependencies_of(&central, &shop_id).await?;
    assert_eq!(named(&answer, "pg-main").unwrap()["canonical"], "pg-main");
    Ok(())
}

/// The regions `answer` lists dependency `name` from, sorted.
fn regions_of(answer: &Value, name: &str) -> Vec<String> {
    let mut regions: Vec<String> = answer["dependencies"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|d| d["name"] == name)
        .filter_map(|d| d["region"].as_str().map(str::to_string))
        .collect();
    regions.sort();
    regions
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_location_keeps_its_own_dependencies_until_an_edit_drops_it() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let _eu = central.start_agent("edge-eu", "eu").await?;
    let _us = central.start_agent("edge-us", "us").await?;
    let _ap = central.start_agent("edge-ap", "ap").await?;
    let service = HealthService::start(json!({"dependencies": [
        {"name": "db", "healthy": true},
    ]}))
    .await?;
    let id = central
        .create_monitor(json!({"name": "api", "kind": "http", "target": service.url,
            "interval_ms": 5_000, "poller_mode": "multi", "poller_regions": ["eu", "us"],
            "settings": {"format": "health-json"}}))
        .await?;
    let until_regions = |wanted: &'static [&'static str]| {
        let (central, id) = (&central, &id);
        async move {
            eventually(
                Duration::from_secs(60),
                &format!("db reported from {wanted:?}"),
                || async {
                    let answer = dependencies_of(central, id).await.ok()?;
                    (regions_of(&answer, "db") == wanted).then_some(answer)
                },
            )
            .await
        }
    };
    until_regions(&["eu", "us"]).await?;

    // "us" dropped for "ap": its row goes with the edit, and never comes back, even from a
    // document checked before the edit and uploaded after it.
    let (code, body) = central
        .admin(
            Method::PATCH,
            &format!("/api/v1/monitors/{id}"),
            Some(json!({"poller_regions": ["eu", "ap"]})),
        )
        .await?;
    assert_eq!(code, 200, "{body}");
    let answer = dependencies_of(&central, &id).await?;
    assert!(
        !regions_of(&answer, "db").contains(&"us".to_string()),
        "{answer}"
    );
    until_regions(&["ap", "eu"]).await?;
    let before = central.result_ids(&id).await?.len();
    eventually(Duration::from_secs(30), "more results", || async {
        (central.result_ids(&id).await.ok()?.len() >= before + 4).then_some(())
    })
    .await?;
    let answer = dependencies_of(&central, &id).await?;
    assert_eq!(regions_of(&answer, "db"), ["ap", "eu"], "{answer}");
    let history = answer["history"].as_array().unwrap();
    assert!(
        history.iter().any(|e| e["region"] == "us"),
        "the dropped location's history stays: {answer}"
    );

    // No longer reading documents: nothing is shown as reported, at once and later.
    let (code, body) = central
        .admin(
            Method::PATCH,
            &format!("/api/v1/monitors/{id}"),
            Some(json!({"settings": {"format": "plain"}})),
        )
        .await?;
    assert_eq!(code, 200, "{body}");
    let answer = dependencies_of(&central, &id).await?;
    assert_eq!(answer["dependencies"], json!([]), "{answer}");
    let before = central.result_ids(&id).await?.len();
    eventually(Duration::from_secs(30), "more results", || async {
        (central.result_ids(&id).await.ok()?.len() >= before + 4).then_some(())
    })
    .await?;
    let answer = dependencies_of(&central, &id).await?;
    assert_eq!(answer["dependencies"], json!([]), "{answer}");
    let (_, list) = central
        .admin(Method::GET, "/api/v1/dependencies", None)
        .await?;
    assert_eq!(list["dependencies"], json!([]), "{list}");
    Ok(())
}
