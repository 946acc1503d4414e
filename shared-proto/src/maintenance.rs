//! Maintenance windows on the wire (`/api/v1/maintenance-windows`): when monitors are in
//! planned maintenance, and which. Checks here are the ones both sides can make without a
//! calendar; the recurrence rule and the time zone are read by central (`422` when they do not
//! parse there).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::monitor::validate_label;
use crate::tags::validate_tags;
use crate::ValidationError;

/// The most ids, regions or tags one window names in each list.
pub const MAX_SCOPE: usize = 1000;

/// The shortest window or occurrence: a minute.
pub const MIN_DURATION_MS: u64 = 60_000;

/// The longest one-off window, or occurrence of a recurring one: 366 days.
pub const MAX_DURATION_MS: u64 = 366 * 86_400_000;

/// The longest "mute for" (`POST /api/v1/monitors/{id}/mute`): 30 days.
pub const MAX_MUTE_MS: u64 = 30 * 86_400_000;

/// What a window lets through.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum MaintenanceNotify {
    /// No problem is told during the window; a recovery of a problem told before it is.
    #[default]
    Recoveries,
    /// Nothing is told during the window.
    None,
}

/// A window that comes back: an RFC 5545 `RRULE` in a time zone, each occurrence lasting
/// `duration_ms`. The window's `starts_at` is the first occurrence, and its wall-clock time
/// in `time_zone` is the time of every occurrence, across daylight-saving changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Recurrence {
    /// The rule's parts without `DTSTART`: `FREQ=WEEKLY;BYDAY=SU`. `FREQ` is `DAILY`,
    /// `WEEKLY`, `MONTHLY` or `YEARLY`, and occurrences are a day apart at least; `COUNT` or
    /// `UNTIL` (in UTC, `…Z`) end it, else it never ends.
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 6, max_length = 500, pattern = r"^[A-Za-z0-9=;,:+-]+$")
    )]
    pub rule: String,
    /// An IANA time zone (`Europe/Berlin`, `UTC`).
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9_+/-]+$")
    )]
    pub time_zone: String,
    /// How long each occurrence lasts (60000 to 31622400000).
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 60000, maximum = 31622400000_u64)
    )]
    pub duration_ms: u64,
}

/// `POST /api/v1/maintenance-windows`: one-off (`starts_at`, `ends_at`) or recurring
/// (`starts_at`, `recurrence`), over the monitors named, placed on the pollers named, or
/// running from the regions named (at least one of them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct MaintenanceWindowSpec {
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 1,
            max_length = 200,
            pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
        )
    )]
    pub name: String,
    /// When it starts (the first occurrence of a recurring window), in the years 2000 to
    /// 2099.
    pub starts_at: DateTime<Utc>,
    /// A one-off window's end; not with `recurrence`.
    #[serde(default)]
    pub ends_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub recurrence: Option<Recurrence>,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_items = 1000))]
    pub monitor_ids: Vec<Uuid>,
    /// Monitors placed on these pollers (themselves or by a location).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_items = 1000))]
    pub poller_ids: Vec<Uuid>,
    /// Monitors running from these regions: their group's region, their poller's, or one
    /// of their locations'.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_items = 1000))]
    pub regions: Vec<String>,
    /// Monitors carrying any of these tags (as they are when the window is under way).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_items = 1000))]
    pub tags: Vec<String>,
    #[serde(default)]
    pub notify: MaintenanceNotify,
    /// While it is under way, the monitors it names by id or by tag are not checked (their
    /// pollers drop them; they are placed again when it ends). Its poller and region scopes
    /// only quiet what they cover: to stop a poller, disable it.
    #[serde(default)]
    pub stop_checks: bool,
}

/// `PATCH /api/v1/maintenance-windows/{id}`: the fields to change. `ends_at: null` with a
/// `recurrence` makes a one-off window recurring; `recurrence: null` with an `ends_at` makes
/// it one-off.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct MaintenanceWindowPatch {
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 1,
            max_length = 200,
            pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
        )
    )]
    pub name: Option<String>,
    pub starts_at: Option<DateTime<Utc>>,
    #[serde(default, with = "crate::monitor::double_option")]
    pub ends_at: Option<Option<DateTime<Utc>>>,
    #[serde(default, with = "crate::monitor::double_option")]
    pub recurrence: Option<Option<Recurrence>>,
    #[cfg_attr(feature = "openapi", schema(max_items = 1000))]
    pub monitor_ids: Option<Vec<Uuid>>,
    #[cfg_attr(feature = "openapi", schema(max_items = 1000))]
    pub poller_ids: Option<Vec<Uuid>>,
    #[cfg_attr(feature = "openapi", schema(max_items = 1000))]
    pub regions: Option<Vec<String>>,
    #[cfg_attr(feature = "openapi", schema(max_items = 1000))]
    pub tags: Option<Vec<String>>,
    pub notify: Option<MaintenanceNotify>,
    pub stop_checks: Option<bool>,
}

/// `POST /api/v1/monitors/{id}/mute`: a one-off window over this monitor alone, from now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct MuteRequest {
    /// How long (60000 to 2592000000: a minute to 30 days).
    #[cfg_attr(feature = "openapi", schema(minimum = 60000, maximum = 2592000000_u64))]
    pub duration_ms: u64,
    #[serde(default)]
    pub notify: MaintenanceNotify,
}

/// One occurrence of a window: `[starts_at, ends_at)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Occurrence {
    pub starts_at: DateTime<Utc>,
    pub ends_at: DateTime<Utc>,
}

/// A maintenance window as stored, with where it stands now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MaintenanceWindowView {
    pub id: Uuid,
    pub name: String,
    pub starts_at: DateTime<Utc>,
    pub ends_at: Option<DateTime<Utc>>,
    pub recurrence: Option<Recurrence>,
    pub monitor_ids: Vec<Uuid>,
    pub poller_ids: Vec<Uuid>,
    pub regions: Vec<String>,
    pub tags: Vec<String>,
    pub notify: MaintenanceNotify,
    /// Whether the monitors it names by id or tag go unchecked while it is under way.
    pub stop_checks: bool,
    /// The occurrence under way now, if any.
    pub current: Option<Occurrence>,
    /// The next occurrence to start, if any.
    pub next: Option<Occurrence>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl MaintenanceWindowSpec {
    /// The checks that need no calendar: name, one of `ends_at` and `recurrence`, a one-off
    /// window's length, a scope, the lists' sizes and the regions' names.
    pub fn validate(&self) -> Result<(), ValidationError> {
        crate::monitor::validate_name(&self.name)?;
        check_time("starts_at", self.starts_at)?;
        if let Some(ends_at) = self.ends_at {
            check_time("ends_at", ends_at)?;
        }
        match (&self.ends_at, &self.recurrence) {
            (Some(ends_at), None) => {
                let ms = (*ends_at - self.starts_at).num_milliseconds();
                if ms < MIN_DURATION_MS as i64 || ms > MAX_DURATION_MS as i64 {
                    return Err(ValidationError::combination(
                        "ends_at",
                        "must be a minute to 366 days after starts_at",
                    ));
                }
            }
            (None, Some(recurrence)) => recurrence.validate()?,
            (Some(_), Some(_)) => {
                return Err(ValidationError::combination(
                    "ends_at",
                    "a recurring window ends each occurrence after `recurrence.duration_ms`; \
                     send `ends_at` or `recurrence`, not both",
                ))
            }
            (None, None) => {
                return Err(ValidationError::combination(
                    "ends_at",
                    "a window needs `ends_at` (one-off) or `recurrence`",
                ))
            }
        }
        if self.monitor_ids.is_empty()
            && self.poller_ids.is_empty()
            && self.regions.is_empty()
            && self.tags.is_empty()
        {
            return Err(ValidationError::combination(
                "monitor_ids",
                "a window needs a scope: `monitor_ids`, `poller_ids`, `regions` or `tags`",
            ));
        }
        if self.stop_checks && self.monitor_ids.is_empty() && self.tags.is_empty() {
            return Err(ValidationError::combination(
                "stop_checks",
                "stops the checks of the monitors named by `monitor_ids` or `tags`, and this \
                 window names none; to stop a poller's checks, disable it (PATCH \
                 /api/v1/pollers/{id} with {\"enabled\": false})",
            ));
        }
        check_scope(self)
    }

    pub fn apply(&mut self, patch: MaintenanceWindowPatch) {
        let MaintenanceWindowPatch {
            name,
            starts_at,
            ends_at,
            recurrence,
            monitor_ids,
            poller_ids,
            regions,
            tags,
            notify,
            stop_checks,
        } = patch;
        if let Some(v) = name {
            self.name = v;
        }
        if let Some(v) = starts_at {
            self.starts_at = v;
        }
        if let Some(v) = ends_at {
            self.ends_at = v;
        }
        if let Some(v) = recurrence {
            self.recurrence = v;
        }
        if let Some(v) = monitor_ids {
            self.monitor_ids = v;
        }
        if let Some(v) = poller_ids {
            self.poller_ids = v;
        }
        if let Some(v) = regions {
            self.regions = v;
        }
        if let Some(v) = tags {
            self.tags = v;
        }
        if let Some(v) = notify {
            self.notify = v;
        }
        if let Some(v) = stop_checks {
            self.stop_checks = v;
        }
    }
}

impl MaintenanceWindowPatch {
    /// The checks of each field on its own (the whole is checked once applied).
    pub fn validate_fields(&self) -> Result<(), ValidationError> {
        if let Some(name) = &self.name {
            crate::monitor::validate_name(name)?;
        }
        if let Some(Some(recurrence)) = &self.recurrence {
            recurrence.validate()?;
        }
        for (field, len) in [
            ("monitor_ids", self.monitor_ids.as_ref().map(Vec::len)),
            ("poller_ids", self.poller_ids.as_ref().map(Vec::len)),
            ("regions", self.regions.as_ref().map(Vec::len)),
        ] {
            check_len(field, len.unwrap_or(0))?;
        }
        for region in self.regions.iter().flatten() {
            validate_label("regions", region)?;
        }
        if let Some(tags) = &self.tags {
            validate_tags("tags", tags, MAX_SCOPE)?;
        }
        Ok(())
    }
}

impl Recurrence {
    fn validate(&self) -> Result<(), ValidationError> {
        let rule_ok = (6..=500).contains(&self.rule.len())
            && self
                .rule
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"=;,:+-".contains(&b));
        if !rule_ok {
            return Err(ValidationError::new(
                "recurrence.rule",
                "must be an RRULE's parts (`FREQ=WEEKLY;BYDAY=SU`), 6 to 500 characters",
            ));
        }
        let zone_ok = (1..=64).contains(&self.time_zone.len())
            && self
                .time_zone
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_+/-".contains(&b));
        if !zone_ok {
            return Err(ValidationError::new(
                "recurrence.time_zone",
                "must be an IANA time zone name (`Europe/Berlin`, `UTC`)",
            ));
        }
        if !(MIN_DURATION_MS..=MAX_DURATION_MS).contains(&self.duration_ms) {
            return Err(ValidationError::new(
                "recurrence.duration_ms",
                format!("must be {MIN_DURATION_MS} to {MAX_DURATION_MS} (a minute to 366 days)"),
            ));
        }
        Ok(())
    }
}

impl MuteRequest {
    pub fn validate(&self) -> Result<(), ValidationError> {
        if !(MIN_DURATION_MS..=MAX_MUTE_MS).contains(&self.duration_ms) {
            return Err(ValidationError::new(
                "duration_ms",
                format!("must be {MIN_DURATION_MS} to {MAX_MUTE_MS} (a minute to 30 days)"),
            ));
        }
        Ok(())
    }
}

/// Windows are planned between 2000 and 2100: a calendar far outside that is a typo, and
/// the rule reader is not made for it.
fn check_time(field: &str, at: DateTime<Utc>) -> Result<(), ValidationError> {
    let year = chrono::Datelike::year(&at);
    if !(2000..2100).contains(&year) {
        return Err(ValidationError::value(
            field,
            "must be between the years 2000 and 2099",
        ));
    }
    Ok(())
}

fn check_len(field: &str, len: usize) -> Result<(), ValidationError> {
    if len > MAX_SCOPE {
        return Err(ValidationError::new(
            field,
            format!("must name at most {MAX_SCOPE}"),
        ));
    }
    Ok(())
}

fn check_scope(spec: &MaintenanceWindowSpec) -> Result<(), ValidationError> {
    check_len("monitor_ids", spec.monitor_ids.len())?;
    check_len("poller_ids", spec.poller_ids.len())?;
    check_len("regions", spec.regions.len())?;
    for region in &spec.regions {
        validate_label("regions", region)?;
    }
    validate_tags("tags", &spec.tags, MAX_SCOPE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> MaintenanceWindowSpec {
        serde_json::from_value(serde_json::json!({
            "name": "deploy",
            "starts_at": "2026-11-26T12:00:00Z",
            "ends_at": "2026-11-26T13:00:00Z",
            "regions": ["eu"],
        }))
        .unwrap()
    }

    #[test]
    fn a_window_needs_an_end_or_a_recurrence_and_a_scope() {
        assert_eq!(spec().validate(), Ok(()));
        let mut both = spec();
        both.recurrence = Some(Recurrence {
            rule: "FREQ=DAILY".into(),
            time_zone: "UTC".into(),
            duration_ms: 3_600_000,
        });
        assert_eq!(both.validate().unwrap_err().field, "ends_at");
        let mut neither = spec();
        neither.ends_at = None;
        assert_eq!(neither.validate().unwrap_err().field, "ends_at");
        let mut nothing = spec();
        nothing.regions.clear();
        assert_eq!(nothing.validate().unwrap_err().field, "monitor_ids");
        let mut by_tag = nothing.clone();
        by_tag.tags = vec!["team:db".into()];
        assert_eq!(by_tag.validate(), Ok(()));
        by_tag.tags = vec!["team db".into()];
        assert_eq!(by_tag.validate().unwrap_err().field, "tags");
        let mut backwards = spec();
        backwards.ends_at = Some(backwards.starts_at);
        assert_eq!(backwards.validate().unwrap_err().field, "ends_at");
    }

    #[test]
    fn unknown_fields_are_refused() {
        let refused = serde_json::from_value::<MaintenanceWindowSpec>(serde_json::json!({
            "name": "deploy", "starts_at": "2026-11-26T12:00:00Z",
            "ends_at": "2026-11-26T13:00:00Z", "regions": ["eu"], "mute": true,
        }));
        assert!(refused.is_err());
    }
}
