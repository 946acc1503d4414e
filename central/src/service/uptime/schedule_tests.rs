//! The agent's real schedule (its engine, default settings) against the target's true state,
//! through this module's rule: for any outage, from a second to hours, the recovery is seen
//! within one interval and the check's timeout, and the downtime counted is the outage's
//! within one interval (issue 68). A reference timeline of the truth is the model.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use proptest::prelude::*;
use serde_json::json;
use uuid::Uuid;

use poller_agent::checks::CheckOutcome;
use poller_agent::engine::{Engine, EngineConfig};
use shared_proto::{AssignedMonitor, CheckKind};

use super::*;

const S: u64 = 1_000;

/// One simulated run: the points the agent would upload while the target is down during
/// `[down_from, down_from + down_for)` ms, until `until` ms.
fn run(
    interval: u64,
    timeout: u64,
    down_from: u64,
    down_for: u64,
    until: u64,
    seed: u64,
) -> Vec<TimePoint> {
    let t0 = Instant::now();
    let wall = |at: Instant| {
        DateTime::<Utc>::from_timestamp(1_800_000_000, 0).unwrap()
            + chrono::Duration::from_std(at - t0).unwrap()
    };
    let ms = |at: Instant| (at - t0).as_millis() as u64;
    let spec = AssignedMonitor {
        id: Uuid::new_v4(),
        name: "m".into(),
        kind: CheckKind::Http,
        target: "http://target.test/".into(),
        interval_ms: interval,
        timeout_ms: timeout,
        settings: Default::default(),
        revision: 1,
        phase_ms: None,
    };
    let id = spec.id;
    let mut engine = Engine::new(EngineConfig::default());
    engine.upsert(spec, t0);
    // A check takes between 1 ms and its timeout (a down target often takes the whole).
    let mut state = seed | 1;
    let mut took = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        1 + state % timeout
    };
    let mut points = Vec::new();
    while let Some(due) = engine.due_at(id) {
        if ms(due) >= until {
            break;
        }
        for dispatch in engine.poll(due, wall(due)) {
            let started = ms(due);
            let down = (down_from..down_from + down_for).contains(&started);
            let elapsed = Duration::from_millis(took());
            let outcome = if down {
                CheckOutcome::down(Some(elapsed), "down", json!({}))
            } else {
                CheckOutcome::up(elapsed, json!({}))
            };
            let done = due + elapsed;
            engine.complete(&dispatch.key, outcome, done, wall(done));
            points.push(TimePoint {
                id: format!("r{started}"),
                region: None,
                ts: started as i64,
                status: if down {
                    shared_proto::poller_api::ResultStatus::Down
                } else {
                    shared_proto::poller_api::ResultStatus::Up
                },
            });
        }
    }
    points
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn recovery_is_seen_within_an_interval_and_downtime_is_the_outages(
        interval_s in 5u64..=120,
        timeout_share in 1u64..=100,
        down_from_s in 0u64..=7_200,
        down_for_s in 1u64..=6 * 3_600,
        seed in any::<u64>(),
    ) {
        let interval = interval_s * S;
        let timeout = (interval * timeout_share / 100).clamp(S, 30 * S);
        let (down_from, down_for) = (down_from_s * S, down_for_s * S);
        let recovered = down_from + down_for;
        let until = recovered + 3 * interval + timeout;
        let points = run(interval, timeout, down_from, down_for, until, seed);

        // The first check after the recovery, and so the `up` told, is within one interval
        // and the check's timeout of it.
        let seen = points
            .iter()
            .find(|p| p.ts as u64 >= recovered)
            .map(|p| p.ts as u64);
        prop_assert!(seen.is_some(), "no check after the recovery");
        let seen = seen.unwrap();
        prop_assert!(seen <= recovered + interval + timeout, "seen {} ms late", seen - recovered);

        // Time: nothing unmeasured between the first and the last result, and the down time
        // counted is the outage's within one interval.
        let timeline = Timeline::polled(interval as i64, timeout as i64, None, None);
        let refs: Vec<&TimePoint> = points.iter().collect();
        let (first, last) = (points[0].ts, points[points.len() - 1].ts);
        let spans = timeline.spans(&refs, first, last);
        let (mut up, mut down) = (0i64, 0i64);
        for span in &spans {
            match span.health {
                Health::Up => up += span.until - span.from,
                Health::Down => down += span.until - span.from,
            }
        }
        prop_assert_eq!(up + down, last - first, "unmeasured time between results");
        // The truth, within the measured stretch.
        let truth = (recovered.min(last as u64) as i64 - (down_from as i64).max(first)).max(0);
        let slack = (interval + timeout) as i64;
        prop_assert!(
            (down - truth).abs() <= slack,
            "counted {} ms down for a true {} ms", down, truth
        );
    }
}
