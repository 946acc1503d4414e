//! Checks users linked to the identity provider between their sign-ins
//! (`service::sso::recheck`): the lease holder, every quarter of `CENTRAL_OIDC_RECHECK` (between
//! one second and a minute), checks the links due. Without single sign-on, or with the check
//! off, it returns at once. Cost per round: the links due (an indexed read), one request to
//! the provider each.

use std::sync::Arc;

use tokio::time::MissedTickBehavior;

use crate::service::App;
use crate::telemetry::error_chain;

pub async fn run(app: Arc<App>) {
    let Some(every) = app.sso_recheck_every() else {
        return;
    };
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        if let Err(e) = app.recheck_sso_links().await {
            tracing::error!(
                "checking linked users with the identity provider failed: {}",
                error_chain(&*e)
            );
        }
    }
}
