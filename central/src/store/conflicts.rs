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
//! Owns only that rule, and the one lock that cannot be a row (`hold_monitors`): the
//! transactions themselves stay with their modules.

use std::future::Future;

use super::statements::Statements;
use super::Backend;

/// The namespace of `hold_monitors`' advisory locks (the first of their two keys): PostgreSQL
/// keeps two-key advisory locks apart from one-key ones, and this one apart from any other
/// namespace a later writer takes ("ingest" in ASCII).
const INGEST_LOCKS: i32 = 0x696e_6773;

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

/// Holds, on PostgreSQL until the transaction ends, a lock per monitor of `ids` (a JSON array
/// of monitor ids), taken in one statement in one order: two uploads sharing a monitor queue
/// whole, before either touches a row of it; nothing on SQLite (one writer at a time).
///
/// Why not its rows: an upload takes a monitor's status rows (the monitor's, then its
/// locations') in key order in each statement, but rows can only be locked once they exist. A
/// monitor's first results, from two locations at once, create them; and rows another upload
/// commits between two statements join the second statement's locks out of order. Two uploads
/// for one multi-location monitor then waited on each other in a cycle (seen in CI, broken by
/// PostgreSQL and run again by `retrying`). An advisory lock needs no row: it costs no write,
/// and its key, a hash of the id, exists before the monitor's first result. Two ids of one hash
/// only queue more often.
pub(super) async fn hold_monitors(
    tx: &mut impl Statements,
    backend: Backend,
    ids: &str,
) -> anyhow::Result<()> {
    if backend == Backend::Postgres {
        // Taken as the sorted keys are read: the outer select locks row by row, in order.
        tx.execute(
            "SELECT pg_advisory_xact_lock(CAST($2 AS INTEGER), k) FROM (SELECT DISTINCT hashtext(value) AS k \
             FROM jsonb_array_elements_text(CAST($1 AS jsonb)) AS ids(value) ORDER BY k) AS keys",
            &[ids.into(), i64::from(INGEST_LOCKS).into()],
        )
        .await?;
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
