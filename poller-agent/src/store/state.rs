//! Small durable facts about the agent (`poller_state`): delivery times and how many results
//! were dropped, so that loss is reported even across restarts.

use rusqlite::OptionalExtension;

use super::LocalStore;

const DROPPED: &str = "dropped_results";
pub const LAST_UPLOAD_AT: &str = "last_upload_at";
pub const LAST_HEARTBEAT_AT: &str = "last_heartbeat_at";

impl LocalStore {
    pub async fn state_value(&self, key: &'static str) -> anyhow::Result<Option<String>> {
        self.with_conn(move |c| {
            c.query_row(
                "SELECT value FROM poller_state WHERE key = ?1",
                [key],
                |r| r.get(0),
            )
            .optional()
        })
        .await
    }

    pub async fn set_state(&self, key: &'static str, value: String) -> anyhow::Result<()> {
        self.with_conn(move |c| {
            c.execute(
                "INSERT INTO poller_state (key, value) VALUES (?1, ?2) \
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )
            .map(|_| ())
        })
        .await
    }

    /// Results dropped over the agent's life (retention, size cap, unwritable disk).
    pub async fn dropped_results(&self) -> anyhow::Result<u64> {
        Ok(self
            .state_value(DROPPED)
            .await?
            .and_then(|v| v.parse().ok())
            .unwrap_or(0))
    }

    /// Adds to the dropped count and returns the new total.
    pub async fn add_dropped(&self, count: u64) -> anyhow::Result<u64> {
        self.with_conn(move |c| {
            c.execute(
                "INSERT INTO poller_state (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE \
                 SET value = CAST(CAST(poller_state.value AS INTEGER) + ?2 AS TEXT)",
                (DROPPED, count.to_string()),
            )?;
            c.query_row(
                "SELECT CAST(value AS INTEGER) FROM poller_state WHERE key = ?1",
                [DROPPED],
                |r| r.get::<_, i64>(0),
            )
            .map(|total| total.max(0) as u64)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn dropped_counts_add_up_and_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        assert_eq!(store.dropped_results().await.unwrap(), 0);
        assert_eq!(store.add_dropped(3).await.unwrap(), 3);
        assert_eq!(store.add_dropped(4).await.unwrap(), 7);
        drop(store);
        let store = LocalStore::open(dir.path()).unwrap();
        assert_eq!(store.dropped_results().await.unwrap(), 7);
    }
}
