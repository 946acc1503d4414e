//! Deterministic tests of the engine's rules: time is a number we move by hand.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use rand::SeedableRng;
use serde_json::{json, Value};
use shared_proto::poller_api::{EventKind, ResultStatus};
use shared_proto::{AssignedMonitor, CheckKind};
use uuid::Uuid;

use super::breaker::BreakerState;
use super::core::{Dispatch, Engine, EngineConfig};
use crate::checks::CheckOutcome;

pub(super) fn wall() -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000, 0).unwrap()
}

pub(super) fn engine() -> Engine {
    Engine::with_rng(
        EngineConfig::default(),
        rand::rngs::StdRng::seed_from_u64(1),
    )
}

pub(super) fn monitor(url: &str, interval_ms: u64, settings: Value) -> AssignedMonitor {
    AssignedMonitor {
        id: Uuid::new_v4(),
        name: "m".into(),
        kind: CheckKind::Http,
        target: url.into(),
        interval_ms,
        timeout_ms: 1000,
        settings: settings.as_object().cloned().unwrap_or_default(),
        revision: 1,
        phase_ms: None,
    }
}

pub(super) fn up() -> CheckOutcome {
    CheckOutcome::up(Duration::from_millis(5), json!({}))
}

pub(super) fn down() -> CheckOutcome {
    CheckOutcome::down(
        Some(Duration::from_millis(5)),
        "expected 2xx, got 503",
        json!({}),
    )
}

/// Polls at `at` and expects exactly one dispatch.
pub(super) fn one(engine: &mut Engine, at: Instant) -> Dispatch {
    let mut dispatches = engine.poll(at, wall());
    assert_eq!(dispatches.len(), 1, "expected one dispatch at {at:?}");
    dispatches.pop().unwrap()
}

/// Runs a single monitor's check whenever due, with `outcome`, and returns the next due time.
pub(super) fn run_once(engine: &mut Engine, id: Uuid, outcome: CheckOutcome) -> Instant {
    let at = engine.due_at(id).expect("scheduled");
    let dispatch = one(engine, at);
    let finished = engine.complete(&dispatch.key, outcome, at, wall());
    assert_eq!(finished.len(), 1);
    finished[0].next_due
}

#[test]
fn first_runs_are_spread_over_the_interval() {
    let t0 = Instant::now();
    let mut engine = engine();
    for i in 0..10_000 {
        engine.upsert(
            monitor(&format!("http://h{i}.test/"), 10_000, json!({})),
            t0,
        );
    }
    let per_second: Vec<usize> = (1..=10)
        .map(|s| engine.poll(t0 + Duration::from_secs(s), wall()).len())
        .collect();
    assert_eq!(per_second.iter().sum::<usize>(), 10_000);
    assert!(
        per_second.iter().all(|n| (800..=1200).contains(n)),
        "{per_second:?}"
    );
}

#[test]
fn a_running_monitor_is_never_started_twice_and_success_waits_one_interval() {
    let t0 = Instant::now();
    let mut engine = engine();
    let m = monitor("http://a.test/", 5_000, json!({}));
    let id = m.id;
    engine.upsert(m, t0);
    let due = engine.due_at(id).unwrap();
    let dispatch = one(&mut engine, due);
    assert!(
        engine
            .poll(due + Duration::from_secs(60), wall())
            .is_empty(),
        "still running"
    );
    let finished = engine.complete(&dispatch.key, up(), due + Duration::from_secs(1), wall());
    assert_eq!(
        finished[0].next_due,
        due + Duration::from_secs(5),
        "fixed rate from the due time"
    );
    assert_eq!(finished[0].outcome.meta["engine"]["breaker"], "closed");
}

#[test]
fn backoff_grows_on_failure_and_resets_on_success() {
    let t0 = Instant::now();
    let mut engine = engine();
    let m = monitor("http://a.test/", 5_000, json!({"backoff_max_ms": 300_000}));
    let id = m.id;
    engine.upsert(m, t0);
    let mut gaps = Vec::new();
    let mut at = engine.due_at(id).unwrap();
    for _ in 0..10 {
        let next = run_once(&mut engine, id, down());
        gaps.push(next.duration_since(at).as_secs_f64());
        at = next;
    }
    // max(interval 5 s, 1 s × 2^attempt ± 20 %): 5, 5, 5, ~8, ~16, … ~256, ~300.
    assert!(gaps[..3].iter().all(|g| *g == 5.0), "{gaps:?}");
    for (attempt, gap) in gaps.iter().enumerate().skip(4) {
        let nominal = (1u64 << attempt).min(300) as f64;
        assert!(
            *gap >= (nominal * 0.8).max(5.0) && *gap <= nominal * 1.2,
            "attempt {attempt}: {gap}"
        );
    }
    let next = run_once(&mut engine, id, up());
    assert_eq!(
        next.duration_since(at),
        Duration::from_secs(5),
        "a success resets the backoff"
    );
}

/// With the defaults, a target down for an hour is still checked every interval (no backoff
/// past it, no breaker, no auto-pause, no dead letter), so its recovery is seen within one.
#[test]
fn with_the_defaults_a_failing_target_is_checked_every_interval() {
    let t0 = Instant::now();
    let mut engine = engine();
    let m = monitor("http://a.test/", 5_000, json!({}));
    let id = m.id;
    engine.upsert(m, t0);
    let mut at = engine.due_at(id).unwrap();
    for failure in 0..720 {
        let outcome = if failure % 7 == 0 {
            CheckOutcome::permanent(None, "expected 2xx, got 403", json!({}))
        } else {
            down()
        };
        let next = run_once(&mut engine, id, outcome);
        assert_eq!(next - at, Duration::from_secs(5), "failure {failure}");
        at = next;
    }
    assert!(!engine.is_dead_letter(id));
    let next = run_once(&mut engine, id, up());
    assert_eq!(next - at, Duration::from_secs(5));
}

#[test]
fn down_confirmation_rechecks_before_backoff() {
    let t0 = Instant::now();
    let mut engine = engine();
    let m = monitor(
        "http://a.test/",
        60_000,
        json!({"retries": 2, "retry_interval_ms": 2000}),
    );
    let id = m.id;
    engine.upsert(m, t0);
    let first = engine.due_at(id).unwrap();
    let second = run_once(&mut engine, id, down());
    let third = run_once(&mut engine, id, down());
    let fourth = run_once(&mut engine, id, down());
    assert_eq!(second - first, Duration::from_secs(2));
    assert_eq!(third - second, Duration::from_secs(2));
    assert_eq!(
        fourth - third,
        Duration::from_secs(60),
        "then the interval (or backoff) again"
    );
}

#[test]
fn breaker_opens_waits_its_cooldown_and_probes_once() {
    let t0 = Instant::now();
    let mut engine = engine();
    let m = monitor(
        "http://a.test/",
        5_000,
        json!({"breaker_threshold": 3, "breaker_cooldown_ms": 60_000}),
    );
    let id = m.id;
    engine.upsert(m, t0);
    run_once(&mut engine, id, down());
    run_once(&mut engine, id, down());
    let opened_at = engine.due_at(id).unwrap();
    let probe_at = run_once(&mut engine, id, down());
    assert_eq!(
        probe_at - opened_at,
        Duration::from_secs(60),
        "next run is the cooldown away"
    );
    assert_eq!(engine.breaker_state(id), Some(BreakerState::Open));
    assert!(engine
        .poll(probe_at - Duration::from_millis(1), wall())
        .is_empty());

    let probe = one(&mut engine, probe_at);
    assert_eq!(engine.breaker_state(id), Some(BreakerState::HalfOpen));
    let reopened = engine.complete(&probe.key, down(), probe_at, wall());
    assert_eq!(reopened[0].next_due - probe_at, Duration::from_secs(60));
    assert_eq!(engine.breaker_state(id), Some(BreakerState::Open));

    let probe_at = reopened[0].next_due;
    let probe = one(&mut engine, probe_at);
    engine.complete(&probe.key, up(), probe_at, wall());
    assert_eq!(engine.breaker_state(id), Some(BreakerState::Closed));
    let names: Vec<&str> = engine
        .drain_events()
        .iter()
        .map(|e| e.kind.name())
        .collect();
    assert_eq!(
        names,
        [
            "status_changed",
            "breaker_opened",
            "breaker_half_open",
            "breaker_opened",
            "breaker_half_open",
            "breaker_closed",
            "status_changed"
        ]
    );
}

#[test]
fn two_hundred_monitors_on_one_host_all_run_every_cycle() {
    let t0 = Instant::now();
    let mut engine = engine();
    let interval = Duration::from_secs(60);
    let check_time = Duration::from_secs(1);
    let ids: Vec<Uuid> = (0..200)
        .map(|i| {
            let m = monitor(&format!("http://shared.test/item/{i}"), 60_000, json!({}));
            let id = m.id;
            engine.upsert(m, t0);
            id
        })
        .collect();
    let mut running: Vec<(Instant, Dispatch)> = Vec::new();
    let mut runs: HashMap<Uuid, Vec<Instant>> = HashMap::new();
    let mut peak = 0;
    let step = Duration::from_millis(100);
    let mut now = t0;
    while now < t0 + 5 * interval {
        running.retain(|(ends, dispatch)| {
            if *ends <= now {
                engine.complete(&dispatch.key, up(), now, wall());
                false
            } else {
                true
            }
        });
        for dispatch in engine.poll(now, wall()) {
            runs.entry(dispatch.monitor.id).or_default().push(now);
            running.push((now + check_time, dispatch));
        }
        peak = peak.max(running.len());
        now += step;
    }
    assert_eq!(peak, 5, "never more than the per-host limit at once");
    for id in &ids {
        let times = &runs[id];
        // Five cycles of 60 s: every monitor ran in each, none twice in one.
        assert!((4..=5).contains(&times.len()), "{id}: {} runs", times.len());
        for pair in times.windows(2) {
            let gap = pair[1] - pair[0];
            assert!(
                gap >= interval && gap < interval + Duration::from_secs(45),
                "gap {gap:?}"
            );
        }
    }
}

#[test]
fn identical_requests_coalesce_but_keep_their_own_breakers() {
    let t0 = Instant::now();
    let mut engine = engine();
    let ids: Vec<Uuid> = (1..=10)
        .map(|threshold| {
            let m = monitor(
                "http://same.test/health",
                5_000,
                json!({"breaker_threshold": threshold}),
            );
            let id = m.id;
            engine.upsert(m, t0);
            id
        })
        .collect();
    let due = engine.due_at(ids[0]).unwrap();
    assert!(
        ids.iter().all(|id| engine.due_at(*id) == Some(due)),
        "identical requests share a phase"
    );

    for failure in 1..=3u32 {
        let at = ids
            .iter()
            .filter_map(|id| engine.due_at(*id))
            .min()
            .unwrap();
        let dispatches = engine.poll(at, wall());
        assert_eq!(dispatches.len(), 1, "one request for every monitor due");
        let finished = engine.complete(&dispatches[0].key, down(), at, wall());
        assert_eq!(
            finished.len(),
            11 - failure as usize,
            "open breakers sit out"
        );
        let ids_done: std::collections::HashSet<Uuid> =
            finished.iter().map(|f| f.monitor.id).collect();
        assert_eq!(
            ids_done.len(),
            finished.len(),
            "each monitor gets its own result"
        );
        for (i, id) in ids.iter().enumerate() {
            let threshold = i as u32 + 1;
            let expected = if threshold <= failure {
                BreakerState::Open
            } else {
                BreakerState::Closed
            };
            assert_eq!(
                engine.breaker_state(*id),
                Some(expected),
                "threshold {threshold} after {failure}"
            );
        }
    }
}

#[test]
fn auto_pause_has_hysteresis_and_is_never_shortened() {
    let t0 = Instant::now();
    let mut engine = engine();
    let settings = json!({"window": 4, "auto_pause_threshold": 0.5, "auto_resume_threshold": 0.75,
                          "auto_pause_cooldown_ms": 600_000, "breaker_threshold": 1000});
    let m = monitor("http://a.test/", 5_000, settings);
    let id = m.id;
    engine.upsert(m, t0);
    for _ in 0..3 {
        run_once(&mut engine, id, down());
    }
    let at = engine.due_at(id).unwrap();
    let next = run_once(&mut engine, id, up());
    // Window [F, F, F, T] = 0.25 < 0.5: paused for the cooldown.
    assert_eq!(next - at, Duration::from_secs(600));
    assert_eq!(engine.paused_until(id), Some(at + Duration::from_secs(600)));
    // The probe lifts it to [F, F, T, T] = 0.5: not yet 0.75, so the pause is extended.
    let again = run_once(&mut engine, id, up());
    assert_eq!(again - next, Duration::from_secs(600));
    // [F, T, T, T] = 0.75 resumes.
    let resumed = run_once(&mut engine, id, up());
    assert_eq!(resumed - again, Duration::from_secs(5));
    assert_eq!(engine.paused_until(id), None);
    let names: Vec<&str> = engine
        .drain_events()
        .iter()
        .map(|e| e.kind.name())
        .collect();
    assert!(
        names.contains(&"paused") && names.contains(&"resumed"),
        "{names:?}"
    );
}

#[test]
fn a_permanent_error_dead_letters_until_a_recheck_succeeds() {
    let t0 = Instant::now();
    let mut engine = engine();
    let m = monitor("http://a.test/", 5_000, json!({"dead_letter_after": 100}));
    let id = m.id;
    engine.upsert(m, t0);
    let at = engine.due_at(id).unwrap();
    let denied = CheckOutcome::permanent(
        Some(Duration::from_millis(3)),
        "expected 2xx, got 403",
        json!({}),
    );
    let next = run_once(&mut engine, id, denied);
    assert!(engine.is_dead_letter(id));
    assert_eq!(
        next - at,
        Duration::from_secs(30 * 60),
        "rechecked every 30 minutes"
    );
    let health = engine.health(at, wall());
    assert_eq!(health.dead_letters.len(), 1);
    assert_eq!(health.dead_letters[0].reason, "expected 2xx, got 403");
    run_once(&mut engine, id, up());
    assert!(!engine.is_dead_letter(id));
    let kinds: Vec<EventKind> = engine.drain_events().into_iter().map(|e| e.kind).collect();
    assert!(kinds.contains(&EventKind::DeadLettered {
        reason: "expected 2xx, got 403".into()
    }));
    assert!(kinds.contains(&EventKind::Revived));
}

#[test]
fn repeated_transient_errors_dead_letter_too() {
    let t0 = Instant::now();
    let mut engine = engine();
    let m = monitor(
        "http://a.test/",
        5_000,
        json!({"dead_letter_after": 3, "breaker_threshold": 1000}),
    );
    let id = m.id;
    engine.upsert(m, t0);
    run_once(&mut engine, id, down());
    run_once(&mut engine, id, down());
    assert!(!engine.is_dead_letter(id));
    run_once(&mut engine, id, down());
    assert!(engine.is_dead_letter(id));
}

#[test]
fn retry_after_is_honoured_and_is_not_a_failure() {
    let t0 = Instant::now();
    let mut engine = engine();
    let m = monitor("http://a.test/", 5_000, json!({"breaker_threshold": 1}));
    let id = m.id;
    engine.upsert(m, t0);
    let at = engine.due_at(id).unwrap();
    let limited = CheckOutcome {
        status: ResultStatus::RateLimited,
        retry_after: Some(Duration::from_secs(120)),
        ..CheckOutcome::down(
            Some(Duration::from_millis(2)),
            "rate limited (429), retry after 120 s",
            json!({}),
        )
    };
    let next = run_once(&mut engine, id, limited);
    assert_eq!(next - at, Duration::from_secs(120));
    assert_eq!(
        engine.breaker_state(id),
        Some(BreakerState::Closed),
        "rate limiting is not a failure"
    );
    let events = engine.drain_events();
    assert_eq!(events.len(), 1);
    assert_eq!(
        events[0].kind,
        EventKind::RateLimited {
            retry_after_ms: 120_000
        }
    );
    assert_eq!(
        events[0].next_due_at,
        Some(wall() + chrono::Duration::seconds(120))
    );
}

#[test]
fn an_edited_monitor_runs_at_once_and_a_removed_one_never_again() {
    let t0 = Instant::now();
    let mut engine = engine();
    let mut m = monitor("http://a.test/", 3_600_000, json!({}));
    let id = m.id;
    engine.upsert(m.clone(), t0);
    let first_due = engine.due_at(id).unwrap();
    engine.upsert(m.clone(), t0 + Duration::from_secs(1));
    assert_eq!(engine.due_at(id), Some(first_due), "unchanged: same slot");
    m.target = "http://b.test/".into();
    let edited = t0 + Duration::from_secs(2);
    engine.upsert(m, edited);
    let dispatch = one(&mut engine, edited);
    assert_eq!(dispatch.monitor.target, "http://b.test/");
    engine.remove(id);
    assert!(engine
        .complete(&dispatch.key, up(), edited, wall())
        .is_empty());
    assert_eq!(engine.next_due(), None);
}

#[test]
fn identical_monitors_added_later_line_up_with_the_first() {
    let t0 = Instant::now();
    let mut engine = engine();
    let first = monitor("http://same.test/", 10_000, json!({}));
    let first_id = first.id;
    engine.upsert(first, t0);
    let due = engine.due_at(first_id).unwrap();
    let later = monitor("http://same.test/", 10_000, json!({"method": "GET"}));
    let later_id = later.id;
    engine.upsert(later, t0 + Duration::from_millis(3_700));
    let later_due = engine.due_at(later_id).unwrap();
    let gap = later_due.max(due) - later_due.min(due);
    assert_eq!(gap.as_millis() % 10_000, 0, "same grid: {gap:?}");
    // Both run as one request once they meet, though one spells out the default method.
    let meet = later_due.max(due);
    let mut at = due;
    while at < meet {
        let d = one(&mut engine, at);
        at = engine.complete(&d.key, up(), at, wall())[0].next_due;
    }
    let dispatches = engine.poll(meet, wall());
    assert_eq!(dispatches.len(), 1);
    assert_eq!(
        engine
            .complete(&dispatches[0].key, up(), meet, wall())
            .len(),
        2
    );
}

#[test]
fn a_monitor_moved_while_waiting_for_a_host_slot_returns_the_slot_it_took() {
    let t0 = Instant::now();
    let config = EngineConfig {
        per_host_limit: 1,
        ..EngineConfig::default()
    };
    let mut engine = Engine::with_rng(config, rand::rngs::StdRng::seed_from_u64(3));
    let a = monitor("http://a.test/1", 60_000, json!({}));
    let mut b = monitor("http://a.test/2", 60_000, json!({}));
    let c = monitor("http://b.test/1", 60_000, json!({}));
    let (a_id, b_id, c_id) = (a.id, b.id, c.id);
    for m in [a, b.clone(), c] {
        engine.upsert(m, t0);
    }
    let late = t0 + Duration::from_secs(61);
    let mut started = engine.poll(late, wall());
    // a.test has one slot: one of a/b runs, the other waits; b.test's monitor runs.
    assert_eq!(started.len(), 2);
    let waiting_is_b = started.iter().all(|d| d.monitor.id != b_id);
    assert!(waiting_is_b || started.iter().all(|d| d.monitor.id != a_id));
    if waiting_is_b {
        // Move b to b.test while it waits for a.test's slot.
        b.target = "http://b.test/2".into();
        engine.upsert(b, late);
    }
    let a_test = started
        .iter()
        .position(|d| d.monitor.target.contains("a.test"))
        .unwrap();
    let first = started.remove(a_test);
    let handed = engine.complete(&first.key, up(), late, wall());
    assert_eq!(handed.len(), 1);
    let next = engine.poll(late, wall());
    assert_eq!(next.len(), 1, "the waiter got a.test's slot");
    engine.complete(&next[0].key, up(), late, wall());
    let c_dispatch = started.pop().unwrap();
    assert_eq!(c_dispatch.monitor.id, c_id);
    engine.complete(&c_dispatch.key, up(), late, wall());
    // Every slot is free again: a new a.test and b.test monitor can both start at once.
    let x = monitor("http://a.test/9", 60_000, json!({}));
    let y = monitor("http://b.test/9", 60_000, json!({}));
    let (x_id, y_id) = (x.id, y.id);
    engine.upsert(x, late);
    engine.upsert(y, late);
    let far = late + Duration::from_secs(120);
    let ids: Vec<Uuid> = engine
        .poll(far, wall())
        .iter()
        .map(|d| d.monitor.id)
        .collect();
    assert!(
        ids.contains(&x_id) || ids.iter().any(|id| *id != y_id),
        "{ids:?}"
    );
    assert!(ids.contains(&y_id) || ids.contains(&x_id));
}

#[test]
fn a_phased_monitor_first_runs_at_its_share_of_the_wall_clock_interval() {
    let t0 = Instant::now();
    let mut engine = engine();
    // Wall time 1_000 ms past a multiple of the 5 s interval.
    engine.note_wall_time(t0, 1_800_000_001_000);
    let mut located = monitor("http://a.test/", 5_000, json!({}));
    located.phase_ms = Some(3_000);
    let mut earlier = monitor("http://b.test/", 5_000, json!({}));
    earlier.phase_ms = Some(500);
    let (a, b) = (located.id, earlier.id);
    engine.upsert(located, t0);
    engine.upsert(earlier, t0);
    assert_eq!(engine.due_at(a), Some(t0 + Duration::from_millis(2_000)));
    assert_eq!(
        engine.due_at(b),
        Some(t0 + Duration::from_millis(4_500)),
        "a phase already passed in this interval waits for the next"
    );
}
