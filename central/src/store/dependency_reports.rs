//! Recording what `health-json` results report of their dependencies, inside ingest's
//! transaction: each location's documents in check-time order, late ones moving nothing, a
//! dependency's row written only when what it says changes, its latency bucket with each
//! document. The store reads the rows (`DependencyLedger::read`), the service moves them by
//! each document (`apply`, with `service::dependencies::rules::diff`), the store writes what
//! moved (`write`). Cost: the rows of the batch's monitors whose results carry a document.
//! Must not read for the API (`store::dependencies`) or decide what counts as a change.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use super::dependencies::{
    reads_documents, DependencyDiff, DependencyRow, LatencyBucketRow, NewDependencyEvent,
    ROW_COLUMNS,
};
use super::dialect::listed;
use super::packed::{packed, unpack};
use super::results::NewResult;
use shared_proto::dependencies::DependencyState;

use super::statements::{Arg, Statements};
use super::{Backend, Resolution};

/// A monitor's location: its id and region (`''` for a monitor checked from one place).
type Location = (String, String);

/// The dependencies of the locations a batch's documents report, as recorded, and what the
/// documents move them to (`apply`), until written (`write`).
pub struct DependencyLedger<'a> {
    /// The batch's documents of locations that read them, in check-time order: each adds to
    /// its latency buckets.
    documents: Vec<&'a NewResult>,
    /// Those newer than their location's newest recorded document, in check-time order: each
    /// moves its location's rows.
    moving: Vec<&'a NewResult>,
    /// Each location's rows as the documents applied so far left them.
    current: HashMap<Location, Vec<DependencyRow>>,
    upserts: BTreeMap<(Location, String), DependencyRow>,
    deletes: BTreeSet<(Location, String)>,
    events: Vec<(Location, NewDependencyEvent)>,
    sources: BTreeMap<Location, &'a NewResult>,
}

/// The location a result was checked from.
fn location_of(result: &NewResult) -> Location {
    (
        result.monitor_id.clone(),
        result.region.clone().unwrap_or_default(),
    )
}

impl<'a> DependencyLedger<'a> {
    /// The documents that move their location's rows, in check-time order: each location's
    /// newer than its newest recorded one (one uploaded late moves nothing).
    pub fn moving(&self) -> Vec<&'a NewResult> {
        self.moving.clone()
    }

    /// The rows of `result`'s location as the documents applied so far left them.
    pub fn before(&self, result: &NewResult) -> &[DependencyRow] {
        self.current
            .get(&location_of(result))
            .map_or(&[], Vec::as_slice)
    }

    /// Moves `result`'s location by `diff` (what its document changes in `before`).
    pub fn apply(&mut self, result: &'a NewResult, diff: DependencyDiff) {
        let location = location_of(result);
        let before = self.current.entry(location.clone()).or_default();
        for name in &diff.gone {
            before.retain(|row| &row.name != name);
            self.upserts.remove(&(location.clone(), name.clone()));
            self.deletes.insert((location.clone(), name.clone()));
        }
        for row in diff.upserts {
            before.retain(|r| r.name != row.name);
            before.push(row.clone());
            self.deletes.remove(&(location.clone(), row.name.clone()));
            self.upserts
                .insert((location.clone(), row.name.clone()), row);
        }
        self.events
            .extend(diff.events.into_iter().map(|e| (location.clone(), e)));
        self.sources.insert(location, result);
    }

    /// Reads the recorded rows of the locations whose documents are among `stored` (a
    /// batch's new results); `None` when there is no document to record.
    pub(super) async fn read(
        tx: &mut impl Statements,
        backend: Backend,
        stored: &[&'a NewResult],
    ) -> anyhow::Result<Option<Self>> {
        let mut documents: Vec<&NewResult> = stored
            .iter()
            .copied()
            .filter(|r| r.dependencies.is_some())
            .collect();
        if documents.is_empty() {
            return Ok(None);
        }
        documents.sort_by(|a, b| a.ts.cmp(&b.ts).then_with(|| a.id.cmp(&b.id)));
        let mut monitors: Vec<&str> = documents.iter().map(|r| r.monitor_id.as_str()).collect();
        monitors.sort_unstable();
        monitors.dedup();
        let ids = serde_json::to_string(&monitors)?;
        // Only what a monitor's current locations report, while it reads health documents: a
        // document checked before an edit that dropped its region or its format, uploaded after
        // it, must not bring back what the edit forgot (`Store::forget_unreported_dependencies`).
        #[derive(serde::Deserialize)]
        struct Reporting {
            monitor_id: String,
            region: Option<String>,
        }
        // Read packed (`packed`), as the reads below: one value, not a row each.
        let sql = packed(
            backend,
            &[("monitor_id", "rm.id"), ("region", "rl.region")],
            &format!(
                "FROM monitors rm LEFT JOIN monitor_locations rl ON rl.monitor_id = rm.id \
             WHERE {} AND {}",
                listed(backend, "rm.id", "$1"),
                reads_documents(backend)
            ),
            "monitor_id, region",
        );
        let reporting: HashSet<Location> =
            unpack::<Reporting>(&tx.read_text(&sql, &[Arg::from(&ids)]).await?)?
                .into_iter()
                .map(|r| (r.monitor_id, r.region.unwrap_or_default()))
                .collect();
        documents.retain(|r| {
            reporting.contains(&(r.monitor_id.clone(), r.region.clone().unwrap_or_default()))
        });
        if documents.is_empty() {
            return Ok(None);
        }
        // Two replicas recording the same location at once take turns on its source row; for a
        // location's first document there is none yet to lock, so a placeholder is made first
        // (older than any document; replaced below in this transaction): the second replica's
        // insert waits for the first's commit, and both would otherwise record it `appeared`.
        if backend.writes_concurrently() {
            let locations: BTreeSet<Location> = documents
                .iter()
                .map(|r| (r.monitor_id.clone(), r.region.clone().unwrap_or_default()))
                .collect();
            for (monitor, region) in &locations {
                tx.execute(
                    "INSERT INTO dependency_sources (monitor_id, region, reported_at, result_id) \
                 VALUES ($1, $2, $3, '') ON CONFLICT (monitor_id, region) DO NOTHING",
                    &[monitor.into(), region.into(), i64::MIN.into()],
                )
                .await?;
            }
        }
        let lock = super::dialect::for_update(backend, "monitor_id, region");
        #[derive(serde::Deserialize)]
        struct Source {
            monitor_id: String,
            region: String,
            reported_at: i64,
        }
        let sql = packed(
            backend,
            &[
                ("monitor_id", "monitor_id"),
                ("region", "region"),
                ("reported_at", "reported_at"),
            ],
            &format!(
                "FROM dependency_sources WHERE {}{lock}",
                listed(backend, "monitor_id", "$1")
            ),
            "monitor_id, region",
        );
        let mut newest: HashMap<Location, i64> =
            unpack::<Source>(&tx.read_text(&sql, &[Arg::from(&ids)]).await?)?
                .into_iter()
                .map(|s| ((s.monitor_id, s.region), s.reported_at))
                .collect();
        let sql = packed(
            backend,
            &ROW_COLUMNS
                .split(',')
                .map(str::trim)
                .map(|column| (column.trim_start_matches("d."), column))
                .collect::<Vec<_>>(),
            &format!(
                "FROM dependencies d WHERE {}",
                listed(backend, "d.monitor_id", "$1")
            ),
            "monitor_id, region, name",
        );
        let mut current: HashMap<Location, Vec<DependencyRow>> = HashMap::new();
        for row in unpack::<DependencyRow>(&tx.read_text(&sql, &[Arg::from(&ids)]).await?)? {
            current
                .entry((row.monitor_id.clone(), row.region.clone()))
                .or_default()
                .push(row);
        }

        let mut moving = Vec::new();
        for &result in &documents {
            let location = location_of(result);
            if newest.get(&location).is_some_and(|at| *at >= result.ts) {
                continue;
            }
            newest.insert(location, result.ts);
            moving.push(result);
        }
        Ok(Some(DependencyLedger {
            documents,
            moving,
            current,
            upserts: BTreeMap::new(),
            deletes: BTreeSet::new(),
            events: Vec::new(),
            sources: BTreeMap::new(),
        }))
    }

    /// Writes what the documents moved and their latency buckets. Returns whether a change
    /// awaits a notice (announced to every replica on PostgreSQL, as marks for alerting are:
    /// the lease holder's alerting sends them).
    pub(super) async fn write(
        self,
        tx: &mut impl Statements,
        backend: Backend,
    ) -> anyhow::Result<bool> {
        let DependencyLedger {
            documents,
            upserts,
            deletes,
            events,
            sources,
            ..
        } = self;
        let mut latencies: BTreeMap<(Location, String, Resolution, i64), LatencyBucketRow> =
            BTreeMap::new();
        for result in documents {
            let report = result.dependencies.as_ref().expect("only documents");
            let location = location_of(result);
            // Latency is history, added to like the rollups: a late document counts too.
            for item in &report.items {
                let Some(latency) = item.latency_ms else {
                    continue;
                };
                for resolution in [Resolution::Hour, Resolution::Day] {
                    let key = (
                        location.clone(),
                        item.name.clone(),
                        resolution,
                        resolution.bucket_of(result.ts),
                    );
                    let bucket = latencies.entry(key).or_insert(LatencyBucketRow {
                        bucket_start: resolution.bucket_of(result.ts),
                        count: 0,
                        sum_ms: 0.0,
                        min_ms: latency,
                        max_ms: latency,
                    });
                    bucket.count += 1;
                    bucket.sum_ms += latency;
                    bucket.min_ms = bucket.min_ms.min(latency);
                    bucket.max_ms = bucket.max_ms.max(latency);
                }
            }
        }

        for (location, name) in deletes {
            tx.execute(
                "DELETE FROM dependencies WHERE monitor_id = $1 AND region = $2 AND name = $3",
                &[(&location.0).into(), (&location.1).into(), (&name).into()],
            )
            .await?;
        }
        for row in upserts.into_values() {
            tx.execute(
                "INSERT INTO dependencies \
             (monitor_id, region, name, state, error, contact, details, changed_at, told) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
             ON CONFLICT (monitor_id, region, name) DO UPDATE SET state = excluded.state, \
             error = excluded.error, contact = excluded.contact, details = excluded.details, \
             changed_at = excluded.changed_at, told = excluded.told",
                &[
                    (&row.monitor_id).into(),
                    (&row.region).into(),
                    (&row.name).into(),
                    row.state.as_str().into(),
                    row.error.as_ref().into(),
                    row.contact.as_ref().into(),
                    row.details.as_ref().into(),
                    row.changed_at.into(),
                    i64::from(row.told).into(),
                ],
            )
            .await?;
        }
        let mut noticed = false;
        for (location, event) in events {
            let id = uuid::Uuid::now_v7().to_string();
            tx.execute(
                "INSERT INTO dependency_events \
             (id, monitor_id, region, name, at, kind, state, error, previous, notice) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                &[
                    (&id).into(),
                    (&location.0).into(),
                    (&location.1).into(),
                    (&event.name).into(),
                    event.at.into(),
                    event.kind.into(),
                    event.state.as_str().into(),
                    event.error.as_ref().into(),
                    event.previous.map(DependencyState::as_str).into(),
                    event.notice.into(),
                ],
            )
            .await?;
            noticed |= event.notice.is_some();
        }
        for (location, result) in sources {
            let warnings = result
                .dependencies
                .as_ref()
                .filter(|r| !r.warnings.is_empty())
                .map(|r| serde_json::to_string(&r.warnings))
                .transpose()?;
            tx.execute(
            "INSERT INTO dependency_sources (monitor_id, region, reported_at, result_id, warnings) \
             VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (monitor_id, region) DO UPDATE SET reported_at = excluded.reported_at, \
             result_id = excluded.result_id, warnings = excluded.warnings",
            &[
                (&location.0).into(),
                (&location.1).into(),
                result.ts.into(),
                (&result.id).into(),
                warnings.as_ref().into(),
            ],
        )
        .await?;
        }
        for ((location, name, resolution, _), bucket) in latencies {
            tx.execute(
                "INSERT INTO dependency_latency \
             (monitor_id, region, name, resolution, bucket_start, count, sum_ms, min_ms, max_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
             ON CONFLICT (monitor_id, region, name, resolution, bucket_start) DO UPDATE SET \
             count = dependency_latency.count + excluded.count, \
             sum_ms = dependency_latency.sum_ms + excluded.sum_ms, \
             min_ms = CASE WHEN excluded.min_ms < dependency_latency.min_ms \
                 THEN excluded.min_ms ELSE dependency_latency.min_ms END, \
             max_ms = CASE WHEN excluded.max_ms > dependency_latency.max_ms \
                 THEN excluded.max_ms ELSE dependency_latency.max_ms END",
                &[
                    (&location.0).into(),
                    (&location.1).into(),
                    (&name).into(),
                    resolution.as_str().into(),
                    bucket.bucket_start.into(),
                    bucket.count.into(),
                    bucket.sum_ms.into(),
                    bucket.min_ms.into(),
                    bucket.max_ms.into(),
                ],
            )
            .await?;
        }
        if noticed {
            super::due::notify_due(tx, backend).await?;
        }
        Ok(noticed)
    }
}
