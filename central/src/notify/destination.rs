//! Where notifications may go, enforced on the address actually connected to. By default
//! anywhere but the networks a server's neighbours live on (loopback, link-local, private,
//! unique-local, site-local, shared CGNAT space, NAT64, 6to4, IPv4-compatible IPv6, "this network",
//! multicast), so that a channel
//! cannot be turned against central's own network; `CENTRAL_NOTIFY_ALLOWED_NETWORKS` replaces
//! that with an explicit allow list (which may name private networks). IPv4 written as IPv6
//! (`::ffff:10.0.0.1`) is judged as the IPv4 address it is.
//!
//! Names are resolved once per connection by `PinnedResolver`, which hands the HTTP client
//! only the permitted addresses of that very answer: a name that answers differently on the
//! next query (DNS rebinding) cannot slip a refused address in between a check and the
//! connection (`tests/tests/e2e/ssrf.rs`, with a DNS server that alternates its answers). Mail
//! resolves through `resolve` and connects to the address it got. Names are asked of the
//! system's resolver, or of `CENTRAL_NOTIFY_DNS_SERVER` without a cache.
//!
//! Owns the policy and resolution only; sending is the senders'.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use hickory_resolver::config::{NameServerConfig, ResolveHosts, ResolverConfig, ResolverOpts};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::TokioResolver;
use ipnet::IpNet;

use crate::server::client_addr::canonical;

/// Refused by default: where a server's neighbours and its own services live.
const NEIGHBOURHOOD: &[&str] = &[
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "224.0.0.0/4",
    "240.0.0.0/4",
    // `::/96` holds `::` and `::1` and the deprecated IPv4-compatible form (`::10.0.0.1`).
    "::/96",
    "::ffff:0:0/96",
    "64:ff9b::/96",
    "64:ff9b:1::/48",
    // 6to4: the IPv4 address a relay would forward to sits in the next 32 bits.
    "2002::/16",
    "fc00::/7",
    "fe80::/10",
    // Site-local, deprecated but still routed inside some networks.
    "fec0::/10",
    "ff00::/8",
];

#[derive(Clone)]
pub struct Destinations {
    /// `CENTRAL_NOTIFY_ALLOWED_NETWORKS`; empty: anywhere outside `NEIGHBOURHOOD`.
    allowed: Arc<Vec<IpNet>>,
    denied: Arc<Vec<IpNet>>,
    /// `CENTRAL_NOTIFY_DNS_SERVER`'s resolver; `None`: the system's (`getaddrinfo`).
    resolver: Option<Arc<TokioResolver>>,
}

impl Destinations {
    pub fn new(allowed: Vec<IpNet>, dns_server: Option<SocketAddr>) -> anyhow::Result<Self> {
        let denied = NEIGHBOURHOOD
            .iter()
            .map(|net| net.parse().expect("the neighbourhood's networks are valid"))
            .collect();
        let resolver = dns_server.map(resolver_of).transpose()?.map(Arc::new);
        Ok(Self {
            allowed: Arc::new(allowed),
            denied: Arc::new(denied),
            resolver,
        })
    }

    /// Whether a notification may be sent to `ip`.
    pub fn permits(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        if self.allowed.is_empty() {
            !self.denied.iter().any(|net| net.contains(&ip))
        } else {
            self.allowed.iter().any(|net| net.contains(&ip))
        }
    }

    fn refusal(&self, host: &str, ip: IpAddr) -> String {
        if self.allowed.is_empty() {
            format!(
                "{host} ({ip}) is a loopback, private or otherwise local address, where \
                 notifications do not go unless CENTRAL_NOTIFY_ALLOWED_NETWORKS allows it"
            )
        } else {
            format!("{host} ({ip}) is outside CENTRAL_NOTIFY_ALLOWED_NETWORKS")
        }
    }

    /// The permitted addresses of `host` (a name or an address) at `port`, as resolved now;
    /// an error names a refused address when none is permitted.
    pub async fn resolve(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, String> {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let found: Vec<SocketAddr> = match (host.parse::<IpAddr>(), &self.resolver) {
            (Ok(ip), _) => vec![SocketAddr::new(ip, port)],
            (Err(_), None) => tokio::net::lookup_host((host, port))
                .await
                .map_err(|e| format!("resolving {host}: {e}"))?
                .collect(),
            (Err(_), Some(resolver)) => resolver
                .lookup_ip(host)
                .await
                .map_err(|e| format!("resolving {host}: {e}"))?
                .iter()
                .map(|ip| SocketAddr::new(ip, port))
                .collect(),
        };
        let permitted: Vec<SocketAddr> = found
            .iter()
            .copied()
            .filter(|a| self.permits(a.ip()))
            .collect();
        match (permitted.is_empty(), found.first()) {
            (false, _) => Ok(permitted),
            (true, Some(refused)) => Err(self.refusal(host, refused.ip())),
            (true, None) => Err(format!("{host} resolves to no address")),
        }
    }

    /// Refuses a URL whose host is an address that is not permitted. (Names are judged when
    /// the connection resolves them: `PinnedResolver`.)
    pub fn check_literal(&self, url: &str) -> Result<(), String> {
        let parsed = url::Url::parse(url).map_err(|e| format!("the url: {e}"))?;
        let ip = match parsed.host() {
            Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip),
            Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip),
            Some(url::Host::Domain(_)) => return Ok(()),
            None => return Err("the url has no host".into()),
        };
        if self.permits(ip) {
            Ok(())
        } else {
            Err(self.refusal(&ip.to_string(), ip))
        }
    }
}

/// A resolver that asks `server` alone, over UDP and TCP, and keeps no answer: each connection
/// is judged on an answer of its own.
fn resolver_of(server: SocketAddr) -> anyhow::Result<TokioResolver> {
    let mut name_server = NameServerConfig::udp_and_tcp(server.ip());
    for connection in &mut name_server.connections {
        connection.port = server.port();
    }
    let mut options = ResolverOpts::default();
    options.cache_size = 0;
    options.use_hosts_file = ResolveHosts::Never;
    Ok(TokioResolver::builder_with_config(
        ResolverConfig::from_name_servers(vec![name_server]),
        TokioRuntimeProvider::default(),
    )
    .with_options(options)
    .build()?)
}

/// The HTTP client's resolver: the permitted addresses of each answer, and nothing else.
pub struct PinnedResolver(pub Destinations);

impl reqwest::dns::Resolve for PinnedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let destinations = self.0.clone();
        Box::pin(async move {
            let permitted = destinations
                .resolve(name.as_str(), 0)
                .await
                .map_err(|e| -> Box<dyn std::error::Error + Send + Sync> { e.into() })?;
            let addresses: reqwest::dns::Addrs = Box::new(permitted.into_iter());
            Ok(addresses)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn by_default_the_neighbourhood_is_refused_and_the_internet_is_not() {
        let destinations = Destinations::new(Vec::new(), None).unwrap();
        for refused in [
            "127.0.0.1",
            "10.1.2.3",
            "172.20.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
            "224.0.0.1",
            "::10.0.0.1",
            "::7f00:1",
            "2002:7f00:1::1",
            "2002:a00:1::",
            "fec0::1",
        ] {
            assert!(!destinations.permits(ip(refused)), "{refused}");
        }
        for permitted in [
            "93.184.216.34",
            "2606:2800:220:1::1",
            "::ffff:93.184.216.34",
        ] {
            assert!(destinations.permits(ip(permitted)), "{permitted}");
        }
    }

    #[test]
    fn an_allow_list_replaces_the_default() {
        let destinations = Destinations::new(vec!["127.0.0.2/32".parse().unwrap()], None).unwrap();
        assert!(destinations.permits(ip("127.0.0.2")));
        assert!(destinations.permits(ip("::ffff:127.0.0.2")));
        assert!(!destinations.permits(ip("127.0.0.3")));
        assert!(!destinations.permits(ip("93.184.216.34")));
    }

    #[tokio::test]
    async fn literal_addresses_and_names_are_judged_by_what_they_are() {
        let destinations = Destinations::new(Vec::new(), None).unwrap();
        assert!(destinations
            .check_literal("http://[::ffff:7f00:1]:9/x")
            .is_err());
        assert!(destinations.check_literal("http://10.0.0.1/").is_err());
        assert!(destinations.check_literal("http://example.com/").is_ok());
        let refused = destinations.resolve("localhost", 80).await.unwrap_err();
        assert!(refused.contains("local address"), "{refused}");
    }
}
