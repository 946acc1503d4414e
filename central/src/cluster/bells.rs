//! Doorbells for operators' commands (`service::commands`): a poller's long poll learns that
//! a command may be waiting for it, and an operator's request waiting for answers learns
//! that some command was answered. Rung by this replica's own writes and, through `wakeups`,
//! by the others'. A long poll reads its poller's open commands only when its bell rang
//! since it last found none, so an idle poller costs no read. It holds no command itself.
//!
//! Memory: two counters per poller that ever had a command (or long-polled after a
//! ring-everyone).

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::watch;

pub struct Bells {
    rings: Mutex<Rings>,
    /// Wakes every waiting long poll when any poller's bell rings; each then asks `unread`.
    rung: watch::Sender<u64>,
    /// Wakes every operator's request waiting for answers when any command is answered.
    answered: watch::Sender<u64>,
}

struct Rings {
    /// Counts rings; a ring's number orders it against reads.
    generation: u64,
    /// Rings at or below this may concern any poller (at start: commands issued before this
    /// process began; after the listener lost announcements: those it missed).
    everyone: u64,
    /// Per poller: the latest ring for it, and the generation its last empty read covered.
    rung: HashMap<String, u64>,
    read: HashMap<String, u64>,
}

impl Default for Bells {
    fn default() -> Self {
        Bells {
            // Every poller reads once after a start: commands may be waiting from before.
            rings: Mutex::new(Rings {
                generation: 1,
                everyone: 1,
                rung: HashMap::new(),
                read: HashMap::new(),
            }),
            rung: watch::Sender::new(1),
            answered: watch::Sender::new(0),
        }
    }
}

impl Bells {
    fn rings(&self) -> std::sync::MutexGuard<'_, Rings> {
        self.rings.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A command for `poller` was issued (here, or on another replica).
    pub fn ring(&self, poller: &str) {
        let generation = {
            let mut rings = self.rings();
            rings.generation += 1;
            let generation = rings.generation;
            rings.rung.insert(poller.to_string(), generation);
            generation
        };
        self.rung.send_replace(generation);
    }

    /// Commands may have been issued for anyone (announcements were lost).
    pub fn ring_everyone(&self) {
        let generation = {
            let mut rings = self.rings();
            rings.generation += 1;
            rings.everyone = rings.generation;
            rings.generation
        };
        self.rung.send_replace(generation);
    }

    /// Subscribe before asking `unread`, so that a ring in between is not missed.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.rung.subscribe()
    }

    /// `Some(generation)` when a command may be waiting for `poller` that no read found
    /// yet; pass the generation to `read_up_to` once a read finds none open.
    pub fn unread(&self, poller: &str) -> Option<u64> {
        let rings = self.rings();
        let rung = rings
            .rung
            .get(poller)
            .copied()
            .unwrap_or(0)
            .max(rings.everyone);
        let read = rings.read.get(poller).copied().unwrap_or(0);
        (rung > read).then_some(rings.generation)
    }

    /// A read at `generation` found no open command for `poller`.
    pub fn read_up_to(&self, poller: &str, generation: u64) {
        let mut rings = self.rings();
        let read = rings.read.entry(poller.to_string()).or_insert(0);
        *read = (*read).max(generation);
    }

    /// A command was answered (here, or on another replica).
    pub fn ring_answered(&self) {
        self.answered.send_modify(|n| *n += 1);
    }

    pub fn subscribe_answered(&self) -> watch::Receiver<u64> {
        self.answered.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poller_reads_after_a_ring_for_it_until_a_read_finds_nothing() {
        let bells = Bells::default();
        let first = bells
            .unread("a")
            .expect("after a start, everyone reads once");
        bells.read_up_to("a", first);
        assert_eq!(bells.unread("a"), None);
        bells.ring("b");
        assert_eq!(bells.unread("a"), None, "b's bell is not a's");
        let mut waiting = bells.subscribe();
        waiting.borrow_and_update();
        bells.ring("a");
        assert!(waiting.has_changed().unwrap());
        let at = bells.unread("a").expect("rung");
        // A read that still found an open command does not mark: the next poll reads again.
        assert!(bells.unread("a").is_some());
        bells.read_up_to("a", at);
        assert_eq!(bells.unread("a"), None);
    }

    #[test]
    fn a_ring_during_a_read_is_not_lost() {
        let bells = Bells::default();
        let at = bells.unread("a").unwrap();
        bells.ring("a"); // issued while the read ran, after its query
        bells.read_up_to("a", at);
        assert!(
            bells.unread("a").is_some(),
            "the later ring is still unread"
        );
        bells.ring_everyone();
        let at = bells.unread("a").unwrap();
        bells.read_up_to("a", at);
        assert_eq!(bells.unread("a"), None);
        bells.ring_everyone();
        assert!(bells.unread("c").is_some());
    }
}
