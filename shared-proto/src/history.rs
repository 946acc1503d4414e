//! Bodies of the history endpoints: uptime over fixed windows and bucketed history, both read
//! from central's rollups.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// How a monitor did over one window, which ends now and is exactly as long as its name says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UptimeWindow {
    /// Percent of the measured time that was up: `up_ms / (up_ms + down_ms)`; null when no
    /// time was measured. Each result stands for the time until the next result of the same
    /// monitor or location, at most its interval plus staleness grace; a multi-location
    /// monitor's time follows its combined (quorum) status. See `docs/uptime.md`.
    pub uptime: Option<f64>,
    /// Time in the window the results say was up.
    #[serde(default)]
    pub up_ms: u64,
    /// Time in the window the results say was down.
    #[serde(default)]
    pub down_ms: u64,
    /// The rest of the window: no result stood for it (silence beyond the interval plus
    /// grace, rate-limited checks, before the monitor existed or before uptime was measured
    /// as time), or the monitor was paused. Counts neither way.
    #[serde(default)]
    pub unmeasured_ms: u64,
    /// Up and down checks in the buckets the window overlaps (rate-limited ones say nothing
    /// and are not counted).
    pub checks: u64,
    /// Over successful checks: a failure's time is how long the check waited.
    pub latency_ms_mean: Option<f64>,
    /// Estimated from latency bands, within the width of the band it falls in.
    pub latency_ms_p95: Option<u64>,
}

/// `GET /api/v1/monitors/{id}/uptime`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Uptime {
    #[serde(flatten)]
    pub windows: UptimeWindows,
    /// A multi-location monitor's locations, each with its own uptime over the same windows
    /// (the whole monitor's follows their combined status); empty otherwise, and when one
    /// location was asked for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub locations: Vec<LocationUptime>,
}

/// One location's uptime, beside its monitor's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LocationUptime {
    pub region: String,
    #[serde(flatten)]
    pub windows: UptimeWindows,
}

/// The fixed windows, each ending now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UptimeWindows {
    #[serde(rename = "24h")]
    pub day: UptimeWindow,
    #[serde(rename = "7d")]
    pub week: UptimeWindow,
    #[serde(rename = "30d")]
    pub month: UptimeWindow,
    #[serde(rename = "1y")]
    pub year: UptimeWindow,
}

/// The width of history buckets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum HistoryResolution {
    Minute,
    Hour,
    Day,
}

/// One bucket of history (UTC).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HistoryBucket {
    pub start: DateTime<Utc>,
    pub up: u64,
    pub down: u64,
    /// Every result, rate-limited ones included.
    pub total: u64,
    /// Time in the bucket the results stood for up and for down, credited when the result
    /// after them arrives (the newest result's time is not in any bucket yet).
    #[serde(default)]
    pub up_ms: u64,
    #[serde(default)]
    pub down_ms: u64,
    pub latency_ms_mean: Option<f64>,
    pub latency_ms_min: Option<u64>,
    pub latency_ms_max: Option<u64>,
    pub latency_ms_p95: Option<u64>,
}

/// `GET /api/v1/monitors/{id}/history`: buckets that hold results, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct History {
    pub resolution: HistoryResolution,
    /// The location asked for; absent for the whole monitor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    pub buckets: Vec<HistoryBucket>,
    /// More buckets follow: ask again with `since` just after the last one.
    pub truncated: bool,
}
