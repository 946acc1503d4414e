//! Web page sessions: logging in with the admin token, the session behind a cookie, logging
//! out. The cookie holds a random secret; the database holds only its SHA-256, with the CSRF
//! token the session's forms must carry. HTTP (cookies, forms) is `web`'s, not this module's.
//!
//! Each replica also knows, in memory, the sessions seen valid lately (`Known`), so that a
//! session's requests are served from the operators' places (`api::pools`) without a
//! database read. Sessions opened on another replica, or before this one started, are learnt
//! by `follow_sessions` within `admin_token::FOLLOW_EVERY`: otherwise their first request
//! would wait with strangers' and be shed while strangers hold every unauthenticated place.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use super::recent::RecentlyValid;
use super::{auth, App};
use crate::error::{ApiError, ApiResult};

/// A session lasts this long from login, however active.
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);

/// How long a session seen valid counts as an operator's for choosing its requests' pool.
pub const RECENTLY_VALID: Duration = Duration::from_secs(600);

/// The most sessions learnt per look (a pool hint: any beyond are learnt on their first use).
const LEARNT_PER_LOOK: i64 = 1_024;

/// The sessions this replica knows to be valid lately.
pub struct Known {
    recent: RecentlyValid,
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
}

impl App {
    /// Starts a session for whoever shows the admin token; returns the cookie's secret.
    pub async fn log_in(&self, admin_token: &str) -> ApiResult<String> {
        if !self.verify_admin_token(admin_token.trim()).await? {
            return Err(ApiError::Unauthorized(
                "that is not the admin token: use CENTRAL_ADMIN_TOKEN or the token central \
                 printed on its first start"
                    .into(),
            ));
        }
        let secret = auth::new_secret();
        let now = self.now_ms();
        let ttl = i64::try_from(SESSION_TTL.as_millis()).unwrap_or(i64::MAX);
        self.store
            .insert_session(
                &auth::sha256_hex(&secret),
                &auth::new_secret(),
                now,
                now + ttl,
            )
            .await?;
        self.sessions.recent.remember(&secret, Instant::now());
        Ok(secret)
    }

    /// The live session whose cookie secret this is.
    pub async fn web_session(&self, secret: &str) -> ApiResult<Option<WebSession>> {
        let row = self
            .store
            .session(&auth::sha256_hex(secret), self.now_ms())
            .await?;
        if row.is_some() {
            self.sessions.recent.remember(secret, Instant::now());
        }
        Ok(row.map(|row| WebSession {
            csrf_token: row.csrf_token,
        }))
    }

    /// Whether this session cookie was seen valid lately (a pool hint: see `recent`).
    pub fn is_recent_session(&self, secret: &str) -> bool {
        self.sessions.recent.contains(secret, Instant::now())
    }

    /// Learns the sessions opened since the last look, on any replica (one indexed read of
    /// those alone); the first look learns every live one.
    pub async fn follow_sessions(&self) -> anyhow::Result<()> {
        let from = self
            .sessions
            .followed_until
            .load(Ordering::Relaxed)
            .max(self.now_ms());
        let opened = self
            .store
            .sessions_ending_from(from, LEARNT_PER_LOOK)
            .await?;
        let now = Instant::now();
        for (id_sha256, _) in &opened {
            let digest = hex::decode(id_sha256).ok().and_then(|d| d.try_into().ok());
            if let Some(digest) = digest {
                self.sessions.recent.remember_digest(digest, now);
            }
        }
        if let Some((_, latest)) = opened.first() {
            self.sessions
                .followed_until
                .fetch_max(*latest, Ordering::Relaxed);
        }
        Ok(())
    }

    pub async fn log_out(&self, secret: &str) -> ApiResult<()> {
        self.sessions.recent.forget(secret);
        self.store.delete_session(&auth::sha256_hex(secret)).await?;
        Ok(())
    }

    /// Whether a form's CSRF token is its session's.
    pub fn csrf_matches(session: &WebSession, submitted: &str) -> bool {
        auth::constant_time_eq(&session.csrf_token, submitted)
    }
}
