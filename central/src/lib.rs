//! Central: the control plane of the poller system.
//!
//! Requests flow one way: `api` (router and thin handlers) → `service` (domain rules) →
//! `store` (all SQL). Background work (`duties`) goes through `service` as well; what replicas
//! share besides the database is `cluster`'s.

// No `unsafe` anywhere in central: the SQLite store has no borrowed handles (`store::direct`).
#![forbid(unsafe_code)]

pub mod api;
pub mod cli;
pub mod cluster;
pub mod config;
#[cfg(feature = "demo")]
pub mod demo;
pub mod domain;
pub mod duties;
pub mod error;
pub mod metrics;
pub mod notify;
pub mod server;
pub mod service;
pub mod store;
pub mod telemetry;
pub mod web;

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use tokio::net::TcpListener;

use config::{Cli, Command, ServeArgs};
use service::App;

/// Runs the subcommand the user asked for (`serve` when none).
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command.unwrap_or(Command::Serve(cli.serve)) {
        Command::Serve(args) => serve(args).await,
        #[cfg(feature = "demo")]
        Command::Demo(args) => demo::run(args).await,
        Command::Openapi => {
            print!("{}", api::openapi::DOCUMENT.as_str());
            Ok(())
        }
        Command::Apply(args) => match cli::apply(&args).await? {
            cli::Outcome::Drift => Err(anyhow::Error::new(Drift)),
            _ => Ok(()),
        },
        Command::Export(args) => cli::export(&args).await,
        Command::Backup(args) => {
            let (url, to) = (args.database.database_url.clone(), args.to.clone());
            let bytes =
                tokio::task::spawn_blocking(move || store::backup_sqlite(&url, &to)).await??;
            println!(
                "copied the database to {} ({bytes} bytes); to restore, stop central and run \
                 `central restore --from {}`",
                args.to.display(),
                args.to.display()
            );
            Ok(())
        }
        Command::Restore(args) => {
            let (url, from) = (args.database.database_url.clone(), args.from.clone());
            let now_ms = chrono::Utc::now().timestamp_millis();
            let bytes =
                tokio::task::spawn_blocking(move || store::restore_sqlite(&url, &from, now_ms))
                    .await??;
            println!(
                "restored the database from {} ({bytes} bytes); start central: agents stop \
                 the monitors it does not have within a long poll and send again what they \
                 delivered after the copy",
                args.from.display()
            );
            Ok(())
        }
        Command::ConfigSchema => {
            let openapi: serde_json::Value = serde_json::from_str(api::openapi::DOCUMENT.as_str())?;
            println!(
                "{}",
                serde_json::to_string_pretty(&cli::file::schema(&openapi))?
            );
            Ok(())
        }
        Command::RotateSigningKey(args) => {
            let store = store::Store::connect(&args.database_url).await?;
            let kid = service::rotate_signing_key(&store).await?;
            println!(
                "new signing key {kid}: running centrals sign with it within a minute, and tokens \
                 signed with the previous keys stay valid until they expire"
            );
            Ok(())
        }
    }
}

/// `central apply --dry-run` found the server differing from the file: the process exits
/// with 2 (not 1, an error), so that CI can tell drift from failure.
#[derive(Debug, thiserror::Error)]
#[error("the server differs from the file")]
pub struct Drift;

/// A started central: its address, and a handle that stops it.
pub struct Running {
    pub addr: SocketAddr,
    /// Where `/metrics` is served when `CENTRAL_METRICS_LISTEN` gives it a listener of its own.
    pub metrics_addr: Option<SocketAddr>,
    pub app: Arc<App>,
    pub task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

/// Opens the store, prepares secrets and starts serving; returns once the socket is bound.
pub async fn start(args: ServeArgs) -> anyhow::Result<Running> {
    let acceptor = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(server::tls::acceptor(
            cert,
            key,
            args.tls_client_ca.as_deref(),
        )?),
        (None, None) if args.tls_client_ca.is_some() => anyhow::bail!(
            "CENTRAL_TLS_CLIENT_CA needs HTTPS: set CENTRAL_TLS_CERT and CENTRAL_TLS_KEY too"
        ),
        (None, None) => None,
        _ => anyhow::bail!("set both CENTRAL_TLS_CERT and CENTRAL_TLS_KEY for HTTPS, or neither"),
    };
    let app = App::open(&args).await?;
    let listener = TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let addr = listener.local_addr()?;
    tracing::info!(%addr, https = acceptor.is_some(), "central listening");
    if let Some(path) = &args.port_file {
        std::fs::write(path, addr.to_string())
            .with_context(|| format!("cannot write the port file {}", path.display()))?;
    }
    let metrics_listener = match &args.metrics_listen {
        Some(address) => {
            let listener = TcpListener::bind(address)
                .await
                .with_context(|| format!("cannot listen on CENTRAL_METRICS_LISTEN {address}"))?;
            tracing::info!(addr = %listener.local_addr()?, "metrics listening");
            Some(listener)
        }
        None => None,
    };
    let metrics_addr = metrics_listener
        .as_ref()
        .map(TcpListener::local_addr)
        .transpose()?;
    duties::start(app.clone(), addr);
    let limits = server::ServerLimits {
        header_read_timeout: args.header_read_timeout,
        send_timeout: args.send_timeout,
        handshake_timeout: server::tls::HANDSHAKE_TIMEOUT,
        connections: server::places::Places::new(
            server::connection_cap(args.max_connections),
            args.max_connections_per_client as usize,
        ),
        proxies: server::client_addr::TrustedProxies::new(args.trusted_proxies.clone()),
        refused: app.metrics.connections_refused.clone(),
    };
    if let Some(listener) = metrics_listener {
        let router = api::metrics_router(app.clone());
        // Places of its own, so that a flood on the public listener cannot keep scrapes out.
        let limits = server::ServerLimits {
            connections: server::places::Places::new(
                1024,
                args.max_connections_per_client as usize,
            ),
            ..limits.clone()
        };
        tokio::spawn(server::serve(
            listener,
            None,
            router,
            limits,
            shutdown_signal(),
        ));
    }
    let options = api::HttpOptions::from_args(&args);
    let long_polls = Arc::new(api::LongPolls::new(
        options.max_long_polls,
        options.max_long_polls_per_poller,
    ));
    let router = api::router(app.clone(), &options, long_polls.clone());
    let stopping = async move {
        shutdown_signal().await;
        long_polls.close();
    };
    let task = tokio::spawn(async move {
        server::serve(listener, acceptor, router, limits, stopping).await;
        Ok(())
    });
    Ok(Running {
        addr,
        metrics_addr,
        app,
        task,
    })
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let running = start(args).await?;
    running.task.await?
}

/// Resolves on Ctrl-C or SIGTERM (what `docker stop` sends).
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = terminate => {},
    }
    tracing::info!("shutting down");
}
