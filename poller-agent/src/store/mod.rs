//! The agent's durable state in one SQLite file (`POLLER_DATA_DIR/poller.db`): the result
//! queue, the assignment cache and the credentials. It owns every SQL statement of the agent
//! and knows nothing of HTTP or scheduling.
//!
//! rusqlite is synchronous; each call runs on tokio's blocking pool so that a slow disk never
//! stalls the checks.

mod assignments;
mod credentials;
mod queue;
mod state;

pub use assignments::CachedAssignments;
pub use credentials::Credentials;
pub use queue::{QueueStats, QueuedResult};
pub use state::{LAST_HEARTBEAT_AT, LAST_UPLOAD_AT};

use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use rusqlite::Connection;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS poller_queue (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    result_id     TEXT NOT NULL UNIQUE,
    monitor_id    TEXT NOT NULL,
    ts            TEXT NOT NULL,
    ts_ms         INTEGER NOT NULL,
    status        TEXT NOT NULL,
    latency_ms    INTEGER,
    msg           TEXT NOT NULL,
    meta          TEXT NOT NULL,
    attempts      INTEGER NOT NULL DEFAULT 0,
    next_retry_at INTEGER NOT NULL DEFAULT 0,
    refused       TEXT
);
CREATE INDEX IF NOT EXISTS poller_queue_ts ON poller_queue (ts_ms);
CREATE TABLE IF NOT EXISTS poller_assignments (
    id                 INTEGER PRIMARY KEY CHECK (id = 1),
    assignment_version INTEGER NOT NULL,
    snapshot_json      TEXT NOT NULL,
    updated_at         INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS poller_state (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
-- Delivered results kept for a restored central (`POLLER_REDELIVERY_WINDOW`). Appended in
-- delivery order, so the row id orders them by `delivered_at`; no index, so that keeping one
-- costs one append (reads walk from either end, a bounded number of rows).
CREATE TABLE IF NOT EXISTS poller_delivered (
    result_id    TEXT NOT NULL,
    monitor_id   TEXT NOT NULL,
    ts           TEXT NOT NULL,
    ts_ms        INTEGER NOT NULL,
    status       TEXT NOT NULL,
    latency_ms   INTEGER,
    msg          TEXT NOT NULL,
    meta         TEXT NOT NULL,
    delivered_at INTEGER NOT NULL
);
";

/// Columns added after the first release, added to a queue an older agent made. An older agent
/// reading a newer queue names its columns and never sees them.
fn add_missing_columns(conn: &Connection) -> rusqlite::Result<()> {
    let has_refused: bool = conn.query_row(
        "SELECT COUNT(*) > 0 FROM pragma_table_info('poller_queue') WHERE name = 'refused'",
        [],
        |r| r.get(0),
    )?;
    if !has_refused {
        conn.execute_batch("ALTER TABLE poller_queue ADD COLUMN refused TEXT")?;
    }
    Ok(())
}

/// Makes `path` (created if missing) readable and writable by the agent's user only: it holds
/// the poller's refresh token. SQLite gives its `-wal` and `-shm` files the same mode.
#[cfg(unix)]
fn keep_private(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot create the queue database {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("cannot make {} private to the agent", path.display()))
}

#[cfg(not(unix))]
fn keep_private(_: &Path) -> anyhow::Result<()> {
    Ok(())
}

/// Handle to the agent's database; cheap to clone.
#[derive(Clone)]
pub struct LocalStore {
    conn: Arc<Mutex<Connection>>,
}

impl LocalStore {
    /// Opens (creating if needed) `poller.db` in `data_dir`.
    pub fn open(data_dir: &Path) -> anyhow::Result<LocalStore> {
        std::fs::create_dir_all(data_dir).with_context(|| {
            format!(
                "cannot create the data directory {} (POLLER_DATA_DIR)",
                data_dir.display()
            )
        })?;
        let path = data_dir.join("poller.db");
        keep_private(&path)?;
        let conn = Connection::open(&path)
            .with_context(|| format!("cannot open the queue database {}", path.display()))?;
        conn.execute_batch(
            // FULL: a commit is on disk before the agent relies on it. With NORMAL, a power
            // loss may roll back the last commits: a queued result would be lost, or new
            // credentials, leaving the agent with a refresh token central has already spent.
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA busy_timeout = 5000;",
        )
        .and_then(|_| conn.execute_batch(SCHEMA))
        .and_then(|_| add_missing_columns(&conn))
        .with_context(|| {
            format!(
                "the queue database {} cannot be used. If the disk is read-only or full, fix that \
                 and restart. If the file is corrupt, move it aside and restart with a new \
                 POLLER_REGISTRATION_TOKEN: the credentials live in the same file, and the results \
                 still queued in it are lost",
                path.display()
            )
        })?;
        Ok(LocalStore {
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    /// Runs `work` with the connection on the blocking pool.
    async fn with_conn<T, F>(&self, work: F) -> anyhow::Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let conn = self.conn.clone();
        tokio::task::spawn_blocking(move || {
            let mut guard = conn.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            work(&mut guard)
        })
        .await
        .context("queue database task failed")?
        .context("queue database error")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_commit_is_on_disk_before_it_counts() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        let synchronous: i64 = store
            .with_conn(|c| c.query_row("PRAGMA synchronous", [], |r| r.get(0)))
            .await
            .unwrap();
        assert_eq!(synchronous, 2, "FULL");
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn the_credentials_file_is_the_agents_alone_whatever_the_umask() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        // A database left readable by an older agent is tightened too.
        std::fs::write(dir.path().join("poller.db"), b"").unwrap();
        std::fs::set_permissions(
            dir.path().join("poller.db"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        store
            .save_credentials(&Credentials {
                poller_id: uuid::Uuid::nil(),
                access_token: "a".into(),
                access_expires_at: chrono::Utc::now(),
                refresh_token: "pref_secret".into(),
            })
            .await
            .unwrap();
        for name in ["poller.db", "poller.db-wal"] {
            let mode = std::fs::metadata(dir.path().join(name))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o077, 0, "{name} is {mode:o}");
        }
    }
}
