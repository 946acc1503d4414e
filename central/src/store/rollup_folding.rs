//! Folding closed hours into their days: a rollups' hour row not yet in its day (`folded` 0)
//! is added to the day row and marked folded, in steps of a few hundred rows. Ingest writes
//! hours only (`rollups`), so a day row is written once per hour of each monitor and location
//! instead of once per result (docs/rollup-folding.md). Owns only the fold; when it runs is
//! `duties::upkeep`'s, and what a bucket holds is `rollups`'.
//!
//! Exactly once, per row rather than per watermark: the fold locks the hour rows it takes (on
//! PostgreSQL; SQLite has one writer) and marks them in the transaction that adds them to their
//! days, and ingest's upsert of an hour row returns whether it was folded (`rollups`), adding
//! to the day itself when it was. A row that ingest creates after a fold passed its hour (a late
//! result) starts unfolded and is taken by the next fold. A step can stop anywhere.

use sqlx::Row;

use super::dialect::json_rows;
use super::rollups::{adding_on_conflict, summed_columns};
use super::{Resolution, Store};

/// An hour row's key: where a round of folding has got to, so that its next step starts after
/// it instead of walking again the unfolded rows of the open hour it passed (`fold_hours`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HourKey {
    pub monitor_id: String,
    pub region: String,
    pub bucket_start: i64,
}

impl HourKey {
    /// Before every row: monitor ids are never empty.
    pub fn start() -> Self {
        HourKey {
            monitor_id: String::new(),
            region: String::new(),
            bucket_start: i64::MIN,
        }
    }
}

impl Store {
    /// Folds up to `limit` hour rows that started before `before` into their days, the first
    /// ones after `after` in key order; returns how many and the last one, so that the caller
    /// goes on from there in steps that never hold the writer long. Cost: the rows folded,
    /// found through the index of unfolded rows (`rollups_unfolded`), which holds only the
    /// hours not folded yet; a round that starts each step after the last (rather than at the
    /// index's start) never walks the open hour's rows twice.
    pub async fn fold_hours(
        &self,
        before: i64,
        after: &HourKey,
        limit: u32,
    ) -> anyhow::Result<(u64, HourKey)> {
        let _guard = self.write_lock().await;
        let mut tx = self.writer.begin().await?;
        // In key order, locked on PostgreSQL: ingest locks hour rows in the same order, and
        // then waits for this step (or this step for it) instead of crossing it.
        let lock = super::dialect::row_lock(self.backend());
        let rows = sqlx::query(&format!(
            "SELECT monitor_id, region, bucket_start FROM rollups \
             WHERE folded = 0 AND bucket_start < $1 \
                AND (monitor_id, region, bucket_start) > ($3, $4, $5) \
             ORDER BY monitor_id, region, bucket_start LIMIT $2{lock}"
        ))
        .bind(before)
        .bind(i64::from(limit))
        .bind(&after.monitor_id)
        .bind(&after.region)
        .bind(after.bucket_start)
        .fetch_all(&mut *tx)
        .await?;
        let mut last = after.clone();
        let mut keys = Vec::with_capacity(rows.len());
        for row in &rows {
            last = HourKey {
                monitor_id: row.try_get(0)?,
                region: row.try_get(1)?,
                bucket_start: row.try_get(2)?,
            };
            keys.push(serde_json::json!([
                last.monitor_id,
                last.region,
                last.bucket_start
            ]));
        }
        if keys.is_empty() {
            return Ok((0, last));
        }
        let count = keys.len() as u64;
        let keys = serde_json::to_string(&keys)?;
        let summed = summed_columns();
        let sums = summed
            .iter()
            .map(|column| format!("SUM(h.{column})"))
            .collect::<Vec<_>>()
            .join(", ");
        let taken = format!(
            "{rows} JOIN rollups h ON h.monitor_id = r.value ->> 0 \
                AND h.region = r.value ->> 1 AND h.resolution = 'hour' \
                AND h.bucket_start = CAST(r.value ->> 2 AS BIGINT)",
            rows = json_rows(self.backend(), "$1")
        );
        // Days in key order, as ingest takes them (a late result adding to its day). The day
        // is floored as `Resolution::bucket_of` floors it: SQL's `%` truncates toward zero.
        let day = Resolution::Day.width_ms();
        sqlx::query(&format!(
            "INSERT INTO rollups (monitor_id, region, resolution, bucket_start, {}, \
                latency_min, latency_max, folded) \
             SELECT h.monitor_id, h.region, 'day', \
                h.bucket_start - ((h.bucket_start % {day}) + {day}) % {day}, \
                {sums}, MIN(h.latency_min), MAX(h.latency_max), 1 \
             FROM {taken} WHERE true GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4 {}",
            summed.join(", "),
            adding_on_conflict(),
        ))
        .bind(&keys)
        .execute(&mut *tx)
        .await?;
        // A join, not `(…) IN (SELECT …)`: SQLite searched that by three columns of the key
        // only, walking every hour of the monitor (seen with `EXPLAIN QUERY PLAN`).
        sqlx::query(&format!(
            "UPDATE rollups SET folded = 1 FROM {} \
             WHERE rollups.monitor_id = r.value ->> 0 AND rollups.region = r.value ->> 1 \
                AND rollups.resolution = 'hour' \
                AND rollups.bucket_start = CAST(r.value ->> 2 AS BIGINT)",
            json_rows(self.backend(), "$1")
        ))
        .bind(&keys)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok((count, last))
    }
}

#[cfg(test)]
mod tests {
    //! The fold against a reference model: whatever order results, late results, re-sent batches
    //! and folds (stopped anywhere) come in, every day reads as the sum of what was stored for it,
    //! and as the sum of its hours.

    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use crate::store::testing::{runtime, sqlite_store};

    use crate::service::ingest::batch::store_standing;
    use crate::service::testing::NewestDecides;
    use crate::store::{HourKey, NewResult, Resolution, RollupSums, Store};

    const HOUR: i64 = 3_600_000;
    const DAY: i64 = 86_400_000;
    /// A UTC midnight.
    const START: i64 = 20_000 * DAY;
    /// Results fall in three days.
    const SPAN_MIN: i64 = 3 * 24 * 60;
    /// Monitor `m0` is checked as a whole, `m1` from two locations.
    const WHERES: [(&str, Option<&str>); 3] =
        [("m0", None), ("m1", Some("eu")), ("m1", Some("us"))];

    /// A result to make: where (`WHERES`), minute from `START`, up, latency.
    type Made = (usize, i64, bool, i64);

    #[derive(Debug, Clone)]
    enum Op {
        Upload(Vec<Made>),
        /// One of the batches sent before, again (a poller retrying): it counts nothing.
        Again(prop::sample::Index),
        /// Folds at most `limit` rows of the hours before `START` + `hours`, after the last row
        /// the previous fold took (`resume`: a round's next step) or from the start.
        Fold {
            hours: i64,
            limit: u32,
            resume: bool,
        },
    }

    fn ops() -> impl Strategy<Value = Vec<Op>> {
        let made = (0..WHERES.len(), 0..SPAN_MIN, any::<bool>(), 0i64..3_000);
        let op = prop_oneof![
            4 => proptest::collection::vec(made, 1..8).prop_map(Op::Upload),
            1 => any::<prop::sample::Index>().prop_map(Op::Again),
            2 => (0i64..80, 1u32..6, any::<bool>())
                .prop_map(|(hours, limit, resume)| Op::Fold { hours, limit, resume }),
        ];
        proptest::collection::vec(op, 1..40)
    }

    /// What the results say of a bucket, counted the simple way (time is checked against the
    /// hours instead: `service::uptime` has its own model).
    #[derive(Debug, Default, PartialEq, Eq, Clone, Copy)]
    struct Counts {
        up: i64,
        down: i64,
        latency_count: i64,
        latency_sum: i64,
    }

    impl Counts {
        fn of(sums: &RollupSums) -> Self {
            Counts {
                up: sums.up,
                down: sums.down,
                latency_count: sums.latency_count,
                latency_sum: sums.latency_sum,
            }
        }

        fn add(&mut self, up: bool, latency: i64) {
            if up {
                self.up += 1;
                self.latency_count += 1;
                self.latency_sum += latency;
            } else {
                self.down += 1;
            }
        }
    }

    /// The rows of a place: the whole monitor's (`''`) or a location's.
    fn places() -> [(&'static str, &'static str); 4] {
        [("m0", ""), ("m1", ""), ("m1", "eu"), ("m1", "us")]
    }

    fn result(n: usize, (place, minute, up, latency): Made) -> NewResult {
        let (monitor, region) = WHERES[place];
        NewResult {
            id: format!("r{n}"),
            monitor_id: monitor.into(),
            region: region.map(Into::into),
            ts: START + minute * 60_000 + 7_000,
            status: if up {
                shared_proto::poller_api::ResultStatus::Up
            } else {
                shared_proto::poller_api::ResultStatus::Down
            },
            latency_ms: Some(latency),
            msg: String::new(),
            meta: "{}".into(),
            next_due_at: None,
            dependencies: None,
        }
    }

    async fn days(store: &Store, monitor: &str, region: &str) -> BTreeMap<i64, RollupSums> {
        let rows = store
            .rollup_buckets(monitor, region, Resolution::Day, 0, 100)
            .await
            .unwrap();
        rows.into_iter().map(|r| (r.bucket_start, r.sums)).collect()
    }

    /// The hours, added up per day.
    async fn days_of_hours(
        store: &Store,
        monitor: &str,
        region: &str,
    ) -> BTreeMap<i64, RollupSums> {
        let rows = store
            .rollup_buckets(monitor, region, Resolution::Hour, 0, 10_000)
            .await
            .unwrap();
        let mut days: BTreeMap<i64, RollupSums> = BTreeMap::new();
        for row in rows {
            days.entry(Resolution::Day.bucket_of(row.bucket_start))
                .or_default()
                .add(&row.sums);
        }
        days
    }

    /// Every place's days read as the model's counts and as the sum of their hours, one by one
    /// and summed from `from` on.
    async fn check(store: &Store, model: &BTreeMap<(&str, &str, i64), Counts>, from: i64) {
        for (monitor, region) in places() {
            let days = days(store, monitor, region).await;
            assert_eq!(
                days,
                days_of_hours(store, monitor, region).await,
                "{monitor} {region:?}"
            );
            // A day can hold time and no result: the last result of the day before stands into it
            // (its time is checked against the hours above).
            let counted: BTreeMap<i64, Counts> = days
                .iter()
                .map(|(d, s)| (*d, Counts::of(s)))
                .filter(|(_, counts)| *counts != Counts::default())
                .collect();
            let expected: BTreeMap<i64, Counts> = model
                .iter()
                .filter(|((m, r, _), _)| *m == monitor && *r == region)
                .map(|((_, _, day), counts)| (*day, *counts))
                .collect();
            assert_eq!(counted, expected, "{monitor} {region:?}");
            let mut since = RollupSums::default();
            for sums in days.range(from..).map(|(_, sums)| sums) {
                since.add(sums);
            }
            let summed = store
                .rollup_sums(
                    &[monitor.to_string()],
                    region,
                    Resolution::Day,
                    from,
                    i64::MAX,
                )
                .await
                .unwrap()
                .remove(monitor)
                .unwrap_or_default();
            assert_eq!(summed, since, "{monitor} {region:?} from {from}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

        /// Days folded from hours in steps, late results adding to folded days themselves, and
        /// reads adding the hours not folded yet: each result is in its day exactly once.
        #[test]
        fn each_result_is_in_its_day_exactly_once(ops in ops(), from_min in 0..SPAN_MIN) {
            runtime().block_on(async {
                let (store, _dir) = sqlite_store().await;
                let mut model: BTreeMap<(&str, &str, i64), Counts> = BTreeMap::new();
                let mut sent: Vec<Vec<NewResult>> = Vec::new();
                let mut made = 0;
                let mut last = HourKey::start();
                let from = START + from_min * 60_000;
                for (n, op) in ops.into_iter().enumerate() {
                    match op {
                        Op::Upload(batch) => {
                            let results: Vec<NewResult> = batch
                                .iter()
                                .map(|r| {
                                    made += 1;
                                    result(made, *r)
                                })
                                .collect();
                            for (r, &(place, _, up, latency)) in results.iter().zip(&batch) {
                                let (monitor, region) = WHERES[place];
                                let day = Resolution::Day.bucket_of(r.ts);
                                for region in std::iter::once("").chain(region) {
                                    model.entry((monitor, region, day)).or_default().add(up, latency);
                                }
                            }
                            store_standing(&store, "p1", &results, n as i64, &NewestDecides).await.unwrap();
                            sent.push(results);
                        }
                        Op::Again(index) if !sent.is_empty() => {
                            let again = sent[index.index(sent.len())].clone();
                            store_standing(&store, "p1", &again, n as i64, &NewestDecides).await.unwrap();
                        }
                        Op::Again(_) => {}
                        Op::Fold { hours, limit, resume } => {
                            let after = if resume { last.clone() } else { HourKey::start() };
                            let (folded, next) =
                                store.fold_hours(START + hours * HOUR, &after, limit).await.unwrap();
                            assert!(folded <= u64::from(limit));
                            last = next;
                        }
                    }
                    check(&store, &model, from).await;
                }
                // Everything folded, in one round of steps: the same days, from day rows alone.
                let mut after = HourKey::start();
                loop {
                    let (folded, last) = store.fold_hours(i64::MAX, &after, 7).await.unwrap();
                    if folded < 7 {
                        break;
                    }
                    after = last;
                }
                check(&store, &model, from).await;
                let unfolded: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM rollups WHERE folded = 0")
                    .fetch_one(&store.pool)
                    .await
                    .unwrap();
                assert_eq!(unfolded, 0);
            });
        }
    }

    async fn rows_by_resolution(store: &Store) -> BTreeMap<String, i64> {
        sqlx::query_as::<_, (String, i64)>(
            "SELECT resolution || ':' || folded, COUNT(*) FROM rollups GROUP BY 1",
        )
        .fetch_all(&store.pool)
        .await
        .unwrap()
        .into_iter()
        .collect()
    }

    /// Ingest writes hours only: a result in an hour not folded yet writes no day row (the change
    /// that makes an upload cheaper); the fold writes it; a late result then adds to it itself.
    #[tokio::test]
    async fn an_upload_writes_its_day_only_for_hours_already_folded() {
        let (store, _dir) = sqlite_store().await;
        let batch = [result(1, (0, 90, true, 40)), result(2, (0, 95, false, 0))];
        store_standing(&store, "p1", &batch, 1, &NewestDecides)
            .await
            .unwrap();
        let rows = rows_by_resolution(&store).await;
        assert_eq!(rows, BTreeMap::from([("hour:0".to_string(), 1)]));

        let start = HourKey::start();
        let folded = store.fold_hours(START + 2 * HOUR, &start, 100).await;
        assert_eq!(folded.unwrap().0, 1);
        let rows = rows_by_resolution(&store).await;
        assert_eq!(
            rows,
            BTreeMap::from([("hour:1".into(), 1), ("day:1".into(), 1)])
        );
        assert_eq!(
            store
                .fold_hours(START + 2 * HOUR, &start, 100)
                .await
                .unwrap()
                .0,
            0,
            "folded once"
        );

        // Late, into the folded hour: its day moves at once.
        let late = [result(3, (0, 100, true, 60))];
        store_standing(&store, "p1", &late, 2, &NewestDecides)
            .await
            .unwrap();
        let day = days(&store, "m0", "").await.remove(&START).unwrap();
        assert_eq!((day.up, day.down, day.latency_sum), (2, 1, 100));
        let rows = rows_by_resolution(&store).await;
        assert_eq!(
            rows,
            BTreeMap::from([("hour:1".into(), 1), ("day:1".into(), 1)])
        );
    }

    /// SQL's `%` truncates toward zero; a day is floored (`Resolution::bucket_of`), so an hour
    /// before 1970 folds into the day it is in, as its reads and a late result count it.
    #[tokio::test]
    async fn an_hour_before_1970_folds_into_its_own_day() {
        let (store, _dir) = sqlite_store().await;
        let mut before = result(1, (0, 0, true, 40));
        before.ts = -30 * 60_000;
        store_standing(&store, "p1", &[before], 1, &NewestDecides)
            .await
            .unwrap();
        let days = || async {
            store
                .rollup_buckets("m0", "", Resolution::Day, -2 * DAY, 10)
                .await
                .unwrap()
                .into_iter()
                .map(|r| (r.bucket_start, r.sums))
                .collect::<BTreeMap<_, _>>()
        };
        let read = days().await;
        store.fold_hours(0, &HourKey::start(), 10).await.unwrap();
        let folded = days().await;
        assert_eq!(read.keys().collect::<Vec<_>>(), [&-DAY]);
        assert_eq!(folded, read);
    }

    /// A round's step starts after the last row of the step before: rows before it are not walked
    /// again (nor folded by that step: the next round takes any left there).
    #[tokio::test]
    async fn a_step_starts_after_the_last_row_of_the_one_before() {
        let (store, _dir) = sqlite_store().await;
        let batch = [result(1, (0, 10, true, 40)), result(2, (1, 10, true, 40))];
        store_standing(&store, "p1", &batch, 1, &NewestDecides)
            .await
            .unwrap();
        let past_m0 = HourKey {
            monitor_id: "m0".into(),
            region: String::new(),
            bucket_start: i64::MAX,
        };
        let (folded, last) = store.fold_hours(START + HOUR, &past_m0, 5).await.unwrap();
        assert_eq!(
            (folded, last.monitor_id.as_str(), last.region.as_str()),
            (2, "m1", "eu")
        );
        let (folded, last) = store
            .fold_hours(START + HOUR, &HourKey::start(), 5)
            .await
            .unwrap();
        assert_eq!(
            (folded, last.monitor_id.as_str()),
            (1, "m0"),
            "the next round"
        );
    }
}
