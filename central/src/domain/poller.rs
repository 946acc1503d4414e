//! A poller as central keeps it: what it registered as (name, region, datacenter, the limit its
//! registration token set), what its newest heartbeat said (capabilities, version, queue,
//! scheduler health, the newest problem) and the liveness central last recorded. The store
//! makes one from its row (`store::pollers`); services decide on it. Must not: hold a rule
//! (whether it is online is `service::pollers::liveness`').

use shared_proto::poller_api::SchedulerHealth;
use shared_proto::settings_api::PollerStatus;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Poller {
    pub id: String,
    pub name: String,
    pub alias: Option<String>,
    pub region: Option<String>,
    pub datacenter: Option<String>,
    /// The kinds it checks, as its newest heartbeat set them (within `capability_limit`).
    pub capabilities: Vec<String>,
    /// What its registration token allowed it to advertise; `None`: anything.
    pub capability_limit: Option<Vec<String>>,
    pub version: Option<String>,
    pub enabled: bool,
    pub registration_token_id: Option<String>,
    pub created_at: i64,
    pub last_heartbeat_at: Option<i64>,
    pub last_upload_at: Option<i64>,
    pub queue_depth: i64,
    pub oldest_queued_at: Option<i64>,
    pub dropped_results: i64,
    /// Results it keeps because central refused them, as of its newest heartbeat.
    pub held_results: i64,
    pub assignment_version: Option<i64>,
    pub deleted_at: Option<i64>,
    /// Its scheduler's health from the newest heartbeat that carried one; `None` as well when
    /// an agent of another version wrote one this central does not read (it is only shown).
    pub scheduler_health: Option<SchedulerHealth>,
    /// When it last came online (registration, or a heartbeat after being offline).
    pub online_since: Option<i64>,
    /// Liveness as last recorded, and since when: a cache the next liveness pass rewrites;
    /// `None` before the first record, or when a newer replica recorded a status this central
    /// does not know.
    pub status: Option<PollerStatus>,
    pub status_since: Option<i64>,
    /// The newest problem it reported, and when.
    pub last_error: Option<String>,
    pub last_error_at: Option<i64>,
}
