//! Rows of `managed_objects`: which objects a configuration file manages, by kind and key.
//! What a key may be and which objects exist is `service::managed`'s.

use super::Store;

/// A mark: (kind, key, object id, applied at).
pub type ManagedRow = (String, String, String, i64);

impl Store {
    /// Every mark, or those of one kind, by kind and key.
    pub async fn managed_objects(&self, kind: Option<&str>) -> anyhow::Result<Vec<ManagedRow>> {
        let filter = if kind.is_some() {
            "WHERE kind = $1"
        } else {
            ""
        };
        let sql = format!(
            "SELECT kind, key, object_id, applied_at FROM managed_objects {filter} \
             ORDER BY kind, key"
        );
        let mut query = sqlx::query_as(&sql);
        if let Some(kind) = kind {
            query = query.bind(kind);
        }
        Ok(query.fetch_all(&self.pool).await?)
    }

    /// The key marking this object, if a file manages it.
    pub async fn managed_key(&self, kind: &str, object_id: &str) -> anyhow::Result<Option<String>> {
        let found: Option<(String,)> =
            sqlx::query_as("SELECT key FROM managed_objects WHERE kind = $1 AND object_id = $2")
                .bind(kind)
                .bind(object_id)
                .fetch_optional(&self.pool)
                .await?;
        Ok(found.map(|(key,)| key))
    }

    /// Marks the object with the key, in one transaction: the key names this object from now
    /// on, and any other key of the object goes (an object has one key of its kind).
    pub async fn put_managed(
        &self,
        kind: &str,
        key: &str,
        object_id: &str,
        now: i64,
    ) -> anyhow::Result<()> {
        let _guard = self.write_lock().await;
        let mut tx = self.writer.begin().await?;
        sqlx::query("DELETE FROM managed_objects WHERE kind = $1 AND object_id = $2 AND key <> $3")
            .bind(kind)
            .bind(object_id)
            .bind(key)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO managed_objects (kind, key, object_id, applied_at) \
             VALUES ($1, $2, $3, $4) \
             ON CONFLICT (kind, key) DO UPDATE SET object_id = $3, applied_at = $4",
        )
        .bind(kind)
        .bind(key)
        .bind(object_id)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Removes a mark; `false` when there was none.
    pub async fn delete_managed(&self, kind: &str, key: &str) -> anyhow::Result<bool> {
        let _guard = self.write_lock().await;
        let done = sqlx::query("DELETE FROM managed_objects WHERE kind = $1 AND key = $2")
            .bind(kind)
            .bind(key)
            .execute(&self.writer)
            .await?;
        Ok(done.rows_affected() == 1)
    }
}

#[cfg(test)]
mod tests {
    use crate::store::testing::sqlite_store;

    #[tokio::test]
    async fn an_object_has_one_key_and_a_key_one_object() {
        let (store, _dir) = sqlite_store().await;
        store.put_managed("monitors", "api", "m1", 1).await.unwrap();
        store.put_managed("monitors", "web", "m2", 1).await.unwrap();
        // The key moves to another object; the object's old key goes.
        store.put_managed("monitors", "api", "m2", 2).await.unwrap();
        let rows = store.managed_objects(Some("monitors")).await.unwrap();
        assert_eq!(rows, [("monitors".into(), "api".into(), "m2".into(), 2)]);
        assert_eq!(store.managed_key("monitors", "m1").await.unwrap(), None);
        assert!(store.delete_managed("monitors", "api").await.unwrap());
        assert!(!store.delete_managed("monitors", "api").await.unwrap());
    }
}
