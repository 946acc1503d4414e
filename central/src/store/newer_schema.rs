//! Running on a database a newer central migrated. Its migrations unknown here only add
//! (tables, columns with defaults, indexes) within a release, so this central still runs on
//! it: the replica not upgraded yet keeps restarting beside the upgraded one during a rolling
//! upgrade. A migration that removes or renames something (a contract step) writes its row in
//! `schema_requirements` with the oldest central that runs on the schema after it, and an
//! older central refuses to start, naming that version. Centrals before this rule (0.1.0)
//! refuse any migration they do not know. Owns these two reads; applying migrations is
//! `migrations`'.

use anyhow::Context;

use super::Store;

impl Store {
    /// The migrations applied to this database that are not `known` (none on a fresh one).
    pub(super) async fn newer_migrations(&self, known: &[i64]) -> anyhow::Result<Vec<i64>> {
        let applied: Vec<(i64,)> = match sqlx::query_as("SELECT version FROM _sqlx_migrations")
            .fetch_all(&self.pool)
            .await
        {
            Ok(applied) => applied,
            // No table yet: a fresh database.
            Err(sqlx::Error::Database(_)) => return Ok(Vec::new()),
            Err(e) => return Err(e).context("reading the applied migrations"),
        };
        let mut newer: Vec<i64> = applied
            .into_iter()
            .map(|(version,)| version)
            .filter(|version| !known.contains(version))
            .collect();
        newer.sort_unstable();
        Ok(newer)
    }

    /// Fails when one of the `newer` migrations needs a newer central than this one.
    pub(super) async fn refuse_a_schema_it_cannot_run(&self, newer: &[i64]) -> anyhow::Result<()> {
        let required: Vec<(i64, String)> =
            sqlx::query_as("SELECT migration, min_central FROM schema_requirements")
                .fetch_all(&self.pool)
                .await
                .context("reading what this database requires of central")?;
        let own = semver::Version::parse(env!("CARGO_PKG_VERSION"))?;
        let mut needed: Option<semver::Version> = None;
        for (migration, min) in required {
            if !newer.contains(&migration) {
                continue;
            }
            // Written by a newer central; one this central cannot read is no permission.
            let min = semver::Version::parse(&min).with_context(|| {
                format!("migration {migration} requires central `{min}`, which is no version")
            })?;
            if min > own && needed.as_ref().is_none_or(|n| min > *n) {
                needed = Some(min);
            }
        }
        if let Some(needed) = needed {
            anyhow::bail!(
                "this database was migrated by a newer central, and its schema needs central \
                 {needed} or newer (migrations {newer:?} are unknown here); this is central \
                 {own}: run {needed} or newer on it, or restore the backup taken before the \
                 upgrade"
            );
        }
        Ok(())
    }
}
