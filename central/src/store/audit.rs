//! The audit log's rows: appended, read newest first, pruned by age. Nothing here changes a
//! row (the table's trigger refuses it); what an entry says is `service::audit`'s.

use sqlx::any::AnyRow;
use sqlx::{FromRow, Row};

use shared_proto::audit::AuditFilter;

use super::{Cursor, Store};

#[derive(Debug, Clone)]
pub struct AuditRow {
    pub id: String,
    pub at: i64,
    pub actor_kind: String,
    pub actor_id: Option<String>,
    /// For an API key, the user it acted for (`None`: made with the admin token).
    pub actor_user_id: Option<String>,
    pub actor_name: String,
    pub address: Option<String>,
    pub action: String,
    pub object_kind: String,
    pub object_id: Option<String>,
    /// JSON text.
    pub before: Option<String>,
    /// JSON text.
    pub after: Option<String>,
}

impl FromRow<'_, AnyRow> for AuditRow {
    fn from_row(row: &AnyRow) -> sqlx::Result<Self> {
        Ok(Self {
            id: row.try_get("id")?,
            at: row.try_get("at")?,
            actor_kind: row.try_get("actor_kind")?,
            actor_id: row.try_get("actor_id")?,
            actor_user_id: row.try_get("actor_user_id")?,
            actor_name: row.try_get("actor_name")?,
            address: row.try_get("address")?,
            action: row.try_get("action")?,
            object_kind: row.try_get("object_kind")?,
            object_id: row.try_get("object_id")?,
            before: row.try_get("before")?,
            after: row.try_get("after")?,
        })
    }
}

const COLUMNS: &str = "id, at, actor_kind, actor_id, actor_name, address, action, object_kind, \
     object_id, before, after, actor_user_id";

const INTENT_COLUMNS: &str = "id, at, actor_kind, actor_id, actor_name, address, action, \
     object_kind, object_id, before, actor_user_id";

/// The statement that appends `row` to the log (`COLUMNS`, in their order).
fn appended(row: &AuditRow) -> sqlx::query::Query<'_, sqlx::Any, sqlx::any::AnyArguments<'_>> {
    sqlx::query(
        "INSERT INTO audit_log (id, at, actor_kind, actor_id, actor_name, address, action, \
         object_kind, object_id, before, after, actor_user_id) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
    )
    .bind(&row.id)
    .bind(row.at)
    .bind(&row.actor_kind)
    .bind(&row.actor_id)
    .bind(&row.actor_name)
    .bind(&row.address)
    .bind(&row.action)
    .bind(&row.object_kind)
    .bind(&row.object_id)
    .bind(&row.before)
    .bind(&row.after)
    .bind(&row.actor_user_id)
}

/// Rows pruned per statement.
const PRUNE_STEP: i64 = 1_000;

impl Store {
    pub async fn insert_audit(&self, row: &AuditRow) -> anyhow::Result<()> {
        let _guard = self.write_lock().await;
        appended(row).execute(&self.writer).await?;
        Ok(())
    }

    /// A page of entries, newest first, after `after` (the last entry of the previous page;
    /// the start cursor reads from the newest). Each filter narrows through an index.
    pub async fn audit_entries(
        &self,
        filter: &AuditFilter,
        after: &Cursor,
        limit: u32,
    ) -> anyhow::Result<Vec<AuditRow>> {
        let mut conditions = Vec::new();
        let mut values: Vec<&str> = Vec::new();
        // An actor is a user, key or token by its own id, or a user through their keys.
        for (condition, value) in [
            ("(actor_id = $N OR actor_user_id = $N)", &filter.actor_id),
            ("actor_kind = $N", &filter.actor_kind),
            ("object_kind = $N", &filter.object_kind),
            ("object_id = $N", &filter.object_id),
        ] {
            if let Some(value) = value {
                values.push(value);
                conditions.push(condition.replace("$N", &format!("${}", values.len() + 3)));
            }
        }
        // Newest first: the start cursor (`Cursor::start`, the lowest key) means "from the top".
        let (key, id) = if *after == Cursor::start() {
            (i64::MAX, "")
        } else {
            (after.key, after.id.as_str())
        };
        conditions.push("(at < $1 OR (at = $1 AND id < $2))".to_string());
        let sql = format!(
            "SELECT {COLUMNS} FROM audit_log WHERE {} ORDER BY at DESC, id DESC LIMIT $3",
            conditions.join(" AND ")
        );
        let mut query = sqlx::query_as(&sql)
            .bind(key)
            .bind(id)
            .bind(i64::from(limit));
        for value in values {
            query = query.bind(value);
        }
        Ok(query.fetch_all(&self.pool).await?)
    }

    /// Writes the entry of a change about to be made (`after` is not known yet).
    pub async fn insert_audit_intent(&self, row: &AuditRow) -> anyhow::Result<()> {
        let _guard = self.write_lock().await;
        let sql = format!(
            "INSERT INTO audit_intents ({INTENT_COLUMNS}) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
        );
        sqlx::query(&sql)
            .bind(&row.id)
            .bind(row.at)
            .bind(&row.actor_kind)
            .bind(&row.actor_id)
            .bind(&row.actor_name)
            .bind(&row.address)
            .bind(&row.action)
            .bind(&row.object_kind)
            .bind(&row.object_id)
            .bind(&row.before)
            .bind(&row.actor_user_id)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Appends `row` to the log and forgets its intent (same id), in one transaction.
    pub async fn complete_audit_intent(&self, row: &AuditRow) -> anyhow::Result<()> {
        let _guard = self.write_lock().await;
        let mut tx = self.writer.begin().await?;
        appended(row).execute(&mut *tx).await?;
        sqlx::query("DELETE FROM audit_intents WHERE id = $1")
            .bind(&row.id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Forgets the intent of a change that was not made.
    pub async fn delete_audit_intent(&self, id: &str) -> anyhow::Result<()> {
        let _guard = self.write_lock().await;
        sqlx::query("DELETE FROM audit_intents WHERE id = $1")
            .bind(id)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Intents written before `before`, oldest first, at most `limit` (`after` is `None`).
    pub async fn audit_intents_before(
        &self,
        before: i64,
        limit: u32,
    ) -> anyhow::Result<Vec<AuditRow>> {
        let sql = format!(
            "SELECT {INTENT_COLUMNS}, CAST(NULL AS TEXT) AS after FROM audit_intents WHERE at < $1 \
             ORDER BY at LIMIT $2"
        );
        Ok(sqlx::query_as(&sql)
            .bind(before)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?)
    }

    /// Deletes entries older than `before`, a step at a time; returns how many went.
    pub async fn prune_audit(&self, before: i64) -> anyhow::Result<u64> {
        let mut pruned = 0;
        loop {
            let _guard = self.write_lock().await;
            let done = sqlx::query(
                "DELETE FROM audit_log WHERE id IN \
                 (SELECT id FROM audit_log WHERE at < $1 ORDER BY at LIMIT $2)",
            )
            .bind(before)
            .bind(PRUNE_STEP)
            .execute(&self.writer)
            .await?;
            pruned += done.rows_affected();
            if done.rows_affected() < PRUNE_STEP as u64 {
                return Ok(pruned);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing::sqlite_store;

    fn entry(id: &str, at: i64, object_id: &str) -> AuditRow {
        AuditRow {
            id: id.into(),
            at,
            actor_kind: "admin_token".into(),
            actor_id: None,
            actor_user_id: None,
            actor_name: "admin token".into(),
            address: None,
            action: "update".into(),
            object_kind: "monitors".into(),
            object_id: Some(object_id.into()),
            before: None,
            after: None,
        }
    }

    #[tokio::test]
    async fn entries_cannot_be_changed_read_newest_first_and_go_only_by_age() {
        let (store, _dir) = sqlite_store().await;
        for (id, at, object) in [("a", 1_000, "m1"), ("b", 2_000, "m2"), ("c", 3_000, "m1")] {
            store.insert_audit(&entry(id, at, object)).await.unwrap();
        }
        let changed = sqlx::query("UPDATE audit_log SET actor_name = 'someone else'")
            .execute(&store.writer)
            .await;
        assert!(changed.is_err(), "the trigger refuses any update");

        let filter = AuditFilter {
            object_id: Some("m1".into()),
            ..AuditFilter::default()
        };
        let first = store
            .audit_entries(&filter, &Cursor::start(), 1)
            .await
            .unwrap();
        assert_eq!(
            first.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
            ["c"]
        );
        let next = Cursor {
            key: first[0].at,
            id: first[0].id.clone(),
        };
        let second = store.audit_entries(&filter, &next, 10).await.unwrap();
        assert_eq!(
            second.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
            ["a"]
        );

        assert_eq!(store.prune_audit(2_500).await.unwrap(), 2);
        let left = store
            .audit_entries(&AuditFilter::default(), &Cursor::start(), 10)
            .await
            .unwrap();
        assert_eq!(
            left.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
            ["c"]
        );
    }

    #[tokio::test]
    async fn a_users_filter_finds_the_changes_of_their_keys() {
        let (store, _dir) = sqlite_store().await;
        let by = |id: &str, actor: &str, user: Option<&str>| AuditRow {
            actor_kind: if user.is_some() { "api_key" } else { "user" }.into(),
            actor_id: Some(actor.into()),
            actor_user_id: user.map(str::to_string),
            ..entry(id, 1_000, "m1")
        };
        store.insert_audit(&by("a", "u1", None)).await.unwrap();
        store
            .insert_audit(&by("b", "k1", Some("u1")))
            .await
            .unwrap();
        store
            .insert_audit(&by("c", "k2", Some("u2")))
            .await
            .unwrap();
        let filter = AuditFilter {
            actor_id: Some("u1".into()),
            ..AuditFilter::default()
        };
        let found = store
            .audit_entries(&filter, &Cursor::start(), 10)
            .await
            .unwrap();
        let mut ids: Vec<_> = found.iter().map(|r| r.id.as_str()).collect();
        ids.sort();
        assert_eq!(ids, ["a", "b"]);
    }
}
