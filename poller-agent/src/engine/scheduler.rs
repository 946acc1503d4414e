//! Which monitor runs next: a min-heap keyed by due time. Pure data; `now` is always passed in.
//!
//! Heap entries are never updated in place: a rescheduled monitor gets a new entry and the
//! old one is recognised as stale when it surfaces (its due time no longer matches).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use shared_proto::AssignedMonitor;
use uuid::Uuid;

#[derive(Debug)]
struct Entry {
    monitor: Arc<AssignedMonitor>,
    next_due: Instant,
    running: bool,
}

#[derive(Debug, Default)]
pub struct Scheduler {
    heap: BinaryHeap<Reverse<(Instant, Uuid)>>,
    entries: HashMap<Uuid, Entry>,
}

/// A stable offset in `[0, interval)` from the monitor id, so that monitors added together
/// spread their first runs over their interval instead of firing in one burst.
pub fn phase(id: Uuid, interval: Duration) -> Duration {
    let interval_ms = interval.as_millis().max(1) as u64;
    let (high, low) = id.as_u64_pair();
    Duration::from_millis((high ^ low.rotate_left(17)) % interval_ms)
}

impl Scheduler {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn contains(&self, id: Uuid) -> bool {
        self.entries.contains_key(&id)
    }

    /// Adds a monitor, or updates one. A new monitor first runs at its phase; a changed one
    /// runs at once (its operator just edited it); an unchanged one keeps its schedule.
    pub fn upsert(&mut self, monitor: AssignedMonitor, now: Instant) {
        let id = monitor.id;
        match self.entries.get_mut(&id) {
            Some(entry) if *entry.monitor == monitor => {}
            Some(entry) => {
                entry.monitor = Arc::new(monitor);
                if !entry.running {
                    entry.next_due = now;
                    self.heap.push(Reverse((now, id)));
                }
            }
            None => {
                let due = now + phase(id, Duration::from_millis(monitor.interval_ms));
                self.entries.insert(
                    id,
                    Entry {
                        monitor: Arc::new(monitor),
                        next_due: due,
                        running: false,
                    },
                );
                self.heap.push(Reverse((due, id)));
            }
        }
    }

    pub fn remove(&mut self, id: Uuid) {
        self.entries.remove(&id);
    }

    /// Makes the set exactly `monitors`.
    pub fn replace_all(&mut self, monitors: Vec<AssignedMonitor>, now: Instant) {
        let keep: std::collections::HashSet<Uuid> = monitors.iter().map(|m| m.id).collect();
        self.entries.retain(|id, _| keep.contains(id));
        for monitor in monitors {
            self.upsert(monitor, now);
        }
    }

    /// Takes every monitor due at `now` and marks it running: it is not handed out again until
    /// `complete` is called, so a monitor never runs twice at once.
    pub fn pop_due(&mut self, now: Instant) -> Vec<Arc<AssignedMonitor>> {
        let mut due = Vec::new();
        while let Some(Reverse((at, id))) = self.heap.peek().copied() {
            if at > now {
                break;
            }
            self.heap.pop();
            if let Some(entry) = self.entries.get_mut(&id) {
                if entry.next_due == at && !entry.running {
                    entry.running = true;
                    due.push(entry.monitor.clone());
                }
            }
        }
        due
    }

    /// Records that a run finished and schedules the next one `interval` later.
    pub fn complete(&mut self, id: Uuid, now: Instant) {
        if let Some(entry) = self.entries.get_mut(&id) {
            entry.running = false;
            let next = now + Duration::from_millis(entry.monitor.interval_ms);
            entry.next_due = next;
            self.heap.push(Reverse((next, id)));
        }
    }

    /// When the earliest monitor is due, if any.
    pub fn next_due(&mut self) -> Option<Instant> {
        // Drop stale heap entries so the answer is a real due time.
        while let Some(Reverse((at, id))) = self.heap.peek().copied() {
            match self.entries.get(&id) {
                Some(entry) if entry.next_due == at && !entry.running => return Some(at),
                _ => {
                    self.heap.pop();
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn monitor(interval_ms: u64) -> AssignedMonitor {
        AssignedMonitor {
            id: Uuid::new_v4(),
            name: "m".into(),
            kind: shared_proto::CheckKind::Http,
            target: "http://127.0.0.1/".into(),
            interval_ms,
            timeout_ms: 1000,
            settings: Default::default(),
            revision: 1,
        }
    }

    #[test]
    fn first_runs_spread_over_the_interval() {
        let now = Instant::now();
        let mut scheduler = Scheduler::new();
        for _ in 0..10_000 {
            scheduler.upsert(monitor(10_000), now);
        }
        // Each second of the interval holds about a tenth of the first runs.
        let per_second: Vec<usize> = (1..=10)
            .map(|second| scheduler.pop_due(now + Duration::from_secs(second)).len())
            .collect();
        assert_eq!(per_second.iter().sum::<usize>(), 10_000);
        assert!(
            per_second.iter().all(|n| (800..=1200).contains(n)),
            "{per_second:?}"
        );
    }

    #[test]
    fn a_running_monitor_is_not_handed_out_twice() {
        let now = Instant::now();
        let mut scheduler = Scheduler::new();
        let m = monitor(5_000);
        let id = m.id;
        scheduler.upsert(m, now);
        let due_at = now + Duration::from_secs(5);
        assert_eq!(scheduler.pop_due(due_at).len(), 1);
        assert!(scheduler
            .pop_due(due_at + Duration::from_secs(60))
            .is_empty());
        assert_eq!(scheduler.next_due(), None);
        scheduler.complete(id, due_at);
        assert_eq!(scheduler.next_due(), Some(due_at + Duration::from_secs(5)));
    }

    #[test]
    fn an_edited_monitor_runs_at_once_and_an_unchanged_one_keeps_its_slot() {
        let now = Instant::now();
        let mut scheduler = Scheduler::new();
        let mut m = monitor(3_600_000);
        scheduler.upsert(m.clone(), now);
        let first_due = scheduler.next_due().unwrap();
        scheduler.upsert(m.clone(), now + Duration::from_secs(1));
        assert_eq!(scheduler.next_due(), Some(first_due));
        m.target = "http://127.0.0.1/other".into();
        let edit_time = now + Duration::from_secs(2);
        scheduler.upsert(m, edit_time);
        assert_eq!(scheduler.pop_due(edit_time).len(), 1);
    }

    #[test]
    fn replace_all_removes_what_is_gone() {
        let now = Instant::now();
        let mut scheduler = Scheduler::new();
        let (a, b) = (monitor(5_000), monitor(5_000));
        scheduler.replace_all(vec![a.clone(), b.clone()], now);
        scheduler.replace_all(vec![b.clone()], now);
        assert!(!scheduler.contains(a.id));
        let due = scheduler.pop_due(now + Duration::from_secs(10));
        assert_eq!(due.iter().map(|m| m.id).collect::<Vec<_>>(), [b.id]);
    }
}
