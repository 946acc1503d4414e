//! Notification rules: which status changes are told, when, and to which channels. `step` is
//! the pure rule for one monitor and `next_look` when time alone could make it tell something
//! (both property-tested against an evaluation at every instant); `look` runs them over the
//! monitors due (`store::due`) and writes the changed alert states with their notifications
//! (the outbox) in one transaction; poller liveness changes are told from `pollers`.
//! Delivery is `notify`'s job, never this module's.

mod look;

use shared_proto::notifications::NotificationEvent;
use shared_proto::settings_api::MonitorStatus;

pub(crate) use look::outbox_rows;

/// This many status changes within the flap window make a monitor flapping: its notifications
/// are held until it has changed fewer times within the window.
pub const FLAP_CHANGES: usize = 5;

/// The flap window of a monitor: twenty intervals, and at least ten minutes.
pub fn flap_window_ms(interval_ms: i64) -> i64 {
    interval_ms.saturating_mul(20).max(10 * 60_000)
}

pub use crate::domain::AlertState;

/// A notification to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub event: NotificationEvent,
    pub previous: Option<MonitorStatus>,
    pub reminder: bool,
}

/// The rule parameters of one monitor.
#[derive(Debug, Clone, Copy)]
pub struct Rules {
    /// Remind this often while a problem lasts; 0 never.
    pub repeat_ms: i64,
    pub flap_window_ms: i64,
}

/// The first instant after a `step` at which `step` could tell something with the status
/// unchanged: a reminder falling due, or a notice held for flapping let go as the oldest change
/// leaves the flap window. `None`: only a change of status can.
pub fn next_look(state: &AlertState, rules: Rules) -> Option<i64> {
    let event = event_of(state.status)?;
    if state.notified_status == Some(state.status) {
        let reminds = event.is_problem() && rules.repeat_ms > 0;
        return state
            .notified_at
            .filter(|_| reminds)
            .map(|at| at.saturating_add(rules.repeat_ms));
    }
    // Not told yet: held while flapping (the changes are in time order). A recovery under way
    // (`degraded` after a told `down`) is told by the `up` that ends it, a change of status.
    if state.changes.len() >= FLAP_CHANGES {
        return state
            .changes
            .first()
            .map(|at| at.saturating_add(rules.flap_window_ms));
    }
    None
}

fn event_of(status: MonitorStatus) -> Option<NotificationEvent> {
    match status {
        MonitorStatus::Down => Some(NotificationEvent::MonitorDown),
        MonitorStatus::Degraded => Some(NotificationEvent::MonitorDegraded),
        MonitorStatus::Stale => Some(NotificationEvent::MonitorStale),
        MonitorStatus::Up => Some(NotificationEvent::MonitorUp),
        // `pending`, `paused` and `maintenance` say nothing about the target: nothing to tell.
        MonitorStatus::Pending | MonitorStatus::Paused | MonitorStatus::Maintenance => None,
    }
}

/// Whether a status says the target works (`up`), does not (`down`, `degraded`, `stale`), or
/// neither.
fn working(status: MonitorStatus) -> Option<bool> {
    match status {
        MonitorStatus::Up => Some(true),
        MonitorStatus::Down | MonitorStatus::Degraded | MonitorStatus::Stale => Some(false),
        MonitorStatus::Pending | MonitorStatus::Paused | MonitorStatus::Maintenance => None,
    }
}

/// One evaluation of one monitor: its new alert state and what to tell, if anything.
/// - Each change of status is remembered with its time (for flap damping).
/// - A status worth telling (`down`, `degraded`, `stale`, `up`) that differs from the last one
///   told is told, unless the monitor is flapping; `up` is told only to resolve a problem told
///   before (a new monitor coming up is no news), and `degraded` after `down` is a recovery
///   under way, told only by the `up` that ends it.
/// - While a problem lasts, it is told again every `repeat_ms` (a reminder).
pub fn step(
    previous: Option<&AlertState>,
    current: MonitorStatus,
    now: i64,
    rules: Rules,
) -> (AlertState, Option<Notice>) {
    let mut state = previous.cloned().unwrap_or_else(|| AlertState {
        status: current,
        since: now,
        notified_status: None,
        notified_at: None,
        changes: Vec::new(),
    });
    if state.status != current {
        // Flapping is going between working and not: a move among problems (`degraded` to
        // `down`) or out of `pending` is not a flap.
        if let (Some(was), Some(is)) = (working(state.status), working(current)) {
            if was != is {
                state.changes.push(now);
            }
        }
        state.status = current;
        state.since = now;
    }
    state
        .changes
        .retain(|at| now.saturating_sub(*at) < rules.flap_window_ms);
    let Some(event) = event_of(current) else {
        return (state, None);
    };
    let told = state.notified_status;
    if told != Some(current) {
        let resolves = told.and_then(working) == Some(false);
        if event == NotificationEvent::MonitorUp && !resolves {
            state.notified_status = Some(current);
            state.notified_at = Some(now);
            return (state, None);
        }
        // Part of a told outage recovering is no news: `up` resolves it when it is over.
        let improving = told == Some(MonitorStatus::Down) && current == MonitorStatus::Degraded;
        if improving || state.changes.len() >= FLAP_CHANGES {
            return (state, None);
        }
        let previous = state.notified_status.replace(current);
        state.notified_at = Some(now);
        return (
            state,
            Some(Notice {
                event,
                previous,
                reminder: false,
            }),
        );
    }
    let due = state
        .notified_at
        .is_some_and(|at| now.saturating_sub(at) >= rules.repeat_ms);
    if event.is_problem() && rules.repeat_ms > 0 && due {
        state.notified_at = Some(now);
        return (
            state,
            Some(Notice {
                event,
                previous: Some(current),
                reminder: true,
            }),
        );
    }
    (state, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const RULES: Rules = Rules {
        repeat_ms: 0,
        flap_window_ms: 600_000,
    };

    /// The status a test names.
    fn st(name: &str) -> MonitorStatus {
        MonitorStatus::parse(name).expect("a status")
    }

    fn run(statuses: &[&str], rules: Rules, gap: i64) -> Vec<Notice> {
        let mut state = None;
        let mut told = Vec::new();
        for (i, status) in statuses.iter().enumerate() {
            let (next, notice) = step(state.as_ref(), st(status), i as i64 * gap, rules);
            told.extend(notice);
            state = Some(next);
        }
        told
    }

    #[test]
    fn down_then_up_is_told_once_each_and_a_first_up_is_no_news() {
        let told = run(&["pending", "up", "up", "down", "down", "up"], RULES, 5_000);
        let events: Vec<_> = told.iter().map(|n| n.event).collect();
        assert_eq!(
            events,
            [NotificationEvent::MonitorDown, NotificationEvent::MonitorUp]
        );
        assert_eq!(told[1].previous, Some(MonitorStatus::Down));
    }

    #[test]
    fn degraded_then_down_then_up() {
        let told = run(&["up", "degraded", "down", "up"], RULES, 5_000);
        let events: Vec<_> = told.iter().map(|n| n.event).collect();
        assert_eq!(
            events,
            [
                NotificationEvent::MonitorDegraded,
                NotificationEvent::MonitorDown,
                NotificationEvent::MonitorUp
            ]
        );
    }

    #[test]
    fn a_recovery_through_degraded_is_told_once_as_up() {
        let told = run(&["up", "down", "degraded", "up"], RULES, 5_000);
        let events: Vec<_> = told.iter().map(|n| n.event).collect();
        assert_eq!(
            events,
            [NotificationEvent::MonitorDown, NotificationEvent::MonitorUp]
        );
    }

    #[test]
    fn reminders_repeat_while_down() {
        let rules = Rules {
            repeat_ms: 60_000,
            ..RULES
        };
        let told = run(&["up", "down", "down", "down", "down", "up"], rules, 30_000);
        let reminders = told.iter().filter(|n| n.reminder).count();
        assert_eq!(
            told.len(),
            3,
            "down, one reminder a minute later, up: {told:?}"
        );
        assert_eq!(reminders, 1);
    }

    #[test]
    fn flapping_is_held_then_the_settled_status_is_told() {
        let mut statuses = vec!["up"];
        for _ in 0..6 {
            statuses.extend(["down", "up"]);
        }
        let told = run(&statuses, RULES, 5_000);
        assert!(told.len() < 5, "flapping is damped: {told:?}");
        // Quiet for a whole window, then down: told again.
        let mut state = None;
        for (i, status) in statuses.iter().enumerate() {
            state = Some(step(state.as_ref(), st(status), i as i64 * 5_000, RULES).0);
        }
        let later = 13 * 5_000 + RULES.flap_window_ms + 1;
        let (_, notice) = step(state.as_ref(), MonitorStatus::Down, later, RULES);
        assert_eq!(
            notice.map(|n| n.event),
            Some(NotificationEvent::MonitorDown)
        );
    }

    fn status() -> impl Strategy<Value = &'static str> {
        prop_oneof![
            Just("pending"),
            Just("up"),
            Just("down"),
            Just("degraded"),
            Just("stale"),
            Just("paused")
        ]
    }

    /// Notices with the instants they were told at.
    type Told = Vec<(i64, Notice)>;

    /// Notices (with their instants) from evaluating at every instant `0..=end`, and from
    /// evaluating only when the status changes and at the instants `next_look` names.
    fn every_instant_and_due_only(
        timeline: &[(i64, &'static str)],
        rules: Rules,
        end: i64,
    ) -> (Told, Told) {
        let status_at = |t: i64| {
            timeline
                .iter()
                .rev()
                .find(|(at, _)| *at <= t)
                .map_or("pending", |(_, s)| *s)
        };
        let mut reference = Vec::new();
        let mut state = None;
        for t in 0..=end {
            let (next, notice) = step(state.as_ref(), st(status_at(t)), t, rules);
            reference.extend(notice.map(|n| (t, n)));
            state = Some(next);
        }
        let mut due_only = Vec::new();
        let mut state = None;
        let mut t = 0;
        while t <= end {
            let (next, notice) = step(state.as_ref(), st(status_at(t)), t, rules);
            due_only.extend(notice.map(|n| (t, n)));
            let change = timeline.iter().map(|(at, _)| *at).find(|at| *at > t);
            t = [change, next_look(&next, rules)]
                .into_iter()
                .flatten()
                .min()
                .map_or(end + 1, |at| at.max(t + 1));
            state = Some(next);
        }
        (reference, due_only)
    }

    proptest! {
        /// Looking only on changes of status and at `next_look` tells exactly what looking at
        /// every instant tells, at the same instants: reminders, flap damping and all.
        #[test]
        fn looking_when_due_tells_what_looking_always_tells(
            steps in proptest::collection::vec((1i64..40, status()), 0..40),
            repeat_ms in prop_oneof![Just(0i64), 1i64..60],
            flap_window_ms in 10i64..200,
        ) {
            let mut at = 0;
            let timeline: Vec<(i64, &'static str)> = steps
                .into_iter()
                .map(|(gap, status)| {
                    at += gap;
                    (at, status)
                })
                .collect();
            let rules = Rules { repeat_ms, flap_window_ms };
            let (reference, due_only) = every_instant_and_due_only(&timeline, rules, at + 300);
            prop_assert_eq!(due_only, reference);
        }

        /// Without reminders, two notices in a row never tell the same status, and an `up`
        /// notice always resolves a problem told before it.
        #[test]
        fn notices_alternate_and_up_resolves(statuses in proptest::collection::vec(status(), 1..60)) {
            let told = run(&statuses, RULES, 60_000);
            for pair in told.windows(2) {
                prop_assert_ne!(pair[0].event, pair[1].event);
            }
            for notice in &told {
                if notice.event == NotificationEvent::MonitorUp {
                    prop_assert!(matches!(notice.previous.map(MonitorStatus::as_str), Some("down" | "degraded" | "stale")));
                }
            }
        }

        /// A problem that stays put long enough is always told in the end (flapping only delays).
        #[test]
        fn a_settled_problem_is_always_told(statuses in proptest::collection::vec(status(), 0..40), last in prop_oneof![Just("down"), Just("degraded"), Just("stale")]) {
            let mut state = None;
            let mut t = 0;
            for status in &statuses {
                state = Some(step(state.as_ref(), st(status), t, RULES).0);
                t += 5_000;
            }
            for _ in 0..3 {
                state = Some(step(state.as_ref(), st(last), t, RULES).0);
                t += RULES.flap_window_ms;
            }
            let told = state.and_then(|s| s.notified_status);
            // A `degraded` after a told `down` is a recovery under way: `down` stays told.
            let told = told.map(MonitorStatus::as_str);
            let recovering = last == "degraded" && told == Some("down");
            prop_assert!(recovering || told == Some(last), "told {:?}", told);
        }
    }
}
