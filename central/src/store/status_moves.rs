//! How a batch of newly stored results moves its status rows (each monitor's `monitor_status`
//! row and each location's `location_status` row): one upsert per row that writes the
//! verdict state the service moved it to (`service::ingest::verdicts`) with the row's newest
//! result, never backwards. Must not: read the rows (`status_rows`), decide how a verdict
//! moves (`service::status`) or store results (`results`).

use std::collections::{BTreeMap, HashMap};
use std::sync::LazyLock;

use shared_proto::poller_api::Verdict;

use super::dialect::json_rows;
use super::results::NewResult;
use super::statements::{Arg, Statements};
use super::Backend;

/// A status row's key, borrowed from the batch: the monitor, and the location for
/// `location_status` (`None` in `monitor_status`).
pub type StatusKey<'a> = (&'a str, Option<&'a str>);

/// Writes the status rows of `results` (the batch's results stored now) in `table`: each row
/// to its newest result, and to the verdict state `moved` holds for it (the service's move,
/// from the rows as they were before the batch), never backwards.
pub(super) async fn write_status_rows<'a>(
    tx: &mut impl Statements,
    backend: Backend,
    poller_id: &str,
    table: StatusTable,
    results: &[&'a NewResult],
    moved: &HashMap<StatusKey<'a>, StoredVerdict>,
) -> anyhow::Result<()> {
    let moves = status_moves(results, table, moved);
    if moves.is_empty() {
        return Ok(());
    }
    let sql = status_upsert(backend, table);
    if backend.binds_each_row() {
        let rows: Vec<Vec<Arg>> = moves.iter().map(|m| m.values(poller_id)).collect();
        tx.execute_each(sql, &rows).await?;
    } else {
        let moves = serde_json::to_string(&moves)?;
        tx.execute(sql, &[poller_id.into(), Arg::from(&moves)])
            .await?;
    }
    Ok(())
}

/// Where a status row is: a monitor's newest result and verdict, or one location's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusTable {
    Monitor = 0,
    Location = 1,
}

/// Moves derived status rows (one per monitor or location: on PostgreSQL all of them as JSON in
/// `$2`, on SQLite one a statement, its fields bound from `$2` on; `$1` the poller)
/// to a result, per kind of news: the up/down verdict moves only to a newer up/down result (by
/// check time, then id), and the newest result (its time, message, latency, next check) only
/// to a newer result of any kind. So a late result never hides a newer verdict, and a newer
/// `rate_limited` result never hides a late up/down one.
fn status_upsert(backend: Backend, table: StatusTable) -> &'static str {
    // Built once: built for every upload, the text took 0.8 % of central's samples at 100,000
    // monitors (docs/benchmarks.md). A constant, not state: the same four texts every time.
    static TEXTS: LazyLock<[[String; 2]; 2]> = LazyLock::new(|| {
        Backend::BOTH.map(|backend| {
            [StatusTable::Monitor, StatusTable::Location]
                .map(|table| build_status_upsert(backend, table))
        })
    });
    &TEXTS[backend as usize][table as usize]
}

/// `status_upsert`'s text for one backend and table.
fn build_status_upsert(backend: Backend, table: StatusTable) -> String {
    const TEMPLATE: &str = "\
    INSERT INTO STATUS_TABLE (monitor_id, KEY_COLUMNS status, poller_id, last_result_id, \
        last_result_at, latency_ms, message, next_due_at, verdict_at, verdict_result_id, \
        confirmed, run_length) \
    SELECT r.value ->> 'monitor_id', KEY_VALUES r.value ->> 'status', $1, r.value ->> 'id', \
        CAST(r.value ->> 'ts' AS BIGINT), CAST(r.value ->> 'latency_ms' AS BIGINT), \
        r.value ->> 'msg', CAST(r.value ->> 'next_due_at' AS BIGINT), \
        CAST(r.value ->> 'verdict_at' AS BIGINT), r.value ->> 'verdict_result_id', \
        r.value ->> 'confirmed', COALESCE(CAST(r.value ->> 'run_length' AS BIGINT), 0) \
    FROM ROWS_SOURCE WHERE true \
    ON CONFLICT (monitor_id KEY_CONFLICT) DO UPDATE SET \
        status = CASE WHEN (VERDICT_IS_NEWER) THEN excluded.status ELSE STATUS_TABLE.status END, \
        confirmed = CASE WHEN (VERDICT_IS_NEWER) THEN excluded.confirmed \
            ELSE STATUS_TABLE.confirmed END, \
        run_length = CASE WHEN (VERDICT_IS_NEWER) THEN excluded.run_length \
            ELSE STATUS_TABLE.run_length END, \
        verdict_at = CASE WHEN (VERDICT_IS_NEWER) THEN excluded.verdict_at \
            ELSE STATUS_TABLE.verdict_at END, \
        verdict_result_id = CASE WHEN (VERDICT_IS_NEWER) THEN excluded.verdict_result_id \
            ELSE STATUS_TABLE.verdict_result_id END, \
        poller_id = CASE WHEN (RESULT_IS_NEWER) THEN excluded.poller_id \
            ELSE STATUS_TABLE.poller_id END, \
        last_result_id = CASE WHEN (RESULT_IS_NEWER) THEN excluded.last_result_id \
            ELSE STATUS_TABLE.last_result_id END, \
        last_result_at = CASE WHEN (RESULT_IS_NEWER) THEN excluded.last_result_at \
            ELSE STATUS_TABLE.last_result_at END, \
        latency_ms = CASE WHEN (RESULT_IS_NEWER) THEN excluded.latency_ms \
            ELSE STATUS_TABLE.latency_ms END, \
        message = CASE WHEN (RESULT_IS_NEWER) THEN excluded.message \
            ELSE STATUS_TABLE.message END, \
        next_due_at = CASE WHEN (RESULT_IS_NEWER) THEN excluded.next_due_at \
            ELSE STATUS_TABLE.next_due_at END \
    WHERE (RESULT_IS_NEWER) OR (VERDICT_IS_NEWER)";
    let verdict_is_newer = "excluded.verdict_at IS NOT NULL AND (STATUS_TABLE.verdict_at IS NULL \
        OR STATUS_TABLE.verdict_at < excluded.verdict_at \
        OR (STATUS_TABLE.verdict_at = excluded.verdict_at \
            AND STATUS_TABLE.verdict_result_id < excluded.verdict_result_id))";
    let result_is_newer = "STATUS_TABLE.last_result_at < excluded.last_result_at \
        OR (STATUS_TABLE.last_result_at = excluded.last_result_at \
            AND STATUS_TABLE.last_result_id < excluded.last_result_id)";
    let (name, key_columns, key_values, key_conflict) = match table {
        StatusTable::Monitor => ("monitor_status", "", "", ""),
        StatusTable::Location => (
            "location_status",
            "region,",
            "r.value ->> 'region',",
            ", region",
        ),
    };
    let sql = TEMPLATE
        .replace("VERDICT_IS_NEWER", verdict_is_newer)
        .replace("RESULT_IS_NEWER", result_is_newer)
        .replace("STATUS_TABLE", name)
        .replace("KEY_COLUMNS", key_columns)
        .replace("KEY_VALUES", key_values)
        .replace("KEY_CONFLICT", key_conflict);
    if !backend.binds_each_row() {
        return sql.replace("ROWS_SOURCE", &json_rows(backend, "$2"));
    }
    // One move a statement, its fields bound (`StatusMove::values`; `statements` says why).
    StatusMove::FIELDS
        .iter()
        .enumerate()
        .fold(sql.replace("FROM ROWS_SOURCE ", ""), |sql, (i, field)| {
            sql.replace(&format!("r.value ->> '{field}'"), &format!("${}", i + 2))
        })
}

/// One status row's move in `status_upsert`: the newest stored result of the batch for that
/// monitor (or location), and the newest up/down one, which carries the verdict.
#[derive(serde::Serialize)]
struct StatusMove<'a> {
    monitor_id: &'a str,
    region: Option<&'a str>,
    /// The verdict's status when the batch has one, else the newest (rate-limited) status:
    /// what a row created by this move holds.
    status: &'a str,
    id: &'a str,
    ts: i64,
    latency_ms: Option<i64>,
    msg: &'a str,
    next_due_at: Option<i64>,
    /// Set when the batch holds an up/down result for this row: the verdict moves with it.
    verdict_at: Option<i64>,
    verdict_result_id: Option<&'a str>,
    /// The verdict state the batch's newer verdicts moved the row to.
    confirmed: Option<&'static str>,
    run_length: Option<i64>,
}

impl<'a> StatusMove<'a> {
    /// The fields as the upsert names them, in the order of `values`.
    const FIELDS: [&'static str; 12] = [
        "monitor_id",
        "region",
        "status",
        "id",
        "ts",
        "latency_ms",
        "msg",
        "next_due_at",
        "verdict_at",
        "verdict_result_id",
        "confirmed",
        "run_length",
    ];

    /// The upsert's arguments on SQLite: the poller (`$1`), then the fields (`FIELDS`).
    fn values(&self, poller_id: &'a str) -> Vec<Arg<'_>> {
        vec![
            poller_id.into(),
            self.monitor_id.into(),
            self.region.into(),
            self.status.into(),
            self.id.into(),
            self.ts.into(),
            self.latency_ms.into(),
            self.msg.into(),
            self.next_due_at.into(),
            self.verdict_at.into(),
            self.verdict_result_id.into(),
            self.confirmed.into(),
            self.run_length.into(),
        ]
    }

    fn of(
        newest: &'a NewResult,
        decisive: Option<&'a NewResult>,
        moved: Option<&StoredVerdict>,
    ) -> Self {
        StatusMove {
            monitor_id: &newest.monitor_id,
            region: newest.region.as_deref(),
            status: decisive.map_or(newest.status, |d| d.status).as_str(),
            id: &newest.id,
            ts: newest.ts,
            latency_ms: newest.latency_ms,
            msg: &newest.msg,
            next_due_at: newest.next_due_at,
            verdict_at: decisive.map(|d| d.ts),
            verdict_result_id: decisive.map(|d| d.id.as_str()),
            confirmed: moved.and_then(|m| m.confirmed).map(Verdict::as_str),
            run_length: moved.map(|m| m.run_length),
        }
    }
}

/// A monitor's (or a location's) stored verdict state, as ingest hands it to the rule that
/// moves it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoredVerdict {
    /// The confirmed verdict, `None` while none is.
    pub confirmed: Option<Verdict>,
    /// The newest verdict, `None` before the first.
    pub status: Option<Verdict>,
    /// How many results equal to `status` end the sequence.
    pub run_length: i64,
}

impl StatusTable {
    /// The key of `result`'s row in this table.
    pub fn key_of(self, result: &NewResult) -> StatusKey<'_> {
        let region = match self {
            StatusTable::Monitor => None,
            StatusTable::Location => result.region.as_deref(),
        };
        (&result.monitor_id, region)
    }
}

/// The status moves of newly stored results: one per status row (a monitor, or a monitor's
/// location), since an upsert may not touch a row twice, carrying both kinds of news. One
/// statement, rows in key order. Concurrent batches sharing monitors never meet here on
/// PostgreSQL: they queue on the monitors' rows first (`conflicts::hold_monitors`).
fn status_moves<'a>(
    results: &[&'a NewResult],
    table: StatusTable,
    moved: &HashMap<StatusKey<'a>, StoredVerdict>,
) -> Vec<StatusMove<'a>> {
    let mut decisive: HashMap<StatusKey<'a>, &'a NewResult> = HashMap::new();
    let mut newest: BTreeMap<StatusKey<'a>, &'a NewResult> = BTreeMap::new();
    for &result in results {
        let key = table.key_of(result);
        let newer = |slot: &&NewResult| (result.ts, &result.id) > (slot.ts, &slot.id);
        if result.status.verdict().is_some() {
            let slot = decisive.entry(key).or_insert(result);
            if newer(slot) {
                *slot = result;
            }
        }
        let slot = newest.entry(key).or_insert(result);
        if newer(slot) {
            *slot = result;
        }
    }
    newest
        .into_iter()
        .map(|(key, result)| StatusMove::of(result, decisive.get(&key).copied(), moved.get(&key)))
        .collect()
}
