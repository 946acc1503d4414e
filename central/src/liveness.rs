//! Notices pollers going offline, coming back, or settling after their return, and re-runs
//! placement when they do; only on the replica that holds the duties lease (`leadership`).
//! It owns no state beyond the last set of online pollers it saw. Monitors on a poller that
//! went or came are marked for alerting to look at (`look_again_on_pollers`). Cost per tick:
//! one read of the pollers; per change, the monitors placed on the pollers that changed (and
//! a placement pass: issue 22 moves that to the affected monitors too).

use std::sync::Arc;
use std::time::Duration;

use crate::leadership::Leadership;
use crate::service::App;

/// The pollers online in one look and not the other (each list sorted by id).
fn went_or_came(last: &[(String, bool)], now: &[(String, bool)]) -> Vec<String> {
    let ids = |list: &[(String, bool)]| -> std::collections::BTreeSet<String> {
        list.iter().map(|(id, _)| id.clone()).collect()
    };
    ids(last).symmetric_difference(&ids(now)).cloned().collect()
}

pub async fn run(app: Arc<App>, leadership: Leadership) {
    let period = (app.offline_after / 10).clamp(Duration::from_millis(200), Duration::from_secs(5));
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_online: Option<Vec<(String, bool)>> = None;
    loop {
        ticker.tick().await;
        if !leadership.is_leader() {
            // Whoever leads next starts from a fresh look, and places at once.
            last_online = None;
            continue;
        }
        if let Err(e) = app.record_status_changes().await {
            tracing::warn!("recording poller status changes failed: {e}");
        }
        let checked = crate::service::now_ms();
        match app.online_pollers().await {
            Ok(online) if last_online.as_ref() != Some(&online) => {
                if let Err(e) = app.reconcile().await {
                    tracing::warn!("placement after a liveness change failed: {e}");
                    continue;
                }
                app.set_placement_checked_at(checked);
                // After placement's look, so that alerting sees what it moved and tells what
                // could not move at once.
                let looked = match &last_online {
                    Some(last) => {
                        app.look_again_on_pollers(&went_or_came(last, &online))
                            .await
                    }
                    None => app.look_again_at_stale().await,
                };
                if let Err(e) = looked {
                    tracing::warn!("marking monitors for alerting failed: {e}");
                    continue;
                }
                last_online = Some(online);
            }
            Ok(_) => app.set_placement_checked_at(checked),
            Err(e) => tracing::warn!("liveness check failed: {e}"),
        }
    }
}
