//! Uptime as time: which instants a monitor's (or one location's) results say were up and which
//! down. A result stands for the time from its check until the next result of the same monitor
//! or location, for at most one interval plus the check's timeout and a second (`polled`: with
//! the default settings the agent checks a failing target again by then, so a longer gap is
//! the agent's silence, not the target's state) — a heartbeat's, its longest wait for a ping
//! plus the staleness grace; beyond that, and before the first result, nobody knows: unknown
//! time is neither up nor down. A `rate_limited`
//! result was no check, so it stands for unknown time. The monitor's last pause cuts every span:
//! paused time belongs to nobody, and so does time in maintenance (`quiet`: the windows
//! covering the monitor, `maintenance::quiet_of`). A multi-location monitor's instant follows its combined status
//! (`quorum::combine`): down when at least the quorum of locations sees it down, up when some
//! location sees it up and fewer than the quorum see it down (degraded is up), else unknown.
//!
//! Pure functions over points: ingest credits what new results change into the rollups
//! (`credit`, through `ingest::batch`), reads add the newest result's still-open span
//! (`spans` from the newest points to now), and minute history splits the spans of the results
//! it reads (`per_bucket`). Nothing here reads or writes the store.

use std::collections::{BTreeMap, HashSet};

use serde_json::{Map, Value};
use shared_proto::poller_api::ResultStatus;
use shared_proto::settings_api::{LocationStatus, MonitorStatus};
use shared_proto::{CheckKind, PollerMode};

use super::quorum;
use crate::domain::Monitor;
use crate::store::{Resolution, TimeCredit, TimePoint};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    Up,
    Down,
}

/// A stretch of time the results say was up or down; `[from, until)` in ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub from: i64,
    pub until: i64,
    pub health: Health,
}

/// How one monitor's (or one location's) results stand for time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeline {
    /// How long a result stands at most (`polled`, `of`).
    pub cap_ms: i64,
    /// `Some(quorum)` for a multi-location monitor as a whole: instants follow the combined
    /// status of its locations. `None` for a one-location monitor or one location: the points
    /// form a single sequence.
    pub quorum: Option<u32>,
    /// The monitor's last pause: when it began and, once resumed, when it ended.
    pub pause: Option<(i64, Option<i64>)>,
}

/// What a polled result stands for beyond its interval and timeout: the agent's scheduling
/// (a check starts a little after it is due, and a failing one is counted from its end).
pub const SCHEDULING_SLACK_MS: i64 = 1_000;

impl Timeline {
    /// A polled monitor's timeline: a result stands for at most `interval_ms + timeout_ms +
    /// SCHEDULING_SLACK_MS`, the longest a failing target waits for its next check with the
    /// default settings. A monitor that opted into longer waits (backoff past its interval,
    /// the breaker, auto-pause, dead letters) has the rest of each wait unmeasured: a down
    /// result never counts for more than one interval of the target's time.
    pub fn polled(
        interval_ms: i64,
        timeout_ms: i64,
        quorum: Option<u32>,
        pause: Option<(i64, Option<i64>)>,
    ) -> Self {
        Timeline {
            cap_ms: interval_ms
                .max(0)
                .saturating_add(timeout_ms.max(0))
                .saturating_add(SCHEDULING_SLACK_MS),
            quorum,
            pause,
        }
    }

    /// A heartbeat monitor's timeline (and the tests'): `interval_ms` (its longest wait for a
    /// ping) plus the staleness grace is how long a result stands.
    pub fn of(interval_ms: i64, quorum: Option<u32>, pause: Option<(i64, Option<i64>)>) -> Self {
        let grace = shared_proto::monitor::staleness_grace_ms(interval_ms.max(0) as u64);
        Timeline {
            cap_ms: interval_ms
                .max(0)
                .saturating_add(i64::try_from(grace).unwrap_or(i64::MAX)),
            quorum,
            pause,
        }
    }

    /// A monitor's timeline from its stored row.
    pub fn of_monitor(monitor: &Monitor) -> Self {
        let locations = monitor.regions().len();
        let quorum = (monitor.poller_mode == PollerMode::Multi)
            .then(|| quorum::effective(monitor.quorum, locations));
        let schedule = super::push::schedule::Schedule::of(
            monitor.kind,
            &monitor.settings,
            monitor.interval_ms,
        );
        Timeline::for_kind(
            monitor.kind,
            &monitor.settings,
            (monitor.interval_ms, monitor.timeout_ms),
            schedule.as_ref(),
            quorum,
            pause_of(monitor.paused_at, monitor.resumed_at),
        )
    }

    /// A heartbeat monitor's (`schedule`) or a polled one's timeline; a polled monitor with
    /// `adaptive` intervals has its results stand for its longest stretched interval.
    pub fn for_kind(
        kind: CheckKind,
        settings: &Map<String, Value>,
        (interval_ms, timeout_ms): (i64, i64),
        schedule: Option<&super::push::schedule::Schedule>,
        quorum: Option<u32>,
        pause: Option<(i64, Option<i64>)>,
    ) -> Self {
        if kind == CheckKind::Heartbeat {
            let wait = schedule.map_or(interval_ms, |s| s.longest_gap_ms());
            return Timeline::of(wait, quorum, pause);
        }
        let longest =
            super::statuses::common_settings_of(kind, settings).map_or(interval_ms, |s| {
                i64::try_from(s.longest_interval_ms(interval_ms.max(0) as u64))
                    .unwrap_or(interval_ms)
            });
        Timeline::polled(longest, timeout_ms, quorum, pause)
    }

    /// The same monitor seen from one of its locations: its own points, one sequence.
    pub fn location(self) -> Self {
        Timeline {
            quorum: None,
            ..self
        }
    }

    /// What `points` say of `[from, until)`: the up and down spans, in time order, adjacent
    /// spans of one health merged. Unknown and paused time is in no span. Cost: the points
    /// times the log of their number (one boundary per point and its cap).
    pub fn spans(&self, points: &[&TimePoint], from: i64, until: i64) -> Vec<Span> {
        if from >= until {
            return Vec::new();
        }
        let sequences = self.sequences(points);
        let mut bounds = Vec::with_capacity(4 + 2 * points.len());
        bounds.extend([from, until]);
        for point in points {
            bounds.push(point.ts);
            bounds.push(point.ts.saturating_add(self.cap_ms));
        }
        if let Some((paused, resumed)) = self.pause {
            bounds.push(paused);
            bounds.extend(resumed);
        }
        bounds.retain(|&b| (from..=until).contains(&b));
        bounds.sort_unstable();
        bounds.dedup();
        let mut spans: Vec<Span> = Vec::new();
        for pair in bounds.windows(2) {
            let (start, end) = (pair[0], pair[1]);
            let Some(health) = self.health_at(&sequences, start) else {
                continue;
            };
            match spans.last_mut() {
                Some(last) if last.until == start && last.health == health => last.until = end,
                _ => spans.push(Span {
                    from: start,
                    until: end,
                    health,
                }),
            }
        }
        spans
    }

    /// The points as the sequences that each stand for themselves, each in check order (time,
    /// then id, as the status rows order results): one for a single sequence, one per location
    /// for a whole multi-location monitor (points without a location are from before it had
    /// locations and say nothing of them).
    fn sequences<'a>(&self, points: &[&'a TimePoint]) -> Vec<Vec<&'a TimePoint>> {
        let mut sequences: Vec<Vec<&TimePoint>> = match self.quorum {
            None => vec![points.to_vec()],
            Some(_) => {
                let mut by_location: BTreeMap<&str, Vec<&TimePoint>> = BTreeMap::new();
                for &point in points {
                    if let Some(region) = point.region.as_deref() {
                        by_location.entry(region).or_default().push(point);
                    }
                }
                by_location.into_values().collect()
            }
        };
        for sequence in &mut sequences {
            sequence.sort_by(|a, b| (a.ts, &a.id).cmp(&(b.ts, &b.id)));
        }
        sequences
    }

    fn paused_at(&self, t: i64) -> bool {
        self.pause
            .is_some_and(|(paused, resumed)| t >= paused && resumed.is_none_or(|r| t < r))
    }

    /// What the sequences say of instant `t`; `None` when unknown or paused.
    fn health_at(&self, sequences: &[Vec<&TimePoint>], t: i64) -> Option<Health> {
        if self.paused_at(t) {
            return None;
        }
        let seen = |sequence: &[&TimePoint]| -> LocationStatus {
            let newer = sequence.partition_point(|p| p.ts <= t);
            let Some(point) = newer.checked_sub(1).map(|i| sequence[i]) else {
                return LocationStatus::Unknown;
            };
            match point.status {
                _ if t >= point.ts.saturating_add(self.cap_ms) => LocationStatus::Unknown,
                ResultStatus::Up => LocationStatus::Up,
                ResultStatus::Down => LocationStatus::Down,
                ResultStatus::RateLimited => LocationStatus::Unknown,
            }
        };
        match self.quorum {
            // One sequence (every result's ingest asks, several times): no list of one.
            None => match sequences.first().map(|s| seen(s)) {
                Some(LocationStatus::Up) => Some(Health::Up),
                Some(LocationStatus::Down) => Some(Health::Down),
                _ => None,
            },
            Some(quorum) => {
                let seen: Vec<LocationStatus> = sequences.iter().map(|s| seen(s)).collect();
                match quorum::combine(&seen, quorum).0 {
                    MonitorStatus::Up | MonitorStatus::Degraded => Some(Health::Up),
                    MonitorStatus::Down => Some(Health::Down),
                    _ => None,
                }
            }
        }
    }

    /// What newly stored results change in the time credited to one monitor or location, as
    /// deltas of the buckets ingest writes (negative where a new result cuts an older one's span
    /// short). The rollups always hold what the whole history says of the time before the
    /// newest result (`old_until`, then `new_until`): before the earliest new result nothing
    /// changed, so the delta is the history with the new results minus the history without
    /// them, from there on. `history` must hold every point from the earliest new result (or
    /// `old_until`, if earlier) minus `cap_ms` to `new_until`; `new` names the new ones.
    pub fn credit(
        &self,
        history: &[&TimePoint],
        new: &HashSet<&str>,
        old_until: Option<i64>,
        new_until: i64,
    ) -> Vec<TimeCredit> {
        self.credit_outside(&[], history, new, old_until, new_until)
    }

    /// `credit`, with the time in `quiet` (disjoint spans in time order: maintenance)
    /// credited to nobody. Windows written after some of a span was credited leave that part
    /// credited: only what is credited from then on is cut.
    pub fn credit_outside(
        &self,
        quiet: &[(i64, i64)],
        history: &[&TimePoint],
        new: &HashSet<&str>,
        old_until: Option<i64>,
        new_until: i64,
    ) -> Vec<TimeCredit> {
        let earliest_new = history
            .iter()
            .filter(|p| new.contains(p.id.as_str()))
            .map(|p| p.ts)
            .min();
        let Some(earliest_new) = earliest_new else {
            return Vec::new();
        };
        let from = old_until.map_or(earliest_new, |until| until.min(earliest_new));
        let before: Vec<&TimePoint> = history
            .iter()
            .copied()
            .filter(|p| !new.contains(p.id.as_str()))
            .collect();
        let mut deltas = BTreeMap::new();
        let with_new = outside(self.spans(history, from, new_until), quiet);
        add_spans(&mut deltas, &with_new, 1);
        if let Some(old_until) = old_until {
            let without = outside(self.spans(&before, from, old_until), quiet);
            add_spans(&mut deltas, &without, -1);
        }
        deltas
            .into_iter()
            .filter(|(_, (up, down))| *up != 0 || *down != 0)
            .map(
                |((resolution, bucket_start), (up_ms, down_ms))| TimeCredit {
                    resolution,
                    bucket_start,
                    up_ms,
                    down_ms,
                },
            )
            .collect()
    }
}

/// The last pause as a timeline takes it: from when it was paused, until it was resumed after
/// that (`None` while it still is).
pub fn pause_of(paused_at: Option<i64>, resumed_at: Option<i64>) -> Option<(i64, Option<i64>)> {
    paused_at.map(|at| (at, resumed_at.filter(|r| *r > at)))
}

/// `spans` less the time in `quiet` (disjoint spans in time order), which belongs to nobody.
/// Cost: the spans plus the quiet spans.
pub fn outside(spans: Vec<Span>, quiet: &[(i64, i64)]) -> Vec<Span> {
    if quiet.is_empty() {
        return spans;
    }
    let mut kept = Vec::with_capacity(spans.len());
    for span in spans {
        let mut from = span.from;
        for &(start, end) in quiet
            .iter()
            .filter(|(s, e)| *s < span.until && *e > span.from)
        {
            if start > from {
                kept.push(Span {
                    from,
                    until: start,
                    health: span.health,
                });
            }
            from = from.max(end);
        }
        if from < span.until {
            kept.push(Span {
                from,
                until: span.until,
                health: span.health,
            });
        }
    }
    kept
}

/// Up and down ms per (resolution, bucket start).
type BucketTime = BTreeMap<(Resolution, i64), (i64, i64)>;

/// Adds (`sign` 1) or takes away (-1) the spans' time, split at bucket boundaries, in the
/// buckets ingest writes (`Resolution::WRITTEN`: days are folded from hours, minute history
/// is derived when read, `per_bucket`). Cost: one entry per bucket a span touches.
fn add_spans(deltas: &mut BucketTime, spans: &[Span], sign: i64) {
    let resolution = Resolution::WRITTEN;
    for (bucket, (up, down)) in per_bucket(spans, resolution) {
        let entry = deltas.entry((resolution, bucket)).or_default();
        entry.0 += sign * up;
        entry.1 += sign * down;
    }
}

/// The spans' up and down ms split at the boundaries of `resolution`'s buckets, per bucket
/// start. Cost: one entry per bucket a span touches.
pub fn per_bucket(spans: &[Span], resolution: Resolution) -> BTreeMap<i64, (i64, i64)> {
    let mut buckets: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
    for span in spans {
        let mut start = span.from;
        while start < span.until {
            let bucket = resolution.bucket_of(start);
            let end = span.until.min(bucket + resolution.width_ms());
            let entry = buckets.entry(bucket).or_default();
            match span.health {
                Health::Up => entry.0 += end - start,
                Health::Down => entry.1 += end - start,
            }
            start = end;
        }
    }
    buckets
}

/// Up and down ms in spans, clipped to `[from, until)`.
pub fn total(spans: &[Span], from: i64, until: i64) -> (i64, i64) {
    spans.iter().fold((0, 0), |(up, down), span| {
        let ms = (span.until.min(until) - span.from.max(from)).max(0);
        match span.health {
            Health::Up => (up + ms, down),
            Health::Down => (up, down + ms),
        }
    })
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod schedule_tests;
