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

/// Runs `central <args>` against `central` with the admin token; returns (exit code, stdout).
async fn cli(
    central: &Central,
    args: &[&str],
    env: &[(&str, &str)],
) -> anyhow::Result<(i32, String)> {
    let output = tokio::process::Command::new(e2e::binary("central"))
        .args(args)
        .env("CENTRAL_URL", &central.url)
        .env("CENTRAL_API_KEY", e2e::ADMIN_TOKEN)
        .envs(env.iter().copied())
        .output()
        .await?;
    let stdout = String::from_utf8(output.stdout)?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    Ok((
        output.status.code().unwrap_or(-1),
        format!("{stdout}{stderr}"),
    ))
}

const HOOK_SECRET: &str = "whsec-as-code-71c2";
const TARGET_CREDENTIAL: &str = "Bearer as-code-target-9d1e";
/// A receiver's key in the address's query, as many take it.
const HOOK_URL: &str = "http://127.0.0.1:9/hook?token=query-token-5e2b";
const TARGET_BODY: &str = "user=probe&password=as-code-body-3f7a";
/// A target's key in its query.
const TARGET_URL: &str = "http://127.0.0.1:9/health?key=target-query-8c1d";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_apply_round_trip_plans_drift_and_prune() -> anyhow::Result<()> {
    // A configuration made by hand on one central.
    let source = Central::start().await?;
    let hook = source
        .create_channel(json!({"name": "Ops hook", "kind": "webhook",
            "url": HOOK_URL, "secret": HOOK_SECRET,
            "headers": {"X-Team": "sre"}}))
        .await?;
    let db = source
        .create_monitor(
            json!({"name": "DB", "kind": "tcp", "target": "127.0.0.1:5432",
            "interval_ms": 40000, "tags": ["team:data"]}),
        )
        .await?;
    let api = source
        .create_monitor(json!({"name": "API", "kind": "http", "target": TARGET_URL,
            "interval_ms": 50000, "settings": {"headers": {"Authorization": TARGET_CREDENTIAL}, "keyword": "ok",
                "method": "POST", "body": TARGET_BODY},
            "notification_channel_ids": [hook], "parent_ids": [db]}))
        .await?;
    let (status, window) = source
        .admin(
            Method::POST,
            "/api/v1/maintenance-windows",
            Some(json!({"name": "Weekly", "starts_at": "2027-03-27T02:00:00Z",
                "recurrence": {"rule": "FREQ=WEEKLY;BYDAY=SA", "time_zone": "UTC", "duration_ms": 3600000},
                "monitor_ids": [api]})),
        )
        .await?;
    assert_eq!(status, 201, "{window}");

    let (code, exported) = cli(&source, &["export"], &[]).await?;
    assert_eq!(code, 0, "{exported}");
    if std::env::var_os("SHOW_EXPORT").is_some() {
        eprintln!("{exported}");
    }
    for secret in [
        HOOK_SECRET,
        TARGET_CREDENTIAL,
        "sre",
        "query-token-5e2b",
        "as-code-body-3f7a",
        "target-query-8c1d",
    ] {
        assert!(
            !exported.contains(secret),
            "{secret} is exported: {exported}"
        );
    }
    for reference in [
        "${CENTRAL_VAR_CHANNEL_OPS_HOOK_SECRET}",
        "${CENTRAL_VAR_CHANNEL_OPS_HOOK_URL}",
        "${CENTRAL_VAR_MONITOR_API_BODY}",
        "${CENTRAL_VAR_MONITOR_API_TARGET}",
    ] {
        assert!(exported.contains(reference), "{reference}: {exported}");
    }
    assert!(exported.contains("parents:"), "{exported}");
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("central.yaml");
    std::fs::write(&path, &exported)?;
    let file = path.to_str().unwrap_or_default();
    let secrets = [
        ("CENTRAL_VAR_CHANNEL_OPS_HOOK_SECRET", HOOK_SECRET),
        ("CENTRAL_VAR_CHANNEL_OPS_HOOK_HEADER_X_TEAM", "sre"),
        (
            "CENTRAL_VAR_MONITOR_API_HEADER_AUTHORIZATION",
            TARGET_CREDENTIAL,
        ),
        ("CENTRAL_VAR_CHANNEL_OPS_HOOK_URL", HOOK_URL),
        ("CENTRAL_VAR_MONITOR_API_BODY", TARGET_BODY),
        ("CENTRAL_VAR_MONITOR_API_TARGET", TARGET_URL),
    ];

    // Onto an empty central: everything is made, and exporting it gives the same file.
    let target = Central::start().await?;
    // A file may take only the variables under the prefix: never apply's own key.
    let stealing = exported.replace(
        "${CENTRAL_VAR_CHANNEL_OPS_HOOK_SECRET}",
        "${CENTRAL_API_KEY}",
    );
    std::fs::write(&path, &stealing)?;
    let (code, refused) = cli(&target, &["apply", "-f", file], &secrets).await?;
    assert_ne!(code, 0, "{refused}");
    assert!(refused.contains("CENTRAL_API_KEY"), "{refused}");
    assert!(!refused.contains(e2e::ADMIN_TOKEN), "{refused}");
    let (_, none) = target
        .admin(Method::GET, "/api/v1/notification-channels", None)
        .await?;
    assert_eq!(none["items"], json!([]), "nothing made: {none}");
    std::fs::write(&path, &exported)?;
    let (code, plan) = cli(&target, &["apply", "-f", file], &secrets).await?;
    assert_eq!(code, 0, "{plan}");
    assert!(
        plan.contains("Plan: 4 to create, 0 to change, 0 to delete."),
        "{plan}"
    );
    let (_, again) = cli(&target, &["export"], &[]).await?;
    assert_eq!(
        again, exported,
        "export → apply → export gives the same file"
    );
    // The secrets arrived: the channel has one, and the poller would send the credential.
    let (_, channels) = target
        .admin(Method::GET, "/api/v1/notification-channels", None)
        .await?;
    assert_eq!(channels["items"][0]["has_secret"], true, "{channels}");

    // The same file again changes nothing.
    let (code, plan) = cli(&target, &["apply", "-f", file], &secrets).await?;
    assert_eq!(code, 0, "{plan}");
    assert!(
        plan.contains("Plan: 0 to create, 0 to change, 0 to delete."),
        "{plan}"
    );

    // Applied back to the central it came from, the file takes the objects there by their
    // names: nothing is made twice.
    let (code, plan) = cli(&source, &["apply", "-f", file], &secrets).await?;
    assert_eq!(code, 0, "{plan}");
    assert!(
        plan.contains("= monitors/api: take the existing object"),
        "{plan}"
    );
    assert!(
        plan.contains("Plan: 0 to create, 4 to change, 0 to delete."),
        "{plan}"
    );
    let (code, plan) = cli(&source, &["apply", "--dry-run", "-f", file], &secrets).await?;
    assert_eq!(code, 0, "in step once taken: {plan}");
    let (_, monitors) = source.admin(Method::GET, "/api/v1/monitors", None).await?;
    assert_eq!(
        monitors["items"].as_array().map(Vec::len),
        Some(2),
        "no copies"
    );

    // A changed file plans exactly its change.
    std::fs::write(
        &path,
        exported.replace("interval_ms: 50000", "interval_ms: 70000"),
    )?;
    let (code, plan) = cli(&target, &["apply", "--dry-run", "-f", file], &secrets).await?;
    assert_eq!(code, 2, "a dry run that would change something: {plan}");
    assert!(
        plan.contains("~ monitors/api: change\n    interval_ms: 50000 -> 70000\n"),
        "{plan}"
    );
    assert!(
        plan.contains("Plan: 0 to create, 1 to change, 0 to delete."),
        "{plan}"
    );
    let (code, _) = cli(&target, &["apply", "-f", file], &secrets).await?;
    assert_eq!(code, 0);

    // The page marks what the file manages.
    let cookie = target.session_cookie().await?;
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let page = |path: String| {
        http.get(format!("{}{path}", target.url))
            .header(reqwest::header::COOKIE, &cookie)
            .send()
    };
    let channel_id = channels["items"][0]["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let edit = page(format!("/notifications/channels/{channel_id}/edit"))
        .await?
        .text()
        .await?;
    assert!(
        edit.contains("ops-hook") && edit.contains("central apply"),
        "{edit}"
    );
    let windows_page = page("/maintenance".into()).await?.text().await?;
    assert!(
        windows_page.contains("managed by a configuration file"),
        "{windows_page}"
    );

    // A change made on the page is drift.
    let (_, monitors) = target.admin(Method::GET, "/api/v1/monitors", None).await?;
    let db_id = monitors["items"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["name"] == "DB")
        .map(|m| m["id"].as_str().unwrap_or_default().to_string())
        .unwrap_or_default();
    let home = page("/".into()).await?.text().await?;
    let csrf = home
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_default()
        .to_string();
    let paused = http
        .post(format!("{}/monitors/{db_id}/pause", target.url))
        .header(reqwest::header::COOKIE, &cookie)
        .header("Origin", &target.url)
        .form(&[("csrf", csrf.as_str())])
        .send()
        .await?;
    assert_eq!(paused.status(), 303, "paused on the page");
    let (code, plan) = cli(&target, &["apply", "--dry-run", "-f", file], &secrets).await?;
    assert_eq!(code, 2, "{plan}");
    assert!(
        plan.contains("~ monitors/db: change\n    paused: true -> false\n"),
        "{plan}"
    );

    // Dropping the window from the file keeps it, unless `--prune`; pruning deletes only it.
    let without_window = exported
        .split("maintenance_windows:")
        .next()
        .unwrap_or_default()
        .to_string();
    std::fs::write(&path, &without_window)?;
    let (code, plan) = cli(&target, &["apply", "-f", file], &secrets).await?;
    assert_eq!(code, 0, "{plan}");
    assert!(
        plan.contains("maintenance-windows/weekly: not in the file; kept"),
        "{plan}"
    );
    let (code, plan) = cli(&target, &["apply", "--prune", "-f", file], &secrets).await?;
    assert_eq!(code, 0, "{plan}");
    assert!(
        plan.contains("- maintenance-windows/weekly: delete"),
        "{plan}"
    );
    assert!(
        plan.contains("Plan: 0 to create, 0 to change, 1 to delete."),
        "{plan}"
    );
    let (_, windows) = target
        .admin(Method::GET, "/api/v1/maintenance-windows", None)
        .await?;
    assert_eq!(
        windows["items"].as_array().map(Vec::len),
        Some(0),
        "{windows}"
    );
    let (_, monitors) = target.admin(Method::GET, "/api/v1/monitors", None).await?;
    assert_eq!(
        monitors["items"].as_array().map(Vec::len),
        Some(2),
        "the rest stays"
    );

    // A field dropped from the file is emptied on the server, and no secret is printed.
    let without_headers = without_window.replace(
        "      headers:\n        X-Team: ${CENTRAL_VAR_CHANNEL_OPS_HOOK_HEADER_X_TEAM}\n",
        "",
    );
    assert_ne!(without_headers, without_window);
    std::fs::write(&path, &without_headers)?;
    let (code, plan) = cli(&target, &["apply", "-f", file], &secrets).await?;
    assert_eq!(code, 0, "{plan}");
    assert!(
        plan.contains("    headers: {\"X-Team\":\"REDACTED\"} -> (none)"),
        "{plan}"
    );
    let (_, channels) = target
        .admin(Method::GET, "/api/v1/notification-channels", None)
        .await?;
    assert_eq!(channels["items"][0]["headers"], json!({}), "{channels}");
    // A file that puts a variable's value in a field the plan shows: the plan shows its name.
    std::fs::write(
        &path,
        without_headers.replace(
            "name: DB",
            "name: DB ${CENTRAL_VAR_CHANNEL_OPS_HOOK_SECRET}",
        ),
    )?;
    let (code, plan) = cli(&target, &["apply", "--dry-run", "-f", file], &secrets).await?;
    assert_eq!(code, 2, "{plan}");
    assert!(!plan.contains(HOOK_SECRET), "{plan}");
    assert!(
        plan.contains("DB ${CENTRAL_VAR_CHANNEL_OPS_HOOK_SECRET}"),
        "{plan}"
    );
    source.stop().await;
    target.stop().await;
    Ok(())
}

/// Status pages go through a file like the rest: sections name the file's monitors by key, the
/// password (never shown) is exported as a reference and applied from the environment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_pages_round_trip_through_a_file() -> anyhow::Result<()> {
    const PASSWORD: &str = "page-password-as-code-41d7";
    let source = Central::start().await?;
    let api = source
        .create_monitor(json!({"name": "API", "kind": "http", "target": "http://127.0.0.1:9/"}))
        .await?;
    let (status, page) = source
        .admin(
            Method::POST,
            "/api/v1/status-pages",
            Some(
                json!({"slug": "acme", "title": "Acme status", "visibility": "password",
                "password": PASSWORD, "domain": "status.acme.test",
                "sections": [{"name": "Services", "monitor_ids": [api], "tags": ["web"],
                    "display_names": [{"monitor_id": api, "name": "Public API"}]}]}),
            ),
        )
        .await?;
    assert_eq!(status, 201, "{page}");
    let (code, exported) = cli(&source, &["export"], &[]).await?;
    assert_eq!(code, 0, "{exported}");
    assert!(!exported.contains(PASSWORD), "{exported}");
    assert!(!exported.contains("argon2"), "{exported}");
    for expected in [
        "status_pages:",
        "password: ${CENTRAL_VAR_STATUS_PAGE_ACME_PASSWORD}",
        "display_names:",
        "api: Public API",
    ] {
        assert!(exported.contains(expected), "{expected}: {exported}");
    }
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("central.yaml");
    std::fs::write(&path, &exported)?;
    let file = path.to_str().unwrap_or_default();
    let secrets = [("CENTRAL_VAR_STATUS_PAGE_ACME_PASSWORD", PASSWORD)];

    let target = Central::start().await?;
    let (code, plan) = cli(&target, &["apply", "-f", file], &secrets).await?;
    assert_eq!(code, 0, "{plan}");
    assert!(plan.contains("+ status-pages/acme: create"), "{plan}");
    let (_, pages) = target
        .admin(Method::GET, "/api/v1/status-pages", None)
        .await?;
    let made = &pages["items"][0];
    let (_, monitors) = target.admin(Method::GET, "/api/v1/monitors", None).await?;
    let target_api = &monitors["items"][0]["id"];
    assert_eq!(made["has_password"], true, "{made}");
    assert_eq!(made["domain"], "status.acme.test");
    assert_eq!(made["sections"][0]["monitor_ids"], json!([target_api]));
    assert_eq!(
        made["sections"][0]["display_names"][0]["monitor_id"],
        *target_api
    );
    let (_, again) = cli(&target, &["export"], &[]).await?;
    assert_eq!(
        again, exported,
        "export → apply → export gives the same file"
    );
    let (code, plan) = cli(&target, &["apply", "-f", file], &secrets).await?;
    assert_eq!(code, 0, "{plan}");
    assert!(
        plan.contains("Plan: 0 to create, 0 to change, 0 to delete."),
        "the password is not seen as a change: {plan}"
    );
    // The password arrived: it opens the page.
    let unlocked = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?
        .post(format!("{}/status/acme/unlock", target.url))
        .form(&[("password", PASSWORD)])
        .send()
        .await?;
    assert_eq!(unlocked.status(), 303);

    std::fs::write(
        &path,
        exported.replace("Acme status", "Acme service status"),
    )?;
    let (code, plan) = cli(&target, &["apply", "--dry-run", "-f", file], &secrets).await?;
    assert_eq!(code, 2, "{plan}");
    assert!(
        plan.contains(
            "~ status-pages/acme: change\n    title: \"Acme status\" -> \"Acme service status\"\n"
        ),
        "{plan}"
    );
    let without = exported
        .split("status_pages:")
        .next()
        .unwrap_or_default()
        .to_string();
    std::fs::write(&path, without)?;
    let (code, plan) = cli(&target, &["apply", "--prune", "-f", file], &secrets).await?;
    assert_eq!(code, 0, "{plan}");
    assert!(plan.contains("- status-pages/acme: delete"), "{plan}");
    let (_, pages) = target
        .admin(Method::GET, "/api/v1/status-pages", None)
        .await?;
    assert_eq!(pages["items"], json!([]), "{pages}");
    source.stop().await;
    target.stop().await;
    Ok(())
}

/// The published JSON Schema of the file is the one central builds from its API's schemas.
#[tokio::test]
async fn the_published_schema_is_current() -> anyhow::Result<()> {
    let output = tokio::process::Command::new(e2e::binary("central"))
        .arg("config-schema")
        .output()
        .await?;
    assert!(output.status.success());
    let built: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    let published: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/central-config.schema.json"),
    )?)?;
    assert!(
        built == published,
        "docs/central-config.schema.json is stale: run `central config-schema > docs/central-config.schema.json`"
    );
    Ok(())
}
