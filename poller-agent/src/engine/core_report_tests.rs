//! What the engine reports of itself (`core::report`): time is a number we move by hand.

use std::time::{Duration, Instant};

use serde_json::json;

use super::core_tests::{down, engine, monitor, run_once, up, wall};
use crate::checks::CheckOutcome;

#[test]
fn breakers_dead_letters_and_staleness_are_listed_with_their_times() {
    let t0 = Instant::now();
    let mut engine = engine();
    let breaking = monitor(
        "http://a.test/",
        10_000,
        json!({"breaker_threshold": 1, "breaker_cooldown_ms": 60_000}),
    );
    let dead = monitor("http://b.test/", 10_000, json!({"dead_letter_after": 100}));
    let fine = monitor("http://c.test/", 10_000, json!({}));
    let (breaking_id, dead_id, fine_id) = (breaking.id, dead.id, fine.id);
    for m in [breaking, dead, fine] {
        engine.upsert(m, t0);
    }
    let failed_at = engine.due_at(breaking_id).unwrap();
    let dead_at = engine.due_at(dead_id).unwrap();
    // Each first run in due order, so that each poll starts exactly that one.
    let mut order = [breaking_id, dead_id, fine_id];
    order.sort_by_key(|id| engine.due_at(*id));
    for id in order {
        let outcome = if id == breaking_id {
            down()
        } else if id == dead_id {
            CheckOutcome::permanent(None, "expected 2xx, got 403", json!({}))
        } else {
            up()
        };
        run_once(&mut engine, id, outcome);
    }

    // Reported two intervals after the start: every monitor has run once (first runs fall
    // within the first interval); the two that never succeeded are two intervals stale, the
    // one that succeeded less.
    let now = t0 + Duration::from_secs(20);
    let health = engine.health(now, wall());
    let wall_at = |at: Instant| wall() - chrono::Duration::from_std(now - at).unwrap();
    let wall_after = |at: Instant| wall() + chrono::Duration::from_std(at - now).unwrap();

    assert_eq!(health.breakers_open, 1);
    assert_eq!(health.breakers.len(), 1);
    let breaker = &health.breakers[0];
    assert_eq!(
        (breaker.monitor_id, breaker.state.as_str(), breaker.failures),
        (breaking_id, "open", 1)
    );
    assert_eq!(
        breaker.retry_at,
        Some(wall_after(failed_at + Duration::from_secs(60)))
    );

    assert_eq!(health.dead_letters.len(), 1);
    let letter = &health.dead_letters[0];
    assert_eq!(letter.monitor_id, dead_id);
    assert_eq!(letter.failures, 1);
    assert_eq!(
        letter.next_recheck,
        Some(wall_after(dead_at + Duration::from_secs(30 * 60)))
    );

    let stale: Vec<_> = health.staleness.iter().map(|s| s.monitor_id).collect();
    assert_eq!(stale.len(), 2, "the one that succeeded is not stale");
    assert!(stale.contains(&breaking_id) && stale.contains(&dead_id));
    assert!(
        health.staleness.iter().all(|s| s.intervals == 2.0),
        "{health:?}"
    );
    assert_eq!(
        health.staleness[0]
            .last_error
            .as_deref()
            .map(|e| e.contains("2xx")),
        Some(true)
    );
    assert_eq!(health.staleness[0].last_success, None);

    // The monitor that succeeded turns stale once it has gone an interval without another.
    let later = engine.health(now + Duration::from_secs(60), wall());
    let fine_stale = later
        .staleness
        .iter()
        .find(|s| s.monitor_id == fine_id)
        .expect("stale by now");
    assert!(fine_stale.last_success.is_some());
    assert!(fine_stale.last_success.unwrap() <= wall_at(now));
}
