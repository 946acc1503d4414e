//! An incident on a status page as central keeps it: its title, where it stands, the monitors
//! it affects, whether visitors see it, and its timeline of updates. The store makes them
//! from its rows (`store::status_incidents`); `service::status_pages::incidents` decides on
//! them. Must not: hold a rule.

use shared_proto::status_incidents::IncidentStatus;
use uuid::Uuid;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incident {
    pub id: String,
    pub page_id: String,
    pub title: String,
    /// Its newest update's.
    pub status: IncidentStatus,
    pub monitor_ids: Vec<Uuid>,
    pub created_at: i64,
    /// Grows with every change: what a change is checked against.
    pub updated_at: i64,
    pub resolved_at: Option<i64>,
    /// Whether visitors see it.
    pub published: bool,
    /// The monitor whose going down opened it, when the page opened it itself.
    pub opened_for: Option<String>,
}

/// One update of an incident's timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncidentUpdate {
    pub id: String,
    pub incident_id: String,
    pub status: IncidentStatus,
    pub message: String,
    pub created_at: i64,
}
