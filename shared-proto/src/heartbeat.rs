//! Heartbeat (push) monitors: the settings of `kind: heartbeat` and the wire shapes of its ping
//! URL. A job reports in at `/ping/{token}` instead of being checked; central alone answers
//! (no agent runs these). What a schedule means in time (a cron expression's next instant in
//! its zone) is central's: this crate checks the settings' shape only.

use serde::{Deserialize, Serialize};

use crate::monitor::{has_control, is_blank, MIN_INTERVAL_MS};
use crate::ValidationError;

/// The longest period (and grace) a heartbeat may have: a monthly job's.
pub const MAX_HEARTBEAT_PERIOD_MS: u64 = 31 * 86_400_000;
/// The shortest grace: pings travel over the internet.
pub const MIN_GRACE_MS: u64 = 1_000;
pub const DEFAULT_GRACE_MS: u64 = 60_000;
const MAX_CRON_LEN: usize = 120;
const MAX_TIME_ZONE_LEN: usize = 64;

/// Settings of a `heartbeat` monitor: when pings are expected. A ping is expected a period
/// after the previous one (`period_ms`, else the monitor's `interval_ms`), or at each instant
/// of `cron` in `time_zone`; it is late `grace_ms` after that.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct HeartbeatSettings {
    /// The time between two pings, when it is longer than `interval_ms` allows (up to 31
    /// days); unset: `interval_ms`.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(minimum = 5000, maximum = 2678400000.0))]
    pub period_ms: Option<u64>,
    /// How late a ping may be before the monitor is down; also how long a job that pinged
    /// `/start` has to finish.
    #[serde(default = "default_grace")]
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 1000, maximum = 2678400000.0, default = 60000)
    )]
    pub grace_ms: u64,
    /// A cron expression (five fields: minute hour day-of-month month day-of-week, as crontab
    /// has them) naming when the job runs, instead of a period.
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 1,
            max_length = 120,
            pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
        )
    )]
    pub cron: Option<String>,
    /// The IANA time zone `cron` is read in (`Europe/Paris`); default `UTC`.
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 1,
            max_length = 64,
            pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
        )
    )]
    pub time_zone: Option<String>,
}

fn default_grace() -> u64 {
    DEFAULT_GRACE_MS
}

impl Default for HeartbeatSettings {
    fn default() -> Self {
        Self {
            period_ms: None,
            grace_ms: DEFAULT_GRACE_MS,
            cron: None,
            time_zone: None,
        }
    }
}

impl HeartbeatSettings {
    /// The shape of the settings; central checks that `cron` and `time_zone` mean something.
    pub fn validate(&self) -> Result<(), ValidationError> {
        if let Some(period) = self.period_ms {
            in_range("period_ms", period, MIN_INTERVAL_MS)?;
        }
        in_range("grace_ms", self.grace_ms, MIN_GRACE_MS)?;
        let texts = [
            ("cron", &self.cron, MAX_CRON_LEN),
            ("time_zone", &self.time_zone, MAX_TIME_ZONE_LEN),
        ];
        for (field, text, max) in texts {
            if let Some(text) = text {
                // Characters, not bytes, as the OpenAPI document's `maxLength` counts them.
                if is_blank(text) || text.chars().count() > max || has_control(text) {
                    return Err(ValidationError::new(
                        format!("settings.{field}"),
                        format!("must be 1 to {max} characters of text"),
                    ));
                }
            }
        }
        if self.cron.is_some() && self.period_ms.is_some() {
            return Err(ValidationError::combination(
                "settings.period_ms",
                "a heartbeat is expected either every period or at the times of `cron`, not both",
            ));
        }
        if self.time_zone.is_some() && self.cron.is_none() {
            return Err(ValidationError::combination(
                "settings.time_zone",
                "a time zone reads `cron`; a period needs none",
            ));
        }
        Ok(())
    }

    /// The period pings are expected at, when the schedule is one (`None` for `cron`).
    pub fn period(&self, interval_ms: u64) -> Option<u64> {
        match &self.cron {
            Some(_) => None,
            None => Some(self.period_ms.unwrap_or(interval_ms)),
        }
    }
}

fn in_range(field: &str, value: u64, min: u64) -> Result<(), ValidationError> {
    if !(min..=MAX_HEARTBEAT_PERIOD_MS).contains(&value) {
        return Err(ValidationError::new(
            format!("settings.{field}"),
            format!("must be between {min} and {MAX_HEARTBEAT_PERIOD_MS}, got {value}"),
        ));
    }
    Ok(())
}

/// What a ping says of the job: `/ping/{token}` (success), `/start`, `/fail`, or an exit code
/// (`/0` success, anything else a failure).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PingKind {
    Success,
    Start,
    Fail,
    Exit(u8),
}

impl PingKind {
    /// The last part of a ping URL after the token (`None`: nothing after it).
    pub fn parse(suffix: Option<&str>) -> Option<PingKind> {
        match suffix {
            None | Some("") => Some(PingKind::Success),
            Some("start") => Some(PingKind::Start),
            Some("fail") => Some(PingKind::Fail),
            Some(code) if code.len() <= 3 && code.bytes().all(|b| b.is_ascii_digit()) => {
                code.parse().ok().map(PingKind::Exit)
            }
            Some(_) => None,
        }
    }

    pub fn as_str(self) -> String {
        match self {
            PingKind::Success => "success".into(),
            PingKind::Start => "start".into(),
            PingKind::Fail => "fail".into(),
            PingKind::Exit(code) => format!("exit {code}"),
        }
    }

    /// Whether the ping reports the job failed.
    pub fn failed(self) -> bool {
        matches!(self, PingKind::Fail) || matches!(self, PingKind::Exit(code) if code != 0)
    }
}

/// A heartbeat monitor's ping address, as central shows it once (at creation and on a new
/// token).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PingUrl {
    /// `{CENTRAL_PUBLIC_URL}/ping/{token}`; `/start`, `/fail` and `/{exit_code}` may follow.
    pub ping_url: String,
}

/// One ping as kept (the newest 50 of each monitor).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PingView {
    pub at: chrono::DateTime<chrono::Utc>,
    /// `success`, `start`, `fail` or `exit N`.
    pub kind: String,
    /// The address it came from.
    pub source: String,
    /// `GET`, `POST` or `HEAD`.
    pub method: String,
    /// The request body, cut to 10 KiB (and to whole characters).
    pub body: String,
}

/// The newest pings of a heartbeat monitor, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PingList {
    pub pings: Vec<PingView>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ping_suffixes() {
        assert_eq!(PingKind::parse(None), Some(PingKind::Success));
        assert_eq!(PingKind::parse(Some("start")), Some(PingKind::Start));
        assert_eq!(PingKind::parse(Some("fail")), Some(PingKind::Fail));
        assert_eq!(PingKind::parse(Some("0")), Some(PingKind::Exit(0)));
        assert_eq!(PingKind::parse(Some("255")), Some(PingKind::Exit(255)));
        assert_eq!(PingKind::parse(Some("256")), None);
        assert_eq!(PingKind::parse(Some("-1")), None);
        assert_eq!(PingKind::parse(Some("log")), None);
        assert!(PingKind::Exit(3).failed() && PingKind::Fail.failed());
        assert!(!PingKind::Exit(0).failed() && !PingKind::Start.failed());
    }

    #[test]
    fn a_schedule_is_a_period_or_a_cron_never_both() {
        let both = HeartbeatSettings {
            period_ms: Some(60_000),
            cron: Some("0 3 * * *".into()),
            ..HeartbeatSettings::default()
        };
        assert_eq!(both.validate().unwrap_err().field, "settings.period_ms");
        let zone_alone = HeartbeatSettings {
            time_zone: Some("Europe/Paris".into()),
            ..HeartbeatSettings::default()
        };
        assert_eq!(
            zone_alone.validate().unwrap_err().field,
            "settings.time_zone"
        );
        let short = HeartbeatSettings {
            grace_ms: 10,
            ..HeartbeatSettings::default()
        };
        assert_eq!(short.validate().unwrap_err().field, "settings.grace_ms");
        assert_eq!(HeartbeatSettings::default().period(30_000), Some(30_000));
    }

    /// The texts follow the document's rule: characters (not bytes) up to the maximum, no
    /// control character (C1 included), not blank.
    #[test]
    fn texts_are_counted_in_characters_and_refuse_controls() {
        let with = |time_zone: &str| HeartbeatSettings {
            cron: Some("0 3 * * *".into()),
            time_zone: Some(time_zone.into()),
            ..HeartbeatSettings::default()
        };
        assert!(
            with(&"é".repeat(64)).validate().is_ok(),
            "64 characters, 128 bytes"
        );
        assert!(with(&"é".repeat(65)).validate().is_err());
        assert!(
            with("Europe/\u{83}Paris").validate().is_err(),
            "a C1 control"
        );
        assert!(with(" \t").validate().is_err(), "blank");
    }
}
