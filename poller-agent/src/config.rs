//! The agent's settings: one struct, parsed once from flags and `POLLER_*` variables.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

fn parse_duration(text: &str) -> Result<Duration, String> {
    shared_proto::duration::parse_duration(text)
}

/// `1073741824`, `512M`, `1G` (powers of 1024).
fn parse_bytes(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let (number, unit) = text.split_at(
        text.find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len()),
    );
    let factor: u64 = match unit
        .trim()
        .to_ascii_uppercase()
        .trim_end_matches("IB")
        .trim_end_matches('B')
    {
        "" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        other => return Err(format!("unknown size unit `{other}`; write 512M or 2G")),
    };
    number
        .parse::<u64>()
        .map(|n| n.saturating_mul(factor))
        .map_err(|_| format!("`{text}` is not a size; write 512M or 2G"))
}

fn parse_capabilities(text: &str) -> Result<String, String> {
    let list: Vec<String> = text
        .split(',')
        .map(|c| c.trim().to_string())
        .filter(|c| !c.is_empty())
        .collect();
    shared_proto::poller_api::validate_capabilities(&list).map_err(|e| e.message)?;
    Ok(list.join(","))
}

/// TLS towards central: an extra CA to trust, and a client certificate for mutual TLS.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct UplinkTls {
    /// PEM file of a CA to trust for central's HTTPS certificate, besides the public ones
    /// (for a central with a private certificate).
    #[arg(long, env = "POLLER_CA_CERT")]
    pub ca_cert: Option<PathBuf>,

    /// PEM client certificate (chain) shown to central, for a central that requires one
    /// (`CENTRAL_TLS_CLIENT_CA`); with POLLER_TLS_KEY.
    #[arg(long, env = "POLLER_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// PEM private key of POLLER_TLS_CERT.
    #[arg(long, env = "POLLER_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

#[derive(Debug, Clone, Parser)]
#[command(name = "poller-agent", version, about = "Outbound-only remote poller")]
pub struct AgentConfig {
    /// Base URL of central, e.g. https://central.example.com
    #[arg(long, env = "POLLER_CENTRAL_URL")]
    pub central_url: url::Url,

    /// How the agent's HTTPS connections to central are secured.
    #[command(flatten)]
    pub tls: UplinkTls,

    /// One-time registration token; needed on first start only.
    #[arg(long, env = "POLLER_REGISTRATION_TOKEN", hide_env_values = true)]
    pub registration_token: Option<String>,

    /// Display name; defaults to the host name.
    #[arg(long, env = "POLLER_NAME")]
    pub name: Option<String>,

    #[arg(long, env = "POLLER_REGION")]
    pub region: Option<String>,

    #[arg(long, env = "POLLER_DATACENTER")]
    pub datacenter: Option<String>,

    /// Comma list of capabilities; defaults to every check kind this agent implements.
    #[arg(long, env = "POLLER_CAPABILITIES", value_parser = parse_capabilities)]
    pub capabilities: Option<String>,

    /// Queue, assignment cache and credentials live here.
    #[arg(long, env = "POLLER_DATA_DIR", default_value = "./poller-data")]
    pub data_dir: PathBuf,

    /// Undelivered results older than this are pruned (and counted).
    #[arg(long, env = "POLLER_RETENTION", default_value = "24h", value_parser = parse_duration)]
    pub retention: Duration,

    /// Past this many bytes of queued results the oldest are dropped (and counted).
    #[arg(long, env = "POLLER_QUEUE_MAX_BYTES", default_value = "1G", value_parser = parse_bytes)]
    pub queue_max_bytes: u64,

    /// Upload as soon as this many results are queued…
    #[arg(long, env = "POLLER_BATCH_SIZE", default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=5000))]
    pub batch_size: u32,

    /// …or this often, whichever comes first.
    #[arg(long, env = "POLLER_BATCH_INTERVAL", default_value = "10s", value_parser = parse_duration)]
    pub batch_interval: Duration,

    /// A result central refused is kept (never deleted for the refusal) and offered again this
    /// often, until central takes it or `POLLER_RETENTION` ends it.
    #[arg(long, env = "POLLER_REFUSED_RETRY", default_value = "10m", value_parser = parse_duration)]
    pub refused_retry: Duration,

    /// A delivered result is kept this long (`0s`: not at all) and sent again when central
    /// says it was restored from a copy that may lack it; central keeps each result once.
    /// Make it at least as long as the time between central's backups.
    #[arg(long, env = "POLLER_REDELIVERY_WINDOW", default_value = "24h", value_parser = parse_duration)]
    pub redelivery_window: Duration,

    #[arg(long, env = "POLLER_HEARTBEAT_INTERVAL", default_value = "10s", value_parser = parse_duration)]
    pub heartbeat_interval: Duration,

    /// Local `/healthz`, `/readyz` and `/metrics`; `:0` picks a free port.
    #[arg(long, env = "POLLER_LISTEN", default_value = "127.0.0.1:9465")]
    pub listen: String,

    /// Most checks running at once.
    #[arg(long, env = "POLLER_MAX_CONCURRENCY", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub max_concurrency: u32,

    /// Which ICMP sockets `icmp` checks use: `auto` (unprivileged where
    /// `net.ipv4.ping_group_range` allows, else raw with `CAP_NET_RAW`), `unprivileged`, `raw`,
    /// or `off`. Without one the agent does not advertise `icmp`.
    #[arg(long, env = "POLLER_ICMP_SOCKET", value_enum, default_value_t = crate::checks::icmp::SocketChoice::Auto)]
    pub icmp_socket: crate::checks::icmp::SocketChoice,

    /// Most checks running at once against one host name.
    #[arg(long, env = "POLLER_MAX_CONCURRENT_PER_HOST", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub max_concurrent_per_host: u32,

    /// Comma list of CIDRs `http`, `tcp` and `tls` checks may connect to, replacing the
    /// default, which is anywhere except the clouds' instance metadata services
    /// (`169.254.169.254`, `fd00:ec2::254`, …: they hand out the machine's credentials).
    #[arg(long, env = "POLLER_ALLOWED_NETWORKS", value_delimiter = ',')]
    pub allowed_networks: Vec<ipnet::IpNet>,
}

impl AgentConfig {
    pub fn display_name(&self) -> String {
        self.name
            .clone()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .or_else(|| {
                std::fs::read_to_string("/etc/hostname")
                    .ok()
                    .map(|h| h.trim().to_string())
            })
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "poller".to_string())
    }

    /// The capabilities to advertise: `POLLER_CAPABILITIES`, or every kind this agent runs;
    /// `icmp` only when it has an ICMP socket (`icmp`).
    pub fn capability_list(&self, icmp: bool) -> Vec<String> {
        let listed: Vec<String> = match &self.capabilities {
            Some(list) => list.split(',').map(str::to_string).collect(),
            None => crate::checks::SUPPORTED_KINDS
                .iter()
                .map(|k| k.as_str().to_string())
                .collect(),
        };
        listed
            .into_iter()
            .filter(|c| icmp || c != shared_proto::CheckKind::Icmp.as_str())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::parse_bytes;

    #[test]
    fn sizes_accept_units() {
        assert_eq!(parse_bytes("1024"), Ok(1024));
        assert_eq!(parse_bytes("512M"), Ok(512 << 20));
        assert_eq!(parse_bytes("2GiB"), Ok(2 << 30));
        assert_eq!(parse_bytes("1 KB"), Ok(1024));
        assert!(parse_bytes("lots").is_err());
        assert!(parse_bytes("5X").is_err());
    }
}
