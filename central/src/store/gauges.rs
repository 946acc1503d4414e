//! What `/metrics` shows of monitors and their locations, read as stored: the status each
//! showed at alerting's last look (`shown_status`) and the latency of its newest result. No
//! derivation here or in the caller: a scrape costs one pass over those rows, streamed, not a
//! status derived per monitor. Must not: decide a status (that is `service::alerts`, which
//! writes `shown_status`).

use futures_util::TryStreamExt;
use sqlx::Row;

use super::Store;

/// One monitor (`region` `None`) or one location of it, as last shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShownRow {
    pub monitor_id: String,
    pub name: String,
    pub region: Option<String>,
    /// `None` before alerting's first look at it.
    pub status: Option<String>,
    pub latency_ms: Option<i64>,
}

impl Store {
    /// Every monitor, then every location, as last shown; `each` is called per row as it is
    /// read, so no more than one row is held here.
    pub async fn each_shown(&self, mut each: impl FnMut(ShownRow)) -> anyhow::Result<()> {
        let mut rows = sqlx::query(
            "SELECT m.id, m.name, m.shown_status, s.latency_ms FROM monitors m \
             LEFT JOIN monitor_status s ON s.monitor_id = m.id",
        )
        .fetch(&self.pool);
        while let Some(row) = rows.try_next().await? {
            each(ShownRow {
                monitor_id: row.try_get(0)?,
                name: row.try_get(1)?,
                region: None,
                status: row.try_get(2)?,
                latency_ms: row.try_get(3)?,
            });
        }
        drop(rows);
        let mut rows = sqlx::query(
            "SELECT l.monitor_id, m.name, l.region, l.shown_status, s.latency_ms \
             FROM monitor_locations l JOIN monitors m ON m.id = l.monitor_id \
             LEFT JOIN location_status s ON s.monitor_id = l.monitor_id AND s.region = l.region",
        )
        .fetch(&self.pool);
        while let Some(row) = rows.try_next().await? {
            each(ShownRow {
                monitor_id: row.try_get(0)?,
                name: row.try_get(1)?,
                region: Some(row.try_get(2)?),
                status: row.try_get(3)?,
                latency_ms: row.try_get(4)?,
            });
        }
        Ok(())
    }
}
