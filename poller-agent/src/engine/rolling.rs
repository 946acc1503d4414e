//! Rolling health: the success rate over the last `window` results, and auto-pause with
//! hysteresis. A monitor pauses when the full window's rate falls below the pause threshold,
//! and resumes only when a probe run lifts it to the (higher or equal) resume threshold, so it
//! does not flap. A pause in force is never shortened.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PauseTransition {
    Paused { until: Instant },
    Resumed,
}

#[derive(Debug, Clone)]
pub struct RollingHealth {
    window: VecDeque<bool>,
    size: usize,
    pause_below: f64,
    resume_at: f64,
    cooldown: Duration,
    paused_until: Option<Instant>,
    consecutive_failures: u32,
}

impl RollingHealth {
    pub fn new(size: u32, pause_below: f64, resume_at: f64, cooldown: Duration) -> Self {
        let size = size.max(1) as usize;
        Self {
            window: VecDeque::with_capacity(size),
            size,
            pause_below,
            resume_at: resume_at.max(pause_below),
            cooldown,
            paused_until: None,
            consecutive_failures: 0,
        }
    }

    /// Success rate of the window; `None` before any result.
    pub fn success_rate(&self) -> Option<f64> {
        (!self.window.is_empty())
            .then(|| self.window.iter().filter(|ok| **ok).count() as f64 / self.window.len() as f64)
    }

    pub fn consecutive_failures(&self) -> u32 {
        self.consecutive_failures
    }

    /// At least two successes since the last failure in the window.
    pub fn improving(&self) -> bool {
        match self.window.iter().rposition(|ok| !ok) {
            Some(last_failure) => self.window.len() - (last_failure + 1) >= 2,
            None => false,
        }
    }

    pub fn paused_until(&self) -> Option<Instant> {
        self.paused_until
    }

    /// Pauses until `until`, or longer if a longer pause is already in force.
    pub fn pause(&mut self, until: Instant) -> Option<PauseTransition> {
        let until = self
            .paused_until
            .map_or(until, |current| current.max(until));
        let changed = self.paused_until != Some(until);
        self.paused_until = Some(until);
        changed.then_some(PauseTransition::Paused { until })
    }

    /// Adds one result; a result that arrives while paused is the probe run.
    pub fn record(&mut self, success: bool, now: Instant) -> Option<PauseTransition> {
        if self.window.len() == self.size {
            self.window.pop_front();
        }
        self.window.push_back(success);
        self.consecutive_failures = if success {
            0
        } else {
            self.consecutive_failures.saturating_add(1)
        };
        let rate = self.success_rate().unwrap_or(1.0);
        if self.paused_until.is_some() {
            if rate >= self.resume_at {
                self.paused_until = None;
                return Some(PauseTransition::Resumed);
            }
            return self.pause(now.checked_add(self.cooldown).unwrap_or(now));
        }
        let full = self.window.len() == self.size;
        if full && self.pause_below > 0.0 && rate < self.pause_below {
            return self.pause(now.checked_add(self.cooldown).unwrap_or(now));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COOLDOWN: Duration = Duration::from_secs(600);

    #[test]
    fn pauses_only_once_the_window_is_full() {
        let t0 = Instant::now();
        let mut health = RollingHealth::new(4, 0.5, 0.75, COOLDOWN);
        assert_eq!(health.record(false, t0), None);
        assert_eq!(health.record(false, t0), None);
        assert_eq!(health.record(true, t0), None);
        assert_eq!(health.success_rate(), Some(1.0 / 3.0));
        assert_eq!(
            health.record(false, t0),
            Some(PauseTransition::Paused {
                until: t0 + COOLDOWN
            })
        );
        assert_eq!(health.consecutive_failures(), 1);
    }

    #[test]
    fn resumes_only_at_the_higher_threshold() {
        let t0 = Instant::now();
        let mut health = RollingHealth::new(4, 0.5, 0.75, COOLDOWN);
        for ok in [false, false, false, true] {
            health.record(ok, t0);
        }
        assert!(health.paused_until().is_some());
        // Window [F, F, T, T] = 0.5: at the pause threshold, not yet at the resume one.
        let t1 = t0 + COOLDOWN;
        assert_eq!(
            health.record(true, t1),
            Some(PauseTransition::Paused {
                until: t1 + COOLDOWN
            })
        );
        // [F, T, T, T] = 0.75 resumes.
        let t2 = t1 + COOLDOWN;
        assert_eq!(health.record(true, t2), Some(PauseTransition::Resumed));
        assert_eq!(health.paused_until(), None);
        assert!(health.improving());
    }

    #[test]
    fn a_pause_in_force_is_never_shortened() {
        let t0 = Instant::now();
        let mut health = RollingHealth::new(2, 0.5, 0.5, COOLDOWN);
        let long = t0 + Duration::from_secs(3600);
        assert_eq!(
            health.pause(long),
            Some(PauseTransition::Paused { until: long })
        );
        assert_eq!(health.pause(t0 + Duration::from_secs(60)), None);
        assert_eq!(health.paused_until(), Some(long));
        // A failed probe does not shorten it either.
        health.record(false, t0);
        assert_eq!(health.paused_until(), Some(long));
    }

    #[test]
    fn improving_needs_two_successes_after_a_failure() {
        let t0 = Instant::now();
        let mut health = RollingHealth::new(10, 0.0, 0.0, COOLDOWN);
        health.record(true, t0);
        health.record(true, t0);
        assert!(!health.improving(), "no failure to improve on");
        health.record(false, t0);
        health.record(true, t0);
        assert!(!health.improving());
        health.record(true, t0);
        assert!(health.improving());
        for _ in 0..5 {
            health.record(false, t0);
        }
        assert_eq!(health.record(false, t0), None, "threshold 0 never pauses");
    }
}
