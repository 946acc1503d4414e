//! Agent queue benchmark: results committed to the SQLite queue and then acknowledged (read
//! in upload batches and deleted), as the queue writer and uploader do, on one core.
//!
//! cargo bench -p poller-agent --bench queue -- [results] [write batch] [upload batch] [keep|drop]
//!
//! `keep` (the agent's default): acknowledged results move to `poller_delivered` for a restored
//! central (`POLLER_REDELIVERY_WINDOW`); `drop`: they are deleted (a window of `0s`).

use std::time::Instant;

use poller_agent::store::LocalStore;
use shared_proto::poller_api::{CheckResult, ResultStatus};
use uuid::Uuid;

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let total: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let write_batch: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100);
    let upload_batch: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(500);
    let keep = args.next().is_none_or(|a| a != "drop");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(1)
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = LocalStore::open(dir.path()).expect("store");
        let monitors: Vec<Uuid> = (0..1000).map(|_| Uuid::new_v4()).collect();
        let result = |i: usize| CheckResult {
            id: Uuid::new_v4(),
            monitor_id: monitors[i % monitors.len()],
            ts: chrono::Utc::now(),
            status: if i.is_multiple_of(10) { ResultStatus::Down } else { ResultStatus::Up },
            latency_ms: Some(12),
            msg: if i.is_multiple_of(10) { "expected 2xx, got 503".into() } else { String::new() },
            meta: serde_json::json!({"status_code": 200, "first_byte_ms": 11, "engine": {"breaker": "closed"}}),
        };

        let started = Instant::now();
        for chunk_start in (0..total).step_by(write_batch) {
            let batch: Vec<CheckResult> = (chunk_start..(chunk_start + write_batch).min(total)).map(result).collect();
            store.enqueue(batch).await.expect("enqueue");
        }
        let write_secs = started.elapsed().as_secs_f64();
        let bytes = store.used_bytes().await.expect("size");

        let started = Instant::now();
        let mut acknowledged = 0;
        loop {
            let batch = store.next_batch_with_newest(upload_batch, upload_batch / 10, i64::MAX).await.expect("read");
            if batch.is_empty() {
                break;
            }
            acknowledged += batch.len();
            let kept_at = keep.then(|| chrono::Utc::now().timestamp_millis());
            store.acknowledge(batch.into_iter().map(|q| q.result.id).collect(), kept_at).await.expect("ack");
        }
        let ack_secs = started.elapsed().as_secs_f64();
        assert_eq!(acknowledged, total);
        println!(
            "results {total}, {write_batch} per write transaction, {upload_batch} per upload batch, delivered {}\n\
             queued        {:>9.0} results/s  ({:.0} bytes each on disk)\n\
             read + acked  {:>9.0} results/s",
            if keep { "kept" } else { "deleted" },
            total as f64 / write_secs,
            bytes as f64 / total as f64,
            total as f64 / ack_secs,
        );
    });
}
