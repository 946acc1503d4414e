//! Wire types shared by `central` and `poller-agent`, and the validation both sides apply.
//!
//! This crate owns the shape of every JSON document that crosses the wire and the rules for what
//! a valid monitor looks like. It does no I/O: no sockets, no files, no clocks beyond parsing.

pub mod as_code;
pub mod audit;
pub mod bounded;
pub mod channel_fields;
pub mod dependencies;
pub mod duration;
pub mod engine_meta;
pub mod error;
pub mod health;
pub mod heartbeat;
pub mod history;
pub mod icmp;
pub mod lenient;
pub mod maintenance;
pub mod monitor;
pub mod notifications;
pub mod poller_api;
pub mod redaction;
pub mod settings;
pub mod settings_api;
pub mod status_incidents;
pub mod status_pages;
pub mod status_subscribers;
pub mod tags;
pub mod target;
pub mod users;

pub use error::{ErrorBody, Rule, ValidationError};
pub use monitor::{AssignedMonitor, CheckKind, MonitorPatch, MonitorSpec, PollerMode};
