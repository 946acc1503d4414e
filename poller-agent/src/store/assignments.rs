//! The last assignment set received from central, so that the agent can poll at once after a
//! restart even while central is unreachable.

use rusqlite::OptionalExtension;
use shared_proto::AssignedMonitor;

use super::LocalStore;

#[derive(Debug, Clone, PartialEq)]
pub struct CachedAssignments {
    pub version: i64,
    pub monitors: Vec<AssignedMonitor>,
}

impl LocalStore {
    pub async fn cached_assignments(&self) -> anyhow::Result<Option<CachedAssignments>> {
        let row: Option<(i64, String)> = self
            .with_conn(|c| {
                c.query_row(
                    "SELECT assignment_version, snapshot_json FROM poller_assignments WHERE id = 1",
                    [],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()
            })
            .await?;
        row.map(|(version, json)| {
            Ok(CachedAssignments {
                version,
                monitors: serde_json::from_str(&json)?,
            })
        })
        .transpose()
    }

    pub async fn save_assignments(&self, cache: &CachedAssignments) -> anyhow::Result<()> {
        let json = serde_json::to_string(&cache.monitors)?;
        let version = cache.version;
        let now = chrono::Utc::now().timestamp_millis();
        self.with_conn(move |c| {
            c.execute(
                "INSERT INTO poller_assignments (id, assignment_version, snapshot_json, updated_at) \
                 VALUES (1, ?1, ?2, ?3) ON CONFLICT (id) DO UPDATE SET \
                 assignment_version = excluded.assignment_version, \
                 snapshot_json = excluded.snapshot_json, updated_at = excluded.updated_at",
                (version, json, now),
            )
            .map(|_| ())
        })
        .await
    }
}
