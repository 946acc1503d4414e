//! The engine against numbers a target chooses: `Retry-After`, rate-limit budgets, answers
//! that change or not (adaptive intervals), and validators of failing answers.

use std::time::{Duration, Instant};

use serde_json::json;
use shared_proto::poller_api::{EventKind, ResultStatus};

use super::breaker::BreakerState;
use super::core_tests::{down, engine, monitor, one, run_once, up, wall};
use crate::checks::{CheckOutcome, RateBudget, Validators};

fn limited(retry_after: Option<Duration>) -> CheckOutcome {
    CheckOutcome {
        status: ResultStatus::RateLimited,
        retry_after,
        ..CheckOutcome::down(None, "rate limited (429)", json!({}))
    }
}

#[test]
fn an_absurd_retry_after_is_capped_at_the_longest_backoff() {
    let t0 = Instant::now();
    let mut engine = engine();
    let m = monitor("http://a.test/", 5_000, json!({"backoff_max_ms": 60_000}));
    let id = m.id;
    engine.upsert(m, t0);
    for asked in [
        Duration::MAX,
        Duration::from_secs(u64::MAX),
        Duration::from_secs(3600),
    ] {
        let at = engine.due_at(id).unwrap();
        let next = run_once(&mut engine, id, limited(Some(asked)));
        assert_eq!(next - at, Duration::from_secs(60), "asked {asked:?}");
    }
    let events = engine.drain_events();
    assert!(events.iter().all(|e| e.kind
        == EventKind::RateLimited {
            retry_after_ms: 60_000
        }));
}

#[test]
fn a_503_with_retry_after_is_down_and_spaced() {
    let t0 = Instant::now();
    let mut engine = engine();
    let m = monitor("http://a.test/", 5_000, json!({}));
    let id = m.id;
    engine.upsert(m, t0);
    let at = engine.due_at(id).unwrap();
    let unavailable = CheckOutcome {
        retry_after: Some(Duration::from_secs(40)),
        ..down()
    };
    let next = run_once(&mut engine, id, unavailable);
    assert_eq!(next - at, Duration::from_secs(40));
    let changed = engine.drain_events().into_iter().any(|e| {
        e.kind
            == EventKind::StatusChanged {
                from: None,
                to: ResultStatus::Down,
            }
    });
    assert!(changed, "503 is down, not rate limited");
}

#[test]
fn a_rate_limited_half_open_probe_does_not_park_the_monitor() {
    let t0 = Instant::now();
    let mut engine = engine();
    let m = monitor(
        "http://a.test/",
        5_000,
        json!({"breaker_threshold": 1, "breaker_cooldown_ms": 10_000}),
    );
    let id = m.id;
    engine.upsert(m, t0);
    run_once(&mut engine, id, down());
    assert_eq!(engine.breaker_state(id), Some(BreakerState::Open));
    // The probe after the cooldown is rate limited: no verdict, so the next run probes again.
    run_once(&mut engine, id, limited(None));
    assert_eq!(engine.breaker_state(id), Some(BreakerState::HalfOpen));
    run_once(&mut engine, id, up());
    assert_eq!(engine.breaker_state(id), Some(BreakerState::Closed));
}

#[test]
fn validators_of_a_failing_answer_are_never_sent() {
    let t0 = Instant::now();
    let mut engine = engine();
    let m = monitor("http://a.test/", 5_000, json!({"conditional": true}));
    let id = m.id;
    engine.upsert(m, t0);
    let v1 = Validators {
        etag: Some("\"v1\"".into()),
        last_modified: None,
    };
    let passed = CheckOutcome {
        validators: Some(v1.clone()),
        ..up()
    };
    run_once(&mut engine, id, passed);
    let due = engine.due_at(id).unwrap();
    let dispatch = one(&mut engine, due);
    assert_eq!(dispatch.validators, Some(v1));
    let failed = CheckOutcome {
        validators: Some(Validators {
            etag: Some("\"v2\"".into()),
            last_modified: None,
        }),
        ..down()
    };
    engine.complete(&dispatch.key, failed, due, wall());
    let due = engine.due_at(id).unwrap();
    let dispatch = one(&mut engine, due);
    assert_eq!(dispatch.validators, None, "a full request after a failure");
}

#[test]
fn a_low_budget_spaces_checks_until_its_reset_and_says_so_once() {
    let t0 = Instant::now();
    let mut engine = engine();
    let m = monitor("http://a.test/", 5_000, json!({"rate_limit_reserve": 0.2}));
    let id = m.id;
    engine.upsert(m, t0);
    let with_budget = |remaining: u64| CheckOutcome {
        budget: Some(RateBudget {
            limit: Some(100),
            remaining,
            reset: Some(Duration::from_secs(60)),
        }),
        ..up()
    };
    let at = engine.due_at(id).unwrap();
    assert_eq!(
        run_once(&mut engine, id, with_budget(50)) - at,
        Duration::from_secs(5)
    );
    let at = engine.due_at(id).unwrap();
    assert_eq!(
        run_once(&mut engine, id, with_budget(5)) - at,
        Duration::from_secs(10),
        "60 s shared by the 5 left"
    );
    let at = engine.due_at(id).unwrap();
    let finished_next = run_once(&mut engine, id, with_budget(0));
    assert_eq!(
        finished_next - at,
        Duration::from_secs(60),
        "none left: wait for the reset"
    );
    let lows: Vec<_> = engine
        .drain_events()
        .into_iter()
        .filter(|e| matches!(e.kind, EventKind::BudgetLow { .. }))
        .collect();
    assert_eq!(lows.len(), 1, "one event per episode");
    let at = engine.due_at(id).unwrap();
    assert_eq!(
        run_once(&mut engine, id, with_budget(100)) - at,
        Duration::from_secs(5)
    );
}

#[test]
fn an_adaptive_monitor_stretches_while_unchanged_within_central_tolerance() {
    let t0 = Instant::now();
    let mut engine = engine();
    let m = monitor("http://a.test/", 10_000, json!({"adaptive": true}));
    let id = m.id;
    engine.upsert(m, t0);
    let same = || CheckOutcome {
        fingerprint: Some(1),
        ..up()
    };
    let mut gaps = Vec::new();
    for _ in 0..12 {
        let at = engine.due_at(id).unwrap();
        gaps.push(run_once(&mut engine, id, same()) - at);
    }
    assert_eq!(gaps[0], Duration::from_secs(10));
    assert!(gaps.windows(2).take(3).all(|w| w[1] > w[0]), "{gaps:?}");
    // 10 s + central's 60 s grace.
    assert!(
        gaps.iter().all(|g| *g <= Duration::from_secs(70)),
        "{gaps:?}"
    );
    assert!(*gaps.last().unwrap() >= Duration::from_secs(60), "{gaps:?}");
    let at = engine.due_at(id).unwrap();
    let changed = CheckOutcome {
        fingerprint: Some(2),
        ..up()
    };
    assert_eq!(
        run_once(&mut engine, id, changed) - at,
        Duration::from_secs(10)
    );
}

#[test]
fn a_fixed_rate_monitor_ignores_fingerprints() {
    let t0 = Instant::now();
    let mut engine = engine();
    let m = monitor("http://a.test/", 10_000, json!({}));
    let id = m.id;
    engine.upsert(m, t0);
    for _ in 0..5 {
        let at = engine.due_at(id).unwrap();
        let same = CheckOutcome {
            fingerprint: Some(1),
            ..up()
        };
        assert_eq!(
            run_once(&mut engine, id, same) - at,
            Duration::from_secs(10)
        );
    }
}
