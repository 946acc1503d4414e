//! Per-host concurrency limit with fair ordering: a monitor that cannot get a slot waits, and
//! freed slots go to the least-recently-polled waiter first, so none starves when hundreds of
//! monitors share a host.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::time::Instant;

use uuid::Uuid;

/// Waiters never polled come first, then the longest-unpolled; `seq` keeps equal ones FIFO.
type WaitKey = Reverse<(bool, Option<Instant>, u64, Uuid)>;

#[derive(Debug, Default)]
struct Host {
    running: usize,
    waiting: BinaryHeap<WaitKey>,
}

#[derive(Debug)]
pub struct HostLimiter {
    limit: usize,
    hosts: HashMap<String, Host>,
    seq: u64,
}

impl HostLimiter {
    pub fn new(limit: usize) -> Self {
        Self {
            limit: limit.max(1),
            hosts: HashMap::new(),
            seq: 0,
        }
    }

    /// Takes a slot if one is free.
    pub fn try_acquire(&mut self, host: &str) -> bool {
        let entry = self.hosts.entry(host.to_string()).or_default();
        if entry.running < self.limit {
            entry.running += 1;
            true
        } else {
            false
        }
    }

    /// Queues a monitor for the next free slot of `host`.
    pub fn wait(&mut self, host: &str, id: Uuid, last_polled: Option<Instant>) {
        self.seq += 1;
        let key = Reverse((last_polled.is_some(), last_polled, self.seq, id));
        self.hosts
            .entry(host.to_string())
            .or_default()
            .waiting
            .push(key);
    }

    /// Frees a slot. If someone waits, the slot passes straight to the least-recently-polled
    /// waiter, whose id is returned; the caller must start it (or `release` again if that
    /// monitor has gone meanwhile).
    pub fn release(&mut self, host: &str) -> Option<Uuid> {
        let entry = self.hosts.get_mut(host)?;
        if let Some(Reverse((_, _, _, id))) = entry.waiting.pop() {
            return Some(id);
        }
        entry.running = entry.running.saturating_sub(1);
        if entry.running == 0 {
            self.hosts.remove(host);
        }
        None
    }

    pub fn running(&self, host: &str) -> usize {
        self.hosts.get(host).map_or(0, |h| h.running)
    }

    pub fn waiting(&self) -> usize {
        self.hosts.values().map(|h| h.waiting.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn slots_pass_to_the_least_recently_polled_waiter() {
        let t0 = Instant::now();
        let mut limiter = HostLimiter::new(2);
        assert!(limiter.try_acquire("a"));
        assert!(limiter.try_acquire("a"));
        assert!(!limiter.try_acquire("a"));
        assert!(limiter.try_acquire("b"), "hosts are limited separately");

        let (recent, old, never) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        limiter.wait("a", recent, Some(t0 + Duration::from_secs(10)));
        limiter.wait("a", old, Some(t0));
        limiter.wait("a", never, None);
        assert_eq!(limiter.release("a"), Some(never));
        assert_eq!(limiter.release("a"), Some(old));
        assert_eq!(limiter.release("a"), Some(recent));
        assert_eq!(limiter.running("a"), 2, "each handed-over slot stays taken");
        assert_eq!(limiter.release("a"), None);
        assert_eq!(limiter.release("a"), None);
        assert_eq!(limiter.running("a"), 0);
        assert_eq!(limiter.waiting(), 0);
    }
}
