//! Servers that tests point central and agents at: an HTTP receiver of notifications that
//! records what it accepts (and can be made to refuse, as a receiver that is down), a real
//! SMTP server that keeps what it receives (aiosmtpd), and a target that fails for chosen
//! agents only.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::http::HeaderMap;
use serde_json::Value;

/// One request a receiver accepted.
#[derive(Debug, Clone)]
pub struct Received {
    pub path: String,
    pub notification_id: Option<String>,
    pub signature: Option<String>,
    pub authorization: Option<String>,
    pub body: String,
    pub json: Value,
    pub at: Instant,
}

/// An HTTP receiver; while `refusing`, it answers 503 and records nothing.
#[derive(Clone)]
pub struct HttpReceiver {
    pub url: String,
    refusing: Arc<AtomicBool>,
    received: Arc<Mutex<Vec<Received>>>,
    refused: Arc<Mutex<u64>>,
}

impl HttpReceiver {
    pub async fn start() -> anyhow::Result<HttpReceiver> {
        let refusing = Arc::new(AtomicBool::new(false));
        let received = Arc::new(Mutex::new(Vec::new()));
        let refused = Arc::new(Mutex::new(0));
        let (r, log, no) = (refusing.clone(), received.clone(), refused.clone());
        let router = axum::Router::new().fallback(
            move |uri: axum::http::Uri, headers: HeaderMap, body: String| {
                let (r, log, no) = (r.clone(), log.clone(), no.clone());
                async move {
                    if r.load(Ordering::SeqCst) {
                        *no.lock().unwrap() += 1;
                        return axum::http::StatusCode::SERVICE_UNAVAILABLE;
                    }
                    let header = |name: &str| {
                        headers
                            .get(name)
                            .and_then(|v| v.to_str().ok())
                            .map(str::to_string)
                    };
                    log.lock().unwrap().push(Received {
                        path: uri.path().to_string(),
                        notification_id: header("x-notification-id"),
                        signature: header("x-signature-256"),
                        authorization: header("authorization"),
                        json: serde_json::from_str(&body).unwrap_or(Value::Null),
                        body,
                        at: Instant::now(),
                    });
                    axum::http::StatusCode::OK
                }
            },
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        tokio::spawn(async move { axum::serve(listener, router).await });
        Ok(HttpReceiver {
            url,
            refusing,
            received,
            refused,
        })
    }

    /// Answer 503 to everything (a receiver that is down) or accept again.
    pub fn refuse(&self, refusing: bool) {
        self.refusing.store(refusing, Ordering::SeqCst);
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    /// How many requests it received, without copying them (benches poll it).
    pub fn count(&self) -> usize {
        self.received.lock().unwrap().len()
    }

    /// How many of the requests it received match, without copying them.
    pub fn count_matching(&self, matching: impl Fn(&Received) -> bool) -> usize {
        self.received
            .lock()
            .unwrap()
            .iter()
            .filter(|r| matching(r))
            .count()
    }

    /// How many requests it refused.
    pub fn refused(&self) -> u64 {
        *self.refused.lock().unwrap()
    }
}

/// A real SMTP server (Debian's `python3-aiosmtpd`, RFC 5321) that accepts every mail and
/// keeps it in a Maildir, read back as each mail's text.
pub struct SmtpSink {
    pub url: String,
    maildir: tempfile::TempDir,
    _server: KilledOnDrop,
}

/// A child process killed when its owner is dropped.
struct KilledOnDrop(std::process::Child);

impl Drop for KilledOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl SmtpSink {
    pub async fn start() -> anyhow::Result<SmtpSink> {
        let maildir = tempfile::tempdir()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let server = std::process::Command::new("/usr/bin/python3")
            .args(["-m", "aiosmtpd", "-n", "-c", "aiosmtpd.handlers.Mailbox"])
            .arg("-l")
            .arg(format!("127.0.0.1:{port}"))
            .arg(maildir.path().join("mail"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| {
                anyhow::anyhow!(
                    "starting aiosmtpd (Debian's python3-aiosmtpd, as .ci/run installs): {e}"
                )
            })?;
        let server = KilledOnDrop(server);
        let address = format!("127.0.0.1:{port}");
        crate::eventually(
            std::time::Duration::from_secs(15),
            "aiosmtpd listening",
            || async { tokio::net::TcpStream::connect(&address).await.ok() },
        )
        .await?;
        Ok(SmtpSink {
            url: format!("smtp://{address}"),
            maildir,
            _server: server,
        })
    }

    /// Every mail received, oldest first, as its text (headers, a blank line, the body).
    pub fn mails(&self) -> Vec<String> {
        let new = self.maildir.path().join("mail").join("new");
        let mut files: Vec<(std::time::SystemTime, String, String)> = std::fs::read_dir(&new)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| {
                let modified = entry.metadata().ok()?.modified().ok()?;
                let name = entry.file_name().to_string_lossy().to_string();
                let text = std::fs::read_to_string(entry.path()).ok()?;
                Some((modified, name, text))
            })
            .collect();
        // Maildir names start with the time of delivery; the modification time first.
        files.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        files.into_iter().map(|(_, _, text)| text).collect()
    }
}

/// A target that answers 503 to the agents named in `failing` and 200 to everyone else.
#[derive(Clone, Default)]
pub struct RegionalTarget {
    pub url: String,
    failing: Arc<Mutex<HashSet<String>>>,
}

impl RegionalTarget {
    pub async fn start() -> anyhow::Result<RegionalTarget> {
        let mut target = RegionalTarget::default();
        let failing = target.failing.clone();
        let router = axum::Router::new().fallback(move |headers: axum::http::HeaderMap| {
            let failing = failing.clone();
            async move {
                let agent = headers
                    .get("user-agent")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_string();
                let fails = failing
                    .lock()
                    .unwrap()
                    .iter()
                    .any(|name| agent.contains(&format!("({name})")));
                if fails {
                    (axum::http::StatusCode::SERVICE_UNAVAILABLE, "failing here")
                } else {
                    (axum::http::StatusCode::OK, "fine")
                }
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        target.url = format!("http://{}/health", listener.local_addr()?);
        tokio::spawn(async move { axum::serve(listener, router).await });
        Ok(target)
    }

    pub fn fail_for(&self, names: &[&str]) {
        *self.failing.lock().unwrap() = names.iter().map(|n| n.to_string()).collect();
    }
}
