//! Registration tokens and refresh tokens: only their hashes are stored. The rows and their
//! translation to `domain::RegistrationToken` and `domain::RefreshToken` stay here.

use sqlx::any::AnyRow;
use sqlx::{FromRow, Row};

use super::{split_list, Cursor, Paged, Store};
use crate::domain::{RefreshToken, RegistrationToken, UnusedRevocation};

/// `revoked_reason` of a refresh token revoked unused because its parent was presented again
/// within the grace.
const SUPERSEDED: &str = "superseded";

/// `revoked_reason`, as stored.
fn reason_text(reason: UnusedRevocation) -> &'static str {
    match reason {
        UnusedRevocation::Superseded => SUPERSEDED,
        UnusedRevocation::Orphaned => "orphaned",
    }
}

#[derive(Debug, Clone)]
struct RegistrationTokenRow {
    id: String,
    name: String,
    secret_hash: String,
    region: Option<String>,
    /// Comma-separated; `None`: anything.
    capabilities: Option<String>,
    created_at: i64,
    expires_at: Option<i64>,
    max_uses: i64,
    uses: i64,
    revoked_at: Option<i64>,
    previous_secret_hash: Option<String>,
    previous_valid_until: Option<i64>,
}

impl TryFrom<RegistrationTokenRow> for RegistrationToken {
    type Error = anyhow::Error;

    /// Every row reads (a capability list is any comma list).
    fn try_from(row: RegistrationTokenRow) -> anyhow::Result<RegistrationToken> {
        Ok(RegistrationToken {
            id: row.id,
            name: row.name,
            secret_hash: row.secret_hash,
            region: row.region,
            capabilities: row.capabilities.as_deref().map(split_list),
            created_at: row.created_at,
            expires_at: row.expires_at,
            max_uses: row.max_uses,
            uses: row.uses,
            revoked_at: row.revoked_at,
            previous_secret_hash: row.previous_secret_hash,
            previous_valid_until: row.previous_valid_until,
        })
    }
}

impl FromRow<'_, AnyRow> for RegistrationTokenRow {
    fn from_row(row: &AnyRow) -> sqlx::Result<Self> {
        Ok(Self {
            id: row.try_get("id")?,
            name: row.try_get("name")?,
            secret_hash: row.try_get("secret_hash")?,
            region: row.try_get("region")?,
            capabilities: row.try_get("capabilities")?,
            created_at: row.try_get("created_at")?,
            expires_at: row.try_get("expires_at")?,
            max_uses: row.try_get("max_uses")?,
            uses: row.try_get("uses")?,
            revoked_at: row.try_get("revoked_at")?,
            previous_secret_hash: row.try_get("previous_secret_hash")?,
            previous_valid_until: row.try_get("previous_valid_until")?,
        })
    }
}

impl FromRow<'_, AnyRow> for RefreshToken {
    fn from_row(row: &AnyRow) -> sqlx::Result<Self> {
        Ok(Self {
            id: row.try_get("id")?,
            poller_id: row.try_get("poller_id")?,
            family_id: row.try_get("family_id")?,
            secret_hash: row.try_get("secret_hash")?,
            expires_at: row.try_get("expires_at")?,
            spent_at: row.try_get("spent_at")?,
            revoked_at: row.try_get("revoked_at")?,
            superseded: row
                .try_get::<Option<String>, _>("revoked_reason")?
                .as_deref()
                == Some(SUPERSEDED),
            replaced_by: row.try_get("replaced_by")?,
        })
    }
}

const REGISTRATION_COLUMNS: &str =
    "id, name, secret_hash, region, capabilities, created_at, expires_at, \
     max_uses, uses, revoked_at, previous_secret_hash, previous_valid_until";

impl Store {
    pub async fn insert_registration_token(&self, token: &RegistrationToken) -> anyhow::Result<()> {
        self.write_registration_token(token, "").await
    }

    /// Stores a registration token, replacing the one of the same id (its uses, revocation and
    /// overlap included).
    pub async fn replace_registration_token(
        &self,
        token: &RegistrationToken,
    ) -> anyhow::Result<()> {
        self.write_registration_token(
            token,
            "ON CONFLICT (id) DO UPDATE SET name = excluded.name, \
             secret_hash = excluded.secret_hash, region = excluded.region, \
             capabilities = excluded.capabilities, \
             created_at = excluded.created_at, expires_at = excluded.expires_at, \
             max_uses = excluded.max_uses, uses = 0, revoked_at = NULL, \
             previous_secret_hash = NULL, previous_valid_until = NULL",
        )
        .await
    }

    /// Inserts a fresh token (no uses, not revoked), with `on_conflict` as the statement's tail.
    async fn write_registration_token(
        &self,
        row: &RegistrationToken,
        on_conflict: &str,
    ) -> anyhow::Result<()> {
        let capabilities = row.capabilities.as_ref().map(|list| list.join(","));
        let sql = format!(
            "INSERT INTO registration_tokens \
             (id, name, secret_hash, region, capabilities, created_at, expires_at, max_uses, uses) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 0) {on_conflict}"
        );
        let _guard = self.write_lock().await;
        sqlx::query(&sql)
            .bind(&row.id)
            .bind(&row.name)
            .bind(&row.secret_hash)
            .bind(&row.region)
            .bind(capabilities)
            .bind(row.created_at)
            .bind(row.expires_at)
            .bind(row.max_uses)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    pub async fn registration_token(&self, id: &str) -> anyhow::Result<Option<RegistrationToken>> {
        let sql = format!("SELECT {REGISTRATION_COLUMNS} FROM registration_tokens WHERE id = $1");
        let row: Option<RegistrationTokenRow> = sqlx::query_as(&sql)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(RegistrationToken::try_from).transpose()
    }

    pub async fn list_registration_tokens(
        &self,
        after: &Cursor,
        limit: u32,
    ) -> anyhow::Result<Paged<RegistrationToken>> {
        let rows: Vec<RegistrationTokenRow> = self
            .page_by_creation(REGISTRATION_COLUMNS, "registration_tokens", after, limit)
            .await?;
        Ok(Paged::of("registration token", rows, limit, |r| Cursor {
            key: r.created_at,
            id: r.id.clone(),
        }))
    }

    /// Counts one use if the token is still usable; `false` when it is spent, expired or revoked.
    /// The check and the count are one statement, so concurrent registrations cannot overdraw it.
    pub async fn use_registration_token(&self, id: &str, now: i64) -> anyhow::Result<bool> {
        self.write_one(
            "UPDATE registration_tokens SET uses = uses + 1 \
             WHERE id = $1 AND revoked_at IS NULL AND uses < max_uses \
             AND (expires_at IS NULL OR expires_at > $2)",
            id,
            now,
        )
        .await
    }

    pub async fn insert_refresh_token(
        &self,
        row: &RefreshToken,
        created_at: i64,
    ) -> anyhow::Result<()> {
        let _guard = self.write_lock().await;
        sqlx::query(
            "INSERT INTO refresh_tokens \
             (id, poller_id, family_id, secret_hash, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&row.id)
        .bind(&row.poller_id)
        .bind(&row.family_id)
        .bind(&row.secret_hash)
        .bind(created_at)
        .bind(row.expires_at)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    pub async fn refresh_token(&self, id: &str) -> anyhow::Result<Option<RefreshToken>> {
        Ok(sqlx::query_as(
            "SELECT id, poller_id, family_id, secret_hash, expires_at, spent_at, revoked_at, \
             revoked_reason, replaced_by FROM refresh_tokens WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// Marks a refresh token spent by `successor` (already stored), in one statement; `false`
    /// if it was spent (or revoked) already, so that of two concurrent refreshes with one token
    /// exactly one wins, and the loser finds the winner's successor when it reads again.
    pub async fn spend_refresh_token(
        &self,
        id: &str,
        now: i64,
        successor: &str,
    ) -> anyhow::Result<bool> {
        let _guard = self.write_lock().await;
        let done = sqlx::query(
            "UPDATE refresh_tokens SET spent_at = $2, replaced_by = $3 \
             WHERE id = $1 AND spent_at IS NULL AND revoked_at IS NULL",
        )
        .bind(id)
        .bind(now)
        .bind(successor)
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Revokes every token of a family (reuse detection).
    pub async fn revoke_refresh_family(&self, family_id: &str, now: i64) -> anyhow::Result<()> {
        let _guard = self.write_lock().await;
        sqlx::query(
            "UPDATE refresh_tokens SET revoked_at = $2 WHERE family_id = $1 AND revoked_at IS NULL",
        )
        .bind(family_id)
        .bind(now)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// Records which token replaced a spent one.
    pub async fn set_refresh_successor(&self, id: &str, successor: &str) -> anyhow::Result<()> {
        let _guard = self.write_lock().await;
        sqlx::query("UPDATE refresh_tokens SET replaced_by = $2 WHERE id = $1")
            .bind(id)
            .bind(successor)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Revokes one refresh token if it is still unused, saying why; `false` if it was used or
    /// revoked.
    pub async fn revoke_unused_refresh_token(
        &self,
        id: &str,
        now: i64,
        reason: UnusedRevocation,
    ) -> anyhow::Result<bool> {
        let _guard = self.write_lock().await;
        let done = sqlx::query(
            "UPDATE refresh_tokens SET revoked_at = $2, revoked_reason = $3 \
             WHERE id = $1 AND spent_at IS NULL AND revoked_at IS NULL",
        )
        .bind(id)
        .bind(now)
        .bind(reason_text(reason))
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Revokes every refresh token of a poller.
    pub async fn revoke_poller_refresh_tokens(
        &self,
        poller_id: &str,
        now: i64,
    ) -> anyhow::Result<()> {
        let _guard = self.write_lock().await;
        sqlx::query(
            "UPDATE refresh_tokens SET revoked_at = $2 WHERE poller_id = $1 AND revoked_at IS NULL",
        )
        .bind(poller_id)
        .bind(now)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// Revokes a registration token; `false` if there is none with that id.
    pub async fn revoke_registration_token(&self, id: &str, now: i64) -> anyhow::Result<bool> {
        self.write_one(
            "UPDATE registration_tokens SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1",
            id,
            now,
        )
        .await
    }

    /// Gives a registration token a new secret. With `old_valid_until`, the current secret
    /// stays valid until then (any older one stops at once); without, it stops at once.
    pub async fn rotate_registration_token(
        &self,
        id: &str,
        secret_hash: &str,
        old_valid_until: Option<i64>,
    ) -> anyhow::Result<bool> {
        let _guard = self.write_lock().await;
        let query = match old_valid_until {
            Some(until) => sqlx::query(
                "UPDATE registration_tokens SET previous_secret_hash = secret_hash, \
                 previous_valid_until = $3, secret_hash = $2 WHERE id = $1 AND revoked_at IS NULL",
            )
            .bind(id)
            .bind(secret_hash)
            .bind(until),
            None => sqlx::query(
                "UPDATE registration_tokens SET previous_secret_hash = NULL, \
                 previous_valid_until = NULL, secret_hash = $2 WHERE id = $1 AND revoked_at IS NULL",
            )
            .bind(id)
            .bind(secret_hash),
        };
        Ok(query.execute(&self.writer).await?.rows_affected() == 1)
    }
}
