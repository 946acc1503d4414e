//! All SQL of central, and nothing else: no HTTP, no domain rules.
//!
//! One set of queries serves SQLite and PostgreSQL through sqlx's `Any` driver: times are
//! epoch milliseconds (`BIGINT`), ids are UUID strings, flags are 0/1 and parameters are `$N`,
//! which both dialects accept. Schema changes live in `migrations/<database>/`.

mod audit;
mod commands;
mod conflicts;
mod delivery;
mod dependencies;
mod direct;
mod due;
mod events;
mod gauges;
mod head;
mod leases;
mod locations;
mod maintenance;
mod managed;
mod minutes;
mod monitors;
mod notifications;
mod packed;
mod placement_due;
mod pollers;
mod push;
mod result_history;
pub mod result_index;
mod result_pruning;
mod results;
mod rollups;
mod sessions;
mod statements;
mod timeline;
mod tokens;
mod users;
mod wakeups;

pub use commands::{Acked, CommandRow, NewCommand};
pub use conflicts::is_conflict;
pub use delivery::Attempt;
pub use dependencies::{
    AliasInsert, AliasRow, DependencyDiff, DependencyEventRow, DependencyReport, DependencyRow,
    DependencySourceRow, LatencyBucketRow, NamedDependencyRow, NewDependencyEvent,
    PendingNoticeRow, ReportedDependency,
};
pub use due::Look;
pub use events::EventRow;
pub use gauges::ShownRow;
pub use leases::LeaseState;
pub use locations::{LocationRow, LocationStatusRow};
pub use maintenance::WindowRow;
pub use managed::ManagedRow;
pub use minutes::CountedResult;
pub use monitors::{
    AssignmentChange, LinkConflict, ListFilter, MonitorRow, OwnershipRow, StatusRow, Versioned,
};
pub use notifications::{AlertStateRow, AlertUpdate, ChannelRow, OutboxRow};
pub use placement_due::{QueuedPlacement, Reach};
pub use pollers::{HeartbeatUpdate, PollerRow};
pub use push::{PingRow, PushState};
pub use result_history::ResultRow;
pub use result_pruning::ExpiringResult;
pub use results::{IngestRules, Ingested, NewResult, StoredVerdict};
pub use rollups::{Resolution, RollupRow, RollupSums, LATENCY_BOUNDS_MS};
pub use sessions::SessionRow;
pub use timeline::{TimeCredit, TimePoint};

/// A list as columns keep it (capabilities, a token's capability limit): comma-joined.
pub fn split_list(stored: &str) -> Vec<String> {
    stored
        .split(',')
        .filter(|item| !item.is_empty())
        .map(str::to_string)
        .collect()
}
pub use audit::AuditRow;
pub use tokens::{RefreshTokenRow, RegistrationTokenRow};
pub use users::{ApiKeyRow, KeyScope, UserConflict, UserRow, MADE_WITH_ADMIN_TOKEN};
pub use wakeups::{VersionListener, Wakeup};

use std::borrow::Cow;
use std::str::FromStr;
use std::time::Duration;

use anyhow::Context;
use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::{AnyPool, Executor};
use tokio::sync::{Mutex, MutexGuard};

/// Which database is behind the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// SQLite's page cache of the one writing connection, in KiB: ingest's index pages stay in it
/// (it is never dropped, since no other connection writes). It is not free: SQLite 3.46 walks
/// every page this cache holds when a write transaction commits after a B-tree split that
/// reordered pages (`balance_nonroot` parks a page at the lock-byte page's number, which
/// `pcache1Truncate` then trims), which ingest's inserts cause in nearly every upload: by
/// `perf` (a uprobe on `pcache1Truncate`) 40 such walks a second over 15,856 cached pages at
/// 20,000 monitors, `pcache1TruncateUnsafe` 8 % of central's samples. Only while the database
/// is smaller than that page's offset (1 GiB at 4 KiB pages): past it the parked number is
/// inside the database and nothing is trimmed (the same uprobe on a database grown to 1.1 GiB
/// first: no walk), which 1,667 results/s reach within the first hour. So the cache stays
/// large; whether a young database would do better with a smaller one is not measured
/// (docs/benchmarks.md).
const WRITER_CACHE_KIB: u32 = 65_536;
/// SQLite's page cache of each reading connection, in KiB (about SQLite's default). SQLite drops
/// a reader's whole cache, page by page, whenever it begins a read after the writer wrote,
/// which under ingest is nearly every read: with 64 MiB per reader, `perf` showed
/// `pcache1TruncateUnsafe` alone in 4 % of central's samples while 100,000 monitors were
/// created, with the `free`s and `malloc_consolidate` around it, and the creation slowed. A
/// scrape reads its pages in storage order within one transaction, which a small cache serves
/// as well (20,000-monitor scale bench: `/metrics` 160 ms, 171 ms before the writer had a
/// connection of its own).
const READER_CACHE_KIB: u32 = 2_048;

pub struct Store {
    /// SQLite's writing connection as ingest runs on it directly (`direct`), with the
    /// statements it keeps there: declared first so that it is dropped before the pools.
    lent: direct::Lent,
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
    /// SQLite allows one writer at a time; queueing writers here, rather than letting them
    /// collide inside SQLite, turns lock contention into a short wait instead of `SQLITE_BUSY`.
    sqlite_writer: Mutex<()>,
    /// Ordinary writers queue here before `sqlite_writer`, so that at most one of them waits
    /// there at a time: a write that must not wait for the whole queue (`write_lock_first`:
    /// the duties lease's renewal, the outbox's claims and records) waits for the write under
    /// way and at most one more. Under
    /// a fleet's recovery at 100,000 monitors the queue held seconds of writes, the renewal
    /// came too late, and the only replica kept losing its own lease (every duty stopped and
    /// started again, tens of times a minute).
    sqlite_queue: Mutex<()>,
    /// On SQLite, the rowids of the results stored since the last flush into `result_index`
    /// (`head`, `result_index`); always empty on PostgreSQL.
    head: head::Head,
    /// Held by a flush of the head (`result_index`).
    head_flushing: Mutex<()>,
}

const SQLITE_MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        20261121000001,
        "init",
        include_str!("../../../migrations/sqlite/20261121000001_init.sql"),
    ),
    (
        20261121000002,
        "engine reports",
        include_str!("../../../migrations/sqlite/20261121000002_engine_reports.sql"),
    ),
    (
        20261121000003,
        "token lifecycle",
        include_str!("../../../migrations/sqlite/20261121000003_token_lifecycle.sql"),
    ),
    (
        20261121000004,
        "assignment log",
        include_str!("../../../migrations/sqlite/20261121000004_assignment_log.sql"),
    ),
    (
        20261121000005,
        "online since",
        include_str!("../../../migrations/sqlite/20261121000005_online_since.sql"),
    ),
    (
        20261121000006,
        "poller status changes",
        include_str!("../../../migrations/sqlite/20261121000006_poller_status_changes.sql"),
    ),
    (
        20261121000007,
        "poller errors",
        include_str!("../../../migrations/sqlite/20261121000007_poller_errors.sql"),
    ),
    (
        20261121000008,
        "verdict time",
        include_str!("../../../migrations/sqlite/20261121000008_verdict_time.sql"),
    ),
    (
        20261121000009,
        "refresh revoked reason",
        include_str!("../../../migrations/sqlite/20261121000009_refresh_revoked_reason.sql"),
    ),
    (
        20261121000010,
        "registration overlap",
        include_str!("../../../migrations/sqlite/20261121000010_registration_overlap.sql"),
    ),
    (
        20261123000011,
        "leases",
        include_str!("../../../migrations/sqlite/20261123000011_leases.sql"),
    ),
    (
        20261123000013,
        "lease held since",
        include_str!("../../../migrations/sqlite/20261123000013_lease_held_since.sql"),
    ),
    (
        20261124000014,
        "locations",
        include_str!("../../../migrations/sqlite/20261124000014_locations.sql"),
    ),
    (
        20261124000015,
        "notifications",
        include_str!("../../../migrations/sqlite/20261124000015_notifications.sql"),
    ),
    (
        20261125000016,
        "rollups",
        include_str!("../../../migrations/sqlite/20261125000016_rollups.sql"),
    ),
    (
        20261125000017,
        "web sessions",
        include_str!("../../../migrations/sqlite/20261125000017_web_sessions.sql"),
    ),
    (
        20261126000018,
        "outbox per channel",
        include_str!("../../../migrations/sqlite/20261126000018_outbox_per_channel.sql"),
    ),
    (
        20261126000019,
        "alertmanager api",
        include_str!("../../../migrations/sqlite/20261126000019_alertmanager_api.sql"),
    ),
    (
        20261127000020,
        "verdict state",
        include_str!("../../../migrations/sqlite/20261127000020_verdict_state.sql"),
    ),
    (
        20261128000021,
        "uptime time",
        include_str!("../../../migrations/sqlite/20261128000021_uptime_time.sql"),
    ),
    (
        20261129000022,
        "token limits",
        include_str!("../../../migrations/sqlite/20261129000022_token_limits.sql"),
    ),
    (
        20261130000023,
        "alert due",
        include_str!("../../../migrations/sqlite/20261130000023_alert_due.sql"),
    ),
    (
        20261201000024,
        "assignment log version",
        include_str!("../../../migrations/sqlite/20261201000024_assignment_log_version.sql"),
    ),
    (
        20261201000025,
        "location shown status",
        include_str!("../../../migrations/sqlite/20261201000025_location_shown_status.sql"),
    ),
    (
        20261201000026,
        "placement due",
        include_str!("../../../migrations/sqlite/20261201000026_placement_due.sql"),
    ),
    (
        20261202000027,
        "alert due steady",
        include_str!("../../../migrations/sqlite/20261202000027_alert_due_steady.sql"),
    ),
    (
        20261203000028,
        "poller commands",
        include_str!("../../../migrations/sqlite/20261203000028_poller_commands.sql"),
    ),
    (
        20261204000029,
        "dependencies",
        include_str!("../../../migrations/sqlite/20261204000029_dependencies.sql"),
    ),
    (
        20261205000030,
        "maintenance_windows",
        include_str!("../../../migrations/sqlite/20261205000030_maintenance_windows.sql"),
    ),
    (
        20261206000031,
        "tags",
        include_str!("../../../migrations/sqlite/20261206000031_tags.sql"),
    ),
    (
        20261207000032,
        "parents",
        include_str!("../../../migrations/sqlite/20261207000032_parents.sql"),
    ),
    (
        20261208000033,
        "heartbeats",
        include_str!("../../../migrations/sqlite/20261208000033_heartbeats.sql"),
    ),
    (
        20261209000034,
        "maintenance_stop_checks",
        include_str!("../../../migrations/sqlite/20261209000034_maintenance_stop_checks.sql"),
    ),
    (
        20261210000035,
        "users",
        include_str!("../../../migrations/sqlite/20261210000035_users.sql"),
    ),
    (
        20261211000036,
        "audit",
        include_str!("../../../migrations/sqlite/20261211000036_audit.sql"),
    ),
    (
        20261212000037,
        "audit_key_user",
        include_str!("../../../migrations/sqlite/20261212000037_audit_key_user.sql"),
    ),
    (
        20261213000038,
        "managed_objects",
        include_str!("../../../migrations/sqlite/20261213000038_managed_objects.sql"),
    ),
    (
        20261214000039,
        "api_key_maker",
        include_str!("../../../migrations/sqlite/20261214000039_api_key_maker.sql"),
    ),
    // SQLite only: the results head's index (see `result_index`).
    (
        20261215000040,
        "result_index",
        include_str!("../../../migrations/sqlite/20261215000040_result_index.sql"),
    ),
];
const POSTGRES_MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        20261121000001,
        "init",
        include_str!("../../../migrations/postgres/20261121000001_init.sql"),
    ),
    (
        20261121000002,
        "engine reports",
        include_str!("../../../migrations/postgres/20261121000002_engine_reports.sql"),
    ),
    (
        20261121000003,
        "token lifecycle",
        include_str!("../../../migrations/postgres/20261121000003_token_lifecycle.sql"),
    ),
    (
        20261121000004,
        "assignment log",
        include_str!("../../../migrations/postgres/20261121000004_assignment_log.sql"),
    ),
    (
        20261121000005,
        "online since",
        include_str!("../../../migrations/postgres/20261121000005_online_since.sql"),
    ),
    (
        20261121000006,
        "poller status changes",
        include_str!("../../../migrations/postgres/20261121000006_poller_status_changes.sql"),
    ),
    (
        20261121000007,
        "poller errors",
        include_str!("../../../migrations/postgres/20261121000007_poller_errors.sql"),
    ),
    (
        20261121000008,
        "verdict time",
        include_str!("../../../migrations/postgres/20261121000008_verdict_time.sql"),
    ),
    (
        20261121000009,
        "refresh revoked reason",
        include_str!("../../../migrations/postgres/20261121000009_refresh_revoked_reason.sql"),
    ),
    (
        20261121000010,
        "registration overlap",
        include_str!("../../../migrations/postgres/20261121000010_registration_overlap.sql"),
    ),
    (
        20261123000011,
        "leases",
        include_str!("../../../migrations/postgres/20261123000011_leases.sql"),
    ),
    // PostgreSQL only: the trigger behind cross-replica wake-ups (see `wakeups`).
    (
        20261123000012,
        "assignment notify",
        include_str!("../../../migrations/postgres/20261123000012_assignment_notify.sql"),
    ),
    (
        20261123000013,
        "lease held since",
        include_str!("../../../migrations/postgres/20261123000013_lease_held_since.sql"),
    ),
    (
        20261124000014,
        "locations",
        include_str!("../../../migrations/postgres/20261124000014_locations.sql"),
    ),
    (
        20261124000015,
        "notifications",
        include_str!("../../../migrations/postgres/20261124000015_notifications.sql"),
    ),
    (
        20261125000016,
        "rollups",
        include_str!("../../../migrations/postgres/20261125000016_rollups.sql"),
    ),
    (
        20261125000017,
        "web sessions",
        include_str!("../../../migrations/postgres/20261125000017_web_sessions.sql"),
    ),
    (
        20261126000018,
        "outbox per channel",
        include_str!("../../../migrations/postgres/20261126000018_outbox_per_channel.sql"),
    ),
    (
        20261126000019,
        "alertmanager api",
        include_str!("../../../migrations/postgres/20261126000019_alertmanager_api.sql"),
    ),
    (
        20261127000020,
        "verdict state",
        include_str!("../../../migrations/postgres/20261127000020_verdict_state.sql"),
    ),
    (
        20261128000021,
        "uptime time",
        include_str!("../../../migrations/postgres/20261128000021_uptime_time.sql"),
    ),
    (
        20261129000022,
        "token limits",
        include_str!("../../../migrations/postgres/20261129000022_token_limits.sql"),
    ),
    (
        20261130000023,
        "alert due",
        include_str!("../../../migrations/postgres/20261130000023_alert_due.sql"),
    ),
    (
        20261201000024,
        "assignment log version",
        include_str!("../../../migrations/postgres/20261201000024_assignment_log_version.sql"),
    ),
    (
        20261201000025,
        "location shown status",
        include_str!("../../../migrations/postgres/20261201000025_location_shown_status.sql"),
    ),
    (
        20261201000026,
        "placement due",
        include_str!("../../../migrations/postgres/20261201000026_placement_due.sql"),
    ),
    (
        20261202000027,
        "alert due steady",
        include_str!("../../../migrations/postgres/20261202000027_alert_due_steady.sql"),
    ),
    (
        20261203000028,
        "poller commands",
        include_str!("../../../migrations/postgres/20261203000028_poller_commands.sql"),
    ),
    (
        20261204000029,
        "dependencies",
        include_str!("../../../migrations/postgres/20261204000029_dependencies.sql"),
    ),
    (
        20261205000030,
        "maintenance_windows",
        include_str!("../../../migrations/postgres/20261205000030_maintenance_windows.sql"),
    ),
    (
        20261206000031,
        "tags",
        include_str!("../../../migrations/postgres/20261206000031_tags.sql"),
    ),
    (
        20261207000032,
        "parents",
        include_str!("../../../migrations/postgres/20261207000032_parents.sql"),
    ),
    (
        20261208000033,
        "heartbeats",
        include_str!("../../../migrations/postgres/20261208000033_heartbeats.sql"),
    ),
    (
        20261209000034,
        "maintenance_stop_checks",
        include_str!("../../../migrations/postgres/20261209000034_maintenance_stop_checks.sql"),
    ),
    (
        20261210000035,
        "users",
        include_str!("../../../migrations/postgres/20261210000035_users.sql"),
    ),
    (
        20261211000036,
        "audit",
        include_str!("../../../migrations/postgres/20261211000036_audit.sql"),
    ),
    (
        20261212000037,
        "audit_key_user",
        include_str!("../../../migrations/postgres/20261212000037_audit_key_user.sql"),
    ),
    (
        20261213000038,
        "managed_objects",
        include_str!("../../../migrations/postgres/20261213000038_managed_objects.sql"),
    ),
    (
        20261214000039,
        "api_key_maker",
        include_str!("../../../migrations/postgres/20261214000039_api_key_maker.sql"),
    ),
];

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the URL: it may hold the database password.
        f.debug_struct("Store")
            .field("backend", &self.backend)
            .finish_non_exhaustive()
    }
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
        let backend = if url.starts_with("sqlite:") {
            Backend::Sqlite
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            Backend::Postgres
        } else {
            anyhow::bail!(
                "CENTRAL_DATABASE_URL must start with sqlite:// or postgres://, got `{}`",
                redacted(url)
            );
        };
        if backend == Backend::Sqlite {
            if let Some(why) = sqlite_url_refusal(url) {
                anyhow::bail!(
                    "CENTRAL_DATABASE_URL `{}` {why}; central opens the database from several \
                     connections and from a reader thread of its own (behind /metrics), so it \
                     must be a file on disk that central can write: `sqlite://<path>`, with no \
                     mode, `mode=rwc` or `mode=rw`",
                    redacted(url)
                );
            }
        }
        let url = match backend {
            Backend::Sqlite if !url.contains("mode=") => {
                let sep = if url.contains('?') { '&' } else { '?' };
                format!("{url}{sep}mode=rwc")
            }
            _ => url.to_string(),
        };
        let options = AnyConnectOptions::from_str(&url)
            .with_context(|| format!("invalid CENTRAL_DATABASE_URL `{}`", redacted(&url)))?;
        let sqlite_file = match backend {
            Backend::Sqlite => Some(
                sqlx::sqlite::SqliteConnectOptions::from_str(&url)
                    .with_context(|| format!("invalid CENTRAL_DATABASE_URL `{}`", redacted(&url)))?
                    .get_filename()
                    .to_path_buf(),
            ),
            Backend::Postgres => None,
        };
        if backend == Backend::Sqlite {
            // Before the first connection opens: ingest runs on the writer's handle (`direct`).
            direct::install()?;
        }
        let pool = Self::pool_options(
            backend,
            match backend {
                Backend::Sqlite => 4,
                Backend::Postgres => 16,
            },
            READER_CACHE_KIB,
        )
        .connect_with(options.clone())
        .await
        .with_context(|| format!("cannot open the database at `{}`", redacted(&url)))?;
        let writer = match backend {
            Backend::Sqlite => Self::pool_options(backend, 1, WRITER_CACHE_KIB)
                // Its cache is the point: the connection is never retired while central runs.
                .idle_timeout(None)
                .max_lifetime(None)
                .connect_with(options)
                .await
                .with_context(|| format!("cannot open the database at `{}`", redacted(&url)))?,
            Backend::Postgres => pool.clone(),
        };
        let store = Store {
            lent: direct::Lent::default(),
            pool,
            writer,
            backend,
            url: url.clone(),
            sqlite_file,
            sqlite_writer: Mutex::new(()),
            sqlite_queue: Mutex::new(()),
            head: head::Head::default(),
            head_flushing: Mutex::new(()),
        };
        store.migrate().await?;
        let mut store = store;
        if backend == Backend::Sqlite {
            store.head = store.load_head().await?;
        }
        Ok(store)
    }

    fn pool_options(backend: Backend, connections: u32, cache_kib: u32) -> AnyPoolOptions {
        AnyPoolOptions::new()
            .max_connections(connections)
            .acquire_timeout(Duration::from_secs(10))
            // A ping before each use finds a PostgreSQL connection the network dropped; a
            // SQLite connection is a file that cannot drop, and the ping is one more round
            // trip to its worker thread per transaction.
            .test_before_acquire(backend == Backend::Postgres)
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    if backend == Backend::Sqlite {
                        // Sorts and groupings in memory: a temporary file each (an open, a
                        // write and an unlink) cost a few dozen system calls a second at
                        // 100,000 monitors (seen with strace in the scale benchmark).
                        // The page cache's size is the connection's (`WRITER_CACHE_KIB`,
                        // `READER_CACHE_KIB`). Pages are cached as they are read, so a small
                        // database costs no more than its pages.
                        conn.execute(
                            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; \
                             PRAGMA busy_timeout = 10000; PRAGMA foreign_keys = ON; \
                             PRAGMA temp_store = MEMORY;",
                        )
                        .await?;
                        conn.execute(&*format!("PRAGMA cache_size = -{cache_kib};"))
                            .await?;
                    }
                    Ok(())
                })
            })
    }

    async fn migrate(&self) -> anyhow::Result<()> {
        let sources = match self.backend {
            Backend::Sqlite => SQLITE_MIGRATIONS,
            Backend::Postgres => POSTGRES_MIGRATIONS,
        };
        let migrations: Vec<Migration> = sources
            .iter()
            .map(|(version, description, sql)| {
                Migration::new(
                    *version,
                    Cow::Borrowed(*description),
                    MigrationType::Simple,
                    Cow::Borrowed(*sql),
                    false,
                )
            })
            .collect();
        let migrator = Migrator {
            migrations: Cow::Owned(migrations),
            ..Migrator::DEFAULT
        };
        migrator
            .run(&self.pool)
            .await
            .context("applying database migrations failed")
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Serialises writers on SQLite; call before a write transaction.
    pub async fn write_lock(&self) -> WriteGuard<'_> {
        match self.backend {
            Backend::Sqlite => {
                let _queued = self.sqlite_queue.lock().await;
                WriteGuard(Some(self.sqlite_writer.lock().await))
            }
            Backend::Postgres => WriteGuard(None),
        }
    }

    /// `write_lock` ahead of the ordinary writers' queue: waits for the write under way and
    /// at most one more (`sqlite_queue`). Only for small writes that must happen in time, at a
    /// rate that cannot keep the others waiting: the lease's renewal (every 2 s) and delivery's
    /// claims and records (two per chunk of notices sent).
    pub async fn write_lock_first(&self) -> WriteGuard<'_> {
        match self.backend {
            Backend::Sqlite => WriteGuard(Some(self.sqlite_writer.lock().await)),
            Backend::Postgres => WriteGuard(None),
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

    /// The current assignment version.
    pub async fn assignment_version(&self) -> anyhow::Result<i64> {
        let (version,): (i64,) =
            sqlx::query_as("SELECT version FROM assignment_state WHERE id = 1")
                .fetch_one(&self.pool)
                .await?;
        Ok(version)
    }
}

/// Keyset pagination: the position after the last item of a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    pub key: i64,
    pub id: String,
}

impl Cursor {
    /// Opaque on the wire: `<key>.<id>`, with `key` a signed decimal of at most 18 digits and `id`
    /// a lowercase UUID. Every string of that shape (the OpenAPI pattern
    /// `^-?[0-9]{1,18}\.[0-9a-f-]{0,36}$`) decodes, so a client can never hold a cursor that
    /// looks right and is refused.
    pub fn encode(&self) -> String {
        format!("{}.{}", self.key, self.id)
    }

    pub fn decode(text: &str) -> Option<Cursor> {
        let (key, id) = text.split_once('.')?;
        let digits = key.strip_prefix('-').unwrap_or(key);
        let key_ok = (1..=18).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit());
        let id_ok = id.len() <= 36
            && id
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f' | b'-'));
        if !(key_ok && id_ok) {
            return None;
        }
        Some(Cursor {
            key: key.parse().ok()?,
            id: id.to_string(),
        })
    }

    /// Start of the first page.
    pub fn start() -> Cursor {
        Cursor::before_key(i64::MIN)
    }

    /// Just before every row whose key is `key` (ids sort after the empty string).
    pub fn before_key(key: i64) -> Cursor {
        Cursor {
            key,
            id: String::new(),
        }
    }
}

/// A flag column.
fn flag(value: bool) -> i64 {
    i64::from(value)
}

#[cfg(test)]
mod cursor_tests {
    use super::Cursor;

    #[test]
    fn what_encode_writes_decodes_and_nothing_else_does() {
        let cursor = Cursor {
            key: -1_764_000_000_000,
            id: "0f9e8d7c-6b5a-4f3e-9d2c-1b0a99887766".into(),
        };
        assert_eq!(Cursor::decode(&cursor.encode()), Some(cursor));
        for text in ["999999999999999999.", "-5.abc", "0."] {
            assert!(Cursor::decode(text).is_some(), "{text}");
        }
        for text in [
            "",
            ".",
            "x.",
            "+5.a",
            "5",
            "1234567890123456789.a",
            "5.A",
            "5.a.b",
            "5. ",
            "5.0123456789abcdef0123456789abcdef01234",
        ] {
            assert_eq!(Cursor::decode(text), None, "{text}");
        }
    }
}

#[cfg(test)]
pub(crate) mod testing {
    use std::collections::HashSet;
    use std::future::Future;
    use std::sync::{Arc, Mutex};

    /// Lets every task spawned on this (current-thread) runtime run until it waits.
    async fn settle() {
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
    }

    /// Where `write` lands among ten ordinary writes queued behind one under way: how many of
    /// them got the write lock before it was done (`write` is started once they all wait).
    pub async fn place_among_queued_writes<F, Fut>(store: Arc<Store>, write: F) -> usize
    where
        F: FnOnce(Arc<Store>) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        const MARK: usize = usize::MAX;
        let order: Arc<Mutex<Vec<usize>>> = Arc::default();
        let under_way = store.write_lock().await;
        let mut writers = Vec::new();
        for i in 0..10 {
            let (store, order) = (store.clone(), order.clone());
            writers.push(tokio::spawn(async move {
                let _write = store.write_lock().await;
                order.lock().unwrap().push(i);
                settle().await;
            }));
        }
        settle().await;
        let first = {
            let (store, order) = (store.clone(), order.clone());
            tokio::spawn(async move {
                write(store).await;
                order.lock().unwrap().push(MARK);
            })
        };
        settle().await;
        drop(under_way);
        first.await.unwrap();
        for writer in writers {
            writer.await.unwrap();
        }
        let order = order.lock().unwrap();
        assert_eq!(order.len(), 11, "{order:?}");
        order.iter().position(|&i| i == MARK).unwrap()
    }

    use super::{IngestRules, PollerRow, Store, StoredVerdict, TimeCredit, TimePoint};

    /// An enabled poller of no region, created at `created_at`, last heard from at `now`.
    pub fn poller_row(created_at: i64, now: i64) -> PollerRow {
        PollerRow {
            id: uuid::Uuid::new_v4().to_string(),
            name: "p".into(),
            alias: None,
            region: None,
            datacenter: None,
            capabilities: "http".into(),
            capability_limit: None,
            version: Some("test".into()),
            enabled: true,
            registration_token_id: None,
            created_at,
            last_heartbeat_at: Some(now),
            last_upload_at: None,
            queue_depth: 0,
            oldest_queued_at: None,
            dropped_results: 0,
            assignment_version: None,
            deleted_at: None,
            scheduler_health: None,
            online_since: Some(created_at),
            status: None,
            status_since: None,
            last_error: None,
            last_error_at: None,
        }
    }
    use crate::service::uptime::Timeline;

    /// Confirms every verdict at once (thresholds of 1), and lets every result stand for at
    /// most 2 minutes (a one-minute monitor), for store tests.
    pub struct NewestDecides;

    pub const STORE_TEST_TIMELINE: Timeline = Timeline {
        cap_ms: 120_000,
        quorum: None,
        pause: None,
    };

    impl IngestRules for NewestDecides {
        fn advance(&self, _: &str, state: StoredVerdict, result: &str) -> StoredVerdict {
            let run = match state.status.as_deref() {
                Some(status) if status == result => state.run_length + 1,
                _ => 1,
            };
            StoredVerdict {
                confirmed: Some(result.to_string()),
                status: Some(result.to_string()),
                run_length: run,
            }
        }

        fn unchanged_until(&self, _: &str, ts: i64) -> i64 {
            crate::service::status::unchanged_until(ts, 60_000)
        }

        fn interval_ms(&self, _: &str) -> i64 {
            60_000
        }

        fn lookback_ms(&self, _: &str) -> i64 {
            STORE_TEST_TIMELINE.cap_ms
        }

        fn credit_time(
            &self,
            _: &str,
            _: Option<&str>,
            history: &[&TimePoint],
            new: &HashSet<&str>,
            old_until: Option<i64>,
            new_until: i64,
        ) -> Vec<TimeCredit> {
            STORE_TEST_TIMELINE.credit(history, new, old_until, new_until)
        }

        fn dependency_diff(
            &self,
            monitor_id: &str,
            region: &str,
            at: i64,
            before: &[super::DependencyRow],
            report: &super::DependencyReport,
        ) -> super::DependencyDiff {
            crate::service::dependencies::rules::diff(monitor_id, region, at, before, report, false)
        }
    }

    /// A result of monitor `m1`, checked from one place at `ts`, 5 ms.
    pub fn result(id: &str, ts: i64, status: &str) -> super::NewResult {
        super::NewResult {
            id: id.into(),
            monitor_id: "m1".into(),
            region: None,
            ts,
            status: status.into(),
            latency_ms: Some(5),
            msg: String::new(),
            meta: "{}".into(),
            next_due_at: None,
            dependencies: None,
        }
    }

    /// A store on a fresh SQLite file that lives as long as the returned directory.
    pub async fn sqlite_store() -> (Store, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("central.db").display());
        (Store::connect(&url).await.unwrap(), dir)
    }
}

/// Why central cannot run on this SQLite URL, if it cannot. The pool and the writer open it
/// through sqlx, but `/metrics` reads the file it names (`get_filename`) with a plain rusqlite
/// connection (`gauges`), which knows nothing of the URL's parameters: an in-memory database,
/// another VFS or an immutable file would have it read another database than the rest of
/// central, and a read-only one fails at central's first write. Names are read as sqlx reads
/// them; a URL sqlx cannot read is left for it to refuse.
fn sqlite_url_refusal(url: &str) -> Option<&'static str> {
    let options = sqlx::sqlite::SqliteConnectOptions::from_str(url).ok()?;
    let file = options.get_filename().to_string_lossy();
    let rest = url
        .trim_start_matches("sqlite://")
        .trim_start_matches("sqlite:");
    let (database, query) = rest.split_once('?').unwrap_or((rest, ""));
    if database == ":memory:" || file == ":memory:" {
        return Some("is an in-memory database");
    }
    if file.is_empty() {
        return Some("names no file (SQLite would give each connection a temporary one)");
    }
    if file.starts_with("file:") {
        return Some("names a `file:` URI, whose parameters central does not check");
    }
    url::form_urlencoded::parse(query.as_bytes()).find_map(|(key, value)| match (&*key, &*value) {
        ("mode", "memory") => Some("asks for an in-memory database (`mode=memory`)"),
        ("mode", "ro") => Some("opens the database read-only (`mode=ro`), and central writes"),
        ("vfs", _) => Some("names a VFS (`vfs=`)"),
        ("immutable", _) => Some("declares the file immutable (`immutable=`), and central writes"),
        _ => None,
    })
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
