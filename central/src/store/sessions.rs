//! Sessions of the operators' web page, by the hash of their cookie.

use super::Store;

#[derive(Debug, Clone)]
pub struct SessionRow {
    pub csrf_token: String,
    pub expires_at: i64,
    /// Whose session; `None` for one opened with the admin token.
    pub user_id: Option<String>,
}

impl Store {
    pub async fn insert_session(
        &self,
        id_sha256: &str,
        csrf_token: &str,
        now: i64,
        expires_at: i64,
        user_id: Option<&str>,
    ) -> anyhow::Result<()> {
        let _guard = self.write_lock().await;
        sqlx::query(
            "INSERT INTO web_sessions (id_sha256, csrf_token, created_at, expires_at, user_id) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(id_sha256)
        .bind(csrf_token)
        .bind(now)
        .bind(expires_at)
        .bind(user_id)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// The session, if it exists and has not ended by `now`.
    pub async fn session(&self, id_sha256: &str, now: i64) -> anyhow::Result<Option<SessionRow>> {
        let row: Option<(String, i64, Option<String>)> = sqlx::query_as(
            "SELECT csrf_token, expires_at, user_id FROM web_sessions \
             WHERE id_sha256 = $1 AND expires_at > $2",
        )
        .bind(id_sha256)
        .bind(now)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|(csrf_token, expires_at, user_id)| SessionRow {
            csrf_token,
            expires_at,
            user_id,
        }))
    }

    /// The SHA-256 and end of at most `limit` sessions ending at `from` or later, latest
    /// first. Every session lasts as long, so these are the ones opened since a moment: an
    /// indexed read (`web_sessions_expiry`) of those alone.
    pub async fn sessions_ending_from(
        &self,
        from: i64,
        limit: i64,
    ) -> anyhow::Result<Vec<(String, i64, Option<String>)>> {
        Ok(sqlx::query_as(
            "SELECT id_sha256, expires_at, user_id FROM web_sessions WHERE expires_at >= $1 \
             ORDER BY expires_at DESC LIMIT $2",
        )
        .bind(from)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    /// A user's live sessions, newest first: (SHA-256 of the cookie, created, ends).
    pub async fn sessions_of_user(
        &self,
        user_id: &str,
        now: i64,
    ) -> anyhow::Result<Vec<(String, i64, i64)>> {
        Ok(sqlx::query_as(
            "SELECT id_sha256, created_at, expires_at FROM web_sessions \
             WHERE user_id = $1 AND expires_at > $2 ORDER BY created_at DESC, id_sha256",
        )
        .bind(user_id)
        .bind(now)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Ends one of a user's sessions (`Some`) or all of them; returns how many ended.
    pub async fn delete_user_sessions(
        &self,
        user_id: &str,
        id_sha256: Option<&str>,
    ) -> anyhow::Result<u64> {
        let _guard = self.write_lock().await;
        let done = match id_sha256 {
            Some(id) => {
                sqlx::query("DELETE FROM web_sessions WHERE user_id = $1 AND id_sha256 = $2")
                    .bind(user_id)
                    .bind(id)
                    .execute(&self.writer)
                    .await?
            }
            None => {
                sqlx::query("DELETE FROM web_sessions WHERE user_id = $1")
                    .bind(user_id)
                    .execute(&self.writer)
                    .await?
            }
        };
        Ok(done.rows_affected())
    }

    pub async fn delete_session(&self, id_sha256: &str) -> anyhow::Result<()> {
        let _guard = self.write_lock().await;
        sqlx::query("DELETE FROM web_sessions WHERE id_sha256 = $1")
            .bind(id_sha256)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Ends every session opened with the admin token (it changed: whoever logged in with the
    /// old one is out); users' sessions stay.
    /// Ends what the admin token opened: its page sessions, and the API keys made with it
    /// (for a user or for nobody), revoked at `now`.
    pub async fn end_admin_token_credentials(&self, now: i64) -> anyhow::Result<()> {
        let _guard = self.write_lock().await;
        let mut tx = self.writer.begin().await?;
        sqlx::query("DELETE FROM web_sessions WHERE user_id IS NULL")
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "UPDATE api_keys SET revoked_at = $1 WHERE made_by = $2 AND revoked_at IS NULL",
        )
        .bind(now)
        .bind(super::users::MADE_WITH_ADMIN_TOKEN)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    pub async fn prune_sessions(&self, now: i64) -> anyhow::Result<u64> {
        let _guard = self.write_lock().await;
        Ok(
            sqlx::query("DELETE FROM web_sessions WHERE expires_at <= $1")
                .bind(now)
                .execute(&self.writer)
                .await?
                .rows_affected(),
        )
    }
}
