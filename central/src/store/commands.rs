//! `poller_commands`: operators' commands to pollers (check now, reset, test) from the moment
//! they are issued until their poller acknowledges them, once, or they expire. Issuing and
//! acknowledging announce themselves on PostgreSQL (`COMMANDS_CHANNEL`), so that the
//! replica holding the poller's long poll, and the one holding the operator's request, hear
//! of it at once.
//!
//! Cost: a long poll reads only its own poller's open commands (an index on the poller);
//! everything else touches the rows it names. Must not: decide who gets a command or what an
//! acknowledgement means (that is `service::commands`).

use anyhow::Context;
use shared_proto::poller_api::{CheckResult, CommandAction};
use sqlx::any::AnyRow;
use sqlx::Row;

use super::dialect::{listed, notify};
use super::readable::readable;
use super::Store;
use crate::domain::Command;

/// Announced by a transaction that issues commands (`issued:<poller id>`, one per poller) or
/// acknowledges one (`done:<command id>`).
pub(super) const COMMANDS_CHANNEL: &str = "central_poller_commands";

/// A command as stored: its action as a kind, a monitor id and a `test`'s monitor as JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CommandRow {
    id: String,
    poller_id: String,
    kind: String,
    monitor_id: Option<String>,
    spec: Option<String>,
    created_at: i64,
    expires_at: i64,
    sent_at: Option<i64>,
    acked_at: Option<i64>,
    done: Option<bool>,
    message: Option<String>,
    /// The result the agent sent back, as JSON.
    result: Option<String>,
}

impl TryFrom<CommandRow> for Command {
    type Error = anyhow::Error;

    /// An error names the command and what does not read (a kind a newer central wrote).
    fn try_from(row: CommandRow) -> anyhow::Result<Command> {
        let id = row.id;
        let column = |name: &str| format!("command {id}: its stored {name}");
        let monitor_id = || -> anyhow::Result<uuid::Uuid> {
            let text = row.monitor_id.as_deref().context("none")?;
            Ok(text.parse()?)
        };
        let action = match row.kind.as_str() {
            "check" => CommandAction::Check {
                monitor_id: monitor_id().with_context(|| column("monitor_id"))?,
            },
            "reset" => CommandAction::Reset {
                monitor_id: monitor_id().with_context(|| column("monitor_id"))?,
            },
            "test" => CommandAction::Test {
                monitor: serde_json::from_str(row.spec.as_deref().unwrap_or_default())
                    .with_context(|| column("spec"))?,
            },
            other => {
                return Err(anyhow::anyhow!("a kind central does not know, `{other}`"))
                    .with_context(|| column("kind"))
            }
        };
        Ok(Command {
            result: row
                .result
                .as_deref()
                .map(serde_json::from_str)
                .transpose()
                .with_context(|| column("result"))?,
            poller_id: row.poller_id,
            action,
            created_at: row.created_at,
            expires_at: row.expires_at,
            sent_at: row.sent_at,
            acked_at: row.acked_at,
            done: row.done,
            message: row.message,
            id,
        })
    }
}

/// A command as its poller's answer finds it.
#[derive(Debug)]
pub enum CommandRead {
    Found(Box<Command>),
    /// Its row does not read (a kind a newer central issued): whose it is, whether it was
    /// answered, and why it does not read. Its answer is still stored, for the replica that
    /// issued it to read.
    Unreadable {
        poller_id: String,
        acked: bool,
        why: String,
    },
    Gone,
}

/// What an acknowledgement found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acked {
    /// This was the first: it is stored.
    Now,
    /// It was acknowledged before; the first answer stands.
    Already,
    /// No such command for this poller.
    Unknown,
}

const COLUMNS: &str = "id, poller_id, kind, monitor_id, spec, created_at, expires_at, sent_at, \
                       acked_at, done, message, result";

fn command_row(row: &AnyRow) -> sqlx::Result<CommandRow> {
    Ok(CommandRow {
        id: row.try_get(0)?,
        poller_id: row.try_get(1)?,
        kind: row.try_get(2)?,
        monitor_id: row.try_get(3)?,
        spec: row.try_get(4)?,
        created_at: row.try_get(5)?,
        expires_at: row.try_get(6)?,
        sent_at: row.try_get(7)?,
        acked_at: row.try_get(8)?,
        done: row.try_get::<Option<i64>, _>(9)?.map(|d| d != 0),
        message: row.try_get(10)?,
        result: row.try_get(11)?,
    })
}

impl Store {
    /// Stores `commands` (new: neither sent nor answered) and announces them to their
    /// pollers' replicas.
    pub async fn insert_commands(&self, commands: &[Command]) -> anyhow::Result<()> {
        if commands.is_empty() {
            return Ok(());
        }
        let _guard = self.write_lock().await;
        let mut tx = self.writer.begin().await?;
        for command in commands {
            let (monitor_id, spec) = match &command.action {
                CommandAction::Check { monitor_id } | CommandAction::Reset { monitor_id } => {
                    (Some(monitor_id.to_string()), None)
                }
                CommandAction::Test { monitor } => (None, Some(serde_json::to_string(monitor)?)),
            };
            sqlx::query(
                "INSERT INTO poller_commands \
                 (id, poller_id, kind, monitor_id, spec, created_at, expires_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .bind(&command.id)
            .bind(&command.poller_id)
            .bind(command.action.name())
            .bind(monitor_id)
            .bind(spec)
            .bind(command.created_at)
            .bind(command.expires_at)
            .execute(&mut *tx)
            .await?;
        }
        let mut pollers: Vec<&str> = commands.iter().map(|c| c.poller_id.as_str()).collect();
        pollers.sort_unstable();
        pollers.dedup();
        for poller in pollers {
            let payload = format!("issued:{poller}");
            notify(self.backend(), &mut tx, COMMANDS_CHANNEL, &payload).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// `poller_id`'s commands not yet acknowledged nor expired at `now`, oldest first; one
    /// that does not read is left out (logged) and expires.
    pub async fn open_commands(&self, poller_id: &str, now: i64) -> anyhow::Result<Vec<Command>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM poller_commands \
             WHERE poller_id = $1 AND acked_at IS NULL AND expires_at > $2 \
             ORDER BY created_at, id"
        );
        let rows = sqlx::query(&sql)
            .bind(poller_id)
            .bind(now)
            .fetch_all(&self.pool)
            .await?;
        let rows = rows.iter().map(command_row).collect::<sqlx::Result<_>>()?;
        Ok(readable("command", rows))
    }

    /// Notes that `ids` were handed to their poller at `now`.
    pub async fn mark_commands_sent(&self, ids: &[String], now: i64) -> anyhow::Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let _guard = self.write_lock().await;
        let sql = format!(
            "UPDATE poller_commands SET sent_at = $2 WHERE {}",
            listed(self.backend(), "id", "$1")
        );
        sqlx::query(&sql)
            .bind(serde_json::to_string(ids)?)
            .bind(now)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Stores what came of `id`, if `poller_id` was asked and nobody answered before
    /// (compare-and-set on `acked_at`: two replicas receiving the same answer store it once).
    pub async fn acknowledge_command(
        &self,
        id: &str,
        poller_id: &str,
        done: bool,
        message: &str,
        result: Option<&CheckResult>,
        now: i64,
    ) -> anyhow::Result<Acked> {
        let result = result.map(serde_json::to_string).transpose()?;
        let _guard = self.write_lock().await;
        let mut tx = self.writer.begin().await?;
        let stored = sqlx::query(
            "UPDATE poller_commands SET acked_at = $3, done = $4, message = $5, result = $6 \
             WHERE id = $1 AND poller_id = $2 AND acked_at IS NULL",
        )
        .bind(id)
        .bind(poller_id)
        .bind(now)
        .bind(i64::from(done))
        .bind(message)
        .bind(result)
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        let outcome = if stored {
            let payload = format!("done:{id}");
            notify(self.backend(), &mut tx, COMMANDS_CHANNEL, &payload).await?;
            Acked::Now
        } else {
            let known =
                sqlx::query("SELECT 1 FROM poller_commands WHERE id = $1 AND poller_id = $2")
                    .bind(id)
                    .bind(poller_id)
                    .fetch_optional(&mut *tx)
                    .await?
                    .is_some();
            if known {
                Acked::Already
            } else {
                Acked::Unknown
            }
        };
        tx.commit().await?;
        Ok(outcome)
    }

    /// The commands with these ids that exist; an error naming one that does not read (a
    /// kind a newer central issued: its operator's replica reads it).
    pub async fn commands_by_ids(&self, ids: &[String]) -> anyhow::Result<Vec<Command>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT {COLUMNS} FROM poller_commands WHERE {} \
             ORDER BY created_at, id",
            listed(self.backend(), "id", "$1")
        );
        let rows = sqlx::query(&sql)
            .bind(serde_json::to_string(ids)?)
            .fetch_all(&self.pool)
            .await?;
        let rows: Vec<CommandRow> = rows.iter().map(command_row).collect::<sqlx::Result<_>>()?;
        rows.into_iter().map(Command::try_from).collect()
    }

    /// The command `id` as its poller's answer reads it (`CommandRead`).
    pub async fn command_to_answer(&self, id: &str) -> anyhow::Result<CommandRead> {
        let sql = format!("SELECT {COLUMNS} FROM poller_commands WHERE id = $1");
        let row = sqlx::query(&sql)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        let Some(row) = row.as_ref().map(command_row).transpose()? else {
            return Ok(CommandRead::Gone);
        };
        let (poller_id, acked) = (row.poller_id.clone(), row.acked_at.is_some());
        Ok(match Command::try_from(row) {
            Ok(command) => CommandRead::Found(Box::new(command)),
            Err(e) => CommandRead::Unreadable {
                poller_id,
                acked,
                why: format!("{e:#}"),
            },
        })
    }

    /// Deletes commands that expired before `before`.
    pub async fn prune_commands(&self, before: i64) -> anyhow::Result<u64> {
        let _guard = self.write_lock().await;
        let done = sqlx::query("DELETE FROM poller_commands WHERE expires_at < $1")
            .bind(before)
            .execute(&self.writer)
            .await?;
        Ok(done.rows_affected())
    }
}

#[cfg(test)]
mod tests {
    use shared_proto::poller_api::CommandAction;
    use uuid::Uuid;

    use super::{Acked, CommandRead};
    use crate::domain::Command;
    use crate::store::testing::sqlite_store;

    fn command(id: &str, action: CommandAction) -> Command {
        Command {
            id: id.into(),
            poller_id: "p".into(),
            action,
            created_at: 1,
            expires_at: 100,
            sent_at: None,
            acked_at: None,
            done: None,
            message: None,
            result: None,
        }
    }

    /// A command reads back as issued. One whose kind a newer central wrote is left out of
    /// what its poller is handed (it expires); reading it by id is an error naming it; its
    /// poller's answer still finds it (to be stored as sent), once.
    #[tokio::test]
    async fn a_command_that_does_not_read_is_not_handed_over_but_its_answer_is_kept() {
        let (store, _dir) = sqlite_store().await;
        let monitor_id = Uuid::from_u128(7);
        let (a, b) = (
            command("a", CommandAction::Check { monitor_id }),
            command("b", CommandAction::Reset { monitor_id }),
        );
        store
            .insert_commands(&[a.clone(), b.clone()])
            .await
            .unwrap();
        assert_eq!(
            store.open_commands("p", 2).await.unwrap(),
            [a.clone(), b.clone()]
        );
        sqlx::query("UPDATE poller_commands SET kind = 'reboot' WHERE id = 'a'")
            .execute(&store.writer)
            .await
            .unwrap();
        let handed = store.open_commands("p", 2).await.unwrap();
        assert_eq!(handed, vec![b]);
        let said = format!(
            "{:#}",
            store.commands_by_ids(&["a".into()]).await.unwrap_err()
        );
        assert!(
            said.contains("command a") && said.contains("reboot"),
            "{said}"
        );
        let answered = |read| matches!(read, CommandRead::Unreadable { ref poller_id, acked, .. } if poller_id == "p" && acked);
        let read = store.command_to_answer("a").await.unwrap();
        assert!(
            matches!(read, CommandRead::Unreadable { acked: false, .. }),
            "{read:?}"
        );
        assert_eq!(
            store
                .acknowledge_command("a", "p", true, "rebooted", None, 3)
                .await
                .unwrap(),
            Acked::Now
        );
        assert!(answered(store.command_to_answer("a").await.unwrap()));
        assert!(matches!(
            store.command_to_answer("zz").await.unwrap(),
            CommandRead::Gone
        ));
    }
}
