//! The agent's Prometheus metrics and the small live state `/readyz` reports.

use std::sync::Mutex;

use chrono::{DateTime, Utc};
use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use serde::Serialize;
use shared_proto::poller_api::SchedulerHealth;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CheckLabels {
    pub kind: String,
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EventLabels {
    pub event: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BreakerLabels {
    pub state: String,
}

pub struct AgentMetrics {
    registry: Registry,
    pub checks: Family<CheckLabels, Counter>,
    pub check_latency: Histogram,
    pub scheduling_lag: Histogram,
    pub engine_events: Family<EventLabels, Counter>,
    pub breakers: Family<BreakerLabels, Gauge>,
    pub paused: Gauge,
    pub dead_letters: Gauge,
    pub monitors: Gauge,
    pub queue_depth: Gauge,
    pub results_uploaded: Counter,
    pub results_rejected: Counter,
    pub results_lost: Counter,
    pub results_dropped: Counter,
    pub upload_failures: Counter,
    /// 1 while central has disabled or deleted this poller and its checks are stopped.
    pub checks_stopped: Gauge,
    pub state: Mutex<AgentState>,
}

/// What `/readyz` shows.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AgentState {
    pub poller_id: Option<String>,
    pub assignment_version: Option<i64>,
    pub last_heartbeat_at: Option<DateTime<Utc>>,
    pub last_upload_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    #[serde(skip)]
    pub unreported_errors: Vec<String>,
    pub queue_depth: u64,
    /// Of `queue_depth`, the results central refused, kept to be offered again, and the
    /// newest reason it gave.
    pub held_results: u64,
    pub held_because: Option<String>,
    /// The version of the central this agent talks to, as its newest answer named it.
    pub central_version: Option<String>,
    /// Set while central has disabled or deleted this poller: why its checks are stopped.
    pub checks_stopped: Option<String>,
    /// Set when one of the agent's tasks died: the agent is exiting.
    pub failed_task: Option<String>,
}

/// 1 ms … ~16 s.
fn latency_buckets() -> impl Iterator<Item = f64> {
    prometheus_client::metrics::histogram::exponential_buckets(0.001, 2.0, 15)
}

impl AgentMetrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("poller");
        let metrics = Self {
            checks: Family::default(),
            check_latency: Histogram::new(latency_buckets()),
            scheduling_lag: Histogram::new(latency_buckets()),
            engine_events: Family::default(),
            breakers: Family::default(),
            paused: Gauge::default(),
            dead_letters: Gauge::default(),
            monitors: Gauge::default(),
            queue_depth: Gauge::default(),
            results_uploaded: Counter::default(),
            results_rejected: Counter::default(),
            results_lost: Counter::default(),
            results_dropped: Counter::default(),
            upload_failures: Counter::default(),
            checks_stopped: Gauge::default(),
            state: Mutex::new(AgentState::default()),
            registry: Registry::default(),
        };
        registry.register(
            "checks",
            "Checks run, by kind and outcome",
            metrics.checks.clone(),
        );
        registry.register(
            "check_latency_seconds",
            "Time a check took",
            metrics.check_latency.clone(),
        );
        registry.register(
            "scheduling_lag_seconds",
            "How late checks started compared with when they were due",
            metrics.scheduling_lag.clone(),
        );
        registry.register(
            "engine_events",
            "Engine state changes, by event",
            metrics.engine_events.clone(),
        );
        registry.register(
            "breakers",
            "Monitors by circuit-breaker state",
            metrics.breakers.clone(),
        );
        registry.register(
            "paused_monitors",
            "Monitors auto-paused now",
            metrics.paused.clone(),
        );
        registry.register(
            "dead_letter_monitors",
            "Monitors in the dead-letter state",
            metrics.dead_letters.clone(),
        );
        registry.register(
            "monitors",
            "Monitors assigned to this agent",
            metrics.monitors.clone(),
        );
        registry.register(
            "checks_stopped",
            "1 while central has disabled or deleted this poller, so its checks are stopped",
            metrics.checks_stopped.clone(),
        );
        registry.register(
            "queue_depth",
            "Results waiting for upload",
            metrics.queue_depth.clone(),
        );
        registry.register(
            "results_uploaded",
            "Results acknowledged by central",
            metrics.results_uploaded.clone(),
        );
        registry.register(
            "results_rejected",
            "Results central refused as invalid",
            metrics.results_rejected.clone(),
        );
        registry.register(
            "results_lost",
            "Results that could not be queued",
            metrics.results_lost.clone(),
        );
        registry.register(
            "results_dropped",
            "Undelivered results dropped by retention or the queue size cap",
            metrics.results_dropped.clone(),
        );
        registry.register(
            "upload_failures",
            "Upload attempts that failed",
            metrics.upload_failures.clone(),
        );
        Self {
            registry,
            ..metrics
        }
    }

    pub fn record_check(&self, kind: &str, outcome: &str) {
        self.checks
            .get_or_create(&CheckLabels {
                kind: kind.to_string(),
                outcome: outcome.to_string(),
            })
            .inc();
    }

    pub fn record_event(&self, event: &str) {
        self.engine_events
            .get_or_create(&EventLabels {
                event: event.to_string(),
            })
            .inc();
    }

    pub fn observe_health(&self, health: &SchedulerHealth) {
        let closed = health
            .monitors
            .saturating_sub(health.breakers_open + health.breakers_half_open);
        for (state, count) in [
            ("closed", closed),
            ("open", health.breakers_open),
            ("half_open", health.breakers_half_open),
        ] {
            self.breakers
                .get_or_create(&BreakerLabels {
                    state: state.into(),
                })
                .set(count as i64);
        }
        self.paused.set(health.paused as i64);
        self.dead_letters.set(health.dead_letters.len() as i64);
        self.monitors.set(health.monitors as i64);
    }

    /// Notes a problem for the next heartbeat (at most the newest 20 are kept).
    pub fn report_error(&self, message: String) {
        self.update_state(|s| {
            s.unreported_errors.push(message);
            let excess = s.unreported_errors.len().saturating_sub(20);
            s.unreported_errors.drain(..excess);
        });
    }

    /// Takes the problems noted since the last heartbeat.
    pub fn take_errors(&self) -> Vec<String> {
        let mut taken = Vec::new();
        self.update_state(|s| taken = std::mem::take(&mut s.unreported_errors));
        taken
    }

    pub fn update_state(&self, change: impl FnOnce(&mut AgentState)) {
        change(&mut self.state.lock().unwrap_or_else(|p| p.into_inner()));
    }

    pub fn state(&self) -> AgentState {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn render(&self) -> String {
        let mut text = String::new();
        let _ = encode(&mut text, &self.registry);
        text
    }
}

impl Default for AgentMetrics {
    fn default() -> Self {
        Self::new()
    }
}
