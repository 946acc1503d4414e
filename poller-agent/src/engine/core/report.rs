//! The engine's health as central shows it, in the manner of Pulse's scheduler-health API:
//! counts (queue, running, due soon, breakers, pauses), and bounded lists of the monitors
//! that need an operator's eye (breakers not closed, auto-pauses, dead letters, the stalest,
//! rate-limit budgets), each with when it changes next.
//!
//! Cost: one pass over the engine's monitors per report (the runner reports once a second);
//! lists are cut to their caps after a partial sort. It changes nothing.

use std::cmp::Ordering;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use shared_proto::poller_api::{
    BreakerReport, BudgetReport, DeadLetter, PauseReport, SchedulerHealth, Staleness,
};

use super::{later, BreakerState, Engine, MonitorState};

/// Caps of the lists: what an operator can read, and what keeps a heartbeat small.
const MAX_LISTED: usize = 100;
const MAX_STALEST: usize = 25;
/// Listed as stale from this many intervals without a success.
const STALE_AFTER_INTERVALS: f64 = 2.0;

impl Engine {
    /// The engine as of `now` (`wall` is the wall clock then).
    pub fn health(&self, now: Instant, wall: DateTime<Utc>) -> SchedulerHealth {
        let at = |instant: Instant| wall_time(instant, now, wall);
        let mut health = SchedulerHealth {
            monitors: self.monitors.len() as u64,
            running: self.in_flight.len() as u64,
            waiting_for_host: self.hosts.waiting() as u64,
            due_soon: self
                .scheduler
                .due_before(later(now, Duration::from_secs(10))) as u64,
            most_overdue_ms: self.scheduler.earliest().map_or(0, |due| {
                now.saturating_duration_since(due).as_millis() as u64
            }),
            ..SchedulerHealth::default()
        };
        for state in self.monitors.values() {
            let id = state.spec.id;
            let failures = state.health.consecutive_failures();
            match state.breaker.state() {
                BreakerState::Closed => {}
                open => {
                    if open == BreakerState::Open {
                        health.breakers_open += 1;
                    } else {
                        health.breakers_half_open += 1;
                    }
                    health.breakers.push(BreakerReport {
                        monitor_id: id,
                        state: open.as_str().to_string(),
                        failures,
                        retry_at: state.breaker.open_until().map(at),
                    });
                }
            }
            if let Some(until) = state.health.paused_until().filter(|until| *until > now) {
                health.paused += 1;
                health.auto_paused.push(PauseReport {
                    monitor_id: id,
                    until: at(until),
                    success_rate: state.health.success_rate(),
                });
            }
            if let Some(dead) = &state.dead_letter {
                health.dead_letters.push(DeadLetter {
                    failures,
                    next_recheck: self.scheduler.due_at(id).map(at),
                    ..dead.clone()
                });
            }
            if let Some(stale) = staleness(state, now, &at) {
                health.staleness.push(stale);
            }
            if let (Some(budget), Some(stated)) = (&state.budget, state.budget_at) {
                health.budgets.push(BudgetReport {
                    monitor_id: id,
                    limit: budget.limit,
                    remaining: budget.remaining,
                    reset_at: budget.reset.map(|reset| at(later(stated, reset))),
                    low: state.budget_low,
                });
            }
        }
        keep_first(&mut health.breakers, MAX_LISTED, |a, b| {
            a.retry_at.cmp(&b.retry_at)
        });
        keep_first(&mut health.auto_paused, MAX_LISTED, |a, b| {
            a.until.cmp(&b.until)
        });
        keep_first(&mut health.dead_letters, MAX_LISTED, |a, b| {
            a.since.cmp(&b.since)
        });
        keep_first(&mut health.staleness, MAX_STALEST, |a, b| {
            b.intervals.total_cmp(&a.intervals)
        });
        keep_first(&mut health.budgets, MAX_LISTED, |a, b| {
            share_left(a).total_cmp(&share_left(b))
        });
        health
    }
}

/// A monitor two intervals or more past its last success (or its assignment, without one):
/// one interval is the normal wait for the next check.
fn staleness(
    state: &MonitorState,
    now: Instant,
    at: &impl Fn(Instant) -> DateTime<Utc>,
) -> Option<Staleness> {
    let since = state.last_success.unwrap_or(state.added);
    let interval = state.interval().as_secs_f64().max(0.001);
    let intervals = now.saturating_duration_since(since).as_secs_f64() / interval;
    (intervals >= STALE_AFTER_INTERVALS).then(|| Staleness {
        monitor_id: state.spec.id,
        intervals: (intervals * 10.0).round() / 10.0,
        last_success: state.last_success.map(at),
        last_error: state.last_error.clone(),
    })
}

/// The wall time of `instant`, past or future (`now` is `wall`).
fn wall_time(instant: Instant, now: Instant, wall: DateTime<Utc>) -> DateTime<Utc> {
    let offset = |d: Duration| chrono::Duration::from_std(d).unwrap_or_default();
    if instant >= now {
        wall + offset(instant - now)
    } else {
        wall - offset(now - instant)
    }
}

/// Of a budget, the share left (the remaining count alone when the limit is unknown).
fn share_left(budget: &BudgetReport) -> f64 {
    match budget.limit.filter(|l| *l > 0) {
        Some(limit) => budget.remaining as f64 / limit as f64,
        None => budget.remaining as f64,
    }
}

/// Sorts `items` by `order` and keeps the first `cap`: partially, so a long list costs
/// O(n) plus the sort of what is kept.
fn keep_first<T>(items: &mut Vec<T>, cap: usize, order: impl Fn(&T, &T) -> Ordering) {
    if items.len() > cap {
        items.select_nth_unstable_by(cap, &order);
        items.truncate(cap);
    }
    items.sort_by(order);
}
