//! When each monitor is due: a min-heap of due times. Pure data; `now` is always passed in.
//!
//! Entries are never updated in place: rescheduling pushes a new entry and the old one is
//! recognised as stale when it surfaces (its time no longer matches the monitor's due time).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::time::{Duration, Instant};

use uuid::Uuid;

#[derive(Debug, Default)]
pub struct Scheduler {
    heap: BinaryHeap<Reverse<(Instant, Uuid)>>,
    due: HashMap<Uuid, Instant>,
}

/// A stable offset in `[0, interval)` from a hash, so that monitors added together spread
/// their first runs over their interval instead of firing in one burst.
pub fn phase(hash: u64, interval: Duration) -> Duration {
    let interval_ms = interval.as_millis().max(1) as u64;
    Duration::from_millis(hash % interval_ms)
}

impl Scheduler {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets (or moves) the due time of `id`.
    pub fn schedule(&mut self, id: Uuid, at: Instant) {
        self.due.insert(id, at);
        self.heap.push(Reverse((at, id)));
        // Stale entries are dropped lazily; rebuild if they come to dominate the heap.
        if self.heap.len() > 2 * self.due.len() + 1024 {
            self.heap = self
                .due
                .iter()
                .map(|(id, at)| Reverse((*at, *id)))
                .collect();
        }
    }

    /// Forgets `id` (it is running, or gone).
    pub fn cancel(&mut self, id: Uuid) {
        self.due.remove(&id);
    }

    pub fn due_at(&self, id: Uuid) -> Option<Instant> {
        self.due.get(&id).copied()
    }

    /// Removes and returns everything due at `now`, earliest first, with its due time.
    pub fn pop_due(&mut self, now: Instant) -> Vec<(Uuid, Instant)> {
        let mut due = Vec::new();
        while let Some(Reverse((at, id))) = self.heap.peek().copied() {
            if at > now {
                break;
            }
            self.heap.pop();
            if self.due.get(&id) == Some(&at) {
                self.due.remove(&id);
                due.push((id, at));
            }
        }
        due
    }

    /// The earliest due time, if any.
    pub fn next_due(&mut self) -> Option<Instant> {
        while let Some(Reverse((at, id))) = self.heap.peek().copied() {
            if self.due.get(&id) == Some(&at) {
                return Some(at);
            }
            self.heap.pop();
        }
        None
    }

    /// How many are due before `horizon`.
    pub fn due_before(&self, horizon: Instant) -> usize {
        self.due.values().filter(|at| **at <= horizon).count()
    }

    /// The earliest due time (for staleness reporting), without cleaning the heap.
    pub fn earliest(&self) -> Option<Instant> {
        self.due.values().min().copied()
    }

    pub fn len(&self) -> usize {
        self.due.len()
    }

    pub fn is_empty(&self) -> bool {
        self.due.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_due_order_and_ignores_rescheduled_entries() {
        let t0 = Instant::now();
        let mut scheduler = Scheduler::new();
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        scheduler.schedule(a, t0 + Duration::from_secs(5));
        scheduler.schedule(b, t0 + Duration::from_secs(3));
        scheduler.schedule(a, t0 + Duration::from_secs(10));
        assert_eq!(scheduler.next_due(), Some(t0 + Duration::from_secs(3)));
        assert_eq!(
            scheduler.pop_due(t0 + Duration::from_secs(6)),
            [(b, t0 + Duration::from_secs(3))]
        );
        assert_eq!(scheduler.next_due(), Some(t0 + Duration::from_secs(10)));
        scheduler.cancel(a);
        assert_eq!(scheduler.next_due(), None);
        assert!(scheduler.pop_due(t0 + Duration::from_secs(60)).is_empty());
    }

    #[test]
    fn phases_spread_over_the_interval() {
        let interval = Duration::from_secs(10);
        let mut per_second = [0usize; 10];
        for _ in 0..10_000 {
            let (high, low) = Uuid::new_v4().as_u64_pair();
            per_second[phase(high ^ low, interval).as_secs() as usize] += 1;
        }
        assert!(
            per_second.iter().all(|n| (800..=1200).contains(n)),
            "{per_second:?}"
        );
    }
}
