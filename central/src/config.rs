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
    #[cfg(feature = "demo")]
    Demo(DemoArgs),
    /// Add a new key for signing poller access tokens; tokens signed with the previous keys
    /// stay valid until they expire, so no poller is logged out.
    RotateSigningKey(ServeArgs),
    /// Print the OpenAPI document of both APIs (what `/api/openapi.json` serves).
    Openapi,
    /// Apply a configuration file (monitors as code) to a running central: shows the plan,
    /// then makes it so. Exit code 2 with `--dry-run` when the server differs from the file.
    Apply(ApplyArgs),
    /// Write the running configuration as a file for `apply` (secrets as `${…}` references).
    Export(ExportArgs),
    /// Print the JSON Schema of the configuration file.
    ConfigSchema,
    /// Write a consistent copy of central's SQLite database while it runs. (PostgreSQL: use
    /// pg_dump or continuous archiving.)
    Backup(BackupArgs),
    /// Put a copy made by `backup` in the place of central's SQLite database; refused while a
    /// central runs on it. (PostgreSQL: use pg_restore or point-in-time recovery.)
    Restore(RestoreArgs),
}

#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// The database to replace, as central runs on it.
    #[command(flatten)]
    pub database: DatabaseArg,
    /// The copy to put back (made by `central backup`).
    #[arg(long)]
    pub from: std::path::PathBuf,
}

#[derive(Debug, Args)]
pub struct BackupArgs {
    /// The database to copy, as central runs on it.
    #[command(flatten)]
    pub database: DatabaseArg,
    /// The file to write; it must not exist.
    #[arg(long)]
    pub to: std::path::PathBuf,
}

/// The database a maintenance command works on, named as `serve` takes it.
#[derive(Debug, Args)]
pub struct DatabaseArg {
    #[arg(
        long,
        env = "CENTRAL_DATABASE_URL",
        default_value = "sqlite://central.db"
    )]
    pub database_url: String,
}

fn parse_public_url(text: &str) -> Result<String, String> {
    let url = url::Url::parse(text).map_err(|e| format!("`{text}` is not a URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(format!("`{text}` must be an http(s) URL with a host"));
    }
    Ok(text.trim_end_matches('/').to_string())
}

fn parse_mail_url(text: &str) -> Result<String, String> {
    if !shared_proto::target::is_match(shared_proto::target::SMTP_URL_PATTERN, text) {
        return Err(format!(
            "`{text}` must be an smtp:// or smtps:// URL, like smtps://user:password@mail.example.com"
        ));
    }
    Ok(text.to_string())
}

fn parse_mail_from(text: &str) -> Result<String, String> {
    text.parse::<lettre::message::Mailbox>()
        .map(|_| text.to_string())
        .map_err(|e| format!("`{text}` is not a mail address: {e}"))
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

    /// An enrolment secret agents may register with (`POLLER_REGISTRATION_TOKEN`), for
    /// deployments that start central and agents together; at least 16 characters, reusable,
    /// stored only as a hash. Changing it retires the previous value; unsetting it disables it.
    #[arg(long, env = "CENTRAL_REGISTRATION_TOKEN", hide_env_values = true)]
    pub registration_token: Option<String>,

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

    /// Failed authentications (`401` to a request without valid credentials) allowed per
    /// minute from one client, in a burst as large; past them its unauthenticated requests are
    /// answered 429 until the bucket refills. 0 turns the limit off.
    #[arg(long, env = "CENTRAL_AUTH_FAILURES_PER_MINUTE", default_value_t = 10)]
    pub auth_failures_per_minute: u32,

    /// Failed authentications allowed per minute from all clients together (against guessing
    /// spread over many addresses); past them each client may fail once a minute until half
    /// of them have come back (a valid credential still goes through). 0 turns the limit off.
    #[arg(
        long,
        env = "CENTRAL_AUTH_FAILURES_GLOBAL_PER_MINUTE",
        default_value_t = 600
    )]
    pub auth_failures_global_per_minute: u32,

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

    /// PEM CA certificate(s): when set (with HTTPS), the poller API requires a client
    /// certificate signed by one of them (mutual TLS).
    #[arg(long, env = "CENTRAL_TLS_CLIENT_CA")]
    pub tls_client_ca: Option<PathBuf>,

    /// Requests from pollers served at once, and as many again from operators (long polls
    /// for assignments excepted); beyond this central answers 503 with `Retry-After` instead
    /// of queueing without bound.
    #[arg(long, env = "CENTRAL_MAX_CONCURRENT_REQUESTS", default_value_t = 512,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_concurrent_requests: u32,

    /// Requests without credentials served at once (logging in, registering an agent,
    /// exchanging a refresh token); they never take the places of pollers or operators.
    #[arg(long, env = "CENTRAL_MAX_UNAUTHENTICATED_REQUESTS", default_value_t = 64,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_unauthenticated_requests: u32,

    /// A request not answered this long after its headers arrived (its body included) is
    /// answered 408; assignment long polls end on their own first.
    #[arg(long, env = "CENTRAL_REQUEST_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub request_timeout: Duration,

    /// A connection whose request headers have not all arrived this long after central began
    /// waiting for them is closed; it is also how long an idle keep-alive connection is kept.
    #[arg(long, env = "CENTRAL_HEADER_READ_TIMEOUT", default_value = "20s", value_parser = parse_duration)]
    pub header_read_timeout: Duration,

    /// A connection that takes none of an answer's bytes for this long is closed: a client
    /// that stops reading holds no connection, task or buffered answer for longer.
    #[arg(long, env = "CENTRAL_SEND_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub send_timeout: Duration,

    /// Connections held at once; more are closed as soon as they are accepted. Lowered, with
    /// a warning, to what the open-files limit leaves room for.
    #[arg(long, env = "CENTRAL_MAX_CONNECTIONS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,

    /// Connections one client (an IPv4 address, or an IPv6 /64) may hold at once; a trusted
    /// proxy (`CENTRAL_TRUSTED_PROXIES`) counts only against CENTRAL_MAX_CONNECTIONS.
    #[arg(long, env = "CENTRAL_MAX_CONNECTIONS_PER_CLIENT", default_value_t = 256,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections_per_client: u32,

    /// Assignment long polls held open at once (one per agent); beyond this a long poll is
    /// answered at once, as if it had not asked to wait.
    #[arg(long, env = "CENTRAL_MAX_LONG_POLLS", default_value_t = 10_000)]
    pub max_long_polls: u32,

    /// Assignment long polls one poller may hold open at once (its agent holds one); beyond
    /// this its long poll is answered at once, as if it had not asked to wait.
    #[arg(long, env = "CENTRAL_MAX_LONG_POLLS_PER_POLLER", default_value_t = 2,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_long_polls_per_poller: u32,

    /// The longest an operator's command (check now, reset, test) waits for the pollers'
    /// answers before answering `202`; a longer `wait` is cut to this. Each waiting request
    /// holds one of the operators' places.
    #[arg(long, env = "CENTRAL_MAX_COMMAND_WAIT", default_value = "25s", value_parser = parse_duration)]
    pub max_command_wait: Duration,

    /// Heartbeats one poller may send per minute (and in ten seconds' burst); beyond them
    /// its heartbeats are answered 429 with Retry-After. Agents send one every
    /// POLLER_HEARTBEAT_INTERVAL (10 s by default). 0 turns the limit off.
    #[arg(
        long,
        env = "CENTRAL_POLLER_HEARTBEATS_PER_MINUTE",
        default_value_t = 60
    )]
    pub poller_heartbeats_per_minute: u32,

    /// Comma-separated CIDRs of reverse proxies whose `X-Forwarded-For` is believed (for the
    /// per-client limits); from anyone else the header is ignored.
    #[arg(long, env = "CENTRAL_TRUSTED_PROXIES", value_delimiter = ',', value_parser = parse_cidr)]
    pub trusted_proxies: Vec<ipnet::IpNet>,

    /// Comma-separated CIDRs notifications may be sent to (webhook, chat, Alertmanager and
    /// SMTP hosts, judged on the address connected to); unset, anywhere but loopback,
    /// private, link-local and other local networks.
    #[arg(long, env = "CENTRAL_NOTIFY_ALLOWED_NETWORKS", value_delimiter = ',', value_parser = parse_cidr)]
    pub notify_allowed_networks: Vec<ipnet::IpNet>,

    /// Networks that status pages' webhook subscribers may be sent to besides the public
    /// internet (CIDRs). They are strangers' addresses: unlike channels, none of the local
    /// neighbourhood by default, whatever `CENTRAL_NOTIFY_ALLOWED_NETWORKS` allows channels.
    #[arg(long, env = "CENTRAL_SUBSCRIBER_ALLOWED_NETWORKS", value_delimiter = ',', value_parser = parse_cidr)]
    pub subscriber_allowed_networks: Vec<ipnet::IpNet>,

    /// A DNS server (`address:port`) that resolves notification receivers' names, instead of
    /// the system's resolver (e.g. a filtering resolver for outbound traffic). Nothing is
    /// cached: each connection asks anew, and connects to what that answer permits.
    #[arg(long, env = "CENTRAL_NOTIFY_DNS_SERVER")]
    pub notify_dns_server: Option<std::net::SocketAddr>,

    /// The address operators reach central at (e.g. `https://central.example.com`), for links
    /// in notifications (Alertmanager's `generatorURL`); unset, messages carry no link.
    #[arg(long, env = "CENTRAL_PUBLIC_URL", value_parser = parse_public_url)]
    pub public_url: Option<String>,

    /// The mail server central sends its own mail through (status pages' subscribers):
    /// `smtp://host:port` (`?tls=required` for STARTTLS) or `smtps://host:port`, with
    /// `user:password@` when the server wants a login. Unset, pages take no email subscribers.
    #[arg(long, env = "CENTRAL_MAIL_URL", value_parser = parse_mail_url, requires = "mail_from")]
    pub mail_url: Option<String>,

    /// The sender of that mail, like `status@example.com`.
    #[arg(long, env = "CENTRAL_MAIL_FROM", requires = "mail_url", value_parser = parse_mail_from)]
    pub mail_from: Option<String>,

    /// How often an Alertmanager channel's firing alerts are sent again while they last; each
    /// is sent to end 4 intervals later unless sent again, as Prometheus does.
    #[arg(long, env = "CENTRAL_ALERTMANAGER_RESEND_INTERVAL", default_value = "1m", value_parser = parse_duration)]
    pub alertmanager_resend_interval: Duration,

    /// Raw results older than this are pruned, except each status change and the result
    /// before it; the rollups keep uptime and latency history.
    #[arg(long, env = "CENTRAL_RESULTS_RETENTION", default_value = "7d", value_parser = parse_duration)]
    pub results_retention: Duration,

    /// How far back minute history reaches. Minutes are derived from the raw results when
    /// read, so they reach no further than `CENTRAL_RESULTS_RETENTION` either.
    #[arg(long, env = "CENTRAL_HISTORY_MINUTES_RETENTION", default_value = "48h", value_parser = parse_duration)]
    pub minute_rollups_retention: Duration,

    /// How long hour buckets of history are kept.
    #[arg(long, env = "CENTRAL_HISTORY_HOURS_RETENTION", default_value = "90d", value_parser = parse_duration)]
    pub hour_rollups_retention: Duration,

    /// How long day buckets of history (and kept status changes) are kept.
    #[arg(long, env = "CENTRAL_HISTORY_DAYS_RETENTION", default_value = "730d", value_parser = parse_duration)]
    pub day_rollups_retention: Duration,

    /// Single sign-on with an OpenID provider (`CENTRAL_OIDC_*`).
    #[command(flatten)]
    pub sso: SsoArgs,

    /// How long audit log entries (who changed what) are kept.
    #[arg(long, env = "CENTRAL_AUDIT_RETENTION", default_value = "365d", value_parser = parse_duration)]
    pub audit_retention: Duration,

    /// Bearer token Prometheus scrapes `/metrics` on CENTRAL_LISTEN with (the admin token
    /// works too); hard to guess, like the admin token. Without it, only the admin token
    /// opens `/metrics` there. Not needed on CENTRAL_METRICS_LISTEN.
    #[arg(long, env = "CENTRAL_METRICS_TOKEN", hide_env_values = true)]
    pub metrics_token: Option<String>,

    /// Serve `/metrics` on this address only (and not on CENTRAL_LISTEN), so that it need not
    /// be public.
    #[arg(long, env = "CENTRAL_METRICS_LISTEN")]
    pub metrics_listen: Option<String>,
}

/// A CIDR (`10.0.0.0/8`) or a single address (`192.0.2.7`).
fn parse_cidr(text: &str) -> Result<ipnet::IpNet, String> {
    let text = text.trim();
    text.parse::<ipnet::IpNet>()
        .or_else(|_| text.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
        .map_err(|_| format!("`{text}` is not a CIDR like 10.0.0.0/8 or an IP address"))
}

/// Single sign-on: central as a relying party of one OpenID provider. Off unless the issuer
/// is set; then the client id and secret are needed too.
#[derive(Debug, Clone, Args)]
pub struct SsoArgs {
    /// The provider's issuer URL (its discovery document is at
    /// `<issuer>/.well-known/openid-configuration`).
    #[arg(long = "oidc-issuer", env = "CENTRAL_OIDC_ISSUER", value_parser = parse_public_url)]
    pub issuer: Option<String>,

    /// Central's client id at the provider.
    #[arg(long = "oidc-client-id", env = "CENTRAL_OIDC_CLIENT_ID")]
    pub client_id: Option<String>,

    /// Central's client secret at the provider.
    #[arg(
        long = "oidc-client-secret",
        env = "CENTRAL_OIDC_CLIENT_SECRET",
        hide_env_values = true
    )]
    pub client_secret: Option<String>,

    /// Where the provider sends the browser back; register it at the provider. Default:
    /// `<CENTRAL_PUBLIC_URL>/login/sso/callback`.
    #[arg(long = "oidc-redirect-url", env = "CENTRAL_OIDC_REDIRECT_URL", value_parser = parse_public_url)]
    pub redirect_url: Option<String>,

    /// Scopes asked for, space-separated (`openid` is always asked for).
    #[arg(
        long = "oidc-scopes",
        env = "CENTRAL_OIDC_SCOPES",
        default_value = "openid email profile"
    )]
    pub scopes: String,

    /// The ID token claim whose value (a string or a list of strings) maps to a role.
    #[arg(
        long = "oidc-role-claim",
        env = "CENTRAL_OIDC_ROLE_CLAIM",
        default_value = "groups"
    )]
    pub role_claim: String,

    /// Claim values and their roles, `value=role` separated by commas
    /// (`ops-admins=admin,ops=editor`); the highest role matched wins.
    #[arg(long = "oidc-roles", env = "CENTRAL_OIDC_ROLES", default_value = "")]
    pub roles: String,

    /// The role of someone whose claim maps to none: `none` refuses them (the default: a
    /// provider such as Google signs in anyone with an account), or `viewer`, `editor`, `admin`.
    #[arg(
        long = "oidc-default-role",
        env = "CENTRAL_OIDC_DEFAULT_ROLE",
        default_value = "none"
    )]
    pub default_role: String,

    /// How often each linked user is checked with the provider, with the refresh token their
    /// last sign-in got: someone removed there (or mapped to no role) loses their sessions,
    /// keys and password here then, without signing in again; someone mapped to less loses
    /// what they held. Needs a provider that issues refresh tokens (most do when
    /// `offline_access` is among CENTRAL_OIDC_SCOPES). `0s` turns it off.
    #[arg(
        long = "oidc-recheck",
        env = "CENTRAL_OIDC_RECHECK",
        default_value = "1h",
        value_parser = parse_duration
    )]
    pub recheck: Duration,
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

    /// The defaults with a SQLite database `central.db` in `dir` (tests' centrals).
    #[cfg(test)]
    pub fn with_sqlite_in(dir: &std::path::Path) -> ServeArgs {
        let mut args = Self::defaults();
        args.database_url = format!("sqlite://{}", dir.join("central.db").display());
        args
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

// The arguments of `apply` and `export`, the client commands (`cli`): parsed here with the
// rest of the command line, used there.

/// The prefix of the environment variables a configuration file may name (`${CENTRAL_VAR_…}`).
pub const DEFAULT_ENV_PREFIX: &str = "CENTRAL_VAR_";

/// Where central is and who is calling.
#[derive(Debug, Clone, Args)]
pub struct ServerArgs {
    /// Central's address.
    #[arg(long, env = "CENTRAL_URL", default_value = "http://127.0.0.1:8080")]
    pub server: String,
    /// An API key (`pkey_…`) or the admin token.
    #[arg(long, env = "CENTRAL_API_KEY", hide_env_values = true)]
    pub api_key: String,
}

#[derive(Debug, Clone, Args)]
pub struct ApplyArgs {
    /// The configuration file (`-`: standard input).
    #[arg(short = 'f', long = "file")]
    pub file: String,
    /// Only show the plan; exit with 2 when the server differs from the file (for CI).
    #[arg(long)]
    pub dry_run: bool,
    /// Delete what an earlier file made and this one no longer has (never without it).
    #[arg(long)]
    pub prune: bool,
    #[command(flatten)]
    pub variables: VariableArgs,
    #[command(flatten)]
    pub server: ServerArgs,
}

/// Which environment variables a file may name as `${NAME}`.
#[derive(Debug, Clone, Args)]
pub struct VariableArgs {
    /// `apply` takes `${NAME}` only for names that start with this (and `export` writes its
    /// references with it), so that a file merged from a pull request cannot read CI's
    /// other secrets; `CENTRAL_API_KEY` and `CENTRAL_ADMIN_TOKEN` are never taken.
    #[arg(
        long = "env-prefix",
        env = "CENTRAL_APPLY_ENV_PREFIX",
        default_value = DEFAULT_ENV_PREFIX
    )]
    pub env_prefix: String,
}

#[derive(Debug, Clone, Args)]
pub struct ExportArgs {
    /// Where to write the file (default: standard output).
    #[arg(short = 'o', long = "output")]
    pub output: Option<String>,
    #[command(flatten)]
    pub variables: VariableArgs,
    #[command(flatten)]
    pub server: ServerArgs,
}
