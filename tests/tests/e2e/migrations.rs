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
