//! Central ingest benchmark: P simulated agents, each registered through the real poller API
//! with one pinned monitor, upload gzip batches of B results as fast as central answers, for
//! D seconds. Prints sustained results/s and upload latency percentiles, and beside them the
//! database's own ceiling on this machine: SQLite's prepared INSERT, or PostgreSQL's COPY of
//! the same rows into the same table.
//!
//! cargo bench -p central --bench ingest -- --pollers 20 --batch 50 --duration 10s
//! With PostgreSQL (a fresh database is created on that server; agents are spread over R
//! replicas, as a load balancer would):
//! cargo bench -p central --bench ingest -- --database-url postgres://… --replicas 2

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use common::{fresh_database, ms, percentile, register_pollers, start_replicas};
use serde_json::{json, Value};
use shared_proto::{CheckKind, MonitorSpec, PollerMode};
use sqlx::Connection;
use uuid::Uuid;

struct Options {
    pollers: usize,
    batch: usize,
    duration: Duration,
    database_url: Option<String>,
    replicas: usize,
}

fn options() -> Options {
    let mut options = Options {
        pollers: 20,
        batch: 50,
        duration: Duration::from_secs(10),
        database_url: None,
        replicas: 1,
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
            "--database-url" => options.database_url = Some(value),
            "--replicas" => options.replicas = value.parse().expect("--replicas N"),
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
        let database = fresh_database(options.database_url.as_deref()).await;
        let (rate, latencies, monitor) = ingest(&options, &database.url).await;
        let ceiling = if database.is_postgres() {
            let rate = postgres_copy_rate(&database.url, monitor, options.batch).await;
            format!("PostgreSQL COPY     {rate:>9.0} rows/s (same table, {} rows per COPY)", options.batch)
        } else {
            let rate = raw_sqlite_rate(options.batch).await;
            format!("raw SQLite ceiling   {rate:>9.0} rows/s (prepared INSERT, {} rows per transaction)", options.batch)
        };
        println!(
            "database={} replicas={} pollers={} batch={} duration={:?}\n\
             ingest               {rate:>9.0} results/s\n\
             upload latency       p50 {:.1} ms, p99 {:.1} ms\n{ceiling}",
            if database.is_postgres() { "postgres" } else { "sqlite" },
            options.replicas,
            options.pollers,
            options.batch,
            options.duration,
            ms(percentile(&latencies, 0.5)),
            ms(percentile(&latencies, 0.99)),
        );
    });
}

/// Runs the load; returns results/s, the sorted upload latencies and one of the monitors.
async fn ingest(options: &Options, database_url: &str) -> (f64, Vec<Duration>, Uuid) {
    let database = common::Database::existing(database_url);
    let replicas = start_replicas(&database, options.replicas).await;
    let app = replicas[0].app.clone();
    let bases: Vec<String> = replicas
        .iter()
        .map(|r| format!("http://{}", r.addr))
        .collect();
    let pollers = register_pollers(&app, &bases[0], options.pollers, 4).await;
    let http = reqwest::Client::new();
    let mut agents = Vec::new();
    for (i, poller) in pollers.into_iter().enumerate() {
        let poller_id = Uuid::parse_str(&poller.id).expect("uuid");
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
                poller_regions: None,
                quorum: None,
                notification_channel_ids: Vec::new(),
                tags: Vec::new(),
                parent_ids: Vec::new(),
                failover: None,
                paused: false,
            })
            .await
            .expect("monitor");
        // Spread over the replicas as a round-robin load balancer would.
        agents.push((bases[i % bases.len()].clone(), poller.access, monitor.id));
    }
    let some_monitor = agents[0].2;

    let deadline = Instant::now() + options.duration;
    let started = Instant::now();
    let tasks: Vec<_> = agents
        .into_iter()
        .map(|(base, access, monitor)| {
            let (http, url, batch) = (
                http.clone(),
                format!("{base}/api/poller/results"),
                options.batch,
            );
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut accepted = 0u64;
                // Each agent's results in check order, as a real agent uploads them: a
                // millisecond apart, from ten minutes ago on (never in the future).
                let mut next_ts = chrono::Utc::now() - chrono::Duration::minutes(10);
                while Instant::now() < deadline {
                    let body = gzip_batch(monitor, batch, next_ts);
                    next_ts += chrono::Duration::milliseconds(batch as i64);
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
    (total as f64 / elapsed, latencies, some_monitor)
}

/// Rows per second PostgreSQL itself takes through COPY, in COPYs of `rows_per_copy` rows into
/// central's `results` table (its key, index and the monitor's real id), on one connection:
/// the ceiling for ingestion on this server, without HTTP, JSON parsing or upserts.
async fn postgres_copy_rate(url: &str, monitor: Uuid, rows_per_copy: usize) -> f64 {
    let mut conn = sqlx::PgConnection::connect(url).await.expect("postgres");
    let started = Instant::now();
    let mut rows = 0usize;
    while started.elapsed() < Duration::from_secs(3) {
        let mut text = String::with_capacity(rows_per_copy * 160);
        for i in 0..rows_per_copy {
            text.push_str(&format!(
                "{}\t{monitor}\tpoller\t{}\tup\t12\t\t{{\"status_code\":200,\"first_byte_ms\":11}}\t0\n",
                Uuid::now_v7(),
                rows + i
            ));
        }
        let mut copy = conn
            .copy_in_raw(
                "COPY results (id, monitor_id, poller_id, ts, status, latency_ms, msg, meta, \
                 received_at) FROM STDIN",
            )
            .await
            .expect("copy");
        copy.send(text.into_bytes()).await.expect("copy rows");
        copy.finish().await.expect("copy finish");
        rows += rows_per_copy;
    }
    rows as f64 / started.elapsed().as_secs_f64()
}

fn gzip_batch(monitor: Uuid, size: usize, first: chrono::DateTime<chrono::Utc>) -> Vec<u8> {
    let results: Vec<Value> = (0..size)
        .map(|i| {
            json!({"id": Uuid::now_v7(), "monitor_id": monitor,
                   "ts": first + chrono::Duration::milliseconds(i as i64),
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
