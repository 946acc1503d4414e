//! Result upload: drains the queue in batches of `POLLER_BATCH_SIZE`, whenever that many are
//! waiting or every `POLLER_BATCH_INTERVAL`. Each batch is mostly the oldest results (a backlog
//! drains in order) plus a tenth of the newest (the status view stays fresh meanwhile). A
//! result leaves the queue only once central has answered for it (stored, already stored, or
//! refused as invalid).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use shared_proto::poller_api::ResultsBatch;
use tokio::sync::watch;
use uuid::Uuid;

use super::sync::log_uplink_error;
use super::{retry_delay, CentralClient, UplinkError};
use crate::engine::runner::ResultSignal;
use crate::metrics::AgentMetrics;
use crate::store::{LocalStore, LAST_UPLOAD_AT};

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
        let mut size = self.batch_size;
        loop {
            let now = chrono::Utc::now().timestamp_millis();
            let fresh = (size / 10).max(1);
            let queued = match self.store.next_batch_with_newest(size, fresh, now).await {
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
                    let at = chrono::Utc::now();
                    let _ = self.store.set_state(LAST_UPLOAD_AT, at.to_rfc3339()).await;
                    self.metrics.update_state(|s| s.last_upload_at = Some(at));
                    if batch.results.len() < size as usize {
                        return Ok(());
                    }
                }
                Err(UplinkError::Refused { status: 413, .. }) if size > 1 => {
                    size = (size / 2).max(1);
                    tracing::warn!(
                        size,
                        "central found the batch too large; retrying smaller batches"
                    );
                }
                Err(UplinkError::Refused {
                    status: 413,
                    message,
                    ..
                }) => {
                    // One result alone is too large: it can never be delivered, and must not
                    // block the rest.
                    tracing::error!(result_id = %ids[0], "central refuses this result as too large ({message}); dropping it");
                    let _ = self.store.acknowledge(ids).await;
                    self.metrics.results_dropped.inc();
                    let _ = self.store.add_dropped(1).await;
                }
                Err(e) => {
                    self.metrics.upload_failures.inc();
                    log_uplink_error("upload", &e);
                    // Unreachable central is not news to central; a refusal is.
                    if !matches!(e, UplinkError::Unreachable(_)) {
                        self.metrics.report_error(format!("upload failed: {e}"));
                    }
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
