//! Status pages with real binaries: a public page with two sections (monitors by id with
//! display names, and by tag) shows each monitor's status in visitors' words, the overall
//! banner, and 90 daily cells, in HTML and in `summary.json`, from one rendering shared by
//! every reader (`ETag`, `304`); a monitor not on the page, the monitors' own names where a
//! display name is set, and their targets appear nowhere; a private page is shown to nobody
//! (yet); badges exist for shown monitors only; the settings API refuses bad pages naming the
//! field, and never shows a password.

use std::time::Duration;

use e2e::{eventually, Central, Target};
use reqwest::header::{ACCESS_CONTROL_ALLOW_ORIGIN, CACHE_CONTROL, ETAG, IF_NONE_MATCH};
use reqwest::Method;
use serde_json::{json, Value};

/// A badge's text, as an XML parser reads its `<title>` (Python's, a parser of its own).
fn svg_text(svg: &str) -> anyhow::Result<String> {
    use std::io::Write;
    let mut parser = std::process::Command::new("python3")
        .args([
            "-c",
            "import sys, xml.etree.ElementTree as ET\n\
             root = ET.fromstring(sys.stdin.read())\n\
             assert root.tag == '{http://www.w3.org/2000/svg}svg', root.tag\n\
             print(root.find('{http://www.w3.org/2000/svg}title').text, end='')",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    parser.stdin.take().unwrap().write_all(svg.as_bytes())?;
    let out = parser.wait_with_output()?;
    anyhow::ensure!(out.status.success(), "not an SVG document: {svg}");
    Ok(String::from_utf8(out.stdout)?)
}

async fn get(url: &str) -> anyhow::Result<reqwest::Response> {
    Ok(reqwest::Client::new().get(url).send().await?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_public_page_shows_its_monitors_and_nothing_else_of_them() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let _agent = central.start_agent("eu-1", "eu").await?;
    let (healthy, failing, deploying, secret) = (
        Target::start().await?,
        Target::start().await?,
        Target::start().await?,
        Target::start().await?,
    );
    failing.answer_with(500);
    let http = |name: &str, target: &Target, tags: Value| {
        json!({"name": name, "kind": "http", "target": target.url, "interval_ms": 5000,
            "tags": tags})
    };
    let api = central
        .create_monitor(http("api-internal-7", &healthy, json!([])))
        .await?;
    let checkout = central
        .create_monitor(http("checkout-internal-7", &failing, json!([])))
        .await?;
    let web = central
        .create_monitor(http("website", &deploying, json!(["web"])))
        .await?;
    let hidden = central
        .create_monitor(http("hidden-database-7", &secret, json!(["internal"])))
        .await?;
    for (monitor, status) in [
        (&api, "up"),
        (&checkout, "down"),
        (&web, "up"),
        (&hidden, "up"),
    ] {
        central
            .wait_for_status(monitor, status, Duration::from_secs(40))
            .await?;
    }
    let (status, muted) = central
        .admin(
            Method::POST,
            &format!("/api/v1/monitors/{web}/mute"),
            Some(json!({"duration_ms": 600_000})),
        )
        .await?;
    assert_eq!(status, 201, "{muted}");
    central
        .wait_for_status(&web, "maintenance", Duration::from_secs(10))
        .await?;

    // The settings API refuses what it cannot serve, naming the field.
    for (spec, code, field) in [
        (json!({"slug": "Acme!", "title": "Acme"}), 400, "slug"),
        (
            json!({"slug": "acme", "title": "Acme",
                "sections": [{"name": "API", "monitor_ids": [uuid::Uuid::new_v4()]}]}),
            422,
            "sections[0].monitor_ids[0]",
        ),
        (
            json!({"slug": "acme", "title": "Acme", "visibility": "password"}),
            422,
            "password",
        ),
    ] {
        let (status, body) = central
            .admin(Method::POST, "/api/v1/status-pages", Some(spec))
            .await?;
        assert_eq!(status, code, "{body}");
        assert!(
            body["message"].as_str().unwrap_or_default().contains(field),
            "names `{field}`: {body}"
        );
    }

    let (status, page) = central
        .admin(
            Method::POST,
            "/api/v1/status-pages",
            Some(json!({
                "slug": "acme",
                "title": "Acme status",
                "description": "Everything customers use.",
                "sections": [
                    {"name": "API", "monitor_ids": [api, checkout],
                     "display_names": [{"monitor_id": api, "name": "Public API"},
                                       {"monitor_id": checkout, "name": "Checkout"}]},
                    {"name": "Web", "tags": ["web"]},
                ],
            })),
        )
        .await?;
    assert_eq!(status, 201, "{page}");
    assert_eq!(page["path"], "/status/acme");
    let (status, taken) = central
        .admin(
            Method::POST,
            "/api/v1/status-pages",
            Some(json!({"slug": "acme", "title": "Again"})),
        )
        .await?;
    assert_eq!(status, 409, "one page per slug: {taken}");

    // The page and its summary, found at once though the page was just made.
    let response = get(&format!("{}/status/acme/summary.json", central.url)).await?;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()[ACCESS_CONTROL_ALLOW_ORIGIN],
        "*",
        "widgets elsewhere may read it"
    );
    assert!(response.headers()[CACHE_CONTROL]
        .to_str()?
        .starts_with("public"));
    let etag = response.headers()[ETAG].clone();
    let text = response.text().await?;
    let summary: Value = serde_json::from_str(&text)?;
    assert_eq!(summary["status"], "outage", "{summary}");
    assert_eq!(summary["outage"], "partial", "{summary}");
    let sections = summary["sections"].as_array().unwrap();
    let shown: Vec<(String, String)> = sections
        .iter()
        .flat_map(|s| s["monitors"].as_array().unwrap().iter())
        .map(|m| {
            (
                m["name"].as_str().unwrap().to_string(),
                m["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        shown,
        [
            ("Public API".to_string(), "up".to_string()),
            ("Checkout".to_string(), "down".to_string()),
            ("website".to_string(), "maintenance".to_string()),
        ]
    );
    for monitor in sections[0]["monitors"].as_array().unwrap() {
        let days = monitor["days"].as_array().unwrap();
        assert_eq!(days.len(), 90);
        assert!(
            days.last().unwrap()["uptime"].is_number(),
            "today has measured time: {monitor}"
        );
    }
    // A second reader gets the same rendering, and nothing when it holds it already.
    let again = get(&format!("{}/status/acme/summary.json", central.url)).await?;
    let again: Value = again.json().await?;
    assert_eq!(
        again["generated_at"], summary["generated_at"],
        "one rendering"
    );
    let held = reqwest::Client::new()
        .get(format!("{}/status/acme/summary.json", central.url))
        .header(IF_NONE_MATCH, etag)
        .send()
        .await?;
    assert_eq!(held.status(), 304);

    let html = get(&format!("{}/status/acme", central.url)).await?;
    assert_eq!(html.status(), 200);
    let html = html.text().await?;
    for shown in [
        "Acme status",
        "Public API",
        "Checkout",
        "website",
        "Partial outage",
    ] {
        assert!(html.contains(shown), "`{shown}` on the page");
    }
    for target in [&healthy, &failing, &deploying, &secret] {
        let address = target.url.trim_start_matches("http://");
        assert!(!html.contains(address) && !text.contains(address));
    }
    for internal in [
        "api-internal-7",
        "checkout-internal-7",
        "hidden-database-7",
        &hidden,
    ] {
        assert!(
            !html.contains(internal) && !text.contains(internal),
            "`{internal}` is not shown"
        );
    }
    assert!(!html.contains("://"), "nothing is loaded from elsewhere");
    // Gzipped once for every reader that takes it: the same page, compressed once.
    // (A client that leaves the body as it came.)
    let gzipped = reqwest::Client::builder()
        .no_gzip()
        .build()?
        .get(format!("{}/status/acme", central.url))
        .header("accept-encoding", "gzip")
        .send()
        .await?;
    assert_eq!(
        gzipped
            .headers()
            .get("content-encoding")
            .map(|v| v.as_bytes()),
        Some(&b"gzip"[..]),
        "{:?}",
        gzipped.headers()
    );
    let compressed = gzipped.bytes().await?;
    let mut unzipped = String::new();
    std::io::Read::read_to_string(
        &mut flate2::read::GzDecoder::new(&compressed[..]),
        &mut unzipped,
    )?;
    let plain = get(&format!("{}/status/acme", central.url))
        .await?
        .text()
        .await?;
    assert_eq!(unzipped, plain, "one rendering, compressed once");
    assert!(
        compressed.len() * 4 < plain.len(),
        "{} of {}",
        compressed.len(),
        plain.len()
    );

    // Badges, for monitors on a public page only, read as SVG by a real XML parser.
    let badge = |path: String| {
        let url = format!("{}{path}", central.url);
        async move { get(&url).await }
    };
    let status_badge = badge(format!("/badge/{api}/status.svg")).await?;
    assert_eq!(status_badge.status(), 200);
    assert_eq!(status_badge.headers()["content-type"], "image/svg+xml");
    assert!(status_badge.headers().contains_key(ETAG));
    let svg = status_badge.text().await?;
    assert_eq!(svg_text(&svg)?, "Public API: up", "{svg}");
    let uptime = badge(format!("/badge/{api}/uptime.svg?window=24h"))
        .await?
        .text()
        .await?;
    assert!(svg_text(&uptime)?.starts_with("uptime 24h: "), "{uptime}");
    let page_badge = badge("/status/acme/badge.svg".into()).await?.text().await?;
    assert_eq!(svg_text(&page_badge)?, "Acme status: partial outage");
    let bad_window = badge(format!("/badge/{api}/uptime.svg?window=1y")).await?;
    assert_eq!(bad_window.status(), 400);
    assert!(bad_window.text().await?.contains("window"));
    for not_shown in [&hidden, &"not-a-uuid".to_string()] {
        for kind in ["status", "uptime", "latency"] {
            let refused = badge(format!("/badge/{not_shown}/{kind}.svg")).await?;
            assert_eq!(
                refused.status(),
                404,
                "{kind} badge of a monitor on no page"
            );
        }
    }

    // An edit shows within the rendering's few seconds.
    let path = format!("/api/v1/status-pages/{}", page["id"].as_str().unwrap());
    let (status, _) = central
        .admin(Method::PATCH, &path, Some(json!({"title": "Acme, Inc."})))
        .await?;
    assert_eq!(status, 200);
    eventually(Duration::from_secs(10), "the new title", || async {
        let html = get(&format!("{}/status/acme", central.url))
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        html.contains("Acme, Inc.").then_some(())
    })
    .await?;

    // A deleted monitor leaves the page, and does not stop its edits.
    let (status, _) = central
        .admin(
            Method::DELETE,
            &format!("/api/v1/monitors/{checkout}"),
            None,
        )
        .await?;
    assert_eq!(status, 204);
    eventually(
        Duration::from_secs(10),
        "the deleted monitor gone",
        || async {
            let html = get(&format!("{}/status/acme", central.url))
                .await
                .ok()?
                .text()
                .await
                .ok()?;
            (!html.contains("Checkout") && html.contains("Public API")).then_some(())
        },
    )
    .await?;
    let (status, edited) = central
        .admin(
            Method::PATCH,
            &path,
            Some(json!({"description": "Still here."})),
        )
        .await?;
    assert_eq!(status, 200, "{edited}");

    // A password page keeps its password to itself, and is shown to nobody for now.
    let (status, private) = central
        .admin(
            Method::POST,
            "/api/v1/status-pages",
            Some(
                json!({"slug": "staff", "title": "Staff", "visibility": "password",
                "password": "correct horse battery"}),
            ),
        )
        .await?;
    assert_eq!(status, 201, "{private}");
    assert_eq!(private["has_password"], true);
    assert!(!private.to_string().contains("correct horse"), "{private}");
    // Found once the address book is read again (at most a second for a slug it lacks).
    eventually(
        Duration::from_secs(10),
        "the private page refused",
        || async {
            let refused = get(&format!("{}/status/staff", central.url)).await.ok()?;
            (refused.status() == 401).then_some(())
        },
    )
    .await?;
    let unknown = get(&format!("{}/status/nothing-here", central.url)).await?;
    assert_eq!(unknown.status(), 404);

    let (status, _) = central.admin(Method::DELETE, &path, None).await?;
    assert_eq!(status, 204);
    eventually(Duration::from_secs(10), "the page gone", || async {
        let gone = get(&format!("{}/status/acme", central.url)).await.ok()?;
        (gone.status() == 404).then_some(())
    })
    .await?;
    Ok(())
}

/// Status pages' visitors have a pool of their own: strangers holding every unauthenticated
/// place (bodies that never come, from many addresses) leave the page served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strangers_holding_every_place_leave_status_pages_served() -> anyhow::Result<()> {
    use tokio::io::AsyncWriteExt;

    let central = Central::start_with(&[
        ("CENTRAL_MAX_UNAUTHENTICATED_REQUESTS", "4"),
        ("CENTRAL_REQUEST_TIMEOUT", "20s"),
        ("CENTRAL_AUTH_RATE_LIMIT", "0"),
        ("CENTRAL_AUTH_FAILURES_PER_MINUTE", "0"),
        ("CENTRAL_AUTH_FAILURES_GLOBAL_PER_MINUTE", "0"),
    ])
    .await?;
    let (status, page) = central
        .admin(
            Method::POST,
            "/api/v1/status-pages",
            Some(json!({"slug": "rush", "title": "Rush"})),
        )
        .await?;
    assert_eq!(status, 201, "{page}");
    let page_url = format!("{}/status/rush", central.url);
    assert_eq!(get(&page_url).await?.status(), 200);

    // Logins whose bodies never come, from 127.0.0.2 to .9: every unauthenticated place.
    let mut held = Vec::new();
    for i in 0..16u8 {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.bind(format!("127.0.0.{}:0", 2 + i % 8).parse()?)?;
        let mut stream = socket.connect(central.addr.parse()?).await?;
        stream
            .write_all(
                b"POST /login HTTP/1.1\r\nHost: central\r\n\
                  Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\n",
            )
            .await?;
        held.push(stream);
    }
    let login = format!("{}/login", central.url);
    eventually(Duration::from_secs(10), "every place held", || async {
        let shed = reqwest::Client::new()
            .post(&login)
            .form(&[("token", "guess")])
            .send()
            .await
            .ok()?;
        (shed.status() == 503).then_some(())
    })
    .await?;
    for _ in 0..5 {
        let response = get(&page_url).await?;
        assert_eq!(response.status(), 200, "the page is served beside them");
    }
    drop(held);
    Ok(())
}
