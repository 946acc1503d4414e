//! Heartbeat (push) monitors: a job reports in at its monitor's ping URL instead of being
//! checked. Central stands in for an agent: a ping, and a ping that did not come in time,
//! become ordinary results (poller id nil) stored through `App::store_results`, so verdicts,
//! confirmations, uptime, alerting and notices are the same as any monitor's.
//!
//! - A ping (`/ping/{token}`, `/start`, `/fail`, `/{exit_code}`) costs one indexed read by
//!   its token's SHA-256 and a few writes; its token is a random secret stored hashed, shown
//!   once (at creation, and on a new one).
//! - Lateness needs no scan: `status::derive` reads `late` (`lateness`) and `changes_at`
//!   names it, so the due index wakes alerting then; alerting stores the late result
//!   (`store_late`) with an id made of the monitor and the instant, so two lease holders in
//!   turn cannot store it twice.
//!
//! Must not: place these monitors on agents (`assignments` skips them) or deliver anything.

pub mod schedule;

use std::collections::HashMap;

use serde_json::json;
use shared_proto::heartbeat::{PingKind, PingList, PingUrl, PingView};
use shared_proto::poller_api::ResultStatus;
use shared_proto::settings::{CheckSettings, MonitorSettings};
use shared_proto::{CheckKind, MonitorSpec, PollerMode, ValidationError};
use uuid::Uuid;

use self::schedule::Schedule;
use super::ingest::{Sender, Upload};
use super::status::Lateness;
use super::{auth, time_of, App};
use crate::domain::Monitor;
use crate::service::error::{ServiceError, ServiceResult};
use crate::store::{NewResult, PingRow, PushState, StatusRow};

/// The pings kept per monitor (the oldest gives way).
pub const KEPT_PINGS: i64 = 50;
/// The part of a ping's body kept: its end, where a job's output says how it ended.
pub const KEPT_BODY_BYTES: usize = 10 * 1024;
/// How long after a deadline alerting waits before it stores the late result: a ping that
/// arrived just before the deadline may still be on its way into the store (and another
/// replica's clock may be a little behind). Meanwhile the monitor shows `down` but nothing is
/// told; a ping that lands in time makes it as if the deadline had been met.
pub const LATE_SETTLE_MS: i64 = 5_000;
/// The most late instants one store walks past (central was down a long while): the newest
/// of them is stored; the time before it counts as unmeasured, which it was.
const MAX_CATCH_UP: usize = 10_000;

/// A ping as the HTTP layer hands it over.
#[derive(Debug, Clone)]
pub struct Ping {
    pub kind: PingKind,
    pub source: String,
    pub method: String,
    pub body: Vec<u8>,
}

/// When a heartbeat monitor's silence is a failure, from what it last heard: a ping is
/// expected after its newest result (a ping, or a late result) or after `watched_from` (the
/// function of that name), whichever is later; a job that pinged `/start` since must finish
/// within the grace.
pub fn lateness(
    schedule: &Schedule,
    watched_from: i64,
    latest: Option<&StatusRow>,
    state: PushState,
) -> Lateness {
    let newest = latest.map(|l| l.last_result_at);
    let anchor = newest.map_or(watched_from, |t| t.max(watched_from));
    let expected = schedule.expected_after(anchor);
    let mut late = Lateness {
        at: expected.saturating_add(schedule.grace_ms),
        why: match state.last_ping_at {
            Some(last) => format!(
                "no ping since {}; one was expected by {}",
                rfc3339(last),
                rfc3339(expected)
            ),
            None => format!("no ping yet; one was expected by {}", rfc3339(expected)),
        },
    };
    let started = state
        .started_at
        .filter(|s| *s >= watched_from && newest.is_none_or(|n| *s > n));
    if let Some(started) = started {
        let finish_by = started.saturating_add(schedule.grace_ms);
        if finish_by < late.at {
            late = Lateness {
                at: finish_by,
                why: format!(
                    "the job started at {} and did not finish within its grace of {}",
                    rfc3339(started),
                    humantime::format_duration(std::time::Duration::from_millis(
                        schedule.grace_ms.max(0) as u64
                    ))
                ),
            };
        }
    }
    late
}

/// What a heartbeat monitor's spec must hold beyond its shape: no poller (central answers
/// it), and a schedule that means something (a cron expression, a time zone).
pub(super) fn validate_spec(spec: &MonitorSpec) -> Result<(), ValidationError> {
    let placed = spec.poller_mode != PollerMode::Auto
        || spec.poller_id.is_some()
        || spec.poller_region.is_some()
        || spec.poller_datacenter.is_some()
        || spec.poller_capability.is_some()
        || spec.poller_regions.is_some()
        || spec.quorum.is_some();
    if placed {
        return Err(ValidationError::combination(
            "poller_mode",
            "a heartbeat monitor is answered by central, not run by pollers: leave \
             poller_mode `auto` and the poller fields unset",
        ));
    }
    if let CheckSettings::Heartbeat(settings) =
        MonitorSettings::parse(CheckKind::Heartbeat, &spec.settings)?.check
    {
        Schedule::from_settings(&settings, spec.interval_ms as i64)?;
    }
    Ok(())
}

/// Since when a heartbeat monitor's silence counts: its creation, its last resume, its
/// schedule's last change, and central's return from an outage (pings sent while nobody
/// answered them could not be heard), whichever is last.
pub fn watched_from(monitor: &Monitor, state: PushState, watching_since: i64) -> i64 {
    since(
        monitor.created_at,
        monitor.resumed_at,
        state,
        watching_since,
    )
}

fn since(created_at: i64, resumed_at: Option<i64>, state: PushState, watching_since: i64) -> i64 {
    [
        Some(created_at),
        resumed_at,
        state.schedule_at,
        Some(watching_since),
    ]
    .into_iter()
    .flatten()
    .max()
    .unwrap_or_default()
}

/// Whether an edit changed when a heartbeat monitor's pings are expected (its period, cron
/// expression, time zone or grace): only that starts its clock again.
pub(super) fn schedule_changed(old: &Monitor, new: &Monitor) -> bool {
    let key = |row: &Monitor| match MonitorSettings::parse(CheckKind::Heartbeat, &row.settings)
        .ok()?
        .check
    {
        CheckSettings::Heartbeat(s) => Some((
            s.period(row.interval_ms.max(0) as u64),
            s.cron,
            s.time_zone,
            s.grace_ms,
        )),
        _ => None,
    };
    key(old) != key(new)
}

fn rfc3339(ms: i64) -> String {
    time_of(ms).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The id of the late result of `monitor_id` at `at`: the same on every replica.
fn late_result_id(monitor_id: &str, at: i64) -> Uuid {
    Uuid::new_v5(
        &Uuid::NAMESPACE_OID,
        format!("late:{monitor_id}:{at}").as_bytes(),
    )
}

/// A ping's body as kept: its last `KEPT_BODY_BYTES`, cut at a character, NULs replaced.
fn kept_body(body: &[u8]) -> String {
    let mut start = body.len().saturating_sub(KEPT_BODY_BYTES);
    // Not inside a character: UTF-8 continuation bytes are 0b10xxxxxx.
    while start < body.len() && body[start] & 0xC0 == 0x80 {
        start += 1;
    }
    String::from_utf8_lossy(&body[start..]).replace('\0', "\u{FFFD}")
}

impl App {
    /// A new ping URL for a heartbeat monitor; the previous one stops working.
    pub async fn new_ping_url(&self, id: Uuid) -> ServiceResult<PingUrl> {
        let monitor = self.monitor_row(id).await?;
        if monitor.kind != CheckKind::Heartbeat {
            return Err(ServiceError::Conflict(format!(
                "monitor {id} is a `{}` monitor; only heartbeat monitors have a ping URL",
                monitor.kind
            )));
        }
        let token = auth::new_secret();
        self.store
            .set_ping_token(&monitor.id, &auth::sha256_hex(&token))
            .await?;
        Ok(PingUrl {
            ping_url: self.ping_url(&token),
        })
    }

    fn ping_url(&self, token: &str) -> String {
        let base = self
            .public_url
            .as_deref()
            .unwrap_or("")
            .trim_end_matches('/');
        format!("{base}/ping/{token}")
    }

    /// A ping: kept in the monitor's ring, and, unless it only says the job started, stored
    /// as the monitor's result (`up`, or `down` for `/fail` and a non-zero exit code). A
    /// paused monitor keeps the ping and shows nothing of it.
    pub async fn ping(&self, token: &str, ping: Ping) -> ServiceResult<()> {
        let unknown = || ServiceError::NotFound("no heartbeat monitor has this ping URL".into());
        let monitor_id = self
            .store
            .monitor_of_ping_token(&auth::sha256_hex(token))
            .await?
            .ok_or_else(unknown)?;
        let Some(monitor) = self.store.monitor(&monitor_id).await? else {
            return Err(unknown());
        };
        let now = self.now_ms();
        let state = self
            .store
            .push_states(std::slice::from_ref(&monitor.id))
            .await?
            .remove(&monitor.id)
            .unwrap_or_default();
        let kind = ping.kind;
        let row = PingRow {
            at: now,
            kind: kind.as_str(),
            source: ping.source.clone(),
            method: ping.method.clone(),
            body: kept_body(&ping.body),
        };
        self.store
            .record_ping(&monitor.id, &row, kind == PingKind::Start, KEPT_PINGS)
            .await?;
        if kind == PingKind::Start {
            self.cluster.wakes.alerting.notify_one();
            return Ok(());
        }
        if monitor.paused {
            return Ok(());
        }
        let schedule = Schedule::of(monitor.kind, &monitor.settings, monitor.interval_ms);
        let msg = match kind {
            PingKind::Fail => format!("the job reported a failure (ping from {})", ping.source),
            PingKind::Exit(0) | PingKind::Success => format!("ping from {}", ping.source),
            PingKind::Exit(code) => {
                format!(
                    "the job exited with code {code} (ping from {})",
                    ping.source
                )
            }
            PingKind::Start => unreachable!("answered above"),
        };
        // The job's run time, when its previous ping was the `/start` of this run.
        let duration = state
            .started_at
            .filter(|s| *s <= now && Some(*s) == state.last_ping_at)
            .map(|s| now - s);
        let result = NewResult {
            id: Uuid::now_v7().to_string(),
            monitor_id: monitor.id.clone(),
            region: None,
            ts: now,
            status: if kind.failed() {
                ResultStatus::Down
            } else {
                ResultStatus::Up
            },
            latency_ms: duration,
            next_due_at: schedule.as_ref().map(|s| s.expected_after(now)),
            dependencies: None,
            msg,
            meta: json!({"ping": {"kind": row.kind, "source": row.source, "method": row.method}})
                .to_string(),
        };
        self.store_own_results(vec![result], now).await
    }

    /// The kept pings of a heartbeat monitor, newest first.
    pub async fn pings(&self, id: Uuid) -> ServiceResult<PingList> {
        let monitor = self.monitor_row(id).await?;
        let pings = self.store.pings_of(&monitor.id).await?;
        Ok(PingList {
            pings: pings
                .into_iter()
                .map(|p| PingView {
                    at: time_of(p.at),
                    kind: p.kind,
                    source: p.source,
                    method: p.method,
                    body: p.body,
                })
                .collect(),
        })
    }

    /// Stores the late results of heartbeat monitors alerting found late (`late` by id):
    /// each at the newest late instant not after `now`.
    pub(super) async fn store_late(
        &self,
        monitors: &[Monitor],
        late: &HashMap<String, Lateness>,
        now: i64,
    ) -> ServiceResult<()> {
        let mut results = Vec::new();
        for monitor in monitors {
            let (Some(late), Some(schedule)) = (
                late.get(&monitor.id),
                Schedule::of(monitor.kind, &monitor.settings, monitor.interval_ms),
            ) else {
                continue;
            };
            let mut at = late.at;
            for _ in 0..MAX_CATCH_UP {
                let next = schedule.late_after(at);
                if next > now || next <= at {
                    break;
                }
                at = next;
            }
            results.push(NewResult {
                id: late_result_id(&monitor.id, at).to_string(),
                monitor_id: monitor.id.clone(),
                region: None,
                ts: at,
                status: ResultStatus::Down,
                latency_ms: None,
                next_due_at: None,
                dependencies: None,
                msg: late.why.clone(),
                meta: json!({"late": true}).to_string(),
            });
        }
        self.store_own_results(results, now).await
    }

    /// Central's own results (poller id nil) for these monitors.
    async fn store_own_results(&self, results: Vec<NewResult>, now: i64) -> ServiceResult<()> {
        if results.is_empty() {
            return Ok(());
        }
        let nil = Uuid::nil().to_string();
        let upload = Upload::new(&nil, None, results, Sender::Central, now);
        self.store_upload(&upload).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared_proto::heartbeat::HeartbeatSettings;

    fn every_10s() -> Schedule {
        Schedule::from_settings(
            &HeartbeatSettings {
                grace_ms: 2_000,
                ..HeartbeatSettings::default()
            },
            10_000,
        )
        .unwrap()
    }

    fn latest(at: i64) -> StatusRow {
        StatusRow {
            status: ResultStatus::Up,
            confirmed: Some(shared_proto::poller_api::Verdict::Up),
            run_length: 0,
            poller_id: String::new(),
            last_result_at: at,
            newest_status: ResultStatus::Up,
            latency_ms: None,
            message: String::new(),
            next_due_at: None,
        }
    }

    #[test]
    fn late_a_period_and_its_grace_after_the_newest_result_or_a_restart_of_the_clock() {
        let schedule = every_10s();
        let state = PushState {
            last_ping_at: Some(100_000),
            ..PushState::default()
        };
        let late = lateness(&schedule, 0, Some(&latest(100_000)), state);
        assert_eq!(late.at, 112_000);
        assert!(late.why.starts_with("no ping since"), "{}", late.why);
        // Resumed (or rescheduled) after its last ping: the clock starts again.
        assert_eq!(
            lateness(&schedule, 105_000, Some(&latest(100_000)), state).at,
            117_000
        );
        // Never pinged.
        let never = lateness(&schedule, 0, None, PushState::default());
        assert_eq!(never.at, 12_000);
        assert!(never.why.starts_with("no ping yet"), "{}", never.why);
    }

    #[test]
    fn the_clock_starts_again_at_a_resume_a_new_schedule_or_centrals_return_not_an_edit() {
        // Created at 1 s, resumed at 5 s (edited at 90 s: `updated_at` is not read).
        let state = PushState::default();
        assert_eq!(since(1_000, Some(5_000), state, 0), 5_000);
        let rescheduled = PushState {
            schedule_at: Some(7_000),
            ..state
        };
        assert_eq!(since(1_000, Some(5_000), rescheduled, 0), 7_000);
        // Central was down until 60 s: pings could not be heard before.
        assert_eq!(since(1_000, Some(5_000), rescheduled, 60_000), 60_000);
        let late = lateness(&every_10s(), 60_000, Some(&latest(20_000)), state);
        assert_eq!(late.at, 72_000);
    }

    #[test]
    fn a_started_job_must_finish_within_its_grace() {
        let schedule = every_10s();
        let started = PushState {
            started_at: Some(101_000),
            last_ping_at: Some(101_000),
            ..PushState::default()
        };
        let late = lateness(&schedule, 0, Some(&latest(100_000)), started);
        assert_eq!(late.at, 103_000);
        assert!(
            late.why.contains("did not finish within its grace of 2s"),
            "{}",
            late.why
        );
        // A start before the newest result was finished by it.
        let finished = PushState {
            started_at: Some(99_000),
            ..started
        };
        assert_eq!(
            lateness(&schedule, 0, Some(&latest(100_000)), finished).at,
            112_000
        );
    }

    #[test]
    fn a_body_keeps_its_end_cut_at_a_character_without_nuls() {
        let mut body = b"first line\n".to_vec();
        body.extend("é".repeat(KEPT_BODY_BYTES).into_bytes());
        body.push(0);
        let kept = kept_body(&body);
        // The NUL's stand-in takes 3 bytes where the NUL took one.
        assert!(kept.len() <= KEPT_BODY_BYTES + 2, "{}", kept.len());
        assert!(kept.ends_with("é\u{FFFD}"), "the end is kept");
        assert!(!kept.contains("first line"));
        assert!(kept.trim_end_matches('\u{FFFD}').chars().all(|c| c == 'é'));
        assert_eq!(kept_body(b"a\0b"), "a\u{FFFD}b");
    }

    #[test]
    fn a_late_result_has_the_same_id_on_every_replica() {
        assert_eq!(late_result_id("m", 5), late_result_id("m", 5));
        assert_ne!(late_result_id("m", 5), late_result_id("m", 6));
    }
}
