//! The agent's Prometheus metrics and the small live state `/readyz` reports.

use std::sync::Mutex;

use chrono::{DateTime, Utc};
use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde::Serialize;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CheckLabels {
    pub kind: String,
    pub outcome: String,
}

pub struct AgentMetrics {
    registry: Registry,
    pub checks: Family<CheckLabels, Counter>,
    pub monitors: Gauge,
    pub queue_depth: Gauge,
    pub results_uploaded: Counter,
    pub results_rejected: Counter,
    pub results_lost: Counter,
    pub upload_failures: Counter,
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
    pub queue_depth: u64,
}

impl AgentMetrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("poller");
        let checks = Family::<CheckLabels, Counter>::default();
        let monitors = Gauge::default();
        let queue_depth = Gauge::default();
        let results_uploaded = Counter::default();
        let results_rejected = Counter::default();
        let results_lost = Counter::default();
        let upload_failures = Counter::default();
        registry.register("checks", "Checks run, by kind and outcome", checks.clone());
        registry.register(
            "monitors",
            "Monitors assigned to this agent",
            monitors.clone(),
        );
        registry.register(
            "queue_depth",
            "Results waiting for upload",
            queue_depth.clone(),
        );
        registry.register(
            "results_uploaded",
            "Results acknowledged by central",
            results_uploaded.clone(),
        );
        registry.register(
            "results_rejected",
            "Results central refused as invalid",
            results_rejected.clone(),
        );
        registry.register(
            "results_lost",
            "Results that could not be queued",
            results_lost.clone(),
        );
        registry.register(
            "upload_failures",
            "Upload attempts that failed",
            upload_failures.clone(),
        );
        Self {
            registry,
            checks,
            monitors,
            queue_depth,
            results_uploaded,
            results_rejected,
            results_lost,
            upload_failures,
            state: Mutex::new(AgentState::default()),
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
