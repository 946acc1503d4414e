//! Time for the polling core, injectable so tests control it.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

pub trait Clock: Send + Sync + 'static {
    /// Monotonic time, for scheduling.
    fn now(&self) -> Instant;
    /// Wall time, for result timestamps.
    fn wall(&self) -> DateTime<Utc>;
}

/// The real clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
    fn wall(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that moves only when told to.
#[derive(Debug, Clone)]
pub struct ManualClock {
    start: Instant,
    start_wall: DateTime<Utc>,
    elapsed: Arc<Mutex<Duration>>,
}

impl ManualClock {
    pub fn new() -> Self {
        Self {
            start: Instant::now(),
            start_wall: DateTime::from_timestamp(1_800_000_000, 0).unwrap_or_default(),
            elapsed: Arc::new(Mutex::new(Duration::ZERO)),
        }
    }

    pub fn advance(&self, by: Duration) {
        *self.elapsed.lock().unwrap_or_else(|p| p.into_inner()) += by;
    }

    fn elapsed(&self) -> Duration {
        *self.elapsed.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        self.start + self.elapsed()
    }
    fn wall(&self) -> DateTime<Utc> {
        self.start_wall + self.elapsed()
    }
}
