//! The time newly stored results stand for, credited into the rollups inside the results'
//! own transaction: each touched monitor's and location's newest result time before the batch
//! (its status row), and its history around the new results. What time a result stands for
//! is the service's rule (`service::uptime`, applied by `service::ingest`); this file only
//! reads what the rule needs (`TimeSpan`). It must not judge statuses itself.

use std::collections::{BTreeMap, HashMap};

use super::dialect::json_rows;
use super::packed::{packed, unpack};
use super::result_index::{by_monitor, Order};
use shared_proto::poller_api::ResultStatus;

use super::results::NewResult;
use super::statements::{Arg, Statements};
use super::status_rows::StatusesBefore;
use super::{Resolution, Store};

/// A stored result as it stands for time.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct TimePoint {
    pub id: String,
    pub region: Option<String>,
    pub ts: i64,
    /// Read from its stored text (`rate_limited` is one of the names the type takes).
    pub status: ResultStatus,
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
pub type Credits = Vec<(String, String, TimeCredit)>;

/// The most results a batch's late corrections read (over all its monitors): far more than
/// late uploads need (a result per interval of each location, over the late span), so that only
/// a poller flooding one monitor with results on the same instants reaches it.
const MAX_CORRECTION_ROWS: i64 = 100_000;

/// What the time a monitor's (`region` `None`) or a location's new results stand for is
/// worked out from (`service::uptime::Timeline::credit`): `points` holds its results from
/// the earliest new one (or `old_until`, if earlier) minus its lookback to `new_until`, the
/// location's only for a location; `old_until` and `new_until` are its newest result's time
/// before and after the batch.
#[derive(Debug)]
pub struct TimeSpan {
    pub monitor_id: String,
    pub region: Option<String>,
    pub points: Vec<TimePoint>,
    pub old_until: Option<i64>,
    pub new_until: i64,
}

/// A key's newest result before the batch, from its status row.
struct Newest {
    ts: i64,
    point: TimePoint,
}

impl Store {
    /// What the time the newly stored results stand for is credited from: per monitor and per
    /// location, its history from its earliest new result (or its newest before, if earlier),
    /// given the batch's status rows as they were before it (`rows`, from `read_status_rows`)
    /// and each monitor's lookback (the longest a result of it stands for). Batches sharing
    /// monitors queue on them before (`conflicts::hold_monitors`), so they never credit the
    /// same time twice.
    ///
    /// Cost: results arriving in check order (the usual case: each location's newer than
    /// anything stored) need no read beyond the status rows, whose newest results are the only
    /// older points their spans depend on. A monitor with late results (one location behind
    /// another, a queue drained after an outage) reads its results from the earliest late one
    /// to its newest, in one statement for the batch, bounded by `MAX_CORRECTION_ROWS` (past
    /// that bound the batch credits no time for those monitors and says so in the log), and,
    /// for the monitor and each of its locations, the one result before that (one indexed read
    /// each, within the rule's lookback, sent as one statement).
    pub(super) async fn time_spans(
        &self,
        tx: &mut impl Statements,
        stored: &[&NewResult],
        fresh: &[(String, i64)],
        lookback_ms: &BTreeMap<&str, i64>,
        rows: &StatusesBefore,
    ) -> anyhow::Result<Vec<TimeSpan>> {
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
        let newest = Self::newest_results(rows);
        let until = |key: &Key| newest.get(key).map(|n| n.ts);

        // Monitors whose new results are all at or after their newest stored one take their
        // history from the status rows; the others read theirs.
        let mut late: BTreeMap<&str, (i64, i64)> = BTreeMap::new();
        for ((monitor_id, region), (earliest, latest)) in &news {
            if region.is_some() {
                continue;
            }
            let Some(old) = until(&(monitor_id.clone(), None)) else {
                continue;
            };
            if *earliest < old {
                late.insert(monitor_id, (*earliest, old.max(*latest)));
            }
        }
        let mut history = self.history_in(tx, &late, fresh).await?;
        let read_late = history.is_some();
        let history = history.get_or_insert_with(HashMap::new);
        if read_late && !late.is_empty() {
            // Before a late range, each sequence's last result: the one whose span reaches in.
            let mut lookups = Vec::new();
            for (&monitor_id, &(from, _)) in &late {
                let lookback = lookback_ms.get(monitor_id).copied().unwrap_or_default();
                let since = from.saturating_sub(lookback);
                lookups.push((monitor_id, None, from, since));
                for (key_monitor, region) in newest.keys() {
                    if key_monitor == monitor_id && region.is_some() {
                        lookups.push((monitor_id, region.as_deref(), from, since));
                    }
                }
            }
            for point in self.last_before(tx, &lookups, fresh).await? {
                let points = history.entry(point.0).or_default();
                if !points.iter().any(|p| p.id == point.1.id) {
                    points.push(point.1);
                }
            }
        }
        if !read_late {
            tracing::warn!(
                monitors = late.len(),
                "late results span more than {MAX_CORRECTION_ROWS} stored results: \
                 their monitors' uptime is not corrected for this batch"
            );
        }
        for result in stored {
            if late.contains_key(result.monitor_id.as_str()) {
                continue;
            }
            history
                .entry(result.monitor_id.clone())
                .or_default()
                .push(TimePoint {
                    id: result.id.clone(),
                    region: result.region.clone(),
                    ts: result.ts,
                    status: result.status,
                });
        }
        // Each key's newest stored result: the older point the new time depends on (a location
        // whose newest is older than a late read's range still needs it).
        for ((monitor_id, _), known) in &newest {
            let points = history.entry(monitor_id.clone()).or_default();
            // The monitor's row names no location: its newest result may be there twice, once
            // with its location (which the locations' timelines need) and once without.
            if !points
                .iter()
                .any(|p| p.id == known.point.id && p.region == known.point.region)
            {
                points.push(known.point.clone());
            }
        }

        let mut spans = Vec::with_capacity(news.len());
        for (key, &(_, latest)) in &news {
            let (monitor_id, region) = key;
            if late.contains_key(monitor_id.as_str()) && !read_late {
                continue;
            }
            let Some(points) = history.get(monitor_id.as_str()) else {
                continue;
            };
            let points: Vec<TimePoint> = points
                .iter()
                .filter(|p| region.is_none() || p.region == *region)
                .cloned()
                .collect();
            let old_until = until(key);
            let new_until = old_until.map_or(latest, |u| u.max(latest));
            spans.push(TimeSpan {
                monitor_id: monitor_id.clone(),
                region: region.clone(),
                points,
                old_until,
                new_until,
            });
        }
        Ok(spans)
    }

    /// Each key's newest result before this batch, from its status row (`rows`, read by
    /// `read_status_rows`).
    fn newest_results(rows: &StatusesBefore) -> HashMap<Key, Newest> {
        rows.iter()
            .map(|((monitor_id, region), row)| {
                let point = TimePoint {
                    id: row.last_result_id.clone(),
                    region: region.clone(),
                    ts: row.last_result_at,
                    status: row.newest_status,
                };
                (
                    (monitor_id.clone(), region.clone()),
                    Newest {
                        ts: row.last_result_at,
                        point,
                    },
                )
            })
            .collect()
    }

    /// For each (monitor, location or any, before, since), the newest result of the monitor (of
    /// that location) checked in `[since, before)`, if any, with its monitor id.
    async fn last_before(
        &self,
        tx: &mut impl Statements,
        lookups: &[(&str, Option<&str>, i64, i64)],
        fresh: &[(String, i64)],
    ) -> anyhow::Result<Vec<(String, TimePoint)>> {
        let mut found = Vec::new();
        for chunk in lookups.chunks(100) {
            let mut next = 0;
            let mut placeholder = || {
                next += 1;
                format!("${next}")
            };
            let sqlite = self.backend().keeps_results_head();
            let sql = chunk
                .iter()
                .enumerate()
                .map(|(i, (_, region, _, _))| {
                    let (monitor, before, since) = (placeholder(), placeholder(), placeholder());
                    let located = match region {
                        Some(_) => format!(" AND r.region = {}", placeholder()),
                        None => String::new(),
                    };
                    let head = if sqlite { placeholder() } else { String::new() };
                    let read = by_monitor(
                        self.backend(),
                        "r.id, r.monitor_id, r.region, r.ts, r.status",
                        &monitor,
                        &head,
                        &|t| format!(" AND {t}.ts < {before} AND {t}.ts >= {since}{located}"),
                        Order::Newest,
                        "1",
                    );
                    format!("SELECT * FROM ({read}) AS b{i}")
                })
                .collect::<Vec<_>>()
                .join(" UNION ALL ");
            // Read packed (`packed`): one value, not a row per result.
            let sql = packed(
                self.backend(),
                &[
                    ("id", "id"),
                    ("monitor_id", "monitor_id"),
                    ("region", "region"),
                    ("ts", "ts"),
                    ("status", "status"),
                ],
                &format!("FROM ({sql}) AS found"),
                "monitor_id, ts, id",
            );
            // On SQLite each monitor's rowids not in `result_index` (PostgreSQL binds none).
            let heads: Vec<String> = if sqlite {
                chunk
                    .iter()
                    .map(|(monitor, ..)| self.unflushed(monitor, fresh))
                    .collect()
            } else {
                Vec::new()
            };
            let mut args: Vec<Arg> = Vec::new();
            for (i, (monitor, region, before, since)) in chunk.iter().enumerate() {
                args.extend([Arg::from(*monitor), (*before).into(), (*since).into()]);
                if let Some(region) = region {
                    args.push((*region).into());
                }
                if let Some(head) = heads.get(i) {
                    args.push(Arg::from(head));
                }
            }
            #[derive(serde::Deserialize)]
            struct Row {
                monitor_id: String,
                #[serde(flatten)]
                point: TimePoint,
            }
            let text = tx.read_text(&sql, &args).await?;
            found.extend(
                unpack::<Row>(&text)?
                    .into_iter()
                    .map(|row| (row.monitor_id, row.point)),
            );
        }
        Ok(found)
    }

    /// The results of each monitor checked within its range (inclusive), new ones included;
    /// `None` when there are more than `MAX_CORRECTION_ROWS` of them.
    async fn history_in(
        &self,
        tx: &mut impl Statements,
        ranges: &BTreeMap<&str, (i64, i64)>,
        fresh: &[(String, i64)],
    ) -> anyhow::Result<Option<HashMap<String, Vec<TimePoint>>>> {
        let mut history: HashMap<String, Vec<TimePoint>> = HashMap::new();
        if ranges.is_empty() {
            return Ok(Some(history));
        }
        let ranges: Vec<serde_json::Value> = ranges
            .iter()
            .map(|(id, (from, until))| {
                // On SQLite each monitor's rowids not in `result_index`: the head's and this
                // batch's own.
                let head = if self.backend().keeps_results_head() {
                    self.unflushed_rowids(id, fresh)
                } else {
                    Vec::new()
                };
                serde_json::json!({ "monitor_id": id, "from": from, "until": until, "head": head })
            })
            .collect();
        #[derive(serde::Deserialize)]
        struct Row {
            monitor_id: String,
            #[serde(flatten)]
            point: TimePoint,
        }
        // Read packed (`packed`): one value, not a row per result.
        let sql = packed(
            self.backend(),
            &[
                ("id", "res.id"),
                ("monitor_id", "res.monitor_id"),
                ("region", "res.region"),
                ("ts", "res.ts"),
                ("status", "res.status"),
            ],
            &format!(
                "FROM ({source}) AS res LIMIT $2",
                source = self.ranges_read()
            ),
            "monitor_id, ts, id",
        );
        let ranges = serde_json::to_string(&ranges)?;
        let text = tx
            .read_text(
                &sql,
                &[Arg::from(&ranges), (MAX_CORRECTION_ROWS + 1).into()],
            )
            .await?;
        let rows: Vec<Row> = unpack(&text)?;
        if rows.len() as i64 > MAX_CORRECTION_ROWS {
            return Ok(None);
        }
        for row in rows {
            history.entry(row.monitor_id).or_default().push(row.point);
        }
        Ok(Some(history))
    }

    /// The results within each range of `$1` (`history_in`): on PostgreSQL through
    /// `results_monitor_ts`, on SQLite through `result_index` and each range's `head` rowids.
    fn ranges_read(&self) -> String {
        let rows = json_rows(self.backend(), "$1");
        let columns = "res.id, res.monitor_id, res.region, res.ts, res.status";
        let within = |t: &str| {
            format!(
                "{t}.monitor_id = r.value ->> 'monitor_id' \
                 AND {t}.ts >= CAST(r.value ->> 'from' AS BIGINT) \
                 AND {t}.ts <= CAST(r.value ->> 'until' AS BIGINT)"
            )
        };
        if !self.backend().keeps_results_head() {
            return format!(
                "SELECT {columns} FROM {rows} JOIN results res ON {}",
                within("res")
            );
        }
        // `UNION`: a row read from both (its chunk committed after the head was read) counts
        // once.
        format!(
            "SELECT {columns} FROM {rows} JOIN result_index x ON {} \
             JOIN results res ON res.id = x.id \
             UNION SELECT {columns} FROM {rows} \
             JOIN results res ON res.rowid IN (SELECT value FROM json_each(r.value -> 'head')) \
             AND {}",
            within("x"),
            within("res"),
        )
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashSet};

    use super::*;
    use crate::service::uptime::Timeline;
    use crate::store::testing::sqlite_store;

    use crate::service::ingest::batch::store_standing;
    use crate::service::ingest::batch::IngestRules;
    use crate::service::testing::NewestDecides;
    use crate::store::{StoredVerdict, TimeCredit};

    /// A multi-location monitor's rules: a quorum of 2, results standing 25 s at most.
    struct Quorum(Timeline);

    impl IngestRules for Quorum {
        fn advance(
            &self,
            id: &str,
            state: StoredVerdict,
            result: shared_proto::poller_api::Verdict,
        ) -> StoredVerdict {
            NewestDecides.advance(id, state, result)
        }
        fn unchanged_until(&self, id: &str, ts: i64) -> i64 {
            NewestDecides.unchanged_until(id, ts)
        }
        fn interval_ms(&self, id: &str) -> i64 {
            NewestDecides.interval_ms(id)
        }
        fn lookback_ms(&self, _: &str) -> i64 {
            self.0.cap_ms
        }
        fn credit_time(
            &self,
            _: &str,
            region: Option<&str>,
            history: &[&TimePoint],
            new: &HashSet<&str>,
            old_until: Option<i64>,
            new_until: i64,
        ) -> Vec<TimeCredit> {
            let timeline = if region.is_some() {
                self.0.location()
            } else {
                self.0
            };
            timeline.credit(history, new, old_until, new_until)
        }
        fn dependency_diff(
            &self,
            monitor_id: &str,
            region: &str,
            at: i64,
            before: &[crate::store::DependencyRow],
            report: &crate::store::DependencyReport,
        ) -> crate::store::DependencyDiff {
            NewestDecides.dependency_diff(monitor_id, region, at, before, report)
        }
    }

    fn hours(credits: &[TimeCredit]) -> BTreeMap<i64, (i64, i64)> {
        credits
            .iter()
            .filter(|c| c.resolution == Resolution::Hour && (c.up_ms, c.down_ms) != (0, 0))
            .map(|c| (c.bucket_start, (c.up_ms, c.down_ms)))
            .collect()
    }

    /// Whatever order and batches three locations' results arrive in (each location's own in
    /// order, or not), the stored time is what the whole history says: the status rows stand
    /// in for older results when a batch is in order, late batches read what they need.
    #[tokio::test]
    async fn stored_time_is_the_whole_historys_in_any_arrival_order() {
        // Minutes for seconds: results 10 minutes apart spread over several hour buckets.
        const MIN: i64 = 60_000;
        let timeline = Timeline {
            cap_ms: 25 * MIN,
            quorum: Some(2),
            pause: None,
        };
        let rules = Quorum(timeline);
        let mut seed: u64 = 7;
        let mut next = move |below: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % below
        };
        for case in 0..24 {
            let (store, _dir) = sqlite_store().await;
            let mut results = Vec::new();
            for (r, region) in ["eu", "us", "ap"].iter().enumerate() {
                let mut ts = MIN * r as i64;
                for k in 0..12 {
                    // Mostly every 10 minutes, now and then a silence longer than the cap.
                    ts += if next(8) == 0 { 40 * MIN } else { 10 * MIN };
                    let status = ["up", "up", "down", "rate_limited"][next(4) as usize];
                    results.push(NewResult {
                        id: format!("{region}-{k:02}"),
                        monitor_id: "m1".into(),
                        region: Some(region.to_string()),
                        ts,
                        status: shared_proto::poller_api::ResultStatus::parse(status).unwrap(),
                        latency_ms: None,
                        msg: String::new(),
                        meta: "{}".into(),
                        next_due_at: None,
                        dependencies: None,
                    });
                }
            }
            // Even cases: each location uploads in order, interleaved with the others; odd
            // cases: any order at all.
            let mut arriving = results.clone();
            if case % 2 == 1 {
                for i in (1..arriving.len()).rev() {
                    arriving.swap(i, next(i as u64 + 1) as usize);
                }
            } else {
                let mut by_region: BTreeMap<String, Vec<NewResult>> = BTreeMap::new();
                for r in arriving.drain(..) {
                    by_region
                        .entry(r.region.clone().unwrap())
                        .or_default()
                        .push(r);
                }
                for queue in by_region.values_mut() {
                    queue.sort_by_key(|r| r.ts);
                    queue.reverse();
                }
                while by_region.values().any(|q| !q.is_empty()) {
                    let regions: Vec<String> = by_region.keys().cloned().collect();
                    let region = &regions[next(3) as usize];
                    if let Some(r) = by_region.get_mut(region).unwrap().pop() {
                        arriving.push(r);
                    }
                }
            }
            let mut start = 0;
            while start < arriving.len() {
                let end = (start + 1 + next(6) as usize).min(arriving.len());
                store_standing(&store, "p1", &arriving[start..end], 1, &rules)
                    .await
                    .unwrap();
                // Now and then a flush: late batches read some results from the index, some
                // from the head.
                if next(3) == 0 {
                    store.flush_results_head().await.unwrap();
                }
                start = end;
            }

            let points: Vec<TimePoint> = results
                .iter()
                .map(|r| TimePoint {
                    id: r.id.clone(),
                    region: r.region.clone(),
                    ts: r.ts,
                    status: r.status,
                })
                .collect();
            for region in ["", "eu", "us", "ap"] {
                let mine: Vec<&TimePoint> = points
                    .iter()
                    .filter(|p| region.is_empty() || p.region.as_deref() == Some(region))
                    .collect();
                let until = mine.iter().map(|p| p.ts).max().unwrap();
                let ids: HashSet<&str> = mine.iter().map(|p| p.id.as_str()).collect();
                let rule = if region.is_empty() {
                    timeline
                } else {
                    timeline.location()
                };
                let expected = hours(&rule.credit(&mine, &ids, None, until));
                let stored: BTreeMap<i64, (i64, i64)> = store
                    .rollup_buckets("m1", region, Resolution::Hour, 0, 1_000)
                    .await
                    .unwrap()
                    .into_iter()
                    .filter(|b| (b.sums.up_ms, b.sums.down_ms) != (0, 0))
                    .map(|b| (b.bucket_start, (b.sums.up_ms, b.sums.down_ms)))
                    .collect();
                assert_eq!(stored, expected, "case {case}, region {region:?}");
            }
        }
    }
}
