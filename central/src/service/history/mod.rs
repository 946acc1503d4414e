//! History reads: uptime over fixed windows and bucketed history, from the hour and day rollups,
//! the status rows, and for minutes (charts, and a window's partial first hour) the results of
//! the minutes asked for (`minutes`); and the latency percentile estimated from their bands.
//! Pruning is `retention`'s; keeping the rollups current is the store's, at ingest.

mod minutes;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures_util::{StreamExt, TryStreamExt};

use shared_proto::history::{
    History, HistoryBucket, HistoryResolution, LocationUptime, Uptime, UptimeWindow, UptimeWindows,
};
use shared_proto::PollerMode;
use uuid::Uuid;

pub use minutes::{Minutes, MAX_EDGE_RESULTS, MAX_MINUTE_RESULTS};

use super::clock::Clock;
use super::uptime::{self, Span, Timeline};
use super::{time_of, App};
use crate::domain::Monitor;
use crate::service::error::{ServiceError, ServiceResult};
use crate::store::{Resolution, RollupSums, StatusRow, Store, TimePoint, LATENCY_BOUNDS_MS};

/// The most buckets one history answer holds.
pub const MAX_HISTORY_BUCKETS: u32 = 5_000;

/// How long each kind of history is kept; from the configuration.
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    pub results_ms: i64,
    pub minutes_ms: i64,
    pub hours_ms: i64,
    pub days_ms: i64,
}

impl Retention {
    pub fn of(&self, resolution: Resolution) -> i64 {
        match resolution {
            Resolution::Minute => self.minutes_ms,
            Resolution::Hour => self.hours_ms,
            Resolution::Day => self.days_ms,
        }
    }

    /// The finest stored buckets still kept for the whole of a window: 24 h, 7 and 30 days
    /// from hours, a year from days (with the default retention).
    fn finest_covering(&self, window_ms: i64) -> Resolution {
        Resolution::STORED
            .into_iter()
            .find(|&resolution| self.of(resolution) >= window_ms)
            .unwrap_or(Resolution::Day)
    }
}

const DAY_MS: i64 = 86_400_000;
const UPTIME_WINDOWS_MS: [i64; 4] = [DAY_MS, 7 * DAY_MS, 30 * DAY_MS, 365 * DAY_MS];

pub fn resolution_of(resolution: HistoryResolution) -> Resolution {
    match resolution {
        HistoryResolution::Minute => Resolution::Minute,
        HistoryResolution::Hour => Resolution::Hour,
        HistoryResolution::Day => Resolution::Day,
    }
}

/// What a monitor's history says: uptime over windows and its buckets (minutes, hours, days), read from the rollups and the results.
#[derive(Clone)]
pub struct MonitorHistory {
    store: Arc<Store>,
    clock: Clock,
    retention: Retention,
}

impl App {
    /// The history service, on this central's parts.
    pub fn history(&self) -> MonitorHistory {
        MonitorHistory {
            store: self.store.clone(),
            clock: self.clock.clone(),
            retention: self.limits.retention,
        }
    }
}

impl axum::extract::FromRef<std::sync::Arc<App>> for MonitorHistory {
    fn from_ref(app: &std::sync::Arc<App>) -> Self {
        app.history()
    }
}

impl MonitorHistory {
    fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// The maintenance windows, on the same store and clock (uptime leaves their time out).
    fn maintenance(&self) -> super::maintenance::Maintenance {
        super::maintenance::Maintenance::new(self.store.clone(), self.clock.clone())
    }
    /// Uptime and latency of monitors over windows that end now (24 h, 7, 30 and 365 days), the
    /// whole monitor's (`region` `''`) or one location's. A window is its stored buckets from
    /// the first whole one it holds on (time, counts and latency), plus the span the newest
    /// result stands for that no later result has closed yet (`service::uptime`), plus its
    /// partial first bucket: exactly, from the minutes of that stretch (`minute_sums`), while
    /// the results are kept that far back and number at most `MAX_EDGE_RESULTS`; else in
    /// proportion to its overlap with the window (off by at most what that one bucket held).
    /// Cost per window: an indexed sum over the monitors' whole buckets; unless it starts on
    /// a bucket's edge, another over its first bucket, or their results in it (an hour, for
    /// windows within the results' retention); and one read of their status rows.
    pub async fn uptimes(
        &self,
        monitors: &[Monitor],
        region: &str,
        windows_ms: &[i64],
    ) -> ServiceResult<Vec<HashMap<String, UptimeWindow>>> {
        let now = self.now_ms();
        let ids: Vec<String> = monitors.iter().map(|m| m.id.clone()).collect();
        let open = self.open_spans(monitors, region, now).await?;
        // Two windows at a time: a rendering that waits for its reads (a status page's five
        // windows) is made in about half the time, and leaves the other readers' connections
        // to them.
        let (ids, open) = (&ids, &open);
        let windows: Vec<_> = windows_ms
            .iter()
            .map(|&window| self.window_uptimes(monitors, ids, region, open, now, window))
            .collect();
        futures_util::stream::iter(windows)
            .buffered(2)
            .try_collect()
            .await
    }

    /// Each monitor's uptime over the `window_ms` up to `now` (`uptimes`).
    async fn window_uptimes(
        &self,
        monitors: &[Monitor],
        ids: &[String],
        region: &str,
        open: &HashMap<String, Vec<Span>>,
        now: i64,
        window: i64,
    ) -> ServiceResult<HashMap<String, UptimeWindow>> {
        let resolution = self.retention.finest_covering(window);
        let start = now - window;
        let edge = resolution.bucket_of(start);
        // A window that starts on a bucket's edge (the day so far does) holds every bucket
        // whole: it has no partial first one to read results or guess for.
        let aligned = edge == start;
        let whole_from = if aligned {
            start
        } else {
            edge + resolution.width_ms()
        };
        // Monitors whose results still hold the window's first stretch get it exactly.
        let exact: Vec<Monitor> = monitors
            .iter()
            .filter(|m| !aligned && start >= self.minute_reach(now, Timeline::of_monitor(m).cap_ms))
            .cloned()
            .collect();
        let mut first_stretch = self
            .minute_sums(
                &exact,
                region,
                (start, whole_from.min(now)),
                MAX_EDGE_RESULTS,
            )
            .await?;
        first_stretch.retain(|_, minutes| minutes.cut.is_none());
        let exact_ids: HashSet<&str> = first_stretch.keys().map(String::as_str).collect();
        let whole = self
            .store
            .rollup_sums(ids, region, resolution, whole_from, i64::MAX)
            .await?;
        let rough: Vec<String> = if aligned {
            Vec::new()
        } else {
            ids.iter()
                .filter(|id| !exact_ids.contains(id.as_str()))
                .cloned()
                .collect()
        };
        let edges = self
            .store
            .rollup_sums(&rough, region, resolution, edge, whole_from)
            .await?;
        let mut windows = HashMap::with_capacity(ids.len());
        for id in ids {
            let mut sums = whole.get(id).cloned().unwrap_or_default();
            // Open time is counted from where the buckets' own time starts.
            let mut open_from = start;
            if let Some(minutes) = first_stretch.get(id) {
                sums.add(&minutes.total());
                open_from = whole_from;
            } else if let Some(edge_sums) = edges.get(id) {
                let outside = |ms: i64| {
                    (i128::from(ms) * i128::from(start - edge) / i128::from(resolution.width_ms()))
                        as i64
                };
                sums.add(edge_sums);
                sums.up_ms -= outside(edge_sums.up_ms);
                sums.down_ms -= outside(edge_sums.down_ms);
            }
            let (mut up, mut down) = (sums.up_ms, sums.down_ms);
            if let Some(spans) = open.get(id) {
                let (open_up, open_down) = uptime::total(spans, open_from, now);
                up += open_up;
                down += open_down;
            }
            windows.insert(id.clone(), uptime_window(&sums, (up, down), window));
        }
        Ok(windows)
    }

    /// The spans each monitor's (or location's) newest results stand for from the newest
    /// result on, to now: not in any bucket until a later result closes them.
    async fn open_spans(
        &self,
        monitors: &[Monitor],
        region: &str,
        now: i64,
    ) -> ServiceResult<HashMap<String, Vec<Span>>> {
        let ids: Vec<String> = monitors.iter().map(|m| m.id.clone()).collect();
        let newest = self.store.monitor_statuses(Some(&ids)).await?;
        let mut located: HashMap<String, Vec<(String, StatusRow)>> = HashMap::new();
        if !region.is_empty() || monitors.iter().any(|m| m.poller_mode == PollerMode::Multi) {
            for row in self.store.location_statuses(Some(&ids)).await? {
                located
                    .entry(row.monitor_id)
                    .or_default()
                    .push((row.region, row.status));
            }
        }
        let point = |region: Option<&str>, row: &StatusRow| TimePoint {
            id: String::new(),
            region: region.map(str::to_string),
            ts: row.last_result_at,
            status: row.newest_status,
        };
        // Time in maintenance is nobody's: the windows that reach the open spans (from the
        // oldest newest result on), and the regions of the pollers they cover.
        let oldest = newest
            .values()
            .chain(located.values().flatten().map(|(_, row)| row))
            .map(|row| row.last_result_at)
            .min()
            .unwrap_or(now);
        let quiet = self.quiet_time(monitors, oldest, now).await?;
        let mut open = HashMap::with_capacity(monitors.len());
        for monitor in monitors {
            let timeline = Timeline::of_monitor(monitor);
            let locations = located
                .get(&monitor.id)
                .map(Vec::as_slice)
                .unwrap_or_default();
            let (timeline, points, from) = if !region.is_empty() {
                let Some((_, row)) = locations.iter().find(|(r, _)| r == region) else {
                    continue;
                };
                (
                    timeline.location(),
                    vec![point(None, row)],
                    row.last_result_at,
                )
            } else {
                let Some(row) = newest.get(&monitor.id) else {
                    continue;
                };
                let points = match timeline.quorum {
                    Some(_) => locations
                        .iter()
                        .map(|(r, row)| point(Some(r), row))
                        .collect(),
                    None => vec![point(None, row)],
                };
                (timeline, points, row.last_result_at)
            };
            let points: Vec<&TimePoint> = points.iter().collect();
            let quiet = quiet
                .get(&monitor.id)
                .map(Vec::as_slice)
                .unwrap_or_default();
            let spans = uptime::outside(timeline.spans(&points, from, now), quiet);
            open.insert(monitor.id.clone(), spans);
        }
        Ok(open)
    }

    /// A monitor's uptime over the fixed windows; a multi-location monitor's with each
    /// location's beside it (unless one location was asked for).
    pub async fn monitor_uptime(&self, id: Uuid, region: Option<&str>) -> ServiceResult<Uptime> {
        let Some(monitor) = self.store.monitor(&id.to_string()).await? else {
            return Err(ServiceError::NotFound(format!("no monitor with id {id}")));
        };
        let monitors = [monitor];
        let windows = |mut sums: Vec<HashMap<String, UptimeWindow>>| {
            let mut take = |index: usize| {
                sums[index].remove(&monitors[0].id).unwrap_or_else(|| {
                    uptime_window(&RollupSums::default(), (0, 0), UPTIME_WINDOWS_MS[index])
                })
            };
            UptimeWindows {
                day: take(0),
                week: take(1),
                month: take(2),
                year: take(3),
            }
        };
        let whole = windows(
            self.uptimes(&monitors, region.unwrap_or(""), &UPTIME_WINDOWS_MS)
                .await?,
        );
        let mut locations = Vec::new();
        if region.is_none() && monitors[0].poller_mode == PollerMode::Multi {
            for region in monitors[0].regions().iter().cloned() {
                let each = windows(self.uptimes(&monitors, &region, &UPTIME_WINDOWS_MS).await?);
                locations.push(LocationUptime {
                    region,
                    windows: each,
                });
            }
        }
        Ok(Uptime {
            windows: whole,
            locations,
        })
    }

    pub async fn monitor_history(
        &self,
        id: Uuid,
        resolution: HistoryResolution,
        since: Option<i64>,
        region: Option<String>,
    ) -> ServiceResult<History> {
        let Some(monitor) = self.store.monitor(&id.to_string()).await? else {
            return Err(ServiceError::NotFound(format!("no monitor with id {id}")));
        };
        let bucket = resolution_of(resolution);
        // By default, as far back as a chart of this resolution usually shows.
        let default_span = match bucket {
            Resolution::Minute => 3_600_000,
            Resolution::Hour => DAY_MS,
            Resolution::Day => 30 * DAY_MS,
        };
        let since = since.unwrap_or_else(|| self.now_ms() - default_span);
        let (rows, cut) = if bucket == Resolution::Minute {
            self.minute_history(monitor, region.as_deref().unwrap_or(""), since)
                .await?
        } else {
            let rows = self
                .store
                .rollup_buckets(
                    &id.to_string(),
                    region.as_deref().unwrap_or(""),
                    bucket,
                    bucket.bucket_of(since),
                    MAX_HISTORY_BUCKETS + 1,
                )
                .await?;
            let rows = rows.into_iter().map(|r| (r.bucket_start, r.sums)).collect();
            (rows, false)
        };
        let truncated = cut || rows.len() > MAX_HISTORY_BUCKETS as usize;
        let buckets = rows
            .iter()
            .take(MAX_HISTORY_BUCKETS as usize)
            .map(|(start, sums)| history_bucket(*start, sums))
            .collect();
        Ok(History {
            resolution,
            region,
            buckets,
            truncated,
        })
    }

    /// A monitor's minutes from `since` (as far back as minute history reaches) to now; and
    /// whether its results held more than one answer reads (`MAX_MINUTE_RESULTS`): the read,
    /// not the span of time, bounds the answer, so gaps (a pause, a silence) never shorten it.
    async fn minute_history(
        &self,
        monitor: Monitor,
        region: &str,
        since: i64,
    ) -> ServiceResult<(Vec<(i64, RollupSums)>, bool)> {
        let minute = Resolution::Minute;
        let reach = self.minute_reach(self.now_ms(), Timeline::of_monitor(&monitor).cap_ms);
        // The first whole minute within reach.
        let from = minute
            .bucket_of(since)
            .max(minute.bucket_of(reach.saturating_add(minute.width_ms() - 1)));
        // Results up to five minutes ahead are accepted (an agent's clock); the minute after
        // that is past any of them.
        let until = minute.bucket_of(self.now_ms() + 6 * minute.width_ms());
        let id = monitor.id.clone();
        let mut minutes = self
            .minute_sums(&[monitor], region, (from, until), MAX_MINUTE_RESULTS)
            .await?;
        let minutes = minutes.remove(&id).unwrap_or_default();
        Ok((minutes.buckets.into_iter().collect(), minutes.cut.is_some()))
    }
}

fn count(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// A window's figures from its buckets' counts and its time (up, down ms), clamped to the
/// window: uptime is over the measured time only.
pub fn uptime_window(sums: &RollupSums, (up, down): (i64, i64), window_ms: i64) -> UptimeWindow {
    let (up, down) = (up.clamp(0, window_ms), down.clamp(0, window_ms));
    let measured = up + down;
    UptimeWindow {
        uptime: (measured > 0).then(|| 100.0 * up as f64 / measured as f64),
        up_ms: count(up),
        down_ms: count(down),
        unmeasured_ms: count(window_ms - measured),
        checks: count(sums.up + sums.down),
        latency_ms_mean: latency_mean(sums),
        latency_ms_p95: latency_percentile(sums, 0.95).map(count),
    }
}

fn history_bucket(start: i64, sums: &RollupSums) -> HistoryBucket {
    HistoryBucket {
        start: time_of(start),
        up: count(sums.up),
        down: count(sums.down),
        total: count(sums.total),
        up_ms: count(sums.up_ms),
        down_ms: count(sums.down_ms),
        latency_ms_mean: latency_mean(sums),
        latency_ms_min: sums.latency_min.map(count),
        latency_ms_max: sums.latency_max.map(count),
        latency_ms_p95: latency_percentile(sums, 0.95).map(count),
    }
}

pub fn latency_mean(sums: &RollupSums) -> Option<f64> {
    (sums.latency_count > 0).then(|| sums.latency_sum as f64 / sums.latency_count as f64)
}

/// The `quantile` latency estimated from the bands: the band holding that rank is found
/// exactly; inside it the value is interpolated linearly, and kept within the observed min and
/// max, so the estimate is off by at most the width of the band the true value lies in.
pub fn latency_percentile(sums: &RollupSums, quantile: f64) -> Option<i64> {
    let (min, max) = (sums.latency_min?, sums.latency_max?);
    let counted: i64 = sums.bands.iter().sum();
    if counted == 0 {
        return None;
    }
    let rank = ((quantile * counted as f64).ceil() as i64).clamp(1, counted);
    let mut below = 0;
    for (band, &in_band) in sums.bands.iter().enumerate() {
        if below + in_band >= rank {
            let lower = if band == 0 {
                0
            } else {
                LATENCY_BOUNDS_MS[band - 1]
            };
            let upper = LATENCY_BOUNDS_MS.get(band).copied().unwrap_or(max);
            let share = (rank - below) as f64 / in_band as f64;
            let estimate = lower as f64 + (upper - lower).max(0) as f64 * share;
            return Some((estimate.round() as i64).clamp(min, max));
        }
        below += in_band;
    }
    Some(max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sums_of(latencies: &[i64]) -> RollupSums {
        let mut sums = RollupSums::default();
        for &latency in latencies {
            sums.up += 1;
            sums.total += 1;
            sums.latency_count += 1;
            sums.latency_sum += latency;
            sums.latency_min = Some(sums.latency_min.map_or(latency, |m| m.min(latency)));
            sums.latency_max = Some(sums.latency_max.map_or(latency, |m| m.max(latency)));
            sums.bands[LATENCY_BOUNDS_MS.partition_point(|&b| b < latency)] += 1;
        }
        sums
    }

    fn band_width(latency: i64, max: i64) -> i64 {
        let band = LATENCY_BOUNDS_MS.partition_point(|&b| b < latency);
        let lower = if band == 0 {
            0
        } else {
            LATENCY_BOUNDS_MS[band - 1]
        };
        LATENCY_BOUNDS_MS.get(band).copied().unwrap_or(max) - lower
    }

    #[test]
    fn uptime_is_measured_time_and_checks_count_up_and_down_only() {
        let mut sums = sums_of(&[10, 20, 30]);
        sums.down = 1;
        sums.total = 5;
        let window = uptime_window(&sums, (600, 200), 1_000);
        assert_eq!(window.checks, 4);
        assert_eq!(window.uptime, Some(75.0), "of the 800 ms measured");
        assert_eq!(window.unmeasured_ms, 200);
        assert_eq!(window.latency_ms_mean, Some(20.0));
        let none = uptime_window(&RollupSums::default(), (0, 0), 1_000);
        assert_eq!((none.uptime, none.unmeasured_ms), (None, 1_000));
    }

    #[test]
    fn retention_picks_the_finest_buckets_that_cover_a_window() {
        let retention = Retention {
            results_ms: 7 * DAY_MS,
            minutes_ms: 2 * DAY_MS,
            hours_ms: 90 * DAY_MS,
            days_ms: 730 * DAY_MS,
        };
        let chosen: Vec<_> = UPTIME_WINDOWS_MS
            .iter()
            .map(|&w| retention.finest_covering(w))
            .collect();
        assert_eq!(
            chosen,
            [
                Resolution::Hour,
                Resolution::Hour,
                Resolution::Hour,
                Resolution::Day
            ]
        );
    }

    proptest! {
        #[test]
        fn p95_is_within_the_band_of_the_true_value(
            latencies in proptest::collection::vec(0i64..20_000, 1..400)
        ) {
            let sums = sums_of(&latencies);
            let mut sorted = latencies.clone();
            sorted.sort_unstable();
            let rank = ((0.95 * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
            let truth = sorted[rank - 1];
            let estimate = latency_percentile(&sums, 0.95).unwrap();
            let max = *sorted.last().unwrap();
            prop_assert!(estimate >= sorted[0] && estimate <= max);
            prop_assert!(
                (estimate - truth).abs() <= band_width(truth, max),
                "estimate {} truth {}", estimate, truth
            );
        }
    }
}
