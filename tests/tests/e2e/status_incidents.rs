//! Incidents and maintenance on status pages, with the real binary: an incident opened in
//! the settings API shows on the page (its Markdown made safe: no script, no `javascript:`
//! link), in `summary.json` and in the Atom feed, with its affected monitors by their names
//! on the page; updates make a timeline, newest first; a resolved one moves to the past
//! incidents and stays in the history by month; planned maintenance over a shown monitor shows
//! when and what, never the window's own name. The API refuses a monitor the page does not
//! show, a new status without a message, and bad fields, naming them.

use std::time::Duration;

use e2e::{eventually, Central};
use reqwest::header::CONTENT_TYPE;
use reqwest::Method;
use serde_json::{json, Value};

async fn get(url: &str) -> anyhow::Result<reqwest::Response> {
    Ok(reqwest::Client::new().get(url).send().await?)
}

/// A feed's entries as an XML parser of its own reads them (Python's): `(id, title, content)`.
fn atom_entries(xml: &str) -> anyhow::Result<Vec<(String, String, String)>> {
    use std::io::Write;
    let mut parser = std::process::Command::new("python3")
        .args([
            "-c",
            "import sys, json, xml.etree.ElementTree as ET\n\
             A = '{http://www.w3.org/2005/Atom}'\n\
             root = ET.fromstring(sys.stdin.read())\n\
             assert root.tag == A + 'feed', root.tag\n\
             for need in ('id', 'title', 'updated'):\n\
             \x20   assert root.find(A + need) is not None, need\n\
             out = []\n\
             for e in root.findall(A + 'entry'):\n\
             \x20   assert e.find(A + 'updated') is not None\n\
             \x20   c = e.find(A + 'content')\n\
             \x20   out.append([e.find(A + 'id').text, e.find(A + 'title').text,\n\
             \x20               '' if c is None else c.text])\n\
             print(json.dumps(out))",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    parser.stdin.take().unwrap().write_all(xml.as_bytes())?;
    let out = parser.wait_with_output()?;
    anyhow::ensure!(out.status.success(), "not an Atom feed: {xml}");
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// The page's summary once it shows what `ready` looks for (renderings are shared for a few
/// seconds).
async fn summary_once(
    central: &Central,
    what: &str,
    ready: impl Fn(&Value) -> bool,
) -> anyhow::Result<Value> {
    let url = format!("{}/status/acme/summary.json", central.url);
    eventually(Duration::from_secs(15), what, || async {
        let summary: Value = get(&url).await.ok()?.json().await.ok()?;
        ready(&summary).then_some(summary)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn incidents_and_maintenance_show_on_the_page_its_feed_and_history() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let http = |name: &str| {
        json!({"name": name, "kind": "http", "target": "http://127.0.0.1:9/",
            "interval_ms": 60000})
    };
    let api = central.create_monitor(http("api-internal-7")).await?;
    let db = central.create_monitor(http("hidden-db-7")).await?;
    let (status, page) = central
        .admin(
            Method::POST,
            "/api/v1/status-pages",
            Some(json!({"slug": "acme", "title": "Acme status",
                "sections": [{"name": "API", "monitor_ids": [api],
                    "display_names": [{"monitor_id": api, "name": "Public API"}]}]})),
        )
        .await?;
    assert_eq!(status, 201, "{page}");
    let incidents = format!(
        "/api/v1/status-pages/{}/incidents",
        page["id"].as_str().unwrap()
    );

    // What the API refuses, naming the field.
    for (spec, code, field) in [
        (
            json!({"title": "Errors", "message": "Looking", "monitor_ids": [db]}),
            422,
            "monitor_ids[0]",
        ),
        (
            json!({"title": "Errors", "message": " \n "}),
            400,
            "message",
        ),
        (json!({"title": "Two\nlines", "message": "x"}), 400, "title"),
        (
            json!({"title": "Errors", "message": "x", "status": "fixed"}),
            400,
            "status",
        ),
    ] {
        let (status, body) = central.admin(Method::POST, &incidents, Some(spec)).await?;
        assert_eq!(status, code, "{body}");
        assert!(
            body["message"].as_str().unwrap_or_default().contains(field),
            "names `{field}`: {body}"
        );
    }
    let (status, body) = central
        .admin(
            Method::POST,
            &format!("/api/v1/status-pages/{}/incidents", uuid::Uuid::new_v4()),
            Some(json!({"title": "Errors", "message": "x"})),
        )
        .await?;
    assert_eq!(status, 404, "no such page: {body}");

    let (status, incident) = central
        .admin(
            Method::POST,
            &incidents,
            Some(json!({"title": "Elevated errors", "monitor_ids": [api],
                "message": "**Errors** on checkout <script>alert(1)</script> \
                    [details](javascript:alert(1))"})),
        )
        .await?;
    assert_eq!(status, 201, "{incident}");
    assert_eq!(incident["status"], "investigating", "the default");
    let one = format!("{incidents}/{}", incident["id"].as_str().unwrap());
    let (status, body) = central
        .admin(Method::PATCH, &one, Some(json!({"status": "resolved"})))
        .await?;
    assert_eq!(status, 422, "a new status says why: {body}");
    assert!(
        body["message"].as_str().unwrap().contains("message"),
        "{body}"
    );
    let (status, incident) = central
        .admin(
            Method::POST,
            &format!("{one}/updates"),
            Some(json!({"status": "identified", "message": "A bad deploy; rolling back."})),
        )
        .await?;
    assert_eq!(status, 201, "{incident}");
    let statuses: Vec<&str> = incident["updates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["identified", "investigating"], "newest first");
    assert_eq!(incident["status"], "identified");

    // Planned maintenance over the shown monitor, in two hours for one.
    let starts = chrono::Utc::now() + chrono::Duration::hours(2);
    let (status, window) = central
        .admin(
            Method::POST,
            "/api/v1/maintenance-windows",
            Some(json!({"name": "patch db-primary-3", "monitor_ids": [api],
                "starts_at": starts.to_rfc3339(),
                "ends_at": (starts + chrono::Duration::hours(1)).to_rfc3339()})),
        )
        .await?;
    assert_eq!(status, 201, "{window}");

    let summary = summary_once(&central, "the incident and the maintenance", |s| {
        s["incidents"][0]["status"] == "identified" && s["maintenance"][0].is_object()
    })
    .await?;
    let shown = &summary["incidents"][0];
    assert_eq!(shown["title"], "Elevated errors");
    assert_eq!(
        shown["affected"],
        json!(["Public API"]),
        "by its name on the page"
    );
    assert_eq!(shown["updates"].as_array().unwrap().len(), 2);
    assert!(shown["resolved_at"].is_null());
    let planned = &summary["maintenance"][0];
    assert_eq!(planned["under_way"], false);
    assert_eq!(planned["affected"], json!(["Public API"]));
    let text = summary.to_string();
    for internal in ["api-internal-7", "hidden-db-7", "db-primary-3"] {
        assert!(!text.contains(internal), "{internal} in {text}");
    }

    let html = get(&format!("{}/status/acme", central.url))
        .await?
        .text()
        .await?;
    assert!(html.contains("<strong>Errors</strong>"), "Markdown: {html}");
    assert!(html.contains("&lt;script&gt;"), "raw HTML as text: {html}");
    assert!(!html.contains("<script"), "{html}");
    assert!(!html.contains("javascript:"), "{html}");
    assert!(html.contains("Planned maintenance"), "{html}");
    for internal in ["api-internal-7", "hidden-db-7", "db-primary-3"] {
        assert!(!html.contains(internal), "{internal} on the page");
    }

    // Resolved: a past incident, in the feed and in this month's history.
    let (status, resolved) = central
        .admin(
            Method::PATCH,
            &one,
            Some(json!({"status": "resolved", "message": "Rolled back; errors are gone."})),
        )
        .await?;
    assert_eq!(status, 200, "{resolved}");
    assert!(resolved["resolved_at"].is_string(), "{resolved}");
    summary_once(&central, "the incident resolved", |s| {
        s["incidents"][0]["resolved_at"].is_string()
    })
    .await?;
    let html = get(&format!("{}/status/acme", central.url))
        .await?
        .text()
        .await?;
    let past = html
        .split("<h2>Past incidents</h2>")
        .nth(1)
        .unwrap_or_default();
    assert!(
        past.contains("Elevated errors"),
        "under past incidents: {html}"
    );
    assert!(
        !html.contains(r#"aria-label="Incidents""#),
        "none open: {html}"
    );

    let feed = get(&format!("{}/status/acme/feed.atom", central.url)).await?;
    assert_eq!(feed.status(), 200);
    assert_eq!(feed.headers()[CONTENT_TYPE], "application/atom+xml");
    let entries = atom_entries(&feed.text().await?)?;
    assert_eq!(
        entries.len(),
        2,
        "the incident and the maintenance: {entries:?}"
    );
    let (id, title, content) = entries
        .iter()
        .find(|(id, _, _)| id.ends_with(incident["id"].as_str().unwrap()))
        .expect("the incident's entry");
    assert_eq!(
        id,
        &format!("urn:uuid:{}", incident["id"].as_str().unwrap())
    );
    assert_eq!(title, "Elevated errors (Resolved)");
    assert!(content.contains("Rolled back"), "{content}");
    assert!(!content.contains("<script"), "{content}");
    assert!(!content.contains("db-primary-3"), "{content}");

    let history = get(&format!("{}/status/acme/history", central.url)).await?;
    assert_eq!(history.status(), 200);
    let history = history.text().await?;
    assert!(history.contains("Elevated errors"), "{history}");
    assert!(history.contains("Rolled back"), "{history}");
    for (month, code) in [("1999-01", 404), ("2026-13", 400), ("2999-01", 404)] {
        let answer = get(&format!(
            "{}/status/acme/history?month={month}",
            central.url
        ))
        .await?;
        assert_eq!(answer.status(), code, "{month}");
    }

    // Deleted: gone from the API; the page's deletion takes its incidents along.
    let (status, _) = central.admin(Method::DELETE, &one, None).await?;
    assert_eq!(status, 204);
    let (status, _) = central.admin(Method::GET, &one, None).await?;
    assert_eq!(status, 404);
    let (status, _) = central
        .admin(
            Method::POST,
            &incidents,
            Some(json!({"title": "Another", "message": "x"})),
        )
        .await?;
    assert_eq!(status, 201);
    let (status, _) = central
        .admin(
            Method::DELETE,
            &format!("/api/v1/status-pages/{}", page["id"].as_str().unwrap()),
            None,
        )
        .await?;
    assert_eq!(status, 204);
    let (status, _) = central.admin(Method::GET, &incidents, None).await?;
    assert_eq!(status, 404, "the page and its incidents are gone");
    Ok(())
}
