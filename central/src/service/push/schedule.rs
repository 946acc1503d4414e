//! When a heartbeat monitor's next ping is expected and when it is late: pure rules over its
//! settings (`shared_proto::heartbeat::HeartbeatSettings`). A period counts from the previous
//! ping; a cron expression (read by the `croner` crate, five fields) names wall-clock instants
//! in an IANA time zone, so a job at 03:30 every night stays at 03:30 across daylight-saving
//! changes (a night without 02:30 has no 02:30 run, as cron itself does).
//!
//! Cost: a period is arithmetic; a cron expression's next instant is `croner`'s search, a few
//! steps per field. Must not: read the store or the clock.

use std::str::FromStr;

use chrono::{TimeZone, Utc};
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds, Year};
use croner::Cron;
use serde_json::{Map, Value};
use shared_proto::heartbeat::{HeartbeatSettings, MAX_HEARTBEAT_PERIOD_MS};
use shared_proto::settings::{CheckSettings, MonitorSettings};
use shared_proto::{CheckKind, ValidationError};

/// When pings are expected.
#[derive(Debug, Clone)]
pub enum Every {
    /// A period after the previous ping (ms).
    Period(i64),
    /// At each instant of a cron expression, in a time zone.
    Cron(Box<Cron>, Tz),
}

/// A heartbeat monitor's schedule: when a ping is expected, and how late it may be.
#[derive(Debug, Clone)]
pub struct Schedule {
    pub every: Every,
    pub grace_ms: i64,
}

impl Schedule {
    /// The schedule of a monitor as stored (`None` for a kind agents check, or settings that
    /// no longer parse).
    pub fn of(
        kind: CheckKind,
        settings: &Map<String, Value>,
        interval_ms: i64,
    ) -> Option<Schedule> {
        if kind != CheckKind::Heartbeat {
            return None;
        }
        match MonitorSettings::parse(CheckKind::Heartbeat, settings)
            .ok()?
            .check
        {
            CheckSettings::Heartbeat(s) => Schedule::from_settings(&s, interval_ms).ok(),
            _ => None,
        }
    }

    /// The schedule the settings describe; refuses a cron expression or a time zone that
    /// means nothing (`settings.cron`, `settings.time_zone`).
    pub fn from_settings(
        settings: &HeartbeatSettings,
        interval_ms: i64,
    ) -> Result<Schedule, ValidationError> {
        let every = match &settings.cron {
            None => Every::Period(settings.period_ms.map_or(interval_ms, |p| p as i64).max(1)),
            Some(text) => {
                let zone = settings.time_zone.as_deref().unwrap_or("UTC");
                let tz = Tz::from_str(zone).map_err(|_| {
                    ValidationError::value(
                        "settings.time_zone",
                        format!("`{zone}` is not an IANA time zone (like Europe/Paris)"),
                    )
                })?;
                let cron = CronParser::builder()
                    .seconds(Seconds::Disallowed)
                    .year(Year::Disallowed)
                    .build()
                    .parse(text)
                    .map_err(|e| {
                        ValidationError::value(
                            "settings.cron",
                            format!("`{text}` is not a cron expression of five fields: {e}"),
                        )
                    })?;
                let schedule = Schedule {
                    every: Every::Cron(Box::new(cron), tz),
                    grace_ms: 0,
                };
                // An expression that never fires (`0 0 30 2 *`) would leave a job unwatched.
                if schedule.expected_after(0) >= i64::MAX / 2 {
                    return Err(ValidationError::value(
                        "settings.cron",
                        format!("`{text}` never fires"),
                    ));
                }
                schedule.every
            }
        };
        Ok(Schedule {
            every,
            grace_ms: settings.grace_ms as i64,
        })
    }

    /// The first instant after `t` (ms) at which a ping is expected, when the previous came at
    /// `t`. Far in the future (`i64::MAX / 2`) for a cron expression that never fires again.
    pub fn expected_after(&self, t: i64) -> i64 {
        match &self.every {
            Every::Period(period) => t.saturating_add(*period),
            Every::Cron(cron, tz) => {
                let Some(start) = Utc.timestamp_millis_opt(t).single() else {
                    return i64::MAX / 2;
                };
                cron.find_next_occurrence(&start.with_timezone(tz), false)
                    .map_or(i64::MAX / 2, |next| next.timestamp_millis())
            }
        }
    }

    /// When a ping expected after one at `t` is late.
    pub fn late_after(&self, t: i64) -> i64 {
        self.expected_after(t).saturating_add(self.grace_ms)
    }

    /// The longest a result of this monitor stands for in uptime: the longest wait for a ping
    /// and its grace. A cron expression's gaps vary; a month covers any a monthly job has
    /// (a longer gap counts as unmeasured time beyond it).
    pub fn longest_gap_ms(&self) -> i64 {
        let wait = match &self.every {
            Every::Period(period) => *period,
            Every::Cron(..) => MAX_HEARTBEAT_PERIOD_MS as i64,
        };
        wait.saturating_add(self.grace_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(text: &str) -> i64 {
        chrono::DateTime::parse_from_rfc3339(text)
            .unwrap()
            .timestamp_millis()
    }

    fn cron(text: &str, zone: &str) -> Schedule {
        Schedule::from_settings(
            &HeartbeatSettings {
                cron: Some(text.into()),
                time_zone: Some(zone.into()),
                grace_ms: 60_000,
                ..HeartbeatSettings::default()
            },
            30_000,
        )
        .unwrap()
    }

    #[test]
    fn a_period_counts_from_the_previous_ping() {
        let schedule = Schedule::from_settings(
            &HeartbeatSettings {
                grace_ms: 2_000,
                ..HeartbeatSettings::default()
            },
            10_000,
        )
        .unwrap();
        assert_eq!(schedule.expected_after(1_000), 11_000);
        assert_eq!(schedule.late_after(1_000), 13_000);
        assert_eq!(schedule.longest_gap_ms(), 12_000);
    }

    #[test]
    fn a_nightly_job_keeps_its_wall_clock_time_across_dst() {
        let nightly = cron("30 3 * * *", "Europe/Paris");
        // The night summer time starts (2026-03-29, 02:00 → 03:00 local): 03:30 is 01:30 UTC.
        assert_eq!(
            nightly.expected_after(ms("2026-03-28T10:00:00Z")),
            ms("2026-03-29T01:30:00Z")
        );
        // The next night, and the night winter time returns (2026-10-25): 02:30 UTC.
        assert_eq!(
            nightly.expected_after(ms("2026-03-29T01:30:05Z")),
            ms("2026-03-30T01:30:00Z")
        );
        assert_eq!(
            nightly.expected_after(ms("2026-10-24T12:00:00Z")),
            ms("2026-10-25T02:30:00Z")
        );
        assert_eq!(
            nightly.late_after(ms("2026-10-24T12:00:00Z")),
            ms("2026-10-25T02:31:00Z")
        );
    }

    #[test]
    fn meaningless_schedules_are_refused_naming_the_field() {
        let refused = |text: &str, zone: &str| {
            Schedule::from_settings(
                &HeartbeatSettings {
                    cron: Some(text.into()),
                    time_zone: Some(zone.into()),
                    ..HeartbeatSettings::default()
                },
                30_000,
            )
            .unwrap_err()
            .field
        };
        assert_eq!(refused("61 * * * *", "UTC"), "settings.cron");
        assert_eq!(refused("* * * * * *", "UTC"), "settings.cron");
        assert_eq!(refused("0 0 30 2 *", "UTC"), "settings.cron");
        assert_eq!(refused("0 3 * * *", "Mars/Olympus"), "settings.time_zone");
    }

    /// The reference: walk minute by minute in local time and take the first minute whose
    /// local hour and minute match (enough for `M H * * *` expressions).
    fn walked(after: i64, minute: u32, hour: u32, tz: Tz) -> i64 {
        use chrono::Timelike;
        let mut t = (after / 60_000 + 1) * 60_000;
        loop {
            let local = Utc.timestamp_millis_opt(t).unwrap().with_timezone(&tz);
            if local.minute() == minute && local.hour() == hour {
                return t;
            }
            t += 60_000;
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn a_daily_cron_matches_a_minute_walk_in_any_zone(
            minute in 0u32..60,
            hour in 0u32..24,
            zone in prop::sample::select(vec!["UTC", "Europe/Paris", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"]),
            // Over 2026, DST changes included.
            after in 1_767_225_600_000i64..1_798_761_600_000i64,
        ) {
            let tz = Tz::from_str(zone).unwrap();
            let schedule = cron(&format!("{minute} {hour} * * *"), zone);
            let expected = schedule.expected_after(after);
            let reference = walked(after, minute, hour, tz);
            // A local time that a change to summer time skips has no run that day: cron and
            // the walk both take the next day's.
            prop_assert_eq!(expected, reference);
        }
    }
}
