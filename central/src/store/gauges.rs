//! What `/metrics` shows of monitors and their locations, read as stored: the status each
//! showed at alerting's last look (`shown_status`) and the latency of its newest result. No
//! derivation here or in the caller: a scrape costs one pass over those rows, in pages, not a
//! status derived per monitor. Must not: decide a status (that is `service::alerts`, which
//! writes `shown_status`).

use super::packed::{packed, unpack};
use super::Store;

/// One monitor (`region` `None`) or one location of it, as last shown.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct ShownRow {
    pub monitor_id: String,
    pub name: String,
    #[serde(default)]
    pub region: Option<String>,
    /// `None` before alerting's first look at it.
    pub status: Option<String>,
    pub latency_ms: Option<i64>,
}

/// Rows per read: one packed value each (`packed`), so a scrape of 100,000 monitors is a
/// hundred reads, not 100,000 rows handed over one by one.
const PAGE: i64 = 1_000;

/// The columns every page reads, as (name, expression); `region` is NULL for monitors.
type Columns<'a> = [(&'a str, &'a str); 5];

impl Store {
    /// Every monitor, then every location, as last shown; `each` is called per row, a page of
    /// `PAGE` rows held here at a time. Pages are read one after the other (by key), so a
    /// scrape is not one snapshot: a row that changes meanwhile shows either state.
    pub async fn each_shown(&self, mut each: impl FnMut(ShownRow)) -> anyhow::Result<()> {
        let monitors: Columns = [
            ("monitor_id", "m.id"),
            ("region", "CAST(NULL AS TEXT)"),
            ("name", "m.name"),
            ("status", "m.shown_status"),
            ("latency_ms", "s.latency_ms"),
        ];
        // The status rows bounded by the page's start too: PostgreSQL merges the two indexes,
        // and without it read the status index from its first row for each page (100 pages at
        // 100,000 monitors: 3 s a scrape instead of a third of a second).
        let rest = format!(
            "FROM monitors m LEFT JOIN monitor_status s \
             ON s.monitor_id = m.id AND s.monitor_id > $1 \
             WHERE m.id > $1 ORDER BY m.id LIMIT {PAGE}"
        );
        let mut after = String::new();
        loop {
            let rows = self
                .shown_page(&monitors, &rest, "monitor_id", &[&after])
                .await?;
            let full = rows.len() as i64 == PAGE;
            for row in rows {
                after.clone_from(&row.monitor_id);
                each(row);
            }
            if !full {
                break;
            }
        }
        let locations: Columns = [
            ("monitor_id", "l.monitor_id"),
            ("region", "l.region"),
            ("name", "m.name"),
            ("status", "l.shown_status"),
            ("latency_ms", "s.latency_ms"),
        ];
        let rest = format!(
            "FROM monitor_locations l JOIN monitors m ON m.id = l.monitor_id AND m.id >= $1 \
             LEFT JOIN location_status s ON s.monitor_id = l.monitor_id AND s.region = l.region \
                AND s.monitor_id >= $1 \
             WHERE (l.monitor_id, l.region) > ($1, $2) \
             ORDER BY l.monitor_id, l.region LIMIT {PAGE}"
        );
        let mut after = (String::new(), String::new());
        loop {
            let rows = self
                .shown_page(
                    &locations,
                    &rest,
                    "monitor_id, region",
                    &[&after.0, &after.1],
                )
                .await?;
            let full = rows.len() as i64 == PAGE;
            for row in rows {
                after = (
                    row.monitor_id.clone(),
                    row.region.clone().unwrap_or_default(),
                );
                each(row);
            }
            if !full {
                break;
            }
        }
        Ok(())
    }

    /// One page: `SELECT columns rest` with `params` bound, in `order`. Packed on SQLite (`packed`: one value, not a row
    /// per monitor from its worker thread); plain rows on PostgreSQL, whose rows stream on one
    /// socket and for which building a page of JSON and parsing it back cost more than the
    /// read itself.
    async fn shown_page(
        &self,
        columns: &Columns<'_>,
        rest: &str,
        order: &str,
        params: &[&str],
    ) -> anyhow::Result<Vec<ShownRow>> {
        if self.backend() == super::Backend::Postgres {
            let select: Vec<String> = columns
                .iter()
                .map(|(name, expression)| format!("{expression} AS {name}"))
                .collect();
            type Row = (String, Option<String>, String, Option<String>, Option<i64>);
            let sql = format!("SELECT {} {rest}", select.join(", "));
            let mut query = sqlx::query_as(&sql);
            for param in params {
                query = query.bind(*param);
            }
            let rows: Vec<Row> = query.fetch_all(&self.pool).await?;
            return Ok(rows
                .into_iter()
                .map(|(monitor_id, region, name, status, latency_ms)| ShownRow {
                    monitor_id,
                    name,
                    region,
                    status,
                    latency_ms,
                })
                .collect());
        }
        let sql = packed(self.backend(), columns, rest, order);
        let mut query = sqlx::query_as(&sql);
        for param in params {
            query = query.bind(*param);
        }
        let (text,): (String,) = query.fetch_one(&self.pool).await?;
        unpack(&text)
    }
}

#[cfg(test)]
mod tests {
    use crate::store::testing::sqlite_store;

    #[tokio::test]
    async fn every_monitor_and_location_is_read_once_across_pages() {
        let (store, _dir) = sqlite_store().await;
        // 2,345 monitors (pages of 1,000 and a part), each with two locations (4,690 rows),
        // and every third one showing `down`.
        sqlx::query(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2345) \
             INSERT INTO monitors (id, name, kind, target, interval_ms, timeout_ms, settings, \
                poller_mode, created_at, updated_at, revision, shown_status) \
             SELECT printf('m%05d', i), printf('name %d', i), 'http', 'http://x', 60000, \
                10000, '{}', 'multi', 0, 0, 1, CASE WHEN i % 3 = 0 THEN 'down' END FROM n",
        )
        .execute(&store.pool)
        .await
        .unwrap();
        sqlx::query(
            "INSERT INTO monitor_locations (monitor_id, region) \
             SELECT id, 'eu' FROM monitors UNION ALL SELECT id, 'us' FROM monitors",
        )
        .execute(&store.pool)
        .await
        .unwrap();
        let mut rows = Vec::new();
        store.each_shown(|row| rows.push(row)).await.unwrap();
        let monitors: Vec<_> = rows.iter().filter(|r| r.region.is_none()).collect();
        let locations: Vec<_> = rows.iter().filter(|r| r.region.is_some()).collect();
        assert_eq!(monitors.len(), 2345);
        assert_eq!(locations.len(), 4690);
        let distinct: std::collections::BTreeSet<_> = locations
            .iter()
            .map(|r| (&r.monitor_id, &r.region))
            .collect();
        assert_eq!(distinct.len(), 4690, "a location read twice");
        assert_eq!(
            monitors
                .iter()
                .filter(|r| r.status.as_deref() == Some("down"))
                .count(),
            781
        );
        let third = monitors.iter().find(|r| r.monitor_id == "m00003").unwrap();
        assert_eq!(third.name, "name 3");
        assert_eq!(third.status.as_deref(), Some("down"));
        assert_eq!(third.latency_ms, None);
    }
}
