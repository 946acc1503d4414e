//! Test builds only: the ingest rules the store's unit tests run with, the service's own rules
//! in their simplest setting (every verdict confirmed at once, a one-minute monitor), with
//! which they store results (`ingest::batch::store_standing`).

use std::collections::HashSet;

use super::ingest::batch::IngestRules;
use super::status::Verdict;
use super::uptime::Timeline;
use crate::store::{
    DependencyDiff, DependencyReport, DependencyRow, StoredVerdict, TimeCredit, TimePoint,
};

/// Confirms every verdict at once (thresholds of 1), and lets every result stand for at
/// most 2 minutes (a one-minute monitor), for store tests.
pub struct NewestDecides;

pub const STORE_TEST_TIMELINE: Timeline = Timeline {
    cap_ms: 120_000,
    quorum: None,
    pause: None,
};

impl IngestRules for NewestDecides {
    fn advance(&self, _: &str, state: StoredVerdict, result: Verdict) -> StoredVerdict {
        let run = match state.status {
            Some(status) if status == result => state.run_length + 1,
            _ => 1,
        };
        StoredVerdict {
            confirmed: Some(result),
            status: Some(result),
            run_length: run,
        }
    }

    fn unchanged_until(&self, _: &str, ts: i64) -> i64 {
        super::status::unchanged_until(ts, 60_000)
    }

    fn interval_ms(&self, _: &str) -> i64 {
        60_000
    }

    fn lookback_ms(&self, _: &str) -> i64 {
        STORE_TEST_TIMELINE.cap_ms
    }

    fn credit_time(
        &self,
        _: &str,
        _: Option<&str>,
        history: &[&TimePoint],
        new: &HashSet<&str>,
        old_until: Option<i64>,
        new_until: i64,
    ) -> Vec<TimeCredit> {
        STORE_TEST_TIMELINE.credit(history, new, old_until, new_until)
    }

    fn dependency_diff(
        &self,
        monitor_id: &str,
        region: &str,
        at: i64,
        before: &[DependencyRow],
        report: &DependencyReport,
    ) -> DependencyDiff {
        super::dependencies::rules::diff(monitor_id, region, at, before, report, false)
    }
}
