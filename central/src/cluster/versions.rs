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
}

struct Concerns {
    /// Versions up to this one may concern any poller: their pollers are not known here.
    everyone: i64,
    /// Per poller, the newest version known to change what it runs.
    pollers: HashMap<String, i64>,
}

impl Versions {
    /// Starts at `version`, which (like every earlier one) may concern anyone.
    pub fn new(version: i64) -> Self {
        Versions {
            newest: watch::Sender::new(version),
            concerns: Mutex::new(Concerns {
                everyone: version,
                pollers: HashMap::new(),
            }),
        }
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
        let versions = Versions::new(10);
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
        let versions = Versions::new(1);
        versions.publish(3, ["a"]);
        let mut waiting = versions.subscribe();
        waiting.borrow_and_update();
        versions.publish(2, ["b"]);
        assert!(waiting.has_changed().unwrap(), "the waiter for b wakes");
        assert_eq!(versions.newest(), 3, "the newest stays");
        assert_eq!(versions.last_change_for("b"), 2);
        assert_eq!(versions.last_change_for("a"), 3);
    }
}
