//! Who is calling: the peer's address, or, when the peer is a trusted reverse proxy
//! (`CENTRAL_TRUSTED_PROXIES`), the address that proxy saw in `X-Forwarded-For`.
//! From anyone else the header is ignored, so a client cannot choose its own rate-limit key.

use std::net::IpAddr;

use axum::http::HeaderMap;
use ipnet::IpNet;

#[derive(Debug, Clone, Default)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    pub fn new(nets: Vec<IpNet>) -> Self {
        Self(nets)
    }

    fn trusts(&self, ip: IpAddr) -> bool {
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
