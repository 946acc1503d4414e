//! Per-monitor circuit breaker: closed → open after N consecutive failures → half-open after
//! a cooldown, letting exactly one probe through → closed on its success, open on its failure.
//! A threshold of 0 (the default) never opens: waiting a cooldown longer than the interval
//! makes a recovery seen late, which a monitor opts into (for polling APIs).

use std::time::{Duration, Instant};

/// As results carry it (`meta.engine.breaker`).
pub use shared_proto::engine_meta::BreakerState;

/// Whether a check may run now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    Allowed,
    /// The single half-open probe.
    Probe,
    /// Not now; try again at `until` (or when the probe in flight reports).
    Rejected {
        until: Option<Instant>,
    },
}

/// A state change worth an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    Opened { until: Instant },
    HalfOpened,
    Closed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Inner {
    Closed,
    Open { until: Instant },
    HalfOpen { probing: bool },
}

#[derive(Debug, Clone)]
pub struct Breaker {
    threshold: u32,
    cooldown: Duration,
    consecutive_failures: u32,
    inner: Inner,
}

impl Breaker {
    pub fn new(threshold: u32, cooldown: Duration) -> Self {
        Self {
            threshold,
            cooldown,
            consecutive_failures: 0,
            inner: Inner::Closed,
        }
    }

    pub fn state(&self) -> BreakerState {
        match self.inner {
            Inner::Closed => BreakerState::Closed,
            Inner::Open { .. } => BreakerState::Open,
            Inner::HalfOpen { .. } => BreakerState::HalfOpen,
        }
    }

    pub fn open_until(&self) -> Option<Instant> {
        match self.inner {
            Inner::Open { until } => Some(until),
            _ => None,
        }
    }

    /// Asks to run a check at `now`. Returns the transition to half-open when this call
    /// caused it.
    pub fn admit(&mut self, now: Instant) -> (Admission, Option<Transition>) {
        match self.inner {
            Inner::Closed => (Admission::Allowed, None),
            Inner::Open { until } if now < until => {
                (Admission::Rejected { until: Some(until) }, None)
            }
            Inner::Open { .. } => {
                self.inner = Inner::HalfOpen { probing: true };
                (Admission::Probe, Some(Transition::HalfOpened))
            }
            Inner::HalfOpen { probing: true } => (Admission::Rejected { until: None }, None),
            Inner::HalfOpen { probing: false } => {
                self.inner = Inner::HalfOpen { probing: true };
                (Admission::Probe, None)
            }
        }
    }

    /// An operator asked for a check now: an open breaker lets it through as its half-open
    /// probe (its outcome closes or re-opens the breaker as any probe's would). Only a probe
    /// already in flight refuses it: that probe's outcome is what the operator will get.
    pub fn admit_forced(&mut self) -> (Admission, Option<Transition>) {
        match self.inner {
            Inner::Closed => (Admission::Allowed, None),
            Inner::Open { .. } => {
                self.inner = Inner::HalfOpen { probing: true };
                (Admission::Probe, Some(Transition::HalfOpened))
            }
            Inner::HalfOpen { probing: true } => (Admission::Rejected { until: None }, None),
            Inner::HalfOpen { probing: false } => {
                self.inner = Inner::HalfOpen { probing: true };
                (Admission::Probe, None)
            }
        }
    }

    pub fn record_success(&mut self) -> Option<Transition> {
        self.consecutive_failures = 0;
        let was_closed = self.inner == Inner::Closed;
        self.inner = Inner::Closed;
        (!was_closed).then_some(Transition::Closed)
    }

    /// The probe ended without a verdict (the target rate-limited it): the next admission may
    /// probe again, so the monitor is never left waiting for a probe that will not report.
    pub fn release_probe(&mut self) {
        if self.inner == (Inner::HalfOpen { probing: true }) {
            self.inner = Inner::HalfOpen { probing: false };
        }
    }

    pub fn record_failure(&mut self, now: Instant) -> Option<Transition> {
        self.consecutive_failures = self.consecutive_failures.saturating_add(1);
        let open = match self.inner {
            Inner::HalfOpen { .. } => true,
            Inner::Closed => self.threshold > 0 && self.consecutive_failures >= self.threshold,
            Inner::Open { .. } => false,
        };
        open.then(|| {
            let until = now.checked_add(self.cooldown).unwrap_or(now);
            self.inner = Inner::Open { until };
            Transition::Opened { until }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Barrier, Mutex};

    const COOLDOWN: Duration = Duration::from_secs(300);

    #[test]
    fn a_threshold_of_zero_never_opens() {
        let mut breaker = Breaker::new(0, COOLDOWN);
        let now = Instant::now();
        for _ in 0..1_000 {
            assert_eq!(breaker.record_failure(now), None);
            assert_eq!(breaker.admit(now).0, Admission::Allowed);
        }
        assert_eq!(breaker.state(), BreakerState::Closed);
    }

    #[test]
    fn a_forced_check_is_an_open_breakers_probe() {
        let t0 = Instant::now();
        let mut breaker = Breaker::new(1, COOLDOWN);
        breaker.record_failure(t0);
        assert_eq!(
            breaker.admit_forced(),
            (Admission::Probe, Some(Transition::HalfOpened)),
            "long before the cooldown ends"
        );
        assert_eq!(
            breaker.admit_forced().0,
            Admission::Rejected { until: None }
        );
        assert_eq!(breaker.record_success(), Some(Transition::Closed));
        assert_eq!(breaker.admit_forced(), (Admission::Allowed, None));
    }

    #[test]
    fn opens_after_the_threshold_and_probes_after_the_cooldown() {
        let t0 = Instant::now();
        let mut breaker = Breaker::new(10, COOLDOWN);
        for _ in 0..9 {
            assert_eq!(breaker.record_failure(t0), None);
            assert_eq!(breaker.admit(t0).0, Admission::Allowed);
        }
        assert_eq!(
            breaker.record_failure(t0),
            Some(Transition::Opened {
                until: t0 + COOLDOWN
            })
        );
        assert_eq!(
            breaker.admit(t0 + Duration::from_secs(299)).0,
            Admission::Rejected {
                until: Some(t0 + COOLDOWN)
            }
        );

        let (admission, transition) = breaker.admit(t0 + COOLDOWN);
        assert_eq!(
            (admission, transition),
            (Admission::Probe, Some(Transition::HalfOpened))
        );
        assert_eq!(
            breaker.admit(t0 + COOLDOWN).0,
            Admission::Rejected { until: None },
            "one probe at a time"
        );

        // A failed probe re-opens at once, without waiting for ten failures.
        let t1 = t0 + COOLDOWN + Duration::from_secs(1);
        assert_eq!(
            breaker.record_failure(t1),
            Some(Transition::Opened {
                until: t1 + COOLDOWN
            })
        );
        assert_eq!(breaker.admit(t1 + COOLDOWN).0, Admission::Probe);
        assert_eq!(breaker.record_success(), Some(Transition::Closed));
        assert_eq!(breaker.state(), BreakerState::Closed);
        assert_eq!(
            breaker.record_failure(t1),
            None,
            "the failure count starts over"
        );
    }

    #[test]
    fn a_success_resets_the_count() {
        let t0 = Instant::now();
        let mut breaker = Breaker::new(3, COOLDOWN);
        breaker.record_failure(t0);
        breaker.record_failure(t0);
        assert_eq!(breaker.record_success(), None);
        breaker.record_failure(t0);
        breaker.record_failure(t0);
        assert_eq!(breaker.state(), BreakerState::Closed);
    }

    #[test]
    fn half_open_lets_exactly_one_probe_through_under_concurrency() {
        let t0 = Instant::now();
        let breaker = Arc::new(Mutex::new(Breaker::new(1, COOLDOWN)));
        breaker.lock().unwrap().record_failure(t0);
        let later = t0 + COOLDOWN;
        let start = Arc::new(Barrier::new(16));
        let threads: Vec<_> = (0..16)
            .map(|_| {
                let (breaker, start) = (breaker.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    breaker.lock().unwrap().admit(later).0
                })
            })
            .collect();
        let admissions: Vec<Admission> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let probes = admissions
            .iter()
            .filter(|a| **a == Admission::Probe)
            .count();
        assert_eq!(probes, 1, "{admissions:?}");
        assert_eq!(
            admissions
                .iter()
                .filter(|a| **a == Admission::Rejected { until: None })
                .count(),
            15
        );
    }
}
