//! Servers that tests point central and agents at: an HTTP receiver of notifications that
//! records what it accepts (and can be made to refuse, as a receiver that is down), an SMTP
//! sink, and a target that fails for chosen agents only.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::http::HeaderMap;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

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

/// A minimal SMTP server that accepts every mail and keeps its text.
#[derive(Clone)]
pub struct SmtpSink {
    pub url: String,
    mails: Arc<Mutex<Vec<String>>>,
}

impl SmtpSink {
    pub async fn start() -> anyhow::Result<SmtpSink> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("smtp://{}", listener.local_addr()?);
        let mails = Arc::new(Mutex::new(Vec::new()));
        let kept = mails.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let kept = kept.clone();
                tokio::spawn(async move {
                    let _ = converse(stream, kept).await;
                });
            }
        });
        Ok(SmtpSink { url, mails })
    }

    pub fn mails(&self) -> Vec<String> {
        self.mails.lock().unwrap().clone()
    }
}

async fn converse(
    stream: tokio::net::TcpStream,
    mails: Arc<Mutex<Vec<String>>>,
) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    write.write_all(b"220 sink ESMTP\r\n").await?;
    while let Some(line) = lines.next_line().await? {
        let command = line.to_ascii_uppercase();
        if command.starts_with("EHLO") || command.starts_with("HELO") {
            write.write_all(b"250-sink\r\n250 8BITMIME\r\n").await?;
        } else if command.starts_with("DATA") {
            write.write_all(b"354 go on\r\n").await?;
            let mut mail = String::new();
            while let Some(line) = lines.next_line().await? {
                if line == "." {
                    break;
                }
                mail.push_str(&line);
                mail.push('\n');
            }
            mails.lock().unwrap().push(mail);
            write.write_all(b"250 kept\r\n").await?;
        } else if command.starts_with("QUIT") {
            write.write_all(b"221 bye\r\n").await?;
            return Ok(());
        } else {
            write.write_all(b"250 ok\r\n").await?;
        }
    }
    Ok(())
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
