//! Runs alerting's looks, a lease holder's duty (`duties`):
//! `service::alerts` decides, the outbox carries the result to `notify`. Each round also queues
//! the notices of dependencies' changes (`service::dependencies::notices`). It looks when this
//! replica marks monitors due (a wake from ingest, after `GATHER` so that uploads arriving
//! together make one look), when the earliest due instant comes, and at least every `PERIOD`
//! for what other replicas mark.
//!
//! Cost: per look, the monitors due (`service::alerts::look`) and the dependency changes
//! awaiting a notice (a partial index); between looks, one read of the earliest due instant
//! (the first entry of an index). Nothing here grows with the number of
//! monitors.

use std::sync::Arc;
use std::time::Duration;

use crate::service::App;
use crate::telemetry::error_chain;

/// The longest between two looks: how soon marks written by other replicas are seen.
const PERIOD: Duration = Duration::from_secs(1);
/// The shortest wait for a due instant: bounds the looks a second when some keep failing.
const MIN_WAIT: Duration = Duration::from_millis(20);
/// After a wake from ingest, how long the marks of other uploads may gather before the look:
/// at most one look per `GATHER` instead of one per upload (200 uploads a second at 100,000
/// monitors on 200 pollers), for at most this much more alert latency.
const GATHER: Duration = Duration::from_millis(15);

pub async fn run(app: Arc<App>) {
    loop {
        let mut wait = PERIOD;
        match app.evaluate_alerts().await {
            Ok(_) => match app.store.next_due_at().await {
                Ok(Some(at)) => {
                    let until = u64::try_from(at.saturating_sub(app.now_ms())).unwrap_or(0);
                    wait = wait.min(Duration::from_millis(until)).max(MIN_WAIT);
                }
                Ok(None) => {}
                Err(e) => tracing::warn!("reading when alerting is next due failed: {e:#}"),
            },
            Err(e) => tracing::warn!("evaluating alerts failed: {}", error_chain(&e)),
        }
        if let Err(e) = app.send_dependency_notices().await {
            tracing::warn!("sending dependency notices failed: {e:#}");
        }
        tokio::select! {
            () = app.cluster.wakes.alerting.notified() => tokio::time::sleep(GATHER).await,
            () = tokio::time::sleep(wait) => {}
        }
    }
}
