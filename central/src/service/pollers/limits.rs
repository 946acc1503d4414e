//! Per-poller limits. A poller holds valid credentials, yet a broken or stolen agent must not
//! cost central more than an honest one: heartbeats are limited per poller
//! (`CENTRAL_POLLER_HEARTBEATS_PER_MINUTE`), and a change of advertised capabilities, which
//! asks for a placement pass, is applied at most once a minute per poller (one sent sooner is
//! kept for later: the agent sends its capabilities with every heartbeat).
//!
//! Kept in memory per replica (behind a load balancer each replica limits what it serves);
//! cost O(1) per heartbeat, memory bounded as `Buckets`'.

use std::time::{Duration, Instant};

use uuid::Uuid;

use super::super::buckets::Buckets;
use crate::service::error::ServiceError;

/// Capability changes a poller may make in a burst, then one a minute.
const CAPABILITY_CHANGES_BURST: f64 = 2.0;
const CAPABILITY_CHANGE_EVERY: Duration = Duration::from_secs(60);

pub struct PollerLimits {
    /// `None`: heartbeats are not limited.
    heartbeats: Option<Buckets<Uuid>>,
    capability_changes: Buckets<Uuid>,
}

impl PollerLimits {
    /// `heartbeats_per_minute` is the sustained rate and, over ten seconds, the burst; 0 turns
    /// the heartbeat limit off.
    pub fn new(heartbeats_per_minute: u32) -> Self {
        let per_second = f64::from(heartbeats_per_minute) / 60.0;
        Self {
            heartbeats: (heartbeats_per_minute > 0)
                .then(|| Buckets::new(per_second, (per_second * 10.0).max(3.0))),
            capability_changes: Buckets::new(
                1.0 / CAPABILITY_CHANGE_EVERY.as_secs_f64(),
                CAPABILITY_CHANGES_BURST,
            ),
        }
    }

    /// Counts one heartbeat of `poller`; refused with `429` beyond its rate.
    pub fn heartbeat(&self, poller: Uuid, now: Instant) -> Result<(), ServiceError> {
        let Some(buckets) = &self.heartbeats else {
            return Ok(());
        };
        buckets.take(poller, now).map(drop).map_err(|wait| {
            let seconds = wait.as_secs().max(1);
            ServiceError::RateLimited {
                message: format!(
                    "this poller sends heartbeats faster than CENTRAL_POLLER_HEARTBEATS_PER_MINUTE \
                     allows; retry in {seconds} s (POLLER_HEARTBEAT_INTERVAL sets the agent's pace)"
                ),
                retry_after: seconds,
            }
        })
    }

    /// Whether `poller` may change its capabilities now (counting the change if so).
    pub fn capability_change(&self, poller: Uuid, now: Instant) -> bool {
        self.capability_changes.take(poller, now).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heartbeats_beyond_the_rate_are_refused_per_poller() {
        let limits = PollerLimits::new(6);
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let t0 = Instant::now();
        for _ in 0..3 {
            limits.heartbeat(a, t0).unwrap();
        }
        let refused = limits.heartbeat(a, t0).unwrap_err();
        assert!(matches!(
            refused,
            ServiceError::RateLimited {
                retry_after: 10,
                ..
            }
        ));
        limits.heartbeat(b, t0).unwrap();
        limits.heartbeat(a, t0 + Duration::from_secs(10)).unwrap();
    }

    #[test]
    fn no_heartbeat_limit_when_turned_off() {
        let limits = PollerLimits::new(0);
        let a = Uuid::new_v4();
        let t0 = Instant::now();
        for _ in 0..1_000 {
            limits.heartbeat(a, t0).unwrap();
        }
    }

    #[test]
    fn capability_changes_are_spaced_a_minute_apart_after_a_burst() {
        let limits = PollerLimits::new(60);
        let a = Uuid::new_v4();
        let t0 = Instant::now();
        assert!(limits.capability_change(a, t0));
        assert!(limits.capability_change(a, t0));
        assert!(!limits.capability_change(a, t0 + Duration::from_secs(30)));
        assert!(limits.capability_change(a, t0 + Duration::from_secs(61)));
        assert!(!limits.capability_change(a, t0 + Duration::from_secs(62)));
    }
}
