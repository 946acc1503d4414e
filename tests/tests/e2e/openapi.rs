//! docs/openapi.json and the running server agree: every documented operation is routed, and
//! every route is documented. Served at /api/openapi.json.

use std::collections::BTreeSet;

use e2e::Central;
use serde_json::Value;

/// Every route of central's router, as (method, path). Keep in step with central/src/api/mod.rs.
const ROUTES: &[(&str, &str)] = &[
    ("get", "/healthz"),
    ("get", "/readyz"),
    ("get", "/metrics"),
    ("get", "/api/openapi.json"),
    ("post", "/api/poller/register"),
    ("post", "/api/poller/token"),
    ("post", "/api/poller/heartbeat"),
    ("get", "/api/poller/assignments"),
    ("post", "/api/poller/results"),
    ("post", "/api/poller/commands/{id}/ack"),
    ("post", "/api/v1/registration-tokens"),
    ("get", "/api/v1/registration-tokens"),
    ("delete", "/api/v1/registration-tokens/{id}"),
    ("post", "/api/v1/registration-tokens/{id}/rotate"),
    ("get", "/api/v1/version"),
    ("get", "/api/v1/pollers"),
    ("get", "/api/v1/pollers/{id}"),
    ("patch", "/api/v1/pollers/{id}"),
    ("delete", "/api/v1/pollers/{id}"),
    ("get", "/api/v1/pollers/{id}/events"),
    ("get", "/api/v1/pollers/{id}/status-changes"),
    ("get", "/api/v1/pollers/{id}/scheduler"),
    ("post", "/api/v1/monitors"),
    ("get", "/api/v1/monitors"),
    ("get", "/api/v1/monitors/{id}"),
    ("patch", "/api/v1/monitors/{id}"),
    ("delete", "/api/v1/monitors/{id}"),
    ("get", "/api/v1/monitors/{id}/status"),
    ("get", "/api/v1/monitors/{id}/results"),
    ("get", "/api/v1/monitors/{id}/uptime"),
    ("get", "/api/v1/monitors/{id}/history"),
    ("get", "/api/v1/monitors/{id}/dependencies"),
    ("get", "/api/v1/monitors/{id}/dependencies/latency"),
    ("get", "/api/v1/dependencies"),
    ("post", "/api/v1/dependency-aliases"),
    ("get", "/api/v1/dependency-aliases"),
    ("get", "/api/v1/dependency-aliases/{alias}"),
    ("delete", "/api/v1/dependency-aliases/{alias}"),
    ("post", "/api/v1/monitors/{id}/check"),
    ("post", "/api/v1/monitors/{id}/reset"),
    ("post", "/api/v1/monitors/test"),
    ("post", "/api/v1/monitors/pause"),
    ("post", "/api/v1/monitors/resume"),
    ("get", "/api/v1/commands/{id}"),
    ("post", "/api/v1/notification-channels"),
    ("get", "/api/v1/notification-channels"),
    ("get", "/api/v1/notification-channels/{id}"),
    ("patch", "/api/v1/notification-channels/{id}"),
    ("delete", "/api/v1/notification-channels/{id}"),
    ("post", "/api/v1/notification-channels/{id}/test"),
    ("post", "/api/v1/maintenance-windows"),
    ("get", "/api/v1/maintenance-windows"),
    ("get", "/api/v1/maintenance-windows/{id}"),
    ("patch", "/api/v1/maintenance-windows/{id}"),
    ("delete", "/api/v1/maintenance-windows/{id}"),
    ("post", "/api/v1/status-pages"),
    ("get", "/api/v1/status-pages"),
    ("get", "/api/v1/status-pages/{id}"),
    ("patch", "/api/v1/status-pages/{id}"),
    ("delete", "/api/v1/status-pages/{id}"),
    ("post", "/api/v1/status-pages/{id}/incidents"),
    ("get", "/api/v1/status-pages/{id}/incidents"),
    ("get", "/api/v1/status-pages/{id}/incidents/{iid}"),
    ("patch", "/api/v1/status-pages/{id}/incidents/{iid}"),
    ("delete", "/api/v1/status-pages/{id}/incidents/{iid}"),
    ("post", "/api/v1/status-pages/{id}/incidents/{iid}/updates"),
    ("get", "/api/v1/status-pages/{id}/subscribers"),
    ("delete", "/api/v1/status-pages/{id}/subscribers/{sid}"),
    ("post", "/api/v1/monitors/{id}/mute"),
    ("post", "/api/v1/monitors/{id}/ping-url"),
    ("get", "/api/v1/monitors/{id}/pings"),
    ("get", "/ping/{token}"),
    ("post", "/ping/{token}"),
    ("get", "/ping/{token}/{signal}"),
    ("post", "/ping/{token}/{signal}"),
    ("get", "/api/v1/notifications"),
    ("post", "/api/v1/users"),
    ("get", "/api/v1/users"),
    ("get", "/api/v1/users/{id}"),
    ("patch", "/api/v1/users/{id}"),
    ("delete", "/api/v1/users/{id}"),
    ("post", "/api/v1/api-keys"),
    ("get", "/api/v1/api-keys"),
    ("delete", "/api/v1/api-keys/{id}"),
    ("get", "/api/v1/audit"),
    ("get", "/api/v1/users/{id}/sessions"),
    ("post", "/api/v1/users/{id}/log-out"),
    ("delete", "/api/v1/users/{id}/sessions/{session}"),
    ("get", "/api/v1/managed-objects"),
    ("put", "/api/v1/managed-objects/{kind}/{key}"),
    ("delete", "/api/v1/managed-objects/{kind}/{key}"),
    ("get", "/status/{slug}"),
    ("get", "/status/{slug}/summary.json"),
    ("get", "/status/{slug}/feed.atom"),
    ("get", "/status/{slug}/history"),
    ("post", "/status/{slug}/unlock"),
    ("get", "/status/{slug}/logo"),
    ("get", "/status/{slug}/badge.svg"),
    ("post", "/status/{slug}/subscribe"),
    ("get", "/status/{slug}/subscription/{id}/confirm"),
    ("post", "/status/{slug}/subscription/{id}/confirm"),
    ("get", "/status/{slug}/subscription/{id}/unsubscribe"),
    ("post", "/status/{slug}/subscription/{id}/unsubscribe"),
    ("get", "/badge/{monitor_id}/status.svg"),
    ("get", "/badge/{monitor_id}/uptime.svg"),
    ("get", "/badge/{monitor_id}/latency.svg"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_served_document_matches_the_router() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let http = reqwest::Client::new();
    let spec: Value = http
        .get(format!("{}/api/openapi.json", central.url))
        .send()
        .await?
        .json()
        .await?;
    assert!(spec["openapi"].as_str().unwrap().starts_with("3."));
    let on_disk: Value = serde_json::from_str(&std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/openapi.json"
    ))?)?;
    assert_eq!(
        spec, on_disk,
        "docs/openapi.json is stale: regenerate it with `cargo run -p central -- openapi > docs/openapi.json`"
    );

    let documented: BTreeSet<(String, String)> = spec["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .unwrap()
                .keys()
                .filter(|m| ["get", "post", "patch", "put", "delete"].contains(&m.as_str()))
                .map(move |m| (m.clone(), path.clone()))
        })
        .collect();
    let routed: BTreeSet<(String, String)> = ROUTES
        .iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    assert_eq!(documented, routed, "documented operations = routes");
    // A subscription is a mail address or a webhook, never both or neither: the body's
    // schema says so (`tidy::subscribe_body`), or a fuzzer sends `{}` as a valid request.
    let subscribe = &spec["paths"]["/status/{slug}/subscribe"]["post"]["requestBody"]["content"]
        ["application/json"]["schema"]["oneOf"];
    assert_eq!(subscribe.as_array().map(Vec::len), Some(2), "{subscribe}");

    // And each really is routed: no "no such endpoint" and no 405 from the server.
    for (method, path) in &routed {
        let url = format!(
            "{}{}",
            central.url,
            path.replace("{id}", "7f1c1d3e-0000-4000-8000-000000000000")
        );
        let method = reqwest::Method::from_bytes(method.to_uppercase().as_bytes())?;
        let response = http.request(method.clone(), &url).send().await?;
        let status = response.status().as_u16();
        let body = response.text().await?;
        assert_ne!(status, 405, "{method} {path}: {body}");
        assert!(
            !body.contains("no such endpoint"),
            "{method} {path} is not routed: {body}"
        );
    }
    Ok(())
}
