//! What replicas share besides the database, and how they take turns: the duties lease
//! (`lease`), wake-ups within and across replicas (`wakeups`), the assignment versions each
//! knows and whom they concern (`versions`), doorbells for operators' commands (`bells`),
//! and the instants the lease holder's duties tell
//! the rules (`Cluster`). It holds no rule: `service` reads these, `duties` keeps them current.

pub mod bells;
pub mod lease;
pub mod versions;
pub mod wakeups;

use std::sync::atomic::{AtomicI64, Ordering};

/// This replica's share of the cluster's state.
pub struct Cluster {
    /// The assignment versions this replica knows of, and whom they concern; long polls
    /// wait on them.
    pub versions: versions::Versions,
    /// Wakes the background work that follows what this replica just wrote.
    pub wakes: wakeups::Wakes,
    /// Tells long polls of commands for their poller, and operators of answers.
    pub bells: bells::Bells,
    /// See `watching_since`; kept current by `lease` from the duties lease, and this
    /// process's start until it first looks.
    watching_since: AtomicI64,
    /// See `placement_checked_at`; kept current by `duties::liveness` on the lease holder.
    placement_checked_at: AtomicI64,
}

impl Cluster {
    /// At `version` of the assignments, with this process started at `started_at`.
    pub fn new(version: i64, never_issued: Vec<(i64, i64)>, started_at: i64) -> Cluster {
        Cluster {
            versions: versions::Versions::new(version, never_issued),
            wakes: wakeups::Wakes::default(),
            bells: bells::Bells::default(),
            watching_since: AtomicI64::new(started_at),
            placement_checked_at: AtomicI64::new(0),
        }
    }

    /// Since when central (some replica) has been up without interruption: pollers could not
    /// reach it before, so their silence counts from here at the earliest.
    pub fn watching_since(&self) -> i64 {
        self.watching_since.load(Ordering::Relaxed)
    }

    pub(crate) fn set_watching_since(&self, since: i64) {
        self.watching_since.store(since, Ordering::Relaxed);
    }

    /// The pollers' liveness as of this time is reflected in placement: every monitor that
    /// could fail over from a poller offline by then has been moved (`duties::liveness`).
    /// Alerting waits for it before telling that a monitor is stale because its poller is
    /// offline.
    pub fn placement_checked_at(&self) -> i64 {
        self.placement_checked_at.load(Ordering::Relaxed)
    }

    pub(crate) fn set_placement_checked_at(&self, at: i64) {
        self.placement_checked_at.store(at, Ordering::Relaxed);
    }
}
