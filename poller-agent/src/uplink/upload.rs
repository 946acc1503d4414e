//! Result upload: drains the queue in batches of `POLLER_BATCH_SIZE`, whenever that many are
//! waiting, a result that changes its monitor's status was queued (told at once, not up to a
//! batch interval late), or every `POLLER_BATCH_INTERVAL`. Each batch is mostly the oldest results (a backlog
//! drains in order) plus a tenth of the newest (the status view stays fresh meanwhile). A
//! result leaves the queue only once central has stored it (or had it already). A result
//! central refuses (named in its answer, or alone in a batch refused for one of its results,
//! which the uploader halves until that result is alone) is held with central's reason and
//! offered again every `POLLER_REFUSED_RETRY`: a refusal can end (the monitor restored, central
//! upgraded to a version that reads the result), and a result deleted for it would be lost.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use shared_proto::poller_api::{RejectedResult, ResultsBatch};
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
    /// How long a refused result waits before it is offered again.
    pub refused_retry: Duration,
    /// How long a delivered result is kept to be sent again to a restored central
    /// (`POLLER_REDELIVERY_WINDOW`; zero: not kept).
    pub redelivery_window: Duration,
    pub results: Arc<ResultSignal>,
}

/// What a handing-over agent's uploader waits for and tells (`crate::handover`).
pub struct HandOver {
    /// Set when the agent hands over.
    pub asked: watch::Receiver<bool>,
    /// Notified when the queue writer has written the last results (the checks under way).
    pub queue_written: Arc<tokio::sync::Notify>,
    /// Notified by the uploader once it has uploaded what it could.
    pub uploaded: Arc<tokio::sync::Notify>,
}

impl Uploader {
    pub async fn run(self, shutdown: watch::Receiver<bool>) {
        let (_never, asked) = watch::channel(false);
        let hand_over = HandOver {
            asked,
            queue_written: Default::default(),
            uploaded: Default::default(),
        };
        self.run_until_handover(shutdown, hand_over).await
    }

    /// `run`, and on a hand-over: once the queue holds the last results, one more upload of
    /// everything queued (for at most `handover::FINAL_UPLOAD`; what is left stays queued for
    /// the successor), then `uploaded` and return.
    pub async fn run_until_handover(
        self,
        mut shutdown: watch::Receiver<bool>,
        mut hand_over: HandOver,
    ) {
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
                        if self.results.urgent.swap(false, Ordering::Relaxed)
                            || self.results.produced_since_upload.load(Ordering::Relaxed) >= u64::from(self.batch_size)
                        {
                            break;
                        }
                    }
                    _ = shutdown.changed() => return,
                    Ok(()) = hand_over.asked.changed() => {
                        tokio::select! {
                            _ = hand_over.queue_written.notified() => {}
                            _ = shutdown.changed() => return,
                        }
                        let uploading = tokio::time::timeout(
                            crate::handover::FINAL_UPLOAD,
                            self.drain(),
                        );
                        if !matches!(uploading.await, Ok(Ok(()))) {
                            tracing::warn!(
                                "handing over: results left in the queue for the next agent"
                            );
                        }
                        hand_over.uploaded.notify_one();
                        return;
                    }
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
            // Refused before: offered again, not news (told once, when first refused).
            let refused_before: std::collections::HashSet<Uuid> = queued
                .iter()
                .filter(|q| q.refused)
                .map(|q| q.result.id)
                .collect();
            let batch = ResultsBatch {
                batch_id: Uuid::new_v4(),
                results: queued.into_iter().map(|q| q.result).collect(),
            };
            let sent_ms = chrono::Utc::now().timestamp_millis();
            match self.client.upload(&batch).await {
                Ok(ack) => {
                    let Some(refused) = named_refusals(&ack.rejected, &ids) else {
                        // An answer that does not say which results it refused: keep them all.
                        tracing::error!("central's answer names refused results this batch does not hold; keeping the batch");
                        let retry_at = now + retry_delay(1).as_millis() as i64;
                        let _ = self.store.defer(ids, retry_at).await;
                        return Err(());
                    };
                    for (id, reason) in &refused {
                        tracing::warn!(result_id = %id, %reason, "central refused a result; keeping it to offer again");
                    }
                    self.metrics
                        .results_uploaded
                        .inc_by(ack.accepted + ack.duplicates);
                    self.metrics.results_rejected.inc_by(refused.len() as u64);
                    let news: Vec<&(Uuid, String)> = refused
                        .iter()
                        .filter(|(id, _)| !refused_before.contains(id))
                        .collect();
                    if let Some((_, reason)) = news.first() {
                        self.metrics.report_error(format!(
                            "central refused {} results: {reason}",
                            news.len()
                        ));
                    }
                    let delivered: Vec<Uuid> = ids
                        .into_iter()
                        .filter(|id| !refused.iter().any(|(r, _)| r == id))
                        .collect();
                    if let Err(e) = self.hold(refused, now).await {
                        tracing::error!("cannot keep refused results aside: {e:#}");
                        return Err(());
                    }
                    let kept_at = (!self.redelivery_window.is_zero())
                        .then(|| chrono::Utc::now().timestamp_millis());
                    if let Err(e) = self.store.acknowledge(delivered, kept_at).await {
                        // They will be uploaded again and counted as duplicates: nothing is lost.
                        tracing::error!("cannot remove delivered results from the queue: {e:#}");
                        return Err(());
                    }
                    let at = chrono::Utc::now();
                    let _ = self.store.set_state(LAST_UPLOAD_AT, at.to_rfc3339()).await;
                    self.metrics.update_state(|s| s.last_upload_at = Some(at));
                    // When central's database had stored the upload before this one: before
                    // the one it says (on the agent's clock, from when this one was sent).
                    if let Some(since) = ack.since_previous_upload_ms {
                        let stored = since.map(|ms| {
                            sent_ms.saturating_sub(i64::try_from(ms).unwrap_or(i64::MAX))
                        });
                        super::redelivery::resend_if_lost(
                            &self.store,
                            &self.metrics,
                            &self.results,
                            stored,
                            sent_ms,
                        )
                        .await;
                    }
                    if batch.results.len() < size as usize {
                        return Ok(());
                    }
                }
                Err(UplinkError::Refused {
                    status, message, ..
                }) if refusal(status, &message, ids.len()) != Refusal::Retry => {
                    if refusal(status, &message, ids.len()) == Refusal::Split {
                        size = (ids.len() as u32 / 2).max(1);
                        tracing::warn!(size, "central refused the batch for one of its results ({message}); retrying smaller batches");
                    } else {
                        // This result alone is refused. It must not block the rest, and it
                        // is kept: the central that refuses it may be older than this agent.
                        tracing::warn!(result_id = %ids[0], "central refuses this result ({message}); keeping it to offer again");
                        self.metrics.results_rejected.inc();
                        if !refused_before.contains(&ids[0]) {
                            self.metrics
                                .report_error(format!("central refused a result: {message}"));
                        }
                        if let Err(e) = self.hold(vec![(ids[0], message)], now).await {
                            tracing::error!("cannot keep a refused result aside: {e:#}");
                            return Err(());
                        }
                        // The others of the halves go on in full batches.
                        size = self.batch_size;
                    }
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

impl Uploader {
    /// Keeps refused results aside until `POLLER_REFUSED_RETRY` from `now` (at least a
    /// second, so that a refusal never becomes a tight loop).
    async fn hold(&self, refused: Vec<(Uuid, String)>, now: i64) -> anyhow::Result<()> {
        if refused.is_empty() {
            return Ok(());
        }
        let wait = self.refused_retry.max(Duration::from_secs(1));
        let retry_at = now.saturating_add(wait.as_millis() as i64);
        self.store.hold(refused, retry_at).await
    }
}

/// The results of the batch `ids` that central's answer refused, with its reasons. Central
/// names each by its id, or by `#<position>` when it could not read one; `None` when the
/// answer names one the batch does not hold (nothing is then taken as delivered).
fn named_refusals(rejected: &[RejectedResult], ids: &[Uuid]) -> Option<Vec<(Uuid, String)>> {
    rejected
        .iter()
        .map(|r| {
            let id = match r.id.strip_prefix('#') {
                Some(position) => *ids.get(position.parse::<usize>().ok()?)?,
                None => Uuid::try_parse(&r.id).ok().filter(|id| ids.contains(id))?,
            };
            Some((id, r.reason.clone()))
        })
        .collect()
}

/// What a refusal of a whole batch asks of the uploader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    /// Upload halves: the refusal is about one result (too large, or not well formed), and
    /// a smaller batch delivers the others.
    Split,
    /// Hold the batch's only result aside: central does not take it now.
    Hold,
    /// Keep the results and try again later: the refusal is not about a result.
    Retry,
}

/// Central answers `413` for a batch too large, and `400` naming `results[i]` for a result
/// its schema refuses; anything else leaves the results queued, so that a central that
/// refuses everything (a bug, a version it does not know) cannot make the agent drop them.
fn refusal(status: u16, message: &str, batch_len: usize) -> Refusal {
    let about_a_result = status == 413 || (status == 400 && message.contains("`results["));
    match (about_a_result, batch_len) {
        (false, _) | (_, 0) => Refusal::Retry,
        (true, 1) => Refusal::Hold,
        (true, _) => Refusal::Split,
    }
}

#[cfg(test)]
mod tests {
    use super::{refusal, Refusal};

    #[test]
    fn a_refused_result_is_found_by_halving_and_held_alone() {
        let named = "`results[3]` is not a result (missing field `ts`)";
        assert_eq!(refusal(400, named, 8), Refusal::Split);
        assert_eq!(
            refusal(400, "`results[0].latency_ms` 9 is beyond", 1),
            Refusal::Hold
        );
        assert_eq!(refusal(413, "over 5,000 results", 8), Refusal::Split);
        assert_eq!(refusal(413, "body over the limit", 1), Refusal::Hold);
    }

    #[test]
    fn other_refusals_keep_the_results() {
        // Not about one result: a central that refuses every batch must not empty the queue.
        assert_eq!(refusal(400, "`batch_id` is not a UUID", 1), Refusal::Retry);
        assert_eq!(refusal(400, "`results[0]` …", 0), Refusal::Retry);
        assert_eq!(refusal(415, "send application/json", 1), Refusal::Retry);
        assert_eq!(refusal(422, "`results[0]` …", 1), Refusal::Retry);
    }

    #[test]
    fn a_refusal_is_taken_only_for_a_result_of_the_batch() {
        use super::named_refusals;
        use shared_proto::poller_api::RejectedResult;
        use uuid::Uuid;
        let ids = [Uuid::new_v4(), Uuid::new_v4()];
        let refusal = |id: String| RejectedResult {
            id,
            reason: "no".into(),
        };
        assert_eq!(
            named_refusals(&[refusal(ids[1].to_string()), refusal("#0".into())], &ids),
            Some(vec![(ids[1], "no".into()), (ids[0], "no".into())])
        );
        // A stranger or a position past the batch: nothing is taken as delivered.
        assert_eq!(
            named_refusals(&[refusal(Uuid::new_v4().to_string())], &ids),
            None
        );
        assert_eq!(named_refusals(&[refusal("#2".into())], &ids), None);
        assert_eq!(named_refusals(&[refusal("garbled".into())], &ids), None);
    }
}
