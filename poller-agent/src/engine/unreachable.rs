//! Addresses that take no connection. When a check finds its target's address unreachable
//! (the connection refused, or not answered within the timeout: nothing of the target was
//! reached), the other monitors of that address would fail alike, so they do not each try:
//! the address is probed once per interval by whichever monitor is due first, and the others
//! due meanwhile follow that probe's answer, a `down` saying so (issue 68: a dead host costs
//! one connection attempt per interval, not one per monitor). The first probe that reaches
//! the address clears it, and every monitor that followed runs at once, so all are seen up
//! within an interval of its return. An operator's `check` always tries for real.
//!
//! Owns only the marks; the engine decides when a monitor runs and records outcomes. Cost:
//! O(1) per dispatch and per completion; memory, one entry per unreachable address and its
//! followers.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use uuid::Uuid;

use crate::checks::CheckOutcome;

/// An unreachable address: what its last probe found, and who followed it.
#[derive(Debug)]
struct Mark {
    /// The probe's failure, as its result said it.
    msg: String,
    /// When the last probe ended.
    probed_at: Instant,
    /// The probe's timeout: only a monitor that would give up as soon follows it (one with
    /// a longer timeout might have connected, and tries itself).
    timeout: Duration,
    /// A probe under way since then, when it started: others keep following meanwhile.
    probing_since: Option<Instant>,
    /// Monitors that followed a probe instead of checking: run at once when it clears.
    followers: HashSet<Uuid>,
}

/// What a monitor due on an address does.
#[derive(Debug, PartialEq)]
pub enum Due {
    /// Check for real (the address is not marked, or this is its probe).
    Check,
    /// Follow the last probe: the address refused it `ago`.
    Follow { msg: String, ago: Duration },
}

#[derive(Debug, Default)]
pub struct Unreachable {
    marks: HashMap<String, Mark>,
}

impl Unreachable {
    /// Monitor `id`, of `interval` and `timeout`, is due on `address` now.
    pub fn due(
        &mut self,
        address: &str,
        id: Uuid,
        interval: Duration,
        timeout: Duration,
        now: Instant,
    ) -> Due {
        let Some(mark) = self.marks.get_mut(address) else {
            return Due::Check;
        };
        if timeout > mark.timeout {
            return Due::Check;
        }
        let probing = mark
            .probing_since
            .is_some_and(|since| now.saturating_duration_since(since) < interval);
        if !probing && now.saturating_duration_since(mark.probed_at) >= interval {
            // This one probes; a probe lost (its monitor removed mid-flight) is replaced
            // after an interval.
            mark.probing_since = Some(now);
            mark.followers.remove(&id);
            return Due::Check;
        }
        mark.followers.insert(id);
        Due::Follow {
            msg: mark.msg.clone(),
            ago: now.saturating_duration_since(mark.probed_at),
        }
    }

    /// A real check of `address`, with `timeout`, ended with `outcome`: marks it, or clears
    /// it and returns the monitors that followed it (to run at once).
    pub fn checked(
        &mut self,
        address: &str,
        outcome: &CheckOutcome,
        timeout: Duration,
        now: Instant,
    ) -> Vec<Uuid> {
        if outcome.unreachable {
            let mark = self
                .marks
                .entry(address.to_string())
                .or_insert_with(|| Mark {
                    msg: String::new(),
                    probed_at: now,
                    timeout,
                    probing_since: None,
                    followers: HashSet::new(),
                });
            mark.msg.clone_from(&outcome.msg);
            mark.probed_at = now;
            mark.timeout = timeout;
            mark.probing_since = None;
            return Vec::new();
        }
        self.marks
            .remove(address)
            .map(|mark| mark.followers.into_iter().collect())
            .unwrap_or_default()
    }

    /// The outcome a follower reports: `down`, the probe's reason, and that it was not
    /// contacted itself.
    pub fn followed(address: &str, msg: &str, ago: Duration) -> CheckOutcome {
        CheckOutcome::down(
            None,
            format!(
                "{msg} (not tried: {address} failed this agent's last attempt to connect {} s \
                 ago; one check an interval tries it again)",
                ago.as_secs()
            ),
            serde_json::json!({"unreachable": {"address": address, "probed_ms_ago": ago.as_millis() as u64}}),
        )
    }

    /// Unreachable addresses now (for reports and tests).
    pub fn len(&self) -> usize {
        self.marks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.marks.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const IV: Duration = Duration::from_secs(5);
    const TO: Duration = Duration::from_secs(2);

    #[test]
    fn a_monitor_that_waits_longer_than_the_probe_tries_itself() {
        let mut marks = Unreachable::default();
        let t0 = Instant::now();
        marks.checked("h:80", &refused(), TO, t0);
        let patient = Duration::from_secs(4);
        assert_eq!(
            marks.due("h:80", Uuid::new_v4(), IV, patient, t0),
            Due::Check,
            "it might connect where the probe gave up"
        );
        assert!(matches!(
            marks.due("h:80", Uuid::new_v4(), IV, TO, t0),
            Due::Follow { .. }
        ));
    }

    fn refused() -> CheckOutcome {
        CheckOutcome::unreachable(None, "connection refused")
    }

    #[test]
    fn an_unreachable_address_is_probed_once_an_interval_and_followed_meanwhile() {
        let mut marks = Unreachable::default();
        let t0 = Instant::now();
        let (a, b, c) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        assert_eq!(marks.due("h:80", a, IV, TO, t0), Due::Check);
        assert!(marks.checked("h:80", &refused(), TO, t0).is_empty());
        // Within the interval the others follow…
        let t1 = t0 + Duration::from_secs(2);
        assert!(matches!(
            marks.due("h:80", b, IV, TO, t1),
            Due::Follow { .. }
        ));
        assert!(matches!(
            marks.due("h:80", c, IV, TO, t1),
            Due::Follow { .. }
        ));
        // …an interval on, one probes and the others still follow while it runs.
        let t2 = t0 + IV;
        assert_eq!(marks.due("h:80", b, IV, TO, t2), Due::Check);
        assert!(matches!(
            marks.due("h:80", a, IV, TO, t2),
            Due::Follow { .. }
        ));
        // Another address is its own.
        assert_eq!(marks.due("h:443", c, IV, TO, t2), Due::Check);
        // The probe gets through: the followers run at once.
        let mut back = marks.checked("h:80", &CheckOutcome::down(None, "503", json!({})), TO, t2);
        back.sort();
        let mut expected = vec![a, c];
        expected.sort();
        assert_eq!(back, expected);
        assert!(marks.is_empty());
        assert_eq!(marks.due("h:80", a, IV, TO, t2), Due::Check);
    }

    #[test]
    fn a_lost_probe_is_replaced_after_an_interval() {
        let mut marks = Unreachable::default();
        let t0 = Instant::now();
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        marks.checked("h:80", &refused(), TO, t0);
        assert_eq!(marks.due("h:80", a, IV, TO, t0 + IV), Due::Check);
        // a's probe never reports (removed while running).
        assert!(matches!(
            marks.due("h:80", b, IV, TO, t0 + IV + Duration::from_secs(1)),
            Due::Follow { .. }
        ));
        assert_eq!(marks.due("h:80", b, IV, TO, t0 + 2 * IV), Due::Check);
    }
}
