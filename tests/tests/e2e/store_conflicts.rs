//! Central's store on PostgreSQL beside a writer that takes a monitor's rows as placements and
//! edits take them (its `monitors` or `monitor_locations` row, then its `alert_due` row):
//! alerting's look, writing what the monitor shows, must not wait on them in the other order.
//! PostgreSQL breaks such a cycle by aborting one of the two transactions (the likely cause of a
//! 500 seen once in CI, creating a multi-location monitor while a look showed its locations).
//! Writers that mark several monitors due (ingest, a window's edit) take their rows in one
//! pass in id order, and a cycle that cannot be ordered away (a deletion) is run again.
//!
//! Uploads and the fold of closed hours into days (`store::rollup_folding`) run at once too,
//! and uploads from several locations of the same new monitors (`store::conflicts::hold_monitors`).
//!
//! Always on PostgreSQL (a server of its own): SQLite has one writer at a time, so no cycle.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use central::domain::{LocationStatus, Monitor, MonitorStatus};
use central::service::ingest::batch::store_standing;
use central::store::{HourKey, Look, NewResult, Resolution, RollupSums, Store};
use common::ingest_rules::ConfirmedAtOnce;
use e2e::eventually;
use e2e::postgres::Postgres;
use serde_json::json;
use sqlx::{Connection, PgConnection, PgPool};

fn monitor(id: &str, regions: Option<&[&str]>) -> anyhow::Result<Monitor> {
    Ok(serde_json::from_value(json!({
        "id": id, "name": id, "kind": "http", "target": "http://127.0.0.1:9/",
        "interval_ms": 60_000, "timeout_ms": 10_000, "settings": {},
        "poller_mode": if regions.is_some() { "multi" } else { "auto" },
        "poller_regions": regions,
        "failover": null, "paused": false, "created_at": 1_000, "updated_at": 1_000, "revision": 1,
    }))?)
}

/// The store on a fresh database whose sessions look for a deadlock after 5 s of waiting, not
/// PostgreSQL's 1 s. The test's own transactions never look (`held`), so when a cycle forms,
/// PostgreSQL always aborts the store's side, however late the test's side joins it: with 1 s
/// on both, a test side that joined more than 1 s after the store's began waiting (a busy CI
/// host) found the cycle itself and was the one aborted.
async fn store_on(server: &Postgres) -> anyhow::Result<Store> {
    let url = server.create_database("central").await?;
    server
        .psql("ALTER DATABASE central SET deadlock_timeout = '5s'")
        .await?;
    Store::connect(&url).await
}

/// Begins the test's own transaction on `connection`, one that never looks for a deadlock
/// (see `store_on`).
async fn held(
    connection: &mut PgConnection,
) -> anyhow::Result<sqlx::Transaction<'_, sqlx::Postgres>> {
    let mut tx = connection.begin().await?;
    sqlx::query("SET LOCAL deadlock_timeout = '10min'")
        .execute(&mut *tx)
        .await?;
    Ok(tx)
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
    let mut tx = held(&mut placement).await?;
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

/// Runs `first` (an update of a row) in a transaction of the test's own, lets `store_write`
/// start and waits until it waits on a lock, then runs `second` in the same transaction and
/// commits while `store_write` goes on (a cycle if `store_write` holds `second`'s row). Returns
/// the other writer's outcome and the store's, both finished within 30 s.
async fn beside_another_writer<F: std::future::Future>(
    server: &Postgres,
    first: &str,
    second: &str,
    store_write: F,
) -> anyhow::Result<(anyhow::Result<()>, F::Output)>
where
    F::Output: std::fmt::Debug,
{
    let url = server.url("central");
    let mut other = PgConnection::connect(&url).await?;
    let watcher = PgPool::connect(&url).await?;
    let mut tx = held(&mut other).await?;
    sqlx::query(first).execute(&mut *tx).await?;
    tokio::pin!(store_write);
    until_waiting(&watcher, &mut store_write).await?;
    let other_writer = async {
        sqlx::query(second).execute(&mut *tx).await?;
        tx.commit().await?;
        anyhow::Ok(())
    };
    tokio::time::timeout(Duration::from_secs(30), async {
        tokio::join!(other_writer, store_write)
    })
    .await
    .context("neither finished")
}

/// How many deadlocks PostgreSQL has broken in the store's database: a retried transaction
/// hides them from the store's callers.
async fn deadlocks(server: &Postgres) -> anyhow::Result<i64> {
    let mut watcher = PgConnection::connect(&server.url("central")).await?;
    let (deadlocks,): (i64,) =
        sqlx::query_as("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
            .fetch_one(&mut watcher)
            .await?;
    Ok(deadlocks)
}

fn look(monitor_id: &str, shown: Option<&str>, locations: &[(&str, &str)]) -> Look {
    Look {
        shown: shown.map(|s| MonitorStatus::parse(s).unwrap()),
        shown_locations: locations
            .iter()
            .map(|(r, s)| (r.to_string(), LocationStatus::parse(s).unwrap()))
            .collect(),
        next_at: Some(5_000),
        ..Look::settled(monitor_id, 1)
    }
}

#[tokio::test]
async fn a_look_showing_a_monitor_never_deadlocks_with_its_placement() -> anyhow::Result<()> {
    let server = Postgres::start().await?;
    let store = store_on(&server).await?;
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
    let store = store_on(&server).await?;
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
    let store = store_on(&server).await?;
    store.insert_monitor(&monitor("m3", None)?).await?;
    let (other_writer, deleted) = beside_another_writer(
        &server,
        "UPDATE alert_due SET marks = marks + 1 WHERE monitor_id = 'm3'",
        "UPDATE monitors SET placement_reason = 'test' WHERE id = 'm3'",
        store.delete_monitor("m3", 3_000),
    )
    .await?;
    other_writer.context("the other writer")?;
    let deleted = deleted.context("the deletion, run again after the deadlock")?;
    assert!(deleted.is_some(), "the monitor was there to delete");
    assert!(store.monitor("m3").await?.is_none(), "the monitor is gone");
    Ok(())
}

fn window(id: &str, monitor_ids: &[&str]) -> central::domain::MaintenanceWindow {
    central::domain::MaintenanceWindow {
        id: id.into(),
        name: id.into(),
        starts_at: 0,
        ends_at: Some(10_000_000),
        recurrence: None,
        until_at: Some(10_000_000),
        monitor_ids: monitor_ids.iter().map(|id| id.to_string()).collect(),
        poller_ids: Vec::new(),
        regions: Vec::new(),
        tags: Vec::new(),
        notify: Default::default(),
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
    let store = store_on(&server).await?;
    store.insert_monitor(&monitor("a", None)?).await?;
    store.insert_monitor(&monitor("b", None)?).await?;
    let before = window("w", &["b"]);
    store.save_window(&before, None, 2_000).await?;
    let after = window("w", &["a", "b"]);
    let (other_writer, saved) = beside_another_writer(
        &server,
        "UPDATE alert_due SET marks = marks + 1 WHERE monitor_id = 'a'",
        "UPDATE alert_due SET marks = marks + 1 WHERE monitor_id = 'b'",
        store.save_window(&after, Some(&before), 3_000),
    )
    .await?;
    other_writer.context("the other marker")?;
    assert!(saved.context("the window's edit")?, "the window was there");
    let deadlocks = deadlocks(&server).await?;
    assert_eq!(
        deadlocks, 0,
        "a deadlock was broken (and the edit run again)"
    );
    Ok(())
}

fn result(id: &str, monitor_id: &str, ts: i64, status: &str) -> NewResult {
    NewResult {
        id: id.into(),
        monitor_id: monitor_id.into(),
        region: None,
        ts,
        status: central::store::ResultStatus::parse(status).unwrap(),
        latency_ms: Some(5),
        msg: String::new(),
        meta: "{}".into(),
        next_due_at: None,
        dependencies: None,
    }
}

/// Ingest writes due rows in more than one statement (its confirmations, then its news), each
/// in id order; it locks them all first, in one pass in id order, as every other marker takes
/// them. Taken per statement, a batch confirming `b` and bringing news of `a` held `b` while it
/// waited for `a`, and a writer marking both in order waited on it in turn.
#[tokio::test]
async fn ingest_locks_its_due_rows_in_one_pass() -> anyhow::Result<()> {
    let server = Postgres::start().await?;
    let store = store_on(&server).await?;
    let first = [
        result("r1", "a", 1_000, "up"),
        result("r2", "b", 1_000, "up"),
    ];
    store_standing(&store, "p1", &first, 1_000, &ConfirmedAtOnce).await?;
    // `a` goes down (news), `b` stays up (a confirmation).
    let next = [
        result("r3", "a", 2_000, "down"),
        result("r4", "b", 2_000, "up"),
    ];
    let (other_writer, ingested) = beside_another_writer(
        &server,
        "UPDATE alert_due SET marks = marks + 1 WHERE monitor_id = 'a'",
        "UPDATE alert_due SET marks = marks + 1 WHERE monitor_id = 'b'",
        store_standing(&store, "p1", &next, 2_000, &ConfirmedAtOnce),
    )
    .await?;
    other_writer.context("the other marker")?;
    assert_eq!(ingested.context("the upload")?.stored.len(), 2);
    assert_eq!(
        deadlocks(&server).await?,
        0,
        "a deadlock was broken (and the upload run again)"
    );
    Ok(())
}

const HOUR: i64 = 3_600_000;
/// Two hours before a UTC midnight: the results' six hours span two days.
const FOLD_START: i64 = 20_000 * 86_400_000 - 2 * HOUR;
const FOLD_UPLOADERS: usize = 3;
const FOLD_BATCHES: usize = 30;
const PER_BATCH: usize = 8;
/// What results are of: two monitors checked as a whole, one from two locations, each
/// uploader uploading for all three (two pollers uploading for one multi-location monitor at
/// once queue on its `monitors` row: `store::conflicts::hold_monitors`).
const FOLD_MONITORS: [&str; 3] = ["a", "b", "c"];

/// The `n`th result of uploader `u`, in an order that jumps between hours (a small linear
/// congruential walk), so that many arrive after their hour was folded.
fn folding_result(u: usize, n: usize) -> NewResult {
    let walk = (n * 7_919 + u * 104_729) % 10_007;
    let monitor = FOLD_MONITORS[walk % FOLD_MONITORS.len()];
    // A poller checks a monitor from its own location only.
    let region = (monitor == "c").then_some(["eu", "us"][u % 2]);
    let up = !walk.is_multiple_of(5);
    NewResult {
        id: format!("u{u}-{n}"),
        monitor_id: monitor.into(),
        region: region.map(Into::into),
        ts: FOLD_START + (walk as i64 * 2_161) % (6 * HOUR),
        status: if up {
            central::store::ResultStatus::Up
        } else {
            central::store::ResultStatus::Down
        },
        latency_ms: Some((walk % 900) as i64),
        msg: String::new(),
        meta: "{}".into(),
        next_due_at: None,
        dependencies: None,
    }
}

/// (up, down, latency sum) per place and day.
type Model = BTreeMap<(String, String, i64), (i64, i64, i64)>;

fn folding_model() -> Model {
    let mut model = Model::new();
    for u in 0..FOLD_UPLOADERS {
        for n in 0..FOLD_BATCHES * PER_BATCH {
            let r = folding_result(u, n);
            let day = Resolution::Day.bucket_of(r.ts);
            for region in std::iter::once("").chain(r.region.as_deref()) {
                let counts = model
                    .entry((r.monitor_id.clone(), region.to_string(), day))
                    .or_default();
                if r.status == central::store::ResultStatus::Up {
                    counts.0 += 1;
                    counts.2 += r.latency_ms.unwrap();
                } else {
                    counts.1 += 1;
                }
            }
        }
    }
    model
}

fn counts(sums: &RollupSums) -> (i64, i64, i64) {
    (sums.up, sums.down, sums.latency_sum)
}

/// The fold locks the hour rows it folds and ingest's upsert of an hour row reads whether it
/// was folded (`store::rollup_folding`): however uploads and folds interleave, each result is
/// in its day exactly once, and neither deadlocks with the other. On SQLite (one writer) the
/// same is checked against a model in `store::rollup_folding::tests`.
#[tokio::test]
async fn uploads_and_folds_at_once_put_each_result_in_its_day_once() -> anyhow::Result<()> {
    let server = Postgres::start().await?;
    let url = server.create_database("central").await?;
    let store = Arc::new(Store::connect(&url).await?);
    store.insert_monitor(&monitor("a", None)?).await?;
    store.insert_monitor(&monitor("b", None)?).await?;
    store
        .insert_monitor(&monitor("c", Some(&["eu", "us"]))?)
        .await?;
    let mut tasks = Vec::new();
    for u in 0..FOLD_UPLOADERS {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            for b in 0..FOLD_BATCHES {
                let batch: Vec<NewResult> = (b * PER_BATCH..(b + 1) * PER_BATCH)
                    .map(|n| folding_result(u, n))
                    .collect();
                store_standing(&store, &format!("p{u}"), &batch, b as i64, &ConfirmedAtOnce)
                    .await?;
                // A re-sent batch counts nothing.
                if b.is_multiple_of(7) {
                    store_standing(&store, &format!("p{u}"), &batch, b as i64, &ConfirmedAtOnce)
                        .await?;
                }
            }
            anyhow::Ok(())
        }));
    }
    let folder = {
        let store = store.clone();
        tokio::spawn(async move {
            // Small steps over moving bounds: folds stop between rows of one hour.
            for round in 0..120 {
                let before = FOLD_START + (round % 7) * HOUR;
                store.fold_hours(before, &HourKey::start(), 3).await?;
                tokio::task::yield_now().await;
            }
            anyhow::Ok(())
        })
    };
    for task in tasks {
        task.await??;
    }
    folder.await??;
    let model = folding_model();
    let check = |label: &'static str| {
        let store = store.clone();
        let model = model.clone();
        async move {
            for (monitor, region) in [("a", ""), ("b", ""), ("c", ""), ("c", "eu"), ("c", "us")] {
                let days = store
                    .rollup_buckets(monitor, region, Resolution::Day, 0, 10)
                    .await?;
                let read: BTreeMap<i64, (i64, i64, i64)> = days
                    .iter()
                    .map(|d| (d.bucket_start, counts(&d.sums)))
                    .collect();
                let expected: BTreeMap<i64, (i64, i64, i64)> = model
                    .iter()
                    .filter(|((m, r, _), _)| m == monitor && r == region)
                    .map(|((_, _, day), c)| (*day, *c))
                    .collect();
                assert_eq!(read, expected, "{label}: {monitor} {region:?}");
                let mut of_hours: BTreeMap<i64, RollupSums> = BTreeMap::new();
                for hour in store
                    .rollup_buckets(monitor, region, Resolution::Hour, 0, 100)
                    .await?
                {
                    of_hours
                        .entry(Resolution::Day.bucket_of(hour.bucket_start))
                        .or_default()
                        .add(&hour.sums);
                }
                let days: BTreeMap<i64, RollupSums> =
                    days.into_iter().map(|d| (d.bucket_start, d.sums)).collect();
                assert_eq!(days, of_hours, "{label}: {monitor} {region:?}");
            }
            anyhow::Ok(())
        }
    };
    check("some hours folded").await?;
    let mut after = HourKey::start();
    loop {
        let (folded, last) = store.fold_hours(i64::MAX, &after, 50).await?;
        if folded < 50 {
            break;
        }
        after = last;
    }
    check("every hour folded").await?;
    let mut watcher = PgConnection::connect(&server.url("central")).await?;
    let (unfolded, deadlocks): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT COUNT(*) FROM rollups WHERE folded = 0), \
            (SELECT deadlocks FROM pg_stat_database WHERE datname = current_database())",
    )
    .fetch_one(&mut watcher)
    .await?;
    assert_eq!((unfolded, deadlocks), (0, 0));
    Ok(())
}

const SHARED_ROUNDS: usize = 40;
/// Each round's monitors: their status rows do not exist before the round's uploads.
const SHARED_MONITORS: usize = 4;
/// One poller per location, each uploading for every monitor of the round from its own.
const SHARED_LOCATIONS: [&str; 4] = ["ap", "eu", "sa", "us"];
const SHARED_CHECKS: usize = 3;

/// Uploads for multi-location monitors from each of their locations at once, starting with
/// each monitor's first results (`store::conflicts::hold_monitors`): every result is stored
/// once, every location gets its row, and no cycle is ever broken (before, two uploads of one
/// monitor's first results waited on each other's status rows; PostgreSQL broke the cycle and
/// the retry hid it).
#[tokio::test]
async fn uploads_sharing_monitors_from_several_locations_never_deadlock() -> anyhow::Result<()> {
    let server = Postgres::start().await?;
    let url = server.create_database("central").await?;
    let store = Arc::new(Store::connect(&url).await?);
    for round in 0..SHARED_ROUNDS {
        for m in 0..SHARED_MONITORS {
            store
                .insert_monitor(&monitor(
                    &format!("m{round}-{m}"),
                    Some(&SHARED_LOCATIONS[..]),
                )?)
                .await?;
        }
    }
    let start = Arc::new(tokio::sync::Barrier::new(SHARED_LOCATIONS.len()));
    let mut tasks = Vec::new();
    for (u, location) in SHARED_LOCATIONS.into_iter().enumerate() {
        let (store, start) = (store.clone(), start.clone());
        tasks.push(tokio::spawn(async move {
            let mut stored = 0;
            for round in 0..SHARED_ROUNDS {
                // Monitors in a different order per poller: the store orders its locks itself.
                let mut batch = Vec::new();
                for m in 0..SHARED_MONITORS {
                    let m = (m + u) % SHARED_MONITORS;
                    for check in 0..SHARED_CHECKS {
                        batch.push(NewResult {
                            id: format!("{location}-{round}-{m}-{check}"),
                            monitor_id: format!("m{round}-{m}"),
                            region: Some(location.into()),
                            ts: 1_000 + (check * 60_000 + u) as i64,
                            status: if check == 1 && u == 0 {
                                central::store::ResultStatus::Down
                            } else {
                                central::store::ResultStatus::Up
                            },
                            latency_ms: Some(10),
                            msg: String::new(),
                            meta: "{}".into(),
                            next_due_at: None,
                            dependencies: None,
                        });
                    }
                }
                start.wait().await;
                stored += store_standing(&store, location, &batch, 1_000, &ConfirmedAtOnce)
                    .await?
                    .stored
                    .len();
            }
            anyhow::Ok(stored)
        }));
    }
    for task in tasks {
        assert_eq!(
            task.await??,
            SHARED_ROUNDS * SHARED_MONITORS * SHARED_CHECKS
        );
    }
    let mut watcher = PgConnection::connect(&server.url("central")).await?;
    let (results, monitors, locations): (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT COUNT(*) FROM results), (SELECT COUNT(*) FROM monitor_status), \
            (SELECT COUNT(*) FROM location_status)",
    )
    .fetch_one(&mut watcher)
    .await?;
    let rounds = (SHARED_ROUNDS * SHARED_MONITORS) as i64;
    assert_eq!(
        (results, monitors, locations),
        (
            rounds * (SHARED_LOCATIONS.len() * SHARED_CHECKS) as i64,
            rounds,
            rounds * SHARED_LOCATIONS.len() as i64
        )
    );
    assert_eq!(
        deadlocks(&server).await?,
        0,
        "a deadlock was broken (and an upload run again)"
    );
    Ok(())
}
