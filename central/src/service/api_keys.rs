//! API keys: made by a principal with at most its own role, shown once, stored as the SHA-256
//! of their secret, revocable, and checked on every call against the database (a revoked
//! key, or one whose maker was removed, stops at once on every replica). A key acts with the
//! lower of its own role and its maker's role now: demoting a user demotes their keys.

use uuid::Uuid;

use shared_proto::settings_api::Page;
use shared_proto::users::{ApiKey, CreateApiKey, CreatedApiKey, Role};
use shared_proto::ValidationError;

use super::access::{Actor, Holder, Principal};
use super::recent::RecentlyValid;
use super::tokens::page_of;
use super::{auth, time_of, App};
use crate::domain;
use crate::service::error::{ServiceError, ServiceResult};
use crate::store::{Cursor, KeyScope};

/// What an API key's secret starts with (`pkey_<id>_<secret>`): scanners that look for leaked
/// credentials can match it, and a bearer token of this shape is never tried as the admin token.
pub const KEY_PREFIX: &str = "pkey";

/// A key's use is written at most this often (ms): `last_used_at` is to the minute, and a busy
/// key costs no write per call.
pub const LAST_USED_EVERY_MS: i64 = 60_000;

/// How long this replica remembers that a key was used from an address before it asks the
/// database again (which knows every address each key was used from).
const ADDRESS_REMEMBERED: std::time::Duration = std::time::Duration::from_secs(3600);

/// What this replica remembers of API keys between calls, as hints (`recent`): keys seen
/// valid lately, and (key, address) pairs seen lately.
pub struct KeyMemory {
    valid: RecentlyValid<Holder>,
    addresses: RecentlyValid,
}

impl Default for KeyMemory {
    fn default() -> Self {
        Self::new()
    }
}

impl KeyMemory {
    pub fn new() -> Self {
        Self {
            valid: RecentlyValid::new(super::sessions::RECENTLY_VALID),
            addresses: RecentlyValid::new(ADDRESS_REMEMBERED),
        }
    }
}

fn key_of(row: &domain::ApiKey) -> ApiKey {
    ApiKey {
        id: row.id.parse().unwrap_or_default(),
        name: row.name.clone(),
        role: row.role,
        user_id: row.user_id.as_deref().and_then(|id| id.parse().ok()),
        created_at: time_of(row.created_at),
        expires_at: row.expires_at.map(time_of),
        last_used_at: row.last_used_at.map(time_of),
        revoked_at: row.revoked_at.map(time_of),
    }
}

/// Whether `token` looks like an API key (and so is not the admin token).
pub fn is_api_key(token: &str) -> bool {
    token.starts_with(KEY_PREFIX) && token[KEY_PREFIX.len()..].starts_with('_')
}

impl App {
    pub async fn create_api_key(
        &self,
        body: CreateApiKey,
        by: &Principal,
    ) -> ServiceResult<CreatedApiKey> {
        let lifetime = body.validate()?;
        // A key made by a key would outlive its parent's revocation and expiry (and, made
        // from a key of the admin token, the token's rotation): keys come from people.
        if let Actor::ApiKey { .. } = by.actor {
            return Err(ServiceError::Refused {
                code: "user_required",
                message: "an API key cannot make API keys: make them as a user (the page's API \
                          keys, or a session) or with the admin token"
                    .into(),
            });
        }
        // Whose key: the maker's own, or (an admin's choice) another user's.
        let (owner, bound, who) = match body.user_id {
            Some(user_id) if Some(user_id) != by.user_id() => {
                if by.role != Role::Admin {
                    return Err(ServiceError::RoleRequired {
                        needed: Role::Admin,
                        has: by.role,
                        who: by.describe(),
                    });
                }
                let user = self
                    .store
                    .user(&user_id.to_string())
                    .await?
                    .ok_or_else(|| {
                        ServiceError::Validation(ValidationError::reference(
                            "user_id",
                            format!("no user with id {user_id}"),
                        ))
                    })?;
                let role = user.role;
                (
                    Some(user_id),
                    role.min(by.role),
                    format!("user {}", user.name),
                )
            }
            _ => (by.user_id(), by.role, by.describe()),
        };
        let role = body.role.unwrap_or(bound);
        if role > bound {
            return Err(ServiceError::RoleRequired {
                needed: role,
                has: bound,
                who,
            });
        }
        let id = Uuid::new_v4();
        let secret = auth::new_secret();
        let now = self.now_ms();
        let row = domain::ApiKey {
            id: id.to_string(),
            user_id: owner.map(|u| u.to_string()),
            name: body.name.trim().to_string(),
            role,
            secret_sha256: auth::sha256_hex(&secret),
            created_at: now,
            expires_at: lifetime
                .map(|l| now.saturating_add(i64::try_from(l.as_millis()).unwrap_or(i64::MAX))),
            last_used_at: None,
            revoked_at: None,
            made_by: Some(match &by.actor {
                Actor::User { id, .. } => id.to_string(),
                _ => crate::store::MADE_WITH_ADMIN_TOKEN.to_string(),
            }),
        };
        self.store.insert_api_key(&row).await?;
        Ok(CreatedApiKey {
            key: key_of(&row),
            token: auth::format_token(KEY_PREFIX, id, &secret),
        })
    }

    /// The keys `by` may see: an admin's are every key, anyone else's their own (`own`).
    pub async fn list_api_keys(
        &self,
        by: &Principal,
        after: &Cursor,
        limit: u32,
    ) -> ServiceResult<Page<ApiKey>> {
        let scope = match by.role {
            Role::Admin => KeyScope::All,
            _ => own(by),
        };
        let rows = self.store.list_api_keys(&scope, after, limit).await?;
        Ok(page_of(rows, |row| Ok(key_of(row)))?)
    }

    /// Revokes a key: `by`'s own, or any when `by` is an admin. Another's key is `404` to a
    /// non-admin, as if it did not exist.
    pub async fn revoke_api_key(&self, id: Uuid, by: &Principal) -> ServiceResult<()> {
        let missing = || ServiceError::NotFound(format!("no API key with id {id}"));
        let (key, _) = self
            .store
            .api_key(&id.to_string())
            .await?
            .ok_or_else(missing)?;
        if by.role != Role::Admin && !own(by).holds(&key) {
            return Err(missing());
        }
        if !self.store.revoke_api_key(&key.id, self.now_ms()).await? {
            return Err(ServiceError::Conflict(format!(
                "API key {id} is revoked already"
            )));
        }
        Ok(())
    }

    /// The principal an API key acts as, or `None` when it is unknown, wrong, revoked,
    /// expired, or its maker is gone. One indexed read (two with a maker) per call.
    pub async fn api_key_principal(&self, token: &str) -> ServiceResult<Option<Principal>> {
        let Some((id, secret)) = auth::parse_token(KEY_PREFIX, token) else {
            return Ok(None);
        };
        let Some((key, maker)) = self.store.api_key(&id.to_string()).await? else {
            return Ok(None);
        };
        let now = self.now_ms();
        let live = key.revoked_at.is_none() && key.expires_at.is_none_or(|at| at > now);
        if !live || !auth::constant_time_eq(&auth::sha256_hex(&secret), &key.secret_sha256) {
            return Ok(None);
        }
        let own_role = key.role;
        let role = match (&key.user_id, maker) {
            (None, _) => own_role,
            (Some(_), Some(maker)) => own_role.min(maker.role),
            // The maker was removed (their keys go with them; this is a race with that).
            (Some(_), None) => return Ok(None),
        };
        if key
            .last_used_at
            .is_none_or(|at| at <= now - LAST_USED_EVERY_MS)
        {
            self.store
                .touch_api_key(&key.id, now, now - LAST_USED_EVERY_MS)
                .await?;
        }
        let principal = Principal {
            actor: Actor::ApiKey {
                id,
                name: key.name,
                maker: key.user_id.as_deref().and_then(|u| u.parse().ok()),
            },
            role,
        };
        self.credentials.api_keys.valid.remember_held(
            token,
            principal.holder(),
            std::time::Instant::now(),
        );
        Ok(Some(principal))
    }
}

/// The keys that are `by`'s own: a user's, and a user's key's, are those made for the user;
/// a key made with the admin token has itself alone (such keys belong to nobody, so they are
/// not each other's). The admin token holds no key of its own; its role sees them all.
fn own(by: &Principal) -> KeyScope {
    match &by.actor {
        Actor::User { id, .. } => KeyScope::User(id.to_string()),
        Actor::ApiKey {
            maker: Some(user), ..
        } => KeyScope::User(user.to_string()),
        Actor::ApiKey {
            id, maker: None, ..
        } => KeyScope::Key(id.to_string()),
        Actor::AdminToken => KeyScope::Key(String::new()),
    }
}

impl App {
    /// Who holds this API key, if it was seen valid lately (a pool hint: it grants nothing).
    pub fn recent_api_key(&self, token: &str) -> Option<Holder> {
        self.credentials
            .api_keys
            .valid
            .holder(token, std::time::Instant::now())
    }

    /// Records an API key's first call from an address it was never used from
    /// (`use_from_new_address` in the audit log, by the key, with the address), so that a key
    /// used from somewhere new shows. Cost: a look in memory per call; an insert-or-ignore per
    /// (key, address) not seen on this replica within the hour.
    pub async fn note_key_address(&self, principal: &Principal, address: Option<&str>) {
        let (Actor::ApiKey { id, .. }, Some(address)) = (&principal.actor, address) else {
            return;
        };
        let pair = format!("{id}|{address}");
        let now = std::time::Instant::now();
        if self.credentials.api_keys.addresses.contains(&pair, now) {
            return;
        }
        match self
            .store
            .note_api_key_address(&id.to_string(), address, self.now_ms())
            .await
        {
            Ok(true) => {
                self.record_change(
                    principal,
                    Some(address.to_string()),
                    super::audit::Subject {
                        kind: "api-keys",
                        id: Some(id.to_string()),
                        action: "use_from_new_address".into(),
                    },
                    None,
                    Some(serde_json::json!({ "address": address })),
                )
                .await
            }
            Ok(false) => {}
            Err(e) => {
                tracing::error!("an API key's address could not be noted: {e:#}");
                return;
            }
        }
        self.credentials.api_keys.addresses.remember(&pair, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_key_shape_is_taken_for_a_key() {
        assert!(is_api_key("pkey_0123_abc"));
        assert!(!is_api_key("pkeyx_0123_abc"));
        assert!(!is_api_key("e2e-admin-token"));
    }
}
