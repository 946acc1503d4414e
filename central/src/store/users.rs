//! Users and API keys, read into `domain::User` and `domain::ApiKey` (their rows stay here)
//! and written back. Roles, password rules and what a key may do are `service::users`' and
//! `service::api_keys`'; only hashes of secrets are stored.

use sqlx::any::AnyRow;
use sqlx::{FromRow, Row};

use shared_proto::users::Role;

use crate::domain::{ApiKey, User};

use super::{Cursor, Paged, Store};

#[derive(Debug, Clone)]
struct UserRow {
    pub id: String,
    pub name: String,
    /// Lowercased.
    pub email: String,
    pub role: String,
    /// An argon2id PHC string; `None`: this user logs in by single sign-on only.
    pub password_hash: Option<String>,
    pub oidc_subject: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

impl FromRow<'_, AnyRow> for UserRow {
    fn from_row(row: &AnyRow) -> sqlx::Result<Self> {
        Ok(Self {
            id: row.try_get("id")?,
            name: row.try_get("name")?,
            email: row.try_get("email")?,
            role: row.try_get("role")?,
            password_hash: row.try_get("password_hash")?,
            oidc_subject: row.try_get("oidc_subject")?,
            created_at: row.try_get("created_at")?,
            updated_at: row.try_get("updated_at")?,
        })
    }
}

const USER_COLUMNS: &str =
    "id, name, email, role, password_hash, oidc_subject, created_at, updated_at";

/// Which keys a listing covers.
#[derive(Debug, Clone, PartialEq)]
pub enum KeyScope {
    All,
    /// The keys made for this user.
    User(String),
    /// This key alone.
    Key(String),
}

impl KeyScope {
    pub fn holds(&self, key: &ApiKey) -> bool {
        match self {
            KeyScope::All => true,
            KeyScope::User(user) => key.user_id.as_deref() == Some(user.as_str()),
            KeyScope::Key(id) => key.id == *id,
        }
    }
}

#[derive(Debug, Clone)]
struct ApiKeyRow {
    pub id: String,
    /// The user it acts for; `None`: nobody's (made with the admin token).
    pub user_id: Option<String>,
    pub name: String,
    pub role: String,
    pub secret_sha256: String,
    pub created_at: i64,
    pub expires_at: Option<i64>,
    pub last_used_at: Option<i64>,
    pub revoked_at: Option<i64>,
    /// Who made it: `MADE_WITH_ADMIN_TOKEN`, or the id of the user who did.
    pub made_by: Option<String>,
}

/// `api_keys.made_by` of keys made with the admin token (which its rotation revokes).
pub const MADE_WITH_ADMIN_TOKEN: &str = "admin_token";

impl FromRow<'_, AnyRow> for ApiKeyRow {
    fn from_row(row: &AnyRow) -> sqlx::Result<Self> {
        Ok(Self {
            id: row.try_get("id")?,
            user_id: row.try_get("user_id")?,
            name: row.try_get("name")?,
            role: row.try_get("role")?,
            secret_sha256: row.try_get("secret_sha256")?,
            created_at: row.try_get("created_at")?,
            expires_at: row.try_get("expires_at")?,
            last_used_at: row.try_get("last_used_at")?,
            revoked_at: row.try_get("revoked_at")?,
            made_by: row.try_get("made_by")?,
        })
    }
}

/// A stored role as a role; a text central never writes is an error naming whose it is.
fn role_of(whose: &str, text: &str) -> anyhow::Result<Role> {
    Role::parse(text).ok_or_else(|| anyhow::anyhow!("{whose}: stored role `{text}`"))
}

impl TryFrom<UserRow> for User {
    type Error = anyhow::Error;

    fn try_from(row: UserRow) -> anyhow::Result<User> {
        Ok(User {
            role: role_of(&format!("user {}", row.id), &row.role)?,
            id: row.id,
            name: row.name,
            email: row.email,
            password_hash: row.password_hash,
            oidc_subject: row.oidc_subject,
            created_at: row.created_at,
            updated_at: row.updated_at,
        })
    }
}

impl TryFrom<ApiKeyRow> for ApiKey {
    type Error = anyhow::Error;

    fn try_from(row: ApiKeyRow) -> anyhow::Result<ApiKey> {
        Ok(ApiKey {
            role: role_of(&format!("API key {}", row.id), &row.role)?,
            id: row.id,
            user_id: row.user_id,
            name: row.name,
            secret_sha256: row.secret_sha256,
            created_at: row.created_at,
            expires_at: row.expires_at,
            last_used_at: row.last_used_at,
            revoked_at: row.revoked_at,
            made_by: row.made_by,
        })
    }
}

const KEY_COLUMNS: &str = "id, user_id, name, role, secret_sha256, created_at, expires_at, \
     last_used_at, revoked_at, made_by";

/// Why a user could not be written.
#[derive(Debug, thiserror::Error)]
pub enum UserConflict {
    #[error("another user has this email")]
    Email,
    /// The change would leave no admin user.
    #[error("this is the last admin user")]
    LastAdmin,
    #[error(transparent)]
    Store(#[from] anyhow::Error),
}

impl From<sqlx::Error> for UserConflict {
    fn from(error: sqlx::Error) -> Self {
        UserConflict::Store(error.into())
    }
}

fn is_unique_violation(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(e) if e.is_unique_violation())
}

impl Store {
    /// Adds a user; `UserConflict::Email` when the email is taken (checked by the unique
    /// index, so two replicas adding the same email at once make one user).
    pub async fn insert_user(&self, row: &User) -> Result<(), UserConflict> {
        let _guard = self.write_lock().await;
        let sql =
            format!("INSERT INTO users ({USER_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)");
        let done = sqlx::query(&sql)
            .bind(&row.id)
            .bind(&row.name)
            .bind(&row.email)
            .bind(row.role.as_str())
            .bind(&row.password_hash)
            .bind(&row.oidc_subject)
            .bind(row.created_at)
            .bind(row.updated_at)
            .execute(&self.writer)
            .await;
        match done {
            Ok(_) => Ok(()),
            Err(e) if is_unique_violation(&e) => Err(UserConflict::Email),
            Err(e) => Err(UserConflict::Store(e.into())),
        }
    }

    /// Rewrites a user read when its `updated_at` was `read_at`; `Ok(false)` when there is
    /// none, or it changed since (read it again: a change made meanwhile is never undone). `UserConflict::LastAdmin` when it
    /// would take the admin role from the last admin, and with `end_sessions` (a new
    /// password) the user's web sessions end with the change.
    pub async fn update_user(
        &self,
        row: &User,
        read_at: i64,
        ends: Ends,
    ) -> Result<bool, UserConflict> {
        let _guard = self.write_lock().await;
        let mut tx = self.writer.begin().await?;
        if row.role != Role::Admin {
            self.keep_an_admin(&mut tx, &row.id).await?;
        }
        let done = sqlx::query(
            "UPDATE users SET name = $2, email = $3, role = $4, password_hash = $5, \
             oidc_subject = $6, updated_at = $7 WHERE id = $1 AND updated_at = $8",
        )
        .bind(&row.id)
        .bind(&row.name)
        .bind(&row.email)
        .bind(row.role.as_str())
        .bind(&row.password_hash)
        .bind(&row.oidc_subject)
        .bind(row.updated_at)
        .bind(read_at)
        .execute(&mut *tx)
        .await;
        let done = match done {
            Ok(done) => done.rows_affected() == 1,
            Err(e) if is_unique_violation(&e) => return Err(UserConflict::Email),
            Err(e) => return Err(UserConflict::Store(e.into())),
        };
        if done && ends != Ends::Nothing {
            sqlx::query("DELETE FROM web_sessions WHERE user_id = $1")
                .bind(&row.id)
                .execute(&mut *tx)
                .await?;
        }
        if let (true, Ends::Access { at }) = (done, ends) {
            revoke_keys_of_and_by(&mut tx, &row.id, at).await?;
        }
        tx.commit().await?;
        Ok(done)
    }

    /// Refuses, inside `tx`, a change that takes user `id`'s admin role away when no other
    /// admin exists. The admins' rows are locked first (PostgreSQL; SQLite has one writer), so
    /// two replicas demoting the last two admins at once cannot both pass: the second reads
    /// the first's change once it commits.
    async fn keep_an_admin(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        id: &str,
    ) -> Result<(), UserConflict> {
        let lock = super::dialect::for_update(self.backend(), "id");
        let admins: Vec<(String,)> =
            sqlx::query_as(&format!("SELECT id FROM users WHERE role = $1{lock}"))
                // The admin role: the one role the store itself guards, so that some user can
                // always manage users.
                .bind(Role::Admin.as_str())
                .fetch_all(&mut **tx)
                .await?;
        let is_admin = admins.iter().any(|(admin,)| admin == id);
        if is_admin && admins.len() <= 1 {
            return Err(UserConflict::LastAdmin);
        }
        Ok(())
    }

    pub async fn user(&self, id: &str) -> anyhow::Result<Option<User>> {
        self.user_where("id", id).await
    }

    pub async fn user_by_oidc_subject(&self, subject: &str) -> anyhow::Result<Option<User>> {
        self.user_where("oidc_subject", subject).await
    }

    pub async fn user_by_email(&self, email: &str) -> anyhow::Result<Option<User>> {
        self.user_where("email", email).await
    }

    /// The user whose `column` (unique) is `value`.
    async fn user_where(&self, column: &str, value: &str) -> anyhow::Result<Option<User>> {
        let sql = format!("SELECT {USER_COLUMNS} FROM users WHERE {column} = $1");
        let row: Option<UserRow> = sqlx::query_as(&sql)
            .bind(value)
            .fetch_optional(&self.pool)
            .await?;
        row.map(User::try_from).transpose()
    }

    /// A page of users, by creation.
    pub async fn list_users(&self, after: &Cursor, limit: u32) -> anyhow::Result<Paged<User>> {
        let rows: Vec<UserRow> = self
            .page_by_creation(USER_COLUMNS, "users", after, limit)
            .await?;
        Ok(Paged::of("user", rows, limit, |r| Cursor {
            key: r.created_at,
            id: r.id.clone(),
        }))
    }

    /// How many users have `role`.
    pub async fn count_users_with_role(&self, role: Role) -> anyhow::Result<i64> {
        let (count,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM users WHERE role = $1")
            .bind(role.as_str())
            .fetch_one(&self.pool)
            .await?;
        Ok(count)
    }

    /// Deletes a user with their web sessions and revokes their API keys and the keys they
    /// made, in one transaction: nothing they held works after. The keys stay listed, revoked,
    /// so a key's id never turns into "no such key" behind its holder's back. `false` if there
    /// is no such user.
    pub async fn delete_user(&self, id: &str, now: i64) -> Result<bool, UserConflict> {
        let _guard = self.write_lock().await;
        let mut tx = self.writer.begin().await?;
        self.keep_an_admin(&mut tx, id).await?;
        revoke_keys_of_and_by(&mut tx, id, now).await?;
        // Where their keys were used from matters only to a key that can still be used.
        sqlx::query(
            "DELETE FROM api_key_addresses WHERE key_id IN \
             (SELECT id FROM api_keys WHERE user_id = $1)",
        )
        .bind(id)
        .execute(&mut *tx)
        .await?;
        sqlx::query("DELETE FROM web_sessions WHERE user_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM sso_links WHERE user_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        let done = sqlx::query("DELETE FROM users WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(done.rows_affected() == 1)
    }

    pub async fn insert_api_key(&self, row: &ApiKey) -> anyhow::Result<()> {
        let _guard = self.write_lock().await;
        let sql = format!(
            "INSERT INTO api_keys ({KEY_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
        );
        sqlx::query(&sql)
            .bind(&row.id)
            .bind(&row.user_id)
            .bind(&row.name)
            .bind(row.role.as_str())
            .bind(&row.secret_sha256)
            .bind(row.created_at)
            .bind(row.expires_at)
            .bind(row.last_used_at)
            .bind(row.revoked_at)
            .bind(&row.made_by)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// The key with this id, with its maker's row when it has one (one read per API call:
    /// a revoked key or a removed maker stops working at once on every replica).
    pub async fn api_key(&self, id: &str) -> anyhow::Result<Option<(ApiKey, Option<User>)>> {
        let sql = format!("SELECT {KEY_COLUMNS} FROM api_keys WHERE id = $1");
        let Some(key): Option<ApiKeyRow> = sqlx::query_as(&sql)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
        else {
            return Ok(None);
        };
        let key = ApiKey::try_from(key)?;
        let maker = match &key.user_id {
            Some(user_id) => self.user(user_id).await?,
            None => None,
        };
        Ok(Some((key, maker)))
    }

    /// A page of keys, by creation: one maker's (`Some(None)`: the admin token's), or all.
    pub async fn list_api_keys(
        &self,
        scope: &KeyScope,
        after: &Cursor,
        limit: u32,
    ) -> anyhow::Result<Paged<ApiKey>> {
        let (by_maker, bound) = match scope {
            KeyScope::All => ("", None),
            KeyScope::User(user) => ("user_id = $4 AND", Some(user)),
            KeyScope::Key(key) => ("id = $4 AND", Some(key)),
        };
        let sql = super::cursor::by_creation(KEY_COLUMNS, "api_keys", by_maker);
        let mut query = sqlx::query_as(&sql)
            .bind(after.key)
            .bind(&after.id)
            .bind(i64::from(limit));
        if let Some(bound) = bound {
            query = query.bind(bound);
        }
        let rows: Vec<ApiKeyRow> = query.fetch_all(&self.pool).await?;
        Ok(Paged::of("API key", rows, limit, |r| Cursor {
            key: r.created_at,
            id: r.id.clone(),
        }))
    }

    /// Notes that key `key_id` was used from `address`; `true` the first time.
    pub async fn note_api_key_address(
        &self,
        key_id: &str,
        address: &str,
        at: i64,
    ) -> anyhow::Result<bool> {
        let _guard = self.write_lock().await;
        let done = sqlx::query(
            "INSERT INTO api_key_addresses (key_id, address, first_at) VALUES ($1, $2, $3) \
             ON CONFLICT (key_id, address) DO NOTHING",
        )
        .bind(key_id)
        .bind(address)
        .bind(at)
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Revokes a key; `false` if there is none or it was revoked already.
    pub async fn revoke_api_key(&self, id: &str, now: i64) -> anyhow::Result<bool> {
        self.write_one(
            "UPDATE api_keys SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL",
            id,
            now,
        )
        .await
    }

    /// Records a key's use when the last one recorded is older than `before` (at most one
    /// write per key per `service::api_keys::LAST_USED_EVERY`, however busy the key).
    pub async fn touch_api_key(&self, id: &str, now: i64, before: i64) -> anyhow::Result<()> {
        let _guard = self.write_lock().await;
        sqlx::query(
            "UPDATE api_keys SET last_used_at = $2 \
             WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < $3)",
        )
        .bind(id)
        .bind(now)
        .bind(before)
        .execute(&self.writer)
        .await?;
        Ok(())
    }
}

/// What a change to a user ends along with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ends {
    Nothing,
    /// Their web sessions (a new password: whoever had the old one is out).
    Sessions,
    /// Their sessions, their API keys and the keys they made for others, revoked `at`: they
    /// were demoted, or their provider no longer lets them in.
    Access {
        at: i64,
    },
}

/// Revokes, inside `tx`, user `id`'s keys and those they made (`made_by`), as of `at`.
async fn revoke_keys_of_and_by(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    id: &str,
    at: i64,
) -> anyhow::Result<()> {
    sqlx::query(
        "UPDATE api_keys SET revoked_at = $2 \
         WHERE (user_id = $1 OR made_by = $1) AND revoked_at IS NULL",
    )
    .bind(id)
    .bind(at)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use shared_proto::users::Role;

    use crate::domain::User;
    use crate::store::testing::sqlite_store;
    use crate::store::Cursor;

    fn user(id: &str, role: Role) -> User {
        User {
            id: id.into(),
            name: id.into(),
            email: format!("{id}@example.com"),
            role,
            password_hash: None,
            oidc_subject: None,
            created_at: 1,
            updated_at: 1,
        }
    }

    /// A role is read as one of the roles central writes. Any other text (written past
    /// central) never becomes a role: reading that user is an error naming them, and a list
    /// leaves them out; the others are read as they are.
    #[tokio::test]
    async fn a_role_central_never_writes_is_no_role_at_all() {
        let (store, _dir) = sqlite_store().await;
        store.insert_user(&user("a", Role::Admin)).await.unwrap();
        store.insert_user(&user("b", Role::Editor)).await.unwrap();
        assert_eq!(store.user("b").await.unwrap().unwrap().role, Role::Editor);
        assert_eq!(store.count_users_with_role(Role::Admin).await.unwrap(), 1);
        sqlx::query("UPDATE users SET role = 'root' WHERE id = 'b'")
            .execute(&store.writer)
            .await
            .unwrap();
        let said = format!("{:#}", store.user("b").await.unwrap_err());
        assert!(said.contains("user b") && said.contains("root"), "{said}");
        let start = Cursor {
            key: 0,
            id: String::new(),
        };
        let listed: Vec<String> = store
            .list_users(&start, 10)
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|u| u.id)
            .collect();
        assert_eq!(listed, ["a"]);
        // A full page whose last row was left out still leads on to the rest of the list.
        store
            .insert_user(&User {
                created_at: 2,
                ..user("c", Role::Viewer)
            })
            .await
            .unwrap();
        let first = store.list_users(&start, 2).await.unwrap();
        assert_eq!(first.items.len(), 1);
        let next = first.next.expect("a page of two rows read is full");
        let rest = store.list_users(&next, 2).await.unwrap();
        assert_eq!(
            rest.items.iter().map(|u| u.id.as_str()).collect::<Vec<_>>(),
            ["c"]
        );
        assert!(rest.next.is_none());
    }
}
