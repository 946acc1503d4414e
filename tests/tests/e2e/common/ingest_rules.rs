//! Ingest rules for the tests that drive central's store directly
//! (`service::ingest::batch::store_standing`): the simplest that still
//! move verdicts and keep due rows, so a test sees the store's own work and not the service's
//! rules.

use std::collections::HashSet;

use central::service::ingest::batch::IngestRules;
use central::store::{
    DependencyDiff, DependencyReport, DependencyRow, StoredVerdict, TimeCredit, TimePoint,
};

/// Every verdict confirmed at once; a result keeps its monitor from changing for two minutes
/// (two intervals of 60 s).
pub struct ConfirmedAtOnce;

impl IngestRules for ConfirmedAtOnce {
    fn advance(&self, _: &str, state: StoredVerdict, result: &str) -> StoredVerdict {
        let run_length = match state.status.as_deref() {
            Some(status) if status == result => state.run_length + 1,
            _ => 1,
        };
        StoredVerdict {
            confirmed: Some(result.into()),
            status: Some(result.into()),
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
