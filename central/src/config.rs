//! Command line and environment: parsed once at start and passed down.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "central",
    version,
    about = "Control plane of the distributed poller system"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Settings of `serve`, also accepted without the subcommand.
    #[command(flatten)]
    pub serve: ServeArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the server (the default).
    Serve(ServeArgs),
    /// Run central with an embedded local agent and sample monitors.
    Demo(DemoArgs),
    /// Add a new key for signing poller access tokens; tokens signed with the previous keys
    /// stay valid until they expire, so no poller is logged out.
    RotateSigningKey(ServeArgs),
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    shared_proto::duration::parse_duration(text)
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to serve on; `:0` picks a free port.
    #[arg(long, env = "CENTRAL_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: String,

    /// `sqlite://…` (embedded default) or `postgres://…`.
    #[arg(
        long,
        env = "CENTRAL_DATABASE_URL",
        default_value = "sqlite://central.db"
    )]
    pub database_url: String,

    /// Bearer token of the settings API; generated and printed once when unset.
    #[arg(long, env = "CENTRAL_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,

    /// A poller is offline after this long without a heartbeat.
    #[arg(long, env = "CENTRAL_OFFLINE_AFTER", default_value = "60s", value_parser = parse_duration)]
    pub offline_after: Duration,

    /// A poller back from offline takes its monitors back after staying online this long.
    #[arg(long, env = "CENTRAL_FAILBACK_SETTLE", default_value = "2m", value_parser = parse_duration)]
    pub failback_settle: Duration,

    /// `register` and `token` calls allowed per second from one address (bursts of four
    /// times as many); 0 turns the limit off.
    #[arg(long, env = "CENTRAL_AUTH_RATE_LIMIT", default_value_t = 5.0)]
    pub auth_rate_limit: f64,

    /// Lifetime of poller access tokens (at most 15m).
    #[arg(long, env = "CENTRAL_ACCESS_TOKEN_TTL", default_value = "15m", value_parser = parse_duration)]
    pub access_token_ttl: Duration,

    /// Write the bound address here once listening (useful with `:0`).
    #[arg(long, env = "CENTRAL_PORT_FILE")]
    pub port_file: Option<PathBuf>,

    /// PEM certificate chain for HTTPS (with CENTRAL_TLS_KEY); plain HTTP when unset.
    #[arg(long, env = "CENTRAL_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,

    /// PEM private key for HTTPS.
    #[arg(long, env = "CENTRAL_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
}

/// `ServeArgs` alone, to get its defaults.
#[derive(Debug, Parser)]
struct ServeOnly {
    #[command(flatten)]
    serve: ServeArgs,
}

impl ServeArgs {
    /// The documented defaults (and `CENTRAL_*` variables, if set), for code that starts a
    /// central of its own (the demo, benchmarks) and overrides a few fields.
    pub fn defaults() -> ServeArgs {
        ServeOnly::parse_from(["central"]).serve
    }
}

#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Address of the demo's central.
    #[arg(long, env = "CENTRAL_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: String,

    /// Where the demo keeps central's database and the agent's queue.
    #[arg(long, default_value = "./demo-data")]
    pub data_dir: PathBuf,
}
