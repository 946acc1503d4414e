//! Assignment benchmark: M monitors over P pollers. Measures the server time of a full snapshot
//! and of a delta carrying one change, then the propagation time (edit through the service →
//! the poller's long poll answers with it) under a steady stream of edits. With R replicas
//! the edits are made on the first and the long polls wait on the last, so every change
//! crosses replicas (PostgreSQL LISTEN/NOTIFY).
//!
//! cargo bench -p central --bench assignments -- --monitors 100000 --pollers 100 --edits-per-minute 1000
//! scripts/with-postgres.sh sh -c 'cargo bench -p central --bench assignments -- \
//!     --database-url "$PG_URL" --replicas 2 --monitors 10000'

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{fresh_database, percentile, register_pollers, start_replicas};
use serde_json::Value;
use shared_proto::{CheckKind, MonitorPatch, MonitorSpec, PollerMode};
use uuid::Uuid;

struct Options {
    monitors: usize,
    pollers: usize,
    edits_per_minute: u64,
    duration: Duration,
    database_url: Option<String>,
    replicas: usize,
}

fn options() -> Options {
    let mut options = Options {
        monitors: 100_000,
        pollers: 100,
        edits_per_minute: 1_000,
        duration: Duration::from_secs(30),
        database_url: None,
        replicas: 1,
    };
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    while let Some(flag) = args.next() {
        let value = args.next().unwrap_or_default();
        match flag.as_str() {
            "--monitors" => options.monitors = value.parse().expect("--monitors N"),
            "--pollers" => options.pollers = value.parse().expect("--pollers N"),
            "--edits-per-minute" => options.edits_per_minute = value.parse().expect("N"),
            "--duration" => {
                options.duration = shared_proto::duration::parse_duration(&value).expect("30s")
            }
            "--database-url" => options.database_url = Some(value),
            "--replicas" => options.replicas = value.parse().expect("--replicas N"),
            other => panic!("unknown flag {other}"),
        }
    }
    options
}

fn spec(i: usize) -> MonitorSpec {
    MonitorSpec {
        name: format!("bench {i}"),
        kind: CheckKind::Http,
        target: format!("http://127.0.0.1:9/{i}"),
        interval_ms: 60_000,
        timeout_ms: 5_000,
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
    }
}

#[tokio::main]
async fn main() {
    let options = options();
    let database = fresh_database(options.database_url.as_deref()).await;
    let replicas = start_replicas(&database, options.replicas).await;
    let app = replicas[0].app.clone();
    // Edits go through the first replica; long polls wait on the last.
    let base = format!("http://{}", replicas[replicas.len() - 1].addr);
    let http = reqwest::Client::new();
    let pollers: Vec<(String, String)> = register_pollers(&app, &base, options.pollers, 4)
        .await
        .into_iter()
        .map(|p| (p.id, p.access))
        .collect();
    let started = Instant::now();
    let mut ids = Vec::with_capacity(options.monitors);
    for i in 0..options.monitors {
        ids.push(app.create_monitor(spec(i)).await.expect("monitor").id);
    }
    println!(
        "setup: {} pollers, {} monitors created through the service in {:.0} s ({:.0}/s)",
        options.pollers,
        options.monitors,
        started.elapsed().as_secs_f64(),
        options.monitors as f64 / started.elapsed().as_secs_f64()
    );

    // Server time of a full snapshot, and of a delta with one change.
    let poller = app
        .store
        .poller(&pollers[0].0)
        .await
        .expect("db")
        .expect("poller");
    let mut full = Vec::new();
    let mut size = 0;
    for _ in 0..20 {
        let t = Instant::now();
        size = app
            .assignments_for(&poller, 0)
            .await
            .expect("full")
            .upserts
            .len();
        full.push(t.elapsed());
    }
    let mut delta = Vec::new();
    for round in 0..50 {
        let version = app.store.assignment_version().await.expect("version");
        let owned =
            app.assignments_for(&poller, 0).await.expect("full").upserts[round % size.max(1)].id;
        let patch = MonitorPatch {
            target: Some(format!("http://127.0.0.1:9/delta/{round}")),
            ..MonitorPatch::default()
        };
        app.update_monitor(owned, patch, None).await.expect("edit");
        let t = Instant::now();
        let answer = app.assignments_for(&poller, version).await.expect("delta");
        delta.push(t.elapsed());
        assert_eq!(answer.upserts.len(), 1, "a one-change delta");
    }
    full.sort();
    delta.sort();
    println!(
        "full snapshot ({size} monitors)   p50 {:.2} ms, p99 {:.2} ms\n\
         delta with one change           p50 {:.3} ms, p99 {:.3} ms",
        percentile(&full, 0.5).as_secs_f64() * 1e3,
        percentile(&full, 0.99).as_secs_f64() * 1e3,
        percentile(&delta, 0.5).as_secs_f64() * 1e3,
        percentile(&delta, 0.99).as_secs_f64() * 1e3,
    );

    // Propagation: every poller long-polls over HTTP while edits stream in.
    let edited: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let latencies: Arc<Mutex<Vec<Duration>>> = Arc::default();
    let deadline = Instant::now() + options.duration;
    let mut listeners = Vec::new();
    for (_, access) in &pollers {
        let (http, base, access) = (http.clone(), base.clone(), access.clone());
        let (edited, latencies) = (edited.clone(), latencies.clone());
        let version = app.store.assignment_version().await.expect("version");
        listeners.push(tokio::spawn(async move {
            let mut since = version;
            while Instant::now() < deadline {
                let answer: Value = http
                    .get(format!(
                        "{base}/api/poller/assignments?since_version={since}&wait=5"
                    ))
                    .bearer_auth(&access)
                    .send()
                    .await
                    .expect("long poll")
                    .json()
                    .await
                    .expect("answer");
                let received = Instant::now();
                for monitor in answer["upserts"].as_array().expect("upserts") {
                    let target = monitor["target"].as_str().unwrap_or_default();
                    if let Some(at) = edited.lock().unwrap().get(target) {
                        latencies.lock().unwrap().push(received.duration_since(*at));
                    }
                }
                since = answer["version"].as_i64().expect("version");
            }
        }));
    }
    let pause = Duration::from_secs_f64(60.0 / options.edits_per_minute as f64);
    let mut edits = 0usize;
    while Instant::now() < deadline - Duration::from_secs(5) {
        let id: Uuid = ids[(edits * 7919) % ids.len()];
        let target = format!("http://127.0.0.1:9/edit/{edits}");
        let patch = MonitorPatch {
            target: Some(target.clone()),
            ..MonitorPatch::default()
        };
        edited.lock().unwrap().insert(target, Instant::now());
        app.update_monitor(id, patch, None).await.expect("edit");
        edits += 1;
        tokio::time::sleep(pause).await;
    }
    for listener in listeners {
        listener.await.expect("listener");
    }
    let mut latencies = std::mem::take(&mut *latencies.lock().unwrap());
    latencies.sort();
    println!(
        "propagation at {} edits/min, database {}, edit on replica 1 of {}, poll on replica {}:\n\
         \x20                              p50 {:.1} ms, p99 {:.1} ms ({} of {edits} edits seen)",
        options.edits_per_minute,
        if database.is_postgres() {
            "postgres"
        } else {
            "sqlite"
        },
        replicas.len(),
        replicas.len(),
        percentile(&latencies, 0.5).as_secs_f64() * 1e3,
        percentile(&latencies, 0.99).as_secs_f64() * 1e3,
        latencies.len(),
    );
}
