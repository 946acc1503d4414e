//! Dependencies of `health-json` monitors as operators read them: one monitor's (with the
//! warnings of its documents, the change history and latency buckets), every canonical
//! dependency with the monitors that report it, and the aliases that group reported names.
//! Ingest records them (`ingest::batch` with `rules::diff`); this module only reads
//! and manages aliases. Must not: write SQL or decide what a change is (`rules`).

pub mod notices;
pub mod rules;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::Value;
use shared_proto::dependencies::{
    CanonicalDependency, Dependency, DependencyAlias, DependencyChange, DependencyChangeKind,
    DependencyLatency, DependencyLatencyBucket, DependencyList, DependencyReporter,
    DependencyState, DependencyWarning, LatencyResolution, MonitorDependencies, NewDependencyAlias,
};
use shared_proto::ValidationError;
use uuid::Uuid;

use super::clock::Clock;
use super::{time_of, App};
use crate::service::error::{ServiceError, ServiceResult};
use crate::store::{AliasInsert, AliasRow, DependencyRow, Resolution, Store};

/// The changes one monitor's answer holds.
const HISTORY_LIMIT: u32 = 100;
/// The reports `GET /api/v1/dependencies` reads at most.
const LIST_LIMIT: u32 = 10_000;
/// The most aliases central keeps (each is joined into every dependency answer).
pub const MAX_ALIASES: usize = 10_000;

fn region_of(region: &str) -> Option<String> {
    (!region.is_empty()).then(|| region.to_string())
}

fn json_of(text: &Option<String>) -> Option<Value> {
    text.as_deref().and_then(|t| serde_json::from_str(t).ok())
}

fn alias_of(row: AliasRow) -> DependencyAlias {
    DependencyAlias {
        alias: row.alias,
        canonical: row.canonical,
        created_at: time_of(row.created_at),
    }
}

/// What monitors report they depend on: each monitor's dependencies and their history, the fleet's list, latency, and the aliases that merge names.
#[derive(Clone)]
pub struct Dependencies {
    store: Arc<Store>,
    clock: Clock,
}

impl App {
    /// The dependencies service, on this central's parts.
    pub fn dependencies(&self) -> Dependencies {
        Dependencies {
            store: self.store.clone(),
            clock: self.clock.clone(),
        }
    }
}

impl axum::extract::FromRef<std::sync::Arc<App>> for Dependencies {
    fn from_ref(app: &std::sync::Arc<App>) -> Self {
        app.dependencies()
    }
}

impl Dependencies {
    fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }
    /// `GET /api/v1/monitors/{id}/dependencies`.
    pub async fn monitor_dependencies(&self, id: Uuid) -> ServiceResult<MonitorDependencies> {
        super::monitor_exists(&self.store, id).await?;
        let monitor_id = id.to_string();
        let rows = self.store.monitor_dependencies(&monitor_id).await?;
        let sources = self.store.dependency_sources(&monitor_id).await?;
        // Latencies change with every document: they are read from each location's newest
        // result, not kept in the rows.
        let result_ids: Vec<String> = sources.iter().map(|s| s.result_id.clone()).collect();
        let metas = self.store.result_metas(&result_ids).await?;
        let mut latencies: HashMap<(String, String), f64> = HashMap::new();
        let mut reported_at: HashMap<String, i64> = HashMap::new();
        let mut warnings = Vec::new();
        for source in &sources {
            reported_at.insert(source.region.clone(), source.reported_at);
            let meta = metas
                .get(&source.result_id)
                .and_then(|m| serde_json::from_str::<Value>(m).ok());
            if let Some(report) = meta.as_ref().and_then(rules::report_of) {
                for item in report.items {
                    if let Some(latency) = item.latency_ms {
                        latencies.insert((source.region.clone(), item.name), latency);
                    }
                }
            }
            let texts: Vec<String> = source
                .warnings
                .as_deref()
                .and_then(|w| serde_json::from_str(w).ok())
                .unwrap_or_default();
            warnings.extend(texts.into_iter().map(|warning| DependencyWarning {
                region: region_of(&source.region),
                warning,
            }));
        }
        let dependencies = rows
            .into_iter()
            .map(|(row, canonical)| Dependency {
                latency_ms: latencies
                    .get(&(row.region.clone(), row.name.clone()))
                    .copied(),
                reported_at: time_of(
                    reported_at
                        .get(&row.region)
                        .copied()
                        .unwrap_or(row.changed_at),
                ),
                canonical,
                state: row.state,
                contact: json_of(&row.contact),
                check_details: json_of(&row.details),
                last_change_at: time_of(row.changed_at),
                region: region_of(&row.region),
                error: row.error,
                name: row.name,
            })
            .collect();
        let history = self
            .store
            .dependency_events(&monitor_id, HISTORY_LIMIT)
            .await?
            .into_iter()
            .map(|event| DependencyChange {
                kind: match event.kind.as_str() {
                    "appeared" => DependencyChangeKind::Appeared,
                    "error" => DependencyChangeKind::Error,
                    "gone" => DependencyChangeKind::Gone,
                    _ => DependencyChangeKind::Changed,
                },
                state: event.state,
                region: region_of(&event.region),
                at: time_of(event.at),
                error: event.error,
                name: event.name,
            })
            .collect();
        Ok(MonitorDependencies {
            monitor_id,
            dependencies,
            warnings,
            history,
        })
    }

    /// `GET /api/v1/monitors/{id}/dependencies/latency`: one dependency's latency buckets.
    pub async fn dependency_latency(
        &self,
        id: Uuid,
        name: String,
        region: Option<String>,
        resolution: LatencyResolution,
        since: Option<i64>,
    ) -> ServiceResult<DependencyLatency> {
        super::monitor_exists(&self.store, id).await?;
        let (bucket, span) = match resolution {
            LatencyResolution::Hour => (Resolution::Hour, 86_400_000),
            LatencyResolution::Day => (Resolution::Day, 30 * 86_400_000),
        };
        let since = since.unwrap_or_else(|| self.now_ms() - span);
        let rows = self
            .store
            .dependency_latency(
                &id.to_string(),
                region.as_deref().unwrap_or(""),
                &name,
                bucket,
                since,
            )
            .await?;
        Ok(DependencyLatency {
            name,
            region,
            resolution,
            buckets: rows
                .into_iter()
                .map(|row| DependencyLatencyBucket {
                    start: time_of(row.bucket_start),
                    count: row.count.max(0) as u64,
                    mean_ms: row.sum_ms / row.count.max(1) as f64,
                    min_ms: row.min_ms,
                    max_ms: row.max_ms,
                })
                .collect(),
        })
    }

    /// `GET /api/v1/dependencies`: each canonical dependency, unhealthy ones first.
    pub async fn all_dependencies(&self) -> ServiceResult<DependencyList> {
        let rows = self.store.all_dependencies(LIST_LIMIT + 1).await?;
        let truncated = rows.len() > LIST_LIMIT as usize;
        let mut grouped: BTreeMap<String, Vec<DependencyReporter>> = BTreeMap::new();
        for named in rows.into_iter().take(LIST_LIMIT as usize) {
            let DependencyRow {
                monitor_id,
                region,
                name,
                state,
                error,
                changed_at,
                ..
            } = named.row;
            grouped
                .entry(named.canonical)
                .or_default()
                .push(DependencyReporter {
                    monitor_id,
                    monitor_name: named.monitor_name,
                    region: region_of(&region),
                    name,
                    state,
                    error,
                    last_change_at: time_of(changed_at),
                });
        }
        let mut dependencies: Vec<CanonicalDependency> = grouped
            .into_iter()
            .map(|(canonical, reporters)| group(canonical, reporters))
            .collect();
        // Stable: by name within each state.
        dependencies.sort_by_key(|d| d.state);
        Ok(DependencyList {
            dependencies,
            truncated,
        })
    }

    /// After an edit of monitor `id`: forgets the dependencies that no location of it reports
    /// any more (every one when it no longer reads a health document, a dropped region's
    /// otherwise), so that no page shows a state nobody reports.
    pub(crate) async fn forget_unreported_dependencies(&self, id: Uuid) -> ServiceResult<()> {
        self.store
            .forget_unreported_dependencies(&id.to_string())
            .await?;
        Ok(())
    }

    /// `GET /api/v1/dependency-aliases`.
    pub async fn dependency_aliases(&self) -> ServiceResult<Vec<DependencyAlias>> {
        Ok(self
            .store
            .dependency_aliases()
            .await?
            .into_iter()
            .map(alias_of)
            .collect())
    }

    /// `POST /api/v1/dependency-aliases`: one level only, so that a name resolves in one
    /// step and no chain or cycle can form.
    pub async fn create_dependency_alias(
        &self,
        new: NewDependencyAlias,
    ) -> ServiceResult<DependencyAlias> {
        new.validate()?;
        let row = AliasRow {
            alias: new.alias,
            canonical: new.canonical,
            created_at: self.now_ms(),
        };
        match self
            .store
            .insert_dependency_alias(&row, MAX_ALIASES as u64)
            .await?
        {
            AliasInsert::Stored => {}
            AliasInsert::CanonicalIsAlias => {
                return Err(ValidationError::combination(
                    "canonical",
                    format!(
                        "`{}` is itself an alias; name the dependency it stands for",
                        row.canonical
                    ),
                )
                .into())
            }
            AliasInsert::AliasIsCanonical => {
                return Err(ValidationError::combination(
                    "alias",
                    format!(
                        "`{}` is the canonical name of other aliases; it cannot be an alias too",
                        row.alias
                    ),
                )
                .into())
            }
            AliasInsert::Full => {
                return Err(ServiceError::Conflict(format!(
                    "central keeps at most {MAX_ALIASES} aliases; delete some first"
                )))
            }
            AliasInsert::Exists => {
                return Err(ServiceError::Conflict(format!(
                    "an alias `{}` exists; delete it first to point it elsewhere",
                    row.alias
                )))
            }
        }
        Ok(alias_of(row))
    }

    /// `GET /api/v1/dependency-aliases/{alias}`.
    pub async fn dependency_alias(&self, alias: &str) -> ServiceResult<DependencyAlias> {
        self.store
            .dependency_alias(alias)
            .await?
            .map(alias_of)
            .ok_or_else(|| ServiceError::NotFound(format!("no alias `{alias}`")))
    }

    /// `DELETE /api/v1/dependency-aliases/{alias}`.
    pub async fn delete_dependency_alias(&self, alias: &str) -> ServiceResult<()> {
        if self.store.delete_dependency_alias(alias).await? {
            Ok(())
        } else {
            Err(ServiceError::NotFound(format!("no alias `{alias}`")))
        }
    }
}

/// A canonical dependency from its reporters: unhealthy when any says so, else healthy when
/// any says so, else skipped.
fn group(canonical: String, reporters: Vec<DependencyReporter>) -> CanonicalDependency {
    let count = |state| reporters.iter().filter(|r| r.state == state).count() as u32;
    let (unhealthy, healthy, skipped) = (
        count(DependencyState::Unhealthy),
        count(DependencyState::Healthy),
        count(DependencyState::Skipped),
    );
    let state = if unhealthy > 0 {
        DependencyState::Unhealthy
    } else if healthy > 0 {
        DependencyState::Healthy
    } else {
        DependencyState::Skipped
    };
    CanonicalDependency {
        canonical,
        state,
        unhealthy,
        healthy,
        skipped,
        reporters,
    }
}
