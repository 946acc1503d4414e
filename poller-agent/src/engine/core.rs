//! The engine's decisions, as a pure state machine: which monitors start now (due, admitted by
//! their breaker, within their host's limit, or joining an identical request in flight), and
//! what follows from each outcome (backoff, down-confirmation re-checks, breaker, auto-pause,
//! dead letter, `Retry-After`). It never sleeps, spawns or reads a clock: `now` is passed in.
//! Operators' commands about one monitor (check now, reset) are in `on_demand`.

mod on_demand;
mod report;
pub use on_demand::NotAssigned;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::Value;
use shared_proto::engine_meta::{EngineMeta, RateLimitMeta};
use shared_proto::poller_api::{DeadLetter, EngineEvent, EventKind, ResultStatus};
use shared_proto::settings::{CommonSettings, MonitorSettings};
use shared_proto::AssignedMonitor;
use uuid::Uuid;

use super::adaptive::Adaptive;
use super::backoff::Backoff;
use super::breaker::{Admission, Breaker, BreakerState, Transition};
use super::budget;
use super::host_limit::HostLimiter;
use super::request_key::{address_of, host_of, RequestKey};
use super::rolling::{PauseTransition, RollingHealth};
use super::scheduler::{phase, Scheduler};
use super::unreachable::{Due, Unreachable};
use crate::checks::{CheckOutcome, RateBudget, Validators};

/// Engine-wide settings.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    pub per_host_limit: usize,
    pub dead_letter_recheck: Duration,
    /// Oldest events are dropped beyond this many undelivered ones.
    pub max_buffered_events: usize,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            per_host_limit: 5,
            dead_letter_recheck: Duration::from_millis(
                shared_proto::settings::DEAD_LETTER_RECHECK_MS,
            ),
            max_buffered_events: 500,
        }
    }
}

/// A request to start now.
#[derive(Debug, Clone)]
pub struct Dispatch {
    pub key: RequestKey,
    pub monitor: Arc<AssignedMonitor>,
    pub validators: Option<Validators>,
    /// How late it starts compared with when it was due.
    pub lag: Duration,
}

/// One monitor's result of a finished request.
#[derive(Debug, Clone)]
pub struct Finished {
    pub monitor: Arc<AssignedMonitor>,
    pub outcome: CheckOutcome,
    pub next_due: Instant,
    /// The `check` commands this result answers (`on_demand`): their check started after
    /// they arrived.
    pub answers: Vec<Uuid>,
    /// Its `up` or `down` differs from the monitor's previous one, or is its first (a new
    /// monitor shows its status at once): worth uploading now rather than with the next
    /// batch. After an agent's restart every monitor's first result is one; at any rate that
    /// matters, `POLLER_BATCH_SIZE` starts uploads as often anyway.
    pub status_changed: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Scheduled,
    WaitingForHost { due: Instant },
    Running,
}

struct MonitorState {
    spec: Arc<AssignedMonitor>,
    common: CommonSettings,
    key: RequestKey,
    host: String,
    /// Where it connects (`host:port`), for kinds that connect (`unreachable`).
    address: Option<String>,
    phase: Phase,
    breaker: Breaker,
    backoff: Backoff,
    backoff_attempt: u32,
    retries_left: u32,
    health: RollingHealth,
    dead_letter: Option<DeadLetter>,
    last_polled: Option<Instant>,
    /// When the current (or last) run was due: successes keep a fixed rate from it.
    last_due: Option<Instant>,
    last_status: Option<ResultStatus>,
    validators: Option<Validators>,
    /// Edited while running: run again as soon as the current run ends.
    rerun: bool,
    /// `settings.adaptive`: the stretched interval.
    adaptive: Option<Adaptive>,
    /// The target's last stated rate-limit budget, and whether it was low.
    budget: Option<RateBudget>,
    budget_low: bool,
    /// `check` commands waiting for a check that starts after they arrived (`on_demand`).
    asked: Vec<(Uuid, Instant)>,
    /// When the engine got the monitor, its last success, and its last failure's message
    /// (`report`: staleness).
    added: Instant,
    last_success: Option<Instant>,
    last_error: Option<String>,
    /// When the target stated `budget` (its reset counts from then).
    budget_at: Option<Instant>,
    /// When an operator last reset it (`on_demand`): a run that started before does not
    /// count against the fresh state.
    reset_at: Option<Instant>,
}

impl MonitorState {
    fn new(spec: AssignedMonitor, now: Instant) -> Self {
        // A monitor whose settings do not parse still runs: its check reports the bad config.
        let common = MonitorSettings::parse(spec.kind, &spec.settings)
            .map(|s| s.common)
            .unwrap_or_default();
        let ms = Duration::from_millis;
        Self {
            key: RequestKey::of(&spec),
            host: host_of(&spec),
            address: address_of(&spec),
            phase: Phase::Scheduled,
            // Threshold 0: the breaker never opens (the default; a monitor opts in).
            breaker: Breaker::new(common.breaker_threshold, ms(common.breaker_cooldown_ms)),
            // At most the interval unless the monitor sets longer: a failing target is still
            // checked every interval, so its recovery is seen within one.
            backoff: Backoff {
                base: ms(common.backoff_base_ms),
                max: ms(common.backoff_max_ms_for(spec.interval_ms)),
            },
            backoff_attempt: 0,
            retries_left: common.retries,
            health: fresh_health(&common),
            dead_letter: None,
            last_polled: None,
            last_due: None,
            last_status: None,
            validators: None,
            rerun: false,
            adaptive: common.adaptive.then(|| {
                Adaptive::new(
                    Duration::from_millis(spec.interval_ms),
                    common.adaptive_max_interval_ms,
                )
            }),
            budget: None,
            budget_low: false,
            asked: Vec::new(),
            added: now,
            last_success: None,
            last_error: None,
            budget_at: None,
            reset_at: None,
            spec: Arc::new(spec),
            common,
        }
    }

    fn interval(&self) -> Duration {
        Duration::from_millis(self.spec.interval_ms)
    }
}

/// The rolling window of a monitor with no history.
fn fresh_health(common: &CommonSettings) -> RollingHealth {
    RollingHealth::new(
        common.window,
        common.auto_pause_threshold,
        common.auto_resume_threshold,
        Duration::from_millis(common.auto_pause_cooldown_ms),
    )
}

struct InFlight {
    host: String,
    /// The address it connects to and its timeout, as dispatched (`unreachable`).
    address: Option<String>,
    timeout: Duration,
    members: Vec<Uuid>,
    /// When the request started: a `check` command that arrived later is not answered by it.
    started: Instant,
}

pub struct Engine {
    config: EngineConfig,
    monitors: HashMap<Uuid, MonitorState>,
    scheduler: Scheduler,
    hosts: HostLimiter,
    in_flight: HashMap<RequestKey, InFlight>,
    /// Started by a freed host slot, handed out by the next `poll`.
    ready: Vec<Dispatch>,
    events: Vec<EngineEvent>,
    rng: StdRng,
    /// The first `now` seen: first runs fall on a grid from here, so identical monitors added
    /// at different times still line up (and coalesce).
    anchor: Option<Instant>,
    /// A monotonic instant with its wall time, for monitors whose checks are phased against
    /// the wall clock (`phase_ms`).
    wall: Option<(Instant, i64)>,
    /// Addresses that took no connection, tried once an interval (`unreachable`).
    unreachable: Unreachable,
    /// Results of monitors that followed such a try, for `take_followed`.
    followed: Vec<Finished>,
}

impl Engine {
    pub fn new(config: EngineConfig) -> Self {
        Self::with_rng(config, StdRng::from_entropy())
    }

    /// With a seeded jitter source, for deterministic tests.
    pub fn with_rng(config: EngineConfig, rng: StdRng) -> Self {
        Self {
            hosts: HostLimiter::new(config.per_host_limit),
            config,
            monitors: HashMap::new(),
            scheduler: Scheduler::new(),
            in_flight: HashMap::new(),
            ready: Vec::new(),
            events: Vec::new(),
            rng,
            anchor: None,
            wall: None,
            unreachable: Unreachable::default(),
            followed: Vec::new(),
        }
    }

    /// Tells the engine the wall time (ms since the epoch) at `now`, for `phase_ms`.
    pub fn note_wall_time(&mut self, now: Instant, wall_ms: i64) {
        self.wall = Some((now, wall_ms));
    }

    pub fn len(&self) -> usize {
        self.monitors.len()
    }

    pub fn is_empty(&self) -> bool {
        self.monitors.is_empty()
    }

    /// Adds or updates a monitor. New monitors first run at a phase derived from their request,
    /// so identical requests line up (and coalesce) while different ones spread out. An edited
    /// monitor starts afresh and runs at once; an unchanged one keeps its schedule.
    pub fn upsert(&mut self, spec: AssignedMonitor, now: Instant) {
        let id = spec.id;
        match self.monitors.get_mut(&id) {
            Some(state) if *state.spec == spec => {}
            Some(state) => {
                let phase = state.phase;
                let mut fresh = MonitorState::new(spec, now);
                fresh.phase = phase;
                fresh.last_polled = state.last_polled;
                fresh.asked = std::mem::take(&mut state.asked);
                fresh.added = state.added;
                fresh.last_success = state.last_success;
                fresh.last_error = state.last_error.take();
                *state = fresh;
                match phase {
                    Phase::Scheduled => self.scheduler.schedule(id, now),
                    Phase::Running => state.rerun = true,
                    Phase::WaitingForHost { .. } => {}
                }
            }
            None => {
                let wall_phase = spec.phase_ms;
                let state = MonitorState::new(spec, now);
                let anchor = *self.anchor.get_or_insert(now);
                let first = match (wall_phase, self.wall) {
                    (Some(phase_ms), Some((at, wall_ms))) => {
                        let interval_ms = state.interval().as_millis().max(1) as i64;
                        let wall_now =
                            wall_ms + now.saturating_duration_since(at).as_millis() as i64;
                        let wait = (phase_ms as i64 - wall_now).rem_euclid(interval_ms);
                        later(now, Duration::from_millis(wait as u64))
                    }
                    _ => {
                        let offset = phase(state.key.stable_hash(), state.interval());
                        next_on_grid(anchor + offset, state.interval(), now)
                    }
                };
                self.scheduler.schedule(id, first);
                self.monitors.insert(id, state);
            }
        }
    }

    /// Stops running a monitor. Answers the `check` commands still waiting for it: none of
    /// them will be answered now.
    pub fn remove(&mut self, id: Uuid) -> Vec<Uuid> {
        self.scheduler.cancel(id);
        let Some(state) = self.monitors.remove(&id) else {
            return Vec::new();
        };
        // A run in flight finishes for the others that share it; this monitor's share of it
        // is dropped, so that a monitor added again with the same id never gets its result.
        if state.phase == Phase::Running {
            for flight in self.in_flight.values_mut() {
                flight.members.retain(|member| *member != id);
            }
        }
        state
            .asked
            .into_iter()
            .map(|(command, _)| command)
            .collect()
    }

    /// Makes the set exactly `monitors`; answers as `remove`.
    pub fn replace_all(&mut self, monitors: Vec<AssignedMonitor>, now: Instant) -> Vec<Uuid> {
        let keep: std::collections::HashSet<Uuid> = monitors.iter().map(|m| m.id).collect();
        let gone: Vec<Uuid> = self
            .monitors
            .keys()
            .filter(|id| !keep.contains(id))
            .copied()
            .collect();
        let abandoned = gone.into_iter().flat_map(|id| self.remove(id)).collect();
        monitors.into_iter().for_each(|m| self.upsert(m, now));
        abandoned
    }

    pub fn contains(&self, id: Uuid) -> bool {
        self.monitors.contains_key(&id)
    }

    /// When the next monitor is due.
    pub fn next_due(&mut self) -> Option<Instant> {
        self.scheduler.next_due()
    }

    /// The requests to start now.
    pub fn poll(&mut self, now: Instant, wall: DateTime<Utc>) -> Vec<Dispatch> {
        let mut out = std::mem::take(&mut self.ready);
        for (id, due) in self.scheduler.pop_due(now) {
            let Some(state) = self.monitors.get_mut(&id) else {
                continue;
            };
            // An operator's `check` goes through an open breaker (`on_demand`).
            let (admission, transition) = if state.asked.is_empty() {
                state.breaker.admit(now)
            } else {
                state.breaker.admit_forced()
            };
            if transition == Some(Transition::HalfOpened) {
                let event = EventKind::BreakerHalfOpen;
                push_event(&mut self.events, &self.config, id, wall, event, None);
            }
            if let Admission::Rejected { until } = admission {
                let retry = until.unwrap_or_else(|| later(now, state.interval()));
                self.scheduler.schedule(id, retry);
                continue;
            }
            if let Some(flight) = self.in_flight.get_mut(&state.key) {
                flight.members.push(id);
                state.phase = Phase::Running;
                state.last_due = Some(due);
                continue;
            }
            // An address that took no connection is tried once an interval; the others due
            // meanwhile follow that try (an operator's `check` always tries).
            if self.follow(id, due, now, wall) {
                continue;
            }
            let Some(state) = self.monitors.get_mut(&id) else {
                continue;
            };
            if self.hosts.try_acquire(&state.host) {
                let host = state.host.clone();
                out.push(start(&mut self.in_flight, state, due, now, host));
            } else {
                self.hosts.wait(&state.host, id, state.last_polled);
                state.phase = Phase::WaitingForHost { due };
            }
        }
        out
    }

    /// Applies the outcome of the request `key` to every monitor that shared it.
    pub fn complete(
        &mut self,
        key: &RequestKey,
        outcome: CheckOutcome,
        now: Instant,
        wall: DateTime<Utc>,
    ) -> Vec<Finished> {
        let Some(flight) = self.in_flight.remove(key) else {
            return Vec::new();
        };
        self.hand_over_host_slot(&flight.host, now, wall);
        // The address tried (as dispatched: an edit meanwhile may have moved the monitor):
        // marked unreachable, or cleared with its followers run now.
        if let Some(address) = &flight.address {
            for follower in self
                .unreachable
                .checked(address, &outcome, flight.timeout, now)
            {
                if let Some(state) = self.monitors.get(&follower) {
                    if state.phase == Phase::Scheduled {
                        self.scheduler.schedule(follower, now);
                    }
                }
            }
        }
        let mut finished = Vec::with_capacity(flight.members.len());
        for id in flight.members {
            let Some(state) = self.monitors.get_mut(&id) else {
                continue;
            };
            let before = state.last_status;
            // A run that started before an operator's reset does not count against the state
            // the reset made (its result still goes to central: it is what the target said).
            let mut next_due = if state.reset_at.is_some_and(|at| at > flight.started) {
                now
            } else {
                record(
                    state,
                    &outcome,
                    now,
                    wall,
                    &self.config,
                    &mut self.rng,
                    &mut self.events,
                )
            };
            let answers = on_demand::answered_by(state, flight.started);
            // Edited while running, or a `check` arrived after this run started: again now.
            if std::mem::take(&mut state.rerun) || !state.asked.is_empty() {
                next_due = now;
            }
            state.phase = Phase::Scheduled;
            self.scheduler.schedule(id, next_due);
            let mut own = outcome.clone();
            own.meta = with_engine_meta(own.meta, state, next_due, now, wall);
            finished.push(Finished {
                monitor: state.spec.clone(),
                outcome: own,
                next_due,
                answers,
                status_changed: state.last_status != before,
            });
        }
        finished
    }

    /// If monitor `id`, due at `due`, should follow its unreachable address's last try
    /// (`unreachable`) rather than check, records that result and schedules its next run.
    /// A follower's failure uses no retry and does not count as a poll of the host: it was
    /// not tried, and it reports again at its interval.
    fn follow(&mut self, id: Uuid, due: Instant, now: Instant, wall: DateTime<Utc>) -> bool {
        let Some(state) = self.monitors.get_mut(&id) else {
            return false;
        };
        let Some(address) = state.address.clone() else {
            return false;
        };
        if !state.asked.is_empty() {
            return false;
        }
        let timeout = Duration::from_millis(state.spec.timeout_ms);
        let Due::Follow { msg, ago } =
            self.unreachable
                .due(&address, id, state.interval(), timeout, now)
        else {
            return false;
        };
        let outcome = Unreachable::followed(&address, &msg, ago);
        state.last_due = Some(due);
        state.phase = Phase::Scheduled;
        let (before, retries_left, last_polled) =
            (state.last_status, state.retries_left, state.last_polled);
        let next = record(
            state,
            &outcome,
            now,
            wall,
            &self.config,
            &mut self.rng,
            &mut self.events,
        );
        state.retries_left = retries_left;
        state.last_polled = last_polled;
        let next_due = next.max(later(now, state.interval()));
        self.scheduler.schedule(id, next_due);
        let mut own = outcome;
        own.meta = with_engine_meta(own.meta, state, next_due, now, wall);
        self.followed.push(Finished {
            monitor: state.spec.clone(),
            outcome: own,
            next_due,
            answers: Vec::new(),
            status_changed: state.last_status != before,
        });
        true
    }

    /// Gives a freed host slot to the least-recently-polled waiter still there (a waiter whose
    /// address is unreachable follows its last try instead, and the slot passes on).
    fn hand_over_host_slot(&mut self, host: &str, now: Instant, wall: DateTime<Utc>) {
        while let Some(next) = self.hosts.release(host) {
            let Some(state) = self.monitors.get_mut(&next) else {
                continue;
            };
            let Phase::WaitingForHost { due } = state.phase else {
                continue;
            };
            if state.asked.is_empty()
                && !self.in_flight.contains_key(&state.key)
                && self.follow(next, due, now, wall)
            {
                continue;
            }
            let Some(state) = self.monitors.get_mut(&next) else {
                continue;
            };
            if let Some(flight) = self.in_flight.get_mut(&state.key) {
                // An identical request started meanwhile: ride along, and pass the slot on.
                flight.members.push(next);
                state.phase = Phase::Running;
                state.last_due = Some(due);
                continue;
            }
            // The slot belongs to `host`, even if an edit moved the monitor elsewhere meanwhile:
            // it must be given back there.
            self.ready.push(start(
                &mut self.in_flight,
                state,
                due,
                now,
                host.to_string(),
            ));
            return;
        }
    }

    /// Results of monitors that followed an unreachable address's last try instead of
    /// checking (`unreachable`), since the last call: queued like any result.
    pub fn take_followed(&mut self) -> Vec<Finished> {
        std::mem::take(&mut self.followed)
    }

    /// Events since the last call.
    pub fn drain_events(&mut self) -> Vec<EngineEvent> {
        std::mem::take(&mut self.events)
    }

    /// Breaker state of a monitor, for tests and reports.
    pub fn breaker_state(&self, id: Uuid) -> Option<BreakerState> {
        self.monitors.get(&id).map(|s| s.breaker.state())
    }

    pub fn is_dead_letter(&self, id: Uuid) -> bool {
        self.monitors
            .get(&id)
            .is_some_and(|s| s.dead_letter.is_some())
    }

    pub fn paused_until(&self, id: Uuid) -> Option<Instant> {
        self.monitors.get(&id).and_then(|s| s.health.paused_until())
    }

    pub fn due_at(&self, id: Uuid) -> Option<Instant> {
        self.scheduler.due_at(id)
    }

    /// Where a monitor stands, for the model-based tests.
    #[cfg(test)]
    pub(crate) fn inspect(&self, id: Uuid) -> Option<Inspection> {
        let state = self.monitors.get(&id)?;
        let in_flight = self
            .in_flight
            .values()
            .filter(|flight| flight.members.contains(&id))
            .count();
        Some(Inspection {
            phase: match state.phase {
                Phase::Scheduled => "scheduled",
                Phase::WaitingForHost { .. } => "waiting_for_host",
                Phase::Running => "running",
            },
            in_flight,
            due_at: self.scheduler.due_at(id),
            consecutive_failures: state.health.consecutive_failures(),
            breaker: state.breaker.state(),
            dead_letter: state.dead_letter.is_some(),
        })
    }
}

#[cfg(test)]
#[derive(Debug, Clone)]
pub(crate) struct Inspection {
    pub phase: &'static str,
    /// How many requests in flight count this monitor as a member.
    pub in_flight: usize,
    pub due_at: Option<Instant>,
    pub consecutive_failures: u32,
    pub breaker: BreakerState,
    pub dead_letter: bool,
}

/// The longest delay the engine ever schedules: longer than any setting allows, short enough
/// that adding it to an `Instant` cannot overflow.
const MAX_DELAY: Duration = Duration::from_secs(7 * 24 * 3600);

/// `at + delay`, with `delay` capped at `MAX_DELAY`: never a panic, whatever a target or a
/// setting made `delay`.
fn later(at: Instant, delay: Duration) -> Instant {
    at.checked_add(delay.min(MAX_DELAY)).unwrap_or(at)
}

/// The first time on the grid `start + k × interval` that is not before `now`.
fn next_on_grid(start: Instant, interval: Duration, now: Instant) -> Instant {
    if start >= now || interval.is_zero() {
        return start;
    }
    let behind = (now - start).as_nanos();
    let periods = behind.div_ceil(interval.as_nanos());
    let ahead = interval.as_nanos() * periods - behind;
    later(now, Duration::from_nanos(ahead as u64))
}

fn start(
    in_flight: &mut HashMap<RequestKey, InFlight>,
    state: &mut MonitorState,
    due: Instant,
    now: Instant,
    slot_host: String,
) -> Dispatch {
    state.phase = Phase::Running;
    state.last_due = Some(due);
    in_flight.insert(
        state.key.clone(),
        InFlight {
            host: slot_host,
            address: state.address.clone(),
            timeout: Duration::from_millis(state.spec.timeout_ms),
            members: vec![state.spec.id],
            started: now,
        },
    );
    Dispatch {
        key: state.key.clone(),
        monitor: state.spec.clone(),
        validators: state.validators.clone(),
        lag: now.saturating_duration_since(due),
    }
}

fn push_event(
    events: &mut Vec<EngineEvent>,
    config: &EngineConfig,
    monitor_id: Uuid,
    at: DateTime<Utc>,
    kind: EventKind,
    next_due_at: Option<DateTime<Utc>>,
) {
    if events.len() >= config.max_buffered_events {
        events.remove(0);
    }
    events.push(EngineEvent {
        id: Some(Uuid::now_v7()),
        monitor_id,
        at,
        kind,
        next_due_at,
    });
}

fn wall_of(at: Instant, now: Instant, wall: DateTime<Utc>) -> DateTime<Utc> {
    wall + chrono::Duration::from_std(at.saturating_duration_since(now)).unwrap_or_default()
}

/// Updates one monitor's protection state with an outcome and decides when it runs next.
fn record(
    state: &mut MonitorState,
    outcome: &CheckOutcome,
    now: Instant,
    wall: DateTime<Utc>,
    config: &EngineConfig,
    rng: &mut StdRng,
    events: &mut Vec<EngineEvent>,
) -> Instant {
    let id = state.spec.id;
    let mut pending: Vec<EventKind> = Vec::new();
    state.last_polled = Some(now);
    match outcome.status {
        ResultStatus::Up => {
            state.last_success = Some(now);
            state.last_error = None;
        }
        ResultStatus::Down => state.last_error = Some(outcome.msg.clone()),
        ResultStatus::RateLimited => {}
    }
    // Validators come only from an answer that passed every assertion, so that a `304` can only
    // ever confirm content that was judged up; after a failure the next request is a full one.
    match outcome.status {
        ResultStatus::Up => state.validators = outcome.validators.clone(),
        ResultStatus::Down => state.validators = None,
        ResultStatus::RateLimited => {}
    }
    let interval = state.interval();
    // Numbers a target chooses (Retry-After, rate-limit resets) space checks out, never longer
    // than the monitor's own longest backoff, or five minutes when it sets none.
    let backoff_max = Duration::from_millis(state.common.target_wait_cap_ms());
    let mut next = match outcome.status {
        ResultStatus::Up => {
            if state.breaker.record_success() == Some(Transition::Closed) {
                pending.push(EventKind::BreakerClosed);
            }
            if state.dead_letter.take().is_some() {
                pending.push(EventKind::Revived);
            }
            state.backoff_attempt = 0;
            state.retries_left = state.common.retries;
            pending.extend(pause_event(state.health.record(true, now), now, wall));
            let step = match &mut state.adaptive {
                Some(adaptive) => adaptive.up(outcome.fingerprint, rng),
                None => interval,
            };
            // Fixed rate from the due time: no drift, and identical monitors stay in step.
            state
                .last_due
                .map_or(later(now, step), |due| later(due, step).max(now))
        }
        // The target asked for quiet: neither a failure nor a success. A half-open breaker's
        // probe ended without a verdict, so the next run may probe again.
        ResultStatus::RateLimited => {
            state.breaker.release_probe();
            later(now, interval)
        }
        ResultStatus::Down => {
            if let Some(adaptive) = &mut state.adaptive {
                adaptive.reset();
            }
            pending.extend(pause_event(state.health.record(false, now), now, wall));
            // Dead letters are opted into (`dead_letter_after` > 0); without, a permanent
            // error (a refused credential, a name that does not resolve) is checked every
            // interval like any failure, so that its fix is seen within one.
            let opted_in = state.common.dead_letter_after > 0;
            let hopeless = opted_in
                && (outcome.permanent
                    || state.health.consecutive_failures() >= state.common.dead_letter_after);
            if hopeless && state.dead_letter.is_none() {
                state.dead_letter = Some(DeadLetter {
                    monitor_id: id,
                    reason: outcome.msg.clone(),
                    since: wall,
                    // Filled in when reported (`report`).
                    failures: 0,
                    next_recheck: None,
                });
                pending.push(EventKind::DeadLettered {
                    reason: outcome.msg.clone(),
                });
            }
            if let Some(Transition::Opened { .. }) = state.breaker.record_failure(now) {
                pending.push(EventKind::BreakerOpened);
            }
            if state.dead_letter.is_some() {
                later(now, config.dead_letter_recheck)
            } else if let Some(until) = state.breaker.open_until() {
                until
            } else if state.retries_left > 0 {
                state.retries_left -= 1;
                later(now, Duration::from_millis(state.common.retry_interval_ms))
            } else {
                let delay = state.backoff.delay(state.backoff_attempt, rng);
                state.backoff_attempt = state.backoff_attempt.saturating_add(1);
                later(now, interval.max(delay))
            }
        }
    };
    if let Some(until) = state.health.paused_until() {
        next = next.max(until);
    }
    if let Some(asked) = outcome.retry_after {
        // The target chooses this number: it may space checks out, never park the monitor.
        let wait = asked.min(backoff_max);
        next = next.max(later(now, wait));
        pending.push(EventKind::RateLimited {
            retry_after_ms: wait.as_millis() as u64,
        });
    }
    if let Some(stated) = outcome.budget {
        let reserve = state.common.rate_limit_reserve;
        let low = budget::is_low(&stated, reserve);
        if let Some(wait) = budget::spacing(&stated, reserve) {
            next = next.max(later(now, wait.min(backoff_max)));
        }
        if low && !state.budget_low {
            pending.push(EventKind::BudgetLow {
                remaining: stated.remaining,
                limit: stated.limit,
                reset_ms: stated.reset.map(|r| r.as_millis() as u64),
            });
        }
        state.budget = Some(stated);
        state.budget_at = Some(now);
        state.budget_low = low;
    }
    let decisive = matches!(outcome.status, ResultStatus::Up | ResultStatus::Down);
    if decisive && state.last_status != Some(outcome.status) {
        pending.push(EventKind::StatusChanged {
            from: state.last_status,
            to: outcome.status,
        });
        state.last_status = Some(outcome.status);
    }
    let next_wall = wall_of(next, now, wall);
    for kind in pending {
        tracing::info!(monitor_id = %id, event = kind.name(), next_due_at = %next_wall, msg = %outcome.msg, "engine event");
        push_event(events, config, id, wall, kind, Some(next_wall));
    }
    next
}

fn pause_event(
    transition: Option<PauseTransition>,
    now: Instant,
    wall: DateTime<Utc>,
) -> Option<EventKind> {
    transition.map(|t| match t {
        PauseTransition::Paused { until } => EventKind::Paused {
            until: wall_of(until, now, wall),
        },
        PauseTransition::Resumed => EventKind::Resumed,
    })
}

/// Adds `engine` to a result's meta: what the engine thinks of the monitor, and when it runs
/// next, so central never mistakes a deliberate delay for a silent agent.
fn with_engine_meta(
    meta: Value,
    state: &MonitorState,
    next_due: Instant,
    now: Instant,
    wall: DateTime<Utc>,
) -> Value {
    EngineMeta {
        next_due_at: Some(wall_of(next_due, now, wall)),
        consecutive_failures: state.health.consecutive_failures(),
        success_rate: state.health.success_rate(),
        improving: state.health.improving(),
        breaker: state.breaker.state(),
        paused_until: state.health.paused_until().map(|u| wall_of(u, now, wall)),
        dead_letter: state.dead_letter.is_some(),
        interval_ms: (state.adaptive.as_ref()).map(|a| a.current().as_millis() as u64),
        rate_limit: state.budget.as_ref().map(|budget| RateLimitMeta {
            limit: budget.limit,
            remaining: budget.remaining,
            reset_at: budget.reset.map(|r| wall_of(later(now, r), now, wall)),
            low: state.budget_low,
        }),
    }
    .added_to(meta)
}
