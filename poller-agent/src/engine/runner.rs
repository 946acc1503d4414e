//! The engine loop: asks `core` what to start, runs those checks as tasks (bounded by the
//! global concurrency limit), feeds outcomes back, and hands each result to the queue writer.
//! It never talks to central; what central should know goes through `EngineReport`, and
//! what came of operators' commands goes out as `Acknowledgement`s.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::json;
use shared_proto::poller_api::{
    CheckResult, CommandAck, CommandAction, EngineEvent, PollerCommand, SchedulerHealth,
};
use shared_proto::AssignedMonitor;
use tokio::sync::{mpsc, watch, Notify, Semaphore};
use uuid::Uuid;

use super::core::{Engine, EngineConfig, Finished, NotAssigned};
use super::request_key::RequestKey;
use super::Clock;
use crate::checks::{CheckOutcome, Checker};
use crate::metrics::AgentMetrics;
use crate::store::LocalStore;

/// A change to the set of monitors to run, or an operator's command (in the order central
/// sent them: a command may concern a monitor the same answer assigned).
#[derive(Debug, Clone)]
pub enum AssignmentUpdate {
    /// Exactly these monitors.
    Replace(Vec<AssignedMonitor>),
    /// Add or change these, remove those.
    Delta {
        upserts: Vec<AssignedMonitor>,
        removes: Vec<Uuid>,
    },
    Command(PollerCommand),
}

/// For the uplink's acknowledgements (`uplink::commands`): what came of a command, or that
/// central offered one again (its acknowledgement may have been lost: send it again).
#[derive(Debug, Clone)]
pub enum Acknowledgement {
    Done(Uuid, CommandAck),
    Again(Uuid),
}

fn declined(message: impl Into<String>) -> CommandAck {
    CommandAck {
        done: false,
        message: message.into(),
        result: None,
    }
}

const NOT_HERE: &str = "the monitor is not assigned to this poller (it may have moved)";
const UNASSIGNED: &str = "the monitor was unassigned from this poller before it ran";

/// Tells the uploader that results are waiting.
#[derive(Debug, Default)]
pub struct ResultSignal {
    pub produced_since_upload: AtomicU64,
    /// A queued result changes its monitor's status: upload now, not with the next batch
    /// (a recovery or an outage is told within its check, issue 68).
    pub urgent: std::sync::atomic::AtomicBool,
    pub notify: Notify,
}

/// A result on its way to the queue, and whether it changes its monitor's status.
#[derive(Debug, Clone)]
pub struct Queued {
    pub result: CheckResult,
    pub status_changed: bool,
}

/// A finished check, back from its task.
struct Done {
    key: RequestKey,
    outcome: CheckOutcome,
    started_at: DateTime<Utc>,
}

/// What the engine reports to central with heartbeats.
#[derive(Debug, Default)]
pub struct EngineReport {
    pub health: Mutex<SchedulerHealth>,
    events: Mutex<VecDeque<EngineEvent>>,
}

const MAX_REPORTED_EVENTS: usize = 500;

impl EngineReport {
    fn push_events(&self, events: Vec<EngineEvent>) {
        let mut buffer = self.events.lock().unwrap_or_else(|p| p.into_inner());
        buffer.extend(events);
        while buffer.len() > MAX_REPORTED_EVENTS {
            buffer.pop_front();
        }
    }

    /// Takes the buffered events; give them back with `restore` if they could not be sent.
    pub fn take_events(&self) -> Vec<EngineEvent> {
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
            .collect()
    }

    pub fn restore(&self, events: Vec<EngineEvent>) {
        let mut buffer = self.events.lock().unwrap_or_else(|p| p.into_inner());
        for event in events.into_iter().rev() {
            buffer.push_front(event);
        }
        while buffer.len() > MAX_REPORTED_EVENTS {
            buffer.pop_front();
        }
    }

    pub fn health(&self) -> SchedulerHealth {
        self.health
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

pub struct Runner {
    pub clock: Arc<dyn Clock>,
    pub checker: Checker,
    pub metrics: Arc<AgentMetrics>,
    pub config: EngineConfig,
    pub max_concurrency: usize,
    pub report: Arc<EngineReport>,
    /// Results go to the queue writer.
    pub results: mpsc::Sender<Queued>,
    /// What came of commands goes to central.
    pub acks: mpsc::Sender<Acknowledgement>,
    /// Every dispatch's lag, when a benchmark wants exact percentiles (the metric is bucketed).
    pub lag_samples: Option<Arc<Mutex<Vec<Duration>>>>,
}

/// How often the health snapshot is refreshed: it walks every monitor.
const HEALTH_REFRESH: Duration = Duration::from_secs(1);

impl Runner {
    pub async fn run(
        self,
        updates: mpsc::Receiver<AssignmentUpdate>,
        shutdown: watch::Receiver<bool>,
    ) {
        let (_never, handing_over) = watch::channel(false);
        self.run_until_handover(updates, shutdown, handing_over)
            .await
    }

    /// `run`, and on `handing_over` (`crate::handover`): starts no check more, lets the
    /// checks under way finish and queues their results, then returns. Cost of the wait:
    /// the checks under way, each bounded by its `hard_limit`.
    pub async fn run_until_handover(
        self,
        mut updates: mpsc::Receiver<AssignmentUpdate>,
        mut shutdown: watch::Receiver<bool>,
        mut handing_over: watch::Receiver<bool>,
    ) {
        let mut engine = Engine::new(self.config.clone());
        let permits = Arc::new(Semaphore::new(self.max_concurrency.max(1)));
        let (done_tx, mut done_rx) = mpsc::unbounded_channel::<Done>();
        let mut last_report = Instant::now() - HEALTH_REFRESH;
        loop {
            let (now, wall) = (self.clock.now(), self.clock.wall());
            for dispatch in engine.poll(now, wall) {
                let dispatched = Instant::now();
                let lag_samples = self.lag_samples.clone();
                let (checker, permits, done, metrics, clock) = (
                    self.checker.clone(),
                    permits.clone(),
                    done_tx.clone(),
                    self.metrics.clone(),
                    self.clock.clone(),
                );
                tokio::spawn(async move {
                    let Ok(_permit) = permits.acquire_owned().await else {
                        return;
                    };
                    // Lag counts the wait for a global slot too: that is when the check starts.
                    let lag = dispatch.lag + dispatched.elapsed();
                    metrics.scheduling_lag.observe(lag.as_secs_f64());
                    if let Some(samples) = lag_samples {
                        samples.lock().unwrap_or_else(|p| p.into_inner()).push(lag);
                    }
                    let (started, started_at) = (Instant::now(), clock.wall());
                    let (monitor, validators) =
                        (dispatch.monitor.clone(), dispatch.validators.clone());
                    let limit = hard_limit(&monitor);
                    let outcome = guarded(
                        async move { checker.run(&monitor, validators).await },
                        limit,
                    )
                    .await;
                    metrics
                        .check_latency
                        .observe(started.elapsed().as_secs_f64());
                    let _ = done.send(Done {
                        key: dispatch.key,
                        outcome,
                        started_at,
                    });
                });
            }
            // Monitors that followed an unreachable address's last try instead of checking.
            for Finished {
                monitor,
                outcome,
                status_changed,
                ..
            } in engine.take_followed()
            {
                self.metrics
                    .record_check(monitor.kind.as_str(), outcome.status.as_str());
                let result = result_of(&monitor, outcome, wall);
                let queued = Queued {
                    result,
                    status_changed,
                };
                if self.results.send(queued).await.is_err() {
                    return;
                }
            }
            if now.duration_since(last_report) >= HEALTH_REFRESH {
                last_report = now;
                self.publish(&mut engine, now);
            }
            let wake = engine
                .next_due()
                .map(|at| at.min(now + HEALTH_REFRESH))
                .unwrap_or(now + HEALTH_REFRESH);
            tokio::select! {
                _ = tokio::time::sleep_until(tokio::time::Instant::from_std(wake)) => {}
                Some(first) = done_rx.recv() => {
                    if !self.queue_finished(&mut engine, first, &mut done_rx).await {
                        return;
                    }
                }
                Ok(()) = handing_over.changed() => {
                    // Every check under way holds a sender: the channel closes when the last
                    // one has finished.
                    drop(done_tx);
                    let under_way = async {
                        while let Some(first) = done_rx.recv().await {
                            if !self.queue_finished(&mut engine, first, &mut done_rx).await {
                                return;
                            }
                        }
                    };
                    if tokio::time::timeout(crate::handover::CHECKS_UNDER_WAY, under_way)
                        .await
                        .is_err()
                    {
                        tracing::warn!("handing over: checks still under way are left unfinished");
                    }
                    return;
                }
                update = updates.recv() => {
                    let now = self.clock.now();
                    engine.note_wall_time(now, self.clock.wall().timestamp_millis());
                    let abandoned = match update {
                        Some(AssignmentUpdate::Replace(monitors)) => engine.replace_all(monitors, now),
                        Some(AssignmentUpdate::Delta { upserts, removes }) => {
                            let abandoned =
                                removes.into_iter().flat_map(|id| engine.remove(id)).collect();
                            upserts.into_iter().for_each(|m| engine.upsert(m, now));
                            abandoned
                        }
                        Some(AssignmentUpdate::Command(command)) => {
                            self.carry_out(&mut engine, command, &permits);
                            Vec::new()
                        }
                        None => return,
                    };
                    for command in abandoned {
                        self.acknowledge(command, declined(UNASSIGNED));
                    }
                    self.metrics.monitors.set(engine.len() as i64);
                }
                _ = shutdown.changed() => return,
            }
        }
    }

    /// Queues the results of `first` and of whatever else has finished, and acknowledges the
    /// `check` commands they answer; `false` once the queue writer is gone.
    async fn queue_finished(
        &self,
        engine: &mut Engine,
        first: Done,
        done_rx: &mut mpsc::UnboundedReceiver<Done>,
    ) -> bool {
        let mut finished = self.complete(engine, first);
        while let Ok(more) = done_rx.try_recv() {
            finished.extend(self.complete(engine, more));
        }
        for (queued, answers) in finished {
            let result = queued.result.clone();
            // Queued first: the acknowledgement's copy is a courtesy, the queued one is what
            // must reach central.
            if self.results.send(queued).await.is_err() {
                return false;
            }
            for command in answers {
                self.acknowledge(
                    command,
                    CommandAck {
                        done: true,
                        message: "checked now".into(),
                        result: Some(result.clone()),
                    },
                );
            }
        }
        true
    }

    /// Each result, with the `check` commands it answers.
    fn complete(
        &self,
        engine: &mut Engine,
        Done {
            key,
            outcome,
            started_at,
        }: Done,
    ) -> Vec<(Queued, Vec<Uuid>)> {
        let finished = engine.complete(&key, outcome, self.clock.now(), self.clock.wall());
        finished
            .into_iter()
            .map(
                |Finished {
                     monitor,
                     outcome,
                     answers,
                     status_changed,
                     ..
                 }| {
                    self.metrics
                        .record_check(monitor.kind.as_str(), outcome.status.as_str());
                    let result = result_of(&monitor, outcome, started_at);
                    (
                        Queued {
                            result,
                            status_changed,
                        },
                        answers,
                    )
                },
            )
            .collect()
    }

    /// Does what an operator asked. `check` is answered when its result comes back; `test`
    /// when its one-off check ends (it takes a global slot like any check, and nothing of it
    /// is queued); `reset` at once.
    fn carry_out(&self, engine: &mut Engine, command: PollerCommand, permits: &Arc<Semaphore>) {
        let (now, wall) = (self.clock.now(), self.clock.wall());
        tracing::info!(command_id = %command.id, kind = command.action.name(), "command received");
        match command.action {
            CommandAction::Check { monitor_id } => {
                match engine.check_now(monitor_id, command.id, now) {
                    Ok(dropped) => {
                        for old in dropped {
                            self.acknowledge(old, declined("too many checks asked at once"));
                        }
                    }
                    Err(NotAssigned) => self.acknowledge(command.id, declined(NOT_HERE)),
                }
            }
            CommandAction::Reset { monitor_id } => {
                let ack = match engine.reset(monitor_id, now, wall) {
                    Ok(cleared) if cleared.is_empty() => CommandAck {
                        done: true,
                        message: "nothing to clear; runs now".into(),
                        result: None,
                    },
                    Ok(cleared) => CommandAck {
                        done: true,
                        message: format!("cleared {}; runs now", cleared.join(", ")),
                        result: None,
                    },
                    Err(NotAssigned) => declined(NOT_HERE),
                };
                self.acknowledge(command.id, ack);
            }
            CommandAction::Test { monitor } => {
                let (checker, permits, acks, clock) = (
                    self.checker.clone(),
                    permits.clone(),
                    self.acks.clone(),
                    self.clock.clone(),
                );
                tokio::spawn(async move {
                    let Ok(_permit) = permits.acquire_owned().await else {
                        return;
                    };
                    let monitor = Arc::new(monitor);
                    let started_at = clock.wall();
                    let limit = hard_limit(&monitor);
                    let spec = monitor.clone();
                    let outcome =
                        guarded(async move { checker.run(&spec, None).await }, limit).await;
                    let ack = CommandAck {
                        done: true,
                        message: "tested once; nothing was queued".into(),
                        result: Some(result_of(&monitor, outcome, started_at)),
                    };
                    let _ = acks.try_send(Acknowledgement::Done(command.id, ack));
                });
            }
        }
    }

    /// Hands an acknowledgement to the uplink. Its queue is bounded: past it, central is
    /// unreachable anyway, and a command central does not hear back about expires there.
    fn acknowledge(&self, command: Uuid, ack: CommandAck) {
        if self
            .acks
            .try_send(Acknowledgement::Done(command, ack))
            .is_err()
        {
            tracing::warn!(command_id = %command, "acknowledgement queue full; dropped");
        }
    }

    fn publish(&self, engine: &mut Engine, now: Instant) {
        let events = engine.drain_events();
        for event in &events {
            self.metrics.record_event(event.kind.name());
        }
        self.report.push_events(events);
        let health = engine.health(now, self.clock.wall());
        self.metrics.observe_health(&health);
        *self.report.health.lock().unwrap_or_else(|p| p.into_inner()) = health;
    }
}

/// A check's outcome as central gets it.
fn result_of(
    monitor: &AssignedMonitor,
    outcome: CheckOutcome,
    started_at: DateTime<Utc>,
) -> CheckResult {
    CheckResult {
        // Time-ordered (v7): central's index on result ids then grows at its end instead of
        // taking inserts at random, which keeps ingestion fast.
        id: Uuid::now_v7(),
        monitor_id: monitor.id,
        // A result is stamped with when its check started.
        ts: started_at,
        status: outcome.status,
        latency_ms: outcome.latency_ms,
        msg: outcome.msg,
        meta: outcome.meta,
    }
}

/// Longer than any check should take: its own timeout, plus room for a check that runs a few
/// steps each bounded by it (DNS, then connect, then TLS), plus an `icmp` check's spacing
/// between its echoes.
fn hard_limit(monitor: &AssignedMonitor) -> Duration {
    let spacing =
        match shared_proto::settings::MonitorSettings::parse(monitor.kind, &monitor.settings)
            .map(|s| s.check)
        {
            Ok(shared_proto::settings::CheckSettings::Icmp(icmp)) => icmp.longest_check_ms(0),
            _ => 0,
        };
    Duration::from_millis(monitor.timeout_ms.saturating_mul(3).saturating_add(spacing))
        .max(Duration::from_secs(5))
}

/// Runs one check in a task of its own, so that whatever it does, an outcome comes back and
/// the engine frees its slots: a check that panics is a failed result (and an `error` log
/// line), one that outlives `limit` is cancelled and failed.
pub async fn guarded(
    check: impl std::future::Future<Output = CheckOutcome> + Send + 'static,
    limit: Duration,
) -> CheckOutcome {
    let mut task = tokio::spawn(check);
    match tokio::time::timeout(limit, &mut task).await {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(e)) if e.is_panic() => {
            let message = crate::agent::panic_message(e.into_panic());
            tracing::error!("a check panicked: {message}");
            CheckOutcome::down(None, format!("the check crashed: {message}"), json!({}))
        }
        Ok(Err(e)) => CheckOutcome::down(None, format!("the check was cancelled: {e}"), json!({})),
        Err(_) => {
            task.abort();
            CheckOutcome::down(
                None,
                format!("the check did not finish within {} ms", limit.as_millis()),
                json!({}),
            )
        }
    }
}

/// Writes results to the queue in small transactions: whatever has arrived since the last
/// write goes in one, so thousands per second cost a handful of commits.
pub struct QueueWriter {
    pub store: LocalStore,
    pub metrics: Arc<AgentMetrics>,
    pub signal: Arc<ResultSignal>,
}

const MAX_WRITE_BATCH: usize = 1_000;

impl QueueWriter {
    pub async fn run(self, mut results: mpsc::Receiver<Queued>) {
        while let Some(first) = results.recv().await {
            let mut urgent = first.status_changed;
            let mut batch = vec![first.result];
            while batch.len() < MAX_WRITE_BATCH {
                match results.try_recv() {
                    Ok(more) => {
                        urgent |= more.status_changed;
                        batch.push(more.result);
                    }
                    Err(_) => break,
                }
            }
            let count = batch.len() as u64;
            let ids: Vec<(Uuid, Uuid)> = batch.iter().map(|r| (r.id, r.monitor_id)).collect();
            // Before and after the commit: a `kill -9` between the two leaves results that
            // were committed (and will be uploaded) without their "queued" line; the
            // durability tests tell those from results nobody made by this line.
            for (result_id, monitor_id) in &ids {
                tracing::debug!(%result_id, %monitor_id, "result committing");
            }
            if self.write(batch).await {
                for (result_id, monitor_id) in ids {
                    tracing::debug!(%result_id, %monitor_id, "result queued");
                }
                self.signal
                    .produced_since_upload
                    .fetch_add(count, Ordering::Relaxed);
                if urgent {
                    self.signal.urgent.store(true, Ordering::Relaxed);
                }
                self.signal.notify.notify_one();
            }
        }
    }

    /// Retries a failing disk a few times before counting the results as lost.
    async fn write(&self, batch: Vec<CheckResult>) -> bool {
        let mut delay = Duration::from_millis(200);
        for attempt in 1..=5 {
            match self.store.enqueue(batch.clone()).await {
                Ok(()) => return true,
                Err(e) if attempt < 5 => {
                    tracing::warn!(
                        "queueing {} results failed (attempt {attempt}): {e:#}",
                        batch.len()
                    );
                    tokio::time::sleep(delay).await;
                    delay *= 2;
                }
                Err(e) => {
                    self.metrics.results_lost.inc_by(batch.len() as u64);
                    self.metrics.report_error(format!(
                        "{} results could not be queued: {e:#}",
                        batch.len()
                    ));
                    tracing::error!(
                        "could not queue {} results, they are lost: {e:#}",
                        batch.len()
                    );
                    // Counted where central will see it, if the disk allows.
                    let _ = self.store.add_dropped(batch.len() as u64).await;
                }
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared_proto::poller_api::ResultStatus;

    #[tokio::test]
    async fn a_panicking_check_is_a_failed_result() {
        let outcome = guarded(async { panic!("bug in a check") }, Duration::from_secs(5)).await;
        assert_eq!(outcome.status, ResultStatus::Down);
        assert_eq!(outcome.msg, "the check crashed: bug in a check");
    }

    #[tokio::test]
    async fn a_check_that_never_ends_is_cut_off() {
        let outcome = guarded(std::future::pending(), Duration::from_millis(50)).await;
        assert_eq!(outcome.msg, "the check did not finish within 50 ms");
        let fine = guarded(
            async { CheckOutcome::up(Duration::from_millis(1), json!({})) },
            Duration::from_secs(5),
        )
        .await;
        assert_eq!(fine.status, ResultStatus::Up);
    }
}
