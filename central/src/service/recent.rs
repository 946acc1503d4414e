//! Credentials this replica saw valid lately, kept as SHA-256 digests so that choosing a
//! request's pool (`api::pools`) takes no database read and no slow hash. Only a hint: a
//! credential remembered here that has since been revoked gets an authenticated pool's place
//! for the microseconds its handler needs to refuse it; every request is still authenticated
//! by its handler. Must not be used to grant anything. Each may carry who holds it (`V`: the
//! user a session or key acts for), so that the pool can share its places per holder.
//!
//! Cost: O(1) per look or remember; memory bounded by `CAPACITY` digests (when full, all are
//! forgotten at once and the next request of each holder looks again).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

const CAPACITY: usize = 4_096;

pub struct RecentlyValid<V = ()> {
    seen: Mutex<HashMap<[u8; 32], (Instant, V)>>,
    ttl: Duration,
}

fn digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

impl RecentlyValid<()> {
    pub fn remember(&self, secret: &str, now: Instant) {
        self.remember_digest(digest(secret), (), now);
    }
}

impl<V: Clone> RecentlyValid<V> {
    pub fn new(ttl: Duration) -> Self {
        Self {
            seen: Mutex::default(),
            ttl,
        }
    }

    /// Remembers `secret` as valid, held by `holder`.
    pub fn remember_held(&self, secret: &str, holder: V, now: Instant) {
        self.remember_digest(digest(secret), holder, now);
    }

    /// Remembers a credential known only by its SHA-256 (as the database keeps it).
    pub fn remember_digest(&self, digest: [u8; 32], holder: V, now: Instant) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen.len() >= CAPACITY {
            seen.clear();
        }
        seen.insert(digest, (now, holder));
    }

    /// Whether `secret` was seen valid within the last `ttl`.
    pub fn contains(&self, secret: &str, now: Instant) -> bool {
        self.holder(secret, now).is_some()
    }

    /// Who holds `secret`, if it was seen valid within the last `ttl`.
    pub fn holder(&self, secret: &str, now: Instant) -> Option<V> {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.get(&digest(secret))
            .filter(|(at, _)| now.saturating_duration_since(*at) < self.ttl)
            .map(|(_, holder)| holder.clone())
    }

    /// Forgets everything (the credential they were checked against changed).
    pub fn clear(&self) {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    pub fn forget(&self, secret: &str) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.remove(&digest(secret));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_for_its_ttl_and_forgets_on_demand_and_when_full() {
        let recent = RecentlyValid::new(Duration::from_secs(60));
        let start = Instant::now();
        assert!(!recent.contains("a", start));
        recent.remember_digest(digest("a"), (), start);
        assert!(recent.contains("a", start + Duration::from_secs(59)));
        assert!(!recent.contains("a", start + Duration::from_secs(60)));
        assert!(!recent.contains("b", start));
        recent.forget("a");
        assert!(!recent.contains("a", start));
        for i in 0..CAPACITY {
            recent.remember(&i.to_string(), start);
        }
        recent.remember("last", start);
        assert!(recent.contains("last", start));
        assert!(!recent.contains("0", start), "cleared when full");
    }
}
