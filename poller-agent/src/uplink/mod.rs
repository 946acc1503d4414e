//! Everything the agent says to central, all outbound: the authenticated client, heartbeats
//! and assignment sync (with operators' commands), result upload, and what came of commands.
//! It reads the queue; it never runs checks.

pub mod client;
pub mod commands;
pub mod redelivery;
pub mod sync;
pub mod upload;

pub use client::{CentralClient, UplinkError};

use std::time::Duration;

/// Delays between failed attempts to reach central: 2 s, 5 s, 15 s, 30 s, 60 s, 2 min, then
/// every 5 min; each with ±20 % jitter so that a fleet recovering from a central outage does
/// not return in one wave.
pub fn retry_delay(failures: u32) -> Duration {
    const STEPS: [u64; 7] = [2, 5, 15, 30, 60, 120, 300];
    let base = STEPS[(failures.max(1) as usize - 1).min(STEPS.len() - 1)];
    let jitter = rand::Rng::gen_range(&mut rand::thread_rng(), 0.8..=1.2);
    Duration::from_secs_f64(base as f64 * jitter)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_delays_follow_the_steps_within_jitter() {
        for (failures, base) in [
            (1, 2.0),
            (2, 5.0),
            (3, 15.0),
            (6, 120.0),
            (7, 300.0),
            (50, 300.0),
        ] {
            for _ in 0..50 {
                let delay = retry_delay(failures).as_secs_f64();
                assert!(
                    delay >= base * 0.8 && delay <= base * 1.2,
                    "{failures}: {delay}"
                );
            }
        }
    }
}
