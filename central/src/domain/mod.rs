//! Central's domain types: what services decide on, typed (enums, lists, maps), with none of
//! the store's encodings (JSON in a text column, integer flags, status texts). The store makes
//! them from its rows and writes them back; services read and build them. Must not: import
//! the store, a service or anything of HTTP (this module is a leaf every layer may use).

pub mod alert_state;
pub mod channel;
pub mod command;
pub mod incident;
pub mod monitor;
pub mod page_notice;
pub mod poller;
pub mod queued;
pub mod status_page;
pub mod token;
pub mod user;
pub mod window;

pub use alert_state::AlertState;
pub use channel::{Channel, Recipient};
pub use command::Command;
pub use incident::{Incident, IncidentUpdate};
pub use monitor::Monitor;
pub use page_notice::PageNotice;
pub use poller::Poller;
pub use queued::QueuedNotification;
pub use status_page::{PageLogo, StatusPage};
pub use token::{RefreshToken, RegistrationToken, UnusedRevocation};
pub use user::{ApiKey, User};
pub use window::MaintenanceWindow;

/// The statuses the domain types carry, for code outside central (its tests) that builds them.
pub use shared_proto::settings_api::{LocationStatus, MonitorStatus};
