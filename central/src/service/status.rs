//! The derived status of a monitor, as a pure function of what central knows about it.

use shared_proto::settings_api::MonitorStatus;

use super::time_of;

/// What status derivation looks at.
#[derive(Debug, Clone, Default)]
pub struct StatusInputs<'a> {
    pub now: i64,
    pub paused: bool,
    /// Why no poller can run it, when none can.
    pub placement_reason: Option<&'a str>,
    /// The assigned poller's id and last heartbeat, when that poller is offline.
    pub offline_poller: Option<(&'a str, Option<i64>)>,
    pub interval_ms: i64,
    /// When the current poller got the monitor.
    pub assigned_at: Option<i64>,
    /// Newest result: its status, time, and when the agent said it checks next.
    pub latest: Option<(&'a str, i64, Option<i64>)>,
    /// The newest up/down results, newest first (at least `confirm_down` of them when there are).
    pub recent: &'a [String],
    pub confirm_down: u32,
}

/// Past its expected time a result is overdue by this much before the monitor turns stale.
fn grace(interval_ms: i64) -> i64 {
    let grace = shared_proto::monitor::staleness_grace_ms(interval_ms.max(0) as u64);
    i64::try_from(grace).unwrap_or(i64::MAX)
}

pub fn derive(input: &StatusInputs<'_>) -> (MonitorStatus, Option<String>) {
    if input.paused {
        return (MonitorStatus::Paused, Some("paused by an operator".into()));
    }
    if let Some(reason) = input.placement_reason {
        return (
            MonitorStatus::Stale,
            Some(format!("no poller can run it: {reason}")),
        );
    }
    if let Some((poller, last_heartbeat)) = input.offline_poller {
        let since = last_heartbeat.map_or("never".into(), |t| time_of(t).to_rfc3339());
        return (
            MonitorStatus::Stale,
            Some(format!(
                "its poller {poller} is offline (last heartbeat {since})"
            )),
        );
    }
    let expected_by = match input.latest {
        // The agent says when it checks next (later while backing off or paused): trust it.
        Some((_, at, next_due)) => (at + input.interval_ms).max(next_due.unwrap_or(0)),
        None => input
            .assigned_at
            .map_or(i64::MAX - grace(input.interval_ms), |at| {
                at + input.interval_ms
            }),
    };
    if input.now > expected_by.saturating_add(grace(input.interval_ms)) {
        let last = input.latest.map_or("no result yet".into(), |(_, at, _)| {
            format!("no result since {}", time_of(at).to_rfc3339())
        });
        return (
            MonitorStatus::Stale,
            Some(format!(
                "{last}; one was expected by {}",
                time_of(expected_by).to_rfc3339()
            )),
        );
    }
    match input.latest.map(|(status, _, _)| status) {
        None => (MonitorStatus::Pending, Some("no result yet".into())),
        Some("up") => (MonitorStatus::Up, None),
        Some("down") => confirm_down(input),
        Some(_) => (
            MonitorStatus::Pending,
            Some("the target is rate limiting its poller; no verdict yet".into()),
        ),
    }
}

/// `down` only after `confirm_down` consecutive failing results; until then the previous
/// verdict stands.
fn confirm_down(input: &StatusInputs<'_>) -> (MonitorStatus, Option<String>) {
    let needed = input.confirm_down.max(1) as usize;
    if needed == 1 {
        return (MonitorStatus::Down, None);
    }
    let failing = input.recent.iter().take_while(|s| *s == "down").count();
    if failing >= needed {
        return (MonitorStatus::Down, None);
    }
    let reason = Some(format!(
        "confirming down: {failing} of {needed} consecutive failing results"
    ));
    if input.recent.iter().any(|s| s == "up") {
        (MonitorStatus::Up, reason)
    } else {
        (MonitorStatus::Pending, reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000_000;

    fn base<'a>(recent: &'a [String]) -> StatusInputs<'a> {
        StatusInputs {
            now: NOW,
            interval_ms: 30_000,
            assigned_at: Some(NOW - 10_000),
            latest: Some(("up", NOW - 5_000, None)),
            recent,
            confirm_down: 1,
            ..StatusInputs::default()
        }
    }

    fn statuses(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn precedence_paused_then_unplaced_then_offline() {
        let recent = statuses(&["up"]);
        let mut input = base(&recent);
        assert_eq!(derive(&input).0, MonitorStatus::Up);
        input.offline_poller = Some(("p1", Some(NOW - 90_000)));
        assert_eq!(derive(&input).0, MonitorStatus::Stale);
        input.placement_reason = Some("no poller is registered");
        assert!(derive(&input)
            .1
            .unwrap()
            .contains("no poller is registered"));
        input.paused = true;
        assert_eq!(derive(&input).0, MonitorStatus::Paused);
    }

    #[test]
    fn overdue_results_make_it_stale_unless_the_agent_said_it_waits() {
        let recent = statuses(&["up"]);
        let mut input = base(&recent);
        input.latest = Some(("up", NOW - 120_000, None));
        let (status, reason) = derive(&input);
        assert_eq!(status, MonitorStatus::Stale);
        assert!(reason.unwrap().starts_with("no result since"));
        // Backing off: the agent announced its next check in 4 minutes.
        input.latest = Some(("down", NOW - 120_000, Some(NOW + 120_000)));
        assert_eq!(derive(&input).0, MonitorStatus::Down);
        // Never a result, long after assignment.
        input.latest = None;
        input.assigned_at = Some(NOW - 600_000);
        assert!(derive(&input).1.unwrap().starts_with("no result yet;"));
        input.assigned_at = Some(NOW - 1_000);
        assert_eq!(derive(&input).0, MonitorStatus::Pending);
    }

    #[test]
    fn down_needs_confirmation() {
        let one = statuses(&["down", "up", "up"]);
        let mut input = base(&one);
        input.latest = Some(("down", NOW - 1_000, None));
        input.confirm_down = 3;
        let (status, reason) = derive(&input);
        assert_eq!(status, MonitorStatus::Up);
        assert_eq!(
            reason.unwrap(),
            "confirming down: 1 of 3 consecutive failing results"
        );
        let three = statuses(&["down", "down", "down", "up"]);
        input.recent = &three;
        assert_eq!(derive(&input), (MonitorStatus::Down, None));
        let fresh = statuses(&["down"]);
        input.recent = &fresh;
        assert_eq!(
            derive(&input).0,
            MonitorStatus::Pending,
            "no earlier verdict to keep"
        );
        input.confirm_down = 1;
        assert_eq!(derive(&input).0, MonitorStatus::Down);
    }
}
