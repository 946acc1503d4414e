//! Rate-limit budgets: a good API citizen slows down before a target has to refuse it. When a
//! target states (in its rate-limit headers) that fewer than `reserve` of its requests are left,
//! the monitor's next checks are spread over the time until the budget resets.
//!
//! Pure arithmetic on what the target said; the caps on target-chosen numbers are the
//! caller's (`core` caps the wait at the monitor's `backoff_max_ms`, or 5 minutes when it sets none).

use std::time::Duration;

use crate::checks::RateBudget;

/// Whether the budget is low: nothing left, or less than `reserve` of the limit (a `reserve`
/// of 0 turns the rule off).
pub fn is_low(budget: &RateBudget, reserve: f64) -> bool {
    if reserve <= 0.0 {
        return false;
    }
    budget.remaining == 0
        || budget
            .limit
            .is_some_and(|limit| limit > 0 && (budget.remaining as f64) < reserve * limit as f64)
}

/// How long to wait before the next check so that the requests left last until the reset:
/// the time to the reset shared among them (all of it when none is left). `None` when the
/// budget is not low, or the target did not say when it resets.
pub fn spacing(budget: &RateBudget, reserve: f64) -> Option<Duration> {
    if !is_low(budget, reserve) {
        return None;
    }
    let reset = budget.reset?;
    let shares = u32::try_from(budget.remaining.saturating_add(1)).unwrap_or(u32::MAX);
    Some(reset / shares)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(limit: Option<u64>, remaining: u64, reset_s: Option<u64>) -> RateBudget {
        RateBudget {
            limit,
            remaining,
            reset: reset_s.map(Duration::from_secs),
        }
    }

    #[test]
    fn low_below_the_reserve_or_at_zero() {
        assert!(!is_low(&budget(Some(100), 50, Some(60)), 0.1));
        assert!(
            !is_low(&budget(Some(100), 10, Some(60)), 0.1),
            "10 % is not below 10 %"
        );
        assert!(is_low(&budget(Some(100), 9, Some(60)), 0.1));
        assert!(is_low(&budget(None, 0, Some(60)), 0.1));
        assert!(
            !is_low(&budget(None, 3, Some(60)), 0.1),
            "no limit: only zero is low"
        );
        assert!(
            !is_low(&budget(Some(100), 0, Some(60)), 0.0),
            "0 disables the rule"
        );
        assert!(
            !is_low(&budget(Some(0), 5, None), 0.5),
            "a zero limit says nothing"
        );
    }

    #[test]
    fn what_is_left_is_spread_until_the_reset() {
        assert_eq!(
            spacing(&budget(Some(100), 0, Some(60)), 0.1),
            Some(Duration::from_secs(60))
        );
        assert_eq!(
            spacing(&budget(Some(100), 5, Some(60)), 0.1),
            Some(Duration::from_secs(10))
        );
        assert_eq!(spacing(&budget(Some(100), 5, None), 0.1), None);
        assert_eq!(spacing(&budget(Some(100), 50, Some(60)), 0.1), None);
        assert_eq!(
            spacing(&budget(None, u64::MAX - 1, Some(60)), 1.0),
            None,
            "huge counts do not overflow"
        );
        assert!(spacing(&budget(Some(u64::MAX), u64::MAX / 2, Some(60)), 1.0).is_some());
    }
}
