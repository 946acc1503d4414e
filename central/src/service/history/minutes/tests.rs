//! Minute history derived from the results against what ingest stores and against the slow
//! reading of the results themselves: whatever order the results arrive in, a whole hour's
//! minutes add up to its stored hour bucket (counts, latency and time), and a 24 h window's
//! partial first hour is exact.

use std::sync::Arc;

use proptest::prelude::*;
use serde_json::json;
use uuid::Uuid;

use crate::config::ServeArgs;
use crate::domain::Monitor;
use crate::domain::Poller;
use crate::service::clock::{Clock, ClockHandle};
use crate::service::uptime::{self, Timeline};
use crate::service::App;
use crate::store::testing::runtime;
use crate::store::{Resolution, RollupSums, TimePoint};
use shared_proto::history::{History, HistoryResolution};

/// On an hour boundary.
const START_MS: i64 = 1_800_000_000_000;
const MIN: i64 = 60_000;
const HOUR: i64 = 3_600_000;

struct World {
    app: Arc<App>,
    clock: ClockHandle,
    poller: Poller,
    monitor: Uuid,
    _dir: tempfile::TempDir,
}

async fn world(interval_ms: i64, now: i64) -> World {
    world_with(interval_ms, now, |_| {}).await
}

async fn world_with(interval_ms: i64, now: i64, configure: impl FnOnce(&mut ServeArgs)) -> World {
    let dir = tempfile::tempdir().unwrap();
    let mut args = ServeArgs::with_sqlite_in(dir.path());
    configure(&mut args);
    let (clock, handle) = Clock::manual(now);
    let app = App::open_with_clock(&args, clock).await.unwrap();
    let poller = crate::store::testing::poller_row(START_MS, now);
    app.store.insert_poller(&poller).await.unwrap();
    let spec = serde_json::from_value(json!({
        "name": "m", "kind": "http", "target": "http://127.0.0.1:9/",
        "interval_ms": interval_ms, "timeout_ms": 5_000,
        "poller_mode": "pinned", "poller_id": poller.id,
    }))
    .unwrap();
    let monitor = app.create_monitor(spec).await.unwrap().id;
    World {
        app,
        clock: handle,
        poller,
        monitor,
        _dir: dir,
    }
}

/// A result as the tests make them: at `ts`, up with a latency or down.
#[derive(Debug, Clone)]
struct Made {
    ts: i64,
    up: bool,
    latency_ms: i64,
}

impl World {
    async fn upload(&self, batch: &[Made]) {
        let results: Vec<_> = batch
            .iter()
            .map(|r| {
                json!({"id": Uuid::now_v7(), "monitor_id": self.monitor,
                    "ts": crate::service::time_of(r.ts).to_rfc3339(),
                    "status": if r.up { "up" } else { "down" }, "latency_ms": r.latency_ms,
                    "msg": "", "meta": {}})
            })
            .collect();
        let batch = serde_json::from_value(json!({"batch_id": Uuid::new_v4(), "results": results}))
            .unwrap();
        let poller = self
            .app
            .store
            .poller(&self.poller.id)
            .await
            .unwrap()
            .unwrap();
        self.app.ingest(&poller, batch).await.unwrap();
    }

    async fn row(&self) -> Monitor {
        let id = self.monitor.to_string();
        self.app.store.monitor(&id).await.unwrap().unwrap()
    }

    async fn chart(&self, since: i64) -> History {
        let minute = HistoryResolution::Minute;
        let app = &self.app;
        app.history()
            .monitor_history(self.monitor, minute, Some(since), None)
            .await
            .unwrap()
    }

    async fn minutes(&self, from: i64, until: i64) -> super::Minutes {
        let row = self.row().await;
        let id = row.id.clone();
        let limit = super::MAX_MINUTE_RESULTS;
        let app = &self.app;
        let mut minutes = app
            .history()
            .minute_sums(&[row], "", (from, until), limit)
            .await
            .unwrap();
        minutes.remove(&id).unwrap_or_default()
    }
}

/// Results every `interval` give or take a little, now and then a silence longer than a
/// result stands for, each up (with a latency) or down.
fn results(interval_ms: i64) -> impl Strategy<Value = Vec<Made>> {
    proptest::collection::vec((0i64..20_000, 0u8..10, any::<bool>(), 0i64..3_000), 1..60).prop_map(
        move |steps| {
            let mut ts = START_MS + 7_000;
            steps
                .into_iter()
                .map(|(jitter, gap, up, latency_ms)| {
                    ts += interval_ms + jitter + if gap == 0 { 20 * MIN } else { 0 };
                    Made { ts, up, latency_ms }
                })
                .collect()
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Whatever batches and order the results arrive in, the minutes of each whole hour before
    /// the newest result's add up to that hour's stored bucket: the same counts, latency and
    /// time (the newest result's open span is in neither).
    #[test]
    fn a_whole_hours_minutes_add_up_to_its_stored_bucket(
        interval_s in prop_oneof![Just(20i64), Just(60), Just(300)],
        made in results(60_000),
        shuffle in proptest::collection::vec(any::<prop::sample::Index>(), 60),
        batch_sizes in proptest::collection::vec(1usize..6, 60),
    ) {
        let made: Vec<Made> = made
            .into_iter()
            .map(|mut r| { r.ts = START_MS + (r.ts - START_MS) * interval_s / 60; r })
            .collect();
        let newest = made.iter().map(|r| r.ts).max().unwrap();
        runtime().block_on(async {
            let world = world(interval_s * 1_000, newest + MIN).await;
            let mut arriving = made.clone();
            for (i, index) in shuffle.iter().enumerate().take(arriving.len()) {
                let j = index.index(arriving.len());
                arriving.swap(i, j);
            }
            let mut rest = arriving.as_slice();
            for size in batch_sizes.iter().cycle() {
                if rest.is_empty() {
                    break;
                }
                let (batch, more) = rest.split_at((*size).min(rest.len()));
                world.upload(batch).await;
                rest = more;
            }
            let id = world.monitor.to_string();
            let mut hour = START_MS;
            while hour + HOUR <= Resolution::Hour.bucket_of(newest) {
                let stored = world
                    .app
                    .store
                    .rollup_sums(std::slice::from_ref(&id), "", Resolution::Hour, hour, hour + 1)
                    .await
                    .unwrap()
                    .remove(&id)
                    .unwrap_or_default();
                let derived = world.minutes(hour, hour + HOUR).await;
                assert_eq!(derived.cut, None);
                assert!(derived.buckets.keys().all(|m| (hour..hour + HOUR).contains(m)));
                assert_eq!(derived.total(), stored, "hour {}", (hour - START_MS) / HOUR);
                hour += HOUR;
            }
        });
    }

    /// The 24 h window is exact however its first moment falls between results: its time is
    /// what the results say of each instant of the day, read the slow way.
    #[test]
    fn the_days_window_is_exact_at_its_first_hour(
        made in results(60_000),
        now_in_ms in 0i64..HOUR,
    ) {
        // The results span about an hour; the window starts somewhere among them.
        let newest = made.iter().map(|r| r.ts).max().unwrap();
        let now = START_MS + 24 * HOUR + now_in_ms;
        runtime().block_on(async {
            let world = world(60_000, now.max(newest)).await;
            world.upload(&made).await;
            world.clock.set(now.max(newest));
            let now = world.app.now_ms();
            let row = world.row().await;
            let day = &world.app.history().uptimes(std::slice::from_ref(&row), "", &[24 * HOUR]).await.unwrap()[0];
            let window = &day[&row.id];
            let points: Vec<TimePoint> = made
                .iter()
                .enumerate()
                .map(|(i, r)| TimePoint {
                    id: format!("{i:03}"),
                    region: None,
                    ts: r.ts,
                    status: if r.up { shared_proto::poller_api::ResultStatus::Up } else { shared_proto::poller_api::ResultStatus::Down },
                })
                .collect();
            let refs: Vec<&TimePoint> = points.iter().collect();
            let timeline = Timeline::of_monitor(&row);
            let start = now - 24 * HOUR;
            let (up, down) = uptime::total(&timeline.spans(&refs, start, now), start, now);
            let checks = made.iter().filter(|r| (start..now).contains(&r.ts)).count();
            assert_eq!((window.up_ms, window.down_ms), (up as u64, down as u64));
            assert_eq!(window.checks, checks as u64);
        });
    }
}

/// A chart's minutes: each result in its minute, the newest one's time up to now or until it
/// stops standing (interval, timeout and a second after it: 66 s here), and nothing before
/// minute history's reach.
#[tokio::test]
async fn a_chart_counts_each_result_in_its_minute_and_the_newest_up_to_now() {
    let now = START_MS + 3 * HOUR;
    let world = world(60_000, now).await;
    let made = [
        Made {
            ts: now - 3 * MIN - 30_000,
            up: true,
            latency_ms: 40,
        },
        Made {
            ts: now - 2 * MIN - 30_000,
            up: false,
            latency_ms: 900,
        },
        Made {
            ts: now - MIN - 30_000,
            up: true,
            latency_ms: 60,
        },
    ];
    world.upload(&made).await;
    let history = world.chart(now - 10 * MIN).await;
    let shown: Vec<(i64, u64, u64, u64, u64)> = history
        .buckets
        .iter()
        .map(|b| {
            (
                (now - b.start.timestamp_millis()) / 1_000,
                b.up,
                b.down,
                b.up_ms,
                b.down_ms,
            )
        })
        .collect();
    assert_eq!(
        shown,
        [
            (240, 1, 0, 30_000, 0),
            (180, 0, 1, 30_000, 30_000),
            (120, 1, 0, 30_000, 30_000),
            (60, 0, 0, 36_000, 0),
        ],
        "{history:?}"
    );
    assert!(!history.truncated);
    assert_eq!(history.buckets[0].latency_ms_mean, Some(40.0));

    // Minute history reaches back as far as its retention (48 h by default). By now the
    // newest result's span has ended, 36 s into the minute after it (66 s after the result).
    world.clock.set(now + 47 * HOUR);
    let old = world.chart(START_MS).await;
    assert_eq!(old.buckets.len(), 4, "{old:?}");
    assert_eq!(old.buckets[3].up_ms, 36_000);
    world.clock.set(now + 49 * HOUR);
    let gone = world.chart(START_MS).await;
    assert!(gone.buckets.is_empty(), "{gone:?}");
}

#[test]
fn sums_add_up_with_extremes() {
    let mut a = RollupSums::default();
    a.count("up", Some(30));
    let mut b = RollupSums::default();
    b.count("up", Some(700));
    b.count("down", Some(5));
    a.add(&b);
    assert_eq!((a.up, a.down, a.total), (2, 1, 3));
    assert_eq!(
        (a.latency_min, a.latency_max, a.latency_sum),
        (Some(30), Some(700), 730)
    );
    a.add(&RollupSums::default());
    assert_eq!(a.latency_min, Some(30));
}

/// A window's first hour holding more results than an edge reads (a flood) is counted in
/// proportion, from its stored bucket, instead of from a cut read.
#[tokio::test]
async fn a_flooded_first_hour_is_counted_from_its_bucket() {
    let now = START_MS + 24 * HOUR + 30 * MIN;
    let world = world(5_000, now).await;
    // 100 results before the window starts, in its first hour; then more than an edge reads.
    let before = (0..100).map(|i| START_MS + i * 10_000);
    let inside = (0..=i64::from(super::MAX_EDGE_RESULTS)).map(|i| START_MS + 30 * MIN + i * 400);
    let flood: Vec<Made> = before
        .chain(inside)
        .map(|ts| Made {
            ts,
            up: true,
            latency_ms: 5,
        })
        .collect();
    for batch in flood.chunks(1_000) {
        world.upload(batch).await;
    }
    let row = world.row().await;
    let day = &world
        .app
        .history()
        .uptimes(std::slice::from_ref(&row), "", &[24 * HOUR])
        .await
        .unwrap()[0][&row.id];
    assert_eq!(
        day.checks,
        flood.len() as u64,
        "the whole first hour's bucket, not the half of it in the window"
    );
}

/// Past its read bound, a range's minutes stop before the minute of the first result left
/// unread, and say so (a chart answer is then `truncated`).
#[tokio::test]
async fn a_cut_read_ends_before_the_first_minute_it_could_not_finish() {
    let now = START_MS + 2 * HOUR;
    let world = world(60_000, now).await;
    let made: Vec<Made> = [0, 20_000, 40_000, 70_000, 80_000]
        .into_iter()
        .map(|offset| Made {
            ts: START_MS + HOUR + offset,
            up: true,
            latency_ms: 5,
        })
        .collect();
    world.upload(&made).await;
    let row = world.row().await;
    let range = (START_MS + HOUR, now);
    let mut read = world
        .app
        .history()
        .minute_sums(std::slice::from_ref(&row), "", range, 4)
        .await
        .unwrap();
    let minutes = read.remove(&row.id).unwrap();
    assert_eq!(
        minutes.cut,
        Some(START_MS + HOUR + MIN),
        "the 4th read is in minute 1"
    );
    let counted: Vec<(i64, i64)> = minutes
        .buckets
        .iter()
        .map(|(start, sums)| ((start - START_MS - HOUR) / MIN, sums.total))
        .collect();
    assert_eq!(counted, [(0, 3)], "only the whole minute before the cut");
    let whole = world.minutes(range.0, range.1).await;
    assert_eq!((whole.cut, whole.total().total), (None, 5));
}

/// A multi-location monitor is under a window aimed at the poller one of its locations runs on,
/// as ingest takes it: that time is nobody's in its minutes too.
#[tokio::test]
async fn a_window_on_a_locations_poller_quiets_the_monitors_minutes() {
    let now = START_MS + 3 * HOUR;
    let dir = tempfile::tempdir().unwrap();
    let args = ServeArgs::with_sqlite_in(dir.path());
    let (clock, _handle) = Clock::manual(now);
    let app = App::open_with_clock(&args, clock).await.unwrap();
    let mut poller = crate::store::testing::poller_row(START_MS, now);
    poller.region = Some("eu".into());
    app.store.insert_poller(&poller).await.unwrap();
    let spec = serde_json::from_value(json!({
        "name": "m", "kind": "http", "target": "http://127.0.0.1:9/",
        "interval_ms": 60_000, "poller_mode": "multi", "poller_regions": ["eu", "us"],
    }))
    .unwrap();
    let id = app.create_monitor(spec).await.unwrap().id.to_string();
    let located = app
        .store
        .locations_of(Some(std::slice::from_ref(&id)))
        .await
        .unwrap();
    let eu = located.iter().find(|l| l.region == "eu").unwrap();
    assert_eq!(eu.assigned_poller_id.as_ref(), Some(&poller.id));
    let window = serde_json::from_value(json!({
        "name": "w", "starts_at": crate::service::time_of(now - 10 * MIN).to_rfc3339(),
        "ends_at": crate::service::time_of(now + 10 * MIN).to_rfc3339(),
        "poller_ids": [poller.id],
    }))
    .unwrap();
    app.maintenance().create_window(window).await.unwrap();
    let row = app.store.monitor(&id).await.unwrap().unwrap();
    let quiet = app
        .history()
        .quiet_time(&[row], now - HOUR, now)
        .await
        .unwrap();
    assert_eq!(quiet[&id], [(now - 10 * MIN, now)]);
}

/// A chart longer than a history's 5,000 buckets of minutes, with a long gap in it, still
/// reaches its newest minutes: the results read bound the answer, not a span of time.
#[tokio::test]
async fn a_gap_does_not_shorten_a_chart() {
    let now = START_MS + 6 * 24 * HOUR;
    let world = world_with(60_000, now, |args| {
        args.minute_rollups_retention = std::time::Duration::from_secs(6 * 86_400);
    })
    .await;
    let at = |ts| Made {
        ts,
        up: true,
        latency_ms: 5,
    };
    world
        .upload(&[at(START_MS + HOUR), at(now - 2 * MIN)])
        .await;
    let chart = world.chart(START_MS + HOUR).await;
    let counted: Vec<i64> = chart
        .buckets
        .iter()
        .filter(|b| b.total > 0)
        .map(|b| b.start.timestamp_millis())
        .collect();
    assert_eq!(counted, [START_MS + HOUR, now - 2 * MIN], "{chart:?}");
    assert!(!chart.truncated);
}
