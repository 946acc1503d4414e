use std::collections::{BTreeMap, HashSet};

use proptest::prelude::*;

use super::*;

fn point(id: &str, region: Option<&str>, ts: i64, status: &str) -> TimePoint {
    TimePoint {
        id: id.into(),
        region: region.map(Into::into),
        ts,
        status: shared_proto::poller_api::ResultStatus::parse(status).unwrap(),
    }
}

fn refs(points: &[TimePoint]) -> Vec<&TimePoint> {
    points.iter().collect()
}

const S: i64 = 1_000;

/// The outage the issue measured: a 5 s monitor, up for a minute, down for a minute while the
/// agent backs off (down checks 5, 10 and 20 s apart), up again for 75 s. Counting checks says
/// 87 % (27 up of 31 checks); the time says 135 s of 195 s, 69 %.
#[test]
fn a_backed_off_outage_counts_for_its_time_not_its_checks() {
    let mut points = Vec::new();
    for ts in (0..60).step_by(5).chain((120..195).step_by(5)) {
        points.push(point(&format!("u{ts}"), None, ts * S, "up"));
    }
    for ts in [60, 65, 75, 95] {
        points.push(point(&format!("d{ts}"), None, ts * S, "down"));
    }
    let ups = points
        .iter()
        .filter(|p| p.status == shared_proto::poller_api::ResultStatus::Up)
        .count();
    assert_eq!((ups, points.len()), (27, 31), "the old count");
    let timeline = Timeline::of(5 * S, None, None);
    let (up, down) = total(&timeline.spans(&refs(&points), 0, 195 * S), 0, 195 * S);
    assert_eq!((up, down), (135 * S, 60 * S));
}

#[test]
fn a_result_stands_until_the_next_at_most_interval_plus_grace() {
    // 30 s interval: the grace is a minute, so a result stands for at most 90 s.
    let points = [point("a", None, 0, "up"), point("b", None, 200 * S, "down")];
    let timeline = Timeline::of(30 * S, None, None);
    let spans = timeline.spans(&refs(&points), 0, 400 * S);
    assert_eq!(
        spans,
        [
            Span {
                from: 0,
                until: 90 * S,
                health: Health::Up
            },
            Span {
                from: 200 * S,
                until: 290 * S,
                health: Health::Down
            },
        ],
        "the silence between is unknown"
    );
}

#[test]
fn rate_limited_and_paused_time_belong_to_nobody() {
    let points = [
        point("a", None, 0, "up"),
        point("b", None, 10 * S, "rate_limited"),
        point("c", None, 20 * S, "up"),
    ];
    let timeline = Timeline::of(10 * S, None, Some((25 * S, Some(100 * S))));
    let spans = timeline.spans(&refs(&points), 0, 200 * S);
    assert_eq!(
        total(&spans, 0, 200 * S),
        (10 * S + 5 * S, 0),
        "0–10 s up, 10–20 s not checked, 20–25 s up, then paused"
    );
    let still_paused = Timeline::of(10 * S, None, Some((25 * S, None)));
    assert_eq!(
        total(&still_paused.spans(&refs(&points), 0, 200 * S), 0, 200 * S).0,
        15 * S
    );
}

#[test]
fn a_multi_location_monitor_is_down_only_while_the_quorum_sees_it_down() {
    let points = [
        point("a1", Some("eu"), 0, "down"),
        point("b1", Some("us"), 0, "up"),
        point("c1", Some("ap"), 0, "up"),
        point("b2", Some("us"), 30 * S, "down"),
        point("a2", Some("eu"), 60 * S, "up"),
        point("b3", Some("us"), 60 * S, "up"),
        point("c2", Some("ap"), 60 * S, "up"),
    ];
    let timeline = Timeline::of(60 * S, Some(2), None);
    let spans = timeline.spans(&refs(&points), 0, 90 * S);
    assert_eq!(
        spans,
        [
            Span {
                from: 0,
                until: 30 * S,
                health: Health::Up
            },
            Span {
                from: 30 * S,
                until: 60 * S,
                health: Health::Down
            },
            Span {
                from: 60 * S,
                until: 90 * S,
                health: Health::Up
            },
        ]
    );
    let us: Vec<&TimePoint> = points
        .iter()
        .filter(|p| p.region.as_deref() == Some("us"))
        .collect();
    let us_spans = timeline.location().spans(&us, 0, 90 * S);
    assert_eq!(total(&us_spans, 0, 90 * S), (60 * S, 30 * S));
}

#[test]
fn spans_split_exactly_at_bucket_boundaries() {
    const MIN: i64 = 60 * S;
    let points = [
        point("a", None, 59 * MIN, "down"),
        point("b", None, 62 * MIN, "up"),
    ];
    let timeline = Timeline::of(60 * MIN, None, None);
    let credit = timeline.credit(&refs(&points), &HashSet::from(["a", "b"]), None, 62 * MIN);
    let hours: Vec<_> = credit
        .iter()
        .filter(|c| c.resolution == Resolution::Hour)
        .map(|c| (c.bucket_start, c.up_ms, c.down_ms))
        .collect();
    assert_eq!(hours, [(0, 0, MIN), (60 * MIN, 0, 2 * MIN)]);
    assert!(
        credit.iter().all(|c| c.resolution != Resolution::Minute),
        "minutes are derived when read, never credited"
    );
    let spans = timeline.spans(&refs(&points), 59 * MIN, 62 * MIN);
    let minutes = per_bucket(&spans, Resolution::Minute);
    assert_eq!(minutes.len(), 3);
    assert!(
        minutes.values().all(|&time| time == (0, MIN)),
        "{minutes:?}"
    );
}

/// What `points` say of each whole second in `[EARLIEST, until)`, read the slow way: per
/// second, the newest point of each location at or before it, and a count of downs against the
/// quorum.
fn reference(
    points: &[TimePoint],
    cap: i64,
    quorum: Option<u32>,
    pause: Option<(i64, Option<i64>)>,
    until: i64,
) -> BTreeMap<i64, Health> {
    let mut seconds = BTreeMap::new();
    for t in (EARLIEST..until).step_by(S as usize) {
        if pause.is_some_and(|(a, b)| t >= a && b.is_none_or(|b| t < b)) {
            continue;
        }
        let newest = |region: Option<&str>| {
            points
                .iter()
                .filter(|p| quorum.is_none() || p.region.as_deref() == region)
                .filter(|p| p.ts <= t)
                .max_by(|a, b| (a.ts, &a.id).cmp(&(b.ts, &b.id)))
                .filter(|p| t < p.ts + cap)
                .map(|p| p.status.as_str().to_string())
        };
        let health = match quorum {
            None => match newest(None).as_deref() {
                Some("up") => Some(Health::Up),
                Some("down") => Some(Health::Down),
                _ => None,
            },
            Some(quorum) => {
                let regions: HashSet<_> =
                    points.iter().filter_map(|p| p.region.as_deref()).collect();
                let seen: Vec<_> = regions
                    .into_iter()
                    .filter_map(|r| newest(Some(r)))
                    .collect();
                let downs = seen.iter().filter(|s| *s == "down").count();
                let ups = seen.iter().filter(|s| *s == "up").count();
                if downs >= quorum.max(1) as usize {
                    Some(Health::Down)
                } else if ups + downs > 0 {
                    Some(Health::Up)
                } else {
                    None
                }
            }
        };
        if let Some(health) = health {
            seconds.insert(t, health);
        }
    }
    seconds
}

fn bucketed(
    seconds: &BTreeMap<i64, Health>,
    resolutions: &[Resolution],
) -> BTreeMap<(Resolution, i64), (i64, i64)> {
    let mut buckets: BTreeMap<(Resolution, i64), (i64, i64)> = BTreeMap::new();
    for (&t, health) in seconds {
        for &resolution in resolutions {
            let entry = buckets
                .entry((resolution, resolution.bucket_of(t)))
                .or_default();
            match health {
                Health::Up => entry.0 += S,
                Health::Down => entry.1 += S,
            }
        }
    }
    buckets.retain(|_, (up, down)| *up != 0 || *down != 0);
    buckets
}

/// The generated points' first possible second: two and a half minutes before an hour ends, so
/// that their five minutes straddle an hour's boundary.
const EARLIEST: i64 = 3_600 * S - 150 * S;

fn points_strategy(multi: bool) -> impl Strategy<Value = Vec<TimePoint>> {
    let region = if multi {
        prop_oneof![Just(Some("eu")), Just(Some("us")), Just(Some("ap"))].boxed()
    } else {
        Just(None).boxed()
    };
    let status = prop_oneof![4 => Just("up"), 3 => Just("down"), 1 => Just("rate_limited")];
    proptest::collection::vec((region, 0i64..300, status), 1..40).prop_map(|drawn| {
        drawn
            .into_iter()
            .enumerate()
            .map(|(i, (region, second, status))| {
                point(&format!("r{i:03}"), region, EARLIEST + second * S, status)
            })
            .collect()
    })
}

proptest! {
    /// Results uploaded in any order and any batches credit, bucket by bucket, exactly what the
    /// whole history says of the time before the newest result.
    #[test]
    fn any_arrival_order_credits_what_the_whole_history_says(
        multi in any::<bool>(),
        points in points_strategy(true),
        cap_s in 1i64..120,
        quorum in 1u32..3,
        pause in proptest::option::of((0i64..300, proptest::option::of(0i64..200))),
        order in any::<prop::sample::Index>(),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..6),
    ) {
        let pause = pause.map(|(from, length)| {
            (EARLIEST + from * S, length.map(|l| EARLIEST + (from + l) * S))
        });
        let timeline = Timeline {
            cap_ms: cap_s * S,
            quorum: multi.then_some(quorum),
            pause,
        };
        let points: Vec<TimePoint> = if multi {
            points
        } else {
            points.into_iter().map(|p| TimePoint { region: None, ..p }).collect()
        };
        // A rotation and batches of it: arrival order is unrelated to check order.
        let mut arriving = points.clone();
        let rotation = order.index(arriving.len());
        arriving.rotate_left(rotation);
        let mut ends: Vec<usize> = cuts.iter().map(|c| c.index(arriving.len())).collect();
        ends.push(arriving.len());
        ends.sort_unstable();

        let mut credited: BTreeMap<(Resolution, i64), (i64, i64)> = BTreeMap::new();
        let mut until: Option<i64> = None;
        let mut start = 0;
        for end in ends {
            if end <= start {
                continue;
            }
            let batch = &arriving[start..end];
            let history = &arriving[..end];
            let new: HashSet<&str> = batch.iter().map(|p| p.id.as_str()).collect();
            let new_until = batch.iter().map(|p| p.ts).chain(until).max().unwrap();
            for c in timeline.credit(&refs(history), &new, until, new_until) {
                let entry = credited.entry((c.resolution, c.bucket_start)).or_default();
                entry.0 += c.up_ms;
                entry.1 += c.down_ms;
            }
            until = Some(new_until);
            start = end;
        }
        credited.retain(|_, (up, down)| *up != 0 || *down != 0);
        let until = until.unwrap();
        let truth = reference(&points, cap_s * S, timeline.quorum, pause, until);
        prop_assert_eq!(credited, bucketed(&truth, &[Resolution::WRITTEN]));
        // Minutes are derived when read: the whole history's spans, split per minute.
        let spans = timeline.spans(&refs(&points), EARLIEST, until);
        let minutes: BTreeMap<(Resolution, i64), (i64, i64)> =
            per_bucket(&spans, Resolution::Minute)
                .into_iter()
                .filter(|(_, (up, down))| *up != 0 || *down != 0)
                .map(|(minute, time)| ((Resolution::Minute, minute), time))
                .collect();
        prop_assert_eq!(minutes, bucketed(&truth, &[Resolution::Minute]));
    }
}

/// A polled result stands for one interval, the check's timeout and a second; with adaptive
/// intervals, for the longest stretched interval (so a stable target's stretched checks leave
/// no unmeasured gaps), which is at most the interval plus the staleness grace.
#[test]
fn a_polled_result_stands_for_its_interval_and_timeout_or_its_longest_adaptive_interval() {
    let plain = Timeline::for_kind(
        CheckKind::Http,
        &settings("{}"),
        (30 * S, 5 * S),
        None,
        None,
        None,
    );
    assert_eq!(plain.cap_ms, 36 * S);
    let adaptive = Timeline::for_kind(
        CheckKind::Http,
        &settings(r#"{"adaptive": true}"#),
        (30 * S, 5 * S),
        None,
        None,
        None,
    );
    assert_eq!(adaptive.cap_ms, (30 + 60 + 5 + 1) * S);
    let bounded = Timeline::for_kind(
        CheckKind::Http,
        &settings(r#"{"adaptive": true, "adaptive_max_interval_ms": 45000}"#),
        (30 * S, 5 * S),
        None,
        None,
        None,
    );
    assert_eq!(bounded.cap_ms, (45 + 5 + 1) * S);
    // A down result followed by an hour of silence counts 36 s down, the rest unmeasured.
    let points = [point("d", None, 0, "down")];
    let spans = plain.spans(&refs(&points), 0, 3_600 * S);
    assert_eq!(
        spans,
        [Span {
            from: 0,
            until: 36 * S,
            health: Health::Down
        }]
    );
}

/// A kind's settings written as JSON.
fn settings(json: &str) -> Map<String, Value> {
    serde_json::from_str(json).unwrap()
}
