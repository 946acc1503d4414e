//! What the pollers' engines say, for operators: a monitor's engine state (breaker,
//! auto-pause, dead letter, rate-limit budget) from its newest result's `meta.engine`, its
//! health class over its last results (SourceMonitor's classes), and a poller's scheduler as
//! its last heartbeat described it. It reads what agents reported; it decides no status.
//!
//! Cost: a monitor's status answer reads its newest 20 results (one indexed query); a
//! scheduler answer reads one poller row.

use chrono::{DateTime, Utc};
use serde_json::Value;
use shared_proto::engine_meta::{BreakerState, EngineMeta};
use shared_proto::poller_api::Verdict;
use shared_proto::settings_api::{
    EngineView, HealthClass, MonitorStatusView, RateLimitView, SchedulerView,
};
use uuid::Uuid;

use super::{stored_id, time_of, App};
use crate::service::error::{ServiceError, ServiceResult};
use crate::store::ResultRow;

/// The results a health class is judged over (SourceMonitor's window).
pub const HEALTH_WINDOW: u32 = 20;

impl App {
    /// Adds the engine's word and the health class to one monitor's status.
    pub(super) async fn add_engine_health(
        &self,
        view: &mut MonitorStatusView,
    ) -> ServiceResult<()> {
        let newest = self
            .recent_results(&view.monitor_id.to_string(), HEALTH_WINDOW)
            .await?;
        let outcomes: Vec<bool> = newest
            .iter()
            .filter_map(|r| Some(r.status.verdict()? == Verdict::Up))
            .collect();
        view.health = health_class(&outcomes);
        view.engine = newest.first().map(engine_view).transpose()?.flatten();
        Ok(())
    }

    /// A poller's scheduler as its last heartbeat described it.
    pub async fn poller_scheduler(&self, id: Uuid) -> ServiceResult<SchedulerView> {
        let row = self
            .store
            .poller(&id.to_string())
            .await?
            .ok_or_else(|| ServiceError::NotFound(format!("no poller with id {id}")))?;
        Ok(SchedulerView {
            poller_id: id,
            reported_at: row.last_heartbeat_at.map(time_of),
            scheduler: row.scheduler_health,
        })
    }
}

/// SourceMonitor's class of a monitor from its decisive outcomes, newest first (`true`: up).
pub fn health_class(newest_first: &[bool]) -> Option<HealthClass> {
    let window = &newest_first[..newest_first.len().min(HEALTH_WINDOW as usize)];
    if window.is_empty() {
        return None;
    }
    let failing = window.iter().take_while(|up| !**up).count();
    if failing >= 3 {
        return Some(HealthClass::Declining);
    }
    let recovering = window.iter().take_while(|up| **up).count();
    if recovering >= 2 && recovering < window.len() {
        return Some(HealthClass::Improving);
    }
    let rate = window.iter().filter(|up| **up).count() as f64 / window.len() as f64;
    Some(if rate >= 0.8 {
        HealthClass::Healthy
    } else if rate >= 0.5 {
        HealthClass::Warning
    } else {
        HealthClass::Critical
    })
}

/// What a result's `meta.engine` says; none for a result without one.
fn engine_view(newest: &ResultRow) -> anyhow::Result<Option<EngineView>> {
    let meta: Value = serde_json::from_str(&newest.meta).unwrap_or(Value::Null);
    let Some(engine) = EngineMeta::of(&meta) else {
        return Ok(None);
    };
    let paused_until = engine.paused_until;
    let dead_letter = engine.dead_letter.then(|| newest.msg.clone());
    // An open breaker's next run is its probe, unless a dead letter or a pause holds the
    // monitor longer: then its next run is the recheck, not the breaker's doing.
    let breaker = engine.breaker;
    let breaker_until =
        (breaker == BreakerState::Open && dead_letter.is_none() && paused_until.is_none())
            .then_some(engine.next_due_at)
            .flatten();
    let rate_limit = engine.rate_limit.map(|r| RateLimitView {
        limit: r.limit,
        remaining: r.remaining,
        reset_at: r.reset_at,
        low: r.low,
    });
    let stamp = |t: DateTime<Utc>| t.format("%Y-%m-%d %H:%M:%SZ").to_string();
    let mut notes = Vec::new();
    if let Some(until) = paused_until {
        notes.push(format!("auto-paused until {}", stamp(until)));
    }
    match (breaker, breaker_until) {
        (BreakerState::Closed, _) => {}
        (_, Some(until)) => notes.push(format!("breaker open until {}", stamp(until))),
        (state, None) => notes.push(format!("breaker {}", state.as_str().replace('_', "-"))),
    }
    if let Some(reason) = &dead_letter {
        notes.push(format!("dead-lettered: {reason}"));
    }
    if let Some(budget) = rate_limit.as_ref().filter(|b| b.low) {
        let of = budget.limit.map(|l| format!(" of {l}")).unwrap_or_default();
        let resets = budget
            .reset_at
            .map(|t| format!(", resets {}", stamp(t)))
            .unwrap_or_default();
        notes.push(format!(
            "rate limited: budget {}{of} left{resets}",
            budget.remaining
        ));
    }
    Ok(Some(EngineView {
        poller_id: stored_id(&newest.poller_id)?,
        breaker: breaker.as_str().to_string(),
        breaker_until,
        paused_until,
        dead_letter,
        consecutive_failures: Some(u64::from(engine.consecutive_failures)),
        success_rate: engine.success_rate,
        rate_limit,
        notes,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcomes(text: &str) -> Vec<bool> {
        // Written oldest first, as one reads a timeline; the rule takes newest first.
        text.chars().rev().map(|c| c == 'u').collect()
    }

    #[test]
    fn classes_follow_source_monitors_rules() {
        use HealthClass::*;
        for (timeline, class) in [
            ("", None),
            ("u", Some(Healthy)),
            ("uuuuuuuuuuuuuuuuuuuu", Some(Healthy)),
            ("uuuuuuuud", Some(Healthy)),
            ("uuuuuddd", Some(Declining)),
            ("dd", Some(Critical)),
            ("uuuuuudd", Some(Warning)),
            ("ddduu", Some(Improving)),
            ("du", Some(Warning)),
            ("dddddddddddddddddduu", Some(Improving)),
            ("udududududu", Some(Warning)),
            ("uddudduddu", Some(Critical)),
        ] {
            assert_eq!(health_class(&outcomes(timeline)), class, "{timeline}");
        }
        // Only the newest 20 count: a long-past failure streak is forgotten.
        let mut long = outcomes("ddddddddddd");
        long.splice(0..0, outcomes(&"u".repeat(20)));
        assert_eq!(health_class(&long), Some(Healthy));
    }

    fn row(meta: Value, msg: &str) -> ResultRow {
        ResultRow {
            id: Uuid::nil().to_string(),
            monitor_id: Uuid::nil().to_string(),
            poller_id: Uuid::nil().to_string(),
            region: None,
            ts: 0,
            status: crate::store::ResultStatus::Down,
            latency_ms: None,
            msg: msg.into(),
            meta: meta.to_string(),
        }
    }

    #[test]
    fn the_engines_word_becomes_the_notes_an_operator_reads() {
        let meta = serde_json::json!({"engine": {
            "next_due_at": "2026-11-25T14:00:00Z", "consecutive_failures": 12,
            "success_rate": 0.25, "breaker": "open", "paused_until": "2026-11-25T15:00:00Z",
            "dead_letter": true,
            "rate_limit": {"limit": 5000, "remaining": 12, "reset_at": "2026-11-25T14:30:00Z", "low": true}}});
        let view = engine_view(&row(meta, "expected 2xx, got 403"))
            .unwrap()
            .unwrap();
        assert_eq!(
            view.notes,
            [
                "auto-paused until 2026-11-25 15:00:00Z",
                "breaker open",
                "dead-lettered: expected 2xx, got 403",
                "rate limited: budget 12 of 5000 left, resets 2026-11-25 14:30:00Z",
            ]
        );
        assert_eq!(view.consecutive_failures, Some(12));
        assert_eq!(
            view.breaker_until, None,
            "held by the dead letter, not the breaker"
        );
        let open = serde_json::json!({"engine": {"breaker": "open", "dead_letter": false,
            "paused_until": null, "next_due_at": "2026-11-25T14:00:00Z"}});
        let view = engine_view(&row(open, "")).unwrap().unwrap();
        assert_eq!(view.notes, ["breaker open until 2026-11-25 14:00:00Z"]);
        let quiet = serde_json::json!({"engine": {"breaker": "closed", "dead_letter": false,
            "paused_until": null, "next_due_at": "2026-11-25T14:00:00Z"}});
        assert!(engine_view(&row(quiet, ""))
            .unwrap()
            .unwrap()
            .notes
            .is_empty());
        assert_eq!(engine_view(&row(serde_json::json!({}), "")).unwrap(), None);
    }
}
