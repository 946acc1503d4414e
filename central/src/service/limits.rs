//! What the configuration bounds, read once at start: how long things may take or are kept,
//! and how often pollers and clients may ask. Plain values and the small counters that enforce
//! the per-poller rates; the rules that read them stay in their own modules. Touches no store.

use std::time::Duration;

use super::{audit, history, millis, pollers};
use crate::config::ServeArgs;

pub struct Limits {
    /// A poller silent for this long is offline (`CENTRAL_OFFLINE_AFTER`).
    pub offline_after: Duration,
    /// How long a returning poller must stay online before monitors move back to it.
    pub failback_settle: Duration,
    /// `CENTRAL_MAX_COMMAND_WAIT`: the longest an operator's command waits for answers.
    pub max_command_wait: Duration,
    /// Per-address rate of `register`/`token` calls; 0 for none.
    pub auth_rate_limit: f64,
    /// How long raw results and each kind of rollup are kept.
    pub retention: history::Retention,
    /// The audit log's retention and the bound on failed sign-ins it records.
    pub(crate) audit: audit::AuditLimits,
    /// What one poller may cost: heartbeats, capability changes.
    pub(crate) poller: pollers::PollerLimits,
}

impl Limits {
    pub fn from_args(args: &ServeArgs) -> Limits {
        Limits {
            offline_after: args.offline_after,
            failback_settle: args.failback_settle,
            max_command_wait: args.max_command_wait,
            auth_rate_limit: args.auth_rate_limit,
            retention: history::Retention {
                results_ms: millis(args.results_retention),
                minutes_ms: millis(args.minute_rollups_retention),
                hours_ms: millis(args.hour_rollups_retention),
                days_ms: millis(args.day_rollups_retention),
            },
            audit: audit::AuditLimits::new(millis(args.audit_retention)),
            poller: pollers::PollerLimits::new(args.poller_heartbeats_per_minute),
        }
    }
}
