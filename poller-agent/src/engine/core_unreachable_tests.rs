//! Many monitors on one address that takes no connection (`unreachable`): the address is
//! tried about once an interval, every monitor still reports each interval, and all of them
//! see its return within an interval.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::json;
use shared_proto::poller_api::ResultStatus;
use uuid::Uuid;

use super::core_tests::{engine, monitor, up, wall};
use crate::checks::CheckOutcome;

const INTERVAL: Duration = Duration::from_secs(5);

#[test]
fn three_hundred_monitors_on_a_dead_address_try_it_once_an_interval_and_all_see_its_return() {
    let t0 = Instant::now();
    let mut engine = engine();
    let ids: Vec<Uuid> = (0..300)
        .map(|n| {
            // Different paths: requests that would not coalesce.
            let m = monitor(&format!("http://dead.test/{n}"), 5_000, json!({}));
            let id = m.id;
            engine.upsert(m, t0);
            id
        })
        .collect();
    let back_at = t0 + Duration::from_secs(60);
    let mut tries: Vec<Instant> = Vec::new();
    let mut seen: HashMap<Uuid, Vec<(Instant, ResultStatus)>> = HashMap::new();
    let mut now = t0;
    while now < t0 + Duration::from_secs(80) {
        // Everything due now, including what freed host slots start, at this instant.
        loop {
            let dispatches = engine.poll(now, wall());
            let followed = engine.take_followed();
            if dispatches.is_empty() && followed.is_empty() {
                break;
            }
            for done in followed {
                assert!(
                    done.outcome.msg.contains("not tried"),
                    "{}",
                    done.outcome.msg
                );
                seen.entry(done.monitor.id)
                    .or_default()
                    .push((now, done.outcome.status));
            }
            for dispatch in dispatches {
                tries.push(now);
                let outcome = if now < back_at {
                    CheckOutcome::unreachable(Some(Duration::from_millis(1)), "connection refused")
                } else {
                    up()
                };
                for done in engine.complete(&dispatch.key, outcome, now, wall()) {
                    seen.entry(done.monitor.id)
                        .or_default()
                        .push((now, done.outcome.status));
                }
            }
        }
        now += Duration::from_millis(100);
    }

    // While it is down: one try an interval once the first failure is known (the few started
    // together before it came back aside), not 300.
    let first_failure = tries[0];
    let later_tries = tries
        .iter()
        .filter(|at| **at > first_failure && **at < back_at)
        .count();
    let offsets: Vec<u128> = tries.iter().map(|at| (*at - t0).as_millis()).collect();
    assert!(
        later_tries <= 12,
        "{later_tries} tries in 60 s: {offsets:?}"
    );
    assert!(
        tries.iter().filter(|at| **at == first_failure).count() <= 10,
        "{offsets:?}"
    );
    // Every monitor still reported each interval while it was down…
    for id in &ids {
        let down: Vec<Instant> = seen[id]
            .iter()
            .filter(|(at, status)| *at < back_at && *status == ResultStatus::Down)
            .map(|(at, _)| *at)
            .collect();
        assert!(down.len() >= 11, "{} down results in 60 s", down.len());
        assert!(
            down.windows(2).all(|w| w[1] - w[0] <= INTERVAL),
            "a gap longer than the interval"
        );
        // …and saw the return within an interval of it.
        let first_up = seen[id]
            .iter()
            .find(|(at, status)| *at >= back_at && *status == ResultStatus::Up)
            .map(|(at, _)| *at)
            .expect("seen up");
        assert!(
            first_up - back_at <= INTERVAL + Duration::from_millis(100),
            "seen up {:?} after the return",
            first_up - back_at
        );
    }
}

#[test]
fn an_operators_check_tries_a_dead_address_itself() {
    let t0 = Instant::now();
    let mut engine = engine();
    let (a, b) = (
        monitor("http://dead.test/a", 60_000, json!({})),
        monitor("http://dead.test/b", 60_000, json!({})),
    );
    let b_id = b.id;
    engine.upsert(a, t0);
    engine.upsert(b, t0);
    let mut now = t0;
    // Run both once: the first refused marks the address, the second follows.
    let mut followed = 0;
    while now < t0 + Duration::from_secs(60) {
        for dispatch in engine.poll(now, wall()) {
            let refused = CheckOutcome::unreachable(None, "connection refused");
            engine.complete(&dispatch.key, refused, now, wall());
        }
        followed += engine.take_followed().len();
        now += Duration::from_millis(500);
    }
    assert_eq!(followed, 1);
    engine.check_now(b_id, Uuid::new_v4(), now).unwrap();
    let dispatches = engine.poll(now, wall());
    assert_eq!(dispatches.len(), 1, "tried, not followed");
    assert_eq!(dispatches[0].monitor.id, b_id);
}

#[test]
fn a_follower_uses_no_retry_and_an_edit_in_flight_marks_the_address_dispatched() {
    let t0 = Instant::now();
    let mut engine = engine();
    let settings = json!({"retries": 2, "retry_interval_ms": 1000});
    let a = monitor("http://dead.test/a", 5_000, settings.clone());
    let b = monitor("http://dead.test/b", 5_000, settings);
    let specs = [a.clone(), b.clone()];
    engine.upsert(a, t0);
    engine.upsert(b, t0);
    let mut now = t0;
    let mut probe_id = None;
    let mut followed_at = None;
    while now < t0 + Duration::from_secs(5) && followed_at.is_none() {
        for dispatch in engine.poll(now, wall()) {
            assert!(probe_id.is_none(), "one tries, the other follows");
            probe_id = Some(dispatch.monitor.id);
            let refused = CheckOutcome::unreachable(None, "connection refused");
            engine.complete(&dispatch.key, refused, now, wall());
        }
        if !engine.take_followed().is_empty() {
            followed_at = Some(now);
        }
        now += Duration::from_millis(100);
    }
    let probe_id = probe_id.expect("a try");
    let follower_id = specs.iter().find(|m| m.id != probe_id).unwrap().id;
    let followed_at = followed_at.expect("followed");
    assert_eq!(
        engine.due_at(follower_id),
        Some(followed_at + INTERVAL),
        "a follower reports again at its interval, not its retry interval"
    );

    // The next try, its monitor edited to another address while it runs: its result marks
    // the dead address, not the new one, and its rerun tries the new address itself.
    let mut at = followed_at;
    let (running, trier) = loop {
        at += Duration::from_millis(100);
        assert!(
            at < followed_at + 2 * INTERVAL,
            "the address is tried again"
        );
        let dispatches = engine.poll(at, wall());
        engine.take_followed();
        if let Some(d) = dispatches.into_iter().next() {
            break (d.key, d.monitor.id);
        }
    };
    let mut moved = specs.iter().find(|m| m.id == trier).unwrap().clone();
    moved.target = "http://alive.test/a".into();
    moved.revision += 1;
    engine.upsert(moved, at);
    let refused = CheckOutcome::unreachable(None, "connection refused");
    engine.complete(&running, refused, at, wall());
    let rerun = engine.poll(at, wall());
    assert!(engine.take_followed().is_empty());
    assert!(rerun.iter().any(|d| d.monitor.id == trier));
}
