//! The results minute history is derived from: each monitor's results checked in a time range,
//! read through the `(monitor_id, ts, id)` index (`result_index::by_monitor`). Minute buckets are not stored (at the usual
//! intervals one would hold one result, and writing it was a third of ingest's writes); what
//! the results say of each minute is `service::history::minutes`' to work out, not this file's.

use std::collections::HashMap;

use shared_proto::poller_api::ResultStatus;

use sqlx::Row;

use super::result_index::{by_monitor, Order};
use super::{Store, TimePoint};

/// A stored result as minute history counts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CountedResult {
    pub point: TimePoint,
    pub latency_ms: Option<i64>,
}

/// Monitors per statement.
const MONITORS_PER_READ: usize = 100;

impl Store {
    /// Each monitor's results checked in `[from, until)` (its own `from`), oldest first (by
    /// time, then id), only `region`'s when one is given; at most `limit` per monitor, so a
    /// caller that gets `limit` back knows its range was cut. Cost: one indexed range read per
    /// monitor, sent as one statement per hundred monitors.
    pub async fn results_between(
        &self,
        ranges: &[(String, i64)],
        until: i64,
        region: Option<&str>,
        limit: u32,
    ) -> anyhow::Result<HashMap<String, Vec<CountedResult>>> {
        let mut found: HashMap<String, Vec<CountedResult>> = HashMap::new();
        let first = if region.is_some() { 4 } else { 3 };
        let in_region = if region.is_some() {
            " AND r.region = $3"
        } else {
            ""
        };
        let sqlite = self.backend().keeps_results_head();
        // Per monitor its id, its start and on SQLite its rowids in the head.
        let per = if sqlite { 3 } else { 2 };
        for chunk in ranges.chunks(MONITORS_PER_READ) {
            let sql = (0..chunk.len())
                .map(|i| {
                    let (monitor, from, head) =
                        (first + per * i, first + per * i + 1, first + per * i + 2);
                    let read = by_monitor(
                        self.backend(),
                        "r.id, r.monitor_id, r.region, r.ts, r.status, r.latency_ms",
                        &format!("${monitor}"),
                        &format!("${head}"),
                        &|t| format!(" AND {t}.ts >= ${from} AND {t}.ts < $1{in_region}"),
                        Order::Oldest,
                        "$2",
                    );
                    format!("SELECT * FROM ({read}) AS r{i}")
                })
                .collect::<Vec<_>>()
                .join(" UNION ALL ");
            let mut query = sqlx::query(&sql).bind(until).bind(i64::from(limit));
            if let Some(region) = region {
                query = query.bind(region);
            }
            for (monitor_id, from) in chunk {
                query = query.bind(monitor_id).bind(*from);
                if sqlite {
                    query = query.bind(self.head_rowids(monitor_id));
                }
            }
            for row in query.fetch_all(&self.pool).await? {
                let monitor_id: String = row.try_get("monitor_id")?;
                found.entry(monitor_id).or_default().push(CountedResult {
                    point: TimePoint {
                        id: row.try_get("id")?,
                        region: row.try_get("region")?,
                        ts: row.try_get("ts")?,
                        status: {
                            let text: String = row.try_get("status")?;
                            ResultStatus::parse(&text)
                                .ok_or_else(|| anyhow::anyhow!("a stored status `{text}`"))?
                        },
                    },
                    latency_ms: row.try_get("latency_ms")?,
                });
            }
        }
        for results in found.values_mut() {
            results.sort_by(|a, b| (a.point.ts, &a.point.id).cmp(&(b.point.ts, &b.point.id)));
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing::sqlite_store;

    use crate::service::ingest::batch::store_standing;
    use crate::service::testing::NewestDecides;
    use crate::store::NewResult;

    fn result(id: &str, monitor: &str, ts: i64, region: &str) -> NewResult {
        NewResult {
            id: id.into(),
            monitor_id: monitor.into(),
            region: Some(region.into()),
            ts,
            status: shared_proto::poller_api::ResultStatus::Up,
            latency_ms: Some(7),
            msg: String::new(),
            meta: "{}".into(),
            next_due_at: None,
            dependencies: None,
        }
    }

    #[tokio::test]
    async fn ranges_are_per_monitor_bounded_and_filtered_by_region() {
        let (store, _dir) = sqlite_store().await;
        let batch = [
            result("a", "m1", 1_000, "eu"),
            result("b", "m1", 2_000, "us"),
            result("c", "m1", 3_000, "eu"),
            result("d", "m1", 9_000, "eu"),
            result("e", "m2", 1_500, "eu"),
            result("f", "m2", 2_500, "eu"),
        ];
        store_standing(&store, "p1", &batch, 1, &NewestDecides)
            .await
            .unwrap();
        let ids = |found: &HashMap<String, Vec<CountedResult>>, monitor: &str| -> Vec<String> {
            found[monitor].iter().map(|r| r.point.id.clone()).collect()
        };
        let ranges = [("m1".to_string(), 1_000), ("m2".to_string(), 2_000)];
        let all = store
            .results_between(&ranges, 9_000, None, 10)
            .await
            .unwrap();
        assert_eq!(
            ids(&all, "m1"),
            ["a", "b", "c"],
            "from inclusive, until not"
        );
        assert_eq!(ids(&all, "m2"), ["f"], "each monitor from its own start");
        assert_eq!(all["m1"][0].latency_ms, Some(7));
        let eu = store
            .results_between(&ranges, 10_000, Some("eu"), 10)
            .await
            .unwrap();
        assert_eq!(ids(&eu, "m1"), ["a", "c", "d"]);
        let cut = store
            .results_between(&ranges, 10_000, None, 2)
            .await
            .unwrap();
        assert_eq!(ids(&cut, "m1"), ["a", "b"], "the oldest `limit`");
    }
}
