//! `central demo`: central, an embedded agent talking to it over loopback HTTP, a local target
//! and a few sample monitors, so that a new user sees the whole system work with one command
//! and no internet.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use axum::http::StatusCode;
use axum::routing::get;
use shared_proto::settings_api::CreateRegistrationToken;
use shared_proto::status_pages::{DisplayName, StatusPageSection, StatusPageSpec, Visibility};
use shared_proto::{CheckKind, MonitorSpec, PollerMode};

use crate::config::{DemoArgs, ServeArgs};
use crate::store::Cursor;

pub async fn run(args: DemoArgs) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.data_dir)
        .with_context(|| format!("cannot create {}", args.data_dir.display()))?;
    let admin_token = demo_admin_token(&args.data_dir)?;
    let central = crate::start(ServeArgs {
        listen: args.listen.clone(),
        database_url: format!("sqlite://{}", args.data_dir.join("central.db").display()),
        admin_token: Some(admin_token.clone()),
        offline_after: Duration::from_secs(30),
        failback_settle: Duration::from_secs(60),
        ..ServeArgs::defaults()
    })
    .await?;
    let app = central.app.clone();
    let target = serve_demo_target().await?;

    let agent_dir = args.data_dir.join("agent");
    let registered = poller_agent::store::LocalStore::open(&agent_dir)?
        .credentials()
        .await?
        .is_some();
    let registration_token = if registered {
        None
    } else {
        let token = app
            .registration_tokens()
            .create_registration_token(CreateRegistrationToken {
                name: "demo agent".into(),
                expires_in: Some("1h".into()),
                max_uses: Some(1),
                region: Some("local".into()),
                capabilities: None,
            })
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        token.token
    };

    if app
        .list_monitors(&Default::default(), &Cursor::start(), 1)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .items
        .is_empty()
    {
        let mut shown = Vec::new();
        for spec in sample_monitors(&target, &central.addr.to_string()) {
            let made = app
                .create_monitor(spec)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            shown.push(made.id);
        }
        // What the demo's users would see: the monitors under public names.
        let names = ["Website", "Checkout", "API port"];
        app.status_pages()
            .create_page(StatusPageSpec {
                slug: "demo".into(),
                title: "Demo status".into(),
                description: Some("What the demo's users would see of its monitors.".into()),
                sections: vec![StatusPageSection {
                    name: "Services".into(),
                    display_names: shown
                        .iter()
                        .zip(names)
                        .map(|(&monitor_id, name)| DisplayName {
                            monitor_id,
                            name: name.into(),
                        })
                        .collect(),
                    monitor_ids: shown,
                    tags: Vec::new(),
                }],
                visibility: Visibility::Public,
                password: None,
                domain: None,
                auto_incidents: Default::default(),
                logo: None,
            })
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }

    let agent_config = poller_agent::AgentConfig {
        central_url: format!("http://{}", central.addr).parse()?,
        registration_token,
        name: Some("demo-agent".into()),
        region: Some("local".into()),
        datacenter: None,
        capabilities: None,
        data_dir: agent_dir,
        retention: Duration::from_secs(24 * 3600),
        queue_max_bytes: 1 << 30,
        batch_size: 50,
        batch_interval: Duration::from_secs(2),
        refused_retry: Duration::from_secs(600),
        redelivery_window: Duration::from_secs(24 * 3600),
        heartbeat_interval: Duration::from_secs(5),
        listen: "127.0.0.1:0".into(),
        max_concurrency: 64,
        max_concurrent_per_host: 5,
        allowed_networks: Vec::new(),
        icmp_socket: Default::default(),
        tls: Default::default(),
    };
    let agent = tokio::spawn(poller_agent::run(agent_config, crate::shutdown_signal()));

    let base = format!("http://{}", central.addr);
    println!(
        "\nThe demo is running: central, one embedded agent, and sample monitors against a local target.\n\n\
         \x20 web page:     {base}/  (log in with the admin token)\n\
         \x20 status page:  {base}/status/demo  (what users would see; no login)\n\
         \x20 API:          {base}\n\
         \x20 admin token:  {admin_token}\n\
         \x20 data:         {}\n\n\
         Monitor status (give the agent a few seconds to report):\n\n\
         \x20 curl -s -H 'Authorization: Bearer {admin_token}' {base}/api/v1/monitors\n\
         \x20 curl -s -H 'Authorization: Bearer {admin_token}' {base}/api/v1/monitors/<id>/status\n\
         \x20 curl -s -H 'Authorization: Bearer {admin_token}' {base}/api/v1/pollers\n\n\
         Press Ctrl-C to stop.\n",
        args.data_dir.display()
    );
    let started = Instant::now();
    tokio::spawn(print_statuses(app, started));

    central.task.await??;
    agent.await??;
    Ok(())
}

/// The demo's admin token, kept in the data directory so that restarts reuse it.
fn demo_admin_token(data_dir: &Path) -> anyhow::Result<String> {
    let path = data_dir.join("admin-token");
    if let Ok(token) = std::fs::read_to_string(&path) {
        return Ok(token.trim().to_string());
    }
    let token = format!("padm_{}", crate::service::auth::new_secret());
    let mut file = std::fs::OpenOptions::new();
    file.write(true).create_new(true);
    // The admin token: readable by this user only, whatever the umask.
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut file, 0o600);
    std::io::Write::write_all(
        &mut file
            .open(&path)
            .with_context(|| format!("cannot create {}", path.display()))?,
        token.as_bytes(),
    )
    .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(token)
}

fn sample_monitors(target: &str, central: &str) -> Vec<MonitorSpec> {
    let http = |name: &str, url: String| MonitorSpec {
        name: name.into(),
        kind: CheckKind::Http,
        target: url,
        interval_ms: 5_000,
        timeout_ms: 2_000,
        settings: Default::default(),
        poller_mode: PollerMode::Auto,
        poller_id: None,
        poller_region: None,
        poller_datacenter: None,
        poller_capability: None,
        poller_regions: None,
        quorum: None,
        notification_channel_ids: Vec::new(),
        tags: Vec::new(),
        parent_ids: Vec::new(),
        failover: None,
        paused: false,
    };
    let mut tcp = http("central port (tcp)", central.to_string());
    tcp.kind = CheckKind::Tcp;
    vec![
        http("demo target", format!("http://{target}/")),
        http(
            "flaky endpoint (down every other minute)",
            format!("http://{target}/flaky"),
        ),
        tcp,
    ]
}

/// A tiny local service to monitor: `/` always answers, `/flaky` fails every other minute.
async fn serve_demo_target() -> anyhow::Result<String> {
    let router = axum::Router::new()
        .route("/", get(|| async { "demo target: all good" }))
        .route(
            "/flaky",
            get(|| async {
                let minute = chrono::Utc::now().timestamp() / 60;
                if minute % 2 == 0 {
                    (StatusCode::OK, "fine this minute")
                } else {
                    (StatusCode::SERVICE_UNAVAILABLE, "failing this minute")
                }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, router).await });
    Ok(addr.to_string())
}

/// Prints a status table now and then, so the demo shows something without curl.
async fn print_statuses(app: std::sync::Arc<crate::service::App>, started: Instant) {
    let first = tokio::time::Instant::now() + Duration::from_secs(8);
    let mut ticker = tokio::time::interval_at(first, Duration::from_secs(15));
    loop {
        ticker.tick().await;
        let Ok(page) = app
            .list_monitors(&Default::default(), &Cursor::start(), 100)
            .await
        else {
            continue;
        };
        println!("[{:>4}s] monitor status:", started.elapsed().as_secs());
        for monitor in page.items {
            if let Ok(status) = app.monitor_status(monitor.id).await {
                let status_text = serde_json::to_value(status.status).unwrap_or_default();
                println!(
                    "         {:<8} {:<42} {}",
                    status_text.as_str().unwrap_or("?"),
                    monitor.spec.name,
                    status.message.or(status.reason).unwrap_or_default()
                );
            }
        }
    }
}
