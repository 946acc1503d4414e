//! The time newly stored results stand for, credited into the rollups inside the results'
//! own transaction: each touched monitor's and location's newest result time before the batch
//! (its status row), and its history around the new results. What time a result stands for
//! is the service's rule (`IngestRules::credit_time`, `service::uptime`); this file only reads
//! what the rule needs and hands back its bucket deltas. It must not judge statuses itself.

use std::collections::{BTreeMap, HashMap, HashSet};

use sqlx::{Any, Row, Transaction};

use super::results::{json_rows, IngestRules, NewResult};
use super::{Backend, Resolution, Store};

/// A stored result as it stands for time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimePoint {
    pub id: String,
    pub region: Option<String>,
    pub ts: i64,
    pub status: String,
}

/// Time added to (or, negative, taken from) one bucket of a monitor or location.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeCredit {
    pub resolution: Resolution,
    pub bucket_start: i64,
    pub up_ms: i64,
    pub down_ms: i64,
}

/// A monitor (`None`) or one of its locations.
type Key = (String, Option<String>);

/// Time credits keyed by monitor and rollup region (`''` for the whole monitor).
pub(super) type Credits = Vec<(String, String, TimeCredit)>;

impl Store {
    /// The time the newly stored results credit: per monitor and per location, what the rule
    /// makes of its history from its earliest new result (or its newest before, if earlier)
    /// minus the rule's lookback. Status rows are locked in key order on PostgreSQL, before
    /// `move_verdicts` locks them in the same order, so batches sharing monitors queue instead
    /// of crediting the same time twice. Cost: the batch's results and the results within a
    /// lookback of them, read in one statement.
    pub(super) async fn credit_time(
        &self,
        tx: &mut Transaction<'_, Any>,
        stored: &[&NewResult],
        rules: &dyn IngestRules,
    ) -> anyhow::Result<Credits> {
        if stored.is_empty() {
            return Ok(Vec::new());
        }
        // Each key's earliest and newest new result.
        let mut news: BTreeMap<Key, (i64, i64)> = BTreeMap::new();
        for result in stored {
            let keys = std::iter::once(None).chain(result.region.clone().map(Some));
            for region in keys {
                let span = news
                    .entry((result.monitor_id.clone(), region))
                    .or_insert((result.ts, result.ts));
                span.0 = span.0.min(result.ts);
                span.1 = span.1.max(result.ts);
            }
        }
        let until = self.newest_results(tx, &news).await?;

        // One history range per monitor, wide enough for every key of it.
        let mut ranges: BTreeMap<&str, (i64, i64)> = BTreeMap::new();
        for ((monitor_id, region), (earliest, newest)) in &news {
            let old = until.get(&(monitor_id.clone(), region.clone())).copied();
            let from = old.map_or(*earliest, |u| u.min(*earliest));
            let from = from.saturating_sub(rules.lookback_ms(monitor_id));
            let range = ranges.entry(monitor_id).or_insert((from, *newest));
            range.0 = range.0.min(from);
            range.1 = range.1.max(*newest).max(old.unwrap_or(i64::MIN));
        }
        let history = self.history_in(tx, &ranges).await?;
        let new: HashSet<&str> = stored.iter().map(|r| r.id.as_str()).collect();

        let mut credits = Vec::new();
        for ((monitor_id, region), (_, newest)) in &news {
            let Some(points) = history.get(monitor_id.as_str()) else {
                continue;
            };
            let points: Vec<&TimePoint> = points
                .iter()
                .filter(|p| region.is_none() || p.region == *region)
                .collect();
            let old = until.get(&(monitor_id.clone(), region.clone())).copied();
            let new_until = old.map_or(*newest, |u| u.max(*newest));
            for credit in
                rules.credit_time(monitor_id, region.as_deref(), &points, &new, old, new_until)
            {
                credits.push((
                    monitor_id.clone(),
                    region.clone().unwrap_or_default(),
                    credit,
                ));
            }
        }
        Ok(credits)
    }

    /// Each key's newest result time before this batch: its status row's `last_result_at`.
    async fn newest_results(
        &self,
        tx: &mut Transaction<'_, Any>,
        keys: &BTreeMap<Key, (i64, i64)>,
    ) -> anyhow::Result<HashMap<Key, i64>> {
        let mut ids: Vec<&str> = keys.keys().map(|(id, _)| id.as_str()).collect();
        ids.dedup();
        let (ids_source, lock) = match self.backend() {
            Backend::Sqlite => ("SELECT value FROM json_each($1)", ""),
            Backend::Postgres => (
                "SELECT jsonb_array_elements_text(CAST($1 AS jsonb))",
                " ORDER BY monitor_id, region FOR UPDATE",
            ),
        };
        let mut newest = HashMap::new();
        for (table, region) in [
            ("monitor_status", "CAST(NULL AS TEXT)"),
            ("location_status", "region"),
        ] {
            let sql = format!(
                "SELECT monitor_id, {region} AS region, last_result_at FROM {table} \
                 WHERE monitor_id IN ({ids_source}){lock}"
            );
            for row in sqlx::query(&sql)
                .bind(serde_json::to_string(&ids)?)
                .fetch_all(&mut **tx)
                .await?
            {
                let key = (row.try_get("monitor_id")?, row.try_get("region")?);
                if keys.contains_key(&key) {
                    newest.insert(key, row.try_get("last_result_at")?);
                }
            }
        }
        Ok(newest)
    }

    /// The results of each monitor checked within its range (inclusive), new ones included.
    async fn history_in(
        &self,
        tx: &mut Transaction<'_, Any>,
        ranges: &BTreeMap<&str, (i64, i64)>,
    ) -> anyhow::Result<HashMap<String, Vec<TimePoint>>> {
        let ranges: Vec<serde_json::Value> = ranges
            .iter()
            .map(|(id, (from, until))| {
                serde_json::json!({ "monitor_id": id, "from": from, "until": until })
            })
            .collect();
        let sql = format!(
            "SELECT res.id, res.monitor_id, res.region, res.ts, res.status FROM {rows} \
             JOIN results res ON res.monitor_id = r.value ->> 'monitor_id' \
                AND res.ts >= CAST(r.value ->> 'from' AS BIGINT) \
                AND res.ts <= CAST(r.value ->> 'until' AS BIGINT)",
            rows = json_rows(self.backend(), "$1"),
        );
        let mut history: HashMap<String, Vec<TimePoint>> = HashMap::new();
        for chunk in ranges.chunks(500) {
            for row in sqlx::query(&sql)
                .bind(serde_json::to_string(chunk)?)
                .fetch_all(&mut **tx)
                .await?
            {
                history
                    .entry(row.try_get("monitor_id")?)
                    .or_default()
                    .push(TimePoint {
                        id: row.try_get("id")?,
                        region: row.try_get("region")?,
                        ts: row.try_get("ts")?,
                        status: row.try_get("status")?,
                    });
            }
        }
        Ok(history)
    }
}
