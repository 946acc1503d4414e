//! All SQL of central, and nothing else: no HTTP, no domain rules.
//!
//! One set of queries serves SQLite and PostgreSQL through sqlx's `Any` driver: times are
//! epoch milliseconds (`BIGINT`), ids are UUID strings, flags are 0/1 and parameters are `$N`,
//! which both dialects accept. Schema changes live in `migrations/<database>/`.

mod alert_states;
mod assignments;
mod audit;
mod backup;
mod channels;
mod commands;
mod conflicts;
mod cursor;
mod delivery;
mod dependencies;
mod dependency_aliases;
mod dependency_reports;
mod dialect;
mod direct;
mod due;
mod events;
mod gauges;
mod head;
mod ingest_tx;
mod intake;
mod leases;
mod locations;
mod maintenance;
mod managed;
mod migration_list;
mod migrations;
mod minutes;
mod monitor_reads;
mod monitor_rows;
mod monitors;
mod newer_schema;
mod notice_deliveries;
mod notifications;
mod packed;
mod placement_due;
mod pollers;
mod postgres;
mod push;
mod readable;
mod result_history;
pub mod result_index;
mod result_pruning;
mod results;
mod rollup_days;
mod rollup_folding;
mod rollups;
mod sessions;
mod sqlite;
mod sso_links;
mod statements;
mod status_incidents;
mod status_moves;
mod status_pages;
mod status_rows;
mod status_subscribers;
mod timeline;
mod tokens;
mod users;
mod wakeups;
mod window_rows;

pub use assignments::{AssignmentChange, Versioned};
pub use backup::{backup_sqlite, restore_sqlite};
pub use commands::{Acked, CommandRead};
pub use conflicts::is_conflict;
pub use cursor::{Cursor, Paged};
pub use delivery::Attempt;
pub use dependencies::{
    DependencyDiff, DependencyEventRow, DependencyReport, DependencyRow, DependencySourceRow,
    LatencyBucketRow, NamedDependencyRow, NewDependencyEvent, PendingNoticeRow, ReportedDependency,
};
pub use dependency_aliases::{AliasInsert, AliasRow};
pub use dependency_reports::DependencyLedger;
pub use due::{Confirmation, Look};
pub use gauges::Shown;
pub use ingest_tx::{IngestTx, IngestWork};
pub use intake::OwnershipRow;
pub use leases::LeaseState;
pub use locations::{LocationRow, LocationStatusRow};

pub use alert_states::{AlertUpdate, ReadAs, StoredAlertState};
pub use channels::ChannelRead;
pub use managed::ManagedRow;
pub use minutes::CountedResult;
pub use monitor_reads::{ListFilter, StatusRow};
pub use monitors::LinkConflict;
pub use notice_deliveries::{DueDelivery, NoticeAttempt};
pub use notifications::OutboxRow;
pub use placement_due::{QueuedPlacement, Reach};
pub use pollers::HeartbeatUpdate;
pub use push::{PingRow, PushState};
pub use result_history::ResultRow;
pub use result_pruning::ExpiringResult;
pub use results::NewResult;
pub use rollup_folding::HourKey;
pub use rollups::{Resolution, RollupRow, RollupSums, LATENCY_BOUNDS_MS};
pub use sessions::SessionRow;
/// A result's status, as the wire and the store carry it.
pub use shared_proto::poller_api::ResultStatus;
pub use status_incidents::IncidentChange;
pub use status_moves::{StatusKey, StatusTable, StoredVerdict};
pub use status_pages::PageConflict;
pub use status_rows::{StatusBefore, StatusesBefore};
pub use status_subscribers::{NoticeRow, SubscriberRow};
pub use timeline::{Credits, TimeCredit, TimePoint, TimeSpan};

/// A list as columns keep it (capabilities, a token's capability limit): comma-joined.
pub fn split_list(stored: &str) -> Vec<String> {
    stored
        .split(',')
        .filter(|item| !item.is_empty())
        .map(str::to_string)
        .collect()
}
pub use audit::AuditRow;
pub use users::{Ends, KeyScope, UserConflict, MADE_WITH_ADMIN_TOKEN};
pub use wakeups::{VersionListener, Wakeup};

use anyhow::Context;
use sqlx::AnyPool;
use tokio::sync::{Mutex, MutexGuard};

/// Which database is behind the pool; what differs between them is named in `dialect`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite = 0,
    Postgres = 1,
}

pub struct Store {
    /// Ingest's writing connection on SQLite (`direct`), with the statements it keeps.
    ingest_writer: direct::IngestWriter,
    pool: AnyPool,
    /// On SQLite, the one connection writes go through (the same pool as `pool` on
    /// PostgreSQL). SQLite drops a connection's whole page cache when it begins a read and
    /// another connection has written since: with writes spread over the pool, every ingest
    /// re-read its pages from the OS. The writer's cache stays warm as long as it is the only
    /// connection that writes.
    writer: AnyPool,
    backend: Backend,
    /// Kept to open the notification connection of `listen_for_versions` (PostgreSQL only).
    url: String,
    /// The database file on SQLite, for reads that open a connection of their own
    /// (`gauges`).
    sqlite_file: Option<std::path::PathBuf>,
    /// SQLite's writers queue here (`sqlite::WriteLocks`); `None` on PostgreSQL, whose
    /// writers need no queue of ours.
    sqlite_locks: Option<sqlite::WriteLocks>,
    /// On SQLite, the rowids of the results stored since the last flush into `result_index`
    /// (`head`, `result_index`); always empty on PostgreSQL.
    head: head::Head,
    /// Held by a flush of the head (`result_index`).
    head_flushing: Mutex<()>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the URL: it may hold the database password.
        f.debug_struct("Store")
            .field("backend", &self.backend)
            .finish_non_exhaustive()
    }
}

/// What a backend's `open` hands the store: its pools, and the file on SQLite.
struct Opened {
    backend: Backend,
    /// The URL as opened (SQLite's with `mode=rwc` added).
    url: String,
    pool: AnyPool,
    writer: AnyPool,
    sqlite_file: Option<std::path::PathBuf>,
}

/// Guard held by a writer; on PostgreSQL it guards nothing.
pub struct WriteGuard<'a>(#[allow(dead_code)] Option<MutexGuard<'a, ()>>);

impl Store {
    /// `SELECT {columns} {from_where} {column} IN (…ids…)` as `T`s (`from_where` is `FROM …
    /// WHERE`, with any other condition and its `AND`), read packed (`packed`: one value per
    /// chunk of 500 ids): for the reads behind each result and each look.
    pub(crate) async fn packed_where_in<T: serde::de::DeserializeOwned>(
        &self,
        columns: &str,
        from_where: &str,
        column: &str,
        ids: &[String],
    ) -> anyhow::Result<Vec<T>> {
        let columns = packed::columns_of(columns);
        let order = columns.first().map_or("1", |(name, _)| *name);
        let mut rows = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(500) {
            let sql = packed::packed(
                self.backend,
                &columns,
                &format!(
                    "{from_where} {column} IN ({})",
                    monitors::placeholders(1, chunk.len())
                ),
                order,
            );
            let mut query = sqlx::query_as::<_, (String,)>(&sql);
            for id in chunk {
                query = query.bind(id);
            }
            let (text,) = query.fetch_one(&self.pool).await?;
            rows.extend(packed::unpack::<T>(&text)?);
        }
        Ok(rows)
    }

    /// Connects, creating a SQLite file if needed, and applies pending migrations.
    pub async fn connect(url: &str) -> anyhow::Result<Store> {
        sqlx::any::install_default_drivers();
        let opened = if url.starts_with("sqlite:") {
            sqlite::open(url).await?
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            postgres::open(url).await?
        } else {
            anyhow::bail!(
                "CENTRAL_DATABASE_URL must start with sqlite:// or postgres://, got `{}`",
                redacted(url)
            );
        };
        let mut store = Store {
            ingest_writer: direct::IngestWriter::default(),
            pool: opened.pool,
            writer: opened.writer,
            backend: opened.backend,
            url: opened.url,
            sqlite_locks: opened
                .sqlite_file
                .as_ref()
                .map(|_| sqlite::WriteLocks::default()),
            sqlite_file: opened.sqlite_file,
            head: head::Head::default(),
            head_flushing: Mutex::new(()),
        };
        store.migrate().await?;
        if store.sqlite_file.is_some() {
            store.head = store.load_head().await?;
        }
        Ok(store)
    }

    /// Closes every connection, waiting for those in use to come back. On PostgreSQL each
    /// server session then ends, which is when the server counts what it read
    /// (`pg_stat_user_tables`) for certain.
    pub async fn close(&self) {
        self.pool.close().await;
        self.writer.close().await;
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Serialises writers on SQLite; call before a write transaction.
    pub async fn write_lock(&self) -> WriteGuard<'_> {
        match &self.sqlite_locks {
            Some(locks) => WriteGuard(Some(locks.queued().await)),
            None => WriteGuard(None),
        }
    }

    /// `write_lock` ahead of the ordinary writers' queue: waits for the write under way and
    /// at most one more (`sqlite::WriteLocks`). Only for small writes that must happen in
    /// time, at a rate that cannot keep the others waiting: the lease's renewal (every 2 s)
    /// and delivery's claims and records (two per chunk of notices sent).
    pub async fn write_lock_first(&self) -> WriteGuard<'_> {
        match &self.sqlite_locks {
            Some(locks) => WriteGuard(Some(locks.first().await)),
            None => WriteGuard(None),
        }
    }

    /// Runs one write whose `$1` is a row id and `$2` one more value, under the write lock;
    /// `true` if it changed exactly that row. Conditional updates (`… AND spent_at IS NULL`)
    /// use the answer to tell who won a race.
    async fn write_one<'q, T>(&self, sql: &'q str, id: &'q str, value: T) -> anyhow::Result<bool>
    where
        T: 'q + Send + sqlx::Encode<'q, sqlx::Any> + sqlx::Type<sqlx::Any>,
    {
        let _guard = self.write_lock().await;
        let done = sqlx::query(sql)
            .bind(id)
            .bind(value)
            .execute(&self.writer)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// A cheap round trip, for `/readyz`.
    pub async fn ping(&self) -> anyhow::Result<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    /// Reads a setting.
    pub async fn setting(&self, key: &str) -> anyhow::Result<Option<String>> {
        let value: Option<(String,)> = sqlx::query_as("SELECT value FROM settings WHERE key = $1")
            .bind(key)
            .fetch_optional(&self.pool)
            .await?;
        Ok(value.map(|(v,)| v))
    }

    /// Stores `value` unless the key is set already; returns the value that is stored now, so
    /// that concurrent replicas agree on one generated secret.
    pub async fn setting_or_insert(&self, key: &str, value: &str) -> anyhow::Result<String> {
        let _guard = self.write_lock().await;
        sqlx::query(
            "INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
        )
        .bind(key)
        .bind(value)
        .execute(&self.writer)
        .await?;
        self.setting(key)
            .await?
            .context("setting vanished right after insert")
    }

    /// Overwrites a setting.
    pub async fn put_setting(&self, key: &str, value: &str) -> anyhow::Result<()> {
        let _guard = self.write_lock().await;
        sqlx::query(
            "INSERT INTO settings (key, value) VALUES ($1, $2) \
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        )
        .bind(key)
        .bind(value)
        .execute(&self.writer)
        .await?;
        Ok(())
    }
}

/// A flag column.
fn flag(value: bool) -> i64 {
    i64::from(value)
}

/// The database URL as it may be shown: with its password (and any `password=` parameter)
/// replaced, so that no error message or log line carries the secret.
pub fn redacted(url: &str) -> String {
    let Ok(mut parsed) = url::Url::parse(url) else {
        // Unparseable: show the scheme only, the rest could be anything.
        let scheme = url.split_once(':').map_or("", |(scheme, _)| scheme);
        return format!("{scheme}:<unparseable, hidden>");
    };
    if parsed.password().is_some() {
        let _ = parsed.set_password(Some("REDACTED"));
    }
    if parsed
        .query_pairs()
        .any(|(key, _)| key.eq_ignore_ascii_case("password"))
    {
        let pairs: Vec<(String, String)> = parsed
            .query_pairs()
            .map(|(key, value)| {
                let value = if key.eq_ignore_ascii_case("password") {
                    "REDACTED".to_string()
                } else {
                    value.into_owned()
                };
                (key.into_owned(), value)
            })
            .collect();
        parsed.query_pairs_mut().clear().extend_pairs(pairs);
    }
    parsed.to_string()
}

#[cfg(test)]
mod url_tests {
    use super::Store;

    #[tokio::test]
    async fn sqlite_urls_that_are_not_one_writable_file_on_disk_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("central.db").display().to_string();
        for url in [
            "sqlite::memory:".to_string(),
            "sqlite://:memory:".to_string(),
            "sqlite://%3Amemory%3A".to_string(),
            "sqlite://".to_string(),
            format!("sqlite://{file}?mode=memory"),
            format!("sqlite://{file}?mode=ro"),
            format!("sqlite://{file}?vfs=unix-dotfile"),
            format!("sqlite://{file}?mode=rwc&immutable=1"),
            format!("sqlite:file:{file}"),
            format!("sqlite:file:{file}%3Fmode=memory"),
        ] {
            let error = match Store::connect(&url).await {
                Ok(_) => panic!("{url} was accepted"),
                Err(error) => format!("{error:#}"),
            };
            assert!(
                error.contains("CENTRAL_DATABASE_URL") && error.contains("file on disk"),
                "{url}: {error}"
            );
        }
        for url in [
            format!("sqlite://{file}"),
            format!("sqlite://{file}?mode=rwc"),
            format!("sqlite://{file}?mode=rw&cache=private"),
        ] {
            Store::connect(&url)
                .await
                .unwrap_or_else(|e| panic!("{url}: {e:#}"));
        }
    }
}

#[cfg(test)]
mod redaction_tests {
    use super::redacted;

    #[test]
    fn passwords_never_show() {
        let shown = redacted("postgres://central:s3cret@db.internal:5432/central?sslmode=require");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(
            shown.contains("central:REDACTED@db.internal:5432"),
            "{shown}"
        );
        let shown = redacted("postgres://db/central?user=c&password=s3cret");
        assert!(
            !shown.contains("s3cret") && shown.contains("user=c"),
            "{shown}"
        );
        assert_eq!(
            redacted("sqlite://central.db?mode=rwc"),
            "sqlite://central.db?mode=rwc"
        );
        assert!(!redacted("postgres://a:s3cret@[bad").contains("s3cret"));
    }
}

// Test builds only; last, so that nothing after it is taken for shipped code.
#[cfg(test)]
pub(crate) mod testing;
