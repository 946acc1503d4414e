//! Periodic upkeep. On the lease holder (`run`): compacting the assignment log, pruning engine
//! events and status changes older than 30 days, results and rollups past their retention,
//! and audit entries past `CENTRAL_AUDIT_RETENTION`, at once when a holding starts and every hour after. On every replica
//! (`follow_signing_keys`): picking up signing keys rotated elsewhere, every minute. Owns no
//! state; what it prunes is `service::retention`'s and `service::history`'s to decide.

use std::sync::Arc;
use std::time::Duration;

use crate::service::App;

const HOURLY: Duration = Duration::from_secs(3600);
const RELOAD_KEYS_EVERY: Duration = Duration::from_secs(60);

pub async fn run(app: Arc<App>) {
    let mut ticker = tokio::time::interval(HOURLY);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        // The first tick is at once.
        ticker.tick().await;
        if let Err(e) = app.compact_assignment_log().await {
            tracing::warn!("assignment log compaction failed: {e}");
        }
        if let Err(e) = app.prune_history().await {
            tracing::warn!("pruning old events failed: {e}");
        }
        match app.prune_results_and_rollups().await {
            Ok(pruned) => tracing::info!(pruned, "pruned results and rollups past retention"),
            Err(e) => tracing::warn!("pruning old results and rollups failed: {e:#}"),
        }
        match app.prune_audit().await {
            Ok(pruned) => tracing::info!(pruned, "pruned audit entries past retention"),
            Err(e) => tracing::warn!("pruning old audit entries failed: {e:#}"),
        }
    }
}

pub async fn follow_signing_keys(app: Arc<App>) {
    let mut ticker = tokio::time::interval(RELOAD_KEYS_EVERY);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The first tick is at once, and the keys were just loaded.
    ticker.tick().await;
    loop {
        ticker.tick().await;
        if let Err(e) = app.reload_signing_keys().await {
            tracing::warn!("reloading signing keys failed: {e:#}");
        }
    }
}
