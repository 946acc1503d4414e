//! Wires the agent together: local endpoints, credentials, engine, sync and upload.

use std::future::Future;
use std::sync::Arc;

use anyhow::Context;
use shared_proto::poller_api::RegisterRequest;
use tokio::sync::{mpsc, watch, Notify};
use tokio::task::JoinSet;

use crate::checks::Checker;
use crate::config::AgentConfig;
use crate::engine::runner::{EngineReport, QueueWriter, ResultSignal, Runner};
use crate::engine::{EngineConfig, SystemClock};
use crate::metrics::AgentMetrics;
use crate::store::{Credentials, LocalStore};
use crate::uplink::sync::{AssignmentSync, Heartbeats};
use crate::uplink::upload::Uploader;
use crate::uplink::{retry_delay, CentralClient, UplinkError};

/// The ICMP sockets `icmp` checks use, said once at start: which kind the agent has, or why
/// it has none (and then does not advertise `icmp`).
fn open_icmp(config: &AgentConfig) -> Option<crate::checks::icmp::IcmpPinger> {
    match crate::checks::icmp::IcmpPinger::open(config.icmp_socket) {
        Ok(pinger) => {
            tracing::info!(
                socket = pinger.kind().as_str(),
                ipv6 = pinger.has_ipv6(),
                "icmp: checks use {} ICMP sockets{}",
                pinger.kind().as_str(),
                match pinger.kind() {
                    crate::checks::icmp::SocketKind::Unprivileged =>
                        " (net.ipv4.ping_group_range allows this process's group)",
                    crate::checks::icmp::SocketKind::Raw => " (CAP_NET_RAW)",
                }
            );
            Some(pinger)
        }
        Err(why) => {
            tracing::warn!(
                "icmp: no ICMP socket ({why}); the capability icmp is not advertised. Allow \
                 unprivileged ICMP (sysctl net.ipv4.ping_group_range=\"0 2147483647\") or \
                 grant CAP_NET_RAW, and restart"
            );
            None
        }
    }
}

/// Runs the agent until `shutdown` resolves.
pub async fn run(
    config: AgentConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    run_until_handover(config, shutdown, std::future::pending()).await
}

/// `run`, handing over to a successor when `handover` resolves (`crate::handover`): no
/// check is started after it, the checks under way finish and are queued, the queue is
/// uploaded, and the agent returns, which lets its successor take the data directory.
pub async fn run_until_handover(
    config: AgentConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
    handover: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let (stop_tx, stop_rx) = watch::channel(false);
    let (handover_tx, handover_rx) = watch::channel(false);
    let running = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let queue_written = Arc::new(Notify::new());
    let uploaded = Arc::new(Notify::new());
    {
        let (running, uploaded) = (running.clone(), uploaded.clone());
        tokio::spawn(async move {
            tokio::pin!(shutdown);
            tokio::select! {
                _ = &mut shutdown => {}
                _ = handover => {
                    // Before its tasks run, an agent has nothing to hand over: it stops.
                    if running.load(std::sync::atomic::Ordering::SeqCst) {
                        tracing::info!(
                            "handing over: no check is started from now on; the checks under \
                             way finish, the queue is uploaded, then this agent exits"
                        );
                        let _ = handover_tx.send(true);
                        tokio::select! {
                            _ = uploaded.notified() => {}
                            _ = &mut shutdown => {}
                        }
                    }
                }
            }
            let _ = stop_tx.send(true);
        });
    }

    // Held until the agent returns (the process ends just after).
    let Some(_lock) = crate::handover::DataDirLock::take(&config.data_dir, stop_rx.clone()).await?
    else {
        return Ok(());
    };
    let metrics = Arc::new(AgentMetrics::new());
    let listener = tokio::net::TcpListener::bind(&config.listen)
        .await
        .with_context(|| format!("cannot listen on {} (POLLER_LISTEN)", config.listen))?;
    tracing::info!(addr = %listener.local_addr()?, "agent endpoints listening");
    let health = crate::health::router(metrics.clone());
    let mut health_stop = stop_rx.clone();
    tokio::spawn(async move {
        let _ = axum::serve(listener, health)
            .with_graceful_shutdown(async move {
                let _ = health_stop.changed().await;
            })
            .await;
    });

    let icmp = open_icmp(&config);
    let capabilities = config.capability_list(icmp.is_some());
    anyhow::ensure!(
        !capabilities.is_empty(),
        "POLLER_CAPABILITIES names only icmp, which this agent cannot run (no ICMP socket: see \
         the warning above); central would take an empty list for every kind"
    );
    let store = LocalStore::open(&config.data_dir)?;
    let client = Arc::new(CentralClient::new(
        config.central_url.clone(),
        store.clone(),
        &config.tls,
    )?);
    let Some(credentials) =
        credentials(&config, &capabilities, &store, &client, stop_rx.clone()).await?
    else {
        return Ok(());
    };
    tracing::info!(poller_id = %credentials.poller_id, "agent running");
    // What the last run delivered, until this run delivers something itself.
    let stored_time = |value: Option<String>| {
        value
            .and_then(|v| chrono::DateTime::parse_from_rfc3339(&v).ok())
            .map(|t| t.with_timezone(&chrono::Utc))
    };
    let last_upload = stored_time(store.state_value(crate::store::LAST_UPLOAD_AT).await?);
    let last_heartbeat = stored_time(store.state_value(crate::store::LAST_HEARTBEAT_AT).await?);
    metrics.update_state(|s| {
        s.poller_id = Some(credentials.poller_id.to_string());
        s.last_upload_at = last_upload;
        s.last_heartbeat_at = last_heartbeat;
    });

    let (engine_tx, engine_rx) = mpsc::channel(16);
    let signal = Arc::new(ResultSignal::default());
    let (version_tx, version_rx) = watch::channel(0i64);
    let assignments_changed = Arc::new(Notify::new());

    let report = Arc::new(EngineReport::default());
    let (results_tx, results_rx) = mpsc::channel(10_000);
    let (acks_tx, acks_rx) = mpsc::channel(1_000);
    let runner = Runner {
        clock: Arc::new(SystemClock),
        checker: Checker::new(
            &config.display_name(),
            crate::checks::networks::Networks::new(config.allowed_networks.clone()),
        )?
        .with_icmp(icmp),
        metrics: metrics.clone(),
        config: EngineConfig {
            per_host_limit: config.max_concurrent_per_host as usize,
            ..EngineConfig::default()
        },
        max_concurrency: config.max_concurrency as usize,
        report: report.clone(),
        results: results_tx,
        acks: acks_tx.clone(),
        lag_samples: None,
    };
    let writer = QueueWriter {
        store: store.clone(),
        metrics: metrics.clone(),
        signal: signal.clone(),
    };
    let sync = AssignmentSync {
        client: client.clone(),
        acks: acks_tx,
        store: store.clone(),
        metrics: metrics.clone(),
        engine: engine_tx,
        changed: assignments_changed.clone(),
        version: version_tx,
    };
    let heartbeats = Heartbeats {
        client: client.clone(),
        store: store.clone(),
        metrics: metrics.clone(),
        interval: config.heartbeat_interval,
        capabilities,
        report,
        assignments_changed,
        known_version: version_rx,
        uploads: signal.clone(),
    };
    let housekeeping = crate::housekeeping::Housekeeping {
        store: store.clone(),
        metrics: metrics.clone(),
        retention: config.retention,
        redelivery_window: config.redelivery_window,
        max_bytes: config.queue_max_bytes,
    };
    let health_metrics = metrics.clone();
    let acknowledgements = crate::uplink::commands::Acknowledgements {
        client: client.clone(),
    };
    let uploader = Uploader {
        client,
        store,
        metrics,
        batch_size: config.batch_size,
        batch_interval: config.batch_interval,
        refused_retry: config.refused_retry,
        redelivery_window: config.redelivery_window,
        results: signal,
    };
    let mut tasks = JoinSet::new();
    let stopping = stop_rx.clone();
    let hand_over = crate::uplink::upload::HandOver {
        asked: handover_rx.clone(),
        queue_written: queue_written.clone(),
        uploaded,
    };
    running.store(true, std::sync::atomic::Ordering::SeqCst);
    tasks.spawn(named(
        "runner",
        runner.run_until_handover(engine_rx, stop_rx.clone(), handover_rx.clone()),
    ));
    tasks.spawn(named("queue writer", async move {
        writer.run(results_rx).await;
        queue_written.notify_one();
    }));
    tasks.spawn(named("housekeeping", housekeeping.run(stop_rx.clone())));
    tasks.spawn(named("assignment sync", sync.run(stop_rx.clone())));
    tasks.spawn(named("heartbeats", heartbeats.run(stop_rx.clone())));
    tasks.spawn(named(
        "acknowledgements",
        acknowledgements.run(acks_rx, stop_rx.clone()),
    ));
    tasks.spawn(named(
        "uploader",
        uploader.run_until_handover(stop_rx, hand_over),
    ));
    supervise(tasks, stopping, handover_rx, &health_metrics).await?;
    tracing::info!("agent stopped");
    Ok(())
}

/// Runs `task` and says which one it was when it ends.
async fn named(name: &'static str, task: impl Future<Output = ()>) -> &'static str {
    task.await;
    name
}

/// Waits for the agent's tasks. They end only when asked to stop or to hand over: one that
/// ends before (it returned, or panicked) leaves the agent unable to do its work, so the agent
/// says which, fails `/healthz`, and exits with an error for its supervisor (Docker's restart
/// policy) to start it afresh. Results already queued are safe in SQLite.
async fn supervise(
    mut tasks: JoinSet<&'static str>,
    stopping: watch::Receiver<bool>,
    handing_over: watch::Receiver<bool>,
    metrics: &AgentMetrics,
) -> anyhow::Result<()> {
    while let Some(ended) = tasks.join_next().await {
        if *stopping.borrow() || *handing_over.borrow() {
            continue;
        }
        let what = match ended {
            Ok(name) => format!("the {name} task stopped unexpectedly"),
            Err(e) if e.is_panic() => {
                format!("an agent task panicked: {}", panic_message(e.into_panic()))
            }
            Err(e) => format!("an agent task was cancelled: {e}"),
        };
        metrics.update_state(|s| s.failed_task = Some(what.clone()));
        tracing::error!("{what}; the agent exits so that it can be restarted");
        anyhow::bail!("{what}");
    }
    Ok(())
}

/// The text a panic carried, when it carried text.
pub fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

/// Stored credentials, or a registration with the one-time token. `None` if asked to stop
/// before registration succeeded.
async fn credentials(
    config: &AgentConfig,
    capabilities: &[String],
    store: &LocalStore,
    client: &CentralClient,
    mut stop: watch::Receiver<bool>,
) -> anyhow::Result<Option<Credentials>> {
    if let Some(credentials) = store.credentials().await? {
        client.set_credentials(credentials.clone()).await;
        return Ok(Some(credentials));
    }
    let token = config.registration_token.clone().context(
        "this agent is not registered yet: set POLLER_REGISTRATION_TOKEN to a token from \
         POST /api/v1/registration-tokens",
    )?;
    let request = RegisterRequest {
        registration_token: token,
        name: config.display_name(),
        region: config.region.clone(),
        datacenter: config.datacenter.clone(),
        capabilities: capabilities.to_vec(),
        version: env!("CARGO_PKG_VERSION").to_string(),
    };
    let mut failures = 0;
    loop {
        match client.register(&request).await {
            Ok(credentials) => return Ok(Some(credentials)),
            Err(e) if e.is_transient() => {
                failures += 1;
                tracing::warn!("registration failed: {e}; retrying");
            }
            Err(UplinkError::Refused { message, .. }) => {
                anyhow::bail!("central refused the registration: {message}")
            }
            Err(e) => return Err(e.into()),
        }
        tokio::select! {
            _ = tokio::time::sleep(retry_delay(failures)) => {}
            _ = stop.changed() => return Ok(None),
        }
    }
}
