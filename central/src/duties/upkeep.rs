//! Periodic upkeep. On the lease holder (`run`): compacting the assignment log, pruning engine
//! events and status changes older than 30 days, results and rollups past their retention,
//! audit entries past `CENTRAL_AUDIT_RETENTION`, status pages' settled notices and unconfirmed
//! subscriptions past a week, and recording the audit intents left
//! unfinished (`service::audit_intents`), at once when a holding starts and every
//! hour after; and folding the rollups' closed hours into days as each hour closes
//! (`fold_rollups`). On every replica: picking up signing keys rotated elsewhere, every minute
//! (`follow_signing_keys`), and on SQLite flushing the results head (`flush_results_head`). Owns no
//! state; what it prunes is `service::retention`'s and `service::history`'s to decide.

use std::sync::Arc;
use std::time::Duration;

use crate::service::folding::next_close_in;
use crate::service::App;
use crate::store::result_index::FLUSH_EVERY;
use crate::telemetry::error_chain;

const HOURLY: Duration = Duration::from_secs(3600);
const RELOAD_KEYS_EVERY: Duration = Duration::from_secs(60);
/// How soon a fold that failed (a lost connection, a deadlock broken) is tried again.
const FOLD_RETRY: Duration = Duration::from_secs(60);

pub async fn run(app: Arc<App>) {
    let mut ticker = tokio::time::interval(HOURLY);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        // The first tick is at once.
        ticker.tick().await;
        if let Err(e) = app.compact_assignment_log().await {
            tracing::warn!("assignment log compaction failed: {}", error_chain(&e));
        }
        if let Err(e) = app.prune_history().await {
            tracing::warn!("pruning old events failed: {}", error_chain(&e));
        }
        match app.pruning().prune_results_and_rollups().await {
            Ok(pruned) => tracing::info!(pruned, "pruned results and rollups past retention"),
            Err(e) => tracing::warn!("pruning old results and rollups failed: {e:#}"),
        }
        match app.prune_audit().await {
            Ok(pruned) => tracing::info!(pruned, "pruned audit entries past retention"),
            Err(e) => tracing::warn!("pruning old audit entries failed: {e:#}"),
        }
        match app.status_pages().prune_subscriptions().await {
            Ok(0) => {}
            Ok(pruned) => tracing::info!(pruned, "pruned status pages' settled notices"),
            Err(e) => tracing::warn!("pruning status pages' notices failed: {e:#}"),
        }
        match app.finish_stale_intents().await {
            Ok(0) => {}
            Ok(finished) => tracing::warn!(
                finished,
                "changes whose audit entries were left unwritten (central stopped, or the log \
                 failed) are recorded as unconfirmed"
            ),
            Err(e) => tracing::warn!("recording unfinished audit intents failed: {e:#}"),
        }
    }
}

/// On SQLite, every replica's (there is one): flushes the results head into `result_index`
/// every `FLUSH_EVERY`, or at once when it fills (`store::result_index`). The head is this
/// process's, so this is not the lease holder's duty: a replica that lost the lease still
/// stores results. Returns at once on PostgreSQL, which has no head. Cost per round:
/// proportional to the results stored since the last.
pub async fn flush_results_head(app: Arc<App>) {
    if !app.store.backend().keeps_results_head() {
        return;
    }
    loop {
        tokio::select! {
            _ = tokio::time::sleep(FLUSH_EVERY) => {}
            _ = app.store.results_head_filled() => {}
        }
        let started = std::time::Instant::now();
        match app.store.flush_results_head().await {
            // With its time: each chunk holds the writer, and uploads wait behind it.
            Ok(flushed) => tracing::info!(
                flushed,
                ms = started.elapsed().as_millis() as u64,
                "flushed the results head"
            ),
            // Kept in the head and taken by the next round; a start rebuilds it anyway.
            Err(e) => tracing::warn!("flushing the results head failed: {e:#}"),
        }
    }
}

/// On the lease holder: folds the rollups' closed hours into their days
/// (`service::folding`), at once when a holding starts (catching up on what no holder folded)
/// and then each time an hour closes. Cost per round: the hour rows of the hours closed since.
pub async fn fold_rollups(app: Arc<App>) {
    loop {
        let started = std::time::Instant::now();
        match app.fold_closed_hours().await {
            Ok(folded) => tracing::info!(
                folded,
                ms = started.elapsed().as_millis() as u64,
                "folded closed hours into days"
            ),
            // Unfolded hours are read as such (`store::rollups`); a round soon takes them
            // rather than the next hour's.
            Err(e) => {
                tracing::warn!("folding closed hours into days failed: {e:#}");
                tokio::time::sleep(FOLD_RETRY.min(next_close_in(app.now_ms()))).await;
                continue;
            }
        }
        tokio::time::sleep(next_close_in(app.now_ms())).await;
    }
}

pub async fn follow_signing_keys(app: Arc<App>) {
    let mut ticker = tokio::time::interval(RELOAD_KEYS_EVERY);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The first tick is at once, and the keys were just loaded.
    ticker.tick().await;
    loop {
        ticker.tick().await;
        if let Err(e) = app.reload_signing_keys().await {
            tracing::warn!("reloading signing keys failed: {e:#}");
        }
    }
}
