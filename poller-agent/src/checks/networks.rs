//! Where checks may connect. By default anywhere but the cloud's instance metadata services,
//! which hand the machine's credentials to whoever asks from inside it: an agent runs inside
//! networks, and an operator's test run (`POST /api/v1/monitors/test`) shows what a check
//! read, so a metadata address would turn a monitor into a way to read them.
//! `POLLER_ALLOWED_NETWORKS` replaces that with an allow list (which may name a metadata
//! address, for an operator who means to watch it).
//!
//! Judged on the address connected to: names are resolved first and only permitted addresses
//! are used (`http`'s resolver, `tcp` and `tls` through `addresses`), IP literals and
//! redirects to them are judged as such. `icmp` and `dns` checks read nothing from their
//! target that could carry a credential and are not restricted. Owns the policy only.

use std::net::{IpAddr, SocketAddr};

use ipnet::IpNet;

/// The metadata services of the clouds an agent may run in: AWS (and GCP, Azure, OpenStack,
/// DigitalOcean, Hetzner, Oracle) at 169.254.169.254, AWS over IPv6, ECS tasks and EKS pod
/// identity, Azure's wire server, Alibaba, Oracle's other address.
const METADATA: &[&str] = &[
    "169.254.169.254/32",
    "fd00:ec2::254/128",
    "169.254.170.2/32",
    "169.254.170.23/32",
    "fd00:ec2::23/128",
    "168.63.129.16/32",
    "100.100.100.200/32",
    "192.0.0.192/32",
    // Tencent Cloud.
    "169.254.0.23/32",
];

/// The start of every refusal's message, so that callers can tell one from a network error.
pub const REFUSED: &str = "refused by the agent's network policy";

#[derive(Debug, Clone)]
pub struct Networks {
    /// `POLLER_ALLOWED_NETWORKS`; empty: anywhere outside `METADATA`.
    allowed: Vec<IpNet>,
    denied: Vec<IpNet>,
}

impl Default for Networks {
    fn default() -> Self {
        Self::new(Vec::new())
    }
}

impl Networks {
    pub fn new(allowed: Vec<IpNet>) -> Self {
        Self {
            allowed,
            denied: METADATA
                .iter()
                .map(|net| net.parse().expect("the metadata networks are valid"))
                .collect(),
        }
    }

    /// Whether a check may connect to `ip` (IPv4 written as IPv6, mapped or through the
    /// well-known NAT64 prefix `64:ff9b::/96`, is judged as the IPv4 address it reaches).
    pub fn permits(&self, ip: IpAddr) -> bool {
        let ip = as_reached(ip);
        if self.allowed.is_empty() {
            !self.denied.iter().any(|net| net.contains(&ip))
        } else {
            self.allowed.iter().any(|net| net.contains(&ip))
        }
    }

    /// Why `ip` is refused, for a check's message.
    pub fn refusal(&self, ip: IpAddr) -> String {
        let ip = as_reached(ip);
        if self.allowed.is_empty() {
            format!(
                "{REFUSED}: {ip} is a cloud metadata service, which hands out credentials \
                 (POLLER_ALLOWED_NETWORKS may name it)"
            )
        } else {
            format!("{REFUSED}: {ip} is outside POLLER_ALLOWED_NETWORKS")
        }
    }

    /// The permitted ones of `found`, or the refusal of the first when none is.
    pub fn keep(&self, found: Vec<SocketAddr>) -> Result<Vec<SocketAddr>, String> {
        let first = found.first().map(SocketAddr::ip);
        let kept: Vec<SocketAddr> = found.into_iter().filter(|a| self.permits(a.ip())).collect();
        match (kept.is_empty(), first) {
            (true, Some(first)) => Err(self.refusal(first)),
            _ => Ok(kept),
        }
    }

    /// Resolves `host` (a name or an IP literal, bracketed or not) at `port` to the addresses
    /// a check may connect to. `Ok(Err(refusal))` when every address is refused.
    pub async fn addresses(
        &self,
        host: &str,
        port: u16,
    ) -> std::io::Result<Result<Vec<SocketAddr>, String>> {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let found: Vec<SocketAddr> = match bare.parse::<IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, port)],
            Err(_) => tokio::net::lookup_host((bare, port)).await?.collect(),
        };
        Ok(self.keep(found))
    }
}

/// The address a packet to `ip` reaches: IPv4 for a mapped address or one in the well-known
/// NAT64 prefix (RFC 6052), which a NAT64 gateway forwards to the IPv4 address in its last 32
/// bits.
fn as_reached(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) if v6.segments()[..6] == [0x64, 0xff9b, 0, 0, 0, 0] => {
            let [.., a, b, c, d] = v6.octets();
            IpAddr::V4(std::net::Ipv4Addr::new(a, b, c, d))
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn metadata_services_are_refused_and_everything_else_is_not() {
        let networks = Networks::default();
        for refused in [
            "169.254.169.254",
            "::ffff:169.254.169.254",
            "fd00:ec2::254",
            "169.254.170.2",
            "100.100.100.200",
            "64:ff9b::a9fe:a9fe",
            "169.254.0.23",
        ] {
            assert!(!networks.permits(ip(refused)), "{refused}");
        }
        for permitted in ["127.0.0.1", "10.0.0.1", "169.254.169.253", "::1"] {
            assert!(networks.permits(ip(permitted)), "{permitted}");
        }
        let refusal = networks.refusal(ip("169.254.169.254"));
        assert!(refusal.starts_with(REFUSED) && refusal.contains("POLLER_ALLOWED_NETWORKS"));
    }

    #[test]
    fn an_allow_list_replaces_the_default_and_may_name_a_metadata_address() {
        let networks = Networks::new(vec![
            "169.254.169.254/32".parse().unwrap(),
            "127.0.0.0/8".parse().unwrap(),
        ]);
        assert!(networks.permits(ip("169.254.169.254")));
        assert!(networks.permits(ip("127.0.0.2")));
        assert!(!networks.permits(ip("10.0.0.1")));
    }

    #[tokio::test]
    async fn names_and_literals_are_judged_by_the_addresses_they_are() {
        let networks = Networks::default();
        let refused = networks
            .addresses("169.254.169.254", 80)
            .await
            .unwrap()
            .unwrap_err();
        assert!(refused.contains("169.254.169.254"), "{refused}");
        let kept = networks.addresses("[::1]", 80).await.unwrap().unwrap();
        assert_eq!(kept, vec!["[::1]:80".parse().unwrap()]);
        let kept = networks.addresses("localhost", 80).await.unwrap().unwrap();
        assert!(!kept.is_empty());
    }
}
