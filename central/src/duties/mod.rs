//! Background work, in one place. Every replica runs a few duties of its own (the lease loop,
//! wake-ups from other replicas, following the admin token and the signing keys, flushing the
//! results head on SQLite, rendering `/metrics` ahead of a steady scraper); the replica that holds the duties lease (`cluster::lease`) runs the
//! duties that must run once at a time: `liveness` (pollers' status and placement), `alerting`
//! (looks and the outbox), notification delivery (`duties::delivery`), status pages' notices
//! to their subscribers (`page_notices`), `upkeep`
//! (compaction, pruning, folding rollups) and `sso_recheck` (linked users checked with the
//! identity provider). Those are started together when this replica takes
//! the lease and cancelled together when it loses it, so that none of them asks whether it
//! leads, and each holding starts afresh (liveness places every monitor, upkeep prunes and
//! folds at once). Every duty is supervised: one that panics is logged and started again after
//! a pause, never silently gone. This module knows nothing of what the duties do.

pub mod alerting;
pub mod delivery;
mod lease;
pub mod liveness;
pub mod metrics_ahead;
pub mod page_notices;
pub mod sso_recheck;
pub mod upkeep;
mod wakeups;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;

use crate::cluster::lease::{replica_name, Leadership};
use crate::service::{self, App};

/// The pause before a duty that panicked starts again: short enough that a lease holder's
/// duties barely pause, long enough that a duty panicking at once does not spin.
const RESTART_AFTER: Duration = Duration::from_secs(1);

/// Starts this replica's background work; `listening` names it as a lease holder.
pub fn start(app: Arc<App>, listening: SocketAddr) {
    wakeups::spawn(app.clone());
    let leadership = lease::spawn(app.clone(), replica_name(listening));
    let a = app.clone();
    tokio::spawn(supervised("admin token", move || {
        service::admin_token::follow(a.clone())
    }));
    let a = app.clone();
    tokio::spawn(supervised("signing keys", move || {
        upkeep::follow_signing_keys(a.clone())
    }));
    let a = app.clone();
    tokio::spawn(supervised("results head", move || {
        upkeep::flush_results_head(a.clone())
    }));
    let a = app.clone();
    tokio::spawn(supervised("metrics ahead", move || {
        metrics_ahead::run(a.clone())
    }));
    tokio::spawn(lead(app, leadership));
}

/// The lease holder's duties, for as long as each holding lasts.
async fn lead(app: Arc<App>, mut leadership: Leadership) {
    loop {
        leadership.gained().await;
        tracing::info!("the lease holder's duties start");
        let mut duties = JoinSet::new();
        let a = app.clone();
        duties.spawn(supervised("liveness", move || liveness::run(a.clone())));
        let a = app.clone();
        duties.spawn(supervised("alerting", move || alerting::run(a.clone())));
        let a = app.clone();
        duties.spawn(supervised("notification delivery", move || {
            delivery::run(a.clone(), a.notifier.clone())
        }));
        let a = app.clone();
        duties.spawn(supervised("status pages' notices", move || {
            page_notices::run(a.clone())
        }));
        let a = app.clone();
        duties.spawn(supervised("upkeep", move || upkeep::run(a.clone())));
        let a = app.clone();
        duties.spawn(supervised("rollup folding", move || {
            upkeep::fold_rollups(a.clone())
        }));
        let a = app.clone();
        duties.spawn(supervised("single sign-on checks", move || {
            sso_recheck::run(a.clone())
        }));
        leadership.lost().await;
        // Aborted wherever they are: a delivery under way is not recorded here, and its
        // claim keeps the next holder off the row until it expires (`duties::delivery`).
        duties.shutdown().await;
        tracing::info!("the lease holder's duties stopped: the lease was lost");
    }
}

/// Runs `start()`, and again each time it panics; returns when it returns. Dropped (the
/// lease lost, the runtime stopping), it stops the running task with it.
pub async fn supervised<F, Fut>(name: &'static str, start: F)
where
    F: Fn() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    loop {
        // A set of one: dropping it aborts the task.
        let mut running = JoinSet::new();
        running.spawn(start());
        match running.join_next().await {
            Some(Err(e)) if e.is_panic() => {
                let panic = e.into_panic();
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                tracing::error!(duty = name, panic = %what,
                    "a background duty panicked; it starts again in {RESTART_AFTER:?}");
                tokio::time::sleep(RESTART_AFTER).await;
            }
            // Returned on purpose, or cancelled with the runtime.
            _ => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    use super::*;

    #[tokio::test]
    async fn a_duty_that_panics_is_started_again() {
        let starts = Arc::new(AtomicU32::new(0));
        let counted = starts.clone();
        supervised("test", move || {
            let starts = counted.clone();
            async move {
                if starts.fetch_add(1, Ordering::SeqCst) < 2 {
                    panic!("broken round");
                }
            }
        })
        .await;
        assert_eq!(
            starts.load(Ordering::SeqCst),
            3,
            "two panics, then a clean end"
        );
    }

    #[tokio::test]
    async fn a_cancelled_supervisor_stops_its_duty() {
        let rounds = Arc::new(AtomicU32::new(0));
        let counted = rounds.clone();
        let supervisor = tokio::spawn(supervised("test", move || {
            let rounds = counted.clone();
            async move {
                loop {
                    rounds.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        }));
        tokio::time::sleep(Duration::from_millis(30)).await;
        supervisor.abort();
        let _ = supervisor.await;
        let stopped_at = rounds.load(Ordering::SeqCst);
        assert!(stopped_at > 0);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(
            rounds.load(Ordering::SeqCst),
            stopped_at,
            "the duty went on after its supervisor was cancelled"
        );
    }
}

// Test builds only; last, so that nothing after it is taken for shipped code.
#[cfg(test)]
mod alerting_model_tests;
