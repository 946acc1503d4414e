//! Storing a batch of results that stand, driven step by step on ingest's transaction
//! (`store::IngestTx`): insert what is new, then move each monitor's and location's verdict,
//! credit the time the results stand for, record the dependencies their documents report,
//! and tell alerting what is news. The rules of each step are the monitors' (`IngestRules`);
//! the store only reads and writes. Must not: decide which results stand (`upload`) or write
//! SQL.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use shared_proto::poller_api::Verdict;

use crate::store::{
    Confirmation, Credits, DependencyDiff, DependencyReport, DependencyRow, IngestTx, IngestWork,
    NewResult, StatusKey, StatusTable, StatusesBefore, Store, StoredVerdict, TimeCredit, TimePoint,
};

/// How a batch's monitors' results move what ingest keeps: their verdicts, the time they
/// stand for, their dependencies, and when they can change with time alone. The monitors'
/// own rules (`upload::MonitorRules`), or simpler ones in the store's tests.
pub trait IngestRules: Sync {
    /// Moves a stored verdict state by one up/down result of `monitor_id`
    /// (`service::status::advance`).
    fn advance(&self, monitor_id: &str, state: StoredVerdict, result: Verdict) -> StoredVerdict;

    /// The instant before which a monitor whose newest result was checked at `ts` cannot
    /// change its status with time alone (`service::status::unchanged_until`).
    fn unchanged_until(&self, monitor_id: &str, ts: i64) -> i64;

    /// The interval `unchanged_until` assumes for a monitor (as read for this batch).
    fn interval_ms(&self, monitor_id: &str) -> i64;

    /// How far before the time it credits from a monitor's history must reach: the longest a
    /// result of it stands for.
    fn lookback_ms(&self, monitor_id: &str) -> i64;

    /// What new results change in the time credited to a monitor (`region` `None`) or one of
    /// its locations, per bucket (`service::uptime::Timeline::credit`), given its history
    /// (`store::TimeSpan`); `new` names the new results.
    fn credit_time(
        &self,
        monitor_id: &str,
        region: Option<&str>,
        history: &[&TimePoint],
        new: &HashSet<&str>,
        old_until: Option<i64>,
        new_until: i64,
    ) -> Vec<TimeCredit>;

    /// What a document checked at `at` changes in the dependencies of a monitor's location
    /// (`region` `""` for one checked from one place), stored as `before`
    /// (`service::dependencies::rules::diff`).
    fn dependency_diff(
        &self,
        monitor_id: &str,
        region: &str,
        at: i64,
        before: &[DependencyRow],
        report: &DependencyReport,
    ) -> DependencyDiff;
}

/// What storing a batch did.
#[derive(Debug, Default)]
pub struct Ingested {
    /// The ids it stored (the others were stored before: duplicates).
    pub stored: HashSet<String>,
    /// Whether it marked any monitor due for a look (news, or a monitor not steady).
    pub marked: bool,
    /// Whether a dependency's change awaits a notice (`service::dependencies::notices`).
    pub dependency_notices: bool,
    /// When the poller's previous upload was stored, as the database said before this one
    /// (`Some(None)`: none before; `None`: nothing was stored, so it was not read).
    pub previous_upload_at: Option<Option<i64>>,
}

/// Stores `results`, which all stand, by `rules`, as an upload of `poller_id` received at
/// `received_at` stores what stands of it (the store's tests, and tests that drive the store
/// directly; uploads are decided first, `upload`).
pub async fn store_standing(
    store: &Store,
    poller_id: &str,
    results: &[NewResult],
    received_at: i64,
    rules: &(impl IngestRules + Send),
) -> anyhow::Result<Ingested> {
    store
        .ingest(poller_id, received_at, &Standing { results, rules })
        .await
}

/// Results that all stand, and their rules.
struct Standing<'a, R> {
    results: &'a [NewResult],
    rules: &'a R,
}

impl<R: IngestRules> IngestWork for Standing<'_, R> {
    type Output = Ingested;

    async fn run(&self, tx: &mut IngestTx<'_>) -> anyhow::Result<Ingested> {
        // Held first, as an upload's are.
        tx.placements(&NewResult::monitors_named(self.results))
            .await?;
        store_batch(tx, self.results, self.rules).await
    }
}

/// Stores `results` (the ones that stand) on `tx`: each once, a duplicate changing nothing.
/// The derived status of each monitor moves to its newest result by `ts`, never backwards, so
/// late uploads are harmless; a `rate_limited` result updates the message and time but keeps
/// the up/down verdict. Cost: the batch's results and the rows of its monitors.
pub async fn store_batch(
    tx: &mut IngestTx<'_>,
    results: &[NewResult],
    rules: &impl IngestRules,
) -> anyhow::Result<Ingested> {
    if results.is_empty() {
        return Ok(Ingested::default());
    }
    let inserted = tx.insert_new(results).await?;
    let stored: Vec<&NewResult> = results
        .iter()
        .filter(|r| inserted.contains(&r.id))
        .collect();
    // Their status rows as they were before them (locked on PostgreSQL), for both the time
    // they stand for and the verdicts they move.
    let before = tx.status_before(&stored).await?;

    let credits = credit_time(tx, &stored, &before, rules).await?;
    // Each monitor's status, and each location's (results of multi-location monitors);
    // `flipped`: monitors whose verdict (or a location's) moved to another value, news,
    // looked at before the results that only confirm what was known.
    let located: Vec<&NewResult> = stored
        .iter()
        .copied()
        .filter(|r| r.region.is_some())
        .collect();
    let mut flipped = BTreeSet::new();
    for (table, results) in [
        (StatusTable::Monitor, &stored[..]),
        (StatusTable::Location, &located[..]),
    ] {
        let moved = move_verdicts(table, results, rules, &before, &mut flipped);
        tx.move_status_rows(table, results, &moved).await?;
    }
    tx.add_to_rollups(&stored, &credits).await?;
    let dependency_notices = match tx.dependency_ledger(&stored).await? {
        Some(mut ledger) => {
            for document in ledger.moving() {
                let report = document.dependencies.as_ref().expect("a document");
                let region = document.region.as_deref().unwrap_or_default();
                let diff = rules.dependency_diff(
                    &document.monitor_id,
                    region,
                    document.ts,
                    ledger.before(document),
                    report,
                );
                ledger.apply(document, diff);
            }
            tx.record_dependencies(ledger).await?
        }
        None => false,
    };

    // Each monitor's newest stored result of the batch: news, a confirmation that keeps it
    // from going overdue for a while (which a steady monitor takes without a look), or one
    // already overdue on arrival (a queue flushed late), which is looked at. In id order,
    // as the marks are written.
    let mut newest: BTreeMap<&str, i64> = BTreeMap::new();
    for result in &stored {
        let ts = newest
            .entry(result.monitor_id.as_str())
            .or_insert(result.ts);
        *ts = (*ts).max(result.ts);
    }
    let received_at = tx.received_at();
    let mut news = Vec::new();
    let mut overdue = Vec::new();
    let mut confirmed = Vec::new();
    for (id, ts) in newest {
        let until = rules.unchanged_until(id, ts);
        if flipped.contains(id) {
            news.push(id);
        } else if until > received_at {
            confirmed.push(Confirmation {
                id,
                until,
                interval: rules.interval_ms(id),
            });
        } else {
            overdue.push(id);
        }
    }
    let marked = tx.mark_due(&confirmed, &overdue, &news).await?;
    let previous = tx.record_upload().await?;
    Ok(Ingested {
        stored: inserted,
        marked,
        dependency_notices,
        previous_upload_at: Some(previous),
    })
}

/// The time `stored` credits, per monitor and location: what the rules make of the history
/// the store reads around the new results.
async fn credit_time(
    tx: &mut IngestTx<'_>,
    stored: &[&NewResult],
    before: &StatusesBefore,
    rules: &impl IngestRules,
) -> anyhow::Result<Credits> {
    let lookback_ms: BTreeMap<&str, i64> = stored
        .iter()
        .map(|r| (r.monitor_id.as_str(), rules.lookback_ms(&r.monitor_id)))
        .collect();
    let spans = tx.time_spans(stored, before, &lookback_ms).await?;
    let new: HashSet<&str> = stored.iter().map(|r| r.id.as_str()).collect();
    let mut credits = Vec::new();
    for span in &spans {
        let points: Vec<&TimePoint> = span.points.iter().collect();
        let region = span.region.as_deref();
        for credit in rules.credit_time(
            &span.monitor_id,
            region,
            &points,
            &new,
            span.old_until,
            span.new_until,
        ) {
            credits.push((
                span.monitor_id.clone(),
                region.unwrap_or_default().to_string(),
                credit,
            ));
        }
    }
    Ok(credits)
}

/// The verdict states the batch's up/down results move their rows in `table` to: each row's
/// stored state (`before`, read before the batch and locked on PostgreSQL until the
/// transaction ends) moved by the batch's verdicts newer than the row's newest, in check-time
/// order. A verdict older than the row's newest (a late upload) is kept in history but moves
/// nothing. Adds to `flipped` the monitors whose row moved to another status or confirmed
/// verdict.
fn move_verdicts<'a>(
    table: StatusTable,
    results: &[&'a NewResult],
    rules: &impl IngestRules,
    before: &StatusesBefore,
    flipped: &mut BTreeSet<String>,
) -> HashMap<StatusKey<'a>, StoredVerdict> {
    let mut verdicts: BTreeMap<StatusKey<'a>, Vec<(&'a NewResult, Verdict)>> = BTreeMap::new();
    for &result in results {
        if let Some(verdict) = result.status.verdict() {
            verdicts
                .entry(table.key_of(result))
                .or_default()
                .push((result, verdict));
        }
    }
    let mut moved = HashMap::with_capacity(verdicts.len());
    for (key, mut batch) in verdicts {
        batch.sort_by(|(a, _), (b, _)| (a.ts, &a.id).cmp(&(b.ts, &b.id)));
        // The rows are keyed by owned texts (they were read): one key made per row moved.
        let row = before.get(&(key.0.to_string(), key.1.map(str::to_string)));
        let newest = row.and_then(|r| r.verdict_at.zip(r.verdict_result_id.as_deref()));
        let was = row.map_or_else(StoredVerdict::default, |r| StoredVerdict {
            confirmed: r.confirmed,
            status: r.status.verdict(),
            run_length: r.run_length,
        });
        let mut state = was.clone();
        let mut changed = false;
        for (result, verdict) in batch {
            if newest.is_some_and(|(ts, id)| (result.ts, result.id.as_str()) <= (ts, id)) {
                continue;
            }
            state = rules.advance(key.0, state, verdict);
            changed = true;
        }
        if changed {
            if (state.status, state.confirmed) != (was.status, was.confirmed) {
                flipped.insert(key.0.to_string());
            }
            moved.insert(key, state);
        }
    }
    moved
}
