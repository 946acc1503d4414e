//! Check kinds: each turns a monitor into one outcome, with a one-line reason on failure.
//! Checks know nothing of scheduling or delivery.

mod dns;
mod http;
pub mod icmp;
pub mod networks;
pub mod target_headers;
mod tcp;
mod tls;

use std::time::Duration;

use serde_json::Value;
use shared_proto::poller_api::ResultStatus;
use shared_proto::settings::{CheckSettings, MonitorSettings};
use shared_proto::{AssignedMonitor, CheckKind};

pub use target_headers::RateBudget;

/// The kinds this agent can run (its default capabilities; `icmp` only with an ICMP socket).
pub const SUPPORTED_KINDS: [CheckKind; 5] = CheckKind::AGENT_KINDS;

/// Cache validators from the previous answer, for conditional HTTP requests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Validators {
    pub etag: Option<String>,
    pub last_modified: Option<String>,
}

/// What one check found.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckOutcome {
    pub status: ResultStatus,
    pub latency_ms: Option<u64>,
    /// Empty on success; one line saying why on failure.
    pub msg: String,
    pub meta: Value,
    /// A failure that retrying will not fix (NXDOMAIN, 401/403, invalid certificate, bad config).
    pub permanent: bool,
    /// The target asked for this much quiet (`Retry-After`).
    pub retry_after: Option<Duration>,
    /// Validators to send next time (HTTP with `conditional`); set only when the answer passed.
    pub validators: Option<Validators>,
    /// The target's rate-limit budget, when its answer stated one.
    pub budget: Option<RateBudget>,
    /// What the answer looked like (status and body), for adaptive intervals: equal
    /// fingerprints mean the target did not change. `None` for kinds that do not say.
    pub fingerprint: Option<u64>,
    /// The target's address took no connection (refused, or no answer to connecting within
    /// the timeout): nothing of it was reached, so its other monitors would fail alike
    /// (`engine::unreachable`).
    pub unreachable: bool,
}

impl CheckOutcome {
    pub fn up(latency: Duration, meta: Value) -> Self {
        Self {
            status: ResultStatus::Up,
            latency_ms: Some(latency.as_millis() as u64),
            msg: String::new(),
            meta,
            permanent: false,
            retry_after: None,
            validators: None,
            budget: None,
            fingerprint: None,
            unreachable: false,
        }
    }

    /// A transient failure: worth retrying.
    pub fn down(latency: Option<Duration>, msg: impl Into<String>, meta: Value) -> Self {
        Self {
            status: ResultStatus::Down,
            latency_ms: latency.map(|l| l.as_millis() as u64),
            msg: msg.into(),
            meta,
            permanent: false,
            retry_after: None,
            validators: None,
            budget: None,
            fingerprint: None,
            unreachable: false,
        }
    }

    /// The target's address took no connection.
    pub fn unreachable(latency: Option<Duration>, msg: impl Into<String>) -> Self {
        Self {
            unreachable: true,
            ..Self::down(latency, msg, serde_json::json!({}))
        }
    }

    /// A failure retrying will not fix.
    pub fn permanent(latency: Option<Duration>, msg: impl Into<String>, meta: Value) -> Self {
        Self {
            permanent: true,
            ..Self::down(latency, msg, meta)
        }
    }
}

/// Runs checks; holds what is worth reusing between them (HTTP clients per TLS/redirect mode).
#[derive(Clone)]
pub struct Checker {
    http: http::HttpClients,
    dns: dns::DnsChecker,
    tls: tls::TlsChecker,
    networks: std::sync::Arc<networks::Networks>,
    /// `None` when no ICMP socket could be opened (the agent then does not advertise `icmp`).
    icmp: Option<std::sync::Arc<icmp::IcmpPinger>>,
}

impl Checker {
    /// `poller_name` goes into every HTTP request's `User-Agent`, so that a target can tell
    /// the probe and its location apart.
    /// Checks connect only where `networks` permits (`POLLER_ALLOWED_NETWORKS`).
    pub fn new(poller_name: &str, networks: networks::Networks) -> anyhow::Result<Self> {
        let networks = std::sync::Arc::new(networks);
        Ok(Self {
            http: http::HttpClients::new(&user_agent(poller_name), networks.clone())?,
            dns: dns::DnsChecker::new(),
            tls: tls::TlsChecker::new(networks.clone())?,
            networks,
            icmp: None,
        })
    }

    /// Runs `icmp` checks through `pinger`.
    pub fn with_icmp(self, pinger: Option<icmp::IcmpPinger>) -> Self {
        Self {
            icmp: pinger.map(std::sync::Arc::new),
            ..self
        }
    }

    pub async fn run(
        &self,
        monitor: &AssignedMonitor,
        validators: Option<Validators>,
    ) -> CheckOutcome {
        let timeout = Duration::from_millis(monitor.timeout_ms);
        let settings = match MonitorSettings::parse(monitor.kind, &monitor.settings) {
            Ok(settings) => settings.check,
            Err(e) => {
                return CheckOutcome::permanent(None, format!("bad config: {e}"), Value::Null)
            }
        };
        match settings {
            CheckSettings::Http(s) => {
                self.http
                    .check(&monitor.target, &s, timeout, validators)
                    .await
            }
            CheckSettings::Tcp(_) => tcp::check(&monitor.target, timeout, &self.networks).await,
            CheckSettings::Dns(s) => self.dns.check(&monitor.target, &s, timeout).await,
            CheckSettings::Tls(s) => self.tls.check(&monitor.target, &s, timeout).await,
            CheckSettings::Icmp(s) => match &self.icmp {
                Some(pinger) => pinger.check(&monitor.target, &s, timeout).await,
                // Not advertised, so central places none here; one sent anyway is refused.
                None => CheckOutcome::permanent(
                    None,
                    "this agent cannot open an ICMP socket (see its start-up log)",
                    Value::Null,
                ),
            },
            // Central never places one on an agent (`CheckKind::runs_on_agents`).
            CheckSettings::Heartbeat(_) => CheckOutcome::permanent(
                None,
                "a heartbeat monitor is answered by central, not checked by agents",
                Value::Null,
            ),
        }
    }
}

/// `poller-agent/<version> (<poller name>)`, with anything a header value cannot hold in the
/// name replaced, so that no name can break the agent's requests.
pub fn user_agent(poller_name: &str) -> String {
    let name: String = poller_name
        .chars()
        .map(|c| match c {
            ' '..='~' if c != '(' && c != ')' => c,
            _ => '_',
        })
        .take(100)
        .collect();
    format!("poller-agent/{} ({name})", env!("CARGO_PKG_VERSION"))
}

/// `timeout after 5000 ms`
fn timeout_message(timeout: Duration) -> String {
    format!("timeout after {} ms", timeout.as_millis())
}
