//! Turning placement decisions into versioned assignments, and serving them to pollers.

use std::collections::HashMap;

use shared_proto::poller_api::AssignmentsResponse;
use std::time::Duration;

use shared_proto::{AssignedMonitor, PollerMode};
use uuid::Uuid;

use super::maintenance::{stopped_reason, stopping};
use super::placement::{place, Candidate, Decision, Placement};
use super::stored_id;
use super::App;
use crate::domain::Monitor;
use crate::domain::Poller;
use crate::service::error::ServiceResult;
use crate::store::{AssignmentChange, LocationRow, Reach};

impl App {
    /// Re-decides the poller of every monitor and stores what changed under a new version:
    /// only when this replica takes the duties lease, since while nobody held it changes may
    /// have gone unplaced (cost: every monitor, once per lease taken).
    pub async fn reconcile(&self) -> ServiceResult<()> {
        let _one_at_a_time = self.reconcile_lock.lock().await;
        let monitors = self.store.all_monitors().await?;
        self.place_and_store(&monitors).await
    }

    /// Has the lease holder place the monitors these pollers' change can move: `Reach::Own`
    /// for a poller that can only lose monitors (gone, deleted), `Reach::Could` for one that
    /// may take some (registered, back, settled, edited, new capabilities). Requests queue
    /// rather than place, so that none costs a pass over the monitors.
    pub async fn queue_placement(&self, poller_ids: &[String], reach: Reach) -> ServiceResult<()> {
        if poller_ids.is_empty() {
            // Nothing to place; and a wake here would run the liveness step that called this
            // again at once, for ever.
            return Ok(());
        }
        self.store
            .queue_placement(poller_ids, reach, self.now_ms())
            .await?;
        self.cluster.wakes.placement.notify_one();
        Ok(())
    }

    /// Places the monitors the queued pollers' changes can move (the lease holder's
    /// `liveness` duty calls it); returns how many pollers it handled. Cost: the monitors
    /// `store::placement_due` names, not every monitor.
    pub async fn place_queued(&self) -> ServiceResult<usize> {
        let _one_at_a_time = self.reconcile_lock.lock().await;
        let queued = self.store.placement_queue().await?;
        if queued.is_empty() {
            return Ok(0);
        }
        let monitors = self.store.monitors_to_place(&queued).await?;
        self.place_and_store(&monitors).await?;
        self.store.finish_placement(&queued).await?;
        Ok(queued.len())
    }

    /// Re-decides the poller of one monitor (just written by an operator): the cost does not
    /// grow with the number of monitors.
    pub async fn reconcile_monitor(&self, monitor_id: Uuid) -> ServiceResult<()> {
        self.reconcile_monitors(&[monitor_id.to_string()]).await
    }

    /// Re-decides the poller of these monitors (a maintenance window that stops checks began
    /// or ended); cost: these monitors.
    pub async fn reconcile_monitors(&self, ids: &[String]) -> ServiceResult<()> {
        let _one_at_a_time = self.reconcile_lock.lock().await;
        let monitors = self.store.monitors_by_ids(ids).await?;
        self.place_and_store(&monitors).await
    }

    async fn place_and_store(&self, monitors: &[Monitor]) -> ServiceResult<()> {
        let now = self.now_ms();
        let pollers = self.store.all_pollers().await?;
        let candidates = pollers
            .iter()
            .map(|p| self.candidate(p, now))
            .collect::<anyhow::Result<Vec<Candidate>>>()?;
        let ids: Vec<String> = monitors.iter().map(|m| m.id.clone()).collect();
        let mut locations: HashMap<String, Vec<LocationRow>> = HashMap::new();
        for location in self.store.locations_of(Some(&ids)).await? {
            locations
                .entry(location.monitor_id.clone())
                .or_default()
                .push(location);
        }
        let mut changes: Vec<AssignmentChange> = Vec::new();
        // A heartbeat monitor is answered by central (`push`): no poller gets it.
        let polled = monitors.iter().filter(|m| m.kind.runs_on_agents());
        // Maintenance windows that stop checks leave the monitors they name unplaced while
        // under way (alerting places them again at the window's end: `alerts::look`).
        let windows = self.maintenance().windows_now(now).await?;
        for monitor in polled {
            let placement = placement_of(monitor)?;
            let stopped = stopping(&windows, &monitor.id, &monitor.tags)
                .map(|stop| Decision::Unplaced(stopped_reason(&stop)));
            if placement.mode != PollerMode::Multi {
                let stored = Slot::of_monitor(monitor);
                let decision = stopped.unwrap_or_else(|| place(&placement, &candidates));
                changes.extend(stored.change_to(decision));
                continue;
            }
            // Each location is placed in its region; the monitor's own placement (from before
            // it was multi-location) is cleared.
            changes.extend(Slot::of_monitor(monitor).change_to(Decision::Unplaced(String::new())));
            for location in locations.get(&monitor.id).into_iter().flatten() {
                let in_region = Placement {
                    region: Some(location.region.clone()),
                    datacenter: None,
                    current: location
                        .assigned_poller_id
                        .as_deref()
                        .map(stored_id)
                        .transpose()?,
                    ..placement.clone()
                };
                let stored = Slot::of_location(location);
                let decision = stopped
                    .clone()
                    .unwrap_or_else(|| place(&in_region, &candidates));
                changes.extend(stored.change_to(decision));
            }
        }
        if changes.is_empty() {
            return Ok(());
        }
        for change in changes.iter().filter(|c| c.from != c.to) {
            tracing::info!(monitor_id = %change.monitor_id, region = ?change.region, from = ?change.from,
                to = ?change.to, reason = ?change.reason, "monitor placement changed");
        }
        let versioned = self.store.apply_assignments(&changes, now).await?;
        self.publish_version(&versioned);
        Ok(())
    }

    /// Where a monitor that is not stored would run now: one poller, or one per region for
    /// a multi-location monitor, each as that poller would get the monitor; or why none
    /// qualifies. Reads the pollers (a `test` command's placement).
    pub(super) async fn where_it_would_run(
        &self,
        monitor: &Monitor,
    ) -> ServiceResult<Result<Vec<(Uuid, AssignedMonitor)>, String>> {
        if !monitor.kind.runs_on_agents() {
            return Ok(Err(
                "a heartbeat monitor is answered by central: ping its URL to try it".into(),
            ));
        }
        let now = self.now_ms();
        let candidates = self
            .store
            .all_pollers()
            .await?
            .iter()
            .map(|p| self.candidate(p, now))
            .collect::<anyhow::Result<Vec<Candidate>>>()?;
        let placement = placement_of(monitor)?;
        let regions: Vec<Option<String>> = match placement.mode {
            PollerMode::Multi => monitor.regions().iter().cloned().map(Some).collect(),
            _ => vec![None],
        };
        let mut runs = Vec::new();
        for region in regions {
            let in_region = Placement {
                region: region.clone().or(placement.region.clone()),
                ..placement.clone()
            };
            match place(&in_region, &candidates) {
                Decision::Assign(poller) => {
                    runs.push((poller, assigned_monitor(monitor, region.as_ref())?))
                }
                Decision::Unplaced(reason) => return Ok(Err(reason)),
            }
        }
        Ok(Ok(runs))
    }

    fn candidate(&self, poller: &Poller, now: i64) -> anyhow::Result<Candidate> {
        let online =
            self.poller_status(poller, now) != shared_proto::settings_api::PollerStatus::Offline;
        let settle = self.limits.failback_settle.as_millis() as i64;
        Ok(Candidate {
            id: stored_id(&poller.id)?,
            region: poller.region.clone(),
            datacenter: poller.datacenter.clone(),
            capabilities: poller.capabilities.clone(),
            enabled: poller.enabled,
            online,
            settled: online
                && poller
                    .online_since
                    .is_none_or(|since| now - since >= settle),
        })
    }

    /// Which pollers are online now, and which of those have settled, for the liveness
    /// watcher to notice changes.
    pub async fn online_pollers(&self) -> ServiceResult<Vec<(String, bool)>> {
        let now = self.now_ms();
        let mut online = Vec::new();
        for poller in self.store.all_pollers().await? {
            let candidate = self.candidate(&poller, now)?;
            if candidate.online {
                online.push((poller.id, candidate.settled));
            }
        }
        online.sort();
        Ok(online)
    }

    /// A poller's assignments since `since_version`: only what changed (from the assignment
    /// log), or the full set when it asks from 0, from before the compacted log, or from a
    /// version this database never issued (above its newest, or one it skipped at a start:
    /// the agent's history is not this database's, as after a restore). The cost is
    /// proportional to the changes.
    pub async fn assignments_for(
        &self,
        poller: &Poller,
        since_version: i64,
    ) -> ServiceResult<AssignmentsResponse> {
        // Version first, then the changes: the answer is then at least as new as the version.
        let version = self.store.assignment_version().await?;
        let floor = self.store.assignment_log_floor().await?;
        if since_version <= 0
            || since_version < floor
            || since_version > version
            || self.cluster.versions.never_issued(since_version)
        {
            let rows = self.store.monitors_assigned_to(&poller.id).await?;
            let ids: Vec<String> = rows.iter().map(|m| m.id.clone()).collect();
            let located_here = self.locations_on(poller, &ids).await?;
            let upserts = rows
                .iter()
                .map(|m| assigned_monitor(m, located_here.get(&m.id)))
                .collect::<anyhow::Result<_>>()?;
            return Ok(AssignmentsResponse {
                version,
                full: true,
                upserts,
                removes: Vec::new(),
                commands: Vec::new(),
                unreadable: Vec::new(),
            });
        }
        let changed = self
            .store
            .changed_monitors_for(&poller.id, since_version)
            .await?;
        let current = self.store.monitors_to_send(&changed).await?;
        let located_here = self.locations_on(poller, &changed).await?;
        // The log says what changed; the monitors table says what it is now.
        let upserts: Vec<AssignedMonitor> = current
            .iter()
            .filter(|m| {
                let here = m.assigned_poller_id.as_deref() == Some(poller.id.as_str())
                    || located_here.contains_key(&m.id);
                here && !m.paused
            })
            .map(|m| assigned_monitor(m, located_here.get(&m.id)))
            .collect::<anyhow::Result<_>>()?;
        let mut removes = Vec::new();
        for id in &changed {
            let id = stored_id(id)?;
            if !upserts.iter().any(|m| m.id == id) {
                removes.push(id);
            }
        }
        Ok(AssignmentsResponse {
            version,
            full: false,
            upserts,
            removes,
            commands: Vec::new(),
            unreadable: Vec::new(),
        })
    }

    /// Of these monitors, those with a location on `poller`, and the location's region.
    async fn locations_on(
        &self,
        poller: &Poller,
        monitor_ids: &[String],
    ) -> ServiceResult<HashMap<String, String>> {
        Ok(self
            .store
            .locations_of(Some(monitor_ids))
            .await?
            .into_iter()
            .filter(|l| l.assigned_poller_id.as_deref() == Some(poller.id.as_str()))
            .map(|l| (l.monitor_id, l.region))
            .collect())
    }

    /// `assignments_for`, but when nothing changed waits up to `wait` for a change or a
    /// command (long poll): pollers hear of both within moments without accepting
    /// connections.
    pub async fn wait_for_assignments(
        &self,
        poller: &Poller,
        since_version: i64,
        wait: Duration,
    ) -> ServiceResult<AssignmentsResponse> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            // Subscribe before looking, so that a change in between is not missed.
            let mut changed = self.cluster.versions.subscribe();
            let mut rung = self.cluster.bells.subscribe();
            rung.borrow_and_update();
            // This replica hears of every new version and whom it concerns (its own writes,
            // and the others' through `wakeups`), so a poller that has every version that
            // changed its monitors has nothing to fetch: it waits, and is answered at its
            // deadline, without a database query. (Its answer keeps its version: a version
            // published late, out of order, may still concern it.)
            let newest = *changed.borrow_and_update();
            let up_to_date = since_version > 0
                && since_version <= newest
                && !self.cluster.versions.never_issued(since_version)
                && self.cluster.versions.last_change_for(&poller.id) <= since_version;
            let timed_out = tokio::time::Instant::now() >= deadline;
            let to_send = self.commands_to_send(poller).await?;
            let commands = to_send.commands;
            if up_to_date && timed_out && commands.is_empty() {
                return Ok(AssignmentsResponse {
                    version: since_version,
                    full: false,
                    upserts: Vec::new(),
                    removes: Vec::new(),
                    commands,
                    unreadable: Vec::new(),
                });
            }
            // With commands the database is read even when this replica thinks the poller is
            // up to date: a command may concern a monitor assigned (on another replica) after
            // this replica last heard of a version, and its upsert must come first.
            if !up_to_date || !commands.is_empty() {
                let mut answer = self.assignments_for(poller, since_version).await?;
                let news = answer.full
                    || !answer.upserts.is_empty()
                    || !answer.removes.is_empty()
                    || !commands.is_empty();
                // After the changes in the same answer: a command may concern a monitor
                // this answer assigns.
                answer.commands = commands;
                if news || timed_out {
                    return Ok(answer);
                }
            }
            // A command handed over without an answer is offered again when its time comes.
            let again = to_send.again_at.map_or(deadline, |at| {
                let wait = Duration::from_millis((at - self.now_ms()).max(0) as u64);
                deadline.min(tokio::time::Instant::now() + wait)
            });
            tokio::select! {
                _ = changed.changed() => {}
                _ = rung.changed() => {}
                _ = tokio::time::sleep_until(again) => {}
                _ = tokio::time::sleep_until(deadline) => {}
            }
        }
    }

    /// Drops engine events, poller status changes and settled notifications older than 30
    /// days.
    pub async fn prune_history(&self) -> ServiceResult<()> {
        let before = self.now_ms() - 30 * 24 * 3600 * 1000;
        let pruned = self.store.prune_history(before).await?
            + self.store.prune_notifications(before).await?
            + self.store.prune_sessions(self.now_ms()).await?;
        if pruned > 0 {
            tracing::info!(
                rows = pruned,
                "engine events, status changes and notifications older than 30 days pruned"
            );
        }
        // Operators' commands are read right after they are answered or expire: an hour
        // later nobody will ask (`service::commands`).
        let commands = self
            .store
            .prune_commands(self.now_ms() - 3600 * 1000)
            .await?;
        if commands > 0 {
            tracing::debug!(rows = commands, "expired commands pruned");
        }
        Ok(())
    }

    /// Drops assignment-log entries older than a day.
    pub async fn compact_assignment_log(&self) -> ServiceResult<()> {
        let compacted = self
            .store
            .compact_assignment_log(self.now_ms() - 24 * 3600 * 1000)
            .await?;
        if compacted > 0 {
            tracing::info!(entries = compacted, "assignment log compacted");
        }
        Ok(())
    }
}

/// One placement as stored: a monitor's own, or one location's.
struct Slot<'a> {
    monitor_id: &'a str,
    region: Option<&'a str>,
    poller: Option<&'a String>,
    reason: Option<&'a String>,
}

impl<'a> Slot<'a> {
    fn of_monitor(monitor: &'a Monitor) -> Self {
        Slot {
            monitor_id: &monitor.id,
            region: None,
            poller: monitor.assigned_poller_id.as_ref(),
            reason: monitor.placement_reason.as_ref(),
        }
    }

    fn of_location(location: &'a LocationRow) -> Self {
        Slot {
            monitor_id: &location.monitor_id,
            region: Some(&location.region),
            poller: location.assigned_poller_id.as_ref(),
            reason: location.placement_reason.as_ref(),
        }
    }

    /// The change that stores `decision`, if it differs from what is stored. An empty unplaced
    /// reason clears the slot without a reason (a multi-location monitor's own placement).
    fn change_to(&self, decision: Decision) -> Option<AssignmentChange> {
        let (to, reason) = match decision {
            Decision::Assign(poller) => (Some(poller.to_string()), None),
            Decision::Unplaced(reason) if reason.is_empty() => (None, None),
            Decision::Unplaced(reason) => (None, Some(reason)),
        };
        (to.as_ref() != self.poller || reason.as_ref() != self.reason).then(|| AssignmentChange {
            monitor_id: self.monitor_id.to_string(),
            region: self.region.map(str::to_string),
            from: self.poller.cloned(),
            to,
            reason,
        })
    }
}

fn placement_of(monitor: &Monitor) -> anyhow::Result<Placement> {
    let mode = monitor.poller_mode;
    Ok(Placement {
        monitor_id: stored_id(&monitor.id)?,
        kind: monitor.kind.as_str().to_string(),
        mode,
        pinned: monitor.poller_id.as_deref().map(stored_id).transpose()?,
        region: monitor.poller_region.clone(),
        datacenter: monitor.poller_datacenter.clone(),
        capability: monitor.poller_capability.clone(),
        failover: monitor.failover.unwrap_or(mode != PollerMode::Pinned),
        current: monitor
            .assigned_poller_id
            .as_deref()
            .map(stored_id)
            .transpose()?,
    })
}

/// A stored monitor as its agent gets it (for a location of a multi-location monitor, with that
/// location's share of the interval as its phase); a corrupt row is an error, never silently
/// left out.
fn assigned_monitor(row: &Monitor, region: Option<&String>) -> anyhow::Result<AssignedMonitor> {
    let regions = row.regions();
    let phase_ms = region
        .and_then(|r| regions.iter().position(|x| x == r))
        .map(|index| row.interval_ms.max(0) as u64 * index as u64 / regions.len() as u64);
    Ok(AssignedMonitor {
        id: stored_id(&row.id)?,
        name: row.name.clone(),
        kind: row.kind,
        target: row.target.clone(),
        interval_ms: row.interval_ms.max(0) as u64,
        timeout_ms: row.timeout_ms.max(0) as u64,
        settings: row.settings.clone().into_iter().collect(),
        revision: row.revision,
        phase_ms,
    })
}
