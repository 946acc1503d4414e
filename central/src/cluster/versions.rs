//! Assignment versions as this replica knows them: the newest one, and for each poller the
//! newest one that changed what it runs. A long poll waits on the newest version and reads
//! the database only when its own poller's changed, so a write that concerns one poller
//! costs one read, not one per waiting poller (issue 22: 200 pollers each read the log on
//! every monitor created anywhere).
//!
//! It learns versions from this replica's writes (with the pollers they logged a change for)
//! and, through `wakeups`, from the others'. A version learnt without its pollers (at start,
//! or after the listener lost announcements) concerns everyone. It decides nothing about
//! placement and reads nothing itself. Memory: one entry per poller ever concerned.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::watch;

pub struct Versions {
    newest: watch::Sender<i64>,
    concerns: Mutex<Concerns>,
    /// Ranges of versions this database never issued, (after, before) with both ends
    /// excluded, as they were when this replica started (`Store::begin_assignment_versions`).
    never_issued: Vec<(i64, i64)>,
}

struct Concerns {
    /// Versions up to this one may concern any poller: their pollers are not known here.
    everyone: i64,
    /// Per poller, the newest version known to change what it runs.
    pollers: HashMap<String, i64>,
}

impl Versions {
    /// Starts at `version`, which (like every earlier one) may concern anyone, knowing the
    /// ranges of versions the database never issued.
    pub fn new(version: i64, never_issued: Vec<(i64, i64)>) -> Self {
        Versions {
            newest: watch::Sender::new(version),
            concerns: Mutex::new(Concerns {
                everyone: version,
                pollers: HashMap::new(),
            }),
            never_issued,
        }
    }

    /// Whether this database never issued `version`: an agent that has it got it from another
    /// history (the original of a restored copy) and needs its full set. A range made by a
    /// replica that started after this one is not known here; no agent of this database's
    /// history can hold a version in it, and a restored copy's agents hold versions from the
    /// range its first start made, which every replica started on it knows. Cost: the ranges
    /// (one per start of central).
    pub fn never_issued(&self, version: i64) -> bool {
        self.never_issued
            .iter()
            .any(|&(after, before)| after < version && version < before)
    }

    /// A receiver that sees the newest version and wakes on every publication: subscribe
    /// before asking `last_change_for`, so a publication in between is not missed.
    pub fn subscribe(&self) -> watch::Receiver<i64> {
        self.newest.subscribe()
    }

    pub fn newest(&self) -> i64 {
        *self.newest.borrow()
    }

    /// `version` committed, changing what `pollers` run. Versions may be published out of
    /// order (two writers finishing together): an older one still records its pollers and
    /// wakes the waiters, since one of them may have looked before it was recorded.
    pub fn publish<'a>(&self, version: i64, pollers: impl IntoIterator<Item = &'a str>) {
        let mut concerned = false;
        {
            let mut concerns = self.concerns.lock().unwrap_or_else(|p| p.into_inner());
            for poller in pollers {
                let last = concerns.pollers.entry(poller.to_string()).or_insert(0);
                *last = (*last).max(version);
                concerned = true;
            }
        }
        self.newest.send_if_modified(|newest| {
            let newer = version > *newest;
            if newer {
                *newest = version;
            }
            newer || concerned
        });
    }

    /// `version` committed and what it changed is not known here: it concerns everyone.
    pub fn publish_to_everyone(&self, version: i64) {
        {
            let mut concerns = self.concerns.lock().unwrap_or_else(|p| p.into_inner());
            concerns.everyone = concerns.everyone.max(version);
        }
        self.newest.send_if_modified(|newest| {
            let newer = version > *newest;
            if newer {
                *newest = version;
            }
            // Everyone may have something new even when the number is not.
            true
        });
    }

    /// The newest version that may have changed what `poller` runs.
    pub fn last_change_for(&self, poller: &str) -> i64 {
        let concerns = self.concerns.lock().unwrap_or_else(|p| p.into_inner());
        concerns
            .pollers
            .get(poller)
            .copied()
            .unwrap_or(0)
            .max(concerns.everyone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_concerns_only_the_pollers_it_names() {
        let versions = Versions::new(10, Vec::new());
        assert_eq!(versions.last_change_for("a"), 10, "before start: anyone");
        versions.publish(11, ["a"]);
        versions.publish(12, ["b"]);
        assert_eq!(versions.newest(), 12);
        assert_eq!(versions.last_change_for("a"), 11);
        assert_eq!(versions.last_change_for("b"), 12);
        assert_eq!(versions.last_change_for("c"), 10);
        versions.publish_to_everyone(13);
        assert_eq!(versions.last_change_for("a"), 13);
    }

    #[test]
    fn an_older_version_published_late_still_counts_and_wakes() {
        let versions = Versions::new(1, Vec::new());
        versions.publish(3, ["a"]);
        let mut waiting = versions.subscribe();
        waiting.borrow_and_update();
        versions.publish(2, ["b"]);
        assert!(waiting.has_changed().unwrap(), "the waiter for b wakes");
        assert_eq!(versions.newest(), 3, "the newest stays");
        assert_eq!(versions.last_change_for("b"), 2);
        assert_eq!(versions.last_change_for("a"), 3);
    }

    #[test]
    fn a_skipped_range_excludes_both_ends() {
        let versions = Versions::new(5_000, vec![(3, 5_000)]);
        assert!(!versions.never_issued(3), "issued before the start");
        assert!(versions.never_issued(4) && versions.never_issued(4_999));
        assert!(!versions.never_issued(5_000), "the version at the start");
        assert!(!versions.never_issued(5_001));
    }
}
