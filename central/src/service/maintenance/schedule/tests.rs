use chrono::{DateTime, Utc};
use proptest::prelude::*;

use super::*;

const MIN: i64 = 60_000;
const HOUR: i64 = 60 * MIN;
const DAY: i64 = 24 * HOUR;

fn ms(text: &str) -> i64 {
    text.parse::<DateTime<Utc>>().unwrap().timestamp_millis()
}

fn recurring(starts_at: &str, rule: &str, zone: &str, duration_ms: i64) -> Schedule {
    Schedule::recurring(
        ms(starts_at),
        &Recurrence {
            rule: rule.into(),
            time_zone: zone.into(),
            duration_ms: duration_ms as u64,
        },
    )
    .unwrap()
}

#[test]
fn a_daily_window_keeps_its_wall_clock_time_across_daylight_saving_changes() {
    // 03:00 in Berlin: 02:00 UTC in winter time, 01:00 UTC from 29 March 2026 (summer time).
    let window = recurring("2026-03-27T02:00:00Z", "FREQ=DAILY", "Europe/Berlin", HOUR);
    let spring = window.covered(ms("2026-03-27T00:00:00Z"), ms("2026-03-31T00:00:00Z"));
    assert_eq!(
        spring,
        [
            (ms("2026-03-27T02:00:00Z"), ms("2026-03-27T03:00:00Z")),
            (ms("2026-03-28T02:00:00Z"), ms("2026-03-28T03:00:00Z")),
            (ms("2026-03-29T01:00:00Z"), ms("2026-03-29T02:00:00Z")),
            (ms("2026-03-30T01:00:00Z"), ms("2026-03-30T02:00:00Z")),
        ]
    );
    // And back to 02:00 UTC after 25 October.
    assert_eq!(
        window.next_after(ms("2026-10-25T12:00:00Z")),
        Some((ms("2026-10-26T02:00:00Z"), ms("2026-10-26T03:00:00Z")))
    );
    // In UTC the same rule does not move.
    let utc = recurring("2026-03-27T02:00:00Z", "FREQ=DAILY", "UTC", HOUR);
    assert_eq!(
        utc.next_after(ms("2026-03-29T00:00:00Z")),
        Some((ms("2026-03-29T02:00:00Z"), ms("2026-03-29T03:00:00Z")))
    );
}

#[test]
fn rules_that_do_not_read_or_recur_too_often_are_refused() {
    let refused = |rule: &str, zone: &str| {
        Schedule::recurring(
            0,
            &Recurrence {
                rule: rule.into(),
                time_zone: zone.into(),
                duration_ms: HOUR as u64,
            },
        )
        .unwrap_err()
    };
    assert_eq!(
        refused("FREQ=DAILY", "Mars/Olympus").field,
        "recurrence.time_zone"
    );
    assert_eq!(refused("FREQ=SOMETIMES", "UTC").field, "recurrence.rule");
    assert_eq!(refused("FREQ=HOURLY", "UTC").field, "recurrence.rule");
    assert_eq!(
        refused("FREQ=MINUTELY", "UTC").rule,
        shared_proto::Rule::Value
    );
    assert!(refused("FREQ=DAILY;BYHOUR=1,13", "UTC")
        .message
        .contains("a day apart"));
    assert!(refused("FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30", "UTC")
        .message
        .contains("never"));
}

#[test]
fn a_rule_with_an_end_says_when_its_last_occurrence_ends() {
    let counted = recurring("2026-01-01T00:00:00Z", "FREQ=WEEKLY;COUNT=3", "UTC", HOUR);
    assert_eq!(counted.last_end(), Some(ms("2026-01-15T01:00:00Z")));
    let endless = recurring("2026-01-01T00:00:00Z", "FREQ=WEEKLY", "UTC", HOUR);
    assert_eq!(endless.last_end(), None);
    let once = Schedule::Once { start: 5, end: 10 };
    assert_eq!(once.last_end(), Some(10));
}

#[test]
fn overlapping_occurrences_are_one_stretch() {
    // Each occurrence lasts 36 hours: a daily rule covers every instant from its start.
    let window = recurring(
        "2026-01-01T00:00:00Z",
        "FREQ=DAILY;COUNT=3",
        "UTC",
        36 * HOUR,
    );
    let start = ms("2026-01-01T00:00:00Z");
    assert_eq!(
        window.covered(start, start + 10 * DAY),
        [(start, start + 2 * DAY + 36 * HOUR)]
    );
    assert_eq!(
        window.under_way(start + DAY + HOUR),
        Some((start, start + 2 * DAY + 36 * HOUR))
    );
    assert_eq!(
        window.next_change(start + HOUR),
        Some(start + 2 * DAY + 36 * HOUR)
    );
}

/// The reference: every occurrence listed by hand (UTC, every `every` days from `start`,
/// `count` times), and an instant covered when one of them holds it.
struct Reference {
    occurrences: Vec<(i64, i64)>,
}

impl Reference {
    fn covers(&self, t: i64) -> bool {
        self.occurrences.iter().any(|(s, e)| *s <= t && t < *e)
    }
}

proptest! {
    /// `under_way`, `next_change` and `covered` agree with the occurrences listed by hand,
    /// minute by minute over the days around them.
    #[test]
    fn the_rules_agree_with_the_occurrences_listed_by_hand(
        every in 1i64..4,
        count in 1usize..6,
        duration_min in 1i64..(5 * 24 * 60),
        probe_min in 0i64..(30 * 24 * 60),
        once in any::<bool>(),
    ) {
        let start = ms("2026-02-01T06:30:00Z");
        let duration = duration_min * MIN;
        let (schedule, reference) = if once {
            (
                Schedule::Once { start, end: start + duration },
                Reference { occurrences: vec![(start, start + duration)] },
            )
        } else {
            let rule = format!("FREQ=DAILY;INTERVAL={every};COUNT={count}");
            let occurrences = (0..count as i64)
                .map(|k| (start + k * every * DAY, start + k * every * DAY + duration))
                .collect();
            (
                recurring("2026-02-01T06:30:00Z", &rule, "UTC", duration),
                Reference { occurrences },
            )
        };
        let t = start - DAY + probe_min * MIN;
        let covered = reference.covers(t);
        prop_assert_eq!(schedule.under_way(t).is_some(), covered);
        if let Some((from, until)) = schedule.under_way(t) {
            prop_assert!(from <= t && t < until);
            prop_assert!((from..until).step_by(MIN as usize).all(|m| reference.covers(m)));
            prop_assert!(!reference.covers(until));
        }
        // Nothing changes before `next_change`, and something does at it.
        let change = schedule.next_change(t);
        let first_change = (1..(40 * 24 * 60))
            .map(|m| t + m * MIN)
            .find(|m| reference.covers(*m) != covered);
        match change {
            Some(at) => {
                prop_assert!(at > t);
                prop_assert_eq!(reference.covers(at), !covered);
                prop_assert!(first_change.is_none_or(|first| first >= at));
            }
            None => prop_assert!(first_change.is_none()),
        }
        // `covered` holds exactly the covered minutes of a stretch.
        let (from, until) = (t, t + 12 * HOUR);
        let spans = schedule.covered(from, until);
        for m in (from..until).step_by(MIN as usize) {
            let inside = spans.iter().any(|(s, e)| *s <= m && m < *e);
            prop_assert_eq!(inside, reference.covers(m));
        }
    }
}
