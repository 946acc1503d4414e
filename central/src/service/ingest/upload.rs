//! Which results of an upload stand, and by which rules: decided inside the transaction that
//! stores them (`store::IngestWork`), from the placements and maintenance windows stored then. A
//! poller's result stands if the poller runs its monitor (or did until a recent move) and
//! takes that placement's location; central's own results always stand. Must not: parse the
//! wire format (`ingest`) or keep what the store keeps (`store::results`).

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};
use shared_proto::poller_api::RejectedResult;
use shared_proto::CheckKind;

use crate::domain::MaintenanceWindow;
use crate::service::maintenance::schedule::Placement;
use crate::service::maintenance::{quiet_of, spans_of, tags_of, windows_of, QUIET_LOOKBACK_MS};
use crate::service::push::schedule::Schedule;
use crate::service::quorum;
use crate::service::status::{self, Verdict, VerdictState};
use crate::service::statuses::thresholds_of;
use crate::service::uptime::{pause_of, Timeline};
use crate::store::{
    DependencyDiff, DependencyReport, DependencyRow, IngestTx, IngestWork, NewResult, OwnershipRow,
    StoredVerdict, TimeCredit, TimePoint,
};

use super::batch::{store_batch, IngestRules, Ingested};

/// After a monitor moves, its previous poller may still deliver what it measured before.
const REASSIGNMENT_GRACE_MS: i64 = 15 * 60 * 1000;

/// Who sent an upload, which says what its results must pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::service) enum Sender {
    /// A poller: each result must come from a poller that runs its monitor (or did until
    /// recently, `reporting_slot`), and takes that placement's location.
    Poller,
    /// Central itself (a heartbeat monitor's ping or lateness, poller id nil): every result
    /// stands.
    Central,
}

/// An upload, as ingest decides it inside the transaction that stores it (`store::IngestWork`):
/// which of its results stand, by the placements stored then, and the rules of their monitors.
pub(in crate::service) struct Upload<'a> {
    pub(super) poller_id: &'a str,
    poller_region: Option<&'a str>,
    /// Its results, each id once; a poller's without a location yet (its placement's).
    results: Vec<NewResult>,
    monitor_ids: Vec<String>,
    sender: Sender,
    pub(super) now: i64,
}

impl<'a> Upload<'a> {
    pub(in crate::service) fn new(
        poller_id: &'a str,
        poller_region: Option<&'a str>,
        results: Vec<NewResult>,
        sender: Sender,
        now: i64,
    ) -> Self {
        let monitor_ids = NewResult::monitors_named(&results);
        Upload {
            poller_id,
            poller_region,
            results,
            monitor_ids,
            sender,
            now,
        }
    }
}

/// What stands of an upload (`Upload`).
pub(in crate::service) struct Decision {
    /// The results that stand, each stored unless it was before.
    pub(super) results: Vec<NewResult>,
    /// The others, and why.
    pub(super) rejected: Vec<RejectedResult>,
    /// The placements of the upload's monitors, by id.
    owners: HashMap<String, Vec<OwnershipRow>>,
    rules: MonitorRules,
    /// The time maintenance windows matter to, `[from, until)`: from the oldest result that
    /// stands, less the longest time a result stands for (an hour or so; a heartbeat's, up to
    /// its longest wait), to a little after now.
    span: Option<(i64, i64)>,
}

impl IngestWork for Upload<'_> {
    type Output = (Ingested, Decision);

    /// Reads the placements of the monitors the upload names (held first), decides what
    /// stands, reads the maintenance windows around it, and stores what stands.
    async fn run(&self, tx: &mut IngestTx<'_>) -> anyhow::Result<(Ingested, Decision)> {
        let owners = tx.placements(&self.monitor_ids).await?;
        let mut decision = self.accept(owners);
        if let Some((from, _)) = decision.span {
            let windows = tx.windows_not_over(from).await?;
            self.cover(&mut decision, windows);
        }
        let ingested = store_batch(tx, &decision.results, &decision.rules).await?;
        Ok((ingested, decision))
    }
}

impl Upload<'_> {
    /// Decides which results stand and by which rules, given the placements of the
    /// monitors the upload names as stored now (an unknown monitor has none).
    fn accept(&self, rows: Vec<OwnershipRow>) -> Decision {
        let mut owners: HashMap<String, Vec<OwnershipRow>> = HashMap::new();
        for row in rows {
            owners.entry(row.id.clone()).or_default().push(row);
        }
        let mut results = Vec::with_capacity(self.results.len());
        let mut rejected = Vec::new();
        for result in &self.results {
            let slots = owners.get(&result.monitor_id);
            match (self.sender, slots) {
                (Sender::Central, _) => results.push(result.clone()),
                (Sender::Poller, None) => rejected.push(RejectedResult {
                    id: result.id.clone(),
                    reason: format!("monitor {} does not exist (deleted?)", result.monitor_id),
                }),
                (Sender::Poller, Some(slots)) => {
                    match reporting_slot(slots, self.poller_id, self.now) {
                        Some(slot) => results.push(NewResult {
                            region: slot.region.clone(),
                            ..result.clone()
                        }),
                        None => rejected.push(RejectedResult {
                            id: result.id.clone(),
                            reason: format!(
                                "monitor {} is not assigned to this poller",
                                result.monitor_id
                            ),
                        }),
                    }
                }
            }
        }
        let rules: HashMap<String, MonitorRule> = owners
            .iter()
            .filter_map(|(id, slots)| Some((id.clone(), MonitorRule::of(slots)?)))
            .collect();
        let reach = rules
            .values()
            .map(|r| r.timeline.cap_ms)
            .max()
            .unwrap_or_default()
            .max(QUIET_LOOKBACK_MS);
        let span = results
            .iter()
            .map(|r| r.ts)
            .min()
            .map(|oldest| (oldest.saturating_sub(reach), self.now + QUIET_LOOKBACK_MS));
        Decision {
            results,
            rejected,
            owners,
            rules: MonitorRules(rules),
            span,
        }
    }

    /// Gives the rules the time maintenance `windows` cover.
    fn cover(&self, decision: &mut Decision, windows: Vec<MaintenanceWindow>) {
        let Some((from, until)) = decision.span else {
            return;
        };
        let windows = spans_of(windows_of(&windows), from, until);
        if windows.is_empty() {
            return;
        }
        for (id, rule) in decision.rules.0.iter_mut() {
            let slots = &decision.owners[id];
            let placement = Placement {
                monitor_id: id,
                pollers: slots
                    .iter()
                    .filter_map(|s| s.assigned_poller_id.as_deref())
                    .chain([self.poller_id])
                    .collect(),
                regions: slots
                    .iter()
                    .filter_map(|s| s.region.as_deref())
                    .chain(self.poller_region)
                    .collect(),
                tags: slots
                    .first()
                    .map(|s| tags_of(s.tags.as_deref()))
                    .unwrap_or_default(),
            };
            rule.quiet = quiet_of(&windows, &placement);
        }
    }
}

/// What ingest applies to one monitor's results: its confirmation thresholds and how its
/// results stand for time.
struct MonitorRule {
    thresholds: (u32, u32),
    /// `settings.notify_dependencies`.
    notify_dependencies: bool,
    interval_ms: i64,
    timeline: Timeline,
    /// The time maintenance windows cover around this batch (`maintenance::quiet_of`).
    quiet: Vec<(i64, i64)>,
    /// A heartbeat monitor's schedule: when its silence turns into a failure.
    schedule: Option<Schedule>,
}

impl MonitorRule {
    /// From a monitor's placements (one, or one per location), which all carry its settings.
    fn of(slots: &[OwnershipRow]) -> Option<Self> {
        let slot = slots.first()?;
        let multi = slot.region.is_some();
        let quorum = multi.then(|| quorum::effective(slot.quorum, slots.len()));
        // A kind central never writes has no rule (the defaults: `MonitorRules`); settings
        // that do not parse are the kind's defaults. Parsed once, for every rule below.
        let kind = CheckKind::parse(&slot.kind)?;
        let settings: Map<String, Value> = serde_json::from_str(&slot.settings).unwrap_or_default();
        let schedule = Schedule::of(kind, &settings, slot.interval_ms);
        Some(MonitorRule {
            thresholds: thresholds_of(kind, &settings),
            notify_dependencies: crate::service::dependencies::rules::notifies(kind, &settings),
            interval_ms: slot.interval_ms,
            timeline: Timeline::for_kind(
                kind,
                &settings,
                (slot.interval_ms, slot.timeout_ms),
                schedule.as_ref(),
                quorum,
                pause_of(slot.paused_at, slot.resumed_at),
            ),
            quiet: Vec::new(),
            schedule,
        })
    }
}

/// The rules of each monitor in a batch: how ingest moves the stored verdict states and the
/// time credited to the rollups (the store keeps them, `batch` applies these).
struct MonitorRules(HashMap<String, MonitorRule>);

impl IngestRules for MonitorRules {
    fn interval_ms(&self, monitor_id: &str) -> i64 {
        self.0.get(monitor_id).map_or(0, |m| m.interval_ms)
    }

    fn unchanged_until(&self, monitor_id: &str, ts: i64) -> i64 {
        // A monitor this batch does not know (none: every stored result's monitor has a rule)
        // is looked at, as if overdue.
        self.0
            .get(monitor_id)
            .map_or(i64::MIN, |m| match &m.schedule {
                Some(schedule) => schedule.late_after(ts),
                None => status::unchanged_until(ts, m.interval_ms),
            })
    }

    fn lookback_ms(&self, monitor_id: &str) -> i64 {
        self.0.get(monitor_id).map_or(0, |m| m.timeline.cap_ms)
    }

    fn credit_time(
        &self,
        monitor_id: &str,
        region: Option<&str>,
        history: &[&TimePoint],
        new: &HashSet<&str>,
        old_until: Option<i64>,
        new_until: i64,
    ) -> Vec<TimeCredit> {
        let Some(rule) = self.0.get(monitor_id) else {
            return Vec::new();
        };
        let timeline = match region {
            Some(_) => rule.timeline.location(),
            None => rule.timeline,
        };
        timeline.credit_outside(&rule.quiet, history, new, old_until, new_until)
    }

    fn dependency_diff(
        &self,
        monitor_id: &str,
        region: &str,
        at: i64,
        before: &[DependencyRow],
        report: &DependencyReport,
    ) -> DependencyDiff {
        let notify = self
            .0
            .get(monitor_id)
            .is_some_and(|m| m.notify_dependencies);
        crate::service::dependencies::rules::diff(monitor_id, region, at, before, report, notify)
    }

    fn advance(&self, monitor_id: &str, state: StoredVerdict, verdict: Verdict) -> StoredVerdict {
        let (down, up) = self.0.get(monitor_id).map_or((1, 1), |m| m.thresholds);
        let current = VerdictState {
            confirmed: state.confirmed,
            run: state
                .status
                .map(|v| (v, state.run_length.clamp(0, i64::from(u32::MAX)) as u32)),
        };
        let next = status::advance(current, verdict, down, up);
        StoredVerdict {
            confirmed: next.confirmed,
            status: next.run.map(|(v, _)| v),
            run_length: next.run.map_or(0, |(_, n)| i64::from(n)),
        }
    }
}

/// The placement (the monitor's one, or one of its locations) on whose behalf the poller
/// reports: where it runs the monitor now, else where it ran it until a recent move.
fn reporting_slot<'a>(
    slots: &'a [OwnershipRow],
    poller_id: &str,
    now: i64,
) -> Option<&'a OwnershipRow> {
    let current = slots
        .iter()
        .find(|s| s.assigned_poller_id.as_deref() == Some(poller_id));
    current.or_else(|| {
        slots.iter().find(|s| {
            s.previous_poller_id.as_deref() == Some(poller_id)
                && s.assigned_at
                    .is_some_and(|at| now - at <= REASSIGNMENT_GRACE_MS)
        })
    })
}
