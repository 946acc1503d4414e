//! A real headless Chromium for the web page's tests, driven over WebDriver (Debian's
//! `chromium` and `chromium-driver`, which `.ci/run` installs) through fantoccini. Each browser
//! gets its own chromedriver on a free port and a fresh profile; both go when it is dropped,
//! with every Chromium process the driver started (they share its process group).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use fantoccini::{Client, ClientBuilder, Locator};
use tokio::process::{Child, Command};

pub struct Browser {
    pub client: Client,
    _driver: DriverGroup,
    _profile: tempfile::TempDir,
    screenshots: PathBuf,
}

/// Where screenshots go: `target/web-screenshots/<test>/`, kept as CI artifacts.
fn screenshot_dir(test: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/web-screenshots")
        .join(test)
}

/// A started chromedriver, in a process group of its own which the browsers it starts join.
/// Dropping this kills the whole group, so no Chromium process outlives its test, nor a
/// `Browser::start` that fails after the driver started (killing the driver alone left every
/// Chromium process running: about 150 after a CI run, taking memory and CPU from what ran next).
struct DriverGroup(Child);

impl Drop for DriverGroup {
    // Ctrl-C in a terminal no longer reaches this group; normal ends and unwinding kill it here.
    fn drop(&mut self) {
        if let Some(pid) = self.0.id() {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .stderr(Stdio::null())
                .status();
        }
    }
}

impl Browser {
    pub async fn start(test: &str) -> anyhow::Result<Browser> {
        Self::start_with(test, &[]).await
    }

    /// A browser whose pages prefer a dark colour scheme (`prefers-color-scheme: dark`), as a
    /// reader's system set to dark does.
    pub async fn start_dark(test: &str) -> anyhow::Result<Browser> {
        Self::start_with(
            test,
            &[
                "--force-dark-mode",
                "--blink-settings=preferredColorScheme=0",
            ],
        )
        .await
    }

    /// `start` with more of Chromium's switches.
    pub async fn start_with(test: &str, switches: &[&str]) -> anyhow::Result<Browser> {
        for program in ["/usr/bin/chromium", "/usr/bin/chromedriver"] {
            anyhow::ensure!(
                Path::new(program).exists(),
                "{program} is missing: install Debian's chromium and chromium-driver (as .ci/run does)"
            );
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let driver = Command::new("/usr/bin/chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .context("starting chromedriver")?;
        // From here on, any way out of this function kills the driver and its browsers.
        let driver = DriverGroup(driver);
        let profile = tempfile::tempdir()?;
        let mut args: Vec<String> = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--window-size=1280,900",
        ]
        .into_iter()
        .chain(switches.iter().copied())
        .map(str::to_string)
        .collect();
        args.push(format!("--user-data-dir={}", profile.path().display()));
        let capabilities = serde_json::json!({
            "goog:chromeOptions": {"binary": "/usr/bin/chromium", "args": args}
        });
        let capabilities = match capabilities {
            serde_json::Value::Object(map) => map,
            _ => unreachable!(),
        };
        let _ = rustls::crypto::ring::default_provider().install_default();
        let url = format!("http://127.0.0.1:{port}");
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let client = loop {
            match ClientBuilder::rustls()?
                .capabilities(capabilities.clone())
                .connect(&url)
                .await
            {
                Ok(client) => break client,
                // chromedriver takes a moment to listen.
                Err(_) if std::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => anyhow::bail!("chromedriver did not start a browser: {e}"),
            }
        };
        let screenshots = screenshot_dir(test);
        std::fs::create_dir_all(&screenshots)?;
        Ok(Browser {
            client,
            _driver: driver,
            _profile: profile,
            screenshots,
        })
    }

    pub async fn goto(&self, url: &str) -> anyhow::Result<()> {
        Ok(self.client.goto(url).await?)
    }

    pub async fn fill(&self, css: &str, text: &str) -> anyhow::Result<()> {
        let field = self.client.find(Locator::Css(css)).await?;
        field.clear().await?;
        field.send_keys(text).await?;
        Ok(())
    }

    pub async fn click(&self, css: &str) -> anyhow::Result<()> {
        self.client.find(Locator::Css(css)).await?.click().await?;
        Ok(())
    }

    /// Picks an option of a `<select>` by its value.
    pub async fn choose(&self, css: &str, value: &str) -> anyhow::Result<()> {
        self.client
            .find(Locator::Css(css))
            .await?
            .select_by_value(value)
            .await?;
        Ok(())
    }

    /// Whether the first element `css` finds is shown (present, and not hidden by the style
    /// sheet); `false` when there is none.
    pub async fn is_shown(&self, css: &str) -> anyhow::Result<bool> {
        match self.client.find(Locator::Css(css)).await {
            Ok(element) => Ok(element.is_displayed().await?),
            Err(e) if e.is_no_such_element() => Ok(false),
            Err(other) => Err(other.into()),
        }
    }

    pub async fn text(&self, css: &str) -> anyhow::Result<String> {
        Ok(self.client.find(Locator::Css(css)).await?.text().await?)
    }

    pub async fn current_path(&self) -> anyhow::Result<String> {
        Ok(self.client.current_url().await?.path().to_string())
    }

    /// Waits until the page's path is `wanted` (a submitted form navigates on its own time).
    pub async fn wait_for_path(&self, wanted: impl Fn(&str) -> bool) -> anyhow::Result<String> {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let path = self.current_path().await?;
            if wanted(&path) {
                return Ok(path);
            }
            anyhow::ensure!(
                std::time::Instant::now() < deadline,
                "the page stayed at {path}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until the element's text contains `wanted` (the page updates itself, or is
    /// reloaded by `reload` between looks).
    pub async fn wait_for_text(
        &self,
        css: &str,
        wanted: &str,
        timeout: Duration,
        reload: bool,
    ) -> anyhow::Result<String> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let seen = self.text(css).await.unwrap_or_default();
            if seen.contains(wanted) {
                return Ok(seen);
            }
            anyhow::ensure!(
                std::time::Instant::now() < deadline,
                "`{css}` never said `{wanted}` within {timeout:?}; last: `{seen}`"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
            if reload {
                self.client.refresh().await?;
            }
        }
    }

    /// Resizes the window, e.g. to a phone's 390 × 844.
    pub async fn resize(&self, width: u32, height: u32) -> anyhow::Result<()> {
        Ok(self.client.set_window_size(width, height).await?)
    }

    /// What `accessibility.js` finds wrong with the page as shown (empty: nothing).
    pub async fn accessibility_problems(&self) -> anyhow::Result<Vec<String>> {
        let found = self
            .client
            .execute(include_str!("accessibility.js"), vec![])
            .await?;
        Ok(serde_json::from_value(found)?)
    }

    /// What axe-core (from npm, `tests/axe`, which `scripts/test.sh` installs) finds on the
    /// page as shown, of impact `serious` or `critical`, as sentences (empty: nothing).
    pub async fn axe_problems(&self) -> anyhow::Result<Vec<String>> {
        let axe =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("axe/node_modules/axe-core/axe.min.js");
        let source = std::fs::read_to_string(&axe).with_context(|| {
            format!(
                "{}: run `npm ci --prefix tests/axe` (scripts/test.sh does)",
                axe.display()
            )
        })?;
        self.client.execute(&source, vec![]).await?;
        let found = self
            .client
            .execute_async(
                "const done = arguments[arguments.length - 1];\n\
                 axe.run(document, {resultTypes: ['violations']}).then((r) => done(\n\
                   r.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')\n\
                     .map((v) => v.id + ' (' + v.impact + '): ' + v.help + ' at ' +\n\
                       v.nodes.map((n) => n.target.join(' ')).join(', '))),\n\
                   (e) => done(['axe failed: ' + e]));",
                vec![],
            )
            .await?;
        Ok(serde_json::from_value(found)?)
    }

    /// Presses Tab and tells what has the focus then (its text or label).
    pub async fn tab(&self) -> anyhow::Result<String> {
        use fantoccini::actions::{InputSource, KeyAction, KeyActions};
        use fantoccini::key::Key;
        let press = KeyActions::new("keyboard".into())
            .then(KeyAction::Down {
                value: Key::Tab.into(),
            })
            .then(KeyAction::Up {
                value: Key::Tab.into(),
            });
        self.client.perform_actions(press).await?;
        let focused = self
            .client
            .execute(
                "const el = document.activeElement; \
                 return (el.getAttribute('aria-label') || el.textContent || el.value || '').trim();",
                vec![],
            )
            .await?;
        Ok(focused.as_str().unwrap_or_default().to_string())
    }

    /// Saves a PNG of the page as `<name>.png` among the test's screenshots.
    pub async fn screenshot(&self, name: &str) -> anyhow::Result<PathBuf> {
        let png = self.client.screenshot().await?;
        let path = self.screenshots.join(format!("{name}.png"));
        std::fs::write(&path, png)?;
        Ok(path)
    }
}
