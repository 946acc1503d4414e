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
//! Owns only that rule: the transactions themselves stay with their modules.

use std::future::Future;

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
