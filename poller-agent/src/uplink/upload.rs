//! Result upload: drains the queue oldest first, in batches of `POLLER_BATCH_SIZE`, whenever
//! that many are waiting or every `POLLER_BATCH_INTERVAL`. A result leaves the queue only once
//! central has answered for it (stored, already stored, or refused as invalid).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use shared_proto::poller_api::ResultsBatch;
use tokio::sync::watch;
use uuid::Uuid;

use super::sync::log_uplink_error;
use super::{retry_delay, CentralClient};
use crate::engine::runner::ResultSignal;
use crate::metrics::AgentMetrics;
use crate::store::LocalStore;

pub struct Uploader {
    pub client: Arc<CentralClient>,
    pub store: LocalStore,
    pub metrics: Arc<AgentMetrics>,
    pub batch_size: u32,
    pub batch_interval: Duration,
    pub results: Arc<ResultSignal>,
}

impl Uploader {
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        let mut failures = 0u32;
        loop {
            let wait = if failures == 0 {
                self.batch_interval
            } else {
                retry_delay(failures)
            };
            let deadline = tokio::time::sleep(wait);
            tokio::pin!(deadline);
            loop {
                tokio::select! {
                    _ = &mut deadline => break,
                    _ = self.results.notify.notified(), if failures == 0 => {
                        if self.results.produced_since_upload.load(Ordering::Relaxed) >= u64::from(self.batch_size) {
                            break;
                        }
                    }
                    _ = shutdown.changed() => return,
                }
            }
            match self.drain().await {
                Ok(()) => failures = 0,
                Err(()) => failures += 1,
            }
        }
    }

    /// Uploads until the queue holds nothing due; `Err` after a failed attempt.
    async fn drain(&self) -> Result<(), ()> {
        loop {
            let now = chrono::Utc::now().timestamp_millis();
            let queued = match self.store.next_batch(self.batch_size, now).await {
                Ok(queued) => queued,
                Err(e) => {
                    tracing::error!("cannot read the result queue: {e:#}");
                    return Err(());
                }
            };
            if queued.is_empty() {
                return Ok(());
            }
            self.results
                .produced_since_upload
                .store(0, Ordering::Relaxed);
            let ids: Vec<Uuid> = queued.iter().map(|q| q.result.id).collect();
            let batch = ResultsBatch {
                batch_id: Uuid::new_v4(),
                results: queued.into_iter().map(|q| q.result).collect(),
            };
            match self.client.upload(&batch).await {
                Ok(ack) => {
                    for rejected in &ack.rejected {
                        tracing::warn!(result_id = %rejected.id, reason = %rejected.reason, "central refused a result; dropping it");
                    }
                    self.metrics
                        .results_uploaded
                        .inc_by(ack.accepted + ack.duplicates);
                    self.metrics
                        .results_rejected
                        .inc_by(ack.rejected.len() as u64);
                    if let Err(e) = self.store.acknowledge(ids).await {
                        // They will be uploaded again and counted as duplicates: nothing is lost.
                        tracing::error!("cannot remove delivered results from the queue: {e:#}");
                        return Err(());
                    }
                    self.metrics
                        .update_state(|s| s.last_upload_at = Some(chrono::Utc::now()));
                    if batch.results.len() < self.batch_size as usize {
                        return Ok(());
                    }
                }
                Err(e) => {
                    self.metrics.upload_failures.inc();
                    log_uplink_error("upload", &e);
                    let retry_at = now + retry_delay(1).as_millis() as i64;
                    if let Err(e) = self.store.defer(ids, retry_at).await {
                        tracing::error!("cannot record the failed upload: {e:#}");
                    }
                    return Err(());
                }
            }
        }
    }
}
