//! Token buckets per client (`client_addr::client_key`: an address, or an IPv6 /64), and the
//! per-client rate limit of the unauthenticated poller calls (`register`, `token`), which
//! verify argon2 hashes and would otherwise let anyone burn central's CPU or guess at leisure.
//! `auth_failures` keeps its buckets here too.
//!
//! Memory is bounded and each request costs O(1): buckets live in two generations; when the
//! current one is full it becomes the previous one and the older is dropped whole. An address
//! idle for a generation starts again with a full bucket, which is what it would have by then.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::server::client_addr::{client_key, TrustedProxies};
use crate::server::PeerAddr;

type Generation = HashMap<IpAddr, (f64, Instant)>;

/// A bucket per key, refilled at `per_second` up to `burst`.
pub struct Buckets {
    per_second: f64,
    burst: f64,
    generation_size: usize,
    generations: Mutex<(Generation, Generation)>,
}

/// The rate limit of `register` and `token`.
pub struct RateLimiter {
    buckets: Buckets,
    proxies: TrustedProxies,
}

/// Addresses per generation: at most twice this many are remembered.
const GENERATION_SIZE: usize = 10_000;

impl RateLimiter {
    pub fn new(per_second: f64, burst: f64, proxies: TrustedProxies) -> Self {
        Self {
            buckets: Buckets::new(per_second, burst),
            proxies,
        }
    }
}

impl Buckets {
    pub fn new(per_second: f64, burst: f64) -> Self {
        Self::with_generation_size(per_second, burst, GENERATION_SIZE)
    }

    fn with_generation_size(per_second: f64, burst: f64, generation_size: usize) -> Self {
        Self {
            per_second,
            burst,
            generation_size,
            generations: Mutex::new((HashMap::new(), HashMap::new())),
        }
    }

    /// Takes one token for `ip` and says how many are left, or how long until one is there.
    pub fn take(&self, ip: IpAddr, now: Instant) -> Result<f64, Duration> {
        self.with_bucket(ip, now, |tokens| {
            if *tokens >= 1.0 {
                *tokens -= 1.0;
                true
            } else {
                false
            }
        })
    }

    /// Whether `ip` has a token now, taking none.
    pub fn check(&self, ip: IpAddr, now: Instant) -> Result<f64, Duration> {
        self.with_bucket(ip, now, |tokens| *tokens >= 1.0)
    }

    /// How long until `ip` has a token again (zero if it has one).
    pub fn wait(&self, ip: IpAddr, now: Instant) -> Duration {
        self.check(ip, now).err().unwrap_or_default()
    }

    /// Refills `ip`'s bucket to `now` and hands it to `decide`; `Ok` holds the tokens left,
    /// `Err` how long until a token is there when `decide` says no.
    fn with_bucket(
        &self,
        ip: IpAddr,
        now: Instant,
        decide: impl FnOnce(&mut f64) -> bool,
    ) -> Result<f64, Duration> {
        let mut guard = self.generations.lock().unwrap_or_else(|p| p.into_inner());
        let (current, previous) = &mut *guard;
        if !current.contains_key(&ip) {
            let carried = previous.remove(&ip).unwrap_or((self.burst, now));
            if current.len() >= self.generation_size {
                *previous = std::mem::take(current);
            }
            current.insert(ip, carried);
        }
        let (tokens, at) = current.get_mut(&ip).expect("inserted above");
        *tokens =
            (*tokens + now.duration_since(*at).as_secs_f64() * self.per_second).min(self.burst);
        *at = now;
        if decide(tokens) {
            Ok(*tokens)
        } else {
            Err(Duration::from_secs_f64(
                (1.0 - *tokens).max(0.0) / self.per_second,
            ))
        }
    }

    #[cfg(test)]
    fn remembered(&self) -> usize {
        let guard = self.generations.lock().unwrap();
        guard.0.len() + guard.1.len()
    }
}

pub async fn limit(
    State(limiter): State<Arc<RateLimiter>>,
    request: Request,
    next: Next,
) -> Response {
    let peer = request
        .extensions()
        .get::<ConnectInfo<PeerAddr>>()
        .map(|ConnectInfo(peer)| peer.addr.ip());
    if let Some(peer) = peer {
        let ip = client_key(limiter.proxies.client_ip(peer, request.headers()));
        if let Err(wait) = limiter.buckets.take(ip, Instant::now()) {
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
        let limiter = Buckets::new(2.0, 3.0);
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
        assert!(limiter.check(ip, t0 + Duration::from_millis(500)).is_ok());
        assert!(limiter.take(ip, t0 + Duration::from_millis(500)).is_ok());
        assert!(limiter.check(ip, t0 + Duration::from_millis(500)).is_err());
        assert!(limiter.take(ip, t0 + Duration::from_millis(500)).is_err());
    }

    #[test]
    fn memory_is_bounded_and_a_busy_address_keeps_its_debt_across_generations() {
        let limiter = Buckets::with_generation_size(1.0, 2.0, 4);
        let t0 = Instant::now();
        let busy: IpAddr = "10.9.9.9".parse().unwrap();
        assert!(limiter.take(busy, t0).is_ok());
        assert!(limiter.take(busy, t0).is_ok());
        for i in 0..10_000u32 {
            let ip = IpAddr::from(i.to_be_bytes());
            let _ = limiter.take(ip, t0);
            assert!(limiter.remembered() <= 8, "two generations of four at most");
            if i % 3 == 0 {
                // Still limited: its empty bucket moved with it, not reset by the churn.
                assert!(limiter.take(busy, t0).is_err());
            }
        }
    }
}
