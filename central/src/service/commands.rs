//! Operators' commands to pollers: run a monitor now (`check`), forget its engine state
//! (`reset`: breaker, backoff, auto-pause, dead letter), and run an unsaved monitor once
//! (`test`). Pollers only make outbound requests, so a command waits in `store::commands`
//! until its poller's long poll takes it (`commands_to_send`), and the operator's request
//! waits, a bounded time, for the acknowledgement (`acknowledge_command`).
//!
//! A `check`'s result is a real observation: it is ingested as soon as its acknowledgement
//! arrives (the same result uploaded later is then a duplicate, so it is stored once). A
//! `test`'s result is kept only on the command row, which is deleted within two hours after it expires (pruning is hourly).
//!
//! Cost: issuing writes one row per poller asked; a long poll reads its own poller's open
//! commands only when this replica heard of one for it (`cluster::bells`); a waiting
//! operator's request re-reads its own rows when any acknowledgement is stored. Must not:
//! place monitors (it asks `assignments`), or judge results (`ingest` does).

use std::time::Duration;

use serde_json::value::RawValue;
use shared_proto::poller_api::{
    CheckResult, CommandAck, CommandAckResponse, CommandAction, PollerCommand, COMMAND_RESEND_MS,
};
use shared_proto::settings_api::{CommandState, CommandView, CommandsAnswer, PollerStatus};
use shared_proto::{MonitorSpec, ValidationError};
use uuid::Uuid;

use super::ingest::{bounded_result, CappedResults, IncomingBatch};
use super::monitors::monitor_row;
use super::{stored_id, time_of, App};
use crate::domain::{Command, Monitor, Poller};
use crate::service::error::{ServiceError, ServiceResult};
use crate::store::{Acked, CommandRead};

/// How long a command is offered to its poller; after it, nobody waits for its answer.
pub const COMMAND_TTL_MS: i64 = 2 * 60 * 1000;
/// How long an operator's request waits for the answers unless it says otherwise, and the
/// most it may ask for (below the default `CENTRAL_REQUEST_TIMEOUT`, 30 s). Central waits at
/// most `CENTRAL_MAX_COMMAND_WAIT` whatever is asked.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(10);
pub const MAX_WAIT: Duration = Duration::from_secs(25);
/// A waiting request reads its rows again this often even if it heard nothing: an
/// announcement from another replica may be lost while the listener reconnects.
const RECHECK: Duration = Duration::from_secs(1);

/// What a long poll hands its poller, and when to look again for a command to offer anew.
#[derive(Debug, Default)]
pub struct ToSend {
    pub commands: Vec<PollerCommand>,
    /// Milliseconds since the epoch (the service clock).
    pub again_at: Option<i64>,
}

/// Which of a monitor's pollers to ask, and how long to wait for them.
#[derive(Debug, Clone, Copy)]
pub struct CommandRequest {
    /// One poller that runs the monitor; none: every poller that runs it (each location).
    pub poller_id: Option<Uuid>,
    pub wait: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Check,
    Reset,
}

impl App {
    /// Runs a monitor now on its poller(s), and answers with the fresh result(s).
    pub async fn check_monitor_now(
        &self,
        id: Uuid,
        request: CommandRequest,
    ) -> ServiceResult<CommandsAnswer> {
        self.command_monitor(id, Kind::Check, request).await
    }

    /// Clears a monitor's engine state on its poller(s) and runs it now.
    pub async fn reset_monitor_engine(
        &self,
        id: Uuid,
        request: CommandRequest,
    ) -> ServiceResult<CommandsAnswer> {
        self.command_monitor(id, Kind::Reset, request).await
    }

    /// Runs `spec` once where it would run if it were saved (one poller, or one per region),
    /// storing nothing of it.
    pub async fn test_monitor(
        &self,
        spec: MonitorSpec,
        wait: Duration,
    ) -> ServiceResult<CommandsAnswer> {
        self.validate_monitor(None, &spec).await?;
        let now = self.now_ms();
        let row = monitor_row(Uuid::new_v4(), &spec, now, now);
        let runs = match self.where_it_would_run(&row).await? {
            Ok(runs) => runs,
            Err(reason) => {
                return Err(ServiceError::Conflict(format!(
                    "no poller could run this monitor: {reason}"
                )))
            }
        };
        let mut commands = Vec::with_capacity(runs.len());
        for (poller, monitor) in runs {
            let poller = self.online_poller(&poller.to_string()).await?;
            commands.push(new_command(
                &poller.id,
                CommandAction::Test { monitor },
                now,
            ));
        }
        self.issue(commands, wait).await
    }

    /// `test_monitor` for an edit of monitor `id`: header values sent back as `HIDDEN` (the
    /// edit form shows them so) are tested with their stored values, as saving would keep them.
    pub async fn test_monitor_edit(
        &self,
        id: Uuid,
        mut spec: MonitorSpec,
        wait: Duration,
    ) -> ServiceResult<CommandsAnswer> {
        let stored = super::monitors::monitor_spec(&self.monitor_row(id).await?)?;
        super::monitor_secrets::keep(&mut spec, &stored)?;
        self.test_monitor(spec, wait).await
    }

    async fn command_monitor(
        &self,
        id: Uuid,
        kind: Kind,
        request: CommandRequest,
    ) -> ServiceResult<CommandsAnswer> {
        let row = self.monitor_row(id).await?;
        if row.kind == shared_proto::CheckKind::Heartbeat {
            return Err(ServiceError::Conflict(format!(
                "monitor {id} is a heartbeat monitor: no poller checks it, its job pings it"
            )));
        }
        if row.paused {
            return Err(ServiceError::Conflict(format!(
                "monitor {id} is paused, so no poller runs it; resume it first \
                 (PATCH /api/v1/monitors/{id} with {{\"paused\": false}})"
            )));
        }
        let runners = self.runners_of(&row).await?;
        let asked: Vec<String> = match request.poller_id {
            None => runners,
            Some(poller) if runners.contains(&poller.to_string()) => vec![poller.to_string()],
            Some(poller) => {
                return Err(ValidationError::reference(
                    "poller_id",
                    format!(
                        "poller {poller} does not run monitor {id}; it runs on: {}",
                        if runners.is_empty() {
                            "none".into()
                        } else {
                            runners.join(", ")
                        }
                    ),
                )
                .into())
            }
        };
        if asked.is_empty() {
            let why = row
                .placement_reason
                .clone()
                .unwrap_or_else(|| "it is not placed yet".into());
            return Err(ServiceError::Conflict(format!(
                "no poller runs monitor {id} now: {why}"
            )));
        }
        let now = self.now_ms();
        let mut commands = Vec::with_capacity(asked.len());
        for poller in asked {
            let poller = self.online_poller(&poller).await?;
            let action = match kind {
                Kind::Check => CommandAction::Check { monitor_id: id },
                Kind::Reset => CommandAction::Reset { monitor_id: id },
            };
            commands.push(new_command(&poller.id, action, now));
        }
        self.issue(commands, request.wait).await
    }

    /// The pollers that run a monitor now: its own, and each location's.
    async fn runners_of(&self, row: &Monitor) -> ServiceResult<Vec<String>> {
        let mut runners: Vec<String> = row.assigned_poller_id.iter().cloned().collect();
        let ids = [row.id.clone()];
        for location in self.store.locations_of(Some(&ids)).await? {
            runners.extend(location.assigned_poller_id);
        }
        runners.sort();
        runners.dedup();
        Ok(runners)
    }

    /// The poller, if it can hear a command soon: a command to an offline poller would only
    /// expire.
    async fn online_poller(&self, id: &str) -> ServiceResult<Poller> {
        let poller = self
            .store
            .poller(id)
            .await?
            .ok_or_else(|| ServiceError::Conflict(format!("poller {id} no longer exists")))?;
        if !poller.enabled {
            return Err(ServiceError::Conflict(format!(
                "poller {} ({id}) is disabled; enable it first",
                poller.name
            )));
        }
        if self.poller_status(&poller, self.now_ms()) == PollerStatus::Offline {
            return Err(ServiceError::Conflict(format!(
                "poller {} ({id}) is offline, so it cannot hear the command",
                poller.name
            )));
        }
        Ok(poller)
    }

    async fn issue(&self, commands: Vec<Command>, wait: Duration) -> ServiceResult<CommandsAnswer> {
        // Subscribed before anything is issued, so an answer cannot slip in unheard.
        let mut answered = self.cluster.bells.subscribe_answered();
        self.store.insert_commands(&commands).await?;
        for command in &commands {
            tracing::info!(command_id = %command.id, poller_id = %command.poller_id,
                kind = command.action.name(), "command issued");
            self.cluster.bells.ring(&command.poller_id);
        }
        let ids: Vec<String> = commands.into_iter().map(|c| c.id).collect();
        let deadline = tokio::time::Instant::now() + wait.min(self.limits.max_command_wait);
        loop {
            answered.borrow_and_update();
            let rows = self.store.commands_by_ids(&ids).await?;
            let complete = rows.iter().all(|r| r.acked_at.is_some());
            if complete || tokio::time::Instant::now() >= deadline {
                let now = self.now_ms();
                return Ok(CommandsAnswer {
                    complete,
                    commands: rows
                        .iter()
                        .map(|r| command_view(r, now))
                        .collect::<anyhow::Result<_>>()?,
                });
            }
            tokio::select! {
                _ = answered.changed() => {}
                _ = tokio::time::sleep(RECHECK) => {}
                _ = tokio::time::sleep_until(deadline) => {}
            }
        }
    }

    /// One command as it stands.
    pub async fn command(&self, id: Uuid) -> ServiceResult<CommandView> {
        let row = self
            .store
            .commands_by_ids(&[id.to_string()])
            .await?
            .pop()
            .ok_or_else(|| ServiceError::NotFound(format!("no command with id {id}")))?;
        Ok(command_view(&row, self.now_ms())?)
    }

    /// The commands to hand `poller` with its assignments: those not handed over yet, and
    /// those handed over `COMMAND_RESEND_MS` ago without an answer (the answer carrying them
    /// may have been lost); and when the next one handed over without an answer is due to be
    /// offered again. Reads the database only when this replica heard of a command for it
    /// since it last found none open. A row that cannot be read is left out (it expires).
    pub async fn commands_to_send(&self, poller: &Poller) -> ServiceResult<ToSend> {
        let bells = &self.cluster.bells;
        let Some(generation) = bells.unread(&poller.id) else {
            return Ok(ToSend::default());
        };
        let now = self.now_ms();
        let open = self.store.open_commands(&poller.id, now).await?;
        if open.is_empty() {
            bells.read_up_to(&poller.id, generation);
            return Ok(ToSend::default());
        }
        let resend_at = |c: &Command| c.sent_at.map(|sent| sent + COMMAND_RESEND_MS);
        let (due, waiting): (Vec<&Command>, Vec<&Command>) = open
            .iter()
            .partition(|c| resend_at(c).is_none_or(|at| at <= now));
        let mut commands = Vec::with_capacity(due.len());
        for command in &due {
            commands.push(PollerCommand {
                id: stored_id(&command.id)?,
                action: command.action.clone(),
            });
        }
        let ids: Vec<String> = due.iter().map(|c| c.id.clone()).collect();
        self.store.mark_commands_sent(&ids, now).await?;
        // Those just sent are offered again after COMMAND_RESEND_MS too.
        let again_at = waiting
            .iter()
            .filter_map(|c| resend_at(c))
            .chain((!due.is_empty()).then_some(now + COMMAND_RESEND_MS))
            .min();
        Ok(ToSend { commands, again_at })
    }

    /// Stores what came of a command, once; a `check`'s result is ingested as any result.
    pub async fn acknowledge_command(
        &self,
        poller: &Poller,
        id: Uuid,
        mut ack: CommandAck,
    ) -> ServiceResult<CommandAckResponse> {
        ack.trim();
        let unknown = || ServiceError::NotFound(format!("no command {id} for this poller"));
        let row = match self.store.command_to_answer(&id.to_string()).await? {
            CommandRead::Found(command) if command.poller_id == poller.id => Some(*command),
            // Issued by a newer central (a rolling upgrade): its answer is stored as sent
            // (a result bounded, never ingested) for the replica that issued it to read,
            // instead of a 404 the agent would take for a command gone.
            CommandRead::Unreadable {
                poller_id,
                acked,
                why,
            } if poller_id == poller.id => {
                if acked {
                    return Ok(CommandAckResponse { already: true });
                }
                tracing::info!(command_id = %id, "answer to a command this central cannot read stored as sent: {why}");
                None
            }
            _ => return Err(unknown()),
        };
        // The first answer stands: a repeat neither stores nor ingests anything.
        if row.as_ref().is_some_and(|r| r.acked_at.is_some()) {
            return Ok(CommandAckResponse { already: true });
        }
        let result = match (ack.result.take(), &row) {
            (None, _) => None,
            (Some(result), None) => Some(bounded_result(result)),
            (Some(result), Some(row)) => match self.accept_result(poller, row, result).await? {
                Accepted::Kept(result) => Some(result),
                // A result ingestion refuses still answers the command: the operator reads
                // why, and the agent (which will not send it again) is not left unheard.
                Accepted::Refused(reason) => {
                    ack.done = false;
                    ack.message = format!("the result was refused: {reason}");
                    None
                }
            },
        };
        let now = self.now_ms();
        let acked = self
            .store
            .acknowledge_command(
                &id.to_string(),
                &poller.id,
                ack.done,
                &ack.message,
                result.as_ref(),
                now,
            )
            .await?;
        match acked {
            Acked::Now => {
                tracing::info!(command_id = %id, poller_id = %poller.id, done = ack.done,
                    message = %ack.message, "command acknowledged");
                self.cluster.bells.ring_answered();
                Ok(CommandAckResponse { already: false })
            }
            Acked::Already => Ok(CommandAckResponse { already: true }),
            Acked::Unknown => Err(unknown()),
        }
    }

    /// A result sent with an acknowledgement: it must be about the command's monitor; a
    /// `check`'s is ingested (stored once, by its id), a `test`'s only bounded.
    async fn accept_result(
        &self,
        poller: &Poller,
        row: &Command,
        result: CheckResult,
    ) -> ServiceResult<Accepted> {
        let (expected, check) = match &row.action {
            CommandAction::Test { monitor } => (Some(monitor.id), false),
            CommandAction::Check { monitor_id } => (Some(*monitor_id), true),
            CommandAction::Reset { .. } => (None, false),
        };
        // A result about another monitor is the poller's mistake, refused outright.
        if Some(result.monitor_id) != expected {
            return Err(ValidationError::value(
                "result.monitor_id",
                "is not the monitor this command was about",
            )
            .into());
        }
        if check {
            let raw =
                RawValue::from_string(serde_json::to_string(&result).map_err(anyhow::Error::from)?)
                    .map_err(anyhow::Error::from)?;
            let batch = IncomingBatch {
                batch_id: Uuid::now_v7(),
                results: CappedResults {
                    kept: vec![raw],
                    total: 1,
                },
            };
            // What ingestion refuses (its monitor moved away, a clock far ahead) is a fact to
            // tell the operator, not a broken acknowledgement.
            match self.ingest(poller, batch).await {
                Ok(ingested) => {
                    if let Some(rejected) = ingested.rejected.first() {
                        return Ok(Accepted::Refused(rejected.reason.clone()));
                    }
                }
                Err(ServiceError::Validation(e)) => {
                    return Ok(Accepted::Refused(format!("`{}` {}", e.field, e.message)))
                }
                Err(e) => return Err(e),
            }
        }
        Ok(Accepted::Kept(bounded_result(result)))
    }
}

/// A result sent with an acknowledgement, as central takes it.
enum Accepted {
    Kept(CheckResult),
    /// Ingestion refused it, for this reason.
    Refused(String),
}

/// A new command, neither sent nor answered.
fn new_command(poller_id: &str, action: CommandAction, now: i64) -> Command {
    Command {
        id: Uuid::now_v7().to_string(),
        poller_id: poller_id.to_string(),
        action,
        created_at: now,
        expires_at: now + COMMAND_TTL_MS,
        sent_at: None,
        acked_at: None,
        done: None,
        message: None,
        result: None,
    }
}

fn command_view(row: &Command, now: i64) -> anyhow::Result<CommandView> {
    let state = match (row.acked_at, row.done, row.sent_at) {
        (Some(_), Some(true), _) => CommandState::Done,
        (Some(_), _, _) => CommandState::Failed,
        (None, _, _) if row.expires_at <= now => CommandState::Expired,
        (None, _, Some(_)) => CommandState::Sent,
        (None, _, None) => CommandState::Queued,
    };
    Ok(CommandView {
        id: stored_id(&row.id)?,
        kind: row.action.name().to_string(),
        poller_id: stored_id(&row.poller_id)?,
        monitor_id: match &row.action {
            CommandAction::Check { monitor_id } | CommandAction::Reset { monitor_id } => {
                Some(*monitor_id)
            }
            CommandAction::Test { .. } => None,
        },
        state,
        message: row.message.clone(),
        result: row.result.clone(),
        created_at: time_of(row.created_at),
        acked_at: row.acked_at.map(time_of),
        expires_at: time_of(row.expires_at),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::clock::Clock;
    use crate::store::testing::{hand_edit, poller_row};

    /// A poller's answer to a command a newer central issued (a kind this one cannot read,
    /// during a rolling upgrade) is stored as sent, once, for the replica that issued it:
    /// not a `404`, which the agent takes for a command gone and never answers again.
    #[tokio::test]
    async fn an_answer_to_a_command_this_central_cannot_read_is_kept_once() {
        let dir = tempfile::tempdir().unwrap();
        let args = crate::config::ServeArgs::with_sqlite_in(dir.path());
        let (clock, _handle) = Clock::manual(1_000_000);
        let app = App::open_with_clock(&args, clock).await.unwrap();
        let poller = poller_row(0, 1_000_000);
        app.store.insert_poller(&poller).await.unwrap();
        let monitor_id = Uuid::from_u128(7);
        let command = new_command(&poller.id, CommandAction::Reset { monitor_id }, 1_000_000);
        app.store
            .insert_commands(std::slice::from_ref(&command))
            .await
            .unwrap();
        hand_edit(&app.store, "UPDATE poller_commands SET kind = 'reboot'").await;
        let id: Uuid = command.id.parse().unwrap();
        let ack = || CommandAck {
            done: true,
            message: "rebooted".into(),
            result: None,
        };
        let first = app.acknowledge_command(&poller, id, ack()).await.unwrap();
        assert!(!first.already);
        let again = app.acknowledge_command(&poller, id, ack()).await.unwrap();
        assert!(again.already);
        let other = poller_row(0, 1_000_000);
        let refused = app
            .acknowledge_command(&other, id, ack())
            .await
            .unwrap_err();
        assert!(matches!(refused, ServiceError::NotFound(_)), "{refused}");
    }
}
