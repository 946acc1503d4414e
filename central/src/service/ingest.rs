//! Result ingestion: validate each result, check the poller may report it, store it once.

use std::collections::{HashMap, HashSet};

use serde::de::{IgnoredAny, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use shared_proto::poller_api::{
    CheckResult, RejectedResult, ResultsAck, MAX_BATCH_RESULTS, MAX_RESULT_LATENCY_MS,
    MAX_RESULT_META_BYTES, MAX_RESULT_MSG_LEN,
};
use shared_proto::settings::MAX_DELIBERATE_DELAY_MS;
use shared_proto::ValidationError;
use uuid::Uuid;

use super::maintenance::schedule::Placement;
use super::maintenance::{quiet_of, spans_of, tags_of, windows_of, QUIET_LOOKBACK_MS};
use super::push::schedule::Schedule;
use super::push::timeline_interval;
use super::quorum;
use super::status::{self, Verdict, VerdictState};
use super::statuses::thresholds_of;
use super::uptime::{pause_of, Timeline};
use super::App;
use crate::error::{ApiError, ApiResult};
use crate::store::{
    DependencyDiff, DependencyReport, DependencyRow, IngestRules, Ingested, Intake, NewResult,
    OwnershipRow, PollerRow, StoredVerdict, TimeCredit, TimePoint, WindowRow,
};

/// After a monitor moves, its previous poller may still deliver what it measured before.
const REASSIGNMENT_GRACE_MS: i64 = 15 * 60 * 1000;
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
    pub async fn ingest(&self, poller: &PollerRow, batch: IncomingBatch) -> ApiResult<ResultsAck> {
        if batch.results.total > MAX_BATCH_RESULTS {
            return Err(ApiError::PayloadTooLarge(format!(
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
            // splits the batch until it can drop that one result (uplink::upload). Rules the
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
    ) -> ApiResult<(Ingested, Decision)> {
        let (ingested, decision) = self
            .store
            .ingest_upload(upload.poller_id, upload, upload.now)
            .await?;
        if ingested.marked || ingested.dependency_notices {
            // Monitors were marked due with them, or dependencies changed that call for a
            // notice: alerting looks now, not at its tick.
            self.cluster.wakes.alerting.notify_one();
        }
        Ok((ingested, decision))
    }
}

/// Who sent an upload, which says what its results must pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Sender {
    /// A poller: each result must come from a poller that runs its monitor (or did until
    /// recently, `reporting_slot`), and takes that placement's location.
    Poller,
    /// Central itself (a heartbeat monitor's ping or lateness, poller id nil): every result
    /// stands.
    Central,
}

/// An upload, as ingest decides it inside the transaction that stores it (`store::Intake`):
/// which of its results stand, by the placements stored then, and the rules of their monitors.
pub(super) struct Upload<'a> {
    poller_id: &'a str,
    poller_region: Option<&'a str>,
    /// Its results, each id once; a poller's without a location yet (its placement's).
    results: Vec<NewResult>,
    monitor_ids: Vec<String>,
    sender: Sender,
    now: i64,
}

impl<'a> Upload<'a> {
    pub(super) fn new(
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
pub(super) struct Decision {
    /// The results that stand, each stored unless it was before.
    results: Vec<NewResult>,
    /// The others, and why.
    rejected: Vec<RejectedResult>,
    /// The placements of the upload's monitors, by id.
    owners: HashMap<String, Vec<OwnershipRow>>,
    rules: MonitorRules,
    /// The time maintenance windows matter to, `[from, until)`: from the oldest result that
    /// stands, less the longest time a result stands for (an hour or so; a heartbeat's, up to
    /// its longest wait), to a little after now.
    span: Option<(i64, i64)>,
}

impl Intake for Upload<'_> {
    type Decision = Decision;

    fn monitor_ids(&self) -> &[String] {
        &self.monitor_ids
    }

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

    fn windows_from(&self, decision: &Decision) -> Option<i64> {
        decision.span.map(|(from, _)| from)
    }

    fn cover(&self, decision: &mut Decision, windows: Vec<WindowRow>) {
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

    fn batch<'d>(&'d self, decision: &'d Decision) -> (&'d [NewResult], &'d dyn IngestRules) {
        (&decision.results, &decision.rules)
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
        let schedule = Schedule::of(&slot.kind, &slot.settings, slot.interval_ms);
        Some(MonitorRule {
            thresholds: thresholds_of(&slot.kind, &slot.settings),
            notify_dependencies: super::dependencies::rules::notifies(&slot.kind, &slot.settings),
            interval_ms: slot.interval_ms,
            timeline: Timeline::of(
                timeline_interval(slot.interval_ms, schedule.as_ref()),
                quorum,
                pause_of(slot.paused_at, slot.resumed_at),
            ),
            quiet: Vec::new(),
            schedule,
        })
    }
}

/// The rules of each monitor in a batch: how ingest moves the stored verdict states and the
/// time credited to the rollups (`store::insert_results` keeps them, this decides them).
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
        super::dependencies::rules::diff(monitor_id, region, at, before, report, notify)
    }

    fn advance(&self, monitor_id: &str, state: StoredVerdict, result: &str) -> StoredVerdict {
        let Some(verdict) = Verdict::parse(result) else {
            return state;
        };
        let (down, up) = self.0.get(monitor_id).map_or((1, 1), |m| m.thresholds);
        let current = VerdictState {
            confirmed: state.confirmed.as_deref().and_then(Verdict::parse),
            run: state
                .status
                .as_deref()
                .and_then(Verdict::parse)
                .map(|v| (v, state.run_length.clamp(0, i64::from(u32::MAX)) as u32)),
        };
        let next = status::advance(current, verdict, down, up);
        StoredVerdict {
            confirmed: next.confirmed.map(|v| v.as_str().to_string()),
            status: next.run.map(|(v, _)| v.as_str().to_string()),
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

/// A result cut to what central keeps of one (`msg`, `meta`), for a result kept outside the
/// results table (a `test` command's).
pub(super) fn bounded_result(mut result: CheckResult) -> CheckResult {
    bound_msg(&mut result.msg);
    result.meta = bounded_meta(result.meta).0;
    result
}

/// What a NUL becomes: PostgreSQL's text and `jsonb` cannot hold one, and a poller's text (a
/// target's error, a health document's) may carry it. Refusing the result would stall the
/// poller's queue behind it; the character is replaced instead.
const NUL_STAND_IN: &str = "\u{FFFD}";

fn bound_msg(msg: &mut String) {
    if msg.contains('\0') {
        *msg = msg.replace('\0', NUL_STAND_IN);
    }
    if msg.len() > MAX_RESULT_MSG_LEN {
        let cut = (0..=MAX_RESULT_MSG_LEN)
            .rev()
            .find(|i| msg.is_char_boundary(*i))
            .unwrap_or(0);
        msg.truncate(cut);
    }
}

fn new_result(result: CheckResult, region: Option<String>) -> NewResult {
    let mut msg = result.msg;
    bound_msg(&mut msg);
    let ts = result.ts.timestamp_millis();
    let (meta, meta_text) = bounded_meta(result.meta);
    NewResult {
        id: result.id.to_string(),
        monitor_id: result.monitor_id.to_string(),
        region,
        ts,
        status: result.status.as_str().to_string(),
        latency_ms: result.latency_ms.map(|l| l as i64),
        // The agent's word for when it checks next, believed up to the longest delay a setting
        // allows: a later one would keep a silent monitor from ever turning stale.
        next_due_at: meta
            .pointer("/engine/next_due_at")
            .and_then(|v| v.as_str())
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map(|t| {
                t.timestamp_millis()
                    .min(ts.saturating_add(MAX_DELIBERATE_DELAY_MS as i64))
            }),
        dependencies: super::dependencies::rules::report_of(&meta),
        msg,
        meta: meta_text,
    }
}

/// `meta` as kept: whole up to `MAX_RESULT_META_BYTES`, else a note of its size with its
/// `engine` part (when that alone fits), so that one result cannot cost central more than a
/// few dozen KiB however much a target or a poller put in it. With its JSON text (made once:
/// this runs for every result).
fn bounded_meta(meta: Value) -> (Value, String) {
    let text = meta.to_string();
    // Serialised, a NUL is always this escape: only then is the value walked.
    let (meta, text) = if text.contains("\\u0000") {
        let meta = without_nul(meta);
        let text = meta.to_string();
        (meta, text)
    } else {
        (meta, text)
    };
    let size = text.len();
    if size <= MAX_RESULT_META_BYTES {
        return (meta, text);
    }
    let mut kept = serde_json::Map::new();
    kept.insert(
        "meta_dropped".into(),
        json!({"bytes": size, "limit": MAX_RESULT_META_BYTES}),
    );
    if let Some(engine) = meta
        .get("engine")
        .filter(|e| e.to_string().len() <= MAX_RESULT_META_BYTES / 2)
    {
        kept.insert("engine".into(), engine.clone());
    }
    let kept = Value::Object(kept);
    let text = kept.to_string();
    (kept, text)
}

/// `value` with every NUL in its texts and keys replaced (`NUL_STAND_IN`).
fn without_nul(value: Value) -> Value {
    let clean = |text: String| {
        if text.contains('\0') {
            text.replace('\0', NUL_STAND_IN)
        } else {
            text
        }
    };
    match value {
        Value::String(text) => Value::String(clean(text)),
        Value::Array(items) => Value::Array(items.into_iter().map(without_nul).collect()),
        Value::Object(fields) => Value::Object(
            fields
                .into_iter()
                .map(|(key, value)| (clean(key), without_nul(value)))
                .collect(),
        ),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nuls_are_replaced_in_the_message_and_every_text_of_meta() {
        let mut meta_result = result(json!({"dependencies": [
            {"name": "db", "healthy": false, "error": "a\u{0}b", "contact": {"k\u{0}": ["\u{0}"]}}
        ]}));
        meta_result.msg = "unhealthy dependencies: db (a\u{0}b)".into();
        let kept = new_result(meta_result, None);
        assert!(!kept.msg.contains('\0'), "{}", kept.msg);
        assert!(!kept.meta.contains("\\u0000"), "{}", kept.meta);
        let report = kept.dependencies.unwrap();
        assert_eq!(report.items[0].error.as_deref(), Some("a\u{FFFD}b"));
    }

    fn result(meta: Value) -> CheckResult {
        CheckResult {
            id: Uuid::new_v4(),
            monitor_id: Uuid::new_v4(),
            ts: "2026-11-24T10:00:00Z".parse().unwrap(),
            status: shared_proto::poller_api::ResultStatus::Up,
            latency_ms: Some(5),
            msg: String::new(),
            meta,
        }
    }

    #[test]
    fn a_large_meta_is_replaced_by_its_size_and_keeps_the_engine_part() {
        let huge = "x".repeat(MAX_RESULT_META_BYTES + 1);
        let kept = new_result(
            result(json!({"body": huge, "engine": {"next_due_at": "2026-11-24T10:00:30Z"}})),
            None,
        );
        assert!(kept.meta.len() < 1_024, "{}", kept.meta.len());
        let meta: Value = serde_json::from_str(&kept.meta).unwrap();
        assert_eq!(meta["meta_dropped"]["limit"], MAX_RESULT_META_BYTES);
        assert_eq!(meta["engine"]["next_due_at"], "2026-11-24T10:00:30Z");
        let ts = "2026-11-24T10:00:00Z"
            .parse::<chrono::DateTime<chrono::Utc>>()
            .unwrap();
        assert_eq!(kept.next_due_at, Some(ts.timestamp_millis() + 30_000));

        let small = json!({"status_code": 200});
        assert_eq!(
            new_result(result(small.clone()), None).meta,
            small.to_string()
        );
    }

    #[test]
    fn an_announced_next_check_is_believed_up_to_the_longest_deliberate_delay() {
        let far = new_result(
            result(json!({"engine": {"next_due_at": "2100-01-01T00:00:00Z"}})),
            None,
        );
        let ts = "2026-11-24T10:00:00Z"
            .parse::<chrono::DateTime<chrono::Utc>>()
            .unwrap();
        assert_eq!(
            far.next_due_at,
            Some(ts.timestamp_millis() + MAX_DELIBERATE_DELAY_MS as i64)
        );
    }
}
