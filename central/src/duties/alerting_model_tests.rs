//! The stored, event-moved status against the reference: after any sequence of results,
//! pauses, edits, maintenance windows, poller losses and returns, and clock jumps (forward
//! and back), once the
//! lease holder's work has run (a liveness step, then alerting's looks at what is due), each
//! monitor's stored `shown_status` is the status derived from everything at that instant.
//! Alerting looks only at what was marked due or reached its instant; a write path that
//! forgets to mark, or an instant `changes_at` leaves out, shows up here as a stale status.

use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use serde_json::json;
use shared_proto::settings_api::MonitorStatus;
use uuid::Uuid;

use crate::config::ServeArgs;
use crate::domain::Poller;
use crate::service::clock::{Clock, ClockHandle};
use crate::service::App;

const START_MS: i64 = 1_800_000_000_000;
const MONITORS: usize = 3;

#[derive(Debug, Clone)]
enum Op {
    /// A result for monitor `i`, `ago_ms` before now.
    Result {
        i: usize,
        up: bool,
        ago_ms: i64,
    },
    Pause {
        i: usize,
        paused: bool,
    },
    /// A new interval (and so new overdue instants).
    Interval {
        i: usize,
        seconds: u64,
    },
    Heartbeat,
    /// Time passes: results become overdue, the poller (silent) goes offline.
    Advance {
        ms: i64,
    },
    /// The wall clock is set back.
    Back {
        ms: i64,
    },
    /// A maintenance window over monitor `i`, starting `starts_in_ms` from now (before now if
    /// negative), one-off or daily.
    Window {
        i: usize,
        starts_in_ms: i64,
        len_ms: i64,
        daily: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..MONITORS, any::<bool>(), 0i64..5_000).prop_map(|(i, up, ago_ms)| Op::Result { i, up, ago_ms }),
        1 => (0..MONITORS, any::<bool>()).prop_map(|(i, paused)| Op::Pause { i, paused }),
        1 => (0..MONITORS, prop_oneof![Just(10u64), Just(20), Just(60)]).prop_map(|(i, seconds)| Op::Interval { i, seconds }),
        2 => Just(Op::Heartbeat),
        4 => prop_oneof![1i64..2_000, 2_000i64..40_000, 40_000i64..200_000].prop_map(|ms| Op::Advance { ms }),
        2 => (1i64..120_000).prop_map(|ms| Op::Back { ms }),
        1 => (0..MONITORS, -100_000i64..100_000, 60_000i64..200_000, any::<bool>())
            .prop_map(|(i, starts_in_ms, len_ms, daily)| Op::Window { i, starts_in_ms, len_ms, daily }),
    ]
}

struct World {
    app: Arc<App>,
    clock: ClockHandle,
    poller: Poller,
    monitors: Vec<Uuid>,
    last_online: Option<Vec<(String, bool)>>,
    _dir: tempfile::TempDir,
}

async fn world() -> World {
    let dir = tempfile::tempdir().unwrap();
    let mut args = ServeArgs::with_sqlite_in(dir.path());
    args.offline_after = std::time::Duration::from_secs(30);
    let (clock, handle) = Clock::manual(START_MS);
    let app = App::open_with_clock(&args, clock).await.unwrap();
    let poller = crate::store::testing::poller_row(START_MS, START_MS);
    app.store.insert_poller(&poller).await.unwrap();
    let mut monitors = Vec::new();
    for i in 0..MONITORS {
        // One of them needs two results in a row to change its verdict.
        let confirm = if i == 0 { 2 } else { 1 };
        let spec = serde_json::from_value(json!({
            "name": format!("m{i}"), "kind": "http", "target": format!("http://127.0.0.1:9/{i}"),
            "interval_ms": 10_000, "timeout_ms": 5_000,
            "settings": {"confirm_down": confirm, "confirm_up": confirm},
            "poller_mode": "pinned", "poller_id": poller.id,
        }))
        .unwrap();
        monitors.push(app.create_monitor(spec).await.unwrap().id);
    }
    World {
        app,
        clock: handle,
        poller,
        monitors,
        last_online: None,
        _dir: dir,
    }
}

impl World {
    async fn apply(&mut self, op: &Op) {
        let app = &self.app;
        let now = self.clock.now_ms();
        // An operation may be refused (a result from too far back, a heartbeat too soon):
        // what matters is that whatever was stored is shown.
        match *op {
            Op::Result { i, up, ago_ms } => self.upload(i, up, now - ago_ms).await,
            Op::Pause { i, paused } => {
                let patch = serde_json::from_value(json!({ "paused": paused })).unwrap();
                let _ = app.update_monitor(self.monitors[i], patch, None).await;
            }
            Op::Interval { i, seconds } => {
                let patch =
                    serde_json::from_value(json!({ "interval_ms": seconds * 1000 })).unwrap();
                let _ = app.update_monitor(self.monitors[i], patch, None).await;
            }
            Op::Heartbeat => {
                let poller = app.store.poller(&self.poller.id).await.unwrap().unwrap();
                let beat = serde_json::from_value(json!({"version": "test"})).unwrap();
                let _ = app.heartbeat(&poller, beat).await;
            }
            Op::Advance { ms } => self.clock.advance(ms),
            Op::Back { ms } => self.clock.advance(-ms),
            Op::Window {
                i,
                starts_in_ms,
                len_ms,
                daily,
            } => {
                let starts_at = crate::service::time_of(now + starts_in_ms);
                let schedule = if daily {
                    json!({"recurrence": {"rule": "FREQ=DAILY", "time_zone": "UTC",
                        "duration_ms": len_ms}})
                } else {
                    json!({"ends_at": crate::service::time_of(now + starts_in_ms + len_ms)})
                };
                let mut spec = json!({"name": "w", "starts_at": starts_at,
                    "monitor_ids": [self.monitors[i]]});
                spec.as_object_mut()
                    .unwrap()
                    .extend(schedule.as_object().unwrap().clone());
                app.maintenance()
                    .create_window(serde_json::from_value(spec).unwrap())
                    .await
                    .unwrap();
            }
        }
        // The lease holder's work, as its loops would do it at this instant.
        super::liveness::step(app, &mut self.last_online).await;
        app.evaluate_alerts().await.unwrap();
    }

    /// The poller uploads one result of monitor `i` checked at `ts` (refused if too far ahead).
    async fn upload(&self, i: usize, up: bool, ts: i64) {
        let ts = crate::service::time_of(ts).to_rfc3339();
        let batch = serde_json::from_value(json!({
            "batch_id": Uuid::new_v4(),
            "results": [{"id": Uuid::now_v7(), "monitor_id": self.monitors[i], "ts": ts,
                "status": if up { "up" } else { "down" }, "latency_ms": 3,
                "msg": "", "meta": {}}],
        }))
        .unwrap();
        let poller = self
            .app
            .store
            .poller(&self.poller.id)
            .await
            .unwrap()
            .unwrap();
        let _ = self.app.ingest(&poller, batch).await;
    }

    /// Each monitor's (stored, derived now) status.
    async fn shown_and_derived(&self) -> Vec<(Option<String>, String)> {
        let mut both = Vec::new();
        for id in &self.monitors {
            let stored = self.app.store.monitor(&id.to_string()).await.unwrap();
            let derived = self.app.monitor_status(*id).await.unwrap();
            both.push((
                stored.unwrap().shown_status.map(|s| s.as_str().to_string()),
                derived.status.as_str().to_string(),
            ));
        }
        both
    }
}

fn block_on<T>(test: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(test)
}

/// The clock set back past the instant a status changed: the status of the earlier instant
/// is shown again, though no result, edit or poller change marked anything.
#[test]
fn a_clock_set_back_shows_the_status_of_the_earlier_instant() {
    block_on(async {
        let mut world = world().await;
        for op in [
            Op::Heartbeat,
            Op::Result {
                i: 1,
                up: true,
                ago_ms: 0,
            },
            Op::Advance { ms: 25_000 },
            Op::Heartbeat,
            Op::Advance { ms: 25_000 },
            Op::Heartbeat,
            Op::Advance { ms: 25_000 },
            Op::Heartbeat,
        ] {
            world.apply(&op).await;
        }
        assert_eq!(
            world.shown_and_derived().await[1],
            (Some("stale".into()), "stale".into()),
            "overdue"
        );
        world.apply(&Op::Back { ms: 30_000 }).await;
        assert_eq!(
            world.shown_and_derived().await[1],
            (Some("up".into()), "up".into()),
            "back before it was"
        );
    });
}

/// A result that only confirms what a steady monitor shows needs no look: ingest moves the
/// monitor's next instant itself. News (a verdict changing) is still looked at at once.
#[test]
fn a_result_that_confirms_a_steady_monitor_needs_no_look() {
    block_on(async {
        let mut world = world().await;
        world.apply(&Op::Heartbeat).await;
        world
            .apply(&Op::Result {
                i: 1,
                up: true,
                ago_ms: 0,
            })
            .await;
        world.apply(&Op::Advance { ms: 10_000 }).await;
        let monitor = world.monitors[1].to_string();
        let looked_at = |world: &World| {
            let (app, now, monitor) = (world.app.clone(), world.clock.now_ms(), monitor.clone());
            async move {
                let due = app.store.due_looks(now, 10).await.unwrap();
                due.iter().any(|(id, _)| *id == monitor)
            }
        };
        world.upload(1, true, world.clock.now_ms()).await;
        assert!(
            !looked_at(&world).await,
            "a confirmation was marked for a look"
        );
        world.upload(1, false, world.clock.now_ms()).await;
        assert!(looked_at(&world).await, "news waits for no look");
    });
}

/// A liveness step that finds nothing changed leaves nothing to wake it again: the step runs
/// when woken, so a wake of its own would have it spin (it did, at a whole core, with every
/// test passing).
#[test]
fn a_step_that_finds_nothing_changed_wakes_nothing() {
    block_on(async {
        let mut world = world().await;
        world.apply(&Op::Heartbeat).await;
        world.apply(&Op::Advance { ms: 1_000 }).await;
        // Whatever the setup woke has been consumed by now or is consumed here.
        let _ = tokio::time::timeout(Duration::ZERO, world.app.cluster.wakes.placement.notified())
            .await;
        super::liveness::step(&world.app, &mut world.last_online).await;
        let woken =
            tokio::time::timeout(Duration::ZERO, world.app.cluster.wakes.placement.notified())
                .await;
        assert!(woken.is_err(), "the step woke placement again");
    });
}

/// A daily window at 03:00 in Berlin opens at 01:00 UTC once summer time has begun (28 March
/// 2027), not at 02:00 UTC as in winter: the monitor shows `maintenance` from its local
/// start to its local end, though nothing but time marked it.
#[test]
fn a_daily_window_opens_at_its_local_time_after_a_daylight_saving_change() {
    block_on(async {
        let mut world = world().await;
        world.apply(&Op::Heartbeat).await;
        let spec = serde_json::from_value(json!({
            "name": "nightly", "starts_at": "2027-03-27T02:00:00Z",
            "recurrence": {"rule": "FREQ=DAILY", "time_zone": "Europe/Berlin",
                "duration_ms": 3_600_000},
            "monitor_ids": [world.monitors[1]],
        }))
        .unwrap();
        world.app.maintenance().create_window(spec).await.unwrap();
        let at = |text: &str| {
            text.parse::<chrono::DateTime<chrono::Utc>>()
                .unwrap()
                .timestamp_millis()
        };
        let shown = |world: &World| {
            let (app, id) = (world.app.clone(), world.monitors[1].to_string());
            async move { app.store.monitor(&id).await.unwrap().unwrap().shown_status }
        };
        let mut expect = Vec::new();
        for (when, status) in [
            ("2027-03-27T02:30:00Z", true),  // 03:30 CET
            ("2027-03-27T03:30:00Z", false), // 04:30 CET
            ("2027-03-28T01:30:00Z", true),  // 03:30 CEST
            ("2027-03-28T02:30:00Z", false), // 04:30 CEST: 03:30 CET would still be inside
        ] {
            let now = world.clock.now_ms();
            world.apply(&Op::Advance { ms: at(when) - now }).await;
            expect.push((
                when,
                status,
                shown(&world).await == Some(MonitorStatus::Maintenance),
            ));
        }
        for (when, wanted, got) in expect {
            assert_eq!(got, wanted, "in maintenance at {when}");
        }
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn the_stored_status_is_the_status_derived_now(ops in proptest::collection::vec(op(), 1..30)) {
        block_on(async {
            let mut world = world().await;
            world.apply(&Op::Heartbeat).await;
            for (step, op) in ops.iter().enumerate() {
                world.apply(op).await;
                for (i, (shown, derived)) in world.shown_and_derived().await.into_iter().enumerate() {
                    prop_assert_eq!(
                        shown.as_deref(), Some(derived.as_str()),
                        "monitor {} after step {} ({:?}) of {:?}", i, step, op, ops
                    );
                }
            }
            Ok(())
        })?;
    }
}
