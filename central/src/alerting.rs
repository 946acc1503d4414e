//! Evaluates alerting once a second on the replica that holds the duties lease
//! (`leadership`): `service::alerts` decides, the outbox carries the result to `notify`.

use std::sync::Arc;
use std::time::Duration;

use crate::leadership::Leadership;
use crate::service::App;

const PERIOD: Duration = Duration::from_secs(1);

pub async fn run(app: Arc<App>, leadership: Leadership) {
    let mut ticker = tokio::time::interval(PERIOD);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        if !leadership.is_leader() {
            continue;
        }
        if let Err(e) = app.evaluate_alerts().await {
            tracing::warn!("evaluating alerts failed: {e}");
        }
    }
}
