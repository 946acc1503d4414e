//! Minute history, derived from the results when read. At the usual intervals a minute bucket
//! would hold one result, and writing it at ingest was a third of the writes per result at
//! 100,000 monitors (docs/benchmarks.md); the results already say everything it would, and a
//! chart or a window's edge reads a bounded stretch of them through their `(monitor, ts)`
//! index. Counts and latency are the results checked in each minute; time is what they stand
//! for (`uptime::Timeline`, the same rule ingest credits hour and day buckets with), up to now
//! at most, less paused time and maintenance. This file reads and works out; it writes
//! nothing, and hour and day buckets stay `store::rollups`'.

use std::collections::{BTreeMap, HashMap};

use super::super::maintenance::schedule::Placement;
use super::super::maintenance::{placement_of, quiet_of};
use super::super::uptime::{self, Timeline};
use super::MonitorHistory;
use shared_proto::PollerMode;

use crate::domain::Monitor;
use crate::service::error::ServiceResult;
use crate::store::{CountedResult, Resolution, RollupSums, TimePoint};

/// The most results one monitor's minute history reads per answer. A chart's 5,000 minutes at
/// the shortest interval (5 s) are 60,000; past this bound the answer ends early and says so,
/// so a monitor flooded with results (pushes, say) costs a bounded read.
pub const MAX_MINUTE_RESULTS: u32 = 100_000;

/// The most results one monitor's partial first hour of an uptime window reads: an hour at the
/// shortest interval (5 s) is 720. A monitor with more (a flood of pushes) gets that hour in
/// proportion instead, so a page of 50 monitors reads at most 50 times this.
pub const MAX_EDGE_RESULTS: u32 = 4_000;

/// One monitor's (or location's) minutes over a range.
#[derive(Debug, Clone, Default)]
pub struct Minutes {
    /// Per minute start, the minutes that hold a result or time; others are absent.
    pub buckets: BTreeMap<i64, RollupSums>,
    /// The range holds more results than were read: the buckets stop at `until`, the start of
    /// the minute of the first result left unread.
    pub cut: Option<i64>,
}

impl Minutes {
    /// Everything in the buckets, summed.
    pub fn total(&self) -> RollupSums {
        let mut total = RollupSums::default();
        for sums in self.buckets.values() {
            total.add(sums);
        }
        total
    }
}

impl MonitorHistory {
    /// How far back minute history reaches for a monitor whose results stand for at most
    /// `cap_ms`: its own retention, within the results' (less `cap_ms`, so that the result a
    /// range starts under is still stored).
    pub(super) fn minute_reach(&self, now: i64, cap_ms: i64) -> i64 {
        let retention = &self.retention;
        (now - retention.minutes_ms).max(now - retention.results_ms + cap_ms)
    }

    /// Each monitor's minutes in `[from, until)`: the whole monitor's (`region` `''`) or one
    /// location's. Counts and latency over the results checked in the range; time over the
    /// spans they stand for in it, up to `now` at most (the newest result's span is still
    /// open: it counts up to now, where hour buckets hold it only once a later result closes
    /// it). Cost: each monitor's results in the range and one cap before it (at most `limit`,
    /// past which its `Minutes` are `cut`), read in one statement per hundred monitors, and
    /// the maintenance windows reaching the range.
    pub async fn minute_sums(
        &self,
        monitors: &[Monitor],
        region: &str,
        (from, until): (i64, i64),
        limit: u32,
    ) -> ServiceResult<HashMap<String, Minutes>> {
        if monitors.is_empty() {
            return Ok(HashMap::new());
        }
        let now = self.now_ms();
        let timelines: Vec<Timeline> = monitors
            .iter()
            .map(|m| {
                let timeline = Timeline::of_monitor(m);
                if region.is_empty() {
                    timeline
                } else {
                    timeline.location()
                }
            })
            .collect();
        let ranges: Vec<(String, i64)> = monitors
            .iter()
            .zip(&timelines)
            .map(|(m, t)| (m.id.clone(), from.saturating_sub(t.cap_ms)))
            .collect();
        let located = (!region.is_empty()).then_some(region);
        let mut read = self
            .store
            .results_between(&ranges, until, located, limit)
            .await?;
        let quiet = self.quiet_time(monitors, from, until.min(now)).await?;
        let mut minutes = HashMap::with_capacity(monitors.len());
        for (monitor, timeline) in monitors.iter().zip(&timelines) {
            let results = read.remove(&monitor.id).unwrap_or_default();
            let cut = (results.len() >= limit as usize)
                .then(|| {
                    results
                        .last()
                        .map(|r| Resolution::Minute.bucket_of(r.point.ts))
                })
                .flatten();
            let until = cut.unwrap_or(until);
            let quiet = quiet
                .get(&monitor.id)
                .map(Vec::as_slice)
                .unwrap_or_default();
            let buckets = buckets_of(timeline, &results, quiet, from, until, now);
            minutes.insert(monitor.id.clone(), Minutes { buckets, cut });
        }
        Ok(minutes)
    }

    /// The maintenance time of each monitor over `[from, until)`, in time order: the windows
    /// reaching that range that cover the monitor, its group's or locations' regions, its
    /// tags, or the pollers it is placed on (itself or by its locations), as ingest places it
    /// when it credits hour and day buckets.
    pub(super) async fn quiet_time(
        &self,
        monitors: &[Monitor],
        from: i64,
        until: i64,
    ) -> ServiceResult<HashMap<String, Vec<(i64, i64)>>> {
        let windows = self.maintenance().window_spans(from, until).await?;
        if windows.is_empty() {
            return Ok(HashMap::new());
        }
        let mut quiet = HashMap::with_capacity(monitors.len());
        self.each_placement(monitors, |monitor, placement| {
            quiet.insert(monitor.id.clone(), quiet_of(&windows, placement));
        })
        .await?;
        Ok(quiet)
    }

    /// Calls `each` with every monitor's placement as maintenance windows see it (its pollers,
    /// its own and its locations', and its regions). Cost: one read of the multi-location
    /// monitors' locations and one of the pollers they are placed on.
    pub(crate) async fn each_placement(
        &self,
        monitors: &[Monitor],
        mut each: impl FnMut(&Monitor, &Placement<'_>),
    ) -> ServiceResult<()> {
        let multi: Vec<String> = monitors
            .iter()
            .filter(|m| m.poller_mode == PollerMode::Multi)
            .map(|m| m.id.clone())
            .collect();
        let mut located: HashMap<String, Vec<String>> = HashMap::new();
        if !multi.is_empty() {
            for location in self.store.locations_of(Some(&multi)).await? {
                if let Some(poller) = location.assigned_poller_id {
                    located.entry(location.monitor_id).or_default().push(poller);
                }
            }
        }
        let placed: Vec<String> = monitors
            .iter()
            .filter_map(|m| m.assigned_poller_id.clone())
            .chain(located.values().flatten().cloned())
            .collect();
        let poller_regions: HashMap<String, Option<String>> = self
            .store
            .pollers_by_ids(&placed)
            .await?
            .into_iter()
            .map(|p| (p.id, p.region))
            .collect();
        for monitor in monitors {
            let regions = monitor.regions();
            let pollers = monitor
                .assigned_poller_id
                .as_deref()
                .into_iter()
                .chain(
                    located
                        .get(&monitor.id)
                        .into_iter()
                        .flatten()
                        .map(String::as_str),
                )
                .collect();
            let placement = placement_of(monitor, regions, pollers, |id| {
                poller_regions.get(id).and_then(|r| r.as_deref())
            });
            each(monitor, &placement);
        }
        Ok(())
    }
}

/// The minutes of `[from, until)` from the results read for them (those in the range, and
/// those up to one cap before it, whose spans reach in): counts of the ones checked in the
/// range, and the time of all of them, up to `now` at most, outside `quiet`.
fn buckets_of(
    timeline: &Timeline,
    results: &[CountedResult],
    quiet: &[(i64, i64)],
    from: i64,
    until: i64,
    now: i64,
) -> BTreeMap<i64, RollupSums> {
    let mut buckets: BTreeMap<i64, RollupSums> = BTreeMap::new();
    for result in results
        .iter()
        .filter(|r| (from..until).contains(&r.point.ts))
    {
        buckets
            .entry(Resolution::Minute.bucket_of(result.point.ts))
            .or_default()
            .count(result.point.status.as_str(), result.latency_ms);
    }
    let points: Vec<&TimePoint> = results.iter().map(|r| &r.point).collect();
    let spans = uptime::outside(timeline.spans(&points, from, until.min(now)), quiet);
    for (minute, (up_ms, down_ms)) in uptime::per_bucket(&spans, Resolution::Minute) {
        let sums = buckets.entry(minute).or_default();
        sums.up_ms += up_ms;
        sums.down_ms += down_ms;
    }
    buckets
}

#[cfg(test)]
mod tests;
