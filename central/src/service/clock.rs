//! Where central's rules read the time: the system clock in service, a clock the test sets in
//! tests (`Clock::manual`), so that a property test can jump time and look at what the rules
//! then store. Every rule of `service` (statuses, alerting, liveness, placement, tokens'
//! lifetimes as central stores them) asks `App::now_ms`; timers that only pace work (tickers,
//! the dispatcher's backoff sleeps, rate limiters) keep the runtime's own time.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use chrono::Utc;

#[derive(Debug, Clone, Default)]
pub struct Clock {
    /// `None`: the system clock.
    manual: Option<Arc<AtomicI64>>,
}

impl Clock {
    pub fn system() -> Clock {
        Clock::default()
    }

    /// A clock that reads `start_ms` until moved through the handle it returns.
    pub fn manual(start_ms: i64) -> (Clock, ClockHandle) {
        let at = Arc::new(AtomicI64::new(start_ms));
        (
            Clock {
                manual: Some(at.clone()),
            },
            ClockHandle(at),
        )
    }

    /// Milliseconds since the Unix epoch.
    pub fn now_ms(&self) -> i64 {
        match &self.manual {
            Some(at) => at.load(Ordering::SeqCst),
            None => Utc::now().timestamp_millis(),
        }
    }
}

/// Moves a manual clock (also backwards: a clock jump is one of the things tested).
#[derive(Debug, Clone)]
pub struct ClockHandle(Arc<AtomicI64>);

impl ClockHandle {
    pub fn set(&self, ms: i64) {
        self.0.store(ms, Ordering::SeqCst);
    }

    pub fn advance(&self, ms: i64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }

    pub fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}
