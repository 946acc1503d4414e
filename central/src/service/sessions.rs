//! Web page sessions: logging in with the admin token, the session behind a cookie, logging
//! out. The cookie holds a random secret; the database holds only its SHA-256, with the CSRF
//! token the session's forms must carry. HTTP (cookies, forms) is `web`'s, not this module's.

use std::time::Duration;

use super::{auth, now_ms, App};
use crate::error::{ApiError, ApiResult};

/// A session lasts this long from login, however active.
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);

/// How long a session seen valid counts as an operator's for choosing its requests' pool.
pub const RECENTLY_VALID: Duration = Duration::from_secs(600);

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
        let now = now_ms();
        let ttl = i64::try_from(SESSION_TTL.as_millis()).unwrap_or(i64::MAX);
        self.store
            .insert_session(
                &auth::sha256_hex(&secret),
                &auth::new_secret(),
                now,
                now + ttl,
            )
            .await?;
        self.recent_sessions
            .remember(&secret, std::time::Instant::now());
        Ok(secret)
    }

    /// The live session whose cookie secret this is.
    pub async fn web_session(&self, secret: &str) -> ApiResult<Option<WebSession>> {
        let row = self
            .store
            .session(&auth::sha256_hex(secret), now_ms())
            .await?;
        if row.is_some() {
            self.recent_sessions
                .remember(secret, std::time::Instant::now());
        }
        Ok(row.map(|row| WebSession {
            csrf_token: row.csrf_token,
        }))
    }

    /// Whether this session cookie was seen valid lately (a pool hint: see `recent`).
    pub fn is_recent_session(&self, secret: &str) -> bool {
        self.recent_sessions
            .contains(secret, std::time::Instant::now())
    }

    pub async fn log_out(&self, secret: &str) -> ApiResult<()> {
        self.recent_sessions.forget(secret);
        self.store.delete_session(&auth::sha256_hex(secret)).await?;
        Ok(())
    }

    /// Whether a form's CSRF token is its session's.
    pub fn csrf_matches(session: &WebSession, submitted: &str) -> bool {
        auth::constant_time_eq(&session.csrf_token, submitted)
    }
}
