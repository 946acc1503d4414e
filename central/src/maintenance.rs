//! Periodic upkeep: picking up signing keys rotated elsewhere (every minute, on every replica),
//! compacting the assignment log and pruning engine events and status changes older than 30
//! days (every hour, on the replica that holds the duties lease, and at once when a replica
//! takes it). Owns no state beyond when it last did the hourly work.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::leadership::Leadership;
use crate::service::App;

pub fn spawn(app: Arc<App>, leadership: Leadership) {
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(Duration::from_secs(60));
        let mut hourly_done_at: Option<Instant> = None;
        loop {
            ticker.tick().await;
            if let Err(e) = app.reload_signing_keys().await {
                tracing::warn!("reloading signing keys failed: {e:#}");
            }
            if !leadership.is_leader() {
                hourly_done_at = None;
                continue;
            }
            if hourly_done_at.is_some_and(|at| at.elapsed() < Duration::from_secs(3600)) {
                continue;
            }
            if let Err(e) = app.compact_assignment_log().await {
                tracing::warn!("assignment log compaction failed: {e}");
            }
            if let Err(e) = app.prune_history().await {
                tracing::warn!("pruning old events failed: {e}");
            }
            hourly_done_at = Some(Instant::now());
        }
    });
}
