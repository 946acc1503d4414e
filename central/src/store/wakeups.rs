//! Hearing what other central replicas wrote: PostgreSQL's LISTEN/NOTIFY on the channel the
//! `assignment notify` migration's trigger announces new assignment versions on, on the one
//! `due::mark_due` announces monitors marked for alerting on, and on the one
//! `placement_due` announces pollers queued for placement on, and on the one `commands`
//! announces operators' commands issued and acknowledged on. It only reports what it hears;
//! what to wake is the caller's business.

use std::time::Duration;

use sqlx::postgres::PgListener;

use super::Store;

const CHANNEL: &str = "central_assignment_version";
/// Announced (empty) by every transaction that marks monitors due for alerting.
pub(super) const DUE_CHANNEL: &str = "central_alerting_due";
const RECONNECT_PAUSE: Duration = Duration::from_secs(1);

/// What the listener heard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wakeup {
    /// A transaction committed this assignment version.
    Version(i64),
    /// A transaction marked monitors due for alerting (`store::due`).
    AlertingDue,
    /// A transaction queued pollers for placement (`store::placement_due`).
    PlacementDue,
    /// A transaction issued commands to this poller (`store::commands`).
    CommandIssued(String),
    /// A transaction stored a command's acknowledgement.
    CommandDone,
    /// The notification connection is (back) up. Announcements sent while it was down are
    /// lost, so the caller should read the current version once.
    Listening,
}

/// A dedicated connection that listens for new assignment versions, reconnecting by itself.
pub struct VersionListener {
    url: String,
    listener: Option<PgListener>,
}

impl Store {
    /// A listener for versions written by any replica; `None` on SQLite, where every writer is
    /// this process.
    pub fn listen_for_versions(&self) -> Option<VersionListener> {
        self.backend.writes_concurrently().then(|| VersionListener {
            url: self.url.clone(),
            listener: None,
        })
    }
}

impl VersionListener {
    /// Waits for the next thing worth knowing. Never fails: a broken connection is reopened
    /// (once a second until it works), and the reopening is reported as `Listening`.
    pub async fn next(&mut self) -> Wakeup {
        loop {
            let Some(listener) = self.listener.as_mut() else {
                match self.connect().await {
                    Ok(listener) => {
                        self.listener = Some(listener);
                        return Wakeup::Listening;
                    }
                    Err(e) => {
                        tracing::warn!("cannot listen for assignment changes: {e:#}; retrying");
                        tokio::time::sleep(RECONNECT_PAUSE).await;
                        continue;
                    }
                }
            };
            match listener.try_recv().await {
                Ok(Some(notification)) if notification.channel() == DUE_CHANNEL => {
                    return Wakeup::AlertingDue
                }
                Ok(Some(notification))
                    if notification.channel() == super::placement_due::PLACEMENT_CHANNEL =>
                {
                    return Wakeup::PlacementDue
                }
                Ok(Some(notification))
                    if notification.channel() == super::commands::COMMANDS_CHANNEL =>
                {
                    match notification.payload().split_once(':') {
                        Some(("issued", poller)) => {
                            return Wakeup::CommandIssued(poller.to_string())
                        }
                        Some(("done", _)) => return Wakeup::CommandDone,
                        _ => tracing::warn!(
                            payload = notification.payload(),
                            "ignored a malformed command notification"
                        ),
                    }
                }
                Ok(Some(notification)) => match notification.payload().parse() {
                    Ok(version) => return Wakeup::Version(version),
                    Err(_) => tracing::warn!(
                        payload = notification.payload(),
                        "ignored a malformed assignment-version notification"
                    ),
                },
                // The connection dropped (`None`) or failed: reopen it ourselves, so that the
                // reopening is reported and followed by a re-read.
                Ok(None) => {
                    tracing::warn!("lost the assignment-change listener connection; reopening");
                    self.listener = None;
                }
                Err(e) => {
                    tracing::warn!("the assignment-change listener failed: {e}; reopening");
                    self.listener = None;
                    tokio::time::sleep(RECONNECT_PAUSE).await;
                }
            }
        }
    }

    async fn connect(&self) -> sqlx::Result<PgListener> {
        let mut listener = PgListener::connect(&self.url).await?;
        listener
            .listen_all([
                CHANNEL,
                DUE_CHANNEL,
                super::placement_due::PLACEMENT_CHANNEL,
                super::commands::COMMANDS_CHANNEL,
            ])
            .await?;
        Ok(listener)
    }
}
