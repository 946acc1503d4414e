//! A real OpenID provider for the single sign-on tests: the certified `oidc-provider` from npm,
//! run with node by `tests/oidc/provider.mjs` (`npm ci --prefix tests/oidc` installs it, as
//! `.ci/run` does). Any login name signs in; names with `admin` or `editor` in them carry the
//! groups `ops-admins` or `ops-editors`. Also a driver that signs in over plain HTTP the way a
//! browser would, for tests that tamper with what comes back.

use std::path::Path;
use std::process::Stdio;

use anyhow::Context;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

pub const CLIENT_ID: &str = "central";
pub const CLIENT_SECRET: &str = "central-oidc-secret-5e2a91c7";

pub struct OidcProvider {
    /// The issuer, `http://127.0.0.1:<port>`.
    pub issuer: String,
    port: u16,
    redirect: String,
    child: Option<Child>,
}

/// A free port on 127.0.0.1 now (the provider and central must know each other's address
/// before either starts).
pub fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

impl OidcProvider {
    /// Starts the provider on `port` with central's client, whose redirect URI is `redirect`.
    pub async fn start(port: u16, redirect: &str) -> anyhow::Result<OidcProvider> {
        let mut provider = OidcProvider {
            issuer: format!("http://127.0.0.1:{port}"),
            port,
            redirect: redirect.to_string(),
            child: None,
        };
        provider.spawn().await?;
        Ok(provider)
    }

    async fn spawn(&mut self) -> anyhow::Result<()> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("oidc");
        anyhow::ensure!(
            dir.join("node_modules/oidc-provider").exists(),
            "the test OpenID provider is not installed: run `npm ci --prefix tests/oidc` (as .ci/run does)"
        );
        let mut child = Command::new("node")
            .arg(dir.join("provider.mjs"))
            .env("PORT", self.port.to_string())
            .env("CLIENT_ID", CLIENT_ID)
            .env("CLIENT_SECRET", CLIENT_SECRET)
            .env("REDIRECT_URI", &self.redirect)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("starting node tests/oidc/provider.mjs")?;
        let stdout = child.stdout.take().context("the provider's stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let line = tokio::time::timeout(std::time::Duration::from_secs(30), lines.next_line())
            .await
            .context("the provider did not start within 30 s")??
            .context("the provider stopped before listening")?;
        anyhow::ensure!(
            line == format!("listening {}", self.issuer),
            "unexpected first line from the provider: {line}"
        );
        self.child = Some(child);
        Ok(())
    }

    /// Starts the provider again on the same address, with a new signing key (a new `kid`)
    /// and nothing remembered: a key rotation, as a relying party sees it.
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill().await;
            let _ = child.wait().await;
        }
        self.spawn().await
    }

    /// Takes `login` out of every group from now on, as removing a person at the provider.
    pub async fn remove(&self, login: &str) -> anyhow::Result<()> {
        let answer = reqwest::Client::new()
            .post(format!("{}/__test/remove", self.issuer))
            .query(&[("login", login)])
            .send()
            .await?;
        anyhow::ensure!(answer.status() == 204, "remove: {}", answer.status());
        Ok(())
    }

    /// Makes the next ID token the provider issues carry another audience (`intruder`),
    /// signed with its real key.
    pub async fn tamper_next_audience(&self) -> anyhow::Result<()> {
        let answer = reqwest::Client::new()
            .post(format!("{}/__test/tamper-audience", self.issuer))
            .send()
            .await?;
        anyhow::ensure!(
            answer.status() == 204,
            "the tamper switch: {}",
            answer.status()
        );
        Ok(())
    }
}

/// A browser-like HTTP client (cookies kept in the jar returned, redirects followed by hand).
pub fn browser_like() -> anyhow::Result<(reqwest::Client, std::sync::Arc<reqwest::cookie::Jar>)> {
    let jar = std::sync::Arc::new(reqwest::cookie::Jar::default());
    let client = reqwest::Client::builder()
        .cookie_provider(jar.clone())
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    Ok((client, jar))
}

fn location(answer: &reqwest::Response, base: &str) -> anyhow::Result<String> {
    let location = answer
        .headers()
        .get(reqwest::header::LOCATION)
        .context("a redirect without Location")?
        .to_str()?;
    Ok(reqwest::Url::parse(base)?.join(location)?.to_string())
}

/// Signs `login` in at the provider from central's `/login/sso`, as a browser would, and
/// returns the URL the provider sends the browser back to (central's callback, with `code`
/// and `state`), without following it.
pub async fn sign_in_at_provider(
    http: &reqwest::Client,
    central_url: &str,
    login: &str,
) -> anyhow::Result<String> {
    let mut url = format!("{central_url}/login/sso");
    for _ in 0..20 {
        if url.starts_with(central_url) && url.contains("/login/sso/callback") {
            return Ok(url);
        }
        let answer = http.get(&url).send().await?;
        if answer.status().is_redirection() {
            url = location(&answer, &url)?;
            continue;
        }
        anyhow::ensure!(answer.status() == 200, "{url}: {}", answer.status());
        let page = answer.text().await?;
        // The provider's interaction pages post back to where they are.
        let form: Vec<(&str, &str)> = if page.contains("value=\"login\"") {
            vec![("prompt", "login"), ("login", login), ("password", "any")]
        } else if page.contains("value=\"consent\"") {
            vec![("prompt", "consent")]
        } else {
            anyhow::bail!("an unexpected page at {url}: {page}");
        };
        let answer = http.post(&url).form(&form).send().await?;
        anyhow::ensure!(
            answer.status().is_redirection(),
            "{url}: {}",
            answer.status()
        );
        url = location(&answer, &url)?;
    }
    anyhow::bail!("no way back to central after 20 steps")
}
