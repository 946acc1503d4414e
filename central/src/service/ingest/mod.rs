//! Result ingestion: read an upload's results one by one (a bad one named by its position),
//! keep what central keeps of each (`kept`), and store them once with what stands of them
//! (`upload`), in one transaction (`batch`). Must not: write SQL (`store::ingest_tx`).

pub mod batch;
mod kept;
mod upload;

use std::collections::HashSet;

use serde::de::{IgnoredAny, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use shared_proto::poller_api::{
    CheckResult, RejectedResult, ResultsAck, MAX_BATCH_RESULTS, MAX_RESULT_LATENCY_MS,
};
use shared_proto::ValidationError;
use uuid::Uuid;

use super::App;
use crate::domain::Poller;
use crate::service::error::{ServiceError, ServiceResult};

use batch::Ingested;
pub(super) use kept::bounded_result;
use kept::new_result;
use upload::Decision;
pub(super) use upload::{Sender, Upload};

/// Agents' clocks may run a little ahead; beyond this a timestamp is refused.
const MAX_CLOCK_SKEW_MS: i64 = 5 * 60 * 1000;

/// A batch whose results are parsed one by one, so that a bad one is named by its position.
#[derive(Debug, Deserialize)]
pub struct IncomingBatch {
    pub batch_id: Uuid,
    pub results: CappedResults,
}

/// The first `MAX_BATCH_RESULTS` results, kept raw until each is parsed on its own (so that
/// a malformed one is named by its position), and how many the upload held in all. Elements
/// past the cap are counted without being kept, so an 8 MiB body of tiny elements costs no
/// more memory than a legal batch, and the agent still learns to split (413).
#[derive(Debug, Default)]
pub struct CappedResults {
    pub kept: Vec<Box<RawValue>>,
    pub total: usize,
}

impl<'de> Deserialize<'de> for CappedResults {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Counting;
        impl<'de> Visitor<'de> for Counting {
            type Value = CappedResults;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an array of results")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<CappedResults, A::Error> {
                let mut results = CappedResults::default();
                while results.kept.len() < MAX_BATCH_RESULTS {
                    match seq.next_element::<Box<RawValue>>()? {
                        Some(raw) => results.kept.push(raw),
                        None => break,
                    }
                }
                results.total = results.kept.len();
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    results.total += 1;
                }
                Ok(results)
            }
        }
        deserializer.deserialize_seq(Counting)
    }
}

impl App {
    pub async fn ingest(&self, poller: &Poller, batch: IncomingBatch) -> ServiceResult<ResultsAck> {
        if batch.results.total > MAX_BATCH_RESULTS {
            return Err(ServiceError::TooLarge(format!(
                "`results`: a batch holds at most {MAX_BATCH_RESULTS} results, got {}; split it",
                batch.results.total
            )));
        }
        let now = self.now_ms();
        let mut ack = ResultsAck::default();
        let mut candidates = Vec::with_capacity(batch.results.kept.len());
        for (index, raw) in batch.results.kept.iter().enumerate() {
            // What the document's schema states about a result is checked for the whole batch:
            // a result that breaks it refuses the batch, naming the result, and the agent
            // splits the batch until it can hold that one result aside (uplink::upload). Rules the
            // schema cannot state (a clock ahead of central's) refuse only their result.
            let result =
                shared_proto::lenient::from_str::<CheckResult>(raw.get()).map_err(|e| {
                    ValidationError::new(
                        format!("results[{index}]"),
                        format!("is not a result ({e}); nothing of this batch was stored"),
                    )
                })?;
            if let Some(latency) = result.latency_ms.filter(|l| *l > MAX_RESULT_LATENCY_MS) {
                return Err(ValidationError::new(
                    format!("results[{index}].latency_ms"),
                    format!(
                        "{latency} is beyond any check's timeout (at most \
                         {MAX_RESULT_LATENCY_MS}); nothing of this batch was stored"
                    ),
                )
                .into());
            }
            if result.ts.timestamp_millis() > now + MAX_CLOCK_SKEW_MS {
                ack.rejected.push(RejectedResult {
                    id: result.id.to_string(),
                    reason: "ts is more than 5 minutes in the future; check the poller's clock"
                        .into(),
                });
                continue;
            }
            candidates.push(result);
        }

        // The same id twice in one upload is one result (the second a duplicate), as it is
        // across uploads.
        let mut seen = HashSet::with_capacity(candidates.len());
        let mut repeated = 0u64;
        let mut results = Vec::with_capacity(candidates.len());
        for result in candidates {
            if seen.insert(result.id) {
                results.push(new_result(result, None));
            } else {
                repeated += 1;
            }
        }
        let upload = Upload::new(
            &poller.id,
            poller.region.as_deref(),
            results,
            Sender::Poller,
            now,
        );
        let (ingested, decision) = self.store_upload(&upload).await?;
        let stored = ingested.stored.len();
        ack.accepted = stored as u64;
        ack.since_previous_upload_ms = ingested
            .previous_upload_at
            .map(|previous| previous.map(|at| now.saturating_sub(at).max(0) as u64));
        ack.duplicates = (decision.results.len() - stored) as u64 + repeated;
        ack.rejected.extend(decision.rejected);
        self.metrics.results_accepted.inc_by(ack.accepted);
        self.metrics.results_duplicate.inc_by(ack.duplicates);
        self.metrics
            .results_rejected
            .inc_by(ack.rejected.len() as u64);
        if !ack.rejected.is_empty() {
            tracing::warn!(poller_id = %poller.id, batch_id = %batch.batch_id, rejected = ack.rejected.len(),
                first_reason = %ack.rejected[0].reason, "results rejected");
        }
        Ok(ack)
    }

    /// Stores an upload (a poller's, or central's own results for heartbeat monitors): what
    /// stands of it, with the rules of its monitors, in one transaction with the placements
    /// and maintenance windows it is decided by (`Upload`).
    pub(super) async fn store_upload(
        &self,
        upload: &Upload<'_>,
    ) -> ServiceResult<(Ingested, Decision)> {
        let (ingested, decision) = self
            .store
            .ingest(upload.poller_id, upload.now, upload)
            .await?;
        if ingested.marked || ingested.dependency_notices {
            // Monitors were marked due with them, or dependencies changed that call for a
            // notice: alerting looks now, not at its tick.
            self.cluster.wakes.alerting.notify_one();
        }
        Ok((ingested, decision))
    }
}
