//! What idle pollers cost central and its database: N pollers registered through the real
//! poller API each hold a long poll for their assignments (`wait=20`, as the agent does, and
//! asked again when answered) while nothing changes. Measured over D seconds in three phases: the replicas alone (their
//! lease renewals), plus the N waiting long polls, plus a heartbeat from every poller every
//! 10 s (the agent's default). Database cost is PostgreSQL's transaction count for the
//! database (`pg_stat_database`: every statement outside a transaction is one); CPU is this
//! process's, so it includes the simulated pollers' side of the HTTP calls.
//!
//! scripts/with-postgres.sh sh -c \
//!   'cargo bench -p central --bench idle -- --database-url "$PG_URL" --pollers 1000 --replicas 2'

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{fresh_database, register_pollers, start_replicas, Poller};
use serde_json::{json, Value};
use sqlx::Connection;

/// The agent's long-poll wait (`uplink::sync::LONG_POLL`).
const LONG_POLL_S: u64 = 20;

struct Options {
    pollers: usize,
    replicas: usize,
    duration: Duration,
    database_url: String,
}

fn options() -> Options {
    let mut options = Options {
        pollers: 1_000,
        replicas: 2,
        duration: Duration::from_secs(30),
        database_url: String::new(),
    };
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    while let Some(flag) = args.next() {
        let value = args.next().unwrap_or_default();
        match flag.as_str() {
            "--pollers" => options.pollers = value.parse().expect("--pollers N"),
            "--replicas" => options.replicas = value.parse().expect("--replicas N"),
            "--duration" => {
                options.duration = shared_proto::duration::parse_duration(&value).expect("30s")
            }
            "--database-url" => options.database_url = value,
            other => panic!("unknown flag {other}"),
        }
    }
    assert!(
        options.database_url.starts_with("postgres"),
        "--database-url postgres://… is required (the cost is read from pg_stat_database)"
    );
    options
}

/// CPU seconds this process has used (user + system), from /proc/self/stat.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // Fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .expect("stat")
        .1
        .split_whitespace()
        .collect();
    let ticks: f64 =
        fields[11].parse::<f64>().expect("utime") + fields[12].parse::<f64>().expect("stime");
    ticks / 100.0
}

/// Transactions committed or rolled back in the database so far.
async fn transactions(conn: &mut sqlx::PgConnection) -> i64 {
    let (count,): (i64,) = sqlx::query_as(
        "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()",
    )
    .fetch_one(conn)
    .await
    .expect("pg_stat_database");
    count
}

/// Database transactions per second and CPU cores used over `duration`.
async fn measure(conn: &mut sqlx::PgConnection, duration: Duration) -> (f64, f64) {
    let (before, cpu_before, started) = (transactions(conn).await, cpu_seconds(), Instant::now());
    tokio::time::sleep(duration).await;
    // Backends report their counts when idle for a moment; give the last ones that moment.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let seconds = started.elapsed().as_secs_f64();
    let (after, cpu_after) = (transactions(conn).await, cpu_seconds());
    // The two reads of this function are transactions too.
    (
        (after - before - 1) as f64 / seconds,
        (cpu_after - cpu_before) / seconds,
    )
}

#[tokio::main]
async fn main() {
    let options = options();
    let database = fresh_database(Some(&options.database_url)).await;
    let replicas = start_replicas(&database, options.replicas).await;
    let bases: Vec<String> = replicas
        .iter()
        .map(|r| format!("http://{}", r.addr))
        .collect();
    let started = Instant::now();
    let pollers = register_pollers(&replicas[0].app, &bases[0], options.pollers, 8).await;
    println!(
        "setup: {} pollers registered in {:.0} s, {} replicas",
        pollers.len(),
        started.elapsed().as_secs_f64(),
        replicas.len()
    );
    let mut stats = sqlx::PgConnection::connect(&database.url)
        .await
        .expect("stats connection");
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(options.pollers * 2)
        .build()
        .expect("client");

    let alone = measure(&mut stats, options.duration).await;

    let answered = Arc::new(AtomicU64::new(0));
    let pollers: Vec<(String, Poller)> = pollers
        .into_iter()
        .enumerate()
        .map(|(i, p)| (bases[i % bases.len()].clone(), p))
        .collect();
    for (base, poller) in &pollers {
        let (http, base, access, answered) = (
            http.clone(),
            base.clone(),
            poller.access.clone(),
            answered.clone(),
        );
        tokio::spawn(async move {
            let mut since = 0;
            loop {
                let Ok(reply) = http
                    .get(format!(
                        "{base}/api/poller/assignments?since_version={since}&wait={LONG_POLL_S}"
                    ))
                    .bearer_auth(&access)
                    .send()
                    .await
                else {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                };
                if let Ok(answer) = reply.json::<Value>().await {
                    since = answer["version"].as_i64().unwrap_or(since);
                    answered.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }
    // Let every poller get its first (full) answer and settle into waiting, and the database
    // backends report the counts of that burst (an idle backend reports within 10 s).
    tokio::time::sleep(Duration::from_secs(12)).await;
    let answered_before = answered.load(Ordering::Relaxed);
    let polls = measure(&mut stats, options.duration).await;
    let renewals = answered.load(Ordering::Relaxed) - answered_before;

    let beating = Arc::new(AtomicBool::new(true));
    for (i, (base, poller)) in pollers.iter().enumerate() {
        let (http, url, access, beating) = (
            http.clone(),
            format!("{base}/api/poller/heartbeat"),
            poller.access.clone(),
            beating.clone(),
        );
        // Spread over the 10 s, as independent agents are.
        let offset = Duration::from_millis((i as u64 * 10_000) / pollers.len() as u64);
        tokio::spawn(async move {
            tokio::time::sleep(offset).await;
            let mut every = tokio::time::interval(Duration::from_secs(10));
            while beating.load(Ordering::Relaxed) {
                every.tick().await;
                let _ = http
                    .post(&url)
                    .bearer_auth(&access)
                    .json(&json!({"version": "bench"}))
                    .send()
                    .await;
            }
        });
    }
    tokio::time::sleep(Duration::from_secs(10)).await;
    let heartbeats = measure(&mut stats, options.duration).await;
    beating.store(false, Ordering::Relaxed);

    let per_second = options.pollers as f64 / 10.0;
    println!(
        "pollers={} replicas={} window={:?}\n\
         phase                                   db transactions/s   CPU (cores)\n\
         replicas alone                          {:>17.1}   {:>11.3}\n\
         + {} waiting long polls               {:>17.1}   {:>11.3}   ({:.1} polls/s answered at their deadline)\n\
         + a heartbeat per poller every 10 s     {:>17.1}   {:>11.3}   ({per_second:.0} heartbeats/s)",
        options.pollers,
        options.replicas,
        options.duration,
        alone.0,
        alone.1,
        options.pollers,
        polls.0,
        polls.1,
        renewals as f64 / options.duration.as_secs_f64(),
        heartbeats.0,
        heartbeats.1,
    );
}
