//! The rules for a monitor's own fields: names, interval and timeout, labels, and where it
//! runs (placement mode, regions, quorum). `MonitorSpec` and `MonitorPatch` apply them; a
//! target's form is `target`'s and settings are `settings`'.

use uuid::Uuid;

use super::{
    PollerMode, MAX_INTERVAL_MS, MAX_LABEL_LEN, MAX_LOCATIONS, MAX_NAME_LEN, MAX_TIMEOUT_MS,
    MIN_INTERVAL_MS, MIN_TIMEOUT_MS,
};
use crate::ValidationError;

/// Whether a name has nothing to read: only whitespace and control characters.
pub fn is_blank(text: &str) -> bool {
    text.chars().all(|c| c.is_whitespace() || c.is_control())
}

/// Whether a name holds a control character (a line break, a tab, an escape): names are shown
/// on pages, in notifications and as Prometheus label values, where such characters end lines
/// and labels. With `is_blank`, the OpenAPI documents both as the pattern
/// `^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$`.
pub fn has_control(text: &str) -> bool {
    text.chars().any(char::is_control)
}

pub fn validate_name(name: &str) -> Result<(), ValidationError> {
    if is_blank(name) {
        return Err(ValidationError::new("name", "must not be empty"));
    }
    if has_control(name) {
        return Err(ValidationError::new(
            "name",
            "must not contain control characters (line breaks, tabs)",
        ));
    }
    if name.chars().count() > MAX_NAME_LEN {
        return Err(ValidationError::new(
            "name",
            format!("must be at most {MAX_NAME_LEN} characters"),
        ));
    }
    Ok(())
}

pub fn validate_interval(interval_ms: u64) -> Result<(), ValidationError> {
    if !(MIN_INTERVAL_MS..=MAX_INTERVAL_MS).contains(&interval_ms) {
        return Err(ValidationError::new(
            "interval_ms",
            format!(
                "must be between {MIN_INTERVAL_MS} (5 s) and {MAX_INTERVAL_MS} (1 h), got {interval_ms}"
            ),
        ));
    }
    Ok(())
}

pub(super) fn validate_timeout_range(timeout_ms: u64) -> Result<(), ValidationError> {
    if !(MIN_TIMEOUT_MS..=MAX_TIMEOUT_MS).contains(&timeout_ms) {
        return Err(ValidationError::new(
            "timeout_ms",
            format!("must be between {MIN_TIMEOUT_MS} and {MAX_TIMEOUT_MS}, got {timeout_ms}"),
        ));
    }
    Ok(())
}

pub fn validate_timeout(timeout_ms: u64, interval_ms: u64) -> Result<(), ValidationError> {
    validate_timeout_range(timeout_ms)?;
    if timeout_ms > interval_ms {
        return Err(ValidationError::combination(
            "timeout_ms",
            format!("must not exceed interval_ms ({interval_ms}), got {timeout_ms}"),
        ));
    }
    Ok(())
}

/// Whether `value` is 1 to `max` ASCII letters, digits or `extra` bytes: a name that reads the
/// same in a URL, a label value and a page.
pub(crate) fn is_word(value: &str, max: usize, extra: &[u8]) -> bool {
    !value.is_empty()
        && value.len() <= max
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || extra.contains(&b))
}

/// Region, datacenter and capability names: short, printable, no spaces.
pub fn validate_label(field: &str, value: &str) -> Result<(), ValidationError> {
    if is_word(value, MAX_LABEL_LEN, b"-_.") {
        Ok(())
    } else {
        Err(ValidationError::new(
            field,
            format!(
                "`{value}` is not a valid name; use 1 to {MAX_LABEL_LEN} letters, digits, `-`, `_` or `.`"
            ),
        ))
    }
}

pub(super) fn validate_placement(
    mode: PollerMode,
    poller_id: Option<Uuid>,
    region: Option<&str>,
    datacenter: Option<&str>,
) -> Result<(), ValidationError> {
    if let Some(region) = region {
        validate_label("poller_region", region)?;
    }
    if let Some(datacenter) = datacenter {
        validate_label("poller_datacenter", datacenter)?;
    }
    match mode {
        PollerMode::Pinned if poller_id.is_none() => Err(ValidationError::combination(
            "poller_id",
            "is required when poller_mode is `pinned`",
        )),
        PollerMode::Grouped if region.is_none() && datacenter.is_none() => {
            Err(ValidationError::combination(
                "poller_region",
                "is required when poller_mode is `grouped` (or set poller_datacenter)",
            ))
        }
        _ => Ok(()),
    }
}

/// `multi` needs two or more distinct regions and a quorum they can reach; the other modes
/// take neither field, so that a forgotten `poller_mode` is not silently a single location.
pub(super) fn validate_locations(
    mode: PollerMode,
    regions: Option<&[String]>,
    quorum: Option<u32>,
) -> Result<(), ValidationError> {
    if mode != PollerMode::Multi {
        if regions.is_some() {
            return Err(ValidationError::combination(
                "poller_regions",
                "is only used when poller_mode is `multi`; set poller_mode to `multi` or drop it",
            ));
        }
        if quorum.is_some() {
            return Err(ValidationError::combination(
                "quorum",
                "is only used when poller_mode is `multi`; set poller_mode to `multi` or drop it",
            ));
        }
        return Ok(());
    }
    let Some(regions) = regions else {
        return Err(ValidationError::combination(
            "poller_regions",
            "is required when poller_mode is `multi`: list two or more regions, like [\"eu\", \"us\"]",
        ));
    };
    validate_region_list(regions)?;
    if let Some(quorum) = quorum {
        if quorum == 0 || quorum as usize > regions.len() {
            return Err(ValidationError::combination(
                "quorum",
                format!(
                    "must be between 1 and the number of poller_regions ({}), got {quorum}",
                    regions.len()
                ),
            ));
        }
    }
    Ok(())
}

/// `poller_regions` on its own: two to sixteen distinct region names.
pub(super) fn validate_region_list(regions: &[String]) -> Result<(), ValidationError> {
    for region in regions {
        validate_label("poller_regions", region)?;
    }
    let mut distinct: Vec<&String> = regions.iter().collect();
    distinct.sort();
    distinct.dedup();
    if distinct.len() != regions.len() {
        return Err(ValidationError::new(
            "poller_regions",
            "lists a region twice; list each region once",
        ));
    }
    if !(2..=MAX_LOCATIONS).contains(&regions.len()) {
        return Err(ValidationError::new(
            "poller_regions",
            format!(
                "must list between 2 and {MAX_LOCATIONS} regions, got {}; for one region use poller_mode `grouped`",
                regions.len()
            ),
        ));
    }
    Ok(())
}
