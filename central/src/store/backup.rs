//! `central backup`: a consistent copy of the SQLite database while central runs. SQLite's
//! online backup API copies every page in one step, inside one read transaction, so the copy
//! is the database as of one instant while central's writers go on (WAL). Pages are copied as
//! they are: row ids are kept, so the results index needs no rebuild when central starts on the
//! copy (as it does after `VACUUM INTO`). A PostgreSQL database is backed up with PostgreSQL's
//! own tools. Touches nothing but the two files; decides nothing about what is in them.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use anyhow::{bail, Context};
use rusqlite::backup::{Backup, StepResult};

/// What `central backup` says of a database it does not copy itself.
pub const POSTGRES_BACKUP: &str = "central backup copies SQLite databases; back up PostgreSQL \
    with its own tools (pg_dump, or continuous archiving for point-in-time recovery), then start \
    central on the restored database: agents drop the monitors it does not have within a long \
    poll, and keep the results it refuses";

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
    {
        let backup = Backup::new(&source, &mut copy)?;
        // All pages in one step: one read transaction, so one instant. A writer holding the
        // file's lock (a checkpoint) makes the step busy for a moment; 10 s of that is a fault.
        let mut busy = 0;
        loop {
            match backup.step(-1)? {
                StepResult::Done => break,
                StepResult::More => {}
                _ if busy < 200 => {
                    busy += 1;
                    std::thread::sleep(Duration::from_millis(50));
                }
                _ => bail!(
                    "{} stayed locked for 10 s; nothing was copied",
                    path.display()
                ),
            }
        }
    }
    drop(copy);
    Ok(std::fs::metadata(to)?.len())
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
}
