//! Model-based property tests of `core`: random sequences of clock jumps, outcomes (up, down,
//! permanent, rate limited with any `Retry-After`, low budgets), edits, removals and re-adds,
//! checked after every step against a small reference model, and at the end against the one
//! promise that matters most: every monitor is checked again within a bound. No breaker,
//! pause, dead letter, host wait or in-flight state may park a monitor forever.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use serde_json::{json, Value};
use shared_proto::poller_api::ResultStatus;
use shared_proto::AssignedMonitor;
use uuid::Uuid;

use super::breaker::BreakerState;
use super::core::{Dispatch, Engine, EngineConfig};
use super::core_tests::{monitor, wall};
use crate::checks::{CheckOutcome, RateBudget};

/// Whatever happened, a monitor that is scheduled is due within this: the longest delay any
/// rule below can choose (dead-letter recheck 120 s; backoff at most 60 s + 20 %; breaker
/// 30 s; pause 20 s; Retry-After and budgets capped at the 60 s backoff maximum; adaptive
/// at most interval + 60 s).
const BOUND: Duration = Duration::from_secs(125);

const COMMON: [(&str, u64); 3] = [
    ("backoff_max_ms", 60_000),
    ("breaker_cooldown_ms", 30_000),
    ("auto_pause_cooldown_ms", 20_000),
];

fn settings(extra: Value) -> Value {
    let mut all = json!({});
    for (key, value) in COMMON {
        all[key] = json!(value);
    }
    for (key, value) in extra.as_object().cloned().unwrap_or_default() {
        all[key] = value;
    }
    all
}

/// Five monitors: two that share one request, three more on two hosts, with different
/// protection settings so that every rule gets exercised.
fn fleet() -> Vec<AssignedMonitor> {
    vec![
        monitor("http://shared.test/", 5_000, settings(json!({}))),
        monitor(
            "http://shared.test/",
            5_000,
            settings(json!({"breaker_threshold": 2, "dead_letter_after": 4})),
        ),
        monitor(
            "http://shared.test/other",
            10_000,
            settings(json!({"adaptive": true, "rate_limit_reserve": 0.5})),
        ),
        monitor(
            "http://other.test/",
            30_000,
            settings(json!({"retries": 2, "dead_letter_after": 5, "breaker_threshold": 3})),
        ),
        monitor(
            "http://other.test/x",
            60_000,
            settings(
                json!({"window": 4, "auto_pause_threshold": 0.5, "auto_resume_threshold": 0.75}),
            ),
        ),
    ]
}

#[derive(Debug, Clone)]
enum Outcome {
    Up { fingerprint: u64 },
    Down,
    Permanent,
    Limited { retry_after_s: Option<u64> },
    Unavailable { retry_after_s: u64 },
    LowBudget { remaining: u64, reset_s: u64 },
}

impl Outcome {
    fn check_outcome(&self) -> CheckOutcome {
        let down = || CheckOutcome::down(None, "down", json!({}));
        match *self {
            Outcome::Up { fingerprint } => CheckOutcome {
                fingerprint: Some(fingerprint),
                ..CheckOutcome::up(Duration::from_millis(3), json!({}))
            },
            Outcome::Down => down(),
            Outcome::Permanent => CheckOutcome::permanent(None, "gone", json!({})),
            Outcome::Limited { retry_after_s } => CheckOutcome {
                status: ResultStatus::RateLimited,
                retry_after: retry_after_s.map(Duration::from_secs),
                ..down()
            },
            Outcome::Unavailable { retry_after_s } => CheckOutcome {
                retry_after: Some(Duration::from_secs(retry_after_s)),
                ..down()
            },
            Outcome::LowBudget { remaining, reset_s } => CheckOutcome {
                budget: Some(RateBudget {
                    limit: Some(100),
                    remaining,
                    reset: Some(Duration::from_secs(reset_s)),
                }),
                ..CheckOutcome::up(Duration::from_millis(3), json!({}))
            },
        }
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// Move the clock (up to a day at once) and start what is due.
    Advance {
        ms: u64,
    },
    /// Finish one of the requests in flight.
    Complete {
        pick: usize,
        outcome: Outcome,
    },
    /// Change a monitor's assignment (possibly while it runs or waits).
    Edit {
        monitor: usize,
        variant: u8,
    },
    Remove {
        monitor: usize,
    },
    Restore {
        monitor: usize,
    },
}

fn any_seconds() -> impl Strategy<Value = u64> {
    prop_oneof![
        0..120u64,
        Just(u64::MAX),
        Just(u64::MAX / 1000),
        0..u64::MAX
    ]
}

fn outcome() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        4 => (0..3u64).prop_map(|fingerprint| Outcome::Up { fingerprint }),
        4 => Just(Outcome::Down),
        1 => Just(Outcome::Permanent),
        2 => proptest::option::of(any_seconds())
            .prop_map(|retry_after_s| Outcome::Limited { retry_after_s }),
        1 => any_seconds().prop_map(|retry_after_s| Outcome::Unavailable { retry_after_s }),
        1 => (0..20u64, any_seconds())
            .prop_map(|(remaining, reset_s)| Outcome::LowBudget { remaining, reset_s }),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => prop_oneof![0..2_000u64, 0..400_000u64, Just(86_400_000u64)]
            .prop_map(|ms| Op::Advance { ms }),
        6 => (0..8usize, outcome()).prop_map(|(pick, outcome)| Op::Complete { pick, outcome }),
        1 => (0..5usize, 0..3u8).prop_map(|(monitor, variant)| Op::Edit { monitor, variant }),
        1 => (0..5usize).prop_map(|monitor| Op::Remove { monitor }),
        1 => (0..5usize).prop_map(|monitor| Op::Restore { monitor }),
    ]
}

/// What the rules say a monitor's protection state must be, from the outcomes it was given.
#[derive(Debug, Clone, Default)]
struct Expected {
    failures: u32,
    permanent_since_up: bool,
}

struct Harness {
    engine: Engine,
    now: Instant,
    specs: Vec<AssignedMonitor>,
    present: Vec<bool>,
    expected: Vec<Expected>,
    flights: Vec<Dispatch>,
}

impl Harness {
    fn new() -> Self {
        let config = EngineConfig {
            per_host_limit: 1,
            dead_letter_recheck: Duration::from_secs(120),
            ..EngineConfig::default()
        };
        let mut engine = Engine::with_rng(config, rand::SeedableRng::seed_from_u64(3));
        let now = Instant::now();
        let specs = fleet();
        for spec in &specs {
            engine.upsert(spec.clone(), now);
        }
        Harness {
            engine,
            now,
            present: vec![true; specs.len()],
            expected: vec![Expected::default(); specs.len()],
            specs,
            flights: Vec::new(),
        }
    }

    fn index_of(&self, id: Uuid) -> usize {
        self.specs
            .iter()
            .position(|s| s.id == id)
            .expect("a monitor of the fleet")
    }

    fn poll(&mut self) -> Result<(), TestCaseError> {
        for dispatch in self.engine.poll(self.now, wall()) {
            let index = self.index_of(dispatch.monitor.id);
            prop_assert!(self.present[index], "a removed monitor was started");
            prop_assert!(
                self.flights.iter().all(|f| f.key != dispatch.key),
                "an identical request started twice"
            );
            self.flights.push(dispatch);
        }
        Ok(())
    }

    /// Completes a flight and checks what the engine decided for each monitor in it.
    fn complete(&mut self, pick: usize, outcome: &Outcome) -> Result<Vec<Uuid>, TestCaseError> {
        if self.flights.is_empty() {
            return Ok(Vec::new());
        }
        let dispatch = self.flights.remove(pick % self.flights.len());
        let finished =
            self.engine
                .complete(&dispatch.key, outcome.check_outcome(), self.now, wall());
        let mut seen = HashSet::new();
        for done in &finished {
            let id = done.monitor.id;
            prop_assert!(
                seen.insert(id),
                "two results for one monitor from one request"
            );
            let index = self.index_of(id);
            prop_assert!(self.present[index], "a result for a removed monitor");
            prop_assert!(done.next_due >= self.now);
            prop_assert!(
                done.next_due <= self.now + BOUND,
                "next run {:?} away after {outcome:?}",
                done.next_due - self.now
            );
            // Without opt-ins a failing target is checked again within its interval, so that
            // its recovery is seen within one (issue 68).
            let spec = &self.specs[index];
            let common = shared_proto::settings::MonitorSettings::parse(spec.kind, &spec.settings)
                .expect("valid settings")
                .common;
            if common.recovery_late_by_ms(spec.interval_ms).is_none()
                && matches!(outcome, Outcome::Down | Outcome::Permanent)
            {
                prop_assert!(
                    done.next_due <= self.now + Duration::from_millis(spec.interval_ms),
                    "monitor {index} failing with no opt-in waits {:?}",
                    done.next_due - self.now
                );
            }
            let expected = &mut self.expected[index];
            match outcome {
                Outcome::Up { .. } | Outcome::LowBudget { .. } => *expected = Expected::default(),
                Outcome::Down | Outcome::Unavailable { .. } => expected.failures += 1,
                Outcome::Permanent => {
                    expected.failures += 1;
                    expected.permanent_since_up = true;
                }
                Outcome::Limited { .. } => {}
            }
        }
        Ok(seen.into_iter().collect())
    }

    fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match op {
            Op::Advance { ms } => {
                self.now += Duration::from_millis(*ms);
                self.poll()?;
            }
            Op::Complete { pick, outcome } => {
                self.complete(*pick, outcome)?;
                self.poll()?;
            }
            Op::Edit { monitor, variant } => {
                let spec = &mut self.specs[*monitor];
                match variant {
                    0 => {
                        spec.interval_ms = if spec.interval_ms == 5_000 {
                            7_000
                        } else {
                            5_000
                        }
                    }
                    1 => spec.target = format!("{}e", spec.target),
                    _ => spec.revision += 1,
                }
                if self.present[*monitor] {
                    self.engine.upsert(spec.clone(), self.now);
                    self.expected[*monitor] = Expected::default();
                }
            }
            Op::Remove { monitor } => {
                self.engine.remove(self.specs[*monitor].id);
                self.present[*monitor] = false;
            }
            Op::Restore { monitor } => {
                if !self.present[*monitor] {
                    self.engine.upsert(self.specs[*monitor].clone(), self.now);
                    self.present[*monitor] = true;
                    self.expected[*monitor] = Expected::default();
                }
            }
        }
        self.check_invariants()
    }

    fn check_invariants(&self) -> Result<(), TestCaseError> {
        for (index, spec) in self.specs.iter().enumerate() {
            let Some(seen) = self.engine.inspect(spec.id) else {
                prop_assert!(!self.present[index], "monitor {index} vanished");
                continue;
            };
            prop_assert!(
                self.present[index],
                "removed monitor {index} is still there"
            );
            match seen.phase {
                "scheduled" => {
                    let due = seen.due_at;
                    prop_assert!(due.is_some(), "monitor {index} is scheduled nowhere");
                    prop_assert!(due.unwrap() <= self.now + BOUND, "monitor {index} parked");
                    prop_assert_eq!(seen.in_flight, 0);
                }
                "running" => {
                    prop_assert_eq!(seen.in_flight, 1, "monitor {} runs once", index);
                    prop_assert!(seen.due_at.is_none());
                }
                _ => {
                    prop_assert!(seen.due_at.is_none() && seen.in_flight == 0);
                    prop_assert!(
                        !self.flights.is_empty(),
                        "monitor {index} waits for a host slot nobody holds"
                    );
                }
            }
            let common = shared_proto::settings::MonitorSettings::parse(spec.kind, &spec.settings)
                .expect("valid settings")
                .common;
            let expected = &self.expected[index];
            prop_assert_eq!(seen.consecutive_failures, expected.failures);
            prop_assert_eq!(
                seen.breaker != BreakerState::Closed,
                common.breaker_threshold > 0 && expected.failures >= common.breaker_threshold,
                "breaker of monitor {}",
                index
            );
            prop_assert_eq!(
                seen.dead_letter,
                common.dead_letter_after > 0
                    && (expected.permanent_since_up
                        || expected.failures >= common.dead_letter_after),
                "dead letter of monitor {}",
                index
            );
        }
        Ok(())
    }

    /// Lets the clock run with every check succeeding: each monitor still there must report.
    fn every_monitor_runs_again(&mut self) -> Result<(), TestCaseError> {
        let mut reported = HashSet::new();
        for _ in 0..6 {
            self.poll()?;
            while !self.flights.is_empty() {
                reported.extend(self.complete(0, &Outcome::Up { fingerprint: 0 })?);
                self.poll()?;
            }
            self.now += BOUND;
        }
        for (index, spec) in self.specs.iter().enumerate() {
            if self.present[index] {
                prop_assert!(
                    reported.contains(&spec.id),
                    "monitor {index} never ran again"
                );
            }
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn no_outcome_sequence_parks_a_monitor(ops in proptest::collection::vec(op(), 1..80)) {
        let mut harness = Harness::new();
        harness.poll()?;
        for op in &ops {
            harness.apply(op)?;
        }
        harness.every_monitor_runs_again()?;
    }
}
