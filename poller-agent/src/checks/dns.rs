//! `dns`: the name resolves to records of the wanted type, optionally including expected
//! answers. NXDOMAIN is a permanent failure: the name does not exist.

use std::net::SocketAddr;
use std::str::FromStr;
use std::time::{Duration, Instant};

use hickory_resolver::config::{NameServerConfig, ResolveHosts, ResolverConfig, ResolverOpts};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::net::{DnsError, NetError};
use hickory_resolver::proto::op::ResponseCode;
use hickory_resolver::proto::rr::RecordType;
use hickory_resolver::TokioResolver;
use serde_json::json;
use shared_proto::settings::DnsSettings;

use super::{timeout_message, CheckOutcome};

/// Reads the system resolver configuration once; each check builds a resolver without a
/// cache, so every check asks the network.
#[derive(Clone)]
pub struct DnsChecker {
    system: Option<(ResolverConfig, ResolverOpts)>,
}

impl DnsChecker {
    pub fn new() -> Self {
        let system = hickory_resolver::system_conf::read_system_conf()
            .map_err(|e| {
                tracing::warn!(
                    "no system DNS configuration ({e}); dns checks need settings.nameserver"
                )
            })
            .ok();
        Self { system }
    }

    pub async fn check(
        &self,
        name: &str,
        settings: &DnsSettings,
        timeout: Duration,
    ) -> CheckOutcome {
        let (config, mut options) = match &settings.nameserver {
            Some(server) => match server.parse::<SocketAddr>() {
                Ok(addr) => (
                    ResolverConfig::from_name_servers(vec![name_server(addr)]),
                    ResolverOpts::default(),
                ),
                Err(_) => {
                    return CheckOutcome::permanent(
                        None,
                        format!("bad config: nameserver `{server}`"),
                        json!({}),
                    )
                }
            },
            None => match &self.system {
                Some(system) => system.clone(),
                None => {
                    return CheckOutcome::permanent(
                        None,
                        "bad config: no system resolver; set settings.nameserver",
                        json!({}),
                    )
                }
            },
        };
        options.cache_size = 0;
        options.timeout = timeout;
        options.attempts = 1;
        options.use_hosts_file = ResolveHosts::Never;
        let Ok(record_type) = RecordType::from_str(&settings.record_type) else {
            return CheckOutcome::permanent(
                None,
                format!("bad config: record type `{}`", settings.record_type),
                json!({}),
            );
        };
        let resolver =
            match TokioResolver::builder_with_config(config, TokioRuntimeProvider::default())
                .with_options(options)
                .build()
            {
                Ok(resolver) => resolver,
                Err(e) => {
                    return CheckOutcome::down(
                        None,
                        format!("dns: cannot build a resolver: {e}"),
                        json!({}),
                    )
                }
            };
        let started = Instant::now();
        let lookup = match tokio::time::timeout(timeout, resolver.lookup(name, record_type)).await {
            Err(_) => return CheckOutcome::down(None, timeout_message(timeout), json!({})),
            Ok(Err(e)) => return lookup_failure(name, record_type, &e, started.elapsed()),
            Ok(Ok(lookup)) => lookup,
        };
        let latency = started.elapsed();
        let answers: Vec<String> = lookup
            .answers()
            .iter()
            .filter(|r| r.record_type() == record_type)
            .map(|r| r.data.to_string())
            .collect();
        let meta = json!({"answers": answers, "record_type": settings.record_type});
        let normal = |s: &str| s.trim_end_matches('.').to_ascii_lowercase();
        let missing: Vec<&String> = settings
            .expected
            .iter()
            .filter(|want| !answers.iter().any(|got| normal(got) == normal(want)))
            .collect();
        if answers.is_empty() {
            return CheckOutcome::down(
                Some(latency),
                format!("no {record_type} records for {name}"),
                meta,
            );
        }
        if let Some(first) = missing.first() {
            return CheckOutcome::down(
                Some(latency),
                format!(
                    "expected {first} among the {record_type} answers, got {}",
                    answers.join(", ")
                ),
                meta,
            );
        }
        CheckOutcome::up(latency, meta)
    }
}

impl Default for DnsChecker {
    fn default() -> Self {
        Self::new()
    }
}

fn name_server(addr: SocketAddr) -> NameServerConfig {
    let mut server = NameServerConfig::udp_and_tcp(addr.ip());
    for connection in &mut server.connections {
        connection.port = addr.port();
    }
    server
}

fn lookup_failure(
    name: &str,
    record_type: RecordType,
    error: &NetError,
    elapsed: Duration,
) -> CheckOutcome {
    match error {
        NetError::Dns(DnsError::NoRecordsFound(none))
            if none.response_code == ResponseCode::NXDomain =>
        {
            CheckOutcome::permanent(
                Some(elapsed),
                format!("dns: {name} does not exist (NXDOMAIN)"),
                json!({}),
            )
        }
        NetError::Dns(DnsError::NoRecordsFound(_)) => CheckOutcome::down(
            Some(elapsed),
            format!("no {record_type} records for {name}"),
            json!({}),
        ),
        NetError::Timeout => CheckOutcome::down(
            None,
            format!("dns: no answer within {} ms", elapsed.as_millis()),
            json!({}),
        ),
        other => CheckOutcome::down(Some(elapsed), format!("dns: {other}"), json!({})),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_resolver::proto::op::Message;
    use hickory_resolver::proto::rr::rdata::A;
    use hickory_resolver::proto::rr::{RData, Record};
    use shared_proto::poller_api::ResultStatus;

    /// A tiny authoritative server: `up.test` has 10.0.0.1 and 10.0.0.2, everything else is
    /// NXDOMAIN.
    async fn dns_server() -> SocketAddr {
        let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = socket.local_addr().unwrap();
        tokio::spawn(async move {
            let mut buf = [0u8; 1500];
            loop {
                let Ok((n, peer)) = socket.recv_from(&mut buf).await else {
                    return;
                };
                let Ok(query) = Message::from_vec(&buf[..n]) else {
                    continue;
                };
                let mut response = Message::response(query.metadata.id, query.metadata.op_code);
                response.metadata.recursion_desired = query.metadata.recursion_desired;
                response.metadata.recursion_available = true;
                response.metadata.authoritative = true;
                let question = query.queries[0].clone();
                let name = question.name().clone();
                response.add_query(question.clone());
                if name.to_ascii() == "up.test." && question.query_type() == RecordType::A {
                    for last in [1, 2] {
                        response.add_answer(Record::from_rdata(
                            name.clone(),
                            60,
                            RData::A(A::new(10, 0, 0, last)),
                        ));
                    }
                } else if name.to_ascii() != "up.test." {
                    response.metadata.response_code = ResponseCode::NXDomain;
                }
                let _ = socket.send_to(&response.to_vec().unwrap(), peer).await;
            }
        });
        addr
    }

    #[tokio::test]
    async fn answers_expectations_and_nxdomain() {
        let server = dns_server().await;
        let checker = DnsChecker::new();
        let settings = |record_type: &str, expected: &[&str]| DnsSettings {
            record_type: record_type.into(),
            expected: expected.iter().map(|s| s.to_string()).collect(),
            nameserver: Some(server.to_string()),
        };
        let timeout = Duration::from_secs(2);

        let up = checker
            .check("up.test", &settings("A", &["10.0.0.2"]), timeout)
            .await;
        assert_eq!(up.status, ResultStatus::Up, "{up:?}");
        assert_eq!(up.meta["answers"], json!(["10.0.0.1", "10.0.0.2"]));

        let wrong = checker
            .check("up.test", &settings("A", &["10.9.9.9"]), timeout)
            .await;
        assert_eq!(
            wrong.msg,
            "expected 10.9.9.9 among the A answers, got 10.0.0.1, 10.0.0.2"
        );
        assert!(!wrong.permanent);

        let no_aaaa = checker
            .check("up.test", &settings("AAAA", &[]), timeout)
            .await;
        assert_eq!(no_aaaa.msg, "no AAAA records for up.test");

        let missing = checker
            .check("gone.test", &settings("A", &[]), timeout)
            .await;
        assert_eq!(missing.msg, "dns: gone.test does not exist (NXDOMAIN)");
        assert!(missing.permanent);
    }

    #[tokio::test]
    async fn a_silent_server_times_out() {
        let silent = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let settings = DnsSettings {
            nameserver: Some(silent.local_addr().unwrap().to_string()),
            ..DnsSettings::default()
        };
        let outcome = DnsChecker::new()
            .check("up.test", &settings, Duration::from_millis(300))
            .await;
        assert_eq!(outcome.status, ResultStatus::Down);
        assert!(
            outcome.msg.contains("300 ms") || outcome.msg.starts_with("dns:"),
            "{}",
            outcome.msg
        );
    }
}
