//! Ingest rules for the tests that drive central's store directly
//! (`service::ingest::batch::store_standing`): the simplest that still
//! move verdicts and keep due rows, so a test sees the store's own work and not the service's
//! rules.

use std::collections::HashSet;

use central::service::ingest::batch::IngestRules;
use central::service::status::Verdict;
use central::store::{
    DependencyDiff, DependencyReport, DependencyRow, StoredVerdict, TimeCredit, TimePoint,
};

/// Every verdict confirmed at once; a result keeps its monitor from changing for two minutes
/// (two intervals of 60 s).
pub struct ConfirmedAtOnce;

impl IngestRules for ConfirmedAtOnce {
    fn advance(&self, _: &str, state: StoredVerdict, result: Verdict) -> StoredVerdict {
        let run_length = match state.status {
            Some(status) if status == result => state.run_length + 1,
            _ => 1,
        };
        StoredVerdict {
            confirmed: Some(result),
            status: Some(result),
            run_length,
        }
    }
    fn unchanged_until(&self, _: &str, ts: i64) -> i64 {
        ts + 120_000
    }
    fn interval_ms(&self, _: &str) -> i64 {
        60_000
    }
    fn lookback_ms(&self, _: &str) -> i64 {
        120_000
    }
    fn credit_time(
        &self,
        _: &str,
        _: Option<&str>,
        _: &[&TimePoint],
        _: &HashSet<&str>,
        _: Option<i64>,
        _: i64,
    ) -> Vec<TimeCredit> {
        Vec::new()
    }
    fn dependency_diff(
        &self,
        _: &str,
        _: &str,
        _: i64,
        _: &[DependencyRow],
        _: &DependencyReport,
    ) -> DependencyDiff {
        DependencyDiff::default()
    }
}
