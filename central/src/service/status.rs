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
    /// The stored verdict state (`VerdictState`) the results moved.
    pub verdict: VerdictState,
    pub confirm_down: u32,
    pub confirm_up: u32,
    /// For a heartbeat monitor: when its next ping is late. Nobody polls it, so it is never
    /// stale: silence past this instant is a failure of the job (`service::push`).
    pub late: Option<Lateness>,
}

/// When a heartbeat monitor's silence becomes a failure, and how to say so.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lateness {
    /// The instant a ping is late (its expected time and the grace).
    pub at: i64,
    /// What a late result says (`no ping since …; one was expected by …`).
    pub why: String,
}

/// An up/down result (shared with the wire's `ResultStatus`).
pub use shared_proto::poller_api::Verdict;

/// A monitor's (or a location's) confirmed verdict and the run of equal results it is in:
/// stored state, moved by each up/down result in check-time order (`advance`), so that the
/// verdict after any sequence is the one its whole history gives, however long a flapping
/// target has gone without a confirmed run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VerdictState {
    /// `None` until the first verdict is confirmed (`pending`).
    pub confirmed: Option<Verdict>,
    /// The newest result and how many equal ones end the sequence.
    pub run: Option<(Verdict, u32)>,
}

/// The verdict with hysteresis, one result further: `down` only after `confirm_down`
/// consecutive failing results, back `up` only after `confirm_up` consecutive passing ones;
/// until a change is confirmed the previous verdict stands. A first `up` needs no confirming
/// (there is nothing to resolve).
pub fn advance(
    state: VerdictState,
    result: Verdict,
    confirm_down: u32,
    confirm_up: u32,
) -> VerdictState {
    let length = match state.run {
        Some((verdict, n)) if verdict == result => n.saturating_add(1),
        _ => 1,
    };
    let confirmed = match result {
        Verdict::Down if length >= confirm_down.max(1) => Some(Verdict::Down),
        Verdict::Up if length >= confirm_up.max(1) || state.confirmed.is_none() => {
            Some(Verdict::Up)
        }
        _ => state.confirmed,
    };
    VerdictState {
        confirmed,
        run: Some((result, length)),
    }
}

/// The status a verdict state shows, and why when a change awaits confirming.
pub fn shown_verdict(
    state: VerdictState,
    confirm_down: u32,
    confirm_up: u32,
) -> (MonitorStatus, Option<String>) {
    let (confirm_down, confirm_up) = (confirm_down.max(1), confirm_up.max(1));
    let reason = match (state.run, state.confirmed) {
        (Some((Verdict::Down, n)), confirmed)
            if n < confirm_down && confirmed != Some(Verdict::Down) =>
        {
            Some(format!(
                "confirming down: {n} of {confirm_down} consecutive failing results"
            ))
        }
        (Some((Verdict::Up, n)), Some(Verdict::Down)) if n < confirm_up => Some(format!(
            "confirming up: {n} of {confirm_up} consecutive passing results"
        )),
        _ => None,
    };
    let status = match state.confirmed {
        Some(Verdict::Up) => MonitorStatus::Up,
        Some(Verdict::Down) => MonitorStatus::Down,
        None => MonitorStatus::Pending,
    };
    (status, reason)
}

/// Past its expected time a result is overdue by this much before the monitor turns stale.
fn grace(interval_ms: i64) -> i64 {
    let grace = shared_proto::monitor::staleness_grace_ms(interval_ms.max(0) as u64);
    i64::try_from(grace).unwrap_or(i64::MAX)
}

/// When results are expected, from what `derive` reads.
struct Deadlines {
    /// An interval after the monitor was handed to its poller (moved, resumed, edited).
    handed_over: Option<i64>,
    /// An interval after the newest result, or later when the agent said so.
    by_results: Option<i64>,
    /// The later of the two: past it and its grace, the monitor is stale.
    expected_by: i64,
}

fn deadlines(input: &StatusInputs<'_>) -> Deadlines {
    // A poller that just got the monitor (a move, a resume, an edit) has an interval to send
    // its first result, whatever the age of the previous one: a monitor that failed over or
    // was resumed is not stale while its first check is on its way.
    let handed_over = input
        .assigned_at
        .max(input.changed_at)
        .map(|at| at.saturating_add(input.interval_ms));
    // The agent says when it checks next (later while backing off or paused): trust it.
    let by_results = input
        .latest
        .map(|(_, at, next_due)| (at + input.interval_ms).max(next_due.unwrap_or(0)));
    let expected_by = match by_results {
        Some(by) => by.max(handed_over.unwrap_or(0)),
        None => handed_over.unwrap_or(i64::MAX - grace(input.interval_ms)),
    };
    Deadlines {
        handed_over,
        by_results,
        expected_by,
    }
}

/// The first instant after `input.now` at which `derive` could answer otherwise with nothing
/// but time passing (results growing overdue); `None` when time alone changes nothing. What
/// else changes an answer (a result, an edit, a move, a poller going offline) marks the
/// monitor due itself, so alerting looks at a monitor only at these instants and on changes.
pub fn changes_at(input: &StatusInputs<'_>) -> Option<i64> {
    if let Some(late) = input.late.as_ref().filter(|_| !input.paused) {
        return (late.at > input.now).then_some(late.at);
    }
    if input.paused || input.placement_reason.is_some() || input.offline_poller.is_some() {
        return None;
    }
    let grace = grace(input.interval_ms);
    let Deadlines {
        handed_over,
        by_results,
        expected_by,
    } = deadlines(input);
    // `derive` compares with `now >`: each answer holds up to its deadline, included.
    let stale_from = expected_by.saturating_add(grace).checked_add(1);
    let pending_from = by_results
        .filter(|_| handed_over.is_some())
        .and_then(|by| by.saturating_add(grace).checked_add(1));
    [stale_from, pending_from]
        .into_iter()
        .flatten()
        .filter(|at| *at > input.now)
        .min()
}

/// The instant before which a monitor whose newest result was checked at `ts` cannot change
/// its status with time alone: an interval and its grace after that result. `changes_at` is
/// never earlier, whatever else it reads (a later announced check or a hand-over only push its
/// deadlines further), so ingest can move a steady monitor's next look here without one.
pub fn unchanged_until(ts: i64, interval_ms: i64) -> i64 {
    ts.saturating_add(interval_ms)
        .saturating_add(grace(interval_ms))
        .saturating_add(1)
}

pub fn derive(input: &StatusInputs<'_>) -> (MonitorStatus, Option<String>) {
    if input.paused {
        return (MonitorStatus::Paused, Some("paused by an operator".into()));
    }
    if let Some(late) = &input.late {
        return heartbeat_status(input, late);
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
    let Deadlines {
        handed_over,
        by_results,
        expected_by,
    } = deadlines(input);
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
    // Overdue by its own results, waiting only because it was just handed over: what it showed
    // before is no longer known, and a silent monitor edited meanwhile does not "recover".
    if let (Some(by), Some(handed)) = (by_results, handed_over) {
        if input.now > by.saturating_add(grace(input.interval_ms)) {
            return (
                MonitorStatus::Pending,
                Some(format!(
                    "waiting for its first result since it was handed to its poller; one is \
                     expected by {}",
                    time_of(handed).to_rfc3339()
                )),
            );
        }
    }
    match input.latest.map(|(status, _, _)| status) {
        None => (MonitorStatus::Pending, Some("no result yet".into())),
        Some(_) if input.verdict.run.is_some() => {
            shown_verdict(input.verdict, input.confirm_down, input.confirm_up)
        }
        Some(_) => (
            MonitorStatus::Pending,
            Some("the target is rate limiting its poller; no verdict yet".into()),
        ),
    }
}

/// A heartbeat monitor's status: its pings' verdict; once a ping is late, the verdict with one
/// more failing result (which alerting stores: `service::push`), so the status read and the
/// stored history agree.
fn heartbeat_status(input: &StatusInputs<'_>, late: &Lateness) -> (MonitorStatus, Option<String>) {
    let late_now = input.now >= late.at
        && input
            .latest
            .is_none_or(|(_, last_result_at, _)| last_result_at < late.at);
    if late_now {
        let state = advance(
            input.verdict,
            Verdict::Down,
            input.confirm_down,
            input.confirm_up,
        );
        let (status, confirming) = shown_verdict(state, input.confirm_down, input.confirm_up);
        let reason = match confirming {
            Some(confirming) => format!("{}; {confirming}", late.why),
            None => late.why.clone(),
        };
        return (status, Some(reason));
    }
    match input.latest {
        None => (
            MonitorStatus::Pending,
            Some(format!(
                "waiting for its first ping; late at {}",
                time_of(late.at).to_rfc3339()
            )),
        ),
        Some(_) => shown_verdict(input.verdict, input.confirm_down, input.confirm_up),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000_000;

    /// The verdict with hysteresis: `down` only after `confirm_down` consecutive failing results,
    /// and back `up` only after `confirm_up` consecutive passing ones; until a change is confirmed
    /// the previous verdict stands. (A first `up` needs no confirming: there is nothing to resolve.)
    /// `recent` is newest first; with no confirmed verdict in it the monitor is `pending`.
    fn confirmed_verdict(
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
                "up" if length >= confirm_up || verdict.is_none() => {
                    verdict = Some(MonitorStatus::Up)
                }
                _ => {}
            }
        }
        let reason = match (run, verdict) {
            (Some(("down", n)), v) if n < confirm_down && v != Some(MonitorStatus::Down) => Some(
                format!("confirming down: {n} of {confirm_down} consecutive failing results"),
            ),
            (Some(("up", n)), Some(MonitorStatus::Down)) => Some(format!(
                "confirming up: {n} of {confirm_up} consecutive passing results"
            )),
            _ => None,
        };
        (verdict.unwrap_or(MonitorStatus::Pending), reason)
    }

    /// The state the results (oldest first) move a monitor to.
    fn state_after(results: &[&str], confirm_down: u32, confirm_up: u32) -> VerdictState {
        results.iter().fold(VerdictState::default(), |state, r| {
            advance(state, Verdict::parse(r).unwrap(), confirm_down, confirm_up)
        })
    }

    fn base(results: &[&str]) -> StatusInputs<'static> {
        StatusInputs {
            now: NOW,
            interval_ms: 30_000,
            assigned_at: Some(NOW - 600_000),
            latest: Some(("up", NOW - 5_000, None)),
            verdict: state_after(results, 1, 1),
            confirm_down: 1,
            confirm_up: 1,
            ..StatusInputs::default()
        }
    }

    #[test]
    fn precedence_paused_then_unplaced_then_offline() {
        let mut input = base(&["up"]);
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
        let mut input = base(&["up"]);
        input.latest = Some(("up", NOW - 120_000, None));
        let (status, reason) = derive(&input);
        assert_eq!(status, MonitorStatus::Stale);
        assert!(reason.unwrap().starts_with("no result since"));
        // Backing off: the agent announced its next check in 4 minutes.
        input.latest = Some(("down", NOW - 120_000, Some(NOW + 120_000)));
        input.verdict = state_after(&["up", "down"], 1, 1);
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
        let mut input = base(&["up"]);
        // Its last result is long overdue: stale, as long as nothing changed since.
        input.latest = Some(("up", NOW - 600_000, None));
        assert_eq!(derive(&input).0, MonitorStatus::Stale);
        // Resumed (or edited) 10 s ago: its poller has the interval and the grace to report,
        // and meanwhile its old verdict is not shown as if it were current.
        input.changed_at = Some(NOW - 10_000);
        assert_eq!(derive(&input).0, MonitorStatus::Pending);
        // Moved to another poller 10 s ago (failover): the same.
        input.changed_at = None;
        input.assigned_at = Some(NOW - 10_000);
        assert_eq!(derive(&input).0, MonitorStatus::Pending);
        // A move while its results were on time keeps its verdict.
        input.latest = Some(("up", NOW - 20_000, None));
        assert_eq!(derive(&input).0, MonitorStatus::Up);
        input.latest = Some(("up", NOW - 600_000, None));
        // Past the interval and the grace after the move, silence is stale again.
        input.assigned_at = Some(NOW - 30_000 - 60_000 - 1);
        assert_eq!(derive(&input).0, MonitorStatus::Stale);
    }

    #[test]
    fn down_needs_confirmation() {
        let mut input = base(&[]);
        input.latest = Some(("down", NOW - 1_000, None));
        input.confirm_down = 3;
        input.verdict = state_after(&["up", "up", "down"], 3, 1);
        let (status, reason) = derive(&input);
        assert_eq!(status, MonitorStatus::Up);
        assert_eq!(
            reason.unwrap(),
            "confirming down: 1 of 3 consecutive failing results"
        );
        input.verdict = state_after(&["up", "down", "down", "down"], 3, 1);
        assert_eq!(derive(&input), (MonitorStatus::Down, None));
        input.verdict = state_after(&["down"], 3, 1);
        assert_eq!(
            derive(&input).0,
            MonitorStatus::Pending,
            "no earlier verdict to keep"
        );
        input.confirm_down = 1;
        input.verdict = state_after(&["down"], 1, 1);
        assert_eq!(derive(&input).0, MonitorStatus::Down);
    }

    #[test]
    fn up_needs_confirmation_after_a_down() {
        let mut input = base(&[]);
        input.confirm_up = 2;
        input.verdict = state_after(&["down", "down", "up"], 1, 2);
        let (status, reason) = derive(&input);
        assert_eq!(status, MonitorStatus::Down);
        assert_eq!(
            reason.unwrap(),
            "confirming up: 1 of 2 consecutive passing results"
        );
        input.verdict = state_after(&["down", "up", "up"], 1, 2);
        assert_eq!(derive(&input), (MonitorStatus::Up, None));
        input.verdict = state_after(&["up"], 1, 2);
        assert_eq!(derive(&input).0, MonitorStatus::Up, "nothing to resolve");
    }

    /// The case: three failures confirm `down`; then up, up, down, up, up, down… never
    /// has three passing results in a row, so it is still down, however long it goes on (a
    /// window of the last `confirm_down + confirm_up + 1` results once forgot that).
    #[test]
    fn a_flapping_target_stays_down_until_three_passes_in_a_row() {
        let mut results = vec!["down", "down", "down"];
        for _ in 0..50 {
            results.extend(["up", "up", "down"]);
        }
        let state = state_after(&results, 3, 3);
        assert_eq!(state.confirmed, Some(Verdict::Down));
        results.extend(["up", "up", "up"]);
        assert_eq!(state_after(&results, 3, 3).confirmed, Some(Verdict::Up));
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

        /// Status inputs around `NOW`: an interval, when it was handed over, its newest result
        /// and the next check the agent announced, each possibly absent.
        fn timed_inputs() -> impl Strategy<Value = StatusInputs<'static>> {
            let offset = -7_200_000i64..600_000;
            (
                5_000i64..600_000,
                proptest::option::of(offset.clone()),
                proptest::option::of(offset.clone()),
                proptest::option::of((offset, proptest::option::of(-600_000i64..1_800_000))),
            )
                .prop_map(|(interval_ms, assigned, changed, latest)| StatusInputs {
                    now: NOW,
                    interval_ms,
                    assigned_at: assigned.map(|d| NOW + d),
                    changed_at: changed.map(|d| NOW + d),
                    latest: latest.map(|(at, next)| ("up", NOW + at, next.map(|n| NOW + n))),
                    verdict: state_after(&["up"], 1, 1),
                    confirm_down: 1,
                    confirm_up: 1,
                    ..StatusInputs::default()
                })
        }

        proptest! {
            /// `changes_at` is exact: `derive` answers the same at every instant before it,
            /// and otherwise at it; with `None`, the same for ever.
            #[test]
            fn derive_changes_only_at_changes_at(input in timed_inputs(), fraction in 0.0f64..1.0) {
                let now = derive(&input);
                let at = |t: i64| derive(&StatusInputs { now: t, ..input.clone() });
                match changes_at(&input) {
                    Some(change) => {
                        prop_assert!(change > NOW);
                        let before = NOW + ((change - 1 - NOW) as f64 * fraction) as i64;
                        prop_assert_eq!(at(before), now.clone());
                        prop_assert_eq!(at(change - 1), now.clone());
                        prop_assert_ne!(at(change), now);
                    }
                    None => {
                        let later = NOW + (fraction * 1e12) as i64;
                        prop_assert_eq!(at(later), now);
                    }
                }
            }

            /// `unchanged_until` is a bound `changes_at` never undercuts: up to it, a monitor
            /// shows what its newest result makes it show.
            #[test]
            fn nothing_changes_before_unchanged_until(input in timed_inputs()) {
                if let Some((_, ts, _)) = input.latest {
                    let until = unchanged_until(ts, input.interval_ms);
                    if until > NOW {
                        let change = changes_at(&input);
                        prop_assert!(change.is_some_and(|c| c >= until), "{:?} < {}", change, until);
                    }
                }
            }

            /// The stored state moved one result at a time shows what the whole history shows,
            /// status and reason, for any sequence and thresholds.
            #[test]
            fn the_moved_state_shows_what_the_whole_history_gives(ups in proptest::collection::vec(any::<bool>(), 1..200), down in 1u32..6, up in 1u32..6) {
                let results: Vec<&str> = ups.iter().map(|u| if *u { "up" } else { "down" }).collect();
                let state = state_after(&results, down, up);
                prop_assert_eq!(shown_verdict(state, down, up), confirmed_verdict(&words(&ups), down, up));
            }

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
