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

/// A feed's entries as a feed reader reads them (Python's `feedparser`, Debian's
/// python3-feedparser): `(id, title, content)`; a feed it finds malformed (`bozo`), or that
/// is not Atom 1.0 or lacks a feed id, title or updated time, fails.
fn atom_entries(xml: &str) -> anyhow::Result<Vec<(String, String, String)>> {
    use std::io::Write;
    let mut parser = std::process::Command::new("/usr/bin/python3")
        .args([
            "-c",
            "import sys, json, feedparser\n\
             d = feedparser.parse(sys.stdin.buffer.read())\n\
             assert not d.bozo, d.get('bozo_exception')\n\
             assert d.version == 'atom10', d.version\n\
             for need in ('id', 'title', 'updated'):\n\
             \x20   assert d.feed.get(need), need\n\
             out = []\n\
             for e in d.entries:\n\
             \x20   assert e.get('updated'), e\n\
             \x20   c = e.get('content')\n\
             \x20   out.append([e.id, e.title, c[0].value if c else ''])\n\
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
    let xml = feed.text().await?;
    // The feed reader drops script elements itself; the feed must hold none to drop (a script
    // tag in an entry's HTML is `&lt;script` in the XML; the message's, shown as text, is
    // `&amp;lt;script`).
    assert!(!xml.contains("&lt;script"), "{xml}");
    let entries = atom_entries(&xml)?;
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

/// On the operators' page a status page has a page of its own: its incidents (opened with the
/// monitors it affects chosen by their names on the page, then updated and deleted) and the
/// form that changes the page; every change is audited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_run_a_pages_incidents_and_change_it_on_their_page() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let monitor = central
        .create_monitor(json!({"name": "internal-api", "kind": "http",
            "target": "http://127.0.0.1:9/"}))
        .await?;
    let (status, page) = central
        .admin(
            Method::POST,
            "/api/v1/status-pages",
            Some(json!({"slug": "acme", "title": "Acme status",
                "sections": [{"name": "API", "monitor_ids": [monitor],
                    "display_names": [{"monitor_id": monitor, "name": "Public API"}]}]})),
        )
        .await?;
    assert_eq!(status, 201, "{page}");
    let id = page["id"].as_str().unwrap().to_string();
    let cookie = central.session_cookie().await?;
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let own = http
        .get(format!("{}/status-pages/{id}", central.url))
        .header("cookie", &cookie)
        .send()
        .await?;
    assert_eq!(own.status(), 200);
    let own = own.text().await?;
    assert!(own.contains("Open an incident"), "{own}");
    assert!(
        own.contains(&format!("value=\"{monitor}\"")) && own.contains("Public API"),
        "the page's monitors, by their names there: {own}"
    );
    let csrf = own
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_default()
        .to_string();
    let post = |path: String, form: Vec<(&'static str, String)>| {
        http.post(format!("{}{path}", central.url))
            .header("cookie", &cookie)
            .header("Origin", &central.url)
            .form(&form)
            .send()
    };
    let refused = post(
        format!("/status-pages/{id}/incidents"),
        vec![
            ("csrf", csrf.clone()),
            ("title", "Errors".into()),
            ("message", " ".into()),
        ],
    )
    .await?;
    assert_eq!(refused.status(), 400);
    assert!(refused.text().await?.contains("`message`"));
    let opened = post(
        format!("/status-pages/{id}/incidents"),
        vec![
            ("csrf", csrf.clone()),
            ("title", "Elevated errors".into()),
            ("status", "identified".into()),
            ("message", "A bad deploy.".into()),
            ("monitor_ids", monitor.to_string()),
        ],
    )
    .await?;
    assert_eq!(opened.status(), 303, "{}", opened.text().await?);
    let incidents = format!("/api/v1/status-pages/{id}/incidents");
    let (_, listed) = central.admin(Method::GET, &incidents, None).await?;
    let incident = &listed["items"][0];
    assert_eq!(incident["status"], "identified", "{listed}");
    assert_eq!(incident["monitor_ids"], json!([monitor]));
    let iid = incident["id"].as_str().unwrap().to_string();
    let updated = post(
        format!("/status-pages/{id}/incidents/{iid}/updates"),
        vec![
            ("csrf", csrf.clone()),
            ("status", "resolved".into()),
            ("message", "Rolled back.".into()),
        ],
    )
    .await?;
    assert_eq!(updated.status(), 303);
    let (_, incident) = central
        .admin(Method::GET, &format!("{incidents}/{iid}"), None)
        .await?;
    assert_eq!(incident["status"], "resolved", "{incident}");
    assert_eq!(incident["updates"].as_array().unwrap().len(), 2);

    // The page's own form changes it.
    let changed = post(
        format!("/status-pages/{id}"),
        vec![
            ("csrf", csrf.clone()),
            ("slug", "acme-2".into()),
            ("title", "Acme service status".into()),
            ("visibility", "public".into()),
            ("sections", page["sections"].to_string()),
            ("domain", "status.acme.test".into()),
        ],
    )
    .await?;
    assert_eq!(changed.status(), 303, "{}", changed.text().await?);
    let (_, stored) = central
        .admin(Method::GET, &format!("/api/v1/status-pages/{id}"), None)
        .await?;
    assert_eq!(stored["slug"], "acme-2", "{stored}");
    assert_eq!(stored["title"], "Acme service status");
    assert_eq!(stored["domain"], "status.acme.test");
    assert_eq!(stored["sections"], page["sections"], "kept as they were");

    let deleted = post(
        format!("/status-pages/{id}/incidents/{iid}/delete"),
        vec![("csrf", csrf.clone())],
    )
    .await?;
    assert_eq!(deleted.status(), 303);
    let (_, listed) = central.admin(Method::GET, &incidents, None).await?;
    assert_eq!(listed["items"], json!([]));
    let (_, audit) = central
        .admin(
            Method::GET,
            &format!("/api/v1/audit?object_kind=status-pages&object_id={id}"),
            None,
        )
        .await?;
    assert!(
        audit["items"].as_array().map_or(0, Vec::len) >= 5,
        "the page's creation, the incident's opening, update and deletion, the edit: {audit}"
    );
    Ok(())
}

/// A page that opens incidents itself does so when alerting tells that a monitor it shows is
/// down (by the monitor's name on the page, nothing else of it), and resolves it when the
/// monitor is told up; a draft page's incident waits, unseen, for an operator to publish it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_open_and_resolve_incidents_as_their_monitors_go_down_and_up() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let _agent = central.start_agent("eu-1", "eu").await?;
    let target = e2e::Target::start().await?;
    let monitor = central
        .create_monitor(
            json!({"name": "api-internal-7", "kind": "http", "target": target.url,
            "interval_ms": 5000}),
        )
        .await?;
    let mut incidents = Vec::new();
    for (slug, auto) in [("acme", "publish"), ("quiet", "draft")] {
        let (status, page) = central
            .admin(
                Method::POST,
                "/api/v1/status-pages",
                Some(
                    json!({"slug": slug, "title": "Acme", "auto_incidents": auto,
                    "sections": [{"name": "API", "monitor_ids": [monitor],
                        "display_names": [{"monitor_id": monitor, "name": "Public API"}]}]}),
                ),
            )
            .await?;
        assert_eq!(status, 201, "{page}");
        assert_eq!(page["auto_incidents"], auto);
        incidents.push(format!(
            "/api/v1/status-pages/{}/incidents",
            page["id"].as_str().unwrap()
        ));
    }
    central
        .wait_for_status(&monitor, "up", Duration::from_secs(40))
        .await?;
    target.answer_with(500);
    central
        .wait_for_status(&monitor, "down", Duration::from_secs(40))
        .await?;
    let listed = |path: String| {
        let central = &central;
        async move {
            let (_, listed) = central.admin(Method::GET, &path, None).await.ok()?;
            listed["items"]
                .as_array()
                .filter(|i| !i.is_empty())
                .cloned()
        }
    };
    let opened = eventually(Duration::from_secs(20), "an incident opened", || {
        listed(incidents[0].clone())
    })
    .await?;
    assert_eq!(opened.len(), 1, "{opened:?}");
    let incident = &opened[0];
    assert_eq!(incident["title"], "Public API is down");
    assert_eq!(incident["status"], "investigating");
    assert_eq!(incident["published"], true);
    assert_eq!(incident["opened_for"], json!(monitor));
    assert_eq!(incident["monitor_ids"], json!([monitor]));
    // What it says (its ids and times may hold "500" by chance: an id 01a25009…).
    let messages: Vec<&str> = incident["updates"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|u| u["message"].as_str())
        .collect();
    let text = format!("{} {}", incident["title"], messages.join(" "));
    for internal in ["api-internal-7", target.url.as_str(), "500"] {
        assert!(!text.contains(internal), "{internal} in {text}");
    }
    let draft = eventually(Duration::from_secs(20), "a draft opened", || {
        listed(incidents[1].clone())
    })
    .await?;
    assert_eq!(draft[0]["published"], false, "{draft:?}");
    let quiet = get(&format!("{}/status/quiet/summary.json", central.url))
        .await?
        .json::<Value>()
        .await?;
    assert_eq!(
        quiet["incidents"],
        json!([]),
        "a draft is not shown: {quiet}"
    );
    summary_once(&central, "the published incident on the page", |s| {
        s["incidents"][0]["title"] == "Public API is down"
    })
    .await?;

    target.answer_with(200);
    central
        .wait_for_status(&monitor, "up", Duration::from_secs(40))
        .await?;
    let one = format!("{}/{}", incidents[0], incident["id"].as_str().unwrap());
    let resolved = eventually(Duration::from_secs(20), "the incident resolved", || {
        let central = &central;
        let one = one.clone();
        async move {
            let (_, incident) = central.admin(Method::GET, &one, None).await.ok()?;
            (incident["status"] == "resolved").then_some(incident)
        }
    })
    .await?;
    assert_eq!(
        resolved["updates"].as_array().unwrap().len(),
        2,
        "{resolved}"
    );
    assert!(resolved["resolved_at"].is_string());

    // The draft, published, is on its page.
    let (status, published) = central
        .admin(
            Method::PATCH,
            &format!("{}/{}", incidents[1], draft[0]["id"].as_str().unwrap()),
            Some(json!({"published": true})),
        )
        .await?;
    assert_eq!(status, 200, "{published}");
    let url = format!("{}/status/quiet/summary.json", central.url);
    eventually(Duration::from_secs(15), "the published draft", || async {
        let summary: Value = get(&url).await.ok()?.json().await.ok()?;
        (summary["incidents"][0]["title"] == "Public API is down").then_some(())
    })
    .await?;
    Ok(())
}

/// A status page, its history and a password page's form in a real Chromium: axe-core finds
/// nothing serious or critical, nor does the operators' page's own check (labels, names,
/// contrast, focus order), on a desktop window and a phone's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_pages_pass_axe_in_a_browser() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let monitor = central
        .create_monitor(json!({"name": "api", "kind": "http", "target": "http://127.0.0.1:9/"}))
        .await?;
    for spec in [
        json!({"slug": "acme", "title": "Acme status", "description": "Everything customers use.",
            "sections": [{"name": "API", "monitor_ids": [monitor],
                "display_names": [{"monitor_id": monitor, "name": "Public API"}]}]}),
        json!({"slug": "inner", "title": "Inner", "visibility": "password",
            "password": "correct horse battery"}),
    ] {
        let (status, page) = central
            .admin(Method::POST, "/api/v1/status-pages", Some(spec))
            .await?;
        assert_eq!(status, 201, "{page}");
    }
    let (_, pages) = central
        .admin(Method::GET, "/api/v1/status-pages", None)
        .await?;
    let acme = pages["items"][0]["id"].as_str().unwrap().to_string();
    let incidents = format!("/api/v1/status-pages/{acme}/incidents");
    for (title, status) in [
        ("Elevated errors", "identified"),
        ("Slow logins", "resolved"),
    ] {
        let (code, body) = central
            .admin(
                Method::POST,
                &incidents,
                Some(
                    json!({"title": title, "status": status, "monitor_ids": [monitor],
                    "message": "**Some** requests fail; see [the runbook](https://example.com)."}),
                ),
            )
            .await?;
        assert_eq!(code, 201, "{body}");
    }
    let starts = chrono::Utc::now() + chrono::Duration::hours(3);
    let (code, body) = central
        .admin(
            Method::POST,
            "/api/v1/maintenance-windows",
            Some(json!({"name": "db upgrade", "monitor_ids": [monitor],
                "starts_at": starts.to_rfc3339(),
                "ends_at": (starts + chrono::Duration::hours(1)).to_rfc3339()})),
        )
        .await?;
    assert_eq!(code, 201, "{body}");

    let browser = e2e::browser::Browser::start("status-pages").await?;
    // axe is there and finds what it should: an image without a description is critical.
    browser
        .goto("data:text/html,<html lang=en><title>x</title><main><img src=x.png></main></html>")
        .await?;
    let found = browser.axe_problems().await?;
    assert!(
        found.iter().any(|p| p.starts_with("image-alt")),
        "{found:#?}"
    );
    for (width, height) in [(1280, 900), (390, 844)] {
        browser.resize(width, height).await?;
        for path in ["/status/acme", "/status/acme/history", "/status/inner"] {
            browser.goto(&format!("{}{path}", central.url)).await?;
            let page = format!("{path} at {width}x{height}");
            let own = browser.accessibility_problems().await?;
            assert!(own.is_empty(), "{page}: {own:#?}");
            let axe = browser.axe_problems().await?;
            assert!(axe.is_empty(), "{page}: {axe:#?}");
        }
    }
    // The dark scheme a reader's system may ask for: axe checks its contrast too.
    let dark = e2e::browser::Browser::start_dark("status-pages-dark").await?;
    dark.goto(&format!("{}/status/acme", central.url)).await?;
    let prefers_dark = dark
        .client
        .execute(
            "return window.matchMedia('(prefers-color-scheme: dark)').matches",
            vec![],
        )
        .await?;
    assert_eq!(
        prefers_dark,
        json!(true),
        "the browser asks for the dark scheme"
    );
    dark.screenshot("status-page-dark").await?;
    for path in ["/status/acme", "/status/acme/history", "/status/inner"] {
        dark.goto(&format!("{}{path}", central.url)).await?;
        let axe = dark.axe_problems().await?;
        assert!(axe.is_empty(), "{path}, dark: {axe:#?}");
    }
    browser
        .goto(&format!("{}/status/acme", central.url))
        .await?;
    let shown = browser.text("main").await?;
    assert!(
        shown.contains("Elevated errors") && shown.contains("Planned maintenance"),
        "{shown}"
    );
    browser.screenshot("status-page").await?;
    Ok(())
}
