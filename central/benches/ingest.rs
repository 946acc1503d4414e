//! Central ingest benchmark: P simulated agents, each registered through the real poller API
//! with one pinned monitor, upload gzip batches of B results as fast as central answers, for
//! D seconds. Prints sustained results/s and upload latency percentiles, and beside them the
//! raw batched-INSERT rate of SQLite on this machine as the ceiling.
//!
//! cargo bench -p central --bench ingest -- --pollers 20 --batch 50 --duration 10s

use std::io::Write;
use std::time::{Duration, Instant};

use central::config::ServeArgs;
use serde_json::{json, Value};
use shared_proto::settings_api::CreateRegistrationToken;
use shared_proto::{CheckKind, MonitorSpec, PollerMode};
use uuid::Uuid;

struct Options {
    pollers: usize,
    batch: usize,
    duration: Duration,
}

fn options() -> Options {
    let mut options = Options {
        pollers: 20,
        batch: 50,
        duration: Duration::from_secs(10),
    };
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    while let Some(flag) = args.next() {
        let value = args.next().unwrap_or_default();
        match flag.as_str() {
            "--pollers" => options.pollers = value.parse().expect("--pollers N"),
            "--batch" => options.batch = value.parse().expect("--batch N"),
            "--duration" => {
                options.duration =
                    shared_proto::duration::parse_duration(&value).expect("--duration 10s")
            }
            other => panic!("unknown flag {other}"),
        }
    }
    options
}

fn main() {
    let options = options();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let rows_per_tx = options.batch;
        let ceiling = raw_sqlite_rate(rows_per_tx).await;
        let (rate, p50, p99) = ingest(&options).await;
        println!(
            "pollers={} batch={} duration={:?}\n\
             ingest               {rate:>9.0} results/s\n\
             upload latency       p50 {:.1} ms, p99 {:.1} ms\n\
             raw SQLite ceiling   {ceiling:>9.0} rows/s (prepared INSERT, {rows_per_tx} rows per transaction)",
            options.pollers,
            options.batch,
            options.duration,
            p50.as_secs_f64() * 1e3,
            p99.as_secs_f64() * 1e3,
        );
    });
}

async fn ingest(options: &Options) -> (f64, Duration, Duration) {
    let dir = tempfile::tempdir().expect("tempdir");
    let running = central::start(ServeArgs {
        listen: "127.0.0.1:0".into(),
        database_url: format!("sqlite://{}", dir.path().join("central.db").display()),
        admin_token: Some("bench-admin-token-0123456789".into()),
        offline_after: Duration::from_secs(600),
        failback_settle: Duration::from_secs(120),
        // Hundreds of simulated agents register from one address.
        auth_rate_limit: 0.0,
        ..ServeArgs::defaults()
    })
    .await
    .expect("central");
    let app = running.app.clone();
    let base = format!("http://{}", running.addr);
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
    let http = reqwest::Client::new();
    let mut agents = Vec::new();
    for i in 0..options.pollers {
        let answer: Value = http
            .post(format!("{base}/api/poller/register"))
            .json(
                &json!({"registration_token": token, "name": format!("bench-{i}"),
                          "capabilities": ["http"], "version": "bench"}),
            )
            .send()
            .await
            .expect("register")
            .json()
            .await
            .expect("register answer");
        let poller_id = Uuid::parse_str(answer["poller_id"].as_str().expect("id")).expect("uuid");
        let monitor = app
            .create_monitor(MonitorSpec {
                name: format!("bench {i}"),
                kind: CheckKind::Http,
                target: "http://127.0.0.1:9/".into(),
                interval_ms: 5_000,
                timeout_ms: 1_000,
                settings: Default::default(),
                poller_mode: PollerMode::Pinned,
                poller_id: Some(poller_id),
                poller_region: None,
                poller_datacenter: None,
                poller_capability: None,
                failover: None,
                paused: false,
            })
            .await
            .expect("monitor");
        let access = answer["access_token"].as_str().expect("token").to_string();
        agents.push((access, monitor.id));
    }

    let deadline = Instant::now() + options.duration;
    let started = Instant::now();
    let url = format!("{base}/api/poller/results");
    let tasks: Vec<_> = agents
        .into_iter()
        .map(|(access, monitor)| {
            let (http, url, batch) = (http.clone(), url.clone(), options.batch);
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut accepted = 0u64;
                while Instant::now() < deadline {
                    let body = gzip_batch(monitor, batch);
                    let sent = Instant::now();
                    let answer: Value = http
                        .post(&url)
                        .bearer_auth(&access)
                        .header("content-type", "application/json")
                        .header("content-encoding", "gzip")
                        .body(body)
                        .send()
                        .await
                        .expect("upload")
                        .json()
                        .await
                        .expect("ack");
                    latencies.push(sent.elapsed());
                    accepted += answer["accepted"].as_u64().expect("accepted");
                }
                (accepted, latencies)
            })
        })
        .collect();
    let mut total = 0;
    let mut latencies = Vec::new();
    for task in tasks {
        let (accepted, mut more) = task.await.expect("agent task");
        total += accepted;
        latencies.append(&mut more);
    }
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort();
    let at = |p: f64| latencies[((latencies.len() - 1) as f64 * p) as usize];
    (total as f64 / elapsed, at(0.5), at(0.99))
}

fn gzip_batch(monitor: Uuid, size: usize) -> Vec<u8> {
    let now = chrono::Utc::now();
    let results: Vec<Value> = (0..size)
        .map(|i| {
            json!({"id": Uuid::now_v7(), "monitor_id": monitor,
                   "ts": now - chrono::Duration::milliseconds(i as i64),
                   "status": "up", "latency_ms": 12, "msg": "",
                   "meta": {"status_code": 200, "first_byte_ms": 11}})
        })
        .collect();
    let body =
        serde_json::to_vec(&json!({"batch_id": Uuid::new_v4(), "results": results})).expect("json");
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(&body).expect("gzip");
    encoder.finish().expect("gzip")
}

/// Rows per second SQLite itself takes with a prepared INSERT reused inside transactions of
/// `rows_per_tx` rows, one writer, central's schema for `results` and its pragmas: the ceiling
/// for ingestion on this machine, without any HTTP, JSON or sqlx in the way.
async fn raw_sqlite_rate(rows_per_tx: usize) -> f64 {
    tokio::task::spawn_blocking(move || {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut db = rusqlite::Connection::open(dir.path().join("raw.db")).expect("sqlite");
        db.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;
             CREATE TABLE results (id TEXT PRIMARY KEY, monitor_id TEXT NOT NULL,
               poller_id TEXT NOT NULL, ts BIGINT NOT NULL, status TEXT NOT NULL, latency_ms BIGINT,
               msg TEXT NOT NULL, meta TEXT NOT NULL, received_at BIGINT NOT NULL);
             CREATE INDEX results_monitor_ts ON results (monitor_id, ts, id);",
        )
        .expect("schema");
        let monitor = Uuid::new_v4().to_string();
        let started = Instant::now();
        let mut rows = 0;
        while started.elapsed() < Duration::from_secs(3) {
            let tx = db.transaction().expect("begin");
            {
                let mut insert = tx
                    .prepare_cached(
                        "INSERT INTO results VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                    )
                    .expect("prepare");
                for i in 0..rows_per_tx {
                    insert
                        .execute(rusqlite::params![
                            Uuid::now_v7().to_string(),
                            monitor,
                            "poller",
                            (rows + i) as i64,
                            "up",
                            12i64,
                            "",
                            r#"{"status_code":200,"first_byte_ms":11}"#,
                            0i64
                        ])
                        .expect("insert");
                }
            }
            tx.commit().expect("commit");
            rows += rows_per_tx;
        }
        rows as f64 / started.elapsed().as_secs_f64()
    })
    .await
    .expect("raw sqlite")
}
