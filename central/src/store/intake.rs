//! What an upload is checked against, read inside the transaction that stores it
//! (`IngestTx::placements`): the placements of the monitors it names (`OwnershipRow`). The
//! service decides from them which results stand and by which rules; this module owns only
//! the read, not a decision.
//!
//! Why inside the transaction: a result is judged by the placements it is stored against. An
//! upload waiting for its turn to write sees a move committed meanwhile (on SQLite the reads
//! run under the write lock; on PostgreSQL after the monitors' rows are held, which a move of
//! a monitor's own placement must wait for), where a read made on arrival was stale by then.
//! And on SQLite the reads run on the writing connection within ingest's one blocking call
//! (`direct`): before, each was a statement of its own handed to sqlx's worker thread and back,
//! two crossings more per upload.

use super::dialect::listed;
use super::packed::{columns_of, packed, unpack};
use super::statements::{Arg, Statements};
use super::Backend;

/// Who may upload results for a monitor, or for one of its locations.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct OwnershipRow {
    pub id: String,
    /// The location, for a multi-location monitor (one row per location).
    pub region: Option<String>,
    pub assigned_poller_id: Option<String>,
    pub previous_poller_id: Option<String>,
    pub assigned_at: Option<i64>,
    /// The monitor's kind and settings (its confirmation thresholds).
    pub kind: String,
    pub settings: String,
    /// How its results stand for time (`service::uptime`): its interval and timeout, quorum
    /// and last pause.
    pub interval_ms: i64,
    pub timeout_ms: i64,
    pub quorum: Option<i64>,
    pub paused_at: Option<i64>,
    pub resumed_at: Option<i64>,
    /// Its tags (JSON array), which maintenance windows may cover.
    pub tags: Option<String>,
}

impl OwnershipRow {
    /// A row of `store::intake`'s read, by place: the columns in the order of the fields.
    pub(super) fn read(row: &dyn super::statements::Columns) -> anyhow::Result<Self> {
        Ok(OwnershipRow {
            id: row.text(0)?,
            region: row.text_or_null(1)?,
            assigned_poller_id: row.text_or_null(2)?,
            previous_poller_id: row.text_or_null(3)?,
            assigned_at: row.int_or_null(4)?,
            kind: row.text(5)?,
            settings: row.text(6)?,
            interval_ms: row.int(7)?,
            timeout_ms: row.int(8)?,
            quorum: row.int_or_null(9)?,
            paused_at: row.int_or_null(10)?,
            resumed_at: row.int_or_null(11)?,
            tags: row.text_or_null(12)?,
        })
    }
}

/// Who owns each of these monitors (unknown ids are simply absent): one row for a
/// single-location monitor, one per location for a multi-location one, by id, then region. On SQLite one monitor a statement, its rows read as they
/// are (`statements` says why); on PostgreSQL one statement, its rows packed (`packed`) with
/// the ids as one JSON parameter, so that the statement's text is the same for every upload.
pub(super) async fn ownership(
    tx: &mut impl Statements,
    backend: Backend,
    monitor_ids: &[String],
) -> anyhow::Result<Vec<OwnershipRow>> {
    if monitor_ids.is_empty() {
        return Ok(Vec::new());
    }
    let owned = |single: &str, multi: &str| {
        format!(
            "SELECT id, NULL AS region, assigned_poller_id, previous_poller_id, assigned_at, \
             kind, settings, interval_ms, timeout_ms, quorum, paused_at, resumed_at, tags \
             FROM monitors WHERE {single} AND poller_mode <> 'multi' \
             UNION ALL \
             SELECT l.monitor_id, l.region, l.assigned_poller_id, l.previous_poller_id, \
             l.assigned_at, m.kind, m.settings, m.interval_ms, m.timeout_ms, m.quorum, m.paused_at, \
             m.resumed_at, m.tags FROM monitor_locations l \
             JOIN monitors m ON m.id = l.monitor_id \
             WHERE {multi} AND m.poller_mode = 'multi'"
        )
    };
    if backend.binds_each_row() {
        let sql = format!("{} ORDER BY region", owned("id = $1", "l.monitor_id = $1"));
        let rows: Vec<Vec<Arg>> = monitor_ids.iter().map(|id| vec![id.into()]).collect();
        return tx.read_each(&sql, &rows, OwnershipRow::read).await;
    }
    let owned = owned(
        &listed(backend, "id", "$1"),
        &listed(backend, "l.monitor_id", "$1"),
    );
    let sql = packed(
        backend,
        &columns_of(
            "id, region, assigned_poller_id, previous_poller_id, assigned_at, kind, \
             settings, interval_ms, timeout_ms, quorum, paused_at, resumed_at, tags",
        ),
        &format!("FROM ({owned}) AS owned"),
        "id, region",
    );
    let ids = serde_json::to_string(monitor_ids)?;
    unpack(&tx.read_text(&sql, &[(&ids).into()]).await?)
}
