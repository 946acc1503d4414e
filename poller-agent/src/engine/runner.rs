//! The engine loop: starts due checks (bounded by a global concurrency limit), writes each
//! result to the queue, and applies assignment changes. It never talks to central.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use shared_proto::poller_api::CheckResult;
use shared_proto::AssignedMonitor;
use tokio::sync::{mpsc, watch, Notify, Semaphore};
use uuid::Uuid;

use super::{Clock, Scheduler};
use crate::checks::Checker;
use crate::metrics::AgentMetrics;
use crate::store::LocalStore;

/// A change to the set of monitors to run.
#[derive(Debug, Clone)]
pub enum AssignmentUpdate {
    /// Exactly these monitors.
    Replace(Vec<AssignedMonitor>),
    /// Add or change these, remove those.
    Delta {
        upserts: Vec<AssignedMonitor>,
        removes: Vec<Uuid>,
    },
}

/// Tells the uploader that results are waiting.
#[derive(Debug, Default)]
pub struct ResultSignal {
    pub produced_since_upload: AtomicU64,
    pub notify: Notify,
}

pub struct Runner {
    pub clock: Arc<dyn Clock>,
    pub checker: Checker,
    pub store: LocalStore,
    pub metrics: Arc<AgentMetrics>,
    pub max_concurrency: usize,
    pub results: Arc<ResultSignal>,
}

impl Runner {
    pub async fn run(
        self,
        mut updates: mpsc::Receiver<AssignmentUpdate>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        let mut scheduler = Scheduler::new();
        let permits = Arc::new(Semaphore::new(self.max_concurrency.max(1)));
        let (done_tx, mut done_rx) = mpsc::unbounded_channel::<Uuid>();
        loop {
            for monitor in scheduler.pop_due(self.clock.now()) {
                self.spawn_check(monitor, permits.clone(), done_tx.clone());
            }
            self.metrics.monitors.set(scheduler.len() as i64);
            let wake = scheduler.next_due();
            let sleep = async {
                match wake {
                    Some(at) => tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = sleep => {}
                Some(id) = done_rx.recv() => scheduler.complete(id, self.clock.now()),
                update = updates.recv() => match update {
                    Some(AssignmentUpdate::Replace(monitors)) => scheduler.replace_all(monitors, self.clock.now()),
                    Some(AssignmentUpdate::Delta { upserts, removes }) => {
                        let now = self.clock.now();
                        removes.into_iter().for_each(|id| scheduler.remove(id));
                        upserts.into_iter().for_each(|m| scheduler.upsert(m, now));
                    }
                    None => break,
                },
                _ = shutdown.changed() => break,
            }
        }
    }

    fn spawn_check(
        &self,
        monitor: Arc<AssignedMonitor>,
        permits: Arc<Semaphore>,
        done: mpsc::UnboundedSender<Uuid>,
    ) {
        let checker = self.checker.clone();
        let store = self.store.clone();
        let clock = self.clock.clone();
        let metrics = self.metrics.clone();
        let signal = self.results.clone();
        tokio::spawn(async move {
            let Ok(_permit) = permits.acquire_owned().await else {
                return;
            };
            let ts = clock.wall();
            let outcome = checker.run(&monitor).await;
            metrics.record_check(monitor.kind.as_str(), outcome.status.as_str());
            let result = CheckResult {
                id: Uuid::new_v4(),
                monitor_id: monitor.id,
                ts,
                status: outcome.status,
                latency_ms: outcome.latency_ms,
                msg: outcome.msg,
                meta: outcome.meta,
            };
            tracing::debug!(monitor_id = %monitor.id, status = result.status.as_str(), msg = %result.msg, "check done");
            match store.enqueue(vec![result]).await {
                Ok(()) => {
                    signal.produced_since_upload.fetch_add(1, Ordering::Relaxed);
                    signal.notify.notify_one();
                }
                Err(e) => {
                    metrics.results_lost.inc();
                    tracing::error!(monitor_id = %monitor.id, "could not queue a result, it is lost: {e:#}");
                }
            }
            let _ = done.send(monitor.id);
        });
    }
}
