//! Who is calling: the peer's address, or, when the peer is a trusted reverse proxy
//! (`CENTRAL_TRUSTED_PROXIES`), the address that proxy saw in `X-Forwarded-For`.
//! From anyone else the header is ignored, so a client cannot choose its own rate-limit key.
//! Limits count clients by `client_key`: an IPv6 host usually holds a whole /64, so one
//! address there is as cheap to change as a port.

use std::net::{IpAddr, Ipv6Addr};

use axum::http::HeaderMap;
use ipnet::IpNet;

#[derive(Debug, Clone, Default)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    pub fn new(nets: Vec<IpNet>) -> Self {
        Self(nets)
    }

    pub fn trusts(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        self.0.iter().any(|net| net.contains(&ip))
    }

    /// The client's address. Each proxy appends the address it received from, so the list is
    /// read from the right, past the trusted proxies; the first untrusted entry is the client.
    /// A malformed entry stops the walk there: what lies left of it is the client's to forge.
    pub fn client_ip(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        if !self.trusts(peer) {
            return peer;
        }
        let mut client = peer;
        let entries = headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .collect::<Vec<_>>();
        for entry in entries.iter().rev() {
            match entry.trim().parse::<IpAddr>() {
                Ok(ip) => {
                    client = ip;
                    if !self.trusts(ip) {
                        break;
                    }
                }
                Err(_) => break,
            }
        }
        client
    }
}

/// An IPv4 address written as IPv6 (`::ffff:192.0.2.1`, as a dual-stack socket reports it)
/// is that IPv4 address.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// What limits count as one client: an IPv4 address, or an IPv6 /64.
pub fn client_key(ip: IpAddr) -> IpAddr {
    match canonical(ip) {
        IpAddr::V6(v6) => {
            let prefix = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(Ipv6Addr::from(prefix))
        }
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for value in values {
            map.append("x-forwarded-for", value.parse().unwrap());
        }
        map
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn an_ipv6_slash_64_is_one_client_and_mapped_ipv4_is_ipv4() {
        assert_eq!(
            client_key(ip("2001:db8:1:2:aaaa::1")),
            client_key(ip("2001:db8:1:2:bbbb::9"))
        );
        assert_ne!(
            client_key(ip("2001:db8:1:2::1")),
            client_key(ip("2001:db8:1:3::1"))
        );
        assert_eq!(client_key(ip("::ffff:192.0.2.1")), ip("192.0.2.1"));
        assert_ne!(client_key(ip("192.0.2.1")), client_key(ip("192.0.2.2")));
        let trusted = TrustedProxies::new(vec!["10.0.0.0/8".parse().unwrap()]);
        assert!(trusted.trusts(ip("::ffff:10.1.2.3")));
    }

    #[test]
    fn believes_forwarded_for_only_from_trusted_proxies() {
        let trusted = TrustedProxies::new(vec!["10.0.0.0/8".parse().unwrap()]);
        let forged = headers(&["1.2.3.4"]);
        assert_eq!(
            trusted.client_ip(ip("203.0.113.9"), &forged),
            ip("203.0.113.9")
        );
        assert_eq!(trusted.client_ip(ip("10.0.0.2"), &forged), ip("1.2.3.4"));
        // The client prepends a forged entry; the proxy appends what it saw.
        let chained = headers(&["6.6.6.6, 198.51.100.7", "10.0.0.3"]);
        assert_eq!(
            trusted.client_ip(ip("10.0.0.2"), &chained),
            ip("198.51.100.7")
        );
        // Garbage stops the walk at the last good entry right of it.
        let garbage = headers(&["1.1.1.1, nonsense, 198.51.100.8"]);
        assert_eq!(
            trusted.client_ip(ip("10.0.0.2"), &garbage),
            ip("198.51.100.8")
        );
        assert_eq!(
            trusted.client_ip(ip("10.0.0.2"), &HeaderMap::new()),
            ip("10.0.0.2")
        );
        let nobody = TrustedProxies::default();
        assert_eq!(nobody.client_ip(ip("10.0.0.2"), &forged), ip("10.0.0.2"));
    }
}
