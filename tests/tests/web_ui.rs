//! The operators' web page in a real headless Chromium, against the real central and agent:
//! log in, make a registration token on the page and start an agent with it, create a monitor
//! through the form, watch it turn `up` and then `down` without reloading, pause it, see a bad
//! value refused beside its field, log out. Screenshots land in `target/web-screenshots/`.

use std::time::Duration;

use e2e::browser::Browser;
use e2e::{Agent, Central, Target, ADMIN_TOKEN};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_runs_a_monitor_from_the_page() -> anyhow::Result<()> {
    let central = Central::start().await?;
    let target = Target::start().await?;
    let browser = Browser::start("operator_tour").await?;
    let page = |path: &str| format!("{}{path}", central.url);

    // Without a session every page leads to the login form; a wrong token is refused there.
    browser.goto(&page("/")).await?;
    assert_eq!(browser.current_path().await?, "/login");
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
    let _agent = Agent::start_with(
        &central.url,
        Some(secret),
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

    // A bad value comes back beside its field, the rest of the form as typed.
    browser.goto(&page("/monitors/new")).await?;
    browser.fill("#name", "web tour target").await?;
    browser.fill("#target", &target.url).await?;
    browser.fill("#interval_ms", "1000").await?;
    browser.click(".monitor-form button[type=submit]").await?;
    browser
        .wait_for_text(
            "#interval_ms-error",
            "interval_ms",
            Duration::from_secs(10),
            false,
        )
        .await?;
    let kept = browser
        .client
        .find(fantoccini::Locator::Css("#target"))
        .await?
        .prop("value")
        .await?;
    assert_eq!(kept.as_deref(), Some(target.url.as_str()));
    browser.screenshot("04-form-error").await?;

    // Fixed, it is created; the monitor page turns up, then down, by itself (htmx).
    browser.fill("#interval_ms", "5000").await?;
    browser.click(".monitor-form button[type=submit]").await?;
    let path = browser
        .wait_for_path(|p| p.starts_with("/monitors/") && p != "/monitors/new" && p != "/monitors")
        .await?;
    browser
        .wait_for_text("#live .facts dd", "up", Duration::from_secs(60), false)
        .await?;
    browser.screenshot("05-monitor-up").await?;
    target.answer_with(500);
    browser
        .wait_for_text("#live .facts dd", "down", Duration::from_secs(90), false)
        .await?;
    browser.screenshot("06-monitor-down").await?;

    // The list shows it down, with its heartbeat bar.
    browser.goto(&page("/")).await?;
    let rows = browser.text("#monitor-rows").await?;
    assert!(
        rows.contains("web tour target") && rows.contains("down"),
        "{rows}"
    );
    browser.screenshot("07-monitors").await?;

    // Paused from its page.
    browser.goto(&format!("{}{path}", central.url)).await?;
    browser.click("form[action$='/pause'] button").await?;
    browser
        .wait_for_text("#live .facts dd", "paused", Duration::from_secs(10), true)
        .await?;

    // Logged out, the session is gone: the pages lead to the login form again.
    browser.click("form.logout button").await?;
    browser.wait_for_path(|p| p == "/login").await?;
    browser.goto(&page("/pollers")).await?;
    assert_eq!(browser.current_path().await?, "/login");
    Ok(())
}
