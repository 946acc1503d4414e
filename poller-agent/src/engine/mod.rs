//! The polling core: when each monitor runs (`scheduler`), on whose clock (`clock`), and the
//! loop that starts due checks and hands their results to the queue (`runner`).
//!
//! The scheduler is pure data: it takes `now` as an argument and never sleeps, so every rule
//! in it is tested deterministically. Only `runner` touches tasks and real time.

pub mod clock;
pub mod runner;
pub mod scheduler;

pub use clock::{Clock, ManualClock, SystemClock};
pub use scheduler::Scheduler;
