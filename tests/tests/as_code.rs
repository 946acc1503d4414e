//! Monitors as code, central's side: the marks of the objects a configuration file manages,
//! each under a stable key (`/api/v1/managed-objects`), and the page's word on them.

use e2e::Central;
use reqwest::Method;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_are_marked_under_one_key_each_and_the_page_says_so() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let api = central
        .create_monitor(json!({"name": "api", "kind": "http", "target": "http://127.0.0.1:9/"}))
        .await?;
    let web = central
        .create_monitor(json!({"name": "web", "kind": "http", "target": "http://127.0.0.1:9/"}))
        .await?;

    let (status, body) = central
        .admin(
            Method::PUT,
            "/api/v1/managed-objects/monitors/api-health",
            Some(json!({"object_id": api})),
        )
        .await?;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["key"], "api-health");
    // A key names one object: given to another, it moves.
    let (status, _) = central
        .admin(
            Method::PUT,
            "/api/v1/managed-objects/monitors/api-health",
            Some(json!({"object_id": web})),
        )
        .await?;
    assert_eq!(status, 200);
    let (status, list) = central
        .admin(Method::GET, "/api/v1/managed-objects?kind=monitors", None)
        .await?;
    assert_eq!(status, 200);
    assert_eq!(list.as_array().map(Vec::len), Some(1), "{list}");
    assert_eq!(list[0]["object_id"], json!(web));

    // What names nothing, or is not a kind or a key, is refused, naming why.
    let (status, body) = central
        .admin(
            Method::PUT,
            "/api/v1/managed-objects/monitors/ghost",
            Some(json!({"object_id": uuid::Uuid::new_v4()})),
        )
        .await?;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"], "unknown_reference");
    let (status, body) = central
        .admin(
            Method::PUT,
            "/api/v1/managed-objects/pollers/x",
            Some(json!({"object_id": web})),
        )
        .await?;
    assert_eq!(status, 400, "{body}");
    let (status, body) = central
        .admin(
            Method::PUT,
            "/api/v1/managed-objects/monitors/Not%20A%20Key",
            Some(json!({"object_id": web})),
        )
        .await?;
    assert_eq!(status, 400, "{body}");
    assert!(body["message"].as_str().unwrap_or_default().contains("key"));

    // The page marks a managed monitor and warns before an edit.
    let page = reqwest::Client::new()
        .get(format!("{}/monitors/{web}/edit", central.url))
        .header(reqwest::header::COOKIE, central.session_cookie().await?)
        .send()
        .await?
        .text()
        .await?;
    assert!(page.contains("api-health"), "the key is shown");
    assert!(
        page.contains("central apply"),
        "the warning names what undoes an edit"
    );

    let (status, _) = central
        .admin(
            Method::DELETE,
            "/api/v1/managed-objects/monitors/api-health",
            None,
        )
        .await?;
    assert_eq!(status, 204);
    let (status, _) = central
        .admin(
            Method::DELETE,
            "/api/v1/managed-objects/monitors/api-health",
            None,
        )
        .await?;
    assert_eq!(status, 404);
    central.stop().await;
    Ok(())
}
