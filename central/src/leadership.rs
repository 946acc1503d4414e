//! Which replica runs the duties that must run once at a time (the liveness sweep with its
//! failover, log compaction, pruning): the holder of the `duties` lease in the database. Every
//! replica runs this loop; whoever holds the lease renews it, the others try to take it once
//! it has expired. It knows nothing of the duties; `liveness` and `maintenance` ask
//! [`Leadership::is_leader`] before each round.
//!
//! Lease times are the replicas' wall clocks (keep them within `CLOCK_MARGIN` with NTP): a holder
//! counts itself leader only until `TTL - CLOCK_MARGIN` after it *asked*, so a replica whose
//! clock runs ahead takes over no sooner than the holder has stopped.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::service::App;

const LEASE: &str = "duties";
/// How long a taken lease lasts without renewal: also how long duties pause when the leader
/// dies without a word (`kill -9`), before another replica takes over.
const TTL: Duration = Duration::from_secs(10);
const RENEW_EVERY: Duration = Duration::from_secs(2);
const CLOCK_MARGIN: Duration = Duration::from_secs(2);
/// A lease taken up to this long after it expired was handed over (another replica was there
/// to take it); later, central was down in between, and pollers could not report meanwhile.
const LAPSE: Duration = Duration::from_secs(5);

/// A replica's view of its own leadership; cheap to clone and to ask.
#[derive(Clone, Default)]
pub struct Leadership {
    leader_until: Arc<Mutex<Option<Instant>>>,
}

impl Leadership {
    pub fn is_leader(&self) -> bool {
        let until = *self.leader_until.lock().unwrap_or_else(|p| p.into_inner());
        until.is_some_and(|until| Instant::now() < until)
    }

    fn set(&self, until: Option<Instant>) {
        *self.leader_until.lock().unwrap_or_else(|p| p.into_inner()) = until;
    }
}

/// This replica's name as a lease holder: its host and listening address. Unique among live
/// replicas (two cannot listen on one address of one host), and the same after a restart, so a
/// replica that was killed takes its own lease back at once instead of waiting it out.
pub fn replica_name(listening: SocketAddr) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_string())
        .unwrap_or_else(|_| "localhost".into());
    format!("{host}/{listening}")
}

/// Starts the lease loop of this replica.
pub fn spawn(app: Arc<App>, holder: String) -> Leadership {
    let leadership = Leadership::default();
    let handle = leadership.clone();
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(RENEW_EVERY);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut was_leader = false;
        loop {
            ticker.tick().await;
            let asked = Instant::now();
            let held = match app.take_lease(LEASE, &holder, TTL, LAPSE).await {
                Ok(lease) => {
                    app.set_watching_since(lease.held_since);
                    lease.held
                }
                Err(e) => {
                    // Unknown: the write may or may not have landed. Stop leading at once; the
                    // lease itself runs out on its own if nobody renews it.
                    tracing::warn!("renewing the duties lease failed: {e:#}");
                    false
                }
            };
            leadership.set(held.then(|| asked + TTL - CLOCK_MARGIN));
            if held != was_leader {
                if held {
                    tracing::info!(replica = %holder, "this replica now runs the once-only duties");
                } else {
                    tracing::info!(replica = %holder, "this replica no longer runs the once-only duties");
                }
                was_leader = held;
            }
        }
    });
    handle
}
