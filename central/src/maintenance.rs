//! Periodic upkeep: picking up signing keys rotated elsewhere (every minute, on every replica),
//! compacting the assignment log, pruning engine events and status changes older than 30
//! days, and pruning results and rollups past their retention (every hour, on the replica that holds the duties lease, and at once when a replica
//! takes it). Owns no state beyond when it last did the hourly work.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::leadership::Leadership;
use crate::service::App;

/// How often the loop looks whether it leads (so a new leader starts its hourly work within
/// seconds, not a minute).
const LOOK_EVERY: Duration = Duration::from_secs(5);
const RELOAD_KEYS_EVERY: Duration = Duration::from_secs(60);
const HOURLY: Duration = Duration::from_secs(3600);

pub async fn run(app: Arc<App>, leadership: Leadership) {
    let mut ticker = tokio::time::interval(LOOK_EVERY);
    let mut keys_loaded_at = Instant::now();
    let mut hourly_done_at: Option<Instant> = None;
    loop {
        ticker.tick().await;
        if keys_loaded_at.elapsed() >= RELOAD_KEYS_EVERY {
            if let Err(e) = app.reload_signing_keys().await {
                tracing::warn!("reloading signing keys failed: {e:#}");
            }
            keys_loaded_at = Instant::now();
        }
        if !leadership.is_leader() {
            hourly_done_at = None;
            continue;
        }
        if hourly_done_at.is_some_and(|at| at.elapsed() < HOURLY) {
            continue;
        }
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
        hourly_done_at = Some(Instant::now());
    }
}
