//! Heartbeat (push) monitors' own rows: the ping token's hash, when the job last started and
//! pinged, and the ring of its newest pings (`heartbeats`, `heartbeat_pings`). The results a
//! ping makes go through ingest (`Store::ingest`) like any poller's. Must not: decide what a ping
//! means (that is `service::push`).

use std::collections::HashMap;

use super::Store;

/// One ping as kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PingRow {
    pub at: i64,
    pub kind: String,
    pub source: String,
    pub method: String,
    pub body: String,
}

/// What a heartbeat monitor's status reads beside its results.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PushState {
    /// When its job last pinged `/start`.
    pub started_at: Option<i64>,
    pub last_ping_at: Option<i64>,
    /// When its schedule last changed (its clock starts again then).
    pub schedule_at: Option<i64>,
}

impl Store {
    /// Gives a heartbeat monitor a new ping token (by its SHA-256); the old one stops working.
    pub async fn set_ping_token(&self, monitor_id: &str, token_sha256: &str) -> anyhow::Result<()> {
        let _guard = self.write_lock().await;
        sqlx::query(
            "INSERT INTO heartbeats (monitor_id, token_sha256) VALUES ($1, $2) \
             ON CONFLICT (monitor_id) DO UPDATE SET token_sha256 = excluded.token_sha256",
        )
        .bind(monitor_id)
        .bind(token_sha256)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// Notes that a heartbeat monitor's schedule changed at `at` (its clock starts again) and
    /// marks it due.
    pub async fn set_schedule_at(&self, monitor_id: &str, at: i64) -> anyhow::Result<()> {
        let _guard = self.write_lock().await;
        let mut tx = self.writer.begin().await?;
        sqlx::query("UPDATE heartbeats SET schedule_at = $2 WHERE monitor_id = $1")
            .bind(monitor_id)
            .bind(at)
            .execute(&mut *tx)
            .await?;
        let ids = serde_json::to_string(&[monitor_id])?;
        super::due::mark_due(&mut tx, self.backend(), &ids, at).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The monitor a ping token belongs to: one read through `heartbeats_token`.
    pub async fn monitor_of_ping_token(
        &self,
        token_sha256: &str,
    ) -> anyhow::Result<Option<String>> {
        let row: Option<(String,)> =
            sqlx::query_as("SELECT monitor_id FROM heartbeats WHERE token_sha256 = $1")
                .bind(token_sha256)
                .fetch_optional(&self.pool)
                .await?;
        Ok(row.map(|(id,)| id))
    }

    /// Keeps a ping in its monitor's ring of `kept` slots (the oldest gives way) and notes it
    /// as the newest; a `/start` also notes when the job started and marks the monitor due
    /// (its deadline moved closer). Cost: three rows.
    pub async fn record_ping(
        &self,
        monitor_id: &str,
        ping: &PingRow,
        start: bool,
        kept: i64,
    ) -> anyhow::Result<()> {
        let _guard = self.write_lock().await;
        let mut tx = self.writer.begin().await?;
        let counted: Option<(i64,)> = sqlx::query_as(
            "UPDATE heartbeats SET pings = pings + 1, last_ping_at = $2, \
             started_at = CASE WHEN $3 = 1 THEN $2 ELSE started_at END \
             WHERE monitor_id = $1 RETURNING pings",
        )
        .bind(monitor_id)
        .bind(ping.at)
        .bind(i64::from(start))
        .fetch_optional(&mut *tx)
        .await?;
        let Some((pings,)) = counted else {
            // Deleted meanwhile: nothing to keep.
            return Ok(());
        };
        sqlx::query(
            "INSERT INTO heartbeat_pings (monitor_id, slot, at, kind, source, method, body) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (monitor_id, slot) DO UPDATE SET \
             at = excluded.at, kind = excluded.kind, source = excluded.source, \
             method = excluded.method, body = excluded.body",
        )
        .bind(monitor_id)
        .bind((pings - 1).rem_euclid(kept.max(1)))
        .bind(ping.at)
        .bind(&ping.kind)
        .bind(&ping.source)
        .bind(&ping.method)
        .bind(&ping.body)
        .execute(&mut *tx)
        .await?;
        if start {
            let ids = serde_json::to_string(&[monitor_id])?;
            super::due::mark_due(&mut tx, self.backend(), &ids, ping.at).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// A heartbeat monitor's kept pings, newest first.
    pub async fn pings_of(&self, monitor_id: &str) -> anyhow::Result<Vec<PingRow>> {
        let rows: Vec<(i64, String, String, String, String)> = sqlx::query_as(
            "SELECT at, kind, source, method, body FROM heartbeat_pings WHERE monitor_id = $1 \
             ORDER BY at DESC, slot DESC",
        )
        .bind(monitor_id)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(at, kind, source, method, body)| PingRow {
                at,
                kind,
                source,
                method,
                body,
            })
            .collect())
    }

    /// The push state of each of these monitors that has one (heartbeat monitors).
    pub async fn push_states(&self, ids: &[String]) -> anyhow::Result<HashMap<String, PushState>> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let listed = super::dialect::listed(self.backend(), "monitor_id", "$1");
        type Row = (String, Option<i64>, Option<i64>, Option<i64>);
        let rows: Vec<Row> = sqlx::query_as(&format!(
            "SELECT monitor_id, started_at, last_ping_at, schedule_at FROM heartbeats \
             WHERE {listed}"
        ))
        .bind(serde_json::to_string(ids)?)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(id, started_at, last_ping_at, schedule_at)| {
                (
                    id,
                    PushState {
                        started_at,
                        last_ping_at,
                        schedule_at,
                    },
                )
            })
            .collect())
    }
}
