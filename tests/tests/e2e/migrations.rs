//! The two migration sets (`migrations/sqlite`, `migrations/postgres`) are kept by hand as
//! pairs: this checks they stay in step. Central migrates an empty database of each backend,
//! and both must then hold the same tables with the same columns. Runs in either suite: it
//! starts a PostgreSQL server of its own.

use std::collections::BTreeSet;

use e2e::postgres::Postgres;
use e2e::Central;
use sqlx::Connection;

/// Tables one backend has by design, and why.
const SQLITE_ONLY: &[&str] = &[
    // The results' per-monitor order, written in flushes so that storing a result writes no
    // page of a per-monitor index; PostgreSQL keeps the index `results_monitor_ts` instead.
    "result_index",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_backends_migrate_to_the_same_tables_and_columns() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let sqlite_file = dir.path().join("central.db");
    let sqlite =
        Central::start_replica(&format!("sqlite://{}", sqlite_file.display()), &[]).await?;
    let server = Postgres::start().await?;
    let postgres_url = server.create_database("central").await?;
    let postgres = Central::start_replica(&postgres_url, &[]).await?;
    sqlite.stop().await;
    postgres.stop().await;

    let on_sqlite: BTreeSet<(String, String)> = {
        let db = rusqlite::Connection::open(&sqlite_file)?;
        let mut query = db.prepare(
            "SELECT m.name, p.name FROM sqlite_master m JOIN pragma_table_info(m.name) p \
             WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'",
        )?;
        let rows = query.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get(1)?)))?;
        rows.filter(|row| {
            !row.as_ref()
                .is_ok_and(|(table, _)| SQLITE_ONLY.contains(&table.as_str()))
        })
        .collect::<Result<_, _>>()?
    };
    let on_postgres: BTreeSet<(String, String)> = {
        let mut db = sqlx::PgConnection::connect(&postgres_url).await?;
        sqlx::query_as(
            "SELECT table_name::text, column_name::text FROM information_schema.columns \
             WHERE table_schema = 'public'",
        )
        .fetch_all(&mut db)
        .await?
        .into_iter()
        .collect()
    };
    assert!(on_sqlite.len() > 100, "the schema was read: {on_sqlite:?}");
    let only_sqlite: Vec<_> = on_sqlite.difference(&on_postgres).collect();
    let only_postgres: Vec<_> = on_postgres.difference(&on_sqlite).collect();
    assert!(
        only_sqlite.is_empty() && only_postgres.is_empty(),
        "the migration sets differ (table, column):\n only on SQLite: {only_sqlite:?}\n \
         only on PostgreSQL: {only_postgres:?}"
    );
    Ok(())
}

/// A database a newer central migrated: this central runs on it while the newer migrations
/// only added (the replica not upgraded yet, restarting during a rolling upgrade), and refuses
/// to start, naming the version it needs, once one of them says it removed something older
/// centrals rely on (`schema_requirements`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_schema_is_run_on_while_it_only_added_and_refused_once_it_needs_a_newer_central(
) -> anyhow::Result<()> {
    const NEWER: i64 = 29_991_231_000_001;
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("central.db");
    let mut central = Central::start_replica(&format!("sqlite://{}", file.display()), &[]).await?;
    central.kill().await;
    rusqlite::Connection::open(&file)?.execute(
        "INSERT INTO _sqlx_migrations (version, description, installed_on, success, checksum, \
         execution_time) VALUES (?1, 'added by a newer central', CURRENT_TIMESTAMP, 1, X'00', 0)",
        [NEWER],
    )?;
    central.restart().await?;
    let (status, _) = central
        .admin(reqwest::Method::GET, "/api/v1/monitors", None)
        .await?;
    assert_eq!(status, 200, "{}", central.log());
    assert!(central.log().contains("only add to the schema"));

    central.kill().await;
    rusqlite::Connection::open(&file)?.execute(
        "INSERT INTO schema_requirements (migration, min_central) VALUES (?1, '99.0.0')",
        [NEWER],
    )?;
    let refused = central.restart().await;
    assert!(refused.is_err(), "it started on a schema it cannot run");
    assert!(
        central
            .log()
            .contains("its schema needs central 99.0.0 or newer"),
        "{}",
        central.log()
    );
    Ok(())
}
