//! What tells a caller who it is, kept for the life of the process: the admin token, the
//! agents' signing keys, the sessions and API keys seen valid lately, single sign-on, and the
//! bounded hashing that every secret goes through.
//!
//! This module only groups that state so that `App` holds one thing for it; the rules that use
//! each part stay in their own modules (`auth`, `admin_token`, `sessions`, `api_keys`, `sso`,
//! `hashing`). It reads no store and decides nothing.

use std::time::Duration;

use super::{admin_token, api_keys, auth, hashing, sessions, sso};

/// The shortest time between two key reloads caused by unknown `kid`s.
const KEY_RELOAD_GAP: Duration = Duration::from_secs(5);

pub(crate) struct Credentials {
    /// Checks and follows the admin token (`admin_token`).
    pub(super) admin: admin_token::AdminToken,
    /// The agents' access-token keys; reloaded when a token names a key this replica has not
    /// seen (another one rotated).
    pub(super) jwt: std::sync::RwLock<auth::JwtKeys>,
    /// Unknown `kid`s reload the keys at most this often: a forged token must not cost a
    /// database read each.
    pub(super) key_reloads: auth::ReloadGate,
    /// How long an access token lasts.
    pub(super) access_ttl: chrono::Duration,
    /// Bounds the argon2 runs (registration and refresh secrets, passwords, the admin token).
    pub(super) hashing: hashing::Hashing,
    /// Session cookies seen valid lately: a page request with one is an operator's.
    pub(super) sessions: sessions::Known,
    /// API keys seen valid lately (a call with one is an operator's, `api::pools`), and the
    /// addresses each was used from lately.
    pub(super) api_keys: api_keys::KeyMemory,
    /// Single sign-on, when `CENTRAL_OIDC_ISSUER` is set.
    pub(super) sso: Option<sso::Sso>,
}

impl Credentials {
    pub(super) fn new(
        admin: admin_token::AdminToken,
        jwt: auth::JwtKeys,
        access_ttl: chrono::Duration,
        sso: Option<sso::Sso>,
    ) -> Credentials {
        Credentials {
            admin,
            jwt: std::sync::RwLock::new(jwt),
            key_reloads: auth::ReloadGate::new(KEY_RELOAD_GAP),
            access_ttl,
            hashing: hashing::Hashing::new(),
            sessions: sessions::Known::new(),
            api_keys: api_keys::KeyMemory::new(),
            sso,
        }
    }
}
