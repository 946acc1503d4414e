//! Pruning history: raw results after `CENTRAL_RESULTS_RETENTION`, except each status change
//! and the verdict just before it, which stay as long as day rollups do; rollup buckets after
//! their own retention. Every step deletes a few hundred rows, so pruning never holds the
//! writer long. Dependencies' latency buckets and changes go the same way. What the rollups
//! count is not this module's concern.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use shared_proto::poller_api::Verdict;

use super::clock::Clock;
use super::App;
use crate::store::{Cursor, ExpiringResult, Resolution, Store};

/// Rows per pruning step.
pub(super) const PRUNE_STEP: u32 = 500;
/// Between steps, other writers get the database.
pub(super) const PAUSE_BETWEEN_STEPS: Duration = Duration::from_millis(5);

/// Decides which expired results go, walking one monitor's results oldest first (in pages): a
/// verdict that differs from the previous one of the same location is a status change, and it
/// stays with the verdict before it, so the moment of every change and what preceded it can
/// still be read. Rate-limited results say nothing about status and always go. The newest
/// verdict walked stays undecided (the next one, maybe not expired yet, could be a change), so
/// walking again what a walk kept deletes nothing.
#[derive(Debug, Default)]
pub struct Thinning {
    /// Per location (`None` for the whole monitor): the last verdict seen and whether it stays.
    last: HashMap<Option<String>, LastVerdict>,
}

#[derive(Debug)]
struct LastVerdict {
    verdict: Verdict,
    id: String,
    stays: bool,
}

impl Thinning {
    /// The ids, among the next page of expired results, that can be deleted.
    pub fn walk(&mut self, page: &[ExpiringResult]) -> Vec<String> {
        let mut expired = Vec::new();
        for result in page {
            let Some(verdict) = result.status.verdict() else {
                expired.push(result.id.clone());
                continue;
            };
            let stays = match self.last.get_mut(&result.region) {
                None => false,
                Some(last) if last.verdict == verdict => {
                    if !last.stays {
                        expired.push(last.id.clone());
                    }
                    false
                }
                Some(last) => {
                    last.stays = true;
                    true
                }
            };
            self.last.insert(
                result.region.clone(),
                LastVerdict {
                    verdict,
                    id: result.id.clone(),
                    stays,
                },
            );
        }
        expired
    }
}

/// Runs `step` (which deletes up to `PRUNE_STEP` rows) until it deletes fewer, pausing between
/// steps; returns how many rows went.
async fn in_steps<F, Fut>(mut step: F) -> anyhow::Result<u64>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<u64>>,
{
    let mut pruned = 0;
    loop {
        let deleted = step().await?;
        pruned += deleted;
        if deleted < u64::from(PRUNE_STEP) {
            return Ok(pruned);
        }
        tokio::time::sleep(PAUSE_BETWEEN_STEPS).await;
    }
}

/// Pruning: what outlived its retention goes (results thinned, then deleted; rollups; dependencies' history), in small steps.
#[derive(Clone)]
pub struct Pruning {
    store: Arc<Store>,
    clock: Clock,
    retention: super::history::Retention,
}

impl App {
    /// The pruning service, on this central's parts.
    pub fn pruning(&self) -> Pruning {
        Pruning {
            store: self.store.clone(),
            clock: self.clock.clone(),
            retention: self.limits.retention,
        }
    }
}

impl Pruning {
    fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }
    /// Dependencies' latency buckets go with the rollups of their resolution, their changes
    /// with the day rollups (as monitors' kept status changes do).
    async fn prune_dependency_history(&self, now: i64) -> anyhow::Result<u64> {
        let mut pruned = 0;
        for resolution in [Resolution::Hour, Resolution::Day] {
            let before = now.saturating_sub(self.retention.of(resolution));
            pruned += in_steps(|| {
                self.store
                    .prune_dependency_latency(resolution, before, PRUNE_STEP)
            })
            .await?;
        }
        let events_before = now.saturating_sub(self.retention.days_ms);
        pruned += in_steps(|| {
            self.store
                .prune_dependency_events(events_before, PRUNE_STEP)
        })
        .await?;
        Ok(pruned)
    }

    /// One pruning pass over results and rollups; returns how many rows went.
    pub async fn prune_results_and_rollups(&self) -> anyhow::Result<u64> {
        let now = self.now_ms();
        let mut pruned = 0;
        for resolution in Resolution::ALL {
            let before = now.saturating_sub(self.retention.of(resolution));
            pruned += in_steps(|| self.store.prune_rollups(resolution, before, PRUNE_STEP)).await?;
        }
        pruned += self.prune_dependency_history(now).await?;
        // Kept status changes live as long as the longest-kept rollups.
        let changes_before = now.saturating_sub(self.retention.days_ms);
        let results_before = now.saturating_sub(self.retention.results_ms);
        // Pruning walks results through the index by monitor: on SQLite the ones still in the
        // head (a late upload's old results among them) are flushed into it first.
        self.store.flush_results_head().await?;
        let mut monitor = String::new();
        while let Some(next) = self.store.next_monitor_with_results(&monitor).await? {
            monitor = next;
            pruned += in_steps(|| {
                self.store
                    .delete_results_before(&monitor, changes_before, PRUNE_STEP)
            })
            .await?;
            pruned += self.thin_results(&monitor, results_before).await?;
        }
        Ok(pruned)
    }

    async fn thin_results(&self, monitor_id: &str, before: i64) -> anyhow::Result<u64> {
        let mut thinning = Thinning::default();
        let mut cursor = Cursor::start();
        let mut deleted = 0;
        loop {
            let page = self
                .store
                .expiring_results(monitor_id, before, &cursor, PRUNE_STEP)
                .await?;
            let Some(last) = page.last() else { break };
            cursor = Cursor {
                key: last.ts,
                id: last.id.clone(),
            };
            let expired = thinning.walk(&page);
            if !expired.is_empty() {
                deleted += self.store.delete_results(&expired).await?;
                tokio::time::sleep(PAUSE_BETWEEN_STEPS).await;
            }
            if page.len() < PRUNE_STEP as usize {
                break;
            }
        }
        Ok(deleted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::ResultStatus;
    use proptest::prelude::*;

    fn results(statuses: &[(&str, Option<&str>)]) -> Vec<ExpiringResult> {
        statuses
            .iter()
            .enumerate()
            .map(|(i, (status, region))| ExpiringResult {
                id: format!("{i:04}"),
                region: region.map(Into::into),
                ts: i as i64,
                status: ResultStatus::parse(status).unwrap(),
            })
            .collect()
    }

    fn kept(all: &[ExpiringResult], expired: &[String]) -> Vec<ExpiringResult> {
        all.iter()
            .filter(|r| !expired.contains(&r.id))
            .cloned()
            .collect()
    }

    /// The (from, to) verdict changes of each location, with the ids of the results around them.
    fn changes(results: &[ExpiringResult]) -> Vec<(String, String)> {
        let mut last: HashMap<&Option<String>, &ExpiringResult> = HashMap::new();
        let mut changes = Vec::new();
        for result in results.iter().filter(|r| r.status.verdict().is_some()) {
            if let Some(previous) = last.get(&result.region) {
                if previous.status != result.status {
                    changes.push((previous.id.clone(), result.id.clone()));
                }
            }
            last.insert(&result.region, result);
        }
        changes
    }

    #[test]
    fn a_change_keeps_the_verdict_before_it_and_itself() {
        let all = results(&[
            ("up", None),
            ("up", None),
            ("rate_limited", None),
            ("up", None),
            ("down", None),
            ("down", None),
            ("down", None),
        ]);
        let expired = Thinning::default().walk(&all);
        let left = kept(&all, &expired);
        let ids: Vec<&str> = left.iter().map(|r| r.id.as_str()).collect();
        // 0003 (last up) and 0004 (first down) stay; 0006, the newest, is undecided.
        assert_eq!(ids, ["0003", "0004", "0006"]);
    }

    proptest! {
        #[test]
        fn thinning_keeps_every_change_and_is_stable(
            statuses in proptest::collection::vec(
                (prop_oneof![Just("up"), Just("down"), Just("rate_limited")],
                 prop_oneof![Just(None), Just(Some("eu")), Just(Some("us"))]),
                0..120),
            page in 1usize..40,
        ) {
            let all = results(&statuses);
            let mut thinning = Thinning::default();
            let expired: Vec<String> = all.chunks(page).flat_map(|p| thinning.walk(p)).collect();
            let left = kept(&all, &expired);
            // Every change is still there, as the same pair of results.
            prop_assert_eq!(changes(&left), changes(&all));
            // Walking what is left again deletes nothing.
            let again = Thinning::default().walk(&left);
            prop_assert!(again.is_empty(), "second walk deleted {:?}", again);
        }
    }
}
