//! The polling core: when each monitor runs and how targets (and the agent) are protected from
//! failure storms.
//!
//! `core` holds every decision as a pure state machine over `scheduler` (due times),
//! `breaker`, `backoff`, `rolling` (success rate, auto-pause), `budget` (rate-limit budgets),
//! `adaptive` (stretched intervals), `host_limit` (per-host slots) and
//! `request_key` (coalescing). It takes `now` as an argument and never sleeps, so every rule is
//! tested deterministically. Only `runner` touches tasks, real time and the queue.

pub mod adaptive;
pub mod backoff;
pub mod breaker;
pub mod budget;
pub mod clock;
pub mod core;
pub mod host_limit;
pub mod request_key;
pub mod rolling;
pub mod runner;
pub mod scheduler;
pub mod unreachable;

pub use clock::{Clock, ManualClock, SystemClock};
pub use core::{Dispatch, Engine, EngineConfig, Finished};

#[cfg(test)]
mod core_command_tests;
#[cfg(test)]
mod core_model_tests;
#[cfg(test)]
mod core_report_tests;
#[cfg(test)]
mod core_target_tests;
#[cfg(test)]
mod core_tests;
#[cfg(test)]
mod core_unreachable_tests;
