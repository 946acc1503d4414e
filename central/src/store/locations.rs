//! Where each location of a multi-location monitor runs, and each location's newest result;
//! with the bulk status reads that list and alert on many monitors at once.

use std::collections::HashMap;

use sqlx::any::AnyRow;
use sqlx::{FromRow, Row};

use shared_proto::poller_api::{ResultStatus, Verdict};
use shared_proto::settings_api::LocationStatus;

use super::{StatusRow, Store};

/// One location of a multi-location monitor: its region and the poller checking from there.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct LocationRow {
    pub monitor_id: String,
    pub region: String,
    pub assigned_poller_id: Option<String>,
    pub assigned_at: Option<i64>,
    pub placement_reason: Option<String>,
    /// The location's status at alerting's last look (`None` before the first, or one this
    /// central does not know).
    #[serde(default, deserialize_with = "shown_location")]
    pub shown_status: Option<LocationStatus>,
}

/// A location's shown status read packed, as `FromRow` reads it: a text this central does not
/// know is none shown yet.
fn shown_location<'de, D: serde::Deserializer<'de>>(
    reader: D,
) -> Result<Option<LocationStatus>, D::Error> {
    let text = <Option<String> as serde::Deserialize>::deserialize(reader)?;
    Ok(text.as_deref().and_then(LocationStatus::parse))
}

impl FromRow<'_, AnyRow> for LocationRow {
    fn from_row(row: &AnyRow) -> sqlx::Result<Self> {
        Ok(Self {
            monitor_id: row.try_get("monitor_id")?,
            region: row.try_get("region")?,
            assigned_poller_id: row.try_get("assigned_poller_id")?,
            assigned_at: row.try_get("assigned_at")?,
            placement_reason: row.try_get("placement_reason")?,
            // A cache alerting's next look rewrites: a status this central does not know (a
            // newer replica's) reads as none shown yet (`domain::Monitor` says why).
            shown_status: row
                .try_get::<Option<String>, _>("shown_status")?
                .as_deref()
                .and_then(LocationStatus::parse),
        })
    }
}

/// The newest result of one location.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct LocationStatusRow {
    pub monitor_id: String,
    pub region: String,
    #[serde(flatten)]
    pub status: StatusRow,
}

pub(super) const STATUS_COLUMNS: &str = "monitor_id, status, confirmed, run_length, poller_id, \
    last_result_at, latency_ms, message, next_due_at, CASE WHEN verdict_result_id = \
    last_result_id THEN status ELSE 'rate_limited' END AS newest_status";

pub(super) fn status_row(row: &AnyRow) -> sqlx::Result<StatusRow> {
    let status = |column: &str| -> sqlx::Result<ResultStatus> {
        let text: String = row.try_get(column)?;
        ResultStatus::parse(&text).ok_or_else(|| unknown(column, &text))
    };
    let confirmed = match row.try_get::<Option<String>, _>("confirmed")? {
        Some(text) => Some(Verdict::parse(&text).ok_or_else(|| unknown("confirmed", &text))?),
        None => None,
    };
    Ok(StatusRow {
        status: status("status")?,
        confirmed,
        run_length: row.try_get("run_length")?,
        poller_id: row.try_get("poller_id")?,
        last_result_at: row.try_get("last_result_at")?,
        newest_status: status("newest_status")?,
        latency_ms: row.try_get("latency_ms")?,
        message: row.try_get("message")?,
        next_due_at: row.try_get("next_due_at")?,
    })
}

/// A status text central never writes, read from `column`.
pub(super) fn unknown(column: &str, text: &str) -> sqlx::Error {
    sqlx::Error::ColumnDecode {
        index: column.to_string(),
        source: format!("a stored status `{text}`").into(),
    }
}

impl Store {
    /// The locations of these monitors (all monitors' with `None`).
    pub async fn locations_of(&self, ids: Option<&[String]>) -> anyhow::Result<Vec<LocationRow>> {
        const COLUMNS: &str =
            "monitor_id, region, assigned_poller_id, assigned_at, placement_reason, shown_status";
        let Some(ids) = ids else {
            let sql = format!("SELECT {COLUMNS} FROM monitor_locations");
            return Ok(sqlx::query_as(&sql).fetch_all(&self.pool).await?);
        };
        self.packed_where_in(COLUMNS, "FROM monitor_locations WHERE", "monitor_id", ids)
            .await
    }

    /// The newest result of each of these monitors (all monitors' with `None`), by monitor.
    pub async fn monitor_statuses(
        &self,
        ids: Option<&[String]>,
    ) -> anyhow::Result<HashMap<String, StatusRow>> {
        #[derive(serde::Deserialize)]
        struct Keyed {
            monitor_id: String,
            #[serde(flatten)]
            status: StatusRow,
        }
        let Some(ids) = ids else {
            let sql = format!("SELECT {STATUS_COLUMNS} FROM monitor_status");
            let rows = sqlx::query(&sql).fetch_all(&self.pool).await?;
            return rows
                .iter()
                .map(|row| Ok((row.try_get("monitor_id")?, status_row(row)?)))
                .collect();
        };
        let rows: Vec<Keyed> = self
            .packed_where_in(
                STATUS_COLUMNS,
                "FROM monitor_status WHERE",
                "monitor_id",
                ids,
            )
            .await?;
        Ok(rows.into_iter().map(|k| (k.monitor_id, k.status)).collect())
    }

    /// The newest result of each location of these monitors (all with `None`).
    pub async fn location_statuses(
        &self,
        ids: Option<&[String]>,
    ) -> anyhow::Result<Vec<LocationStatusRow>> {
        let columns = format!("region, {STATUS_COLUMNS}");
        let Some(ids) = ids else {
            let sql = format!("SELECT {columns} FROM location_status");
            let rows = sqlx::query(&sql).fetch_all(&self.pool).await?;
            return rows
                .iter()
                .map(|row| {
                    Ok(LocationStatusRow {
                        monitor_id: row.try_get("monitor_id")?,
                        region: row.try_get("region")?,
                        status: status_row(row)?,
                    })
                })
                .collect();
        };
        self.packed_where_in(&columns, "FROM location_status WHERE", "monitor_id", ids)
            .await
    }
}

#[cfg(test)]
mod tests {
    use shared_proto::settings_api::LocationStatus;

    use crate::store::testing::sqlite_store;

    /// A location's shown status is read as one of the statuses central writes, `unknown`
    /// included, whichever way the locations are read (all of them, or by monitor through a
    /// packed read); a text this central does not know (a newer replica's) is none shown yet,
    /// never passed up as it stands and never a failed read.
    #[tokio::test]
    async fn a_location_status_is_read_typed_and_a_stray_text_is_refused() {
        let (store, _dir) = sqlite_store().await;
        sqlx::query(
            "INSERT INTO monitors (id, name, kind, target, interval_ms, timeout_ms, settings, \
                poller_mode, poller_regions, created_at, updated_at, revision) VALUES \
                ('m', 'm', 'http', 'http://x', 60000, 10000, '{}', 'multi', '[\"eu\",\"us\"]', \
                1, 1, 1)",
        )
        .execute(&store.pool)
        .await
        .unwrap();
        sqlx::query(
            "INSERT INTO monitor_locations (monitor_id, region, shown_status) VALUES \
                ('m', 'eu', 'unknown'), ('m', 'us', NULL)",
        )
        .execute(&store.pool)
        .await
        .unwrap();
        let ids = ["m".to_string()];
        for read in [
            store.locations_of(None).await.unwrap(),
            store.locations_of(Some(&ids)).await.unwrap(),
        ] {
            let mut shown: Vec<_> = read
                .into_iter()
                .map(|l| (l.region, l.shown_status))
                .collect();
            shown.sort_by(|a, b| a.0.cmp(&b.0));
            assert_eq!(
                shown,
                [
                    ("eu".to_string(), Some(LocationStatus::Unknown)),
                    ("us".to_string(), None)
                ]
            );
        }
        sqlx::query("UPDATE monitor_locations SET shown_status = 'sideways' WHERE region = 'us'")
            .execute(&store.writer)
            .await
            .unwrap();
        for read in [
            store.locations_of(None).await.unwrap(),
            store.locations_of(Some(&ids)).await.unwrap(),
        ] {
            let us = read.into_iter().find(|l| l.region == "us").unwrap();
            assert_eq!(us.shown_status, None);
        }
    }
}
