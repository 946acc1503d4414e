//! What alerting remembers of a monitor between looks: the status it last saw and since when,
//! what it last told and when, and its recent changes (for flapping). The store keeps it
//! (`store::alert_states`); `service::alerts` decides on it. Must not: hold a rule.

use shared_proto::settings_api::MonitorStatus;

/// What alerting remembers of a monitor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertState {
    pub status: MonitorStatus,
    pub since: i64,
    pub notified_status: Option<MonitorStatus>,
    pub notified_at: Option<i64>,
    /// When the monitor went from working to not or back, recently (within the flap window).
    pub changes: Vec<i64>,
}
