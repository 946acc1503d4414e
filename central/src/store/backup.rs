//! `central backup` and `central restore`: a consistent copy of the SQLite database while
//! central runs, and that copy put back in its place while no central runs. SQLite's
//! online backup API copies every page in one step, inside one read transaction, so the copy
//! is the database as of one instant while central's writers go on (WAL). Pages are copied as
//! they are: row ids are kept, so the results index needs no rebuild when central starts on the
//! copy (as it does after `VACUUM INTO`). A restore is the same copy the other way, in one
//! write transaction of the destination, refused while a central holds the duties lease on
//! it. A PostgreSQL database is backed up and restored with PostgreSQL's own tools. Touches
//! nothing but the two files; decides nothing about what is in them.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use anyhow::{bail, Context};
use rusqlite::backup::{Backup, StepResult};
use rusqlite::OptionalExtension;

/// What `central backup` says of a database it does not copy itself.
pub const POSTGRES_BACKUP: &str = "central backup copies SQLite databases; back up PostgreSQL \
    with its own tools (pg_dump, or continuous archiving for point-in-time recovery), then start \
    central on the restored database: agents drop the monitors it does not have within a long \
    poll, and keep the results it refuses";

/// What `central restore` says of a database it does not restore itself.
pub const POSTGRES_RESTORE: &str = "central restore puts back SQLite copies; restore PostgreSQL \
    with its own tools (pg_restore, or point-in-time recovery), then start central on it";

/// Copies the SQLite database `url` names to `to`, which must not exist yet; returns the
/// copy's size in bytes.
pub fn backup_sqlite(url: &str, to: &Path) -> anyhow::Result<u64> {
    if url.starts_with("postgres") {
        bail!(POSTGRES_BACKUP);
    }
    if to.exists() {
        bail!("{} exists already: name a new file", to.display());
    }
    let options = sqlx::sqlite::SqliteConnectOptions::from_str(url)
        .with_context(|| format!("CENTRAL_DATABASE_URL `{url}` is not a SQLite URL"))?;
    let path = options.get_filename();
    if !path.is_file() {
        bail!("there is no database at {}", path.display());
    }
    let source = rusqlite::Connection::open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    source.busy_timeout(Duration::from_secs(5))?;
    let mut copy = rusqlite::Connection::open(to)
        .with_context(|| format!("cannot create {}", to.display()))?;
    copy_whole(&source, &mut copy, path)?;
    drop(copy);
    Ok(std::fs::metadata(to)?.len())
}

/// Puts the copy `from` (made by `backup_sqlite`) in the place of the SQLite database `url`
/// names, unless a central holds the duties lease on it at `now_ms` (one runs, or stopped less
/// than the lease's 10 s ago). Returns the copy's size in bytes.
pub fn restore_sqlite(url: &str, from: &Path, now_ms: i64) -> anyhow::Result<u64> {
    if url.starts_with("postgres") {
        bail!(POSTGRES_RESTORE);
    }
    if !from.is_file() {
        bail!("there is no copy at {}", from.display());
    }
    let copy =
        rusqlite::Connection::open_with_flags(from, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .with_context(|| format!("cannot open {}", from.display()))?;
    let checked: String = copy
        .query_row("PRAGMA quick_check", [], |row| row.get(0))
        .with_context(|| format!("{} is not a SQLite database", from.display()))?;
    if checked != "ok" {
        bail!(
            "{} is damaged ({checked}); nothing was restored",
            from.display()
        );
    }
    if !has_table(&copy, "_sqlx_migrations")? {
        bail!("{} is no copy of central's database", from.display());
    }
    let options = sqlx::sqlite::SqliteConnectOptions::from_str(url)
        .with_context(|| format!("CENTRAL_DATABASE_URL `{url}` is not a SQLite URL"))?;
    let path = options.get_filename();
    let mut database = rusqlite::Connection::open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    database.busy_timeout(Duration::from_secs(5))?;
    if has_table(&database, "leases")? {
        let held: Option<(String, i64)> = database
            .query_row(
                "SELECT holder, expires_at FROM leases WHERE expires_at > ?1 \
                 ORDER BY expires_at DESC LIMIT 1",
                [now_ms],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()?;
        if let Some((holder, until)) = held {
            bail!(
                "a central runs on {} ({holder} holds its duties for {} ms more): stop every \
                 central on it, then restore (the lease lapses 10 s after a central stops)",
                path.display(),
                until - now_ms
            );
        }
    }
    copy_whole(&copy, &mut database, from)?;
    drop(database);
    Ok(std::fs::metadata(from)?.len())
}

fn has_table(db: &rusqlite::Connection, name: &str) -> anyhow::Result<bool> {
    Ok(db.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
        [name],
        |row| row.get::<_, i64>(0),
    )? > 0)
}

/// Copies every page of `source` over `destination` (SQLite's backup API), as one read
/// transaction of the source and one write transaction of the destination: the copy is the
/// source as of one instant, and a reader of the destination sees it whole or not at all.
fn copy_whole(
    source: &rusqlite::Connection,
    destination: &mut rusqlite::Connection,
    source_path: &Path,
) -> anyhow::Result<()> {
    let backup = Backup::new(source, destination)?;
    // All pages in one step. A writer holding the file's lock (a checkpoint) makes the step
    // busy for a moment; 10 s of that is a fault.
    let mut busy = 0;
    loop {
        match backup.step(-1)? {
            StepResult::Done => return Ok(()),
            StepResult::More => {}
            _ if busy < 200 => {
                busy += 1;
                std::thread::sleep(Duration::from_millis(50));
            }
            _ => bail!(
                "{} stayed locked for 10 s; nothing was copied",
                source_path.display()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_copy_is_the_database_and_nothing_is_overwritten() {
        let (store, dir) = crate::store::testing::sqlite_store().await;
        let version = store.assignment_version().await.unwrap();
        let url = format!("sqlite://{}", dir.path().join("central.db").display());
        let to = dir.path().join("copy.db");
        assert!(backup_sqlite(&url, &to).unwrap() > 0);
        let copy = rusqlite::Connection::open(&to).unwrap();
        let copied: i64 = copy
            .query_row(
                "SELECT version FROM assignment_state WHERE id = 1",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(copied, version);
        let again = backup_sqlite(&url, &to).unwrap_err().to_string();
        assert!(again.contains("exists already"), "{again}");
        let postgres = backup_sqlite("postgres://x/y", &dir.path().join("pg.db")).unwrap_err();
        assert!(postgres.to_string().contains("pg_dump"), "{postgres}");
    }

    /// A restore puts the copy back whole, and is refused while a central holds the duties
    /// lease on the database, and for a file that is no copy of central's database.
    #[tokio::test]
    async fn a_restore_puts_the_copy_back_unless_a_central_runs_on_it() {
        let (store, dir) = crate::store::testing::sqlite_store().await;
        let url = format!("sqlite://{}", dir.path().join("central.db").display());
        let copy = dir.path().join("copy.db");
        backup_sqlite(&url, &copy).unwrap();
        let version = store.assignment_version().await.unwrap();
        store
            .begin_assignment_versions(version + 1_000, 1)
            .await
            .unwrap();
        assert_ne!(store.assignment_version().await.unwrap(), version);
        let now = 1_000_000;
        let lease = store
            .acquire_lease("duties", "replica-a", now, now + 10_000, 5_000, false)
            .await
            .unwrap();
        assert!(lease.held);
        let refused = restore_sqlite(&url, &copy, now + 1)
            .unwrap_err()
            .to_string();
        assert!(refused.contains("a central runs on"), "{refused}");
        drop(store);

        // The lease lapsed: the copy goes back, with the version it had.
        restore_sqlite(&url, &copy, now + 20_000).unwrap();
        let restored = crate::store::Store::connect(&url).await.unwrap();
        assert_eq!(restored.assignment_version().await.unwrap(), version);

        let other = dir.path().join("other.db");
        rusqlite::Connection::open(&other)
            .unwrap()
            .execute_batch("CREATE TABLE t (x INTEGER)")
            .unwrap();
        let refused = restore_sqlite(&url, &other, now).unwrap_err().to_string();
        assert!(refused.contains("no copy of central"), "{refused}");
    }
}
