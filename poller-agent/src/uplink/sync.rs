//! Heartbeats, and keeping the engine's monitor set equal to central's assignments.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use shared_proto::poller_api::{AssignmentsResponse, HeartbeatRequest, HeartbeatResponse};
use shared_proto::AssignedMonitor;
use tokio::sync::{mpsc, watch, Notify};
use uuid::Uuid;

use super::client::Standing;
use super::commands::Taken;
use super::{retry_delay, CentralClient, UplinkError};
use crate::engine::runner::{Acknowledgement, AssignmentUpdate, EngineReport, ResultSignal};
use crate::metrics::AgentMetrics;
use crate::store::{CachedAssignments, LocalStore, LAST_HEARTBEAT_AT};

/// How long central may hold an assignments request open.
const LONG_POLL: Duration = Duration::from_secs(20);
/// Longest pause between failed assignment requests.
const MAX_RETRY: Duration = Duration::from_secs(30);

pub struct Heartbeats {
    pub client: Arc<CentralClient>,
    pub store: LocalStore,
    pub metrics: Arc<AgentMetrics>,
    pub interval: Duration,
    pub capabilities: Vec<String>,
    pub report: Arc<EngineReport>,
    /// Poked when central reports an assignment version other than ours.
    pub assignments_changed: Arc<Notify>,
    pub known_version: watch::Receiver<i64>,
    /// Wakes the uploader when delivered results are queued again.
    pub uploads: Arc<ResultSignal>,
}

impl Heartbeats {
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        let mut ticker = tokio::time::interval(self.interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticker.tick() => {}
                _ = shutdown.changed() => return,
            }
            if let Err(e) = self.beat().await {
                log_uplink_error("heartbeat", &e);
                self.metrics
                    .update_state(|s| s.last_error = Some(e.to_string()));
            }
        }
    }

    async fn beat(&self) -> Result<(), UplinkError> {
        let stats = self.store.queue_stats().await?;
        self.metrics.queue_depth.set(stats.depth as i64);
        let held_because = match stats.held {
            0 => None,
            _ => self.store.newest_refusal().await?,
        };
        let version = *self.known_version.borrow();
        let beat = HeartbeatRequest {
            version: env!("CARGO_PKG_VERSION").to_string(),
            capabilities: self.capabilities.clone(),
            queue_depth: stats.depth,
            oldest_queued_at: stats
                .oldest_ms
                .and_then(chrono::DateTime::from_timestamp_millis),
            assignment_version: Some(version),
            dropped_results: self.store.dropped_results().await?,
            held_results: stats.held,
            errors: self.metrics.take_errors(),
            scheduler: Some(self.report.health()),
            events: self.report.take_events(),
        };
        let asked = chrono::Utc::now();
        let answer = match self.client.heartbeat(&beat).await {
            Ok(answer) => answer,
            Err(e) => {
                // Undelivered news waits for the next heartbeat.
                self.report.restore(beat.events);
                for error in beat.errors {
                    self.metrics.report_error(error);
                }
                return Err(e);
            }
        };
        let now = chrono::Utc::now();
        self.store
            .set_state(LAST_HEARTBEAT_AT, now.to_rfc3339())
            .await?;
        self.metrics.update_state(|s| {
            s.last_heartbeat_at = Some(now);
            s.queue_depth = stats.depth;
            s.held_results = stats.held;
            s.central_version = self.client.central_version();
            s.held_because = held_because;
            s.last_error = None;
        });
        if answer.assignment_version != version {
            self.assignments_changed.notify_one();
        }
        self.resend_what_central_lost(&answer, asked, now).await;
        Ok(())
    }
}

impl Heartbeats {
    /// Central's database lacks uploads it acknowledged when its newest stored upload is well
    /// before one the agent had acknowledged before it asked: central runs on a restored copy.
    /// The delivered results kept since then are queued again. Central's time is put on the
    /// agent's clock through `server_time` (taken at the middle of the exchange); the margin
    /// covers that estimate and an upload's time in flight, so nothing is sent again while
    /// central simply has it.
    async fn resend_what_central_lost(
        &self,
        answer: &HeartbeatResponse,
        asked: chrono::DateTime<chrono::Utc>,
        answered: chrono::DateTime<chrono::Utc>,
    ) {
        // A central older than the field says nothing: no sign of a loss.
        let Some(newest) = answer.last_upload_at else {
            return;
        };
        // Central's time on the agent's clock, through `server_time` taken at the middle of
        // the exchange (its error, half a round trip, is within the margin).
        let middle = asked + (answered - asked) / 2;
        let skew = answer.server_time - middle;
        let stored = newest.map(|at| (at - skew).timestamp_millis());
        super::redelivery::resend_if_lost(
            &self.store,
            &self.metrics,
            &self.uploads,
            stored,
            asked.timestamp_millis(),
        )
        .await;
    }
}

pub struct AssignmentSync {
    pub client: Arc<CentralClient>,
    /// To send an acknowledgement again when central offers its command once more.
    pub acks: mpsc::Sender<Acknowledgement>,
    pub store: LocalStore,
    pub metrics: Arc<AgentMetrics>,
    pub engine: mpsc::Sender<AssignmentUpdate>,
    pub changed: Arc<Notify>,
    pub version: watch::Sender<i64>,
}

impl AssignmentSync {
    /// Starts from the cached set (so polling resumes before central answers), then follows
    /// central.
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        let mut current: BTreeMap<Uuid, AssignedMonitor> = BTreeMap::new();
        match self.store.cached_assignments().await {
            Ok(Some(cache)) => {
                tracing::info!(
                    version = cache.version,
                    monitors = cache.monitors.len(),
                    "running cached assignments"
                );
                current = cache.monitors.iter().map(|m| (m.id, m.clone())).collect();
                let _ = self
                    .engine
                    .send(AssignmentUpdate::Replace(cache.monitors))
                    .await;
                self.version.send_replace(cache.version);
            }
            Ok(None) => {}
            Err(e) => tracing::warn!("assignment cache unreadable, waiting for central: {e:#}"),
        }
        let mut failures = 0u32;
        let mut taken = Taken::default();
        let mut standing = self.client.standing();
        loop {
            let stood = standing.borrow_and_update().clone();
            if stood != Standing::Active {
                self.stop_checks(&stood, &mut current).await;
                tokio::select! {
                    _ = standing.changed() => {}
                    _ = shutdown.changed() => return,
                }
                continue;
            }
            self.metrics.checks_stopped.set(0);
            self.metrics.update_state(|s| s.checks_stopped = None);
            let since = *self.version.borrow();
            // A long poll: central answers at once when something changed, else when
            // something changes, else after the wait; then we ask again straight away.
            let asked = std::time::Instant::now();
            let request = self.client.assignments(since, LONG_POLL);
            let outcome = tokio::select! {
                outcome = request => outcome,
                // A heartbeat learned that central disabled or deleted the poller: stop now,
                // not when the long poll ends.
                _ = standing.changed() => continue,
                _ = shutdown.changed() => return,
            };
            match outcome {
                Ok(answer) => {
                    failures = 0;
                    let news = answer.full
                        || !answer.upserts.is_empty()
                        || !answer.removes.is_empty()
                        || !answer.commands.is_empty();
                    if let Err(e) = self.apply(answer, &mut current, &mut taken).await {
                        tracing::warn!("could not cache assignments: {e:#}");
                    }
                    // A central that does not hold requests (older versions) answers at once:
                    // do not spin on it.
                    if !news && asked.elapsed() < Duration::from_secs(1) {
                        tokio::select! {
                            _ = tokio::time::sleep(Duration::from_secs(5)) => {}
                            _ = shutdown.changed() => return,
                        }
                    }
                    continue;
                }
                Err(e) => {
                    failures += 1;
                    log_uplink_error("assignment sync", &e);
                }
            }
            tokio::select! {
                // A heartbeat that reports a newer version cuts the back-off short.
                _ = self.changed.notified() => {}
                _ = standing.changed() => {}
                _ = tokio::time::sleep(retry_delay(failures).min(MAX_RETRY)) => {}
                _ = shutdown.changed() => return,
            }
        }
    }

    /// Central disabled or deleted this poller: another poller owns its monitors now, so it
    /// stops probing them at once, and forgets them (the cache too, so that a restart does
    /// not resume them). Queued results stay. A full set is asked for once central accepts
    /// the poller again.
    async fn stop_checks(
        &self,
        standing: &Standing,
        current: &mut BTreeMap<Uuid, AssignedMonitor>,
    ) {
        self.metrics.checks_stopped.set(1);
        self.metrics
            .update_state(|s| s.checks_stopped = Some(standing.describe()));
        if current.is_empty() && *self.version.borrow() == 0 {
            return;
        }
        current.clear();
        let _ = self
            .engine
            .send(AssignmentUpdate::Replace(Vec::new()))
            .await;
        self.version.send_replace(0);
        self.metrics.update_state(|s| s.assignment_version = None);
        let empty = CachedAssignments {
            version: 0,
            monitors: Vec::new(),
        };
        if let Err(e) = self.store.save_assignments(&empty).await {
            tracing::warn!("could not clear the assignment cache: {e:#}");
        }
    }

    /// Applies the changes, then hands the engine the commands not taken before (after the
    /// changes: a command may concern a monitor this answer assigned).
    async fn apply(
        &self,
        mut answer: AssignmentsResponse,
        current: &mut BTreeMap<Uuid, AssignedMonitor>,
        taken: &mut Taken,
    ) -> anyhow::Result<()> {
        let commands = std::mem::take(&mut answer.commands);
        let saved = self.apply_changes(answer, current).await;
        for command in commands {
            if taken.first_time(command.id) {
                let _ = self.engine.send(AssignmentUpdate::Command(command)).await;
            } else {
                let _ = self.acks.try_send(Acknowledgement::Again(command.id));
            }
        }
        saved
    }

    async fn apply_changes(
        &self,
        mut answer: AssignmentsResponse,
        current: &mut BTreeMap<Uuid, AssignedMonitor>,
    ) -> anyhow::Result<()> {
        // A monitor this agent cannot read (a kind of a newer central) is not run: an older
        // copy of it goes, and central hears why (the poller shows `degraded` with the reason;
        // the monitor goes `stale`, which is true: nobody checks it here).
        for skipped in std::mem::take(&mut answer.unreadable) {
            let kind = skipped.kind.as_deref().unwrap_or("?");
            let id = skipped
                .id
                .map_or_else(|| "?".to_string(), |id| id.to_string());
            tracing::warn!(monitor_id = %id, kind, "cannot run an assigned monitor: {}", skipped.why);
            self.metrics.report_error(format!(
                "monitor {id} (kind `{kind}`) cannot run on this agent (version {}): {}; upgrade the agent",
                env!("CARGO_PKG_VERSION"),
                skipped.why
            ));
            if let Some(id) = skipped.id {
                if !answer.full {
                    answer.removes.push(id);
                }
            }
        }
        let unchanged = !answer.full && answer.upserts.is_empty() && answer.removes.is_empty();
        if unchanged {
            self.version.send_replace(answer.version);
            self.metrics
                .update_state(|s| s.assignment_version = Some(answer.version));
            return Ok(());
        }
        let update = if answer.full {
            *current = answer.upserts.iter().map(|m| (m.id, m.clone())).collect();
            AssignmentUpdate::Replace(answer.upserts)
        } else {
            for id in &answer.removes {
                current.remove(id);
            }
            for monitor in &answer.upserts {
                current.insert(monitor.id, monitor.clone());
            }
            AssignmentUpdate::Delta {
                upserts: answer.upserts,
                removes: answer.removes,
            }
        };
        tracing::info!(
            version = answer.version,
            monitors = current.len(),
            full = answer.full,
            "assignments updated"
        );
        let _ = self.engine.send(update).await;
        self.version.send_replace(answer.version);
        self.metrics
            .update_state(|s| s.assignment_version = Some(answer.version));
        self.store
            .save_assignments(&CachedAssignments {
                version: answer.version,
                monitors: current.values().cloned().collect(),
            })
            .await
    }
}

pub(super) fn log_uplink_error(what: &str, error: &UplinkError) {
    match error {
        UplinkError::Unreachable(_) => tracing::warn!("{what}: {error}; will retry"),
        // Said once, when it happens, by the client.
        UplinkError::PollerDeleted(_) | UplinkError::PollerDisabled(_) => {
            tracing::debug!("{what}: {error}")
        }
        UplinkError::CredentialsRevoked(_) => tracing::error!(
            "{what}: {error}. Polling continues and results stay queued; give the agent a new \
             POLLER_REGISTRATION_TOKEN and remove the credentials from POLLER_DATA_DIR to re-register"
        ),
        _ => tracing::warn!("{what}: {error}"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::config::UplinkTls;

    /// A monitor changed to a kind this agent does not know (a newer central's) stops being
    /// run here (its older copy is removed from the engine and the cache), the rest of the
    /// answer applies, and the next heartbeat says why.
    #[tokio::test]
    async fn a_monitor_this_agent_cannot_read_is_dropped_and_told() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        let client = CentralClient::new(
            "http://127.0.0.1:9".parse().unwrap(),
            store.clone(),
            &UplinkTls::default(),
        )
        .unwrap();
        let (engine, mut updates) = mpsc::channel(8);
        let (acks, _acks) = mpsc::channel(8);
        let metrics = Arc::new(AgentMetrics::new());
        let sync = AssignmentSync {
            client: Arc::new(client),
            acks,
            store: store.clone(),
            metrics: metrics.clone(),
            engine,
            changed: Arc::new(Notify::new()),
            version: watch::channel(0).0,
        };
        let monitor = |id: &str, kind: &str| {
            json!({"id": id, "name": id, "kind": kind, "target": "https://example.com",
                "interval_ms": 60000, "timeout_ms": 10000, "revision": 1})
        };
        let flow = "0193a4b2-0000-7000-8000-000000000001";
        let api = "0193a4b2-0000-7000-8000-000000000002";
        let mut current = BTreeMap::new();
        let first: AssignmentsResponse = serde_json::from_value(json!({"version": 1,
            "full": true, "upserts": [monitor(flow, "http"), monitor(api, "http")],
            "removes": []}))
        .unwrap();
        sync.apply_changes(first, &mut current).await.unwrap();
        assert_eq!(current.len(), 2);
        assert!(matches!(updates.recv().await, Some(AssignmentUpdate::Replace(m)) if m.len() == 2));

        let second: AssignmentsResponse = serde_json::from_value(json!({"version": 2,
            "full": false, "upserts": [monitor(flow, "multihttp")], "removes": []}))
        .unwrap();
        sync.apply_changes(second, &mut current).await.unwrap();
        let flow: Uuid = flow.parse().unwrap();
        assert_eq!(
            current.keys().collect::<Vec<_>>(),
            [&api.parse::<Uuid>().unwrap()]
        );
        match updates.recv().await {
            Some(AssignmentUpdate::Delta { upserts, removes }) => {
                assert!(upserts.is_empty());
                assert_eq!(removes, [flow]);
            }
            _ => panic!("a delta removing the monitor"),
        }
        let cached = store.cached_assignments().await.unwrap().unwrap();
        assert_eq!(cached.version, 2);
        assert!(cached.monitors.iter().all(|m| m.id != flow));
        let told = metrics.take_errors();
        assert!(
            told.iter()
                .any(|e| e.contains(&flow.to_string()) && e.contains("multihttp")),
            "{told:?}"
        );
    }
}
