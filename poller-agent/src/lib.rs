//! The poller agent: an outbound-only remote poller.
//!
//! Data flows one way: `engine` (scheduler) → `checks` → `store` (the durable queue) →
//! `uplink` (uploads to central). `agent` wires them together; `health` serves the local
//! `/healthz`, `/readyz` and `/metrics`; `handover` keeps one agent per data directory and
//! lets a running one hand over to its successor.

pub mod agent;
pub mod checks;
pub mod config;
pub mod engine;
pub mod handover;
pub mod health;
pub mod housekeeping;
pub mod metrics;
pub mod store;
pub mod uplink;

pub use agent::run;
pub use config::AgentConfig;
