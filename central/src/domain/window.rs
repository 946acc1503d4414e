//! A maintenance window as central keeps it: when it runs (once, or by a recurrence rule in a
//! time zone), what it covers (monitors, pollers, regions, tags) and what it changes (notices,
//! checks). The store makes one from its row (`store::maintenance`); services decide on it.
//! Must not: hold a rule (when it is under way and what it covers is
//! `service::maintenance`').

use shared_proto::maintenance::{MaintenanceNotify, Recurrence};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaintenanceWindow {
    pub id: String,
    pub name: String,
    pub starts_at: i64,
    /// The end of a window that happens once.
    pub ends_at: Option<i64>,
    pub recurrence: Option<Recurrence>,
    /// When its last occurrence ends; `None` while it recurs without end.
    pub until_at: Option<i64>,
    pub monitor_ids: Vec<String>,
    pub poller_ids: Vec<String>,
    pub regions: Vec<String>,
    pub tags: Vec<String>,
    pub notify: MaintenanceNotify,
    /// Whether the monitors it names by id or tag go unchecked while it is under way.
    pub stop_checks: bool,
    pub created_at: i64,
    pub updated_at: i64,
}
