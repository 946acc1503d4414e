//! Token buckets per key (a client's address, a poller's id): a key may spend `burst` tokens
//! at once and gets `per_second` back. Pure: the caller passes `now`.
//!
//! Memory is bounded and each call costs O(1): buckets live in two generations; when the
//! current one is full it becomes the previous one and the older is dropped whole. A key idle
//! for a generation starts again with a full bucket, which is what it would have by then.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

type Generation<K> = HashMap<K, (f64, Instant)>;

/// A bucket per key, refilled at `per_second` up to `burst`.
pub struct Buckets<K> {
    per_second: f64,
    burst: f64,
    generation_size: usize,
    generations: Mutex<(Generation<K>, Generation<K>)>,
}

/// Keys per generation: at most twice this many are remembered.
const GENERATION_SIZE: usize = 10_000;

impl<K: Eq + Hash + Copy> Buckets<K> {
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

    /// Takes one token for `key` and says how many are left, or how long until one is there.
    pub fn take(&self, key: K, now: Instant) -> Result<f64, Duration> {
        self.with_bucket(key, now, |tokens| {
            if *tokens >= 1.0 {
                *tokens -= 1.0;
                true
            } else {
                false
            }
        })
    }

    /// Whether `key` has a token now, taking none.
    pub fn check(&self, key: K, now: Instant) -> Result<f64, Duration> {
        self.with_bucket(key, now, |tokens| *tokens >= 1.0)
    }

    /// How long until `key` has a token again (zero if it has one).
    pub fn wait(&self, key: K, now: Instant) -> Duration {
        self.check(key, now).err().unwrap_or_default()
    }

    /// Refills `key`'s bucket to `now` and hands it to `decide`; `Ok` holds the tokens left,
    /// `Err` how long until a token is there when `decide` says no.
    fn with_bucket(
        &self,
        key: K,
        now: Instant,
        decide: impl FnOnce(&mut f64) -> bool,
    ) -> Result<f64, Duration> {
        let mut guard = self.generations.lock().unwrap_or_else(|p| p.into_inner());
        let (current, previous) = &mut *guard;
        if !current.contains_key(&key) {
            let carried = previous.remove(&key).unwrap_or((self.burst, now));
            if current.len() >= self.generation_size {
                *previous = std::mem::take(current);
            }
            current.insert(key, carried);
        }
        let (tokens, at) = current.get_mut(&key).expect("inserted above");
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    #[test]
    fn allows_a_burst_then_the_rate() {
        let limiter = Buckets::<IpAddr>::new(2.0, 3.0);
        let (ip, other) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(limiter.take(ip, t0).is_ok());
        }
        let wait = limiter.take(ip, t0).unwrap_err();
        assert_eq!(wait, Duration::from_millis(500));
        assert!(
            limiter.take(other, t0).is_ok(),
            "keys are limited separately"
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
