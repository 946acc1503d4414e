//! Per-address rate limit for the unauthenticated poller calls (`register`, `token`), which
//! verify argon2 hashes and would otherwise let anyone burn central's CPU or guess at leisure.
//! A token bucket per client IP address; behind a reverse proxy they share the proxy's.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::tls::PeerAddr;

pub struct RateLimiter {
    per_second: f64,
    burst: f64,
    buckets: Mutex<HashMap<IpAddr, (f64, Instant)>>,
}

/// Addresses remembered at most; full buckets are forgotten first.
const MAX_TRACKED: usize = 10_000;

impl RateLimiter {
    pub fn new(per_second: f64, burst: f64) -> Self {
        Self {
            per_second,
            burst,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes one token for `ip`, or says how long until one is there.
    pub fn take(&self, ip: IpAddr, now: Instant) -> Result<(), Duration> {
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if buckets.len() >= MAX_TRACKED {
            let (rate, burst) = (self.per_second, self.burst);
            buckets.retain(|_, (tokens, at)| {
                *tokens + now.duration_since(*at).as_secs_f64() * rate < burst
            });
        }
        let (tokens, at) = buckets.entry(ip).or_insert((self.burst, now));
        *tokens =
            (*tokens + now.duration_since(*at).as_secs_f64() * self.per_second).min(self.burst);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - *tokens) / self.per_second))
        }
    }
}

pub async fn limit(
    State(limiter): State<Arc<RateLimiter>>,
    request: Request,
    next: Next,
) -> Response {
    let ip = request
        .extensions()
        .get::<ConnectInfo<PeerAddr>>()
        .map(|ConnectInfo(PeerAddr(addr))| addr.ip());
    if let Some(ip) = ip {
        if let Err(wait) = limiter.take(ip, Instant::now()) {
            return ApiError::TooManyRequests {
                message: format!(
                    "too many registration or token requests from {ip}; retry in {} s",
                    wait.as_secs().max(1)
                ),
                retry_after: wait.as_secs().max(1),
            }
            .into_response();
        }
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allows_a_burst_then_the_rate() {
        let limiter = RateLimiter::new(2.0, 3.0);
        let (ip, other) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(limiter.take(ip, t0).is_ok());
        }
        let wait = limiter.take(ip, t0).unwrap_err();
        assert_eq!(wait, Duration::from_millis(500));
        assert!(
            limiter.take(other, t0).is_ok(),
            "addresses are limited separately"
        );
        assert!(limiter.take(ip, t0 + Duration::from_millis(500)).is_ok());
        assert!(limiter.take(ip, t0 + Duration::from_millis(500)).is_err());
    }
}
