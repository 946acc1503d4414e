//! When a maintenance window is under way and which monitors it covers: pure rules over a
//! window as central keeps it (`domain::MaintenanceWindow`). Recurrences are RFC 5545 rules read by the `rrule`
//! crate in the window's IANA time zone, so an occurrence keeps its wall-clock time across
//! daylight-saving changes.
//!
//! Cost: a one-off window is two instants. A recurring window walks its occurrences from its
//! first one (the `rrule` crate has no other way in), so `FREQ` is `DAILY` or longer: ten
//! years of a daily window are 3,650 steps, done once per window for each batch of monitors
//! whose status is derived, however many monitors the batch holds. Must not: read or write
//! the store.

use std::collections::HashSet;

use chrono::{TimeZone, Utc};
use rrule::{Frequency, RRule, RRuleSet, Unvalidated};
use shared_proto::maintenance::{MaintenanceNotify, Recurrence};
use shared_proto::ValidationError;

use crate::domain::MaintenanceWindow;

/// The most occurrences a recurring window is walked through, from its first: past this it
/// answers as if it had ended (a daily window reaches it after 273 years).
const MAX_OCCURRENCES: usize = 100_000;

/// How many first occurrences a new rule's spacing is checked over.
const SPACING_CHECKED: usize = 50;

/// The least time between two starts of a recurring window: a day, less the hour a change to
/// summer time takes out of one.
const MIN_SPACING_MS: i64 = 23 * 3_600_000;

/// When a window is under way.
#[derive(Debug, Clone)]
pub enum Schedule {
    /// `[start, end)` in ms.
    Once { start: i64, end: i64 },
    // Boxed: a rule set is some hundred bytes, a one-off window two instants.
    Recurring {
        set: Box<RRuleSet>,
        duration_ms: i64,
    },
}

/// What a window covers: monitors by id, by the pollers they run on, or by the regions they
/// run from.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    pub monitors: HashSet<String>,
    pub pollers: HashSet<String>,
    pub regions: HashSet<String>,
    pub tags: HashSet<String>,
}

/// Where a monitor runs, as a window's scope sees it.
#[derive(Debug, Clone, Default)]
pub struct Placement<'a> {
    pub monitor_id: &'a str,
    /// The pollers it is placed on (itself or by its locations).
    pub pollers: Vec<&'a str>,
    /// Its group's region, its pollers' regions and its locations' regions.
    pub regions: Vec<&'a str>,
    /// Its tags.
    pub tags: Vec<String>,
}

/// A window as the rules use it.
#[derive(Debug, Clone)]
pub struct Window {
    pub id: String,
    pub name: String,
    pub notify: MaintenanceNotify,
    /// Whether the monitors it names by id or tag go unchecked while it is under way.
    pub stop_checks: bool,
    pub schedule: Schedule,
    pub scope: Scope,
}

impl Scope {
    pub fn covers(&self, placement: &Placement<'_>) -> bool {
        self.monitors.contains(placement.monitor_id)
            || placement.pollers.iter().any(|p| self.pollers.contains(*p))
            || placement.regions.iter().any(|r| self.regions.contains(*r))
            || placement.tags.iter().any(|t| self.tags.contains(t))
    }
}

impl Schedule {
    /// A recurrence as the API takes it, starting at `starts_at` (ms): `422` when the time
    /// zone or the rule does not read, or the rule recurs more often than daily.
    pub fn recurring(starts_at: i64, recurrence: &Recurrence) -> Result<Schedule, ValidationError> {
        let zone: chrono_tz::Tz = recurrence.time_zone.parse().map_err(|_| {
            ValidationError::value(
                "recurrence.time_zone",
                format!("`{}` is not an IANA time zone", recurrence.time_zone),
            )
        })?;
        let zone = rrule::Tz::from(zone);
        let start = Utc
            .timestamp_millis_opt(starts_at)
            .single()
            .ok_or_else(|| ValidationError::value("starts_at", "is out of range"))?
            .with_timezone(&zone);
        let rule: RRule<Unvalidated> = recurrence.rule.parse().map_err(|e| {
            ValidationError::value("recurrence.rule", format!("does not read: {e}"))
        })?;
        let set = rule.build(start).map_err(|e| {
            ValidationError::value("recurrence.rule", format!("is not a usable rule: {e}"))
        })?;
        let freq = set.get_rrule().first().map(RRule::get_freq);
        if !matches!(
            freq,
            Some(Frequency::Daily | Frequency::Weekly | Frequency::Monthly | Frequency::Yearly)
        ) {
            return Err(ValidationError::value(
                "recurrence.rule",
                "`FREQ` must be DAILY, WEEKLY, MONTHLY or YEARLY",
            ));
        }
        let schedule = Schedule::Recurring {
            set: Box::new(set),
            duration_ms: recurrence.duration_ms as i64,
        };
        // `BYHOUR` and the like make a daily rule recur within a day, and a rule may never
        // occur (30 February): both would cost a walk of many steps at every read.
        let mut starts = Vec::new();
        schedule.walk(|start, _| {
            starts.push(start);
            starts.len() < SPACING_CHECKED
        });
        if starts.is_empty() {
            return Err(ValidationError::value(
                "recurrence.rule",
                "never occurs from `starts_at` on",
            ));
        }
        if starts.windows(2).any(|w| w[1] - w[0] < MIN_SPACING_MS) {
            return Err(ValidationError::value(
                "recurrence.rule",
                "occurs more than once a day; occurrences must be a day apart at least",
            ));
        }
        Ok(schedule)
    }

    /// A stored window's schedule (`None` if it no longer reads, which the API never stores).
    pub fn of_stored(window: &MaintenanceWindow) -> Option<Schedule> {
        match (&window.recurrence, window.ends_at) {
            (Some(recurrence), _) => Schedule::recurring(window.starts_at, recurrence).ok(),
            (None, Some(end)) => Some(Schedule::Once {
                start: window.starts_at,
                end,
            }),
            (None, None) => None,
        }
    }

    /// The occurrences, in start order, as `[start, end)` in ms, while `go_on` holds for
    /// their start.
    fn walk(&self, mut go_on: impl FnMut(i64, i64) -> bool) {
        match self {
            Schedule::Once { start, end } => {
                go_on(*start, *end);
            }
            Schedule::Recurring { set, duration_ms } => {
                for at in set.clone().limit().into_iter().take(MAX_OCCURRENCES) {
                    let start = at.timestamp_millis();
                    if !go_on(start, start.saturating_add(*duration_ms)) {
                        return;
                    }
                }
            }
        }
    }

    /// The time it covers within `[from, until)`, as disjoint spans in time order
    /// (overlapping occurrences merged).
    pub fn covered(&self, from: i64, until: i64) -> Vec<(i64, i64)> {
        let mut spans: Vec<(i64, i64)> = Vec::new();
        self.walk(|start, end| {
            if start >= until {
                return false;
            }
            let (start, end) = (start.max(from), end.min(until));
            if start < end {
                match spans.last_mut() {
                    Some(last) if start <= last.1 => last.1 = last.1.max(end),
                    _ => spans.push((start, end)),
                }
            }
            true
        });
        spans
    }

    /// The stretch under way at `t` (`start <= t < end`, overlapping occurrences merged).
    pub fn under_way(&self, t: i64) -> Option<(i64, i64)> {
        let mut found: Option<(i64, i64)> = None;
        self.walk(|start, end| {
            match &mut found {
                // An occurrence that starts before the stretch ends extends it.
                Some(stretch) if start <= stretch.1 => stretch.1 = stretch.1.max(end),
                Some(_) => return false,
                None if start <= t && t < end => found = Some((start, end)),
                None => {}
            }
            start <= t || found.is_some()
        });
        found
    }

    /// The next occurrence to start after `t`.
    pub fn next_after(&self, t: i64) -> Option<(i64, i64)> {
        let mut next = None;
        self.walk(|start, end| {
            if start > t {
                next = Some((start, end));
                return false;
            }
            true
        });
        next
    }

    /// The first instant after `t` at which being under way can change: the end of the
    /// stretch under way, else the next start.
    pub fn next_change(&self, t: i64) -> Option<i64> {
        match self.under_way(t) {
            Some((_, end)) => Some(end),
            None => self.next_after(t).map(|(start, _)| start),
        }
    }

    /// When its last occurrence ends; `None` while it recurs without end.
    pub fn last_end(&self) -> Option<i64> {
        match self {
            Schedule::Once { end, .. } => Some(*end),
            Schedule::Recurring { set, .. } => {
                let rule = set.get_rrule().first()?;
                if rule.get_count().is_none() && rule.get_until().is_none() {
                    return None;
                }
                let mut last = None;
                self.walk(|_, end| {
                    last = Some(last.map_or(end, |l: i64| l.max(end)));
                    true
                });
                // A rule that never had an occurrence is over from its start.
                Some(last.unwrap_or(i64::MIN))
            }
        }
    }
}

#[cfg(test)]
mod tests;
