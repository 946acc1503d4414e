//! Notices pollers going offline, coming back, or settling after their return, and places
//! the monitors their change can move; places too what requests queued (a poller registered,
//! edited, deleted, with new capabilities), woken at once by them. A lease holder's duty
//! (`duties`). It owns no state beyond the last set of online pollers it saw. Monitors on a poller that went or came are marked for alerting to look at
//! (`look_again_on_pollers`).
//!
//! Cost per tick or wake: one read of the pollers and of the placement queue; per change, the
//! monitors `store::placement_due` names for the pollers that changed. Every monitor is placed
//! only when this replica takes the lease (nothing was placed while nobody held it).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use crate::service::App;
use crate::store::Reach;
use crate::telemetry::error_chain;

/// How the online pollers changed between two looks (each list sorted by id).
#[derive(Debug, Default, PartialEq, Eq)]
struct Changes {
    /// Online before, not now: they can only lose monitors.
    went: Vec<String>,
    /// Online now and not before, or settled now and not before: they may take monitors.
    came_or_settled: Vec<String>,
    /// Online in one look and not the other: their monitors' status changes.
    went_or_came: Vec<String>,
}

fn changes(last: &[(String, bool)], now: &[(String, bool)]) -> Changes {
    let ids = |list: &[(String, bool)]| -> BTreeSet<String> {
        list.iter().map(|(id, _)| id.clone()).collect()
    };
    let (before, after) = (ids(last), ids(now));
    let settled_now = now
        .iter()
        .filter(|(id, settled)| *settled && !last.iter().any(|(l, s)| l == id && *s))
        .map(|(id, _)| id.clone());
    let came_or_settled: BTreeSet<String> = after
        .difference(&before)
        .cloned()
        .chain(settled_now)
        .collect();
    Changes {
        went: before.difference(&after).cloned().collect(),
        came_or_settled: came_or_settled.into_iter().collect(),
        went_or_came: before.symmetric_difference(&after).cloned().collect(),
    }
}

pub async fn run(app: Arc<App>) {
    let period =
        (app.limits.offline_after / 10).clamp(Duration::from_millis(200), Duration::from_secs(5));
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // `None`: this holding starts from a fresh look, and places every monitor at once.
    let mut last_online: Option<Vec<(String, bool)>> = None;
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            () = app.cluster.wakes.placement.notified() => {}
        }
        step(&app, &mut last_online).await;
    }
}

/// One look as the lease holder: records poller status changes, places what changed or was
/// queued, and marks for alerting the monitors of pollers that went or came. `last_online`
/// is the previous look's online pollers, `None` on taking the lease (every monitor is then
/// placed, and alerting looks again at those it last saw stale); left as it was when a step
/// fails, so that the next one sees the same change again.
pub async fn step(app: &App, last_online: &mut Option<Vec<(String, bool)>>) {
    if let Err(e) = app.record_status_changes().await {
        tracing::warn!(
            "recording poller status changes failed: {}",
            error_chain(&e)
        );
    }
    let checked = app.now_ms();
    let online = match app.online_pollers().await {
        Ok(online) => online,
        Err(e) => {
            tracing::warn!("liveness check failed: {}", error_chain(&e));
            return;
        }
    };
    let changed = last_online.as_ref().map(|last| changes(last, &online));
    let placed = match &changed {
        None => app.reconcile().await,
        Some(changed) => {
            let queued = async {
                app.queue_placement(&changed.went, Reach::Own).await?;
                app.queue_placement(&changed.came_or_settled, Reach::Could)
                    .await
            };
            match queued.await {
                Ok(()) => app.place_queued().await.map(|_| ()),
                Err(e) => Err(e),
            }
        }
    };
    if let Err(e) = placed {
        tracing::warn!("placement failed: {}", error_chain(&e));
        return;
    }
    app.cluster.set_placement_checked_at(checked);
    // After placement's look, so that alerting sees what it moved and tells what could not
    // move at once.
    let looked = match &changed {
        Some(changed) => app.look_again_on_pollers(&changed.went_or_came).await,
        None => app.look_again_at_stale().await,
    };
    if let Err(e) = looked {
        tracing::warn!("marking monitors for alerting failed: {}", error_chain(&e));
        return;
    }
    *last_online = Some(online);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn look(entries: &[(&str, bool)]) -> Vec<(String, bool)> {
        entries.iter().map(|(id, s)| (id.to_string(), *s)).collect()
    }

    #[test]
    fn gone_pollers_lose_and_returning_or_settled_ones_may_take() {
        let last = look(&[("a", true), ("b", false), ("c", true)]);
        let now = look(&[("b", true), ("c", true), ("d", false)]);
        assert_eq!(
            changes(&last, &now),
            Changes {
                went: vec!["a".into()],
                came_or_settled: vec!["b".into(), "d".into()],
                went_or_came: vec!["a".into(), "d".into()],
            }
        );
        assert_eq!(changes(&now, &now), Changes::default());
    }
}
