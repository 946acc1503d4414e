//! The status rows an upload reads before it writes them: each of its monitors' row and, once
//! any result of the batch is located, every location row of those monitors, with what both of
//! ingest's uses need (the newest result, for the time it credits, `timeline`; the verdict
//! state it moves, `status_moves`). On PostgreSQL one packed read per table, locked
//! in key order until the transaction ends; on SQLite one statement per monitor and table
//! (`statements` says why). Read once, before ingest writes them, which is enough because no other
//! upload writes these rows before this one commits (it holds their monitors first:
//! `conflicts::hold_monitors`). Read once for both uses: they were two reads of the same rows
//! (about 2 % of central's samples between them in a profile at 100,000 monitors,
//! docs/benchmarks.md). Owns that read only: what the rows mean is the readers'.

use std::collections::HashMap;

use shared_proto::poller_api::{ResultStatus, Verdict};

use super::packed::{packed, unpack};
use super::results::NewResult;
use super::statements::{Arg, Columns, Statements};
use super::Store;

/// A status row's key: the monitor, and the location for `location_status` (`None` for the
/// monitor's own row in `monitor_status`).
pub type RowKey = (String, Option<String>);

/// What ingest reads of a status row before it writes.
#[derive(Debug, Clone)]
pub struct StatusBefore {
    /// The newest stored result, whatever its status.
    pub last_result_at: i64,
    pub last_result_id: String,
    /// The newest result's own status: the verdict columns hold the newest up/down one, so a
    /// newer rate-limited result reads as rate-limited.
    pub newest_status: ResultStatus,
    /// The newest verdict (rate-limited before the first up/down result).
    pub status: ResultStatus,
    pub confirmed: Option<Verdict>,
    pub run_length: i64,
    pub verdict_at: Option<i64>,
    pub verdict_result_id: Option<String>,
}

/// The rows read, by key; a key without a row has none stored yet.
pub type StatusesBefore = HashMap<RowKey, StatusBefore>;

/// The columns read, as `(name, expression)`, in the order `read_row` reads them; `region` is
/// chosen per table.
fn columns(region: &str) -> [(&str, &str); 10] {
    [
        ("monitor_id", "monitor_id"),
        ("region", region),
        ("last_result_at", "last_result_at"),
        ("last_result_id", "last_result_id"),
        (
            "newest_status",
            "CASE WHEN verdict_result_id = last_result_id THEN status \
             ELSE 'rate_limited' END",
        ),
        ("status", "status"),
        ("confirmed", "confirmed"),
        ("run_length", "run_length"),
        ("verdict_at", "verdict_at"),
        ("verdict_result_id", "verdict_result_id"),
    ]
}

/// A row as the packed read (PostgreSQL) returns it.
#[derive(serde::Deserialize)]
struct Packed {
    monitor_id: String,
    region: Option<String>,
    last_result_at: i64,
    last_result_id: String,
    newest_status: String,
    status: String,
    confirmed: Option<String>,
    run_length: i64,
    verdict_at: Option<i64>,
    verdict_result_id: Option<String>,
}

impl Packed {
    fn keyed(self) -> anyhow::Result<(RowKey, StatusBefore)> {
        Ok((
            (self.monitor_id, self.region),
            StatusBefore {
                last_result_at: self.last_result_at,
                last_result_id: self.last_result_id,
                newest_status: status_of(&self.newest_status)?,
                status: status_of(&self.status)?,
                confirmed: verdict_of(self.confirmed.as_deref())?,
                run_length: self.run_length,
                verdict_at: self.verdict_at,
                verdict_result_id: self.verdict_result_id,
            },
        ))
    }
}

/// A stored status text as a status; a text central never writes is an error.
fn status_of(text: &str) -> anyhow::Result<ResultStatus> {
    ResultStatus::parse(text).ok_or_else(|| anyhow::anyhow!("a stored status `{text}`"))
}

/// A stored confirmed verdict (`up`/`down` or none).
fn verdict_of(text: Option<&str>) -> anyhow::Result<Option<Verdict>> {
    text.map(|text| {
        Verdict::parse(text).ok_or_else(|| anyhow::anyhow!("a stored verdict `{text}`"))
    })
    .transpose()
}

/// A row as SQLite's statement per monitor returns it, its columns in `columns`' order.
fn read_row(row: &dyn Columns) -> anyhow::Result<(RowKey, StatusBefore)> {
    Ok((
        (row.text(0)?, row.text_or_null(1)?),
        StatusBefore {
            last_result_at: row.int(2)?,
            last_result_id: row.text(3)?,
            newest_status: status_of(&row.text(4)?)?,
            status: status_of(&row.text(5)?)?,
            confirmed: verdict_of(row.text_or_null(6)?.as_deref())?,
            run_length: row.int(7)?,
            verdict_at: row.int_or_null(8)?,
            verdict_result_id: row.text_or_null(9)?,
        },
    ))
}

impl Store {
    /// The status rows of `results`' monitors (and of their locations, if any result is
    /// located), locked on PostgreSQL until the transaction ends.
    pub(super) async fn read_status_rows(
        &self,
        tx: &mut impl Statements,
        results: &[&NewResult],
    ) -> anyhow::Result<StatusesBefore> {
        let mut rows = StatusesBefore::new();
        if results.is_empty() {
            return Ok(rows);
        }
        let mut ids: Vec<&str> = results.iter().map(|r| r.monitor_id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        let located = results.iter().any(|r| r.region.is_some());
        for (table, region) in [
            ("monitor_status", "CAST(NULL AS TEXT)"),
            ("location_status", "region"),
        ] {
            if table == "location_status" && !located {
                continue;
            }
            let columns = columns(region);
            if self.backend().binds_each_row() {
                // One monitor a statement, read by column (`statements` says why).
                let list: Vec<String> = columns
                    .iter()
                    .map(|(name, expression)| format!("{expression} AS {name}"))
                    .collect();
                let sql = format!(
                    "SELECT {} FROM {table} WHERE monitor_id = $1",
                    list.join(", ")
                );
                let args: Vec<Vec<Arg>> = ids.iter().map(|&id| vec![id.into()]).collect();
                rows.extend(tx.read_each(&sql, &args, read_row).await?);
            } else {
                // One packed read (`packed`) of every row, locked in key order.
                let listed = super::dialect::listed(self.backend(), "monitor_id", "$1");
                let sql = packed(
                    self.backend(),
                    &columns,
                    &format!("FROM {table} WHERE {listed} ORDER BY monitor_id, region FOR UPDATE"),
                    "monitor_id, region",
                );
                let ids = serde_json::to_string(&ids)?;
                let text = tx.read_text(&sql, &[Arg::from(&ids)]).await?;
                for row in unpack::<Packed>(&text)? {
                    let (key, row) = row.keyed()?;
                    rows.insert(key, row);
                }
            }
        }
        Ok(rows)
    }
}
