//! Dependency handlers: what `health-json` monitors report of the services they depend on
//! (`service::dependencies`), and operators' aliases that group reported names.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use shared_proto::dependencies::{
    DependencyAlias, DependencyLatency, DependencyList, LatencyResolution, MonitorDependencies,
    NewDependencyAlias,
};
use utoipa::IntoParams;
use uuid::Uuid;

use super::extract::{parse_since, valid_region, ApiJson, ApiPath, ApiQuery};
use crate::error::{ApiError, ApiResult};
use crate::service::dependencies::Dependencies;

#[utoipa::path(
    get, path = "/api/v1/monitors/{id}/dependencies", tag = "dependencies",
    operation_id = "monitor_dependencies",
    summary = "A health-json monitor's dependencies, the warnings of its documents and their changes",
    security(("admin_token" = [])),
    params(("id" = Uuid, Path, description = "Monitor id")),
    responses((status = 200, description = "Empty lists for a monitor that reads no health document.", body = MonitorDependencies), super::openapi::IdErrors)
)]
pub async fn monitor_dependencies(
    State(dependencies): State<Dependencies>,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<Json<MonitorDependencies>> {
    Ok(Json(dependencies.monitor_dependencies(id).await?))
}

/// `?name=&resolution=&since=&region=`
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct LatencyQuery {
    /// The dependency, as the monitor's service reports it.
    #[param(min_length = 1, max_length = 200)]
    name: String,
    /// Bucket width: `hour` (the last day by default) or `day` (the last 30 days).
    #[param(inline)]
    resolution: LatencyResolution,
    /// Buckets from the one holding this RFC 3339 time.
    #[param(format = DateTime)]
    since: Option<String>,
    /// One location of a multi-location monitor.
    #[param(pattern = r"^[A-Za-z0-9._-]{1,64}$")]
    region: Option<String>,
}

#[utoipa::path(
    get, path = "/api/v1/monitors/{id}/dependencies/latency", tag = "dependencies",
    operation_id = "dependency_latency",
    summary = "One dependency's latency in hour or day buckets, oldest first",
    security(("admin_token" = [])),
    params(("id" = Uuid, Path, description = "Monitor id"), LatencyQuery),
    responses((status = 200, description = "Buckets that hold a latency.", body = DependencyLatency), super::openapi::IdQueryErrors)
)]
pub async fn dependency_latency(
    State(dependencies): State<Dependencies>,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(query): ApiQuery<LatencyQuery>,
) -> ApiResult<Json<DependencyLatency>> {
    let since = parse_since(query.since.as_deref())?.map(|since| since.timestamp_millis());
    let region = valid_region(query.region)?;
    if query.name.is_empty() || query.name.chars().count() > 200 {
        return Err(ApiError::bad_request(
            "invalid_query",
            "`name` is the dependency's name as reported: 1 to 200 characters",
        ));
    }
    Ok(Json(
        dependencies
            .dependency_latency(id, query.name, region, query.resolution, since)
            .await?,
    ))
}

#[utoipa::path(
    get, path = "/api/v1/dependencies", tag = "dependencies", operation_id = "list_dependencies",
    summary = "Every canonical dependency, the monitors that report it and their health",
    description = "Unhealthy ones first: which services share a failing dependency.",
    security(("admin_token" = [])),
    responses((status = 200, description = "Grouped through aliases.", body = DependencyList), super::openapi::ReadErrors)
)]
pub async fn list_dependencies(
    State(dependencies): State<Dependencies>,
) -> ApiResult<Json<DependencyList>> {
    Ok(Json(dependencies.all_dependencies().await?))
}

#[utoipa::path(
    get, path = "/api/v1/dependency-aliases", tag = "dependencies",
    operation_id = "list_dependency_aliases",
    summary = "Every alias, by alias",
    security(("admin_token" = [])),
    responses((status = 200, description = "The aliases.", body = [DependencyAlias]), super::openapi::ReadErrors)
)]
pub async fn list_aliases(
    State(dependencies): State<Dependencies>,
) -> ApiResult<Json<Vec<DependencyAlias>>> {
    Ok(Json(dependencies.dependency_aliases().await?))
}

#[utoipa::path(
    post, path = "/api/v1/dependency-aliases", tag = "dependencies",
    operation_id = "create_dependency_alias",
    summary = "Make a reported name stand for a canonical dependency",
    description = "`pg-main`, `postgres` and `db` reported by three services become one \
                   dependency. One level: a canonical name is never itself an alias.",
    security(("admin_token" = [])),
    request_body = NewDependencyAlias,
    responses((status = 201, description = "Created.", body = DependencyAlias), super::openapi::AliasCreateErrors)
)]
pub async fn create_alias(
    State(dependencies): State<Dependencies>,
    ApiJson(new): ApiJson<NewDependencyAlias>,
) -> ApiResult<(StatusCode, Json<DependencyAlias>)> {
    let alias = dependencies.create_dependency_alias(new).await?;
    Ok((StatusCode::CREATED, Json(alias)))
}

#[utoipa::path(
    get, path = "/api/v1/dependency-aliases/{alias}", tag = "dependencies",
    operation_id = "get_dependency_alias",
    summary = "One alias",
    security(("admin_token" = [])),
    params(("alias" = String, Path, description = "The alias, percent-encoded")),
    responses((status = 200, description = "The alias.", body = DependencyAlias), super::openapi::AliasErrors)
)]
pub async fn get_alias(
    State(dependencies): State<Dependencies>,
    ApiPath(alias): ApiPath<String>,
) -> ApiResult<Json<DependencyAlias>> {
    Ok(Json(dependencies.dependency_alias(&alias).await?))
}

#[utoipa::path(
    delete, path = "/api/v1/dependency-aliases/{alias}", tag = "dependencies",
    operation_id = "delete_dependency_alias",
    summary = "Delete an alias: the name stands for itself again",
    security(("admin_token" = [])),
    params(("alias" = String, Path, description = "The alias, percent-encoded")),
    responses((status = 204, description = "Deleted."), super::openapi::AliasErrors)
)]
pub async fn delete_alias(
    State(dependencies): State<Dependencies>,
    ApiPath(alias): ApiPath<String>,
) -> ApiResult<StatusCode> {
    dependencies.delete_dependency_alias(&alias).await?;
    Ok(StatusCode::NO_CONTENT)
}
