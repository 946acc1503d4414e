//! The end-to-end suite as one test binary (one link, one process, tests of every feature run
//! side by side): a module per feature, each starting the real `central` and `poller-agent`
//! binaries through the `e2e` library. Run one feature with
//! `cargo test -p e2e --test e2e uptime::` or one test by (part of) its name.
//!
//! Tests that need PostgreSQL (replicas, the load balancer) are ignored in the default run;
//! `E2E_DATABASE=postgres cargo test -p e2e --test e2e -- --include-ignored` runs them.

mod common;

mod alertmanager;
mod as_code;
mod assignments;
mod attack;
mod attack_surface;
mod bad_input;
mod channel_kinds;
mod commands;
mod delivery;
mod dependencies;
mod durability;
mod failover;
mod heartbeats;
mod history;
mod hostile_targets;
mod https;
mod icmp;
mod images;
mod ingestion;
mod lifecycle;
mod load_balancer;
mod locations;
mod maintenance;
mod migrations;
mod notifications;
mod openapi;
mod parents;
mod placement;
mod poller_limits;
mod poller_standing;
mod replicas;
mod restore;
mod shape;
mod sso;
mod ssrf;
mod status_incidents;
mod status_pages;
mod status_subscribers;
mod store_conflicts;
mod store_reads;
mod tags;
mod upgrade;
mod uptime;
mod users;
mod versions;
mod walking_skeleton;
mod web_ui;
