//! Noticing that central lost uploads it acknowledged (it runs on a restored copy of its
//! database), and queueing again the delivered results kept for that
//! (`POLLER_REDELIVERY_WINDOW`). Two answers say when central's database stored this poller's
//! newest upload: the heartbeat's (`last_upload_at`) and each upload's
//! (`since_previous_upload_ms`, read before what that upload stores moves it on). The upload's
//! is what notices a restored central whose first contact is an upload: by the next heartbeat
//! its record has moved on to that upload, and the uploads it lacks are no longer told apart.
//! Owns the rule and its report; the kept rows are `store::queue`'s.

use std::sync::atomic::Ordering;

use crate::engine::runner::ResultSignal;
use crate::metrics::AgentMetrics;
use crate::store::LocalStore;

/// An upload's time from central's receipt to the agent's record of its acknowledgement, and
/// the error of putting central's time on the agent's clock, stay well within: nothing is sent
/// again while central simply has it.
pub const MARGIN_MS: i64 = 30_000;

/// Queues again the delivered results central lacks, when its newest stored upload
/// (`stored_ms`, on the agent's clock; `None`: none) is well before one the agent had
/// acknowledged before `asked_ms` (when it asked); says so in the log and the agent's errors,
/// and wakes the uploader.
pub async fn resend_if_lost(
    store: &LocalStore,
    metrics: &AgentMetrics,
    uploads: &ResultSignal,
    stored_ms: Option<i64>,
    asked_ms: i64,
) {
    match store
        .redeliver_missing(stored_ms, asked_ms, MARGIN_MS)
        .await
    {
        Ok(0) => {}
        Ok(queued) => {
            let newest = stored_ms
                .and_then(chrono::DateTime::from_timestamp_millis)
                .map_or_else(|| "none".to_string(), |at| at.to_rfc3339());
            tracing::warn!(
                queued,
                central_newest_upload = %newest,
                "central lacks uploads it acknowledged (restored from a copy?): delivered \
                 results are sent again"
            );
            metrics.report_error(format!(
                "central lacked uploads it had acknowledged (its newest stored upload: \
                 {newest}); {queued} delivered results were sent again"
            ));
            uploads.urgent.store(true, Ordering::Relaxed);
            uploads.notify.notify_one();
        }
        Err(e) => tracing::error!("cannot queue delivered results again: {e:#}"),
    }
}
