//! Assignment benchmark: M monitors over P pollers on SQLite. Measures the server time of a
//! full snapshot and of a delta carrying one change, then the propagation time (edit through
//! the settings API → the poller's long poll answers with it) under a steady stream of edits.
//!
//! cargo bench -p central --bench assignments -- --monitors 100000 --pollers 100 --edits-per-minute 1000

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use central::config::ServeArgs;
use serde_json::{json, Value};
use shared_proto::settings_api::CreateRegistrationToken;
use shared_proto::{CheckKind, MonitorPatch, MonitorSpec, PollerMode};
use uuid::Uuid;

struct Options {
    monitors: usize,
    pollers: usize,
    edits_per_minute: u64,
    duration: Duration,
}

fn options() -> Options {
    let mut options = Options {
        monitors: 100_000,
        pollers: 100,
        edits_per_minute: 1_000,
        duration: Duration::from_secs(30),
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
            other => panic!("unknown flag {other}"),
        }
    }
    options
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted
        .get(((sorted.len().max(1) - 1) as f64 * p) as usize)
        .copied()
        .unwrap_or_default()
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
        failover: None,
        paused: false,
    }
}

fn main() {
    let options = options();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(run(options));
}

async fn run(options: Options) {
    let dir = tempfile::tempdir().expect("tempdir");
    let running = central::start(ServeArgs {
        listen: "127.0.0.1:0".into(),
        database_url: format!("sqlite://{}", dir.path().join("central.db").display()),
        admin_token: Some("bench-admin-token-0123456789".into()),
        offline_after: Duration::from_secs(3600),
        failback_settle: Duration::from_secs(0),
        auth_rate_limit: 0.0,
        ..ServeArgs::defaults()
    })
    .await
    .expect("central");
    let app = running.app.clone();
    let base = format!("http://{}", running.addr);
    let http = reqwest::Client::new();
    let token = app
        .create_registration_token(CreateRegistrationToken {
            name: "bench".into(),
            expires_in: None,
            max_uses: Some(options.pollers as u32),
            region: None,
        })
        .await
        .expect("token")
        .token
        .expect("secret");
    let mut pollers = Vec::new();
    for i in 0..options.pollers {
        let answer: Value = http
            .post(format!("{base}/api/poller/register"))
            .json(&json!({"registration_token": token, "name": format!("p{i}"), "capabilities": ["http"], "version": "b"}))
            .send()
            .await
            .expect("register")
            .json()
            .await
            .expect("answer");
        let id = answer["poller_id"].as_str().expect("id").to_string();
        pollers.push((
            id,
            answer["access_token"].as_str().expect("token").to_string(),
        ));
    }
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
        app.update_monitor(owned, patch).await.expect("edit");
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
        app.update_monitor(id, patch).await.expect("edit");
        edits += 1;
        tokio::time::sleep(pause).await;
    }
    for listener in listeners {
        listener.await.expect("listener");
    }
    let mut latencies = std::mem::take(&mut *latencies.lock().unwrap());
    latencies.sort();
    println!(
        "propagation at {} edits/min     p50 {:.1} ms, p99 {:.1} ms ({} of {edits} edits seen)",
        options.edits_per_minute,
        percentile(&latencies, 0.5).as_secs_f64() * 1e3,
        percentile(&latencies, 0.99).as_secs_f64() * 1e3,
        latencies.len(),
    );
}
