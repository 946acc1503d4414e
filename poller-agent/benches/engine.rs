//! Engine benchmark: the real engine (scheduler, checks, queue writer into SQLite) running N
//! HTTP monitors against a local target served by a child process, so that the CPU time
//! measured here is the agent's alone.
//!
//! cargo bench -p poller-agent --bench engine -- --monitors 10000 --interval 5s --duration 30s
//!
//! Prints sustained checks/s, CPU-seconds per 1,000 checks, peak RSS and scheduling lag
//! p50/p99. `--serve-target PORT` runs only the target (used by the child, and by
//! scripts/bench-blackbox.sh to give blackbox_exporter the same target).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use poller_agent::checks::Checker;
use poller_agent::engine::runner::{
    AssignmentUpdate, EngineReport, QueueWriter, ResultSignal, Runner,
};
use poller_agent::engine::{EngineConfig, SystemClock};
use poller_agent::metrics::AgentMetrics;
use poller_agent::store::LocalStore;
use shared_proto::{AssignedMonitor, CheckKind};
use uuid::Uuid;

struct Options {
    monitors: usize,
    interval: Duration,
    duration: Duration,
    concurrency: usize,
    per_host: usize,
    target: Option<String>,
}

fn parse_args() -> Result<Option<Options>, String> {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let mut options = Options {
        monitors: 10_000,
        interval: Duration::from_secs(5),
        duration: Duration::from_secs(30),
        concurrency: 2_000,
        per_host: 2_000,
        target: None,
    };
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--serve-target" => {
                let port: u16 = value()?.parse().map_err(|e| format!("port: {e}"))?;
                serve_target(port);
                return Ok(None);
            }
            "--monitors" => {
                options.monitors = value()?.parse().map_err(|e| format!("monitors: {e}"))?
            }
            "--interval" => options.interval = shared_proto::duration::parse_duration(&value()?)?,
            "--duration" => options.duration = shared_proto::duration::parse_duration(&value()?)?,
            "--concurrency" => {
                options.concurrency = value()?.parse().map_err(|e| format!("concurrency: {e}"))?
            }
            "--per-host" => {
                options.per_host = value()?.parse().map_err(|e| format!("per-host: {e}"))?
            }
            "--target" => options.target = Some(value()?),
            other => return Err(format!("unknown flag {other}")),
        }
    }
    Ok(Some(options))
}

/// A minimal HTTP target: `200 ok` for every path, on its own runtime.
fn serve_target(port: u16) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let router = axum::Router::new().fallback(|| async { "ok" });
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .expect("bind target");
        axum::serve(listener, router).await.expect("serve");
    });
}

/// User + system CPU seconds of this process so far.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may contain spaces) start at ") ".
    let rest = stat.rsplit_once(") ").map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name; 100 Hz.
    (ticks(11) + ticks(12)) / 100.0
}

fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let options = match parse_args() {
        Ok(Some(options)) => options,
        Ok(None) => return,
        Err(e) => {
            eprintln!("engine bench: {e}");
            std::process::exit(2);
        }
    };
    let mut child = None;
    let target = match &options.target {
        Some(url) => url.clone(),
        None => {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let exe = std::env::current_exe().expect("current exe");
            child = Some(
                std::process::Command::new(exe)
                    .args(["--serve-target", &port.to_string()])
                    .spawn()
                    .expect("target"),
            );
            std::thread::sleep(Duration::from_millis(500));
            format!("http://127.0.0.1:{port}")
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(run(&options, &target));
    if let Some(mut child) = child {
        let _ = child.kill();
    }
}

async fn run(options: &Options, target: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = LocalStore::open(dir.path()).expect("store");
    let metrics = Arc::new(AgentMetrics::new());
    let lags = Arc::new(Mutex::new(Vec::new()));
    let (results_tx, results_rx) = tokio::sync::mpsc::channel(10_000);
    let (updates_tx, updates_rx) = tokio::sync::mpsc::channel(1);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let runner = Runner {
        clock: Arc::new(SystemClock),
        checker: Checker::new("bench", Default::default()).expect("checker"),
        metrics: metrics.clone(),
        config: EngineConfig {
            per_host_limit: options.per_host,
            ..EngineConfig::default()
        },
        max_concurrency: options.concurrency,
        report: Arc::new(EngineReport::default()),
        results: results_tx,
        acks: tokio::sync::mpsc::channel(1).0,
        lag_samples: Some(lags.clone()),
    };
    let writer = QueueWriter {
        store: store.clone(),
        metrics: metrics.clone(),
        signal: Arc::new(ResultSignal::default()),
    };
    let monitors: Vec<AssignedMonitor> = (0..options.monitors)
        .map(|i| AssignedMonitor {
            id: Uuid::new_v4(),
            name: format!("bench {i}"),
            kind: CheckKind::Http,
            // Distinct paths: no coalescing, one real request per monitor.
            target: format!("{target}/item/{i}"),
            interval_ms: options.interval.as_millis() as u64,
            timeout_ms: 5_000,
            settings: Default::default(),
            revision: 1,
            phase_ms: None,
        })
        .collect();
    tokio::spawn(runner.run(updates_rx, stop_rx));
    tokio::spawn(writer.run(results_rx));
    updates_tx
        .send(AssignmentUpdate::Replace(monitors))
        .await
        .expect("engine");

    // Warm up for one interval, so every monitor has had its first run.
    tokio::time::sleep(options.interval).await;
    let checks_before = store.queue_stats().await.expect("stats").depth;
    lags.lock().unwrap().clear();
    let (cpu_before, started) = (cpu_seconds(), Instant::now());
    tokio::time::sleep(options.duration).await;
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu_before;
    let checks = store.queue_stats().await.expect("stats").depth - checks_before;
    let _ = stop_tx.send(true);

    let mut lag = std::mem::take(&mut *lags.lock().unwrap());
    lag.sort();
    let rendered = metrics.render();
    let failures: u64 = rendered
        .lines()
        .filter(|l| l.starts_with("poller_checks_total") && l.contains("outcome=\"down\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    println!(
        "monitors={} interval={:?} duration={:.0}s\n\
         checks/s (queued)       {:.0}  (expected {:.0})\n\
         CPU-s per 1,000 checks  {:.3}  ({:.0} checks per CPU-second)\n\
         peak RSS                {:.1} MB\n\
         scheduling lag          p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms  ({} samples)\n\
         failed checks (total)   {}",
        options.monitors,
        options.interval,
        elapsed,
        checks as f64 / elapsed,
        options.monitors as f64 / options.interval.as_secs_f64(),
        cpu / (checks.max(1) as f64) * 1000.0,
        checks as f64 / cpu.max(1e-9),
        peak_rss_mb(),
        percentile(&lag, 0.5).as_secs_f64() * 1e3,
        percentile(&lag, 0.99).as_secs_f64() * 1e3,
        lag.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
        lag.len(),
        failures,
    );
}
