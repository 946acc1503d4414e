//! The refresh tokens of users linked to the identity provider, and when each was last
//! checked with it (`service::sso::recheck`). Stored as given: central must present them, as it
//! presents a channel's secret (the database is trusted with both).

use super::Store;

impl Store {
    /// Keeps `refresh_token` as user `user_id`'s, checked `at` (a sign-in, or a check that got
    /// a new one).
    pub async fn keep_sso_link(
        &self,
        user_id: &str,
        refresh_token: &str,
        at: i64,
    ) -> anyhow::Result<()> {
        let _guard = self.write_lock().await;
        sqlx::query(
            "INSERT INTO sso_links (user_id, refresh_token, checked_at) VALUES ($1, $2, $3) \
             ON CONFLICT (user_id) DO UPDATE SET refresh_token = excluded.refresh_token, \
             checked_at = excluded.checked_at",
        )
        .bind(user_id)
        .bind(refresh_token)
        .bind(at)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// Up to `limit` links last checked at or before `before`, the longest unchecked first:
    /// `(user_id, refresh_token)`. An indexed read of the rows due.
    pub async fn due_sso_links(
        &self,
        before: i64,
        limit: u32,
    ) -> anyhow::Result<Vec<(String, String)>> {
        Ok(sqlx::query_as(
            "SELECT user_id, refresh_token FROM sso_links WHERE checked_at <= $1 \
             ORDER BY checked_at LIMIT $2",
        )
        .bind(before)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?)
    }

    /// Replaces user `user_id`'s refresh token `old` by `new` (a check's rotation), checked
    /// `at`; a token stored since (a sign-in while the check ran) is kept. Whether it replaced.
    pub async fn rotate_sso_link(
        &self,
        user_id: &str,
        old: &str,
        new: &str,
        at: i64,
    ) -> anyhow::Result<bool> {
        let _guard = self.write_lock().await;
        let done = sqlx::query(
            "UPDATE sso_links SET refresh_token = $3, checked_at = $4 \
             WHERE user_id = $1 AND refresh_token = $2",
        )
        .bind(user_id)
        .bind(old)
        .bind(new)
        .bind(at)
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Marks user `user_id`'s link checked `at`, keeping its token.
    pub async fn checked_sso_link(&self, user_id: &str, at: i64) -> anyhow::Result<()> {
        let _guard = self.write_lock().await;
        sqlx::query("UPDATE sso_links SET checked_at = $2 WHERE user_id = $1")
            .bind(user_id)
            .bind(at)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Forgets user `user_id`'s link (their access ended, or they were removed).
    pub async fn forget_sso_link(&self, user_id: &str) -> anyhow::Result<()> {
        let _guard = self.write_lock().await;
        sqlx::query("DELETE FROM sso_links WHERE user_id = $1")
            .bind(user_id)
            .execute(&self.writer)
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::store::testing::sqlite_store;

    #[tokio::test]
    async fn a_rotation_keeps_a_token_a_sign_in_stored_meanwhile() {
        let (store, _dir) = sqlite_store().await;
        store.keep_sso_link("u1", "first", 1).await.unwrap();
        assert!(store
            .rotate_sso_link("u1", "first", "rotated", 2)
            .await
            .unwrap());
        // A sign-in stores its own while a check of "rotated" runs…
        store.keep_sso_link("u1", "signed-in", 3).await.unwrap();
        // …and the check's rotation does not overwrite it.
        assert!(!store
            .rotate_sso_link("u1", "rotated", "stale", 4)
            .await
            .unwrap());
        let due = store.due_sso_links(10, 10).await.unwrap();
        assert_eq!(due, [("u1".to_string(), "signed-in".to_string())]);
    }
}
