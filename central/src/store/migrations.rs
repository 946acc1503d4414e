//! Applying the schema's pending migrations at connect (the list, compiled in from
//! `migrations/<database>/`, is `migration_list`'s). Must not hold other SQL: a change to the
//! schema is a new migration file and a row in the list.
//!
//! A database a newer central migrated holds migrations this one does not know: whether it
//! may still run on it is `newer_schema`'s.

use std::borrow::Cow;

use anyhow::Context;
use sqlx::migrate::{Migration, MigrationType, Migrator};

use super::migration_list::{POSTGRES_MIGRATIONS, SQLITE_MIGRATIONS};
use super::{Backend, Store};

impl Store {
    pub(super) async fn migrate(&self) -> anyhow::Result<()> {
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
        let known: Vec<i64> = sources.iter().map(|(version, _, _)| *version).collect();
        let mut migrator = Migrator {
            migrations: Cow::Owned(migrations),
            ..Migrator::DEFAULT
        };
        let newer = self.newer_migrations(&known).await?;
        if !newer.is_empty() {
            self.refuse_a_schema_it_cannot_run(&newer).await?;
            tracing::warn!(
                migrations = ?newer,
                "this database was migrated by a newer central; its migrations unknown here \
                 only add to the schema, so this central runs on it (finish the upgrade soon)"
            );
            migrator.ignore_missing = true;
        }
        migrator
            .run(&self.pool)
            .await
            .context("applying database migrations failed")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether a migration's SQL removes or renames something (a contract step: `newer_schema`)
    /// without writing the `schema_requirements` row that tells older centrals to stay away.
    fn contracts_unannounced(sql: &str) -> bool {
        let code = sql
            .lines()
            .filter(|line| !line.trim_start().starts_with("--"))
            .collect::<Vec<_>>()
            .join("\n")
            .to_uppercase();
        let contracts = ["DROP ", "RENAME ", "ALTER COLUMN"]
            .iter()
            .any(|word| code.contains(word));
        contracts && !code.contains("INSERT INTO SCHEMA_REQUIREMENTS")
    }

    /// The last migration of 0.1.0, which refuses every migration it does not know: the rule
    /// holds from the one after it.
    const LAST_OF_0_1_0: i64 = 20261217000042;

    /// Every migration after 0.1.0 that removes or renames says which central it needs: an
    /// older replica would otherwise start on a schema it cannot run.
    #[test]
    fn a_migration_that_removes_or_renames_says_which_central_it_needs() {
        for (version, description, sql) in SQLITE_MIGRATIONS.iter().chain(POSTGRES_MIGRATIONS) {
            assert!(
                *version <= LAST_OF_0_1_0 || !contracts_unannounced(sql),
                "migration {version} ({description}) removes or renames without a \
                 schema_requirements row naming the oldest central that runs after it"
            );
        }
        assert!(contracts_unannounced(
            "ALTER TABLE pollers DROP COLUMN region;"
        ));
        assert!(contracts_unannounced(
            "ALTER TABLE monitors RENAME COLUMN name TO title;"
        ));
        assert!(!contracts_unannounced(
            "ALTER TABLE pollers DROP COLUMN region;\n\
             INSERT INTO schema_requirements (migration, min_central) VALUES (1, '0.3.0');"
        ));
        assert!(!contracts_unannounced(
            "-- drop nothing\nALTER TABLE pollers ADD COLUMN x BIGINT NOT NULL DEFAULT 0;"
        ));
    }
}
