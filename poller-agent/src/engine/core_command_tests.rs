//! Operators' commands in the engine (`core::on_demand`): time is a number we move by hand.

use std::time::Duration;
use std::time::Instant;

use serde_json::json;
use shared_proto::poller_api::EventKind;
use uuid::Uuid;

use super::breaker::BreakerState;
use super::core::NotAssigned;
use super::core_tests::{down, engine, monitor, one, run_once, up, wall};
use crate::checks::CheckOutcome;

#[test]
fn check_now_runs_through_an_open_breaker_and_is_answered_by_that_run() {
    let t0 = Instant::now();
    let mut engine = engine();
    let m = monitor(
        "http://a.test/",
        5_000,
        json!({"breaker_threshold": 1, "breaker_cooldown_ms": 60_000}),
    );
    let id = m.id;
    engine.upsert(m, t0);
    let failed_at = engine.due_at(id).unwrap();
    run_once(&mut engine, id, down());
    assert_eq!(engine.breaker_state(id), Some(BreakerState::Open));

    let asked_at = failed_at + Duration::from_secs(10);
    let command = Uuid::now_v7();
    assert_eq!(engine.check_now(id, command, asked_at), Ok(vec![]));
    assert_eq!(engine.due_at(id), Some(asked_at), "due now, not in 50 s");
    let run = one(&mut engine, asked_at);
    assert_eq!(engine.breaker_state(id), Some(BreakerState::HalfOpen));
    let finished = engine.complete(&run.key, up(), asked_at, wall());
    assert_eq!(finished[0].answers, [command]);
    assert_eq!(engine.breaker_state(id), Some(BreakerState::Closed));
    // Answered once: the next scheduled run answers nothing.
    let finished_again = {
        let at = engine.due_at(id).unwrap();
        let run = one(&mut engine, at);
        engine.complete(&run.key, up(), at, wall())
    };
    assert!(finished_again[0].answers.is_empty());
}

#[test]
fn a_check_asked_during_a_run_is_answered_by_the_next_run_which_starts_at_once() {
    let t0 = Instant::now();
    let mut engine = engine();
    let m = monitor("http://a.test/", 60_000, json!({}));
    let id = m.id;
    engine.upsert(m, t0);
    let started = engine.due_at(id).unwrap();
    let run = one(&mut engine, started);
    let command = Uuid::now_v7();
    engine
        .check_now(id, command, started + Duration::from_millis(1))
        .unwrap();
    let ended = started + Duration::from_millis(2);
    let finished = engine.complete(&run.key, up(), ended, wall());
    assert!(
        finished[0].answers.is_empty(),
        "that run started before the command"
    );
    assert_eq!(finished[0].next_due, ended, "runs again at once");
    let again = one(&mut engine, ended);
    let finished = engine.complete(&again.key, up(), ended, wall());
    assert_eq!(finished[0].answers, [command]);
    assert_eq!(
        finished[0].next_due - ended,
        Duration::from_secs(60),
        "then back to its interval"
    );
}

#[test]
fn a_check_that_joins_an_older_identical_request_waits_for_a_fresh_one() {
    let t0 = Instant::now();
    let mut engine = engine();
    let a = monitor("http://same.test/", 60_000, json!({}));
    let mut b = a.clone();
    b.id = Uuid::new_v4();
    let (a_id, b_id) = (a.id, b.id);
    engine.upsert(a, t0);
    engine.upsert(b, t0);
    let due = engine.due_at(a_id).unwrap();
    // Both due together: one request for both.
    let shared = one(&mut engine, due);
    let command = Uuid::now_v7();
    engine
        .check_now(b_id, command, due + Duration::from_millis(1))
        .unwrap();
    let ended = due + Duration::from_millis(5);
    let finished = engine.complete(&shared.key, up(), ended, wall());
    let b_done = finished.iter().find(|f| f.monitor.id == b_id).unwrap();
    assert!(b_done.answers.is_empty());
    assert_eq!(b_done.next_due, ended);
    let fresh = one(&mut engine, ended);
    let finished = engine.complete(&fresh.key, up(), ended, wall());
    assert_eq!(finished.len(), 1, "only b runs again");
    assert_eq!(finished[0].answers, [command]);
}

#[test]
fn reset_forgets_a_dead_letter_and_an_open_breaker_and_runs_now() {
    let t0 = Instant::now();
    let mut engine = engine();
    let m = monitor(
        "http://a.test/",
        5_000,
        json!({"breaker_threshold": 1, "breaker_cooldown_ms": 600_000, "dead_letter_after": 100}),
    );
    let id = m.id;
    engine.upsert(m, t0);
    let at = engine.due_at(id).unwrap();
    let denied = CheckOutcome::permanent(None, "expected 2xx, got 403", json!({}));
    let next = run_once(&mut engine, id, denied);
    assert!(engine.is_dead_letter(id));
    assert_eq!(next - at, Duration::from_secs(30 * 60));
    engine.drain_events();

    let later = at + Duration::from_secs(1);
    let cleared = engine.reset(id, later, wall()).unwrap();
    assert_eq!(
        cleared,
        [
            "breaker open",
            "dead letter (expected 2xx, got 403)",
            "1 consecutive failures"
        ]
    );
    assert!(!engine.is_dead_letter(id));
    assert_eq!(engine.breaker_state(id), Some(BreakerState::Closed));
    assert_eq!(engine.due_at(id), Some(later), "runs again at once");
    let kinds: Vec<EventKind> = engine.drain_events().into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds, [EventKind::BreakerClosed, EventKind::Revived]);
    // Its failures are forgotten: one more failure does not dead-letter it again at once
    // (the default takes 100 in a row), though the breaker (threshold 1) opens.
    let next = run_once(&mut engine, id, down());
    assert!(!engine.is_dead_letter(id));
    assert_eq!(next - later, Duration::from_secs(600));
    assert_eq!(engine.reset(id, later, wall()).unwrap()[0], "breaker open");
    assert_eq!(
        engine.reset(id, later, wall()).unwrap(),
        Vec::<String>::new(),
        "nothing left to clear"
    );
}

#[test]
fn commands_for_a_monitor_not_here_are_refused_and_a_removal_answers_waiting_checks() {
    let t0 = Instant::now();
    let mut engine = engine();
    assert_eq!(
        engine.check_now(Uuid::new_v4(), Uuid::now_v7(), t0),
        Err(NotAssigned)
    );
    assert_eq!(engine.reset(Uuid::new_v4(), t0, wall()), Err(NotAssigned));
    let m = monitor("http://a.test/", 60_000, json!({}));
    let id = m.id;
    engine.upsert(m, t0);
    let due = engine.due_at(id).unwrap();
    let _running = one(&mut engine, due);
    let command = Uuid::now_v7();
    engine.check_now(id, command, due).unwrap();
    assert_eq!(engine.remove(id), [command]);
}

#[test]
fn a_run_that_started_before_a_reset_does_not_count_against_it() {
    let t0 = Instant::now();
    let mut engine = engine();
    let m = monitor("http://a.test/", 5_000, json!({"breaker_threshold": 1}));
    let id = m.id;
    engine.upsert(m, t0);
    let due = engine.due_at(id).unwrap();
    let running = one(&mut engine, due);
    engine
        .reset(id, due + Duration::from_millis(1), wall())
        .unwrap();
    let denied = CheckOutcome::permanent(None, "expected 2xx, got 403", json!({}));
    let ended = due + Duration::from_millis(2);
    let finished = engine.complete(&running.key, denied, ended, wall());
    assert_eq!(finished.len(), 1, "its result still goes to central");
    assert!(
        !engine.is_dead_letter(id),
        "but it does not dead-letter the reset monitor"
    );
    assert_eq!(engine.breaker_state(id), Some(BreakerState::Closed));
    assert_eq!(
        finished[0].next_due, ended,
        "and the monitor runs again at once"
    );
}

#[test]
fn reset_closes_a_half_open_breaker_and_its_failing_probe_does_not_reopen_it() {
    let t0 = Instant::now();
    let mut engine = engine();
    let m = monitor(
        "http://a.test/",
        5_000,
        json!({"breaker_threshold": 1, "breaker_cooldown_ms": 60_000}),
    );
    let id = m.id;
    engine.upsert(m, t0);
    let probe_at = run_once(&mut engine, id, down());
    let probe = one(&mut engine, probe_at);
    assert_eq!(engine.breaker_state(id), Some(BreakerState::HalfOpen));

    let reset_at = probe_at + Duration::from_millis(1);
    let cleared = engine.reset(id, reset_at, wall()).unwrap();
    assert_eq!(cleared, ["breaker half-open", "1 consecutive failures"]);
    assert_eq!(engine.breaker_state(id), Some(BreakerState::Closed));
    // The probe, started before the reset, fails: its result goes to central, and the
    // monitor runs again at once instead of waiting out another cooldown.
    let ended = probe_at + Duration::from_millis(2);
    let finished = engine.complete(&probe.key, down(), ended, wall());
    assert_eq!(finished.len(), 1);
    assert_eq!(engine.breaker_state(id), Some(BreakerState::Closed));
    assert_eq!(finished[0].next_due, ended);
}
