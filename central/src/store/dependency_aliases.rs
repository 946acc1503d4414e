//! Operators' aliases of dependency names (`dependency_aliases`): another name a dependency is
//! reported under, kept one level deep (an alias's canonical name is no alias) and bounded in
//! number. Must not resolve names in what is read (`store::dependencies` does, when it reads).

use super::Store;

/// An operator's alias.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AliasRow {
    pub alias: String,
    pub canonical: String,
    pub created_at: i64,
}

/// What became of a new alias (`Store::insert_dependency_alias`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AliasInsert {
    Stored,
    /// An alias of that name exists.
    Exists,
    /// Its canonical name is itself an alias.
    CanonicalIsAlias,
    /// Its alias is the canonical name of other aliases.
    AliasIsCanonical,
    /// As many aliases as central keeps exist.
    Full,
}

impl Store {
    /// Every alias, by alias.
    pub async fn dependency_aliases(&self) -> anyhow::Result<Vec<AliasRow>> {
        let rows: Vec<(String, String, i64)> = sqlx::query_as(
            "SELECT alias, canonical, created_at FROM dependency_aliases ORDER BY alias",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(alias, canonical, created_at)| AliasRow {
                alias,
                canonical,
                created_at,
            })
            .collect())
    }

    /// The alias named `alias`.
    pub async fn dependency_alias(&self, alias: &str) -> anyhow::Result<Option<AliasRow>> {
        let row: Option<(String, String, i64)> = sqlx::query_as(
            "SELECT alias, canonical, created_at FROM dependency_aliases WHERE alias = $1",
        )
        .bind(alias)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|(alias, canonical, created_at)| AliasRow {
            alias,
            canonical,
            created_at,
        }))
    }

    /// Stores `alias` if it keeps aliases one level deep and there are fewer than `max`: its
    /// canonical name is no alias, its alias no canonical name of another, and no alias of
    /// that name exists. Checked and written in one transaction that no other alias write
    /// interleaves with (on PostgreSQL a table lock, other replicas included), so two aliases
    /// made at once (`a`→`b`, `b`→`c`) cannot form a chain.
    pub async fn insert_dependency_alias(
        &self,
        alias: &AliasRow,
        max: u64,
    ) -> anyhow::Result<AliasInsert> {
        let _guard = self.write_lock().await;
        let mut tx = self.writer.begin().await?;
        if self.backend().writes_concurrently() {
            // Conflicts with itself, not with readers.
            sqlx::query("LOCK TABLE dependency_aliases IN SHARE ROW EXCLUSIVE MODE")
                .execute(&mut *tx)
                .await?;
        }
        let (existing, canonical_is_alias, alias_is_canonical, count): (i64, i64, i64, i64) =
            sqlx::query_as(
                "SELECT \
                 (SELECT COUNT(*) FROM dependency_aliases WHERE alias = $1), \
                 (SELECT COUNT(*) FROM dependency_aliases WHERE alias = $2), \
                 (SELECT COUNT(*) FROM dependency_aliases WHERE canonical = $1), \
                 (SELECT COUNT(*) FROM dependency_aliases)",
            )
            .bind(&alias.alias)
            .bind(&alias.canonical)
            .fetch_one(&mut *tx)
            .await?;
        let refused = if canonical_is_alias > 0 {
            Some(AliasInsert::CanonicalIsAlias)
        } else if alias_is_canonical > 0 {
            Some(AliasInsert::AliasIsCanonical)
        } else if existing > 0 {
            Some(AliasInsert::Exists)
        } else if count.max(0) as u64 >= max {
            Some(AliasInsert::Full)
        } else {
            None
        };
        if let Some(refused) = refused {
            return Ok(refused);
        }
        sqlx::query(
            "INSERT INTO dependency_aliases (alias, canonical, created_at) VALUES ($1, $2, $3)",
        )
        .bind(&alias.alias)
        .bind(&alias.canonical)
        .bind(alias.created_at)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(AliasInsert::Stored)
    }

    /// Deletes the alias `alias`; returns whether there was one.
    pub async fn delete_dependency_alias(&self, alias: &str) -> anyhow::Result<bool> {
        let _guard = self.write_lock().await;
        let deleted = sqlx::query("DELETE FROM dependency_aliases WHERE alias = $1")
            .bind(alias)
            .execute(&self.writer)
            .await?
            .rows_affected();
        Ok(deleted == 1)
    }
}
