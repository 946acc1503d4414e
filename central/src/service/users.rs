//! Users: adding, changing and removing them, and their passwords (argon2id, judged by zxcvbn
//! first). Who may call these is `access`'s; logging in is `sessions`'.

use std::sync::Arc;

use uuid::Uuid;

use shared_proto::settings_api::Page;
use shared_proto::users::{CreateUser, UpdateUser, User, UserSession};
use shared_proto::ValidationError;

use super::access::Principal;
use super::clock::Clock;
use super::hashing::Hashing;
use super::tokens::page_of;
use super::{time_of, App};
use crate::domain;
use crate::service::error::{ServiceError, ServiceResult};
use crate::store::{Cursor, Ends, Store, UserConflict};

/// The fewest guesses (log10) zxcvbn must estimate for a password: 10^10 is what its authors
/// call safe against an offline attack on a slow hash such as argon2id.
const MIN_PASSWORD_GUESSES_LOG10: f64 = 10.0;

/// Refuses a password that is easy to guess, judged also against the user's own name and email.
pub fn check_password(password: &str, name: &str, email: &str) -> Result<(), ValidationError> {
    let local = email.split('@').next().unwrap_or_default();
    let guesses = zxcvbn::zxcvbn(password, &[name, email, local, "central", "monitor"]);
    if guesses.guesses_log10() < MIN_PASSWORD_GUESSES_LOG10 {
        let hint = guesses
            .feedback()
            .and_then(|f| f.warning())
            .map(|w| format!(" ({w})"))
            .unwrap_or_default();
        // 422: a rule no schema can state (the schema states the length).
        return Err(ValidationError::value(
            "password",
            format!(
                "is too easy to guess{hint}: use a longer one, e.g. four or five unrelated words"
            ),
        ));
    }
    Ok(())
}

pub fn user_of(row: &domain::User) -> User {
    User {
        id: row.id.parse().unwrap_or_default(),
        name: row.name.clone(),
        email: row.email.clone(),
        role: row.role,
        has_password: row.password_hash.is_some(),
        single_sign_on: row.oidc_subject.is_some(),
        created_at: time_of(row.created_at),
        updated_at: time_of(row.updated_at),
    }
}

fn conflict(error: UserConflict) -> ServiceError {
    match error {
        UserConflict::Email => ServiceError::Conflict("another user has this email".into()),
        UserConflict::LastAdmin => {
            ServiceError::Conflict("this is the last admin user; make another admin first".into())
        }
        UserConflict::Store(e) => e.into(),
    }
}

/// People who sign in to central: their accounts, passwords and sessions as an administrator sees them.
#[derive(Clone)]
pub struct Users {
    store: Arc<Store>,
    clock: Clock,
    hashing: Hashing,
}

impl App {
    /// The users service, on this central's parts.
    pub fn users(&self) -> Users {
        Users {
            store: self.store.clone(),
            clock: self.clock.clone(),
            hashing: self.credentials.hashing.clone(),
        }
    }
}

impl axum::extract::FromRef<std::sync::Arc<App>> for Users {
    fn from_ref(app: &std::sync::Arc<App>) -> Self {
        app.users()
    }
}

impl Users {
    fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }
    pub async fn create_user(&self, body: CreateUser) -> ServiceResult<User> {
        let email = body.validate()?;
        let password_hash = match &body.password {
            Some(password) => {
                check_password(password, &body.name, &email)?;
                Some(self.hashing.hash(password.clone()).await?)
            }
            None => None,
        };
        let now = self.now_ms();
        let row = domain::User {
            id: Uuid::new_v4().to_string(),
            name: body.name.trim().to_string(),
            email,
            role: body.role,
            password_hash,
            oidc_subject: None,
            created_at: now,
            updated_at: now,
        };
        self.store.insert_user(&row).await.map_err(conflict)?;
        Ok(user_of(&row))
    }

    pub async fn list_users(&self, after: &Cursor, limit: u32) -> ServiceResult<Page<User>> {
        let rows = self.store.list_users(after, limit).await?;
        Ok(page_of(rows, |row| Ok(user_of(row)))?)
    }

    pub async fn get_user(&self, id: Uuid) -> ServiceResult<User> {
        Ok(user_of(&self.existing_user(id).await?))
    }

    async fn existing_user(&self, id: Uuid) -> ServiceResult<domain::User> {
        self.store
            .user(&id.to_string())
            .await?
            .ok_or_else(|| ServiceError::NotFound(format!("no user with id {id}")))
    }

    /// Changes a user. The last admin cannot be made less, so that someone can always manage
    /// users without the break-glass admin token. A demotion ends the user's sessions, their
    /// API keys and the keys they made for others (whoever relied on their old role starts
    /// again with the new one); a new password ends their sessions.
    pub async fn update_user(&self, id: Uuid, body: UpdateUser) -> ServiceResult<User> {
        const ATTEMPTS: usize = 5;
        let email = body.validate()?;
        let mut password_hash = None;
        for _ in 0..ATTEMPTS {
            let mut row = self.existing_user(id).await?;
            let read_at = row.updated_at;
            let role_before = row.role;
            if let Some(name) = &body.name {
                row.name = name.trim().to_string();
            }
            if let Some(email) = &email {
                row.email = email.clone();
            }
            if let Some(role) = body.role {
                row.role = role;
            }
            if let Some(password) = &body.password {
                if password_hash.is_none() {
                    check_password(password, &row.name, &row.email)?;
                    password_hash = Some(self.hashing.hash(password.clone()).await?);
                }
                row.password_hash = password_hash.clone();
            }
            // Later than what was read, even within its millisecond.
            row.updated_at = self.now_ms().max(read_at + 1);
            let demoted = body.role.is_some_and(|after| after < role_before);
            let ends = if demoted {
                Ends::Access { at: row.updated_at }
            } else if body.password.is_some() {
                Ends::Sessions
            } else {
                Ends::Nothing
            };
            if self
                .store
                .update_user(&row, read_at, ends)
                .await
                .map_err(conflict)?
            {
                return Ok(user_of(&row));
            }
            // Removed, or changed since it was read: read it again (a change made meanwhile,
            // say a demotion, is never written over with what was read before it).
        }
        Err(ServiceError::Conflict(format!(
            "user {id} kept changing while this change was applied ({ATTEMPTS} tries); retry"
        )))
    }

    /// Removes a user with their API keys and sessions (they stop working at once), and
    /// revokes the keys they made for others.
    pub async fn delete_user(&self, id: Uuid, by: &Principal) -> ServiceResult<()> {
        // Not read first: a user whose row does not read (a role this central does not know)
        // can still be removed.
        if by.user_id() == Some(id) {
            return Err(ServiceError::Conflict(
                "you cannot remove yourself; ask another admin".into(),
            ));
        }
        if !self
            .store
            .delete_user(&id.to_string(), self.now_ms())
            .await
            .map_err(conflict)?
        {
            return Err(ServiceError::NotFound(format!("no user with id {id}")));
        }
        Ok(())
    }

    /// A user's live web sessions, newest first.
    pub async fn user_sessions(&self, id: Uuid) -> ServiceResult<Vec<UserSession>> {
        let user = self.existing_user(id).await?;
        let rows = self.store.sessions_of_user(&user.id, self.now_ms()).await?;
        Ok(rows
            .into_iter()
            .map(|(id, created_at, expires_at)| UserSession {
                id,
                created_at: time_of(created_at),
                expires_at: time_of(expires_at),
            })
            .collect())
    }

    /// Ends one of a user's sessions, or every one (`None`): the next page asks for a login,
    /// on every replica (each page reads its session). `404` for a session not theirs.
    pub async fn end_user_sessions(&self, id: Uuid, session: Option<&str>) -> ServiceResult<u64> {
        let user = self.existing_user(id).await?;
        let ended = self.store.delete_user_sessions(&user.id, session).await?;
        if session.is_some() && ended == 0 {
            return Err(ServiceError::NotFound(format!(
                "user {id} has no such session"
            )));
        }
        Ok(ended)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn easy_passwords_are_refused_and_long_random_ones_taken() {
        for easy in [
            "password1234",
            "ana@example.com1",
            "aaaaaaaaaaaaaaaa",
            "qwertyuiop123",
        ] {
            let refused = check_password(easy, "Ana", "ana@example.com").unwrap_err();
            assert_eq!(refused.field, "password", "{easy}");
        }
        // Derived from the user's own name: refused though long.
        assert!(check_password("anaperez2026!", "Ana Perez", "ana@example.com").is_err());
        check_password("correct horse battery staple", "Ana", "ana@example.com").unwrap();
        check_password("vX9#qL2!mR7$tZ4p", "Ana", "ana@example.com").unwrap();
    }
}
