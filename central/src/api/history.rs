//! History handlers: a monitor's uptime over fixed windows and its bucketed history.

use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use shared_proto::history::{History, HistoryResolution, Uptime};
use utoipa::IntoParams;
use uuid::Uuid;

use super::extract::{parse_since, valid_region, ApiPath, ApiQuery};
use crate::error::ApiResult;
use crate::service::history::MonitorHistory;

/// `?region=`
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct UptimeQuery {
    /// One location of a multi-location monitor; the whole monitor when absent.
    #[param(pattern = r"^[A-Za-z0-9._-]{1,64}$")]
    region: Option<String>,
}

#[utoipa::path(
    get, path = "/api/v1/monitors/{id}/uptime", tag = "monitors", operation_id = "monitor_uptime",
    summary = "Uptime and latency over the last 24 hours, 7, 30 and 365 days (from rollups; a window's partial first hour from its results while they are kept)",
    security(("admin_token" = [])),
    params(("id" = Uuid, Path, description = "Monitor id"), UptimeQuery),
    responses((status = 200, description = "One figure set per window.", body = Uptime), super::openapi::IdQueryErrors)
)]
pub async fn monitor_uptime(
    State(history): State<MonitorHistory>,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(query): ApiQuery<UptimeQuery>,
) -> ApiResult<Json<Uptime>> {
    let region = valid_region(query.region)?;
    Ok(Json(history.monitor_uptime(id, region.as_deref()).await?))
}

/// `?resolution=&since=&region=`
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct HistoryQuery {
    /// Bucket width.
    #[param(inline)]
    resolution: HistoryResolution,
    /// Buckets from the one holding this RFC 3339 time; by default the last hour of minutes,
    /// day of hours or 30 days of days.
    #[param(format = DateTime)]
    since: Option<String>,
    /// One location of a multi-location monitor; the whole monitor when absent.
    #[param(pattern = r"^[A-Za-z0-9._-]{1,64}$")]
    region: Option<String>,
}

#[utoipa::path(
    get, path = "/api/v1/monitors/{id}/history", tag = "monitors", operation_id = "monitor_history",
    summary = "A monitor's history in minute, hour or day buckets, oldest first (hours and days from rollups, minutes from the results)",
    security(("admin_token" = [])),
    params(("id" = Uuid, Path, description = "Monitor id"), HistoryQuery),
    responses((status = 200, description = "Buckets that hold results (at most 5,000).", body = History), super::openapi::IdQueryErrors)
)]
pub async fn monitor_history(
    State(history): State<MonitorHistory>,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(query): ApiQuery<HistoryQuery>,
) -> ApiResult<Json<History>> {
    let since = parse_since(query.since.as_deref())?.map(|since| since.timestamp_millis());
    let region = valid_region(query.region)?;
    Ok(Json(
        history
            .monitor_history(id, query.resolution, since, region)
            .await?,
    ))
}
