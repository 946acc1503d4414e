//! Status pages with real binaries: a public page with two sections (monitors by id with
//! display names, and by tag) shows each monitor's status in visitors' words, the overall
//! banner, and 90 daily cells, in HTML and in `summary.json`, from one rendering shared by
//! every reader (`ETag`, `304`); a monitor not on the page, the monitors' own names where a
//! display name is set, and their targets appear nowhere; badges exist for shown monitors
//! only; the settings API refuses bad pages naming the field, and never shows a password. A
//! password page opens to its password (a cookie of its own, which a new password voids), a
//! users page to central's signed-in users; guessing is limited like logins.

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

    // A password page keeps its password to itself.
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

    // Logins whose bodies never come, from 127.0.0.2 on: every unauthenticated place.
    const HOLD: &[u8] = b"POST /login HTTP/1.1\r\nHost: central\r\n\
        Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 60000\r\n\r\n";
    let strangers = std::sync::atomic::AtomicU32::new(0);
    let hold = || async {
        let address = 2 + strangers.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 250;
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.bind(format!("127.0.0.{address}:0").parse()?)?;
        let mut stream = socket.connect(central.addr.parse()?).await?;
        stream.write_all(HOLD).await?;
        anyhow::Ok(stream)
    };
    let held = tokio::sync::Mutex::new(Vec::new());
    for _ in 0..8 {
        held.lock().await.push(hold().await?);
    }
    let login = format!("{}/login", central.url);
    let seen = std::sync::Mutex::new(Vec::new());
    let full = eventually(Duration::from_secs(60), "every place held", || async {
        let shed = reqwest::Client::new()
            .post(&login)
            .form(&[("token", "guess")])
            .send()
            .await
            .ok()?;
        seen.lock().unwrap().push(shed.status().as_u16());
        if shed.status() != 503 {
            // A place is still free: a stranger's request did not take one (CI has seen this
            // in attack.rs too, not reproduced locally). More strangers try; what is tested
            // is the page while they hold every place.
            for _ in 0..4 {
                held.lock().await.push(hold().await.ok()?);
            }
            return None;
        }
        Some(())
    })
    .await;
    // (What the logins were answered meanwhile, should the places never fill.)
    full.map_err(|e| anyhow::anyhow!("{e}; logins answered {:?}", seen.lock().unwrap()))?;
    for _ in 0..5 {
        let response = get(&page_url).await?;
        assert_eq!(response.status(), 200, "the page is served beside them");
    }
    drop(held);
    Ok(())
}

/// A page's cookie, from a `Set-Cookie` answer: `name=value`.
fn cookie_of(response: &reqwest::Response) -> Option<String> {
    let set = response.headers().get("set-cookie")?.to_str().ok()?;
    Some(set.split(';').next()?.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_pages_open_to_their_password_or_to_signed_in_users() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let mut ids = Vec::new();
    for (slug, title, more) in [
        (
            "staff",
            "Staff status",
            json!({"visibility": "password", "password": "correct horse battery"}),
        ),
        (
            "board",
            "Board status",
            json!({"visibility": "password", "password": "another password"}),
        ),
        ("ops", "Ops status", json!({"visibility": "users"})),
    ] {
        let mut spec = json!({"slug": slug, "title": title});
        spec.as_object_mut()
            .unwrap()
            .extend(more.as_object().unwrap().clone());
        let (status, page) = central
            .admin(Method::POST, "/api/v1/status-pages", Some(spec))
            .await?;
        assert_eq!(status, 201, "{page}");
        ids.push(page["id"].as_str().unwrap().to_string());
    }
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let read = |path: &str, cookie: Option<&str>| {
        let mut request = no_redirects.get(format!("{}{path}", central.url));
        if let Some(cookie) = cookie {
            request = request.header("cookie", cookie);
        }
        request.send()
    };
    let unlock = |password: &str| {
        no_redirects
            .post(format!("{}/status/staff/unlock", central.url))
            .form(&[("password", password)])
            .send()
    };

    // Without the password: its form, and not a word of the page.
    let asked = read("/status/staff", None).await?;
    assert_eq!(asked.status(), 401);
    let form = asked.text().await?;
    assert!(form.contains(r#"name="password""#), "{form}");
    assert!(
        !form.contains("Staff status"),
        "a private page says nothing of itself"
    );
    assert_eq!(
        read("/status/staff/summary.json", None).await?.status(),
        401
    );
    let wrong = unlock("wrong guess").await?;
    assert_eq!(wrong.status(), 401);
    assert!(cookie_of(&wrong).is_none());

    // With it: a cookie for this page's addresses, which opens it and nothing else.
    let opened = unlock("correct horse battery").await?;
    assert_eq!(opened.status(), 303);
    let set = opened.headers()["set-cookie"].to_str()?.to_string();
    assert!(
        set.contains("Path=/status/staff")
            && set.contains("HttpOnly")
            && set.contains("SameSite=Lax"),
        "{set}"
    );
    let cookie = cookie_of(&opened).unwrap();
    let page = read("/status/staff", Some(&cookie)).await?;
    assert_eq!(page.status(), 200);
    assert!(page.headers()[CACHE_CONTROL]
        .to_str()?
        .starts_with("private"));
    assert!(page.text().await?.contains("Staff status"));
    let summary = read("/status/staff/summary.json", Some(&cookie)).await?;
    assert_eq!(summary.status(), 200);
    assert!(
        summary.headers().get(ACCESS_CONTROL_ALLOW_ORIGIN).is_none(),
        "a private page's summary is not for other sites"
    );
    assert_eq!(read("/status/board", Some(&cookie)).await?.status(), 401);

    // A new password voids the cookies the old one gave.
    let (status, _) = central
        .admin(
            Method::PATCH,
            &format!("/api/v1/status-pages/{}", ids[0]),
            Some(json!({"password": "a brand new password"})),
        )
        .await?;
    assert_eq!(status, 200);
    eventually(
        Duration::from_secs(10),
        "the old cookie refused",
        || async {
            let status = read("/status/staff", Some(&cookie)).await.ok()?.status();
            (status == 401).then_some(())
        },
    )
    .await?;

    // A users page: central's session opens it.
    let refused = read("/status/ops", None).await?;
    assert_eq!(refused.status(), 401);
    assert!(refused.text().await?.contains("/login"));
    let session = central.session_cookie().await?;
    let page = read("/status/ops", Some(&session)).await?;
    assert_eq!(page.status(), 200);
    assert!(page.text().await?.contains("Ops status"));

    // Guessing is limited like logging in: past the failures a client may make, 429.
    let mut answers = Vec::new();
    for _ in 0..15 {
        answers.push(unlock("another wrong guess").await?.status().as_u16());
    }
    assert!(answers.contains(&429), "{answers:?}");
    // Reading pages is not guessing: their `401`s count against nobody.
    for _ in 0..15 {
        assert_eq!(read("/status/board", None).await?.status(), 401);
    }
    Ok(())
}

/// The operators' page makes, lists and deletes status pages; a viewer may look but not make.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_make_and_delete_status_pages_on_their_page() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let monitor = central
        .create_monitor(json!({"name": "internal-api", "kind": "http",
            "target": "http://127.0.0.1:9/"}))
        .await?;
    let cookie = central.session_cookie().await?;
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let open = |path: &str| {
        http.get(format!("{}{path}", central.url))
            .header("cookie", &cookie)
            .send()
    };
    let listing = open("/status-pages").await?.text().await?;
    let csrf = listing
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_default()
        .to_string();
    let post = |path: &str, form: Vec<(&str, String)>| {
        http.post(format!("{}{path}", central.url))
            .header("cookie", &cookie)
            .header("Origin", &central.url)
            .form(&form)
            .send()
    };
    let sections = format!(
        r#"[{{"name": "API", "monitor_ids": ["{monitor}"],
             "display_names": [{{"monitor_id": "{monitor}", "name": "Public API"}}]}}]"#
    );
    let form = |slug: &str, sections: &str| {
        vec![
            ("csrf", csrf.clone()),
            ("slug", slug.to_string()),
            ("title", "Acme status".to_string()),
            ("visibility", "public".to_string()),
            ("sections", sections.to_string()),
        ]
    };
    // What cannot be made is said on the form, naming the field.
    let refused = post("/status-pages", form("Not A Slug", &sections)).await?;
    assert_eq!(refused.status(), 400);
    assert!(refused.text().await?.contains("slug"));
    let refused = post("/status-pages", form("acme", "[{\"name\": 1}]")).await?;
    assert_eq!(refused.status(), 400);
    assert!(refused.text().await?.contains("Sections"));

    let made = post("/status-pages", form("acme", &sections)).await?;
    assert_eq!(made.status(), 303, "{}", made.text().await?);
    let listing = open("/status-pages").await?.text().await?;
    assert!(listing.contains("/status/acme") && listing.contains("Acme status"));
    let shown = get(&format!("{}/status/acme", central.url))
        .await?
        .text()
        .await?;
    assert!(shown.contains("Public API") && !shown.contains("internal-api"));
    let (_, pages) = central
        .admin(Method::GET, "/api/v1/status-pages", None)
        .await?;
    let id = pages["items"][0]["id"].as_str().unwrap().to_string();
    let (_, audit) = central
        .admin(Method::GET, "/api/v1/audit?object_kind=status-pages", None)
        .await?;
    assert!(
        audit.to_string().contains(&id),
        "the page's change is in the audit log: {audit}"
    );
    let deleted = post(
        &format!("/status-pages/{id}/delete"),
        vec![("csrf", csrf.clone())],
    )
    .await?;
    assert_eq!(deleted.status(), 303);
    let (_, pages) = central
        .admin(Method::GET, "/api/v1/status-pages", None)
        .await?;
    assert_eq!(pages["items"], json!([]));
    Ok(())
}

/// `central demo` makes a status page of its monitors, under public names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_shows_its_monitors_on_a_status_page() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let port = e2e::oidc::free_port()?;
    let _demo = tokio::process::Command::new(e2e::binary("central"))
        .args([
            "demo",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--data-dir",
        ])
        .arg(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let url = format!("http://127.0.0.1:{port}/status/demo");
    let page = eventually(
        Duration::from_secs(30),
        "the demo's status page",
        || async {
            let page = get(&url).await.ok()?;
            (page.status() == 200).then_some(())?;
            let html = page.text().await.ok()?;
            html.contains("Operational").then_some(html)
        },
    )
    .await?;
    for name in ["Demo status", "Website", "Checkout", "API port"] {
        assert!(page.contains(name), "{name}");
    }
    assert!(
        !page.contains("demo target"),
        "internal names stay internal"
    );
    Ok(())
}

/// A page with a `domain` is served at `/` of that host (its `Host`), with the same rules as
/// at `/status/{slug}`; any other host's `/` is central's own page, as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_is_served_at_its_own_domain() -> anyhow::Result<()> {
    let central = Central::start().await?;
    for (slug, title, extra) in [
        ("acme", "Acme status", json!({"domain": "status.acme.test"})),
        (
            "inner",
            "Inner status",
            json!({"domain": "status.inner.test", "visibility": "password",
                "password": "correct horse battery"}),
        ),
    ] {
        let mut spec = json!({"slug": slug, "title": title});
        spec.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let (status, page) = central
            .admin(Method::POST, "/api/v1/status-pages", Some(spec))
            .await?;
        assert_eq!(status, 201, "{page}");
    }
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let root = |host: &'static str| {
        client
            .get(format!("{}/", central.url))
            .header(reqwest::header::HOST, host)
            .send()
    };
    let page = root("status.acme.test:443").await?;
    assert_eq!(page.status(), 200);
    let html = page.text().await?;
    assert!(html.contains("<title>Acme status</title>"), "{html}");
    let private = root("status.inner.test").await?;
    assert_eq!(private.status(), 401, "a password page asks for it");
    assert!(!private.text().await?.contains("Inner status"));
    let own = root("central.test").await?;
    assert!(
        own.status().is_redirection(),
        "central's own page sends a stranger to the login: {}",
        own.status()
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_shows_its_logo_sent_as_the_image_it_is() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let png: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0";
    let data = |kind: &str, bytes: &[u8]| {
        let encoded = std::process::Command::new("base64")
            .arg("-w0")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                use std::io::Write;
                child.stdin.take().unwrap().write_all(bytes)?;
                child.wait_with_output()
            })
            .expect("base64");
        format!(
            "data:{kind};base64,{}",
            String::from_utf8_lossy(&encoded.stdout)
        )
    };
    // What is not the image it names is refused, naming the field.
    for logo in [
        data("image/png", b"<html><script>alert(1)</script></html>"),
        data("image/svg+xml", b"<html><script>alert(1)</script></html>"),
        data("text/html", b"<svg/>"),
        data("image/png", &vec![0x89; 70 * 1024]),
    ] {
        let (status, body) = central
            .admin(
                Method::POST,
                "/api/v1/status-pages",
                Some(json!({"slug": "acme", "title": "Acme", "logo": logo})),
            )
            .await?;
        assert!(matches!(status, 400 | 422), "{status}: {body}");
        assert!(body["message"].as_str().unwrap().contains("logo"), "{body}");
    }
    let (status, page) = central
        .admin(
            Method::POST,
            "/api/v1/status-pages",
            Some(json!({"slug": "acme", "title": "Acme", "logo": data("image/png", png)})),
        )
        .await?;
    assert_eq!(status, 201, "{page}");
    assert_eq!(page["logo"], data("image/png", png), "read back as given");
    let html = get(&format!("{}/status/acme", central.url))
        .await?
        .text()
        .await?;
    let src = html
        .split("<img class=\"logo\" src=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no logo on the page: {html}"))
        .replace("&amp;", "&");
    assert!(src.starts_with("/status/acme/logo?v="), "{src}");
    let logo = get(&format!("{}{src}", central.url)).await?;
    assert_eq!(logo.status(), 200);
    let header = |name: &str| {
        logo.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(header("content-type"), "image/png");
    assert_eq!(header("x-content-type-options"), "nosniff");
    assert!(
        header("content-security-policy").contains("sandbox"),
        "{}",
        header("content-security-policy")
    );
    let etag = header("etag");
    assert_eq!(logo.bytes().await?.as_ref(), png);
    let again = reqwest::Client::new()
        .get(format!("{}/status/acme/logo", central.url))
        .header(IF_NONE_MATCH, &etag)
        .send()
        .await?;
    assert_eq!(again.status(), 304);

    // Removed: gone from the page (within its 5 s) and from its address.
    let (status, _) = central
        .admin(
            Method::PATCH,
            &format!("/api/v1/status-pages/{}", page["id"].as_str().unwrap()),
            Some(json!({"logo": null})),
        )
        .await?;
    assert_eq!(status, 200);
    eventually(Duration::from_secs(10), "the logo gone", || async {
        let html = get(&format!("{}/status/acme", central.url))
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        (!html.contains("class=\"logo\"")).then_some(())
    })
    .await?;
    let gone = get(&format!("{}/status/acme/logo", central.url)).await?;
    assert_eq!(gone.status(), 404);
    Ok(())
}
