//! Reading a monitor's stored results: its history page by page and the newest few of many
//! monitors. Every read by monitor goes through `result_index::by_monitor` (on SQLite the
//! head's rowids with the index). Must not write: ingestion is `results`, deletion is
//! `result_pruning`.

use std::collections::HashMap;

use shared_proto::poller_api::ResultStatus;
use sqlx::any::AnyRow;
use sqlx::{FromRow, Row};

use super::result_index::{by_monitor, Order};
use super::{Cursor, Store};

#[derive(Debug, Clone)]
pub struct ResultRow {
    pub id: String,
    pub monitor_id: String,
    pub poller_id: String,
    pub region: Option<String>,
    pub ts: i64,
    pub status: ResultStatus,
    pub latency_ms: Option<i64>,
    pub msg: String,
    pub meta: String,
}

impl FromRow<'_, AnyRow> for ResultRow {
    fn from_row(row: &AnyRow) -> sqlx::Result<Self> {
        Ok(Self {
            id: row.try_get("id")?,
            monitor_id: row.try_get("monitor_id")?,
            poller_id: row.try_get("poller_id")?,
            region: row.try_get("region")?,
            ts: row.try_get("ts")?,
            status: {
                let text: String = row.try_get("status")?;
                ResultStatus::parse(&text)
                    .ok_or_else(|| super::locations::unknown("status", &text))?
            },
            latency_ms: row.try_get("latency_ms")?,
            msg: row.try_get("msg")?,
            meta: row.try_get("meta")?,
        })
    }
}

/// A `ResultRow`'s columns, of `results` as `r` (`result_index::by_monitor`).
const RESULT_COLUMNS: &str =
    "r.id, r.monitor_id, r.poller_id, r.region, r.ts, r.status, r.latency_ms, r.msg, r.meta";

impl Store {
    /// The newest `per_monitor` results of each monitor, newest first (one indexed read per
    /// monitor, sent as one statement).
    pub async fn recent_results_of(
        &self,
        monitor_ids: &[String],
        per_monitor: u32,
    ) -> anyhow::Result<HashMap<String, Vec<ResultRow>>> {
        let mut recent: HashMap<String, Vec<ResultRow>> = HashMap::new();
        let sqlite = self.backend().keeps_results_head();
        // Per monitor its id, and on SQLite its rowids in the head.
        let per = if sqlite { 2 } else { 1 };
        for chunk in monitor_ids.chunks(100) {
            let sql = (0..chunk.len())
                .map(|i| {
                    let monitor = format!("${}", 2 + per * i);
                    let head = format!("${}", 3 + per * i);
                    format!(
                        "SELECT * FROM ({}) AS r{i}",
                        by_monitor(
                            self.backend(),
                            RESULT_COLUMNS,
                            &monitor,
                            &head,
                            &|_| String::new(),
                            Order::Newest,
                            "$1",
                        )
                    )
                })
                .collect::<Vec<_>>()
                .join(" UNION ALL ");
            let mut query = sqlx::query_as::<_, ResultRow>(&sql).bind(i64::from(per_monitor));
            for id in chunk {
                query = query.bind(id);
                if sqlite {
                    query = query.bind(self.head_rowids(id));
                }
            }
            for row in query.fetch_all(&self.pool).await? {
                recent.entry(row.monitor_id.clone()).or_default().push(row);
            }
        }
        for rows in recent.values_mut() {
            rows.sort_by(|a, b| (b.ts, &b.id).cmp(&(a.ts, &a.id)));
        }
        Ok(recent)
    }

    /// A monitor's results from `since` on, oldest first.
    pub async fn list_results(
        &self,
        monitor_id: &str,
        after: &Cursor,
        limit: u32,
    ) -> anyhow::Result<Vec<ResultRow>> {
        let sql = by_monitor(
            self.backend(),
            RESULT_COLUMNS,
            "$1",
            "$5",
            &|t| format!(" AND ({t}.ts > $2 OR ({t}.ts = $2 AND {t}.id > $3))"),
            Order::Oldest,
            "$4",
        );
        let mut query = sqlx::query_as(&sql)
            .bind(monitor_id)
            .bind(after.key)
            .bind(&after.id)
            .bind(i64::from(limit));
        if self.backend().keeps_results_head() {
            query = query.bind(self.head_rowids(monitor_id));
        }
        Ok(query.fetch_all(&self.pool).await?)
    }
}

#[cfg(test)]
mod tests {
    use crate::service::ingest::batch::store_standing;
    use crate::service::testing::NewestDecides;
    use crate::store::testing::{result, sqlite_store};
    use crate::store::Cursor;

    /// A result's status is read as one of the statuses central writes: any other text (a
    /// hostile one written past central) is an error, never shown as it stands.
    #[tokio::test]
    async fn a_status_central_never_writes_is_refused_on_read() {
        let (store, _dir) = sqlite_store().await;
        store_standing(
            &store,
            "p1",
            &[result("a", 1_000, "up")],
            2_000,
            &NewestDecides,
        )
        .await
        .unwrap();
        let start = Cursor {
            key: 0,
            id: String::new(),
        };
        let read = store.list_results("m1", &start, 10).await.unwrap();
        assert_eq!(read.len(), 1);
        sqlx::query("UPDATE results SET status = '<script>\"x' WHERE id = 'a'")
            .execute(&store.writer)
            .await
            .unwrap();
        let error = store.list_results("m1", &start, 10).await.unwrap_err();
        assert!(
            format!("{error:#}").contains("a stored status"),
            "{error:#}"
        );
    }
}
