//! Cross-replica wake-ups: a long poll waiting on one replica wakes when another replica
//! changes its poller's assignments, alerting on the lease holder when another replica
//! marks monitors due (results it stored), and placement there when one queues pollers. On PostgreSQL every replica listens for the versions the
//! database announces and hands them to the in-process notification that long polls wait on;
//! on SQLite there is one process, and that notification is all there is. It wakes; it never
//! decides what a poller gets (that is `service::assignments`).

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
                Wakeup::AlertingDue => app.wakes.alerting.notify_one(),
                // Pollers queued for placement on some replica: placed now if this one leads.
                Wakeup::PlacementDue => app.wakes.placement.notify_one(),
                // Announcements made while nobody listened are gone: one read catches up.
                Wakeup::Listening => {
                    while let Err(e) = app.refresh_assignment_version().await {
                        tracing::warn!("cannot read the assignment version: {e:#}; retrying");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
            }
        }
    });
}
