//! When closed hours of the rollups are folded into their days (`store::rollup_folding` does
//! the fold): an hour is closed `FOLD_GRACE` after it ends, so that uploads of its results in
//! flight land in it before it is folded. A later one is still counted exactly once (ingest adds
//! it to the day itself), it only costs that upload a second statement. Owns the timing only;
//! the duty that calls it is `duties::upkeep::fold_rollups`.

use std::time::Duration;

use super::retention::{PAUSE_BETWEEN_STEPS, PRUNE_STEP};
use super::App;
use crate::store::{HourKey, Resolution};

/// How long after an hour ends it is folded. Agents upload every 10 s, or once 50 results are
/// queued; an agent cut off for longer uploads late, which stays exact (see above).
pub const FOLD_GRACE_MS: i64 = 5 * 60_000;

/// The first instant at which hours up to (excluding) `hour` may be folded.
fn closes_at(hour: i64) -> i64 {
    hour + FOLD_GRACE_MS
}

/// The start of the oldest hour not closed at `now`: every hour before it is closed.
pub fn open_from(now: i64) -> i64 {
    Resolution::Hour.bucket_of(now - FOLD_GRACE_MS)
}

/// How long from `now` until the next hour closes.
pub fn next_close_in(now: i64) -> Duration {
    let next = closes_at(open_from(now) + Resolution::Hour.width_ms());
    Duration::from_millis(u64::try_from(next - now).unwrap_or(0))
}

impl App {
    /// Folds every closed hour not folded yet into its day, in steps; returns how many hour
    /// rows it folded. Cost: the hour rows of the hours closed since the last fold (one per
    /// monitor and location that reported in them), plus any late result's hour row.
    pub async fn fold_closed_hours(&self) -> anyhow::Result<u64> {
        let before = open_from(self.now_ms());
        let mut after = HourKey::start();
        let mut folded = 0;
        loop {
            // Steps of pruning's size: each holds the one writer on SQLite briefly.
            let (rows, last) = self.store.fold_hours(before, &after, PRUNE_STEP).await?;
            folded += rows;
            if rows < u64::from(PRUNE_STEP) {
                return Ok(folded);
            }
            after = last;
            tokio::time::sleep(PAUSE_BETWEEN_STEPS).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: i64 = 3_600_000;

    #[test]
    fn an_hour_closes_its_grace_after_it_ends() {
        let ten = 10 * HOUR;
        assert_eq!(
            open_from(ten + FOLD_GRACE_MS - 1),
            ten - HOUR,
            "hour 9 still open"
        );
        assert_eq!(open_from(ten + FOLD_GRACE_MS), ten, "hour 9 closed");
        assert_eq!(
            next_close_in(ten),
            Duration::from_millis(FOLD_GRACE_MS as u64)
        );
        assert_eq!(
            next_close_in(ten + FOLD_GRACE_MS),
            Duration::from_millis(HOUR as u64)
        );
    }
}
