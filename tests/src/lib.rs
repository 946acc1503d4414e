//! Harness for end-to-end tests: builds the real `central` and `poller-agent` binaries once,
//! starts them on port 0 with temporary data directories, and gives tests typed handles.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::{json, Value};
use tokio::process::{Child, Command};

pub mod alertmanager;
pub mod browser;
pub mod dns;
pub mod hostile;
pub mod images;
pub mod load_balancer;
pub mod oidc;
pub mod postgres;
pub mod receivers;
pub mod services;

pub const ADMIN_TOKEN: &str = "e2e-admin-7c1f9a3e5b8d2f4a6c0e91d3";

/// Directory holding the built binaries, built on first use.
fn bin_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        // The test executable lives in target/<profile>/deps/.
        let exe = std::env::current_exe().expect("current exe");
        let dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("target dir")
            .to_path_buf();
        let release = dir.file_name().is_some_and(|n| n == "release");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut build = std::process::Command::new(cargo);
        if release {
            build.args([
                "build",
                "--release",
                "--bins",
                "-p",
                "central",
                "-p",
                "poller-agent",
            ]);
        } else {
            // Built as part of the test build (`--workspace --test e2e`), so that the
            // dependencies' features are the ones the test build resolved (tokio's
            // `test-util` and the like, which dev-dependencies turn on) and every dependency
            // built for the tests serves the binaries too: only their own crates are
            // compiled here. Built alone they had other features, and CI compiled 87 crates
            // a second time (about four minutes).
            build.args(["build", "--workspace", "--bins", "--test", "e2e"]);
        }
        // `cargo test` gives its tests variables (CARGO_PKG_*, …) that some build scripts
        // watch; passing them on would rebuild those crates on every run.
        build.env_clear();
        for key in [
            "PATH",
            "HOME",
            "CARGO_HOME",
            "RUSTUP_HOME",
            "RUSTUP_TOOLCHAIN",
            "CARGO_TARGET_DIR",
            "TMPDIR",
        ] {
            if let Some(value) = std::env::var_os(key) {
                build.env(key, value);
            }
        }
        let status = build.status().expect("running cargo build");
        assert!(status.success(), "building the binaries failed");
        dir
    })
}

/// A process's peak resident memory so far (`VmHWM` from `/proc/<pid>/status`), in bytes;
/// `None` when it is gone or this is not Linux.
pub fn peak_rss_bytes(pid: u32) -> Option<u64> {
    proc_status_kib(pid, "VmHWM:").map(|kib| kib * 1024)
}

/// A process's resident memory now (`VmRSS`), in bytes.
pub fn rss_bytes(pid: u32) -> Option<u64> {
    proc_status_kib(pid, "VmRSS:").map(|kib| kib * 1024)
}

/// The part of a process's resident memory that is its own (`RssAnon`): without the file pages
/// it maps (a memory-mapped database's), which the OS may drop.
pub fn anon_rss_bytes(pid: u32) -> Option<u64> {
    proc_status_kib(pid, "RssAnon:").map(|kib| kib * 1024)
}

fn proc_status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// CPU time a process has used so far (user and system), from `/proc/<pid>/stat`.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i)?.parse::<f64>().ok();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name; Linux
    // counts them in USER_HZ, which is 100 on every architecture it exposes to /proc.
    Some((ticks(11)? + ticks(12)?) / 100.0)
}

/// CPU time every PostgreSQL process on the machine has used so far, with that of its
/// children that ended (user and system, and the children's: a backend whose connection
/// closed, when central restarts, is counted in the postmaster's). For a benchmark whose one
/// PostgreSQL server is its own.
pub fn postgres_cpu_seconds() -> f64 {
    let Ok(processes) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    let mut ticks = 0.0;
    for process in processes.flatten() {
        let Ok(stat) = std::fs::read_to_string(process.path().join("stat")) else {
            continue;
        };
        let Some((name, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        if !name.ends_with("(postgres") {
            continue;
        }
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // utime, stime, cutime and cstime: fields 14 to 17 of the line, 12 to 15 after the name.
        ticks += (11..15)
            .filter_map(|i| fields.get(i)?.parse::<f64>().ok())
            .sum::<f64>();
    }
    ticks / 100.0
}

/// A process's I/O so far, from `/proc/<pid>/io`: system calls and bytes, whatever the file
/// (SQLite's WAL and database, sockets). Only the owner (or root) may read it.
#[derive(Debug, Clone, Copy, Default)]
pub struct IoCounts {
    pub read_calls: u64,
    pub write_calls: u64,
    pub read_bytes: u64,
    pub written_bytes: u64,
}

pub fn io_counts(pid: u32) -> Option<IoCounts> {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = io.lines().find(|l| l.starts_with(name))?;
        line.split_whitespace().nth(1)?.parse().ok()
    };
    Some(IoCounts {
        read_calls: field("syscr:")?,
        write_calls: field("syscw:")?,
        read_bytes: field("rchar:")?,
        written_bytes: field("wchar:")?,
    })
}

/// Path of a built binary of the workspace (built on first use).
pub fn binary(name: &str) -> PathBuf {
    bin_dir().join(name)
}

/// Polls `probe` until it returns `Some`, or fails after `timeout`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut probe: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = probe().await {
            return Ok(value);
        }
        if Instant::now() > deadline {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A fresh database for one central: a SQLite file in `dir`, or with `E2E_DATABASE=postgres` a
/// database on a PostgreSQL server of its own.
async fn database(dir: &tempfile::TempDir) -> anyhow::Result<(String, Option<postgres::Postgres>)> {
    if postgres::suite_uses_postgres() {
        let server = postgres::Postgres::start().await?;
        let url = server.create_database("central").await?;
        return Ok((url, Some(server)));
    }
    let url = format!("sqlite://{}", dir.path().join("central.db").display());
    Ok((url, None))
}

/// A running `central` process. Its data directory (and address) outlive restarts.
pub struct Central {
    pub url: String,
    pub addr: String,
    pub dir: tempfile::TempDir,
    child: Option<Child>,
    env: Vec<(String, String)>,
    /// The `central` executable: this workspace's, or another build (a benchmark's baseline).
    program: PathBuf,
    http: reqwest::Client,
    scheme: &'static str,
    database_url: String,
    /// The server behind `database_url` on the PostgreSQL backend; lives as long as central.
    _postgres: Option<postgres::Postgres>,
}

impl Central {
    pub async fn start() -> anyhow::Result<Central> {
        Self::start_with(&[]).await
    }

    /// Starts central with extra environment variables.
    pub async fn start_with(env: &[(&str, &str)]) -> anyhow::Result<Central> {
        Self::start_program(&binary("central"), env).await
    }

    /// `start_with`, running another build of `central` (a benchmark's baseline).
    pub async fn start_program(program: &Path, env: &[(&str, &str)]) -> anyhow::Result<Central> {
        let dir = tempfile::tempdir()?;
        let (database_url, postgres) = database(&dir).await?;
        let mut central = Self::unstarted(dir, database_url, postgres, env);
        central.program = program.to_path_buf();
        central.spawn().await?;
        Ok(central)
    }

    /// Starts a replica on an existing database (another central's, or a server of the test's).
    pub async fn start_replica(
        database_url: &str,
        env: &[(&str, &str)],
    ) -> anyhow::Result<Central> {
        Self::start_replica_program(&binary("central"), database_url, env).await
    }

    /// `start_replica`, running another build of `central` (an older release).
    pub async fn start_replica_program(
        program: &Path,
        database_url: &str,
        env: &[(&str, &str)],
    ) -> anyhow::Result<Central> {
        let mut central =
            Self::unstarted(tempfile::tempdir()?, database_url.to_string(), None, env);
        central.program = program.to_path_buf();
        central.spawn().await?;
        Ok(central)
    }

    fn unstarted(
        dir: tempfile::TempDir,
        database_url: String,
        postgres: Option<postgres::Postgres>,
        env: &[(&str, &str)],
    ) -> Central {
        Central {
            url: String::new(),
            addr: "127.0.0.1:0".into(),
            dir,
            child: None,
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            program: binary("central"),
            http: reqwest::Client::new(),
            scheme: "http",
            database_url,
            _postgres: postgres,
        }
    }

    /// Starts central serving HTTPS with `cert`/`key`; the test's client trusts `ca_pem`.
    pub async fn start_https(cert: &Path, key: &Path, ca_pem: &[u8]) -> anyhow::Result<Central> {
        Self::start_https_with(cert, key, ca_pem, &[]).await
    }

    /// `start_https` with extra environment variables.
    pub async fn start_https_with(
        cert: &Path,
        key: &Path,
        ca_pem: &[u8],
        env: &[(&str, &str)],
    ) -> anyhow::Result<Central> {
        let ca = reqwest::Certificate::from_pem(ca_pem)?;
        let dir = tempfile::tempdir()?;
        let (database_url, postgres) = database(&dir).await?;
        let mut central = Central {
            url: String::new(),
            addr: "127.0.0.1:0".into(),
            dir,
            child: None,
            env: [
                ("CENTRAL_TLS_CERT".to_string(), cert.display().to_string()),
                ("CENTRAL_TLS_KEY".to_string(), key.display().to_string()),
            ]
            .into_iter()
            .chain(env.iter().map(|(k, v)| (k.to_string(), v.to_string())))
            .collect(),
            program: binary("central"),
            http: reqwest::Client::builder()
                .add_root_certificate(ca)
                .build()?,
            scheme: "https",
            database_url,
            _postgres: postgres,
        };
        central.spawn().await?;
        Ok(central)
    }

    async fn spawn(&mut self) -> anyhow::Result<()> {
        let port_file = self.dir.path().join("port");
        let _ = std::fs::remove_file(&port_file);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("central.log"))?;
        let mut command = Command::new(&self.program);
        command
            .arg("serve")
            .env("CENTRAL_LISTEN", &self.addr)
            .env("CENTRAL_PORT_FILE", &port_file)
            .env("CENTRAL_DATABASE_URL", &self.database_url)
            .env("CENTRAL_ADMIN_TOKEN", ADMIN_TOKEN)
            .env("CENTRAL_NOTIFY_ALLOWED_NETWORKS", "127.0.0.0/8")
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true);
        for (key, value) in &self.env {
            // An empty value takes a default of the harness away.
            if value.is_empty() {
                command.env_remove(key);
            } else {
                command.env(key, value);
            }
        }
        let mut child = command.spawn().context("starting central")?;
        // Until it writes its port file; one that exits first (it refused to start) says so
        // at once rather than after the wait.
        let started = std::time::Instant::now();
        self.addr = loop {
            if let Some(addr) = std::fs::read_to_string(&port_file)
                .ok()
                .filter(|s| !s.is_empty())
            {
                break addr;
            }
            if let Some(status) = child.try_wait()? {
                bail!("central exited ({status}) before it listened");
            }
            if started.elapsed() > Duration::from_secs(30) {
                bail!("timed out after 30s waiting for central's port file");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        self.child = Some(child);
        self.url = format!("{}://{}", self.scheme, self.addr);
        Ok(())
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref()?.id()
    }

    /// The database central runs on (`CENTRAL_DATABASE_URL`).
    pub fn database_url(&self) -> &str {
        &self.database_url
    }

    /// Sets (`Some`) or removes (`None`) an environment variable for later starts.
    pub fn set_env(&mut self, key: &str, value: Option<&str>) {
        self.env.retain(|(k, _)| k != key);
        if let Some(value) = value {
            self.env.push((key.to_string(), value.to_string()));
        }
    }

    /// Kills central (`kill -9`), keeping its database and address for `restart`.
    pub async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill().await;
        }
    }

    /// Runs `program` from the next `restart` on (a benchmark alternating two builds on one
    /// database).
    pub fn set_program(&mut self, program: &Path) {
        self.program = program.to_path_buf();
    }

    /// Starts central again on the same address and database.
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        self.kill().await;
        self.spawn().await
    }

    /// Every stored result id of a monitor.
    pub async fn result_ids(&self, monitor_id: &str) -> anyhow::Result<Vec<String>> {
        self.results(monitor_id)
            .await?
            .iter()
            .map(|r| Ok(r["id"].as_str().context("id")?.to_string()))
            .collect()
    }

    /// Every stored result of a monitor, oldest first, as the settings API gives them.
    pub async fn results(&self, monitor_id: &str) -> anyhow::Result<Vec<Value>> {
        let mut results = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let path = match &cursor {
                Some(c) => format!("/api/v1/monitors/{monitor_id}/results?limit=1000&cursor={c}"),
                None => format!("/api/v1/monitors/{monitor_id}/results?limit=1000"),
            };
            let (status, page) = self.admin(reqwest::Method::GET, &path, None).await?;
            anyhow::ensure!(status == 200, "results: {status} {page}");
            results.extend(page["items"].as_array().context("items")?.iter().cloned());
            match page["next_cursor"].as_str() {
                Some(next) => cursor = Some(next.to_string()),
                None => return Ok(results),
            }
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("central.log")).unwrap_or_default()
    }

    /// The warnings and errors in central's log, for a failure's message: a 500 says only
    /// that something was logged.
    pub fn errors_logged(&self) -> String {
        let log = self.log();
        let errors: Vec<&str> = log
            .lines()
            .filter(|line| line.contains("ERROR") || line.contains("WARN"))
            .collect();
        format!("central logged:\n{}", errors.join("\n"))
    }

    /// Sends a settings-API request with the admin token; returns status and JSON body.
    pub async fn admin(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<(u16, Value)> {
        admin_request(&self.http, &self.url, method, path, body).await
    }

    /// Sends a settings-API request with `bearer` (an API key); returns status and JSON body.
    pub async fn call(
        &self,
        bearer: &str,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<(u16, Value)> {
        api_request(&self.http, &self.url, bearer, method, path, body).await
    }

    /// Logs in to the web page with the admin token; returns the `Cookie` header value of the
    /// session (`central_session=…`).
    pub async fn session_cookie(&self) -> anyhow::Result<String> {
        let login = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .danger_accept_invalid_certs(self.scheme == "https")
            .build()?
            .post(format!("{}/login", self.url))
            .form(&[("token", ADMIN_TOKEN)])
            .send()
            .await?;
        login
            .headers()
            .get(reqwest::header::SET_COOKIE)
            .and_then(|c| c.to_str().ok())
            .and_then(|c| c.split(';').next())
            .map(str::to_string)
            .ok_or_else(|| anyhow::anyhow!("no session cookie: {}", login.status()))
    }

    /// `/metrics` on central's listener, read with the admin token.
    pub async fn metrics(&self) -> anyhow::Result<String> {
        Ok(self
            .http
            .get(format!("{}/metrics", self.url))
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await?
            .error_for_status()?
            .text()
            .await?)
    }

    pub async fn registration_token(&self) -> anyhow::Result<String> {
        let (status, body) = self
            .admin(
                reqwest::Method::POST,
                "/api/v1/registration-tokens",
                Some(json!({"name": "e2e"})),
            )
            .await?;
        anyhow::ensure!(status == 201, "creating a token: {status} {body}");
        Ok(body["token"].as_str().context("token")?.to_string())
    }

    /// Registers a poller through the poller API, as an agent does (for tests that speak the
    /// poller API themselves).
    pub async fn register_poller(&self, name: &str) -> anyhow::Result<RegisteredPoller> {
        let token = self.registration_token().await?;
        let answer: Value = self
            .http
            .post(format!("{}/api/poller/register", self.url))
            .json(&json!({"registration_token": token, "name": name, "capabilities": ["http"], "version": "test"}))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        let field = |name: &str| {
            answer[name]
                .as_str()
                .map(str::to_string)
                .context("registration answer")
        };
        Ok(RegisteredPoller {
            id: field("poller_id")?,
            access: field("access_token")?,
            refresh: field("refresh_token")?,
        })
    }

    /// Starts an agent named `name` in `region`, registered with a fresh token, its data
    /// directory under this central's.
    pub async fn start_agent(&self, name: &str, region: &str) -> anyhow::Result<Agent> {
        let token = self.registration_token().await?;
        Agent::start_with(
            &self.url,
            Some(token),
            &self.dir.path().join(name),
            &[("POLLER_NAME", name), ("POLLER_REGION", region)],
        )
        .await
    }

    pub async fn create_monitor(&self, spec: Value) -> anyhow::Result<String> {
        let (status, body) = self
            .admin(reqwest::Method::POST, "/api/v1/monitors", Some(spec))
            .await?;
        anyhow::ensure!(
            status == 201,
            "creating a monitor: {status} {body}\n{}",
            self.errors_logged()
        );
        Ok(body["id"].as_str().context("id")?.to_string())
    }

    /// Creates a notification channel; its id.
    pub async fn create_channel(&self, spec: Value) -> anyhow::Result<String> {
        let (status, body) = self
            .admin(
                reqwest::Method::POST,
                "/api/v1/notification-channels",
                Some(spec),
            )
            .await?;
        anyhow::ensure!(status == 201, "creating a channel: {status} {body}");
        Ok(body["id"].as_str().context("id")?.to_string())
    }

    /// Sends a test notification through a channel (`POST …/{id}/test`): status and answer.
    pub async fn test_channel(&self, channel_id: &str) -> anyhow::Result<(u16, Value)> {
        self.admin(
            reqwest::Method::POST,
            &format!("/api/v1/notification-channels/{channel_id}/test"),
            None,
        )
        .await
    }

    pub async fn status(&self, monitor_id: &str) -> anyhow::Result<Value> {
        let (status, body) = self
            .admin(
                reqwest::Method::GET,
                &format!("/api/v1/monitors/{monitor_id}/status"),
                None,
            )
            .await?;
        anyhow::ensure!(status == 200, "status: {status} {body}");
        Ok(body)
    }

    /// The statuses poller `poller_id` went through, from its status-change history.
    pub async fn poller_statuses(&self, poller_id: &str) -> anyhow::Result<Vec<String>> {
        let (status, body) = self
            .admin(
                reqwest::Method::GET,
                &format!("/api/v1/pollers/{poller_id}/status-changes"),
                None,
            )
            .await?;
        anyhow::ensure!(status == 200, "status changes: {status} {body}");
        body["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|change| {
                change["status"]
                    .as_str()
                    .map(String::from)
                    .ok_or_else(|| anyhow::anyhow!("a change without a status: {body}"))
            })
            .collect()
    }

    /// Waits until the monitor's status is `wanted`; returns the status document.
    pub async fn wait_for_status(
        &self,
        monitor_id: &str,
        wanted: &str,
        timeout: Duration,
    ) -> anyhow::Result<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let status = self.status(monitor_id).await?;
            if status["status"] == wanted {
                return Ok(status);
            }
            if Instant::now() > deadline {
                bail!("monitor {monitor_id} did not become {wanted} within {timeout:?}; last status {status}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    pub async fn stop(mut self) {
        self.kill().await;
    }
}

/// Sends a settings-API request with the admin token to `base_url` (a central, or a load
/// balancer in front of replicas); returns status and JSON body.
pub async fn admin_request(
    http: &reqwest::Client,
    base_url: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> anyhow::Result<(u16, Value)> {
    api_request(http, base_url, ADMIN_TOKEN, method, path, body).await
}

/// Sends a settings-API request with `bearer` (an API key, the admin token); returns status
/// and JSON body.
pub async fn api_request(
    http: &reqwest::Client,
    base_url: &str,
    bearer: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> anyhow::Result<(u16, Value)> {
    let mut request = http
        .request(method, format!("{base_url}{path}"))
        .bearer_auth(bearer);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await?;
    let status = response.status().as_u16();
    let text = response.text().await?;
    let body = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).with_context(|| format!("not JSON: {text}"))?
    };
    Ok((status, body))
}

/// A poller registered by a test: its id and tokens.
#[derive(Debug, Clone)]
pub struct RegisteredPoller {
    pub id: String,
    pub access: String,
    pub refresh: String,
}

impl RegisteredPoller {
    /// Heartbeats every `every` in the background, as an agent would, so the poller stays
    /// online; abort the handle to stop.
    pub fn keep_alive(&self, central_url: &str, every: Duration) -> tokio::task::JoinHandle<()> {
        let (http, url, token) = (
            reqwest::Client::new(),
            central_url.to_string(),
            self.access.clone(),
        );
        tokio::spawn(async move {
            loop {
                let _ = http
                    .post(format!("{url}/api/poller/heartbeat"))
                    .bearer_auth(&token)
                    .json(&json!({"version": "test", "capabilities": ["http"]}))
                    .send()
                    .await;
                tokio::time::sleep(every).await;
            }
        })
    }
}

/// A running `poller-agent` process; its data directory outlives restarts.
pub struct Agent {
    child: Option<Child>,
    pub data_dir: PathBuf,
    /// The `poller-agent` executable: this workspace's, or another build (an older release).
    program: PathBuf,
    central_url: String,
    token: Option<String>,
    extra_env: Vec<(String, String)>,
}

impl Agent {
    pub async fn start(
        central_url: &str,
        token: Option<String>,
        data_dir: &Path,
    ) -> anyhow::Result<Agent> {
        Self::start_with(central_url, token, data_dir, &[]).await
    }

    /// `start` with extra environment variables (`POLLER_NAME`, `POLLER_REGION`, …).
    pub async fn start_with(
        central_url: &str,
        token: Option<String>,
        data_dir: &Path,
        env: &[(&str, &str)],
    ) -> anyhow::Result<Agent> {
        Self::start_program(&binary("poller-agent"), central_url, token, data_dir, env).await
    }

    /// `start_with`, running another build of `poller-agent` (an older release).
    pub async fn start_program(
        program: &Path,
        central_url: &str,
        token: Option<String>,
        data_dir: &Path,
        env: &[(&str, &str)],
    ) -> anyhow::Result<Agent> {
        let mut agent = Agent {
            child: None,
            data_dir: data_dir.to_path_buf(),
            program: program.to_path_buf(),
            central_url: central_url.to_string(),
            token,
            extra_env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        agent.spawn()?;
        Ok(agent)
    }

    fn spawn(&mut self) -> anyhow::Result<()> {
        std::fs::create_dir_all(&self.data_dir)?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.data_dir.join("agent.log"))?;
        let mut command = Command::new(&self.program);
        command
            .env("POLLER_CENTRAL_URL", &self.central_url)
            .env("POLLER_DATA_DIR", &self.data_dir)
            .env("POLLER_LISTEN", "127.0.0.1:0")
            .env("POLLER_NAME", "e2e-agent")
            .env("POLLER_HEARTBEAT_INTERVAL", "1s")
            .env("POLLER_BATCH_INTERVAL", "1s")
            .env("RUST_LOG", "info,poller_agent::engine::runner=debug")
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true);
        if let Some(token) = &self.token {
            command.env("POLLER_REGISTRATION_TOKEN", token);
        }
        for (key, value) in &self.extra_env {
            command.env(key, value);
        }
        self.child = Some(command.spawn().context("starting poller-agent")?);
        Ok(())
    }

    /// `kill -9`.
    pub async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill().await;
        }
    }

    pub async fn restart(&mut self) -> anyhow::Result<()> {
        self.kill().await;
        self.spawn()
    }

    /// Runs `program` from the next `restart` on (an upgrade).
    pub fn set_program(&mut self, program: &Path) {
        self.program = program.to_path_buf();
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.data_dir.join("agent.log")).unwrap_or_default()
    }

    /// Sets an environment variable for this and later starts.
    pub fn set_env(&mut self, key: &str, value: &str) {
        self.extra_env.push((key.to_string(), value.to_string()));
    }

    /// Ids of every result the agent committed to its queue, over all its runs (from its log).
    pub fn queued_ids(&self) -> HashSet<String> {
        self.logged_ids("result queued")
    }

    /// The ids of results the agent was about to commit to its queue (a superset of
    /// `queued_ids`: a `kill -9` may land between the commit and its log line).
    pub fn committing_ids(&self) -> HashSet<String> {
        self.logged_ids("result committing")
    }

    fn logged_ids(&self, what: &str) -> HashSet<String> {
        self.log()
            .lines()
            .filter(|line| line.contains(what))
            .filter_map(|line| line.split("result_id=").nth(1))
            .filter_map(|rest| rest.split_whitespace().next())
            .map(str::to_string)
            .collect()
    }

    /// `/readyz` of the newest run (status and body), next to its `/metrics`.
    pub async fn readyz(&self) -> Option<(u16, Value)> {
        let url = self.metrics_url()?.replace("/metrics", "/readyz");
        let response = reqwest::get(url).await.ok()?;
        let status = response.status().as_u16();
        Some((status, response.json().await.ok()?))
    }

    /// The address of the newest run's `/metrics`, from its log.
    pub fn metrics_url(&self) -> Option<String> {
        let log = self.log();
        let line = log
            .lines()
            .rev()
            .find(|l| l.contains("agent endpoints listening"))?;
        let addr = line.split("addr=").nth(1)?.split_whitespace().next()?;
        Some(format!("http://{addr}/metrics"))
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// The process id of the running process.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref()?.id()
    }

    /// How the process ended, if it has (without waiting); `None` while it runs.
    pub fn exit_status(&mut self) -> Option<std::process::ExitStatus> {
        self.child.as_mut()?.try_wait().ok().flatten()
    }

    /// The process's peak resident memory so far; `None` when it is not running.
    pub fn peak_rss_bytes(&self) -> Option<u64> {
        peak_rss_bytes(self.pid()?)
    }

    /// Sends the process a signal by name (`USR1`, `TERM`).
    pub fn signal(&self, name: &str) -> anyhow::Result<()> {
        let pid = self.pid().context("the agent is not running")?;
        let status = std::process::Command::new("kill")
            .args(["-s", name, &pid.to_string()])
            .status()?;
        anyhow::ensure!(status.success(), "kill -s {name} {pid} failed");
        Ok(())
    }

    /// Waits for the process to exit by itself; `None` if it is still running after `timeout`.
    pub async fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let child = self.child.as_mut()?;
        let status = tokio::time::timeout(timeout, child.wait())
            .await
            .ok()?
            .ok()?;
        self.child = None;
        Some(status)
    }
}

/// A local HTTP service to monitor, whose answer the test controls.
#[derive(Clone)]
pub struct Target {
    pub url: String,
    status: Arc<AtomicU16>,
    hits: Arc<AtomicU64>,
    /// How long it waits before answering, in milliseconds.
    delay_ms: Arc<AtomicU64>,
    /// A `Retry-After` it sends with each answer, in seconds (0: none).
    retry_after_s: Arc<AtomicU64>,
    /// Every request's path and query, with when it arrived.
    log: Arc<std::sync::Mutex<Vec<(String, Instant)>>>,
}

impl Target {
    pub async fn start() -> anyhow::Result<Target> {
        Self::start_at("127.0.0.1:0").await
    }

    /// A target listening at `addr` (an address nothing listened on until now: a host that
    /// comes back).
    pub async fn start_at(addr: &str) -> anyhow::Result<Target> {
        let status = Arc::new(AtomicU16::new(200));
        let hits = Arc::new(AtomicU64::new(0));
        let log = Arc::new(std::sync::Mutex::new(Vec::new()));
        let delay_ms = Arc::new(AtomicU64::new(0));
        let retry_after_s = Arc::new(AtomicU64::new(0));
        let (s, h, l, d, r) = (
            status.clone(),
            hits.clone(),
            log.clone(),
            delay_ms.clone(),
            retry_after_s.clone(),
        );
        let router = axum::Router::new().fallback(move |uri: axum::http::Uri| {
            let (s, h, l, d, r) = (s.clone(), h.clone(), l.clone(), d.clone(), r.clone());
            async move {
                h.fetch_add(1, Ordering::SeqCst);
                let seen = uri
                    .path_and_query()
                    .map(|p| p.to_string())
                    .unwrap_or_default();
                l.lock().unwrap().push((seen, Instant::now()));
                tokio::time::sleep(Duration::from_millis(d.load(Ordering::SeqCst))).await;
                let code =
                    axum::http::StatusCode::from_u16(s.load(Ordering::SeqCst)).unwrap_or_default();
                let mut headers = axum::http::HeaderMap::new();
                let retry_after = r.load(Ordering::SeqCst);
                if retry_after > 0 {
                    headers.insert(axum::http::header::RETRY_AFTER, retry_after.into());
                }
                (code, headers, "target")
            }
        });
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        tokio::spawn(async move { axum::serve(listener, router).await });
        Ok(Target {
            url: format!("http://{addr}/health"),
            status,
            hits,
            delay_ms,
            retry_after_s,
            log,
        })
    }

    /// Sends `Retry-After: seconds` with each answer (0: none).
    pub fn retry_after(&self, seconds: u64) {
        self.retry_after_s.store(seconds, Ordering::SeqCst);
    }

    /// When each request arrived, in order.
    pub fn hit_times(&self) -> Vec<Instant> {
        self.log.lock().unwrap().iter().map(|(_, at)| *at).collect()
    }

    pub fn answer_with(&self, code: u16) {
        self.status.store(code, Ordering::SeqCst);
    }

    /// Answers each request this long after it arrived (counted in `hits` on arrival).
    pub fn answer_after(&self, delay: Duration) {
        self.delay_ms
            .store(delay.as_millis() as u64, Ordering::SeqCst);
    }

    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::SeqCst)
    }

    /// When the first request whose path and query contain `fragment` arrived.
    pub fn first_hit(&self, fragment: &str) -> Option<Instant> {
        let log = self.log.lock().unwrap();
        log.iter()
            .find(|(seen, _)| seen.contains(fragment))
            .map(|(_, at)| *at)
    }
}
