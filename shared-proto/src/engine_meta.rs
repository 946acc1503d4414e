//! What the agent's engine says of a monitor with each of its results (`meta.engine`): when it
//! checks next, and what may hold it back (the breaker, an auto-pause, a dead letter, a rate
//! limit's budget). The agent writes it (`engine::core`); central reads it for the time it
//! expects the next result (`service::ingest`) and for the monitor's engine view
//! (`service::engine_health`). A result from an agent without an engine, or one whose
//! `engine` cannot be read, has none: central then judges the monitor by its interval alone.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A monitor's circuit breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BreakerState {
    #[default]
    Closed,
    Open,
    HalfOpen,
}

impl BreakerState {
    pub fn as_str(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::HalfOpen => "half_open",
        }
    }
}

/// `meta.engine`. Fields an older agent does not send take their defaults.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct EngineMeta {
    /// When the agent checks the monitor next: a deliberate delay (backoff, a breaker's
    /// cooldown, a pause) is not a silent agent.
    #[serde(default)]
    pub next_due_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub consecutive_failures: u32,
    /// The share of passing checks in the engine's rolling window; none before a check.
    #[serde(default)]
    pub success_rate: Option<f64>,
    /// The newest checks pass after failures.
    #[serde(default)]
    pub improving: bool,
    #[serde(default)]
    pub breaker: BreakerState,
    /// The engine paused the monitor itself until then.
    #[serde(default)]
    pub paused_until: Option<DateTime<Utc>>,
    /// The engine gave up on the monitor for now (it rechecks it now and then).
    #[serde(default)]
    pub dead_letter: bool,
    /// The interval adaptive polling runs the monitor at now, when it is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_ms: Option<u64>,
    /// The target's stated rate-limit budget, when it states one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimitMeta>,
}

/// A target's rate-limit budget as its newest answer stated it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateLimitMeta {
    /// Requests allowed per window, when the target says.
    #[serde(default)]
    pub limit: Option<u64>,
    pub remaining: u64,
    #[serde(default)]
    pub reset_at: Option<DateTime<Utc>>,
    /// Few enough left that the agent spaces its checks out.
    #[serde(default)]
    pub low: bool,
}

impl EngineMeta {
    /// The engine's part of a result's `meta`; `None` when there is none or it cannot be read.
    pub fn of(meta: &Value) -> Option<EngineMeta> {
        EngineMeta::deserialize(meta.get("engine")?).ok()
    }

    /// `meta` (an object, or anything else kept under `check`) with this as its `engine`.
    pub fn added_to(&self, meta: Value) -> Value {
        let mut meta = match meta {
            Value::Object(map) => map,
            Value::Null => serde_json::Map::new(),
            other => serde_json::Map::from_iter([("check".to_string(), other)]),
        };
        let engine = serde_json::to_value(self).unwrap_or(Value::Null);
        meta.insert("engine".to_string(), engine);
        Value::Object(meta)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What an agent of 0.1.0 wrote reads as it meant, and what this one writes reads back.
    #[test]
    fn the_engine_meta_reads_what_agents_write() {
        let older = json!({"status_code": 200, "engine": {
            "next_due_at": "2026-11-25T14:00:00Z", "consecutive_failures": 3,
            "success_rate": 0.25, "improving": false, "breaker": "half_open",
            "paused_until": null, "dead_letter": false,
            "rate_limit": {"limit": 5000, "remaining": 12, "reset_at": null, "low": true}}});
        let read = EngineMeta::of(&older).expect("readable");
        assert_eq!(read.breaker, BreakerState::HalfOpen);
        assert_eq!(read.consecutive_failures, 3);
        assert_eq!(
            read.next_due_at.map(|t| t.to_rfc3339()),
            Some("2026-11-25T14:00:00+00:00".to_string())
        );
        assert_eq!(
            read.rate_limit.as_ref().map(|r| (r.remaining, r.low)),
            Some((12, true))
        );

        let written = read.added_to(json!({"status_code": 200}));
        assert_eq!(written["status_code"], 200);
        assert_eq!(written["engine"]["breaker"], "half_open");
        assert_eq!(written["engine"]["next_due_at"], "2026-11-25T14:00:00Z");
        assert_eq!(EngineMeta::of(&written), Some(read));

        assert_eq!(EngineMeta::of(&json!({"status_code": 200})), None);
        assert_eq!(
            EngineMeta::of(&json!({"engine": {"breaker": "melted"}})),
            None,
            "an engine that says something unreadable says nothing"
        );
        assert_eq!(
            EngineMeta::of(&json!({"engine": {}})),
            Some(EngineMeta::default()),
            "an older agent's missing fields take their defaults"
        );
        let other = EngineMeta::default().added_to(json!("text"));
        assert_eq!(other["check"], "text");
    }
}
