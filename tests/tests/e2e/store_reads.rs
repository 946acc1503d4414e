//! What an upload reads on PostgreSQL: the rows of its own monitors, not whole tables.
//!
//! An upload's batch travels as one JSON parameter; PostgreSQL's planner guesses 100 rows for
//! it, and against a table of some thousands of narrow rows it found reading the whole table
//! cheaper than 100 probes of its key. At 20,000 monitors that was three whole reads of the
//! due table per upload, most of the server's time (docs/benchmarks.md). The store probes the
//! keys instead (`store::batches`); this counts what the server read, in its own statistics.
//!
//! Always on PostgreSQL (a server of its own): SQLite's planner has no such guess to make.

use crate::common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use central::domain::Monitor;
use central::service::ingest::batch::store_standing;
use central::store::{Look, NewResult, Store};
use common::ingest_rules::ConfirmedAtOnce;
use e2e::postgres::Postgres;
use futures_util::{StreamExt, TryStreamExt};
use serde_json::json;
use sqlx::{Connection, PgConnection};

/// Monitors in the tables: more than enough for a whole read to cost more than the probes.
const MONITORS: usize = 3_000;
const UPLOADS: usize = 60;
const PER_UPLOAD: usize = 10;
/// `ConfirmedAtOnce`'s interval: a result keeps its monitor from changing for two of them.
const INTERVAL_MS: i64 = 60_000;
const START: i64 = 1_000_000_000;

fn monitor_id(monitor: usize) -> String {
    format!("m{monitor:05}")
}

fn monitor(id: &str) -> anyhow::Result<Monitor> {
    Ok(serde_json::from_value(json!({
        "id": id, "name": id, "kind": "http", "target": "http://127.0.0.1:9/",
        "interval_ms": INTERVAL_MS, "timeout_ms": 10_000, "settings": {},
        "poller_mode": "auto", "poller_regions": null, "failover": null, "paused": false,
        "created_at": 1_000, "updated_at": 1_000, "revision": 1,
    }))?)
}

fn result(monitor: usize, ts: i64) -> NewResult {
    NewResult {
        id: format!("r-{monitor}-{ts}"),
        monitor_id: monitor_id(monitor),
        region: None,
        ts,
        status: central::store::ResultStatus::Up,
        latency_ms: Some(5),
        msg: String::new(),
        meta: "{}".into(),
        next_due_at: None,
        dependencies: None,
    }
}

/// Rows each table gave the server's scans so far (sequential and index), once every session
/// of the store has ended: a session's counts reach the statistics when it ends, at the latest.
async fn rows_read(watcher: &mut PgConnection) -> anyhow::Result<BTreeMap<String, i64>> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (others,): (i64,) = sqlx::query_as(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid()",
        )
        .fetch_one(&mut *watcher)
        .await?;
        if others == 0 {
            break;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the store's sessions never ended"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let rows: Vec<(String, i64)> = sqlx::query_as(
        "SELECT relname::text, COALESCE(seq_tup_read, 0) + COALESCE(idx_tup_fetch, 0) \
         FROM pg_stat_user_tables",
    )
    .fetch_all(&mut *watcher)
    .await?;
    Ok(rows.into_iter().collect())
}

/// Monitors whose verdict a look found steady, each upload confirming ten of them: what each
/// upload reads of any table is a few rows per result, not a share of the table.
#[tokio::test]
async fn an_upload_reads_its_own_monitors_rows_not_whole_tables() -> anyhow::Result<()> {
    let server = Postgres::start().await?;
    let url = server.create_database("central").await?;

    // Every monitor has a result and a row in the due table that a look found steady, due
    // again well after the uploads below (as a look leaves a monitor whose results arrive).
    let store = Store::connect(&url).await?;
    let monitors = (0..MONITORS).map(|m| monitor(&monitor_id(m)));
    futures_util::stream::iter(monitors)
        .map(|row| {
            let store = &store;
            async move { store.insert_monitor(&row?).await }
        })
        .buffer_unordered(8)
        .try_collect::<Vec<_>>()
        .await?;
    let first: Vec<NewResult> = (0..MONITORS).map(|m| result(m, START)).collect();
    for batch in first.chunks(500) {
        store_standing(&store, "p1", batch, START, &ConfirmedAtOnce).await?;
    }
    let due = store.due_looks(START, MONITORS as u32 + 1).await?;
    assert_eq!(
        due.len(),
        MONITORS,
        "every monitor's first result marks it due"
    );
    let looks: Vec<Look> = due
        .into_iter()
        .map(|(monitor_id, marks)| Look {
            next_at: Some(START + 2 * INTERVAL_MS - 1_000),
            steady: Some(INTERVAL_MS),
            ..Look::settled(&monitor_id, marks)
        })
        .collect();
    store.record_alerts(&[], &looks, START).await?;
    store.close().await;

    let mut watcher = PgConnection::connect(&server.url("central")).await?;
    sqlx::query("ANALYZE").execute(&mut watcher).await?;
    let before = rows_read(&mut watcher).await?;
    let store = Store::connect(&url).await?;
    let at = START + 5_000;
    for upload in 0..UPLOADS {
        let batch: Vec<NewResult> = (0..PER_UPLOAD)
            .map(|i| result(upload * PER_UPLOAD + i, at))
            .collect();
        store_standing(&store, "p1", &batch, at, &ConfirmedAtOnce).await?;
    }
    store.close().await;
    let after = rows_read(&mut watcher).await?;

    let results = (UPLOADS * PER_UPLOAD) as i64;
    let per_result: BTreeMap<&str, i64> = after
        .iter()
        .map(|(table, rows)| {
            let read = rows - before.get(table).copied().unwrap_or(0);
            (table.as_str(), read / results)
        })
        .collect();
    let whole = per_result.iter().filter(|(_, read)| **read > 10).count();
    assert_eq!(
        whole, 0,
        "rows read per result uploaded, by table ({MONITORS} monitors, uploads of \
         {PER_UPLOAD}): {per_result:?}"
    );
    Ok(())
}
