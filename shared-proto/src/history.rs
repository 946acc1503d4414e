//! Bodies of the history endpoints: uptime over fixed windows and bucketed history, both read
//! from central's rollups.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// How a monitor did over one window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UptimeWindow {
    /// Percent of up/down checks that were up; null without any.
    pub uptime: Option<f64>,
    /// Up and down checks (rate-limited ones say nothing and are not counted).
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
