//! Periodic upkeep: picking up signing keys rotated elsewhere (every minute), compacting the
//! assignment log and pruning engine events and status changes older than 30 days (every
//! hour). Owns no state.

use std::sync::Arc;
use std::time::Duration;

use crate::service::App;

pub fn spawn(app: Arc<App>) {
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(Duration::from_secs(60));
        let mut minutes = 0u64;
        loop {
            ticker.tick().await;
            if let Err(e) = app.reload_signing_keys().await {
                tracing::warn!("reloading signing keys failed: {e:#}");
            }
            if minutes.is_multiple_of(60) {
                if let Err(e) = app.compact_assignment_log().await {
                    tracing::warn!("assignment log compaction failed: {e}");
                }
                if let Err(e) = app.prune_history().await {
                    tracing::warn!("pruning old events failed: {e}");
                }
            }
            minutes += 1;
        }
    });
}
