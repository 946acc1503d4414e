//! Central's store on PostgreSQL beside a writer that takes a monitor's rows as placements and
//! edits take them (its `monitors` or `monitor_locations` row, then its `alert_due` row):
//! alerting's look, writing what the monitor shows, must not wait on them in the other order.
//! PostgreSQL breaks such a cycle by aborting one of the two transactions (the likely cause of a
//! 500 seen once in CI, creating a multi-location monitor while a look showed its locations).
//!
//! Always on PostgreSQL (a server of its own): SQLite has one writer at a time, so no cycle.

use std::time::Duration;

use anyhow::Context;
use central::store::{Look, MonitorRow, Store};
use e2e::eventually;
use e2e::postgres::Postgres;
use serde_json::json;
use sqlx::{Connection, PgConnection, PgPool};

fn monitor(id: &str, regions: Option<&[&str]>) -> anyhow::Result<MonitorRow> {
    Ok(serde_json::from_value(json!({
        "id": id, "name": id, "kind": "http", "target": "http://127.0.0.1:9/",
        "interval_ms": 60_000, "timeout_ms": 10_000, "settings": "{}",
        "poller_mode": if regions.is_some() { "multi" } else { "auto" },
        "poller_regions": regions.map(|r| json!(r).to_string()),
        "failover": null, "paused": 0, "created_at": 1_000, "updated_at": 1_000, "revision": 1,
    }))?)
}

/// Holds `row` (an `UPDATE` of it, as a placement's) in a transaction of the test's own, lets
/// a look that shows `look`'s statuses start, waits until it waits on that row, then marks the
/// monitor due from the same transaction (as a placement does after its rows) and commits.
/// Both must succeed.
async fn look_beside_a_placement(
    server: &Postgres,
    store: &Store,
    row: &str,
    look: Look,
) -> anyhow::Result<()> {
    let url = server.url("central");
    let mut placement = PgConnection::connect(&url).await?;
    let watcher = PgPool::connect(&url).await?;
    let mut tx = placement.begin().await?;
    sqlx::query(row)
        .bind(&look.monitor_id)
        .execute(&mut *tx)
        .await?;
    let looks = [look.clone()];
    let recorded = store.record_alerts(&[], &looks, 2_000);
    tokio::pin!(recorded);
    // The look runs until it waits on the held row.
    until_waiting(&watcher, &mut recorded).await?;
    let marked =
        sqlx::query("UPDATE alert_due SET marks = marks + 1, due_at = 1000 WHERE monitor_id = $1")
            .bind(&look.monitor_id)
            .execute(&mut *tx)
            .await
            .context("the placement's mark, beside the look");
    let committed = match marked {
        Ok(_) => tx.commit().await.context("the placement's commit"),
        Err(error) => Err(error),
    };
    let recorded = tokio::time::timeout(Duration::from_secs(20), recorded)
        .await
        .context("the look never finished")?;
    committed?;
    recorded.context("the look, beside the placement")?;
    Ok(())
}

/// Polls until PostgreSQL shows a backend waiting on a lock (the store's transaction, blocked
/// on a row the test holds); fails if `store_write` finishes first.
async fn until_waiting<F: std::future::Future + Unpin>(
    watcher: &PgPool,
    store_write: &mut F,
) -> anyhow::Result<()>
where
    F::Output: std::fmt::Debug,
{
    let waiting = eventually(
        Duration::from_secs(20),
        "a write waiting on a lock",
        || async {
            let (waiting,): (i64,) = sqlx::query_as(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'",
            )
            .fetch_one(watcher)
            .await
            .ok()?;
            (waiting > 0).then_some(())
        },
    );
    tokio::select! {
        done = store_write => anyhow::bail!("the store's write did not wait: {done:?}"),
        waited = waiting => waited,
    }
}

fn look(monitor_id: &str, shown: Option<&str>, locations: &[(&str, &str)]) -> Look {
    Look {
        shown: shown.map(str::to_string),
        shown_locations: locations
            .iter()
            .map(|(r, s)| (r.to_string(), s.to_string()))
            .collect(),
        next_at: Some(5_000),
        ..Look::settled(monitor_id, 1)
    }
}

#[tokio::test]
async fn a_look_showing_a_monitor_never_deadlocks_with_its_placement() -> anyhow::Result<()> {
    let server = Postgres::start().await?;
    let store = Store::connect(&server.create_database("central").await?).await?;
    store.insert_monitor(&monitor("m1", None)?).await?;
    look_beside_a_placement(
        &server,
        &store,
        "UPDATE monitors SET placement_reason = 'test' WHERE id = $1",
        look("m1", Some("pending"), &[]),
    )
    .await
}

#[tokio::test]
async fn a_look_showing_a_location_never_deadlocks_with_its_placement() -> anyhow::Result<()> {
    let server = Postgres::start().await?;
    let store = Store::connect(&server.create_database("central").await?).await?;
    store
        .insert_monitor(&monitor("m2", Some(&["eu", "us"]))?)
        .await?;
    look_beside_a_placement(
        &server,
        &store,
        "UPDATE monitor_locations SET placement_reason = 'test' WHERE monitor_id = $1 \
         AND region = 'us'",
        look("m2", None, &[("eu", "pending"), ("us", "pending")]),
    )
    .await
}

/// Not every cycle can be ordered away (a deletion walks its children's rows after its own):
/// a transaction PostgreSQL aborts as a deadlock is run again, so the deletion still succeeds
/// once the other writer is through. Here the test's transaction holds the monitor's due row,
/// the deletion waits on it while holding the monitor, and the test's transaction then asks
/// for the monitor: PostgreSQL aborts the deletion, which waited first.
#[tokio::test]
async fn a_deletion_aborted_as_a_deadlock_is_run_again() -> anyhow::Result<()> {
    let server = Postgres::start().await?;
    let store = Store::connect(&server.create_database("central").await?).await?;
    store.insert_monitor(&monitor("m3", None)?).await?;
    let url = server.url("central");
    let mut other = PgConnection::connect(&url).await?;
    let watcher = PgPool::connect(&url).await?;
    let mut tx = other.begin().await?;
    sqlx::query("UPDATE alert_due SET marks = marks + 1 WHERE monitor_id = 'm3'")
        .execute(&mut *tx)
        .await?;
    let deleted = store.delete_monitor("m3", 3_000);
    tokio::pin!(deleted);
    until_waiting(&watcher, &mut deleted).await?;
    let other_writer = async {
        sqlx::query("UPDATE monitors SET placement_reason = 'test' WHERE id = 'm3'")
            .execute(&mut *tx)
            .await?;
        tx.commit().await
    };
    let (other_writer, deleted) = tokio::time::timeout(Duration::from_secs(30), async {
        tokio::join!(other_writer, deleted)
    })
    .await
    .context("neither finished")?;
    other_writer.context("the other writer")?;
    let deleted = deleted.context("the deletion, run again after the deadlock")?;
    assert!(deleted.is_some(), "the monitor was there to delete");
    assert!(store.monitor("m3").await?.is_none(), "the monitor is gone");
    Ok(())
}

fn window(id: &str, monitor_ids: &[&str]) -> central::store::WindowRow {
    central::store::WindowRow {
        id: id.into(),
        name: id.into(),
        starts_at: 0,
        ends_at: Some(10_000_000),
        rule: None,
        time_zone: None,
        duration_ms: None,
        until_at: Some(10_000_000),
        monitor_ids: json!(monitor_ids).to_string(),
        poller_ids: "[]".into(),
        regions: "[]".into(),
        tags: "[]".into(),
        notify: "[]".into(),
        stop_checks: false,
        created_at: 1_000,
        updated_at: 1_000,
    }
}

/// A window's edit marks what it covered before and after in one pass in id order, as every
/// other marker takes the rows: in two passes (before, then after) it held the monitor it
/// already covered while it waited for one it newly covers, and a writer marking both in order
/// waited on it in turn.
#[tokio::test]
async fn a_window_edit_marks_its_monitors_in_one_pass() -> anyhow::Result<()> {
    let server = Postgres::start().await?;
    let store = Store::connect(&server.create_database("central").await?).await?;
    store.insert_monitor(&monitor("a", None)?).await?;
    store.insert_monitor(&monitor("b", None)?).await?;
    let before = window("w", &["b"]);
    store.save_window(&before, None, 2_000).await?;
    let url = server.url("central");
    let mut other = PgConnection::connect(&url).await?;
    let watcher = PgPool::connect(&url).await?;
    let mut tx = other.begin().await?;
    sqlx::query("UPDATE alert_due SET marks = marks + 1 WHERE monitor_id = 'a'")
        .execute(&mut *tx)
        .await?;
    let after = window("w", &["a", "b"]);
    let saved = store.save_window(&after, Some(&before), 3_000);
    tokio::pin!(saved);
    until_waiting(&watcher, &mut saved).await?;
    let other_writer = async {
        sqlx::query("UPDATE alert_due SET marks = marks + 1 WHERE monitor_id = 'b'")
            .execute(&mut *tx)
            .await?;
        tx.commit().await
    };
    let (other_writer, saved) = tokio::time::timeout(Duration::from_secs(30), async {
        tokio::join!(other_writer, saved)
    })
    .await
    .context("neither finished")?;
    other_writer.context("the other marker")?;
    assert!(saved.context("the window's edit")?, "the window was there");
    let (deadlocks,): (i64,) =
        sqlx::query_as("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
            .fetch_one(&watcher)
            .await?;
    assert_eq!(
        deadlocks, 0,
        "a deadlock was broken (and the edit run again)"
    );
    Ok(())
}
