//! The lease loop every replica runs (`cluster::lease` holds what it decides: whether this
//! replica leads, the lease's timings): whoever holds the duties lease renews it every
//! `RENEW_EVERY`, the others try to take it once it has expired. Cost: one write a tick.

use std::sync::Arc;

use tokio::time::Instant;

use crate::cluster::lease::{Leadership, CLOCK_MARGIN, LAPSE, LEASE, RENEW_EVERY, TTL};
use crate::service::App;

/// Starts the lease loop of this replica.
pub fn spawn(app: Arc<App>, holder: String) -> Leadership {
    let (tell, leadership) = Leadership::new();
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(RENEW_EVERY);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut was_leader = false;
        // Until this process's first look at the lease lands.
        let mut returning = true;
        loop {
            ticker.tick().await;
            let asked = Instant::now();
            let held = match app.take_lease(LEASE, &holder, TTL, LAPSE, returning).await {
                Ok(lease) => {
                    returning = false;
                    app.cluster.set_watching_since(lease.held_since);
                    lease.held
                }
                Err(e) => {
                    // Unknown: the write may or may not have landed. Stop leading at once; the
                    // lease itself runs out on its own if nobody renews it.
                    tracing::warn!("renewing the duties lease failed: {e:#}");
                    false
                }
            };
            tell.send_replace(held.then(|| asked + TTL - CLOCK_MARGIN));
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
    leadership
}
