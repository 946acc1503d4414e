//! The operators' web page in a real headless Chromium, against the real central and agent:
//! log in, make a registration token on the page and start an agent with it, rename, disable
//! and enable the poller, rotate and revoke the token, add a webhook channel and test it, create
//! a monitor that notifies it through the form (bad values refused beside their fields), watch
//! it turn `up` and then `down` without reloading and the delivery land in the log, edit it,
//! pause it, delete it and the poller, log out. Every page is checked for accessibility problems
//! (labels, names, contrast, focus order) on a desktop window and again on a phone's, where
//! nothing may scroll sideways. Screenshots land in `target/web-screenshots/`.

use std::time::Duration;

use e2e::browser::Browser;
use e2e::{eventually, Agent, Central, Target, ADMIN_TOKEN};

/// Fails with what `accessibility.js` found on the page as shown.
async fn assert_accessible(browser: &Browser, page: &str) -> anyhow::Result<()> {
    let problems = browser.accessibility_problems().await?;
    anyhow::ensure!(problems.is_empty(), "{page}: {problems:#?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_runs_a_monitor_from_the_page() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let target = Target::start().await?;
    let browser = Browser::start("operator_tour").await?;
    let page = |path: &str| format!("{}{path}", central.url);

    // Without a session every page leads to the login form; a wrong token is refused there.
    browser.goto(&page("/")).await?;
    assert_eq!(browser.current_path().await?, "/login");
    assert_accessible(&browser, "login").await?;
    browser.fill("#token", "not-the-admin-token").await?;
    browser.click("form button[type=submit]").await?;
    browser
        .wait_for_text(
            "#token-error",
            "not the admin token",
            Duration::from_secs(10),
            false,
        )
        .await?;
    browser.fill("#token", ADMIN_TOKEN).await?;
    browser.click("form button[type=submit]").await?;
    browser.wait_for_path(|p| p == "/").await?;
    browser.screenshot("01-empty-monitors").await?;
    assert_accessible(&browser, "empty monitors").await?;
    // A keyboard user's first Tab offers to skip the navigation.
    assert_eq!(browser.tab().await?, "Skip to content");

    // A registration token made on the page, secret shown once with its docker run line.
    browser.goto(&page("/tokens")).await?;
    browser.fill("#token-name", "web-tour").await?;
    browser.fill("#token-region", "eu").await?;
    browser.click(".token-form button[type=submit]").await?;
    let secret = browser
        .wait_for_text("#secret", "preg_", Duration::from_secs(10), false)
        .await?;
    assert!(secret.starts_with("preg_"), "{secret}");
    let command = browser.text("#docker-run").await?;
    assert!(
        command.contains(&format!("POLLER_REGISTRATION_TOKEN={secret}")),
        "{command}"
    );
    assert!(
        command.contains(&format!("POLLER_CENTRAL_URL={}", central.url)),
        "{command}"
    );
    browser.screenshot("02-token-created").await?;
    assert_accessible(&browser, "token created").await?;
    let _agent = Agent::start_with(
        &central.url,
        Some(secret.clone()),
        &central.dir.path().join("agent"),
        &[("POLLER_NAME", "web-agent")],
    )
    .await?;
    browser.goto(&page("/pollers")).await?;
    browser
        .wait_for_text("#poller-rows", "web-agent", Duration::from_secs(30), true)
        .await?;
    browser
        .wait_for_text("#poller-rows", "online", Duration::from_secs(30), true)
        .await?;
    let row = browser.text("#poller-rows").await?;
    assert!(row.contains("eu"), "the token's region: {row}");
    browser.screenshot("03-pollers").await?;
    assert_accessible(&browser, "pollers").await?;

    // Renamed, disabled and enabled again from its row.
    browser
        .fill("#poller-rows input[name=alias]", "edge-one")
        .await?;
    // Slow typing: the rows refresh every 5 s, but not under a field being typed in.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let typed = browser
        .client
        .find(fantoccini::Locator::Css("#poller-rows input[name=alias]"))
        .await?
        .prop("value")
        .await?;
    assert_eq!(typed.as_deref(), Some("edge-one"));
    browser.click("#poller-rows button[value=rename]").await?;
    browser
        .wait_for_text("#poller-rows", "edge-one", Duration::from_secs(10), false)
        .await?;
    browser.click("#poller-rows button[value=disable]").await?;
    browser
        .wait_for_text(
            "#poller-rows button[value=enable]",
            "Enable",
            Duration::from_secs(10),
            false,
        )
        .await?;
    assert!(browser.text("#poller-rows").await?.contains("disabled"));
    browser.click("#poller-rows button[value=enable]").await?;
    browser
        .wait_for_text(
            "#poller-rows button[value=disable]",
            "Disable",
            Duration::from_secs(10),
            false,
        )
        .await?;

    // The used token rotated (a new secret, shown once), then revoked.
    browser.goto(&page("/tokens")).await?;
    browser.click("form[action$='/rotate'] button").await?;
    let rotated = browser
        .wait_for_text("#secret", "preg_", Duration::from_secs(10), false)
        .await?;
    assert_ne!(rotated, secret, "rotation makes a new secret");
    browser.goto(&page("/tokens")).await?;
    browser.click("form[action$='/revoke'] button").await?;
    browser
        .wait_for_text("table", "revoked", Duration::from_secs(10), false)
        .await?;
    assert_accessible(&browser, "tokens").await?;

    // A webhook channel added on the page (an email one without a sender is refused beside the
    // field), then tested from its row.
    let hook = Target::start().await?;
    browser.goto(&page("/notifications")).await?;
    browser
        .click("a[href='/notifications/channels/new']")
        .await?;
    browser
        .wait_for_path(|p| p == "/notifications/channels/new")
        .await?;
    browser.fill("#name", "web hook").await?;
    browser.choose("#kind", "email").await?;
    browser.fill("#url", "smtp://127.0.0.1:2525").await?;
    browser.fill("#to", "ops@example.com").await?;
    browser.click(".channel-form button[type=submit]").await?;
    browser
        .wait_for_text("#from-error", "sender", Duration::from_secs(10), false)
        .await?;
    assert_accessible(&browser, "channel form with an error").await?;
    browser.choose("#kind", "webhook").await?;
    browser
        .fill("#url", &format!("{}?channel=web", hook.url))
        .await?;
    browser.click(".channel-form button[type=submit]").await?;
    browser.wait_for_path(|p| p == "/notifications").await?;
    browser.click("form[action$='/test'] button").await?;
    browser
        .wait_for_text(
            ".notice",
            "A test message reached web hook",
            Duration::from_secs(20),
            false,
        )
        .await?;
    assert!(
        hook.first_hit("channel=web").is_some(),
        "the hook was called"
    );
    assert_accessible(&browser, "notifications").await?;

    // Bad values come back beside their fields, the rest of the form as typed: one the form
    // cannot read, then one the service refuses.
    browser.goto(&page("/monitors/new")).await?;
    assert_accessible(&browser, "new monitor").await?;
    browser.fill("#name", "web tour target").await?;
    browser.fill("#target", &target.url).await?;
    browser.fill("#interval_ms", "1000").await?;
    browser.fill("#http-expected_status", "200, ok").await?;
    browser.click(".monitor-form button[type=submit]").await?;
    browser
        .wait_for_text(
            "#http-expected_status-error",
            "not a status code",
            Duration::from_secs(10),
            false,
        )
        .await?;
    browser.fill("#http-expected_status", "200").await?;
    browser.click(".monitor-form button[type=submit]").await?;
    browser
        .wait_for_text(
            "#interval_ms-error",
            "interval_ms",
            Duration::from_secs(10),
            false,
        )
        .await?;
    assert_accessible(&browser, "form with an error").await?;
    let kept = browser
        .client
        .find(fantoccini::Locator::Css("#target"))
        .await?
        .prop("value")
        .await?;
    assert_eq!(kept.as_deref(), Some(target.url.as_str()));
    browser.screenshot("04-form-error").await?;

    // Fixed, it is tested once before saving: the agent runs it and the form comes back as
    // typed with the result, nothing saved.
    browser.fill("#interval_ms", "5000").await?;
    browser.click(".monitor-form button[value=test]").await?;
    let tested = browser
        .wait_for_text(".command-outcome", "done", Duration::from_secs(30), false)
        .await?;
    assert!(tested.contains("up"), "{tested}");
    assert_accessible(&browser, "form after a test").await?;
    let (_, listed) = central
        .admin(reqwest::Method::GET, "/api/v1/monitors", None)
        .await?;
    assert_eq!(
        listed["items"],
        serde_json::json!([]),
        "a test saves nothing"
    );

    // Told to notify the hook, it is created; the monitor page turns up, then down, by
    // itself (htmx).
    browser
        .click("input[name=notification_channel_ids]")
        .await?;
    browser.click(".monitor-form button[type=submit]").await?;
    let path = browser
        .wait_for_path(|p| p.starts_with("/monitors/") && p != "/monitors/new" && p != "/monitors")
        .await?;
    browser
        .wait_for_text("#live .facts dd", "up", Duration::from_secs(60), false)
        .await?;
    browser.screenshot("05-monitor-up").await?;
    assert_accessible(&browser, "monitor").await?;

    // Its settings come back in their fields on the edit form; a rename saves.
    browser.goto(&format!("{}{path}/edit", central.url)).await?;
    let expected_status = browser
        .client
        .find(fantoccini::Locator::Css("#http-expected_status"))
        .await?
        .prop("value")
        .await?;
    assert_eq!(expected_status.as_deref(), Some("200"));
    assert_accessible(&browser, "edit monitor").await?;
    browser.fill("#name", "web tour target, edited").await?;
    browser.fill("#tags", "team:web, env:tour").await?;
    browser.click(".monitor-form button[type=submit]").await?;
    browser.wait_for_path(|p| p == path).await?;
    // The monitor's page, not the form again with an error ("Edit …").
    browser
        .wait_for_text("#live", "Status", Duration::from_secs(10), false)
        .await?;
    assert_eq!(browser.text("h1").await?, "web tour target, edited");
    // Checked now from its page: the page it returns to says what came of it.
    browser.click("form[action$='/check'] button").await?;
    let checked = browser
        .wait_for_text(".command-outcome", "done", Duration::from_secs(30), false)
        .await?;
    assert!(
        checked.contains("up") && checked.contains("checked now"),
        "{checked}"
    );
    assert_accessible(&browser, "monitor after a check").await?;
    target.answer_with(500);
    browser
        .wait_for_text("#live .facts dd", "down", Duration::from_secs(90), false)
        .await?;
    browser.screenshot("06-monitor-down").await?;
    // A monitor that gives up quickly on the failing target: its breaker opens and it is
    // dead-lettered while the tour goes on (its page is read below).
    let engine_id = central
        .create_monitor(serde_json::json!({"name": "engine tour", "kind": "http",
            "target": target.url, "interval_ms": 5000,
            "settings": {"retries": 0, "dead_letter_after": 3, "breaker_threshold": 3,
                "breaker_cooldown_ms": 600000}}))
        .await?;

    // The list shows it down, with its heartbeat bar.
    browser.goto(&page("/")).await?;
    let rows = browser.text("#monitor-rows").await?;
    assert!(
        rows.contains("web tour target, edited") && rows.contains("down"),
        "{rows}"
    );
    browser.screenshot("07-monitors").await?;
    assert_accessible(&browser, "monitors").await?;

    // A tag links to the list of its monitors, where they all pause and resume at once.
    browser
        .click("#monitor-rows a.tag[href='/?tag=team%3Aweb']")
        .await?;
    browser
        .wait_for_text(
            "form[action='/monitors/tagged']",
            "Every monitor tagged team:web",
            Duration::from_secs(10),
            false,
        )
        .await?;
    let tagged = browser.text("#monitor-rows").await?;
    assert!(
        tagged.contains("web tour target, edited") && !tagged.contains("engine tour"),
        "{tagged}"
    );
    assert_accessible(&browser, "monitors of a tag").await?;
    browser
        .click("form[action='/monitors/tagged'] button[value=pause]")
        .await?;
    browser
        .wait_for_text("#monitor-rows", "paused", Duration::from_secs(10), true)
        .await?;
    browser
        .click("form[action='/monitors/tagged'] button[value=resume]")
        .await?;
    let tour_id = path.trim_start_matches("/monitors/");
    eventually(Duration::from_secs(10), "resumed by tag", || async {
        let (_, view) = central
            .admin(
                reqwest::Method::GET,
                &format!("/api/v1/monitors/{tour_id}"),
                None,
            )
            .await
            .ok()?;
        (view["paused"] == false && view["tags"] == serde_json::json!(["team:web", "env:tour"]))
            .then_some(())
    })
    .await?;

    // The hook heard of it, and the delivery log says so.
    browser.goto(&page("/notifications")).await?;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let log = browser.text("main").await?;
        if log
            .lines()
            .any(|row| row.contains("monitor.down") && row.contains("delivered"))
        {
            break;
        }
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "no delivered monitor.down in the log: {log}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
        browser.client.refresh().await?;
    }

    // An edit form opened before a pause made elsewhere does not undo the pause: the page
    // says the monitor changed and saves nothing; the API answers such an edit 409.
    let monitor_id = path.trim_start_matches("/monitors/").to_string();
    let api_path = format!("/api/v1/monitors/{monitor_id}");
    browser.goto(&format!("{}{path}/edit", central.url)).await?;
    let (_, before) = central.admin(reqwest::Method::GET, &api_path, None).await?;
    let (code, _) = central
        .admin(
            reqwest::Method::PATCH,
            &api_path,
            Some(serde_json::json!({"paused": true})),
        )
        .await?;
    assert_eq!(code, 200);
    browser.fill("#name", "renamed on a stale form").await?;
    browser.click(".monitor-form button[type=submit]").await?;
    // The answer is a new page: wait for it rather than read the old one.
    let refusal = browser
        .client
        .wait()
        .at_most(Duration::from_secs(10))
        .for_element(fantoccini::Locator::Css(".form-error"))
        .await?
        .text()
        .await?;
    assert!(
        refusal.contains("was changed since this form was opened"),
        "{refusal}"
    );
    browser.screenshot("08-edit-conflict").await?;
    let (_, after) = central.admin(reqwest::Method::GET, &api_path, None).await?;
    assert_eq!(after["paused"], true, "{after}");
    assert_eq!(after["name"], "web tour target, edited", "{after}");
    let stale = before["revision"].as_u64().expect("a revision");
    assert!(after["revision"].as_u64().unwrap() > stale, "{after}");
    let answer = reqwest::Client::new()
        .patch(format!("{}{api_path}", central.url))
        .bearer_auth(ADMIN_TOKEN)
        .header("If-Match", format!("\"{stale}\""))
        .json(&serde_json::json!({"paused": false}))
        .send()
        .await?;
    assert_eq!(answer.status(), 409);
    let body: serde_json::Value = answer.json().await?;
    assert_eq!(body["error"], "conflict", "{body}");
    let fresh = after["revision"].as_u64().unwrap();
    let answer = reqwest::Client::new()
        .patch(format!("{}{api_path}", central.url))
        .bearer_auth(ADMIN_TOKEN)
        .header("If-Match", fresh.to_string())
        .json(&serde_json::json!({"paused": false}))
        .send()
        .await?;
    assert_eq!(answer.status(), 200, "the current revision is accepted");

    // On a phone: every page reads without sideways scrolling, and stays accessible.
    browser.resize(390, 844).await?;
    let width = browser
        .client
        .execute("return window.innerWidth;", vec![])
        .await?;
    assert!(
        width.as_u64().is_some_and(|w| w <= 400),
        "a phone-sized window, not {width}"
    );
    for (name, at) in [
        ("phone-monitors", "/".to_string()),
        ("phone-monitor", path.clone()),
        ("phone-edit", format!("{path}/edit")),
        ("phone-pollers", "/pollers".to_string()),
        ("phone-tokens", "/tokens".to_string()),
        ("phone-notifications", "/notifications".to_string()),
        ("phone-dependencies", "/dependencies".to_string()),
        ("phone-maintenance", "/maintenance".to_string()),
    ] {
        browser.goto(&page(&at)).await?;
        browser.screenshot(name).await?;
        assert_accessible(&browser, name).await?;
    }
    browser.resize(1280, 900).await?;

    // Dependencies: an alias made on the page is listed, and a refused one says why.
    browser.goto(&page("/dependencies")).await?;
    browser
        .fill("form.alias-form input[name=alias]", "pg-main")
        .await?;
    browser
        .fill("form.alias-form input[name=canonical]", "postgres")
        .await?;
    browser.click("form.alias-form button[type=submit]").await?;
    browser
        .wait_for_text(
            "table[aria-label=Aliases]",
            "pg-main",
            Duration::from_secs(10),
            false,
        )
        .await?;
    browser
        .fill("form.alias-form input[name=alias]", "db")
        .await?;
    browser
        .fill("form.alias-form input[name=canonical]", "pg-main")
        .await?;
    browser.click("form.alias-form button[type=submit]").await?;
    browser
        .wait_for_text(
            ".form-error",
            "is itself an alias",
            Duration::from_secs(10),
            false,
        )
        .await?;
    browser.screenshot("10-dependencies").await?;
    assert_accessible(&browser, "dependencies").await?;

    // Engine health: the page says the breaker is open and the monitor dead-lettered, and
    // offers to release it; released, it runs at once and is up again.
    browser
        .goto(&page(&format!("/monitors/{engine_id}")))
        .await?;
    let notes = browser
        .wait_for_text(
            ".engine-notes",
            "dead-lettered",
            Duration::from_secs(90),
            true,
        )
        .await?;
    assert!(notes.contains("breaker open"), "{notes}");
    // What the protections it opted into cost: a recovery seen up to the dead letter's
    // 30-minute recheck late.
    let cost = browser.text(".recovery-late").await?;
    assert!(
        cost.contains("the circuit breaker, dead letters") && cost.contains("up to 30 min late"),
        "{cost}"
    );
    assert_eq!(
        browser.text("form[action$='/reset'] button").await?,
        "Release"
    );
    browser.screenshot("11-dead-lettered").await?;
    assert_accessible(&browser, "a dead-lettered monitor").await?;
    target.answer_with(200);
    browser.click("form[action$='/reset'] button").await?;
    let released = browser
        .wait_for_text(".command-outcome", "done", Duration::from_secs(30), false)
        .await?;
    assert!(released.contains("dead letter"), "{released}");
    browser
        .wait_for_text("#live .facts dd", "up", Duration::from_secs(30), true)
        .await?;
    // Said no more once the next heartbeat carries the released engine.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while browser.text("#live").await?.contains("dead-lettered") {
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "still dead-lettered on the page after a release"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
        browser.client.refresh().await?;
    }

    // Muted from its page for an hour: `maintenance`, and listed on the maintenance page. A
    // daily window made there at 03:00 Berlin time opens at 01:00 UTC once summer time has
    // begun (28 March 2027); a refused one says why. Deleting the mute ends it at once.
    browser.goto(&format!("{}{path}", central.url)).await?;
    browser.choose("#mute-for", "1h").await?;
    browser.click("form[action$='/mute'] button").await?;
    browser
        .wait_for_text(
            "#live .facts dd",
            "maintenance",
            Duration::from_secs(10),
            true,
        )
        .await?;
    browser.goto(&page("/maintenance")).await?;
    let listed = browser.text("table").await?;
    assert!(listed.contains("web tour target, edited muted"), "{listed}");
    browser.fill("#window-name", "nightly").await?;
    browser
        .client
        .execute(
            "document.querySelector('#window-starts').value = '2027-03-28T03:00';",
            vec![],
        )
        .await?;
    browser.fill("#window-zone", "Europe/Berlin").await?;
    browser.fill("#window-rule", "FREQ=DAILY").await?;
    browser.fill("#window-regions", "eu").await?;
    browser.click(".window-form button[type=submit]").await?;
    let rows = browser
        .wait_for_text("table", "nightly", Duration::from_secs(10), false)
        .await?;
    assert!(rows.contains("next 2027-03-28 01:00 UTC"), "{rows}");
    browser.screenshot("12-maintenance").await?;
    assert_accessible(&browser, "maintenance").await?;
    browser.fill("#window-name", "too often").await?;
    browser
        .client
        .execute(
            "document.querySelector('#window-starts').value = '2027-03-28T03:00';",
            vec![],
        )
        .await?;
    browser
        .fill("#window-rule", "FREQ=HOURLY;BYMINUTE=0")
        .await?;
    browser.fill("#window-regions", "eu").await?;
    browser.click(".window-form button[type=submit]").await?;
    browser
        .wait_for_text(
            ".form-error",
            "recurrence.rule",
            Duration::from_secs(10),
            false,
        )
        .await?;
    assert_accessible(&browser, "maintenance form with an error").await?;
    browser.goto(&page("/maintenance")).await?;
    browser.click("form[action$='/delete'] button").await?;
    browser.client.accept_alert().await?;
    browser
        .wait_for_text("table", "nightly", Duration::from_secs(10), false)
        .await?;
    assert!(!browser.text("table").await?.contains("muted"));
    browser.goto(&format!("{}{path}", central.url)).await?;
    browser
        .wait_for_text("#live .facts dd", "up", Duration::from_secs(10), true)
        .await?;

    // A heartbeat monitor made on the page: the page after it shows its ping URL (this once);
    // a ping makes it up, and its page lists the ping.
    browser.goto(&page("/monitors/new")).await?;
    browser.fill("#name", "nightly job").await?;
    browser.choose("#kind", "heartbeat").await?;
    browser.fill("#target", "backup job").await?;
    browser.fill("#interval_ms", "60000").await?;
    browser.fill("#heartbeat-grace_ms", "30000").await?;
    browser.click(".monitor-form button[type=submit]").await?;
    let shown = browser
        .wait_for_text("#ping-url", "/ping/", Duration::from_secs(10), false)
        .await?;
    assert_accessible(&browser, "ping url").await?;
    let token = shown.rsplit("/ping/").next().unwrap_or_default().trim();
    let pinged = reqwest::get(format!("{}/ping/{token}", central.url)).await?;
    assert_eq!(pinged.status(), 200);
    browser.click("#to-monitor").await?;
    browser
        .wait_for_text("#live .facts dd", "up", Duration::from_secs(10), true)
        .await?;
    let pings = browser.text("#pings").await?;
    assert!(
        pings.contains("success") && pings.contains("127.0.0.1"),
        "{pings}"
    );
    assert_accessible(&browser, "heartbeat monitor").await?;

    // Paused from its page.
    browser.goto(&format!("{}{path}", central.url)).await?;
    browser.click("form[action$='/pause'] button").await?;
    browser
        .wait_for_text("#live .facts dd", "paused", Duration::from_secs(10), true)
        .await?;

    // Deleted from its page once confirmed, then its poller from the pollers page (its token
    // stops working; the agent is told at its next call).
    browser.click("form[action$='/delete'] button").await?;
    browser.client.accept_alert().await?;
    browser.wait_for_path(|p| p == "/").await?;
    let rows = browser.text("#monitor-rows").await?;
    assert!(!rows.contains("web tour target"), "{rows}");
    browser.goto(&page("/pollers")).await?;
    browser
        .click("#poller-rows form[action$='/delete'] button")
        .await?;
    browser.client.accept_alert().await?;
    browser
        .wait_for_text(
            "#poller-rows",
            "No pollers yet",
            Duration::from_secs(10),
            false,
        )
        .await?;

    // Logged out, the session is gone: the pages lead to the login form again.
    browser.click("form.logout button").await?;
    browser.wait_for_path(|p| p == "/login").await?;
    browser.goto(&page("/pollers")).await?;
    assert_eq!(browser.current_path().await?, "/login");
    Ok(())
}

/// Every page says what a browser may do with it: only its own scripts, styles and requests,
/// never inside a frame, never sniffed, never stored (a new registration secret and its
/// `docker run` line are on a page); assets keep their long cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_carries_the_browser_security_headers() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let monitor = central
        .create_monitor(serde_json::json!({"name": "m", "kind": "http",
            "target": "http://127.0.0.1:9/"}))
        .await?;
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let cookie = central.session_cookie().await?;
    let pages = [
        "/login".to_string(),
        "/".to_string(),
        "/monitors/new".to_string(),
        format!("/monitors/{monitor}"),
        format!("/monitors/{monitor}/edit"),
        "/pollers".to_string(),
        "/tokens".to_string(),
        "/notifications".to_string(),
        "/notifications/channels/new".to_string(),
        "/maintenance".to_string(),
    ];
    let mut assets = Vec::new();
    for page in &pages {
        let response = http
            .get(format!("{}{page}", central.url))
            .header("cookie", &cookie)
            .send()
            .await?;
        assert_eq!(response.status(), 200, "{page}");
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string()
        };
        let policy = header("content-security-policy");
        for directive in [
            "default-src 'none'",
            "script-src 'self'",
            "frame-ancestors 'none'",
        ] {
            assert!(policy.contains(directive), "{page}: {policy}");
        }
        assert!(
            !policy.contains("unsafe-inline") && !policy.contains("unsafe-eval"),
            "{page}: {policy}"
        );
        assert_eq!(header("x-frame-options"), "DENY", "{page}");
        assert_eq!(header("x-content-type-options"), "nosniff", "{page}");
        assert_eq!(header("referrer-policy"), "no-referrer", "{page}");
        assert_eq!(header("cache-control"), "no-store", "{page}");
        let body = response.text().await?;
        assert!(
            !body.contains(" onsubmit=") && !body.contains(" onclick="),
            "{page}: no inline handlers"
        );
        assets.extend(
            body.split("\"/assets/")
                .skip(1)
                .filter_map(|rest| rest.split('"').next())
                .map(str::to_string),
        );
    }
    assets.sort();
    assets.dedup();
    assert!(!assets.is_empty());
    for asset in assets {
        let response = http
            .get(format!("{}/assets/{asset}", central.url))
            .send()
            .await?;
        let cache = response.headers()["cache-control"].to_str()?.to_string();
        assert!(cache.contains("immutable"), "{asset}: {cache}");
    }
    Ok(())
}

/// Three people in the browser, each with a role: the page offers each exactly what the role
/// allows (a viewer sees no form that would change anything but their own API keys), and what
/// it offers works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_editor_and_viewer_each_get_what_their_role_allows() -> anyhow::Result<()> {
    const PASSWORD: &str = "correct horse battery staple";
    let central = Central::start().await?;
    for (name, role) in [("Ana", "admin"), ("Ed", "editor"), ("Vic", "viewer")] {
        let (status, body) = central
            .admin(
                reqwest::Method::POST,
                "/api/v1/users",
                Some(
                    serde_json::json!({"name": name, "role": role, "password": PASSWORD,
                    "email": format!("{}@example.com", name.to_lowercase())}),
                ),
            )
            .await?;
        anyhow::ensure!(status == 201, "{body}");
    }
    let monitor = central
        .create_monitor(serde_json::json!({"name": "shop", "kind": "http",
            "target": "http://127.0.0.1:9/", "interval_ms": 60000}))
        .await?;
    let page = |path: &str| format!("{}{path}", central.url);
    let browser = Browser::start("roles").await?;
    let log_in = |email: &'static str| {
        let browser = &browser;
        let url = page("/login");
        async move {
            browser.goto(&url).await?;
            browser.fill("#email", email).await?;
            browser.fill("#password", PASSWORD).await?;
            browser.click("form button[type=submit]").await?;
            browser.wait_for_path(|p| p == "/").await?;
            anyhow::Ok(())
        }
    };
    let log_out = || async {
        browser.click("form.logout button").await?;
        browser.wait_for_path(|p| p == "/login").await?;
        anyhow::Ok(())
    };

    // The viewer reads everything, and is offered no change but their own API keys.
    log_in("vic@example.com").await?;
    assert!(browser.text("main").await?.contains("shop"));
    assert!(!browser.is_shown("a[href='/monitors/new']").await?);
    assert!(!browser.is_shown("header a[href='/users']").await?);
    browser.goto(&page(&format!("/monitors/{monitor}"))).await?;
    assert!(
        !browser.is_shown(".actions form").await?,
        "no pause, check or reset"
    );
    assert!(!browser.is_shown(".actions a.button").await?, "no edit");
    browser.screenshot("viewer-monitor").await?;
    assert_accessible(&browser, "a viewer's monitor").await?;
    browser.goto(&page("/api-keys")).await?;
    assert!(
        browser.is_shown("form[action='/api-keys']").await?,
        "their own keys"
    );
    log_out().await?;

    // The editor changes monitors, but users are not theirs.
    log_in("ed@example.com").await?;
    assert!(browser.is_shown("a[href='/monitors/new']").await?);
    assert!(!browser.is_shown("header a[href='/users']").await?);
    browser.goto(&page(&format!("/monitors/{monitor}"))).await?;
    browser
        .click(&format!(
            ".actions form[action='/monitors/{monitor}/pause'] button"
        ))
        .await?;
    browser
        .wait_for_text(".actions", "Resume", Duration::from_secs(10), false)
        .await?;
    log_out().await?;

    // The admin manages users too.
    log_in("ana@example.com").await?;
    assert!(browser.is_shown("header a[href='/users']").await?);
    browser.goto(&page("/users")).await?;
    let users = browser.text("main").await?;
    for name in ["Ana", "Ed", "Vic"] {
        assert!(users.contains(name), "{users}");
    }
    let (_, shown) = central
        .admin(
            reqwest::Method::GET,
            &format!("/api/v1/monitors/{monitor}"),
            None,
        )
        .await?;
    assert_eq!(shown["paused"], true, "the editor's pause took");
    central.stop().await;
    Ok(())
}
