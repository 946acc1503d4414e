//! Across replicas: hands what the database announces (`store::Wakeup`) to this replica's
//! waiters (`cluster`: versions, wakes, doorbells). On SQLite there is one process and
//! nothing to listen to. Cost: one step per announcement.

use std::sync::Arc;
use std::time::Duration;

use crate::service::App;
use crate::store::Wakeup;

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
