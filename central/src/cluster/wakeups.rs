//! Wake-ups: of this replica's background work by what it writes itself (`Wakes`), and across
//! replicas (`spawn`): a long poll waiting on one replica wakes when another replica changes
//! its poller's assignments, alerting on the lease holder when another replica marks monitors
//! due (results it stored), placement there when one queues pollers, and commands' doorbells
//! (`bells`) when one issues or stores the answer to a command. On PostgreSQL every
//! replica listens for what the database announces and hands it to the in-process
//! notifications; on SQLite there is one process, and those are all there is. It wakes; it
//! never decides what a poller gets (that is `service::assignments`).

use std::sync::Arc;
use std::time::Duration;

use crate::service::App;
use crate::store::Wakeup;

/// Wake-ups of background work by what this replica writes, so that it runs on a change
/// rather than at its next tick (each loop keeps its tick for what other replicas write). A
/// wake given while nobody waits is kept for the next wait, never lost.
#[derive(Default)]
pub struct Wakes {
    /// Monitors were marked due (`store::due`): results, edits, moves.
    pub alerting: tokio::sync::Notify,
    /// Notifications were queued in the outbox.
    pub delivery: tokio::sync::Notify,
    /// Pollers were queued for placement (`store::placement_due`).
    pub placement: tokio::sync::Notify,
}

/// Starts listening, if the database can announce versions.
pub fn spawn(app: Arc<App>) {
    let Some(mut listener) = app.store.listen_for_versions() else {
        return;
    };
    tokio::spawn(async move {
        loop {
            match listener.next().await {
                Wakeup::Version(version) => {
                    if let Err(e) = app.learn_version(version).await {
                        tracing::warn!("cannot read whom version {version} concerns: {e:#}; every long poll looks");
                    }
                }
                // Monitors marked due on some replica: alerting looks now if this one leads.
                Wakeup::AlertingDue => app.cluster.wakes.alerting.notify_one(),
                // Pollers queued for placement on some replica: placed now if this one leads.
                Wakeup::PlacementDue => app.cluster.wakes.placement.notify_one(),
                // A command for a poller whose long poll may be waiting here.
                Wakeup::CommandIssued(poller) => app.cluster.bells.ring(&poller),
                Wakeup::CommandDone => app.cluster.bells.ring_answered(),
                // Announcements made while nobody listened are gone: one read catches up.
                Wakeup::Listening => {
                    app.cluster.bells.ring_everyone();
                    app.cluster.bells.ring_answered();
                    while let Err(e) = app.refresh_assignment_version().await {
                        tracing::warn!("cannot read the assignment version: {e:#}; retrying");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
            }
        }
    });
}
