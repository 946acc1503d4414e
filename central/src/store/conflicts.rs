//! Transactions PostgreSQL aborts to break a conflict are run again.
//!
//! Writers take each monitor's rows in one order (its `monitors` or `monitor_locations` row,
//! then its status rows, then its `alert_due` row; several monitors in id order, in one pass:
//! a writer that marks due in more than one statement locks them all first, as ingest does with
//! `due::lock_due_rows`, and a window's edit marks before and after at once), so two
//! transactions rarely wait on each other in a cycle. Rarely is not never: a deletion walks its
//! children after its own rows, and a look may hold rows of two monitors a deletion links.
//! PostgreSQL breaks such a cycle by aborting one transaction (a deadlock, `40P01`), which
//! leaves nothing of it stored; running it again is what PostgreSQL's manual asks of clients.
//! Owns only that rule, and the lock every upload takes first (`hold_monitors`): the
//! transactions themselves stay with their modules.

use std::future::Future;

use super::statements::{Arg, Statements};
use super::Backend;

/// How many times a transaction is tried in all: a cycle needs another writer in it, and the
/// other writer's transaction commits when this one is aborted, so a second try rarely meets
/// the same cycle.
const ATTEMPTS: u32 = 3;

/// The SQLSTATEs of a transaction aborted to break a conflict: a deadlock, and a serialization
/// failure (not raised at central's isolation level, but the same answer if it is).
const CONFLICT_CODES: [&str; 2] = ["40P01", "40001"];

/// Whether `error` is a transaction PostgreSQL aborted to break a conflict.
pub fn is_conflict(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        matches!(
            cause.downcast_ref::<sqlx::Error>(),
            Some(sqlx::Error::Database(db))
                if db.code().is_some_and(|code| CONFLICT_CODES.contains(&code.as_ref()))
        )
    })
}

/// Runs `transaction` (a whole transaction: begun, written and committed inside) until it is
/// not aborted as a conflict, at most `ATTEMPTS` times.
pub(super) async fn retrying<T, F, Fut>(what: &str, mut transaction: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<T>>,
{
    let mut attempt = 1;
    loop {
        match transaction().await {
            Err(error) if attempt < ATTEMPTS && is_conflict(&error) => {
                tracing::info!(
                    attempt,
                    "{what}: aborted by the database as a conflict with \
                    another writer, run again: {error:#}"
                );
                attempt += 1;
            }
            outcome => return outcome,
        }
    }
}

/// Holds, on PostgreSQL until the transaction ends, the `monitors` rows of `monitor_ids`, taken
/// in one statement in id order: two uploads sharing a monitor queue
/// whole, before either touches another row of it; nothing on SQLite (one writer at a time).
/// The first of a monitor's rows, as every writer takes them (above).
///
/// Why not only its status rows: an upload takes them (the monitor's, then its locations') in
/// key order in each statement, but rows can only be locked once they exist. A monitor's first
/// results, from two locations at once, create them, and rows another upload commits between
/// two statements join the later statement's locks out of order. Two uploads for one
/// multi-location monitor then waited on each other in a cycle (seen in CI, broken by
/// PostgreSQL and run again by `retrying`). A monitor's own row exists before its first
/// result. `FOR NO KEY UPDATE`: the foreign keys of rows that name the monitor (`FOR KEY
/// SHARE`) do not wait on it. A row lock, not an advisory lock per monitor: those take a slot
/// each in the server's shared lock table until the transaction ends, which an upload of
/// thousands of monitors (a queue drained after an outage) could exhaust.
pub(super) async fn hold_monitors<'a>(
    tx: &mut impl Statements,
    backend: Backend,
    monitor_ids: impl Iterator<Item = &'a str>,
) -> anyhow::Result<()> {
    if backend.writes_concurrently() {
        let ids = serde_json::to_string(&monitor_ids.collect::<Vec<_>>())?;
        let sql = format!(
            "SELECT id FROM monitors WHERE {} ORDER BY id FOR NO KEY UPDATE",
            super::dialect::listed(backend, "id", "$1")
        );
        tx.execute(&sql, &[Arg::from(&ids)]).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn other_errors_are_not_run_again() {
        let mut runs = 0;
        let outcome: anyhow::Result<()> = retrying("test", || {
            runs += 1;
            async { Err(anyhow::anyhow!("no such table")) }
        })
        .await;
        assert!(outcome.is_err());
        assert_eq!(runs, 1);
    }
}
