//! Web page sessions: logging in with the admin token or a user's email and password, the
//! session behind a cookie and the principal it acts as, logging out. The cookie holds a random secret; the database holds only its SHA-256, with the CSRF
//! token the session's forms must carry. HTTP (cookies, forms) is `web`'s, not this module's.
//!
//! Each replica also knows, in memory, the sessions seen valid lately (`Known`), so that a
//! session's requests are served from the operators' places (`api::pools`) without a
//! database read. Sessions opened on another replica, or before this one started, are learnt
//! by `follow_sessions` within `admin_token::FOLLOW_EVERY`: otherwise their first request
//! would wait with strangers' and be shed while strangers hold every unauthenticated place.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use super::access::{Actor, Holder, Principal};
use super::hashing::Lane;
use super::recent::RecentlyValid;
use super::{auth, App};
use crate::service::error::{ServiceError, ServiceResult};

/// A session lasts this long from login, however active.
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);

/// How long a session seen valid counts as an operator's for choosing its requests' pool.
pub const RECENTLY_VALID: Duration = Duration::from_secs(600);

/// The most sessions learnt per look (a pool hint: any beyond are learnt on their first use).
const LEARNT_PER_LOOK: i64 = 1_024;

/// The sessions this replica knows to be valid lately.
pub struct Known {
    recent: RecentlyValid<Holder>,
    /// The latest end of a session learnt from the database: the next look reads from there.
    followed_until: AtomicI64,
}

impl Known {
    pub fn new() -> Self {
        Known {
            recent: RecentlyValid::new(RECENTLY_VALID),
            followed_until: AtomicI64::new(0),
        }
    }
}

impl Default for Known {
    fn default() -> Self {
        Self::new()
    }
}

/// What a logged-in page needs to know of its session.
#[derive(Debug, Clone)]
pub struct WebSession {
    pub csrf_token: String,
    /// Who is logged in, with their role now (read with the session, so that a changed role
    /// holds on the next page).
    pub principal: Principal,
}

/// A password check for an email nobody has, so that a wrong email takes as long as a wrong
/// password (it does not tell which emails exist). An argon2id hash of a random secret.
const NOBODY_HASH: &str =
    "$argon2id$v=19$m=19456,t=2,p=1$Ig/ed+ekwP+bcz3vvBqNgA$Di2AveIvefCKnIX1pt8mLKIAr7iA6KXRPMSYTa/4hpc";

impl App {
    /// Starts a session for whoever shows the admin token; returns the cookie's secret.
    pub async fn log_in(&self, admin_token: &str) -> ServiceResult<String> {
        if !self.verify_admin_token(admin_token.trim()).await? {
            return Err(ServiceError::Unauthorized(
                "that is not the admin token: use CENTRAL_ADMIN_TOKEN or the token central \
                 printed on its first start"
                    .into(),
            ));
        }
        self.open_session(None).await
    }

    /// Starts a session for the user with this email and password; returns the cookie's
    /// secret. A wrong email and a wrong password are told alike, and cost alike.
    pub async fn log_in_user(&self, email: &str, password: &str) -> ServiceResult<String> {
        let wrong = || ServiceError::Unauthorized("wrong email or password".into());
        let user = match shared_proto::users::normalized_email(email) {
            Ok(email) => self.store.user_by_email(&email).await?,
            Err(_) => None,
        };
        let hash = user
            .as_ref()
            .and_then(|u| u.password_hash.clone())
            .unwrap_or_else(|| NOBODY_HASH.to_string());
        let opened = self
            .credentials
            .hashing
            .verify(Lane::Anyone, password.to_string(), hash)
            .await?;
        match user {
            // Linked to the identity provider: the provider decides whether they may still
            // come in, so a password (set before the link, or since) does not.
            Some(user) if opened && user.oidc_subject.is_some() => Err(ServiceError::Unauthorized(
                "this account signs in with single sign-on: use it".into(),
            )),
            Some(user) if opened && user.password_hash.is_some() => {
                self.open_session(Some(&user.id)).await
            }
            _ => Err(wrong()),
        }
    }

    pub(super) async fn open_session(&self, user_id: Option<&str>) -> ServiceResult<String> {
        let secret = auth::new_secret();
        let now = self.now_ms();
        let ttl = i64::try_from(SESSION_TTL.as_millis()).unwrap_or(i64::MAX);
        self.store
            .insert_session(
                &auth::sha256_hex(&secret),
                &auth::new_secret(),
                now,
                now + ttl,
                user_id,
            )
            .await?;
        let holder = match user_id.and_then(|u| u.parse().ok()) {
            Some(user) => Holder::User(user),
            None => Holder::AdminToken,
        };
        self.credentials
            .sessions
            .recent
            .remember_held(&secret, holder, Instant::now());
        Ok(secret)
    }

    /// The live session whose cookie secret this is.
    pub async fn web_session(&self, secret: &str) -> ServiceResult<Option<WebSession>> {
        let Some(row) = self
            .store
            .session(&auth::sha256_hex(secret), self.now_ms())
            .await?
        else {
            return Ok(None);
        };
        let principal = match &row.user_id {
            None => Principal::admin_token(),
            Some(user_id) => match self.store.user(user_id).await? {
                Some(user) => Principal {
                    actor: Actor::User {
                        id: user.id.parse().unwrap_or_default(),
                        name: user.name,
                    },
                    role: user.role,
                },
                // Removed meanwhile (their sessions go with them; this is a race with that).
                None => return Ok(None),
            },
        };
        self.credentials
            .sessions
            .recent
            .remember_held(secret, principal.holder(), Instant::now());
        Ok(Some(WebSession {
            csrf_token: row.csrf_token,
            principal,
        }))
    }

    /// Who holds this session cookie, if it was seen valid lately (a pool hint: see
    /// `recent`).
    pub fn recent_session(&self, secret: &str) -> Option<Holder> {
        self.credentials
            .sessions
            .recent
            .holder(secret, Instant::now())
    }

    /// Learns the sessions opened since the last look, on any replica (one indexed read of
    /// those alone); the first look learns every live one.
    pub async fn follow_sessions(&self) -> anyhow::Result<()> {
        let from = self
            .credentials
            .sessions
            .followed_until
            .load(Ordering::Relaxed)
            .max(self.now_ms());
        let opened = self
            .store
            .sessions_ending_from(from, LEARNT_PER_LOOK)
            .await?;
        let now = Instant::now();
        for (id_sha256, _, user_id) in &opened {
            let digest = hex::decode(id_sha256).ok().and_then(|d| d.try_into().ok());
            let holder = match user_id.as_deref().map(str::parse) {
                None => Some(Holder::AdminToken),
                Some(Ok(user)) => Some(Holder::User(user)),
                Some(Err(_)) => None,
            };
            if let (Some(digest), Some(holder)) = (digest, holder) {
                self.credentials
                    .sessions
                    .recent
                    .remember_digest(digest, holder, now);
            }
        }
        if let Some((_, latest, _)) = opened.first() {
            self.credentials
                .sessions
                .followed_until
                .fetch_max(*latest, Ordering::Relaxed);
        }
        Ok(())
    }

    pub async fn log_out(&self, secret: &str) -> ServiceResult<()> {
        self.credentials.sessions.recent.forget(secret);
        self.store.delete_session(&auth::sha256_hex(secret)).await?;
        Ok(())
    }

    /// Whether a form's CSRF token is its session's.
    pub fn csrf_matches(session: &WebSession, submitted: &str) -> bool {
        auth::constant_time_eq(&session.csrf_token, submitted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A wrong email costs what a wrong password costs only while the dummy hash is a real
    /// hash with the parameters central hashes with now.
    #[test]
    fn the_dummy_hash_is_checked_like_a_users_own() {
        let mut memory = auth::Argon2Memory::new();
        let fresh = auth::hash_secret("anything at all", &mut memory).unwrap();
        let parameters = |phc: &str| phc.rsplitn(3, '$').nth(2).map(str::to_string);
        assert_eq!(parameters(NOBODY_HASH), parameters(&fresh));
        assert!(parameters(NOBODY_HASH).is_some());
        assert!(!auth::verify_secret(
            "anything at all",
            NOBODY_HASH,
            &mut memory
        ));
    }
}
