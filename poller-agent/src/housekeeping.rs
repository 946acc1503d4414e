//! Keeps the queue within its retention and size limits, and forgets delivered results kept
//! for a restored central after `POLLER_REDELIVERY_WINDOW`. Whatever undelivered it drops is counted,
//! logged and reported to central in heartbeats: loss is never silent.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::metrics::AgentMetrics;
use crate::store::LocalStore;

pub struct Housekeeping {
    pub store: LocalStore,
    pub metrics: Arc<AgentMetrics>,
    pub retention: Duration,
    /// Delivered results kept for a restored central are forgotten after this.
    pub redelivery_window: Duration,
    pub max_bytes: u64,
}

impl Housekeeping {
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        let period = (self.retention / 4).clamp(Duration::from_secs(1), Duration::from_secs(60));
        let mut ticker = tokio::time::interval(period);
        loop {
            tokio::select! {
                _ = ticker.tick() => {}
                _ = shutdown.changed() => return,
            }
            if let Err(e) = self.sweep().await {
                tracing::warn!("queue housekeeping failed: {e:#}");
            }
        }
    }

    async fn sweep(&self) -> anyhow::Result<()> {
        let cutoff = chrono::Utc::now().timestamp_millis() - self.retention.as_millis() as i64;
        let expired = self.store.prune_older_than(cutoff).await?;
        if expired > 0 {
            tracing::warn!(dropped = expired, retention = ?self.retention, "undelivered results older than POLLER_RETENTION were dropped");
            self.record_dropped(expired).await?;
        }
        let now = chrono::Utc::now().timestamp_millis();
        self.store
            .forget_delivered_before(now - self.redelivery_window.as_millis() as i64)
            .await?;
        let mut used = self.store.used_bytes().await?;
        if used > self.max_bytes {
            // The copies kept for a restored central go first: they were delivered.
            let forgotten = self.store.forget_delivered_before(i64::MAX).await?;
            if forgotten > 0 {
                tracing::warn!(
                    forgotten,
                    max_bytes = self.max_bytes,
                    "queue over POLLER_QUEUE_MAX_BYTES: delivered results kept for a restored \
                     central were forgotten"
                );
                used = self.store.used_bytes().await?;
            }
        }
        if used > self.max_bytes {
            let depth = self.store.queue_stats().await?.depth;
            // Drop the oldest share that brings the queue back to 90 % of the cap.
            let share = 1.0 - (self.max_bytes as f64 * 0.9) / used as f64;
            let count = ((depth as f64 * share).ceil() as u64).max(1);
            let dropped = self.store.drop_oldest(count).await?;
            tracing::warn!(
                dropped,
                used_bytes = used,
                max_bytes = self.max_bytes,
                "queue over POLLER_QUEUE_MAX_BYTES: oldest results dropped"
            );
            self.record_dropped(dropped).await?;
        }
        Ok(())
    }

    async fn record_dropped(&self, count: u64) -> anyhow::Result<()> {
        self.metrics.results_dropped.inc_by(count);
        self.metrics.report_error(format!(
            "{count} undelivered results dropped (retention or size cap)"
        ));
        self.store.add_dropped(count).await?;
        Ok(())
    }
}
