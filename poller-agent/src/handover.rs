//! One agent per data directory, and the hand-over from a running agent to its successor.
//!
//! An agent holds an exclusive lock on `agent.lock` in its data directory for as long as it
//! runs (`DataDirLock`): two agents on one queue would run every check twice and spend each
//! other's refresh tokens. A second agent started on the same directory (an upgrade started
//! beside the running one) waits for the lock before it listens or opens the queue. The
//! running one hands over on `SIGUSR1` (`docker kill --signal USR1`): it stops starting
//! checks, lets the checks under way finish and queues their results, uploads what its queue
//! holds (for at most `FINAL_UPLOAD`: whatever is left stays in the queue its successor
//! uploads), and exits; the kernel drops its lock as the process ends, and the successor
//! starts with the same credentials, cached assignments and per-agent schedule, so each
//! monitor's next check comes at its usual time. The order itself lives in `agent::run`.
//!
//! There is no HTTP form of the hand-over: the local listener serves `/metrics` to whatever
//! scrapes it, unauthenticated, and a request that stops the agent does not belong there.
//! Owns the lock file; must not touch the queue.

use std::fs::{File, TryLockError};
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use tokio::sync::watch;

/// The lock file's name in the data directory.
pub const LOCK_FILE: &str = "agent.lock";

/// How long a handing-over agent spends uploading its queue before it exits anyway.
pub const FINAL_UPLOAD: Duration = Duration::from_secs(10);

/// How long a handing-over agent waits for its checks under way: longer than any check runs
/// (`runner::hard_limit` cancels them well before), so only a stuck agent reaches it.
pub const CHECKS_UNDER_WAY: Duration = Duration::from_secs(120);

/// The data directory's lock, held until dropped (or the process ends, by the kernel).
#[derive(Debug)]
pub struct DataDirLock {
    _file: File,
}

impl DataDirLock {
    /// Takes the lock, waiting for an agent that holds it to hand over or stop. `None` if
    /// asked to stop while waiting.
    pub async fn take(
        data_dir: &Path,
        mut stop: watch::Receiver<bool>,
    ) -> anyhow::Result<Option<DataDirLock>> {
        std::fs::create_dir_all(data_dir).with_context(|| {
            format!(
                "cannot create the data directory {} (POLLER_DATA_DIR)",
                data_dir.display()
            )
        })?;
        let path = data_dir.join(LOCK_FILE);
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .with_context(|| format!("cannot open the lock file {}", path.display()))?;
        match file.try_lock() {
            Ok(()) => return Ok(Some(DataDirLock { _file: file })),
            Err(TryLockError::WouldBlock) => {}
            Err(TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("cannot lock {}", path.display()))
            }
        }
        tracing::warn!(
            "another agent runs on {} (POLLER_DATA_DIR); waiting for it to hand over (send it \
             SIGUSR1) or stop",
            data_dir.display()
        );
        let waiting = tokio::task::spawn_blocking(move || file.lock().map(|()| file));
        tokio::select! {
            locked = waiting => {
                let file = locked
                    .context("waiting for the data directory's lock")?
                    .with_context(|| format!("cannot lock {}", path.display()))?;
                tracing::info!("the previous agent is gone; this one takes over");
                Ok(Some(DataDirLock { _file: file }))
            }
            // The blocked thread ends with the process.
            _ = stop.changed() => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A second taker waits while the first holds the lock, and gets it once the first is
    /// dropped; a taker asked to stop while waiting gets nothing.
    #[tokio::test]
    async fn the_second_agent_waits_for_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let (_stop_tx, stop_rx) = watch::channel(false);
        let first = DataDirLock::take(dir.path(), stop_rx.clone())
            .await
            .unwrap()
            .expect("the first takes it at once");
        let path = dir.path().to_path_buf();
        let second = tokio::spawn(async move { DataDirLock::take(&path, stop_rx).await });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!second.is_finished(), "the second must wait for the first");
        drop(first);
        let second = tokio::time::timeout(Duration::from_secs(5), second)
            .await
            .expect("the second takes it once the first is gone")
            .unwrap()
            .unwrap();
        assert!(second.is_some());

        let (stop_tx, stop_rx) = watch::channel(false);
        let path = dir.path().to_path_buf();
        let third = tokio::spawn(async move { DataDirLock::take(&path, stop_rx).await });
        tokio::time::sleep(Duration::from_millis(100)).await;
        stop_tx.send(true).unwrap();
        let third = tokio::time::timeout(Duration::from_secs(5), third)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert!(third.is_none(), "asked to stop while waiting");
    }
}
