//! Operators' commands about one monitor, as the engine carries them out: `check` runs it
//! now (through an open breaker, an auto-pause or a dead letter) and is answered by the first
//! result of a check that started after the command arrived; `reset` forgets what the engine
//! learnt about failures (breaker, backoff, retries, auto-pause window, dead letter) and runs
//! it now. Results, validators, the adaptive interval and the target's stated rate-limit
//! budget are kept: they are facts about the target, not about its failures.
//!
//! It must not reach central (the runner acknowledges), nor decide anything a result decides
//! (`record` in the parent still judges every outcome, forced or not).

use std::time::Instant;

use chrono::{DateTime, Utc};
use shared_proto::poller_api::EventKind;
use uuid::Uuid;

use super::{fresh_health, push_event, Breaker, BreakerState, Engine, MonitorState, Phase};

/// At most this many `check` commands wait for one monitor; more are answered by the same
/// run anyway, so older ones beyond it are answered as dropped.
const MAX_WAITING_CHECKS: usize = 16;

/// The monitor is not (or no longer) assigned to this poller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotAssigned;

impl Engine {
    /// Runs `id` as soon as a slot allows, and remembers `command` to answer with the
    /// result. Returns commands that had to be dropped to keep the list bounded.
    pub fn check_now(
        &mut self,
        id: Uuid,
        command: Uuid,
        now: Instant,
    ) -> Result<Vec<Uuid>, NotAssigned> {
        let state = self.monitors.get_mut(&id).ok_or(NotAssigned)?;
        state.asked.push((command, now));
        let dropped = state.asked.len().saturating_sub(MAX_WAITING_CHECKS);
        let dropped = state.asked.drain(..dropped).map(|(c, _)| c).collect();
        // Running: its completion sees a command newer than the run and runs it again.
        // Waiting for a host slot: it starts when one frees, after the command.
        if state.phase == Phase::Scheduled {
            self.scheduler.schedule(id, now);
        }
        Ok(dropped)
    }

    /// Forgets the monitor's failure state and runs it now. Returns what was cleared, for
    /// the operator (empty when there was nothing to clear).
    pub fn reset(
        &mut self,
        id: Uuid,
        now: Instant,
        wall: DateTime<Utc>,
    ) -> Result<Vec<String>, NotAssigned> {
        let state = self.monitors.get_mut(&id).ok_or(NotAssigned)?;
        let mut cleared = Vec::new();
        let mut events = Vec::new();
        match state.breaker.state() {
            BreakerState::Closed => {}
            open => {
                cleared.push(format!("breaker {}", open.as_str().replace('_', "-")));
                events.push(EventKind::BreakerClosed);
            }
        }
        if let Some(dead) = state.dead_letter.take() {
            cleared.push(format!("dead letter ({})", dead.reason));
            events.push(EventKind::Revived);
        }
        if state.health.paused_until().is_some_and(|until| until > now) {
            cleared.push("auto-pause".to_string());
            events.push(EventKind::Resumed);
        }
        let failures = state.health.consecutive_failures();
        if failures > 0 {
            cleared.push(format!("{failures} consecutive failures"));
        }
        forget_failures(state);
        state.reset_at = Some(now);
        for kind in events {
            push_event(&mut self.events, &self.config, id, wall, kind, Some(wall));
        }
        match state.phase {
            Phase::Scheduled => self.scheduler.schedule(id, now),
            Phase::Running => state.rerun = true,
            Phase::WaitingForHost { .. } => {}
        }
        Ok(cleared)
    }
}

fn forget_failures(state: &mut MonitorState) {
    let common = &state.common;
    state.breaker = Breaker::new(
        common.breaker_threshold,
        std::time::Duration::from_millis(common.breaker_cooldown_ms),
    );
    state.backoff_attempt = 0;
    state.retries_left = common.retries;
    state.health = fresh_health(common);
}

/// The `check` commands a run that started at `started` answers, taken off the list.
pub(super) fn answered_by(state: &mut MonitorState, started: Instant) -> Vec<Uuid> {
    let (answered, waiting) = std::mem::take(&mut state.asked)
        .into_iter()
        .partition(|(_, arrived)| *arrived <= started);
    state.asked = waiting;
    answered.into_iter().map(|(command, _)| command).collect()
}
