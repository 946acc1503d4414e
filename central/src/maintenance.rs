//! Periodic upkeep: compacting the assignment log. Owns no state.

use std::sync::Arc;
use std::time::Duration;

use crate::service::App;

pub fn spawn(app: Arc<App>) {
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(Duration::from_secs(3600));
        loop {
            ticker.tick().await;
            if let Err(e) = app.compact_assignment_log().await {
                tracing::warn!("assignment log compaction failed: {e}");
            }
        }
    });
}
