//! The agent's settings: one struct, parsed once from flags and `POLLER_*` variables.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

fn parse_duration(text: &str) -> Result<Duration, String> {
    shared_proto::duration::parse_duration(text)
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

#[derive(Debug, Clone, Parser)]
#[command(name = "poller-agent", version, about = "Outbound-only remote poller")]
pub struct AgentConfig {
    /// Base URL of central, e.g. https://central.example.com
    #[arg(long, env = "POLLER_CENTRAL_URL")]
    pub central_url: url::Url,

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

    /// Upload as soon as this many results are queued…
    #[arg(long, env = "POLLER_BATCH_SIZE", default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=5000))]
    pub batch_size: u32,

    /// …or this often, whichever comes first.
    #[arg(long, env = "POLLER_BATCH_INTERVAL", default_value = "10s", value_parser = parse_duration)]
    pub batch_interval: Duration,

    #[arg(long, env = "POLLER_HEARTBEAT_INTERVAL", default_value = "10s", value_parser = parse_duration)]
    pub heartbeat_interval: Duration,

    /// Local `/healthz`, `/readyz` and `/metrics`; `:0` picks a free port.
    #[arg(long, env = "POLLER_LISTEN", default_value = "127.0.0.1:9465")]
    pub listen: String,

    /// Most checks running at once.
    #[arg(long, env = "POLLER_MAX_CONCURRENCY", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub max_concurrency: u32,

    /// Most checks running at once against one host name.
    #[arg(long, env = "POLLER_MAX_CONCURRENT_PER_HOST", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub max_concurrent_per_host: u32,
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

    pub fn capability_list(&self) -> Vec<String> {
        match &self.capabilities {
            Some(list) => list.split(',').map(str::to_string).collect(),
            None => crate::checks::SUPPORTED_KINDS
                .iter()
                .map(|k| k.as_str().to_string())
                .collect(),
        }
    }
}
