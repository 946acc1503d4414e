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
    /// When the monitor's spec last changed (a resume, an edit): its poller got it anew then.
    pub changed_at: Option<i64>,
    /// Newest result: its status, time, and when the agent said it checks next.
    pub latest: Option<(&'a str, i64, Option<i64>)>,
    /// The newest up/down results, newest first: `verdict_window` of them when the latest
    /// needs confirming (see `needs_history`), else none.
    pub recent: &'a [String],
    pub confirm_down: u32,
    pub confirm_up: u32,
}

/// Whether deriving the status needs the recent verdicts: only while a change of verdict
/// may be awaiting confirmation.
pub fn needs_history(latest: &str, confirm_down: u32, confirm_up: u32) -> bool {
    (latest == "down" && confirm_down > 1) || (latest == "up" && confirm_up > 1)
}

/// How many recent verdicts `derive` needs to tell a confirmed verdict from a passing one.
pub fn verdict_window(confirm_down: u32, confirm_up: u32) -> u32 {
    confirm_down.max(1) + confirm_up.max(1) + 1
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
    // A poller that just got the monitor (a move, a resume, an edit) has an interval to send
    // its first result, whatever the age of the previous one: a monitor that failed over or
    // was resumed is not stale while its first check is on its way.
    let handed_over = input
        .assigned_at
        .max(input.changed_at)
        .map(|at| at.saturating_add(input.interval_ms));
    let expected_by = match input.latest {
        // The agent says when it checks next (later while backing off or paused): trust it.
        Some((_, at, next_due)) => (at + input.interval_ms)
            .max(next_due.unwrap_or(0))
            .max(handed_over.unwrap_or(0)),
        None => handed_over.unwrap_or(i64::MAX - grace(input.interval_ms)),
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
        Some(latest @ ("up" | "down")) => {
            if needs_history(latest, input.confirm_down, input.confirm_up) {
                confirmed_verdict(input.recent, input.confirm_down, input.confirm_up)
            } else if latest == "up" {
                (MonitorStatus::Up, None)
            } else {
                (MonitorStatus::Down, None)
            }
        }
        Some(_) => (
            MonitorStatus::Pending,
            Some("the target is rate limiting its poller; no verdict yet".into()),
        ),
    }
}

/// The verdict with hysteresis: `down` only after `confirm_down` consecutive failing results,
/// and back `up` only after `confirm_up` consecutive passing ones; until a change is confirmed
/// the previous verdict stands. (A first `up` needs no confirming: there is nothing to resolve.)
/// `recent` is newest first; with no confirmed verdict in it the monitor is `pending`.
pub fn confirmed_verdict(
    recent: &[String],
    confirm_down: u32,
    confirm_up: u32,
) -> (MonitorStatus, Option<String>) {
    let (confirm_down, confirm_up) = (confirm_down.max(1) as usize, confirm_up.max(1) as usize);
    let mut verdict = None;
    let mut run: Option<(&str, usize)> = None;
    for status in recent.iter().rev() {
        let length = match run {
            Some((s, n)) if s == status => n + 1,
            _ => 1,
        };
        run = Some((status, length));
        match status.as_str() {
            "down" if length >= confirm_down => verdict = Some(MonitorStatus::Down),
            "up" if length >= confirm_up || verdict.is_none() => verdict = Some(MonitorStatus::Up),
            _ => {}
        }
    }
    let reason = match (run, verdict) {
        (Some(("down", n)), _) if n < confirm_down => Some(format!(
            "confirming down: {n} of {confirm_down} consecutive failing results"
        )),
        (Some(("up", n)), Some(MonitorStatus::Down)) => Some(format!(
            "confirming up: {n} of {confirm_up} consecutive passing results"
        )),
        _ => None,
    };
    (verdict.unwrap_or(MonitorStatus::Pending), reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000_000;

    fn base<'a>(recent: &'a [String]) -> StatusInputs<'a> {
        StatusInputs {
            now: NOW,
            interval_ms: 30_000,
            assigned_at: Some(NOW - 600_000),
            latest: Some(("up", NOW - 5_000, None)),
            recent,
            confirm_down: 1,
            confirm_up: 1,
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
        input.changed_at = None;
        input.assigned_at = Some(NOW - 600_000);
        assert!(derive(&input).1.unwrap().starts_with("no result yet;"));
        input.assigned_at = Some(NOW - 1_000);
        assert_eq!(derive(&input).0, MonitorStatus::Pending);
    }

    #[test]
    fn a_monitor_handed_over_has_an_interval_for_its_first_result() {
        let recent = statuses(&["up"]);
        let mut input = base(&recent);
        // Its last result is long overdue: stale, as long as nothing changed since.
        input.latest = Some(("up", NOW - 600_000, None));
        assert_eq!(derive(&input).0, MonitorStatus::Stale);
        // Resumed (or edited) 10 s ago: its poller has the interval and the grace to report.
        input.changed_at = Some(NOW - 10_000);
        assert_eq!(derive(&input).0, MonitorStatus::Up);
        // Moved to another poller 10 s ago (failover): the same.
        input.changed_at = None;
        input.assigned_at = Some(NOW - 10_000);
        assert_eq!(derive(&input).0, MonitorStatus::Up);
        // Past the interval and the grace after the move, silence is stale again.
        input.assigned_at = Some(NOW - 30_000 - 60_000 - 1);
        assert_eq!(derive(&input).0, MonitorStatus::Stale);
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

    #[test]
    fn up_needs_confirmation_after_a_down() {
        let recovering = statuses(&["up", "down", "down"]);
        let mut input = base(&recovering);
        input.confirm_up = 2;
        let (status, reason) = derive(&input);
        assert_eq!(status, MonitorStatus::Down);
        assert_eq!(
            reason.unwrap(),
            "confirming up: 1 of 2 consecutive passing results"
        );
        let recovered = statuses(&["up", "up", "down"]);
        input.recent = &recovered;
        assert_eq!(derive(&input), (MonitorStatus::Up, None));
        let first = statuses(&["up"]);
        input.recent = &first;
        assert_eq!(derive(&input).0, MonitorStatus::Up, "nothing to resolve");
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        fn history() -> impl Strategy<Value = Vec<bool>> {
            proptest::collection::vec(any::<bool>(), 1..40)
        }

        fn words(ups: &[bool]) -> Vec<String> {
            ups.iter()
                .rev()
                .map(|up| if *up { "up" } else { "down" }.to_string())
                .collect()
        }

        proptest! {
            /// With no confirmation asked, the verdict is the newest result.
            #[test]
            fn without_thresholds_the_newest_result_decides(ups in history()) {
                let (status, _) = confirmed_verdict(&words(&ups), 1, 1);
                let newest = if *ups.last().unwrap() { MonitorStatus::Up } else { MonitorStatus::Down };
                prop_assert_eq!(status, newest);
            }

            /// A run of `confirm` equal results always decides, whatever came before.
            #[test]
            fn a_long_enough_run_decides(ups in history(), down in 1u32..6, up in 1u32..6, tail_up: bool) {
                let mut all = ups.clone();
                let run = if tail_up { up } else { down };
                all.extend(std::iter::repeat_n(tail_up, run as usize));
                let (status, reason) = confirmed_verdict(&words(&all), down, up);
                prop_assert_eq!(status, if tail_up { MonitorStatus::Up } else { MonitorStatus::Down });
                prop_assert!(reason.is_none());
            }

            /// A run shorter than its threshold never changes the verdict of the history before it.
            #[test]
            fn a_short_run_keeps_the_previous_verdict(ups in history(), down in 2u32..6, up in 2u32..6, tail_up: bool) {
                let (before, _) = confirmed_verdict(&words(&ups), down, up);
                let threshold = if tail_up { up } else { down };
                let mut all = ups.clone();
                // One less than needed, counting equal results already at the end.
                let already = ups.iter().rev().take_while(|u| **u == tail_up).count() as u32;
                prop_assume!(already + 1 < threshold);
                all.extend(std::iter::repeat_n(tail_up, (threshold - 1 - already) as usize));
                let (after, _) = confirmed_verdict(&words(&all), down, up);
                if before == MonitorStatus::Pending && tail_up {
                    prop_assert_eq!(after, MonitorStatus::Up, "a first up needs no confirming");
                } else {
                    prop_assert_eq!(after, before);
                }
            }
        }
    }
}
