//! The admin token: how it is chosen, stored, checked and followed across replicas.
//!
//! - Chosen: generated (`padm_` and 256 random bits) unless `CENTRAL_ADMIN_TOKEN` sets one,
//!   which must be hard to guess: zxcvbn (Dropbox's estimator) must put it at no fewer than
//!   10^18 guesses, about 18 random characters; words, names, dates and keyboard runs count
//!   for little.
//! - Stored: as a salted argon2id hash (`admin_token_hash`). A SHA-256 hash written by an older
//!   central (`admin_token_sha256`) still opens, and is replaced by an argon2 hash the first
//!   time the token is shown.
//! - Checked: argon2 once per token and replica, then from memory (`recent`), so the settings
//!   API costs no hash per request; a wrong token costs an argon2 run, bounded by `hashing`
//!   and by the failed-authentication limits. A replica knows the token it was configured with
//!   from the start; a generated one is known after its first use on that replica, which is
//!   served from the unauthenticated places (see `api::pools`).
//! - Followed: every replica reads the stored hash every `FOLLOW_EVERY` and forgets what it
//!   remembered when it changes, so a token replaced on one replica (restarted with a new
//!   `CENTRAL_ADMIN_TOKEN`) is refused by all within seconds. Web sessions belong to the token
//!   they were opened with: replacing it deletes them.
//!
//! Must not: keep or log the token itself.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use super::auth::{self, Argon2Memory};
use super::hashing::Lane;
use super::recent::RecentlyValid;
use super::App;
use crate::service::error::ServiceResult;
use crate::store::Store;

const SETTING: &str = "admin_token_hash";
/// Where centrals before argon2 kept the token's unsalted SHA-256.
const LEGACY_SETTING: &str = "admin_token_sha256";
/// The fewest guesses (log10) zxcvbn must estimate for a chosen admin token.
pub const MIN_GUESSES_LOG10: f64 = 18.0;
/// How often each replica reads the stored hash.
pub const FOLLOW_EVERY: Duration = Duration::from_secs(2);
/// How long a token checked with argon2 is taken from memory (until the stored hash changes).
const REMEMBERED_FOR: Duration = Duration::from_secs(3600);

pub struct AdminToken {
    /// The stored hash as this replica last read it.
    stored: RwLock<String>,
    verified: RecentlyValid,
}

/// Whether `hash` is the unsalted SHA-256 an older central wrote (64 hex digits).
fn is_legacy(hash: &str) -> bool {
    hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Whether `token` is the one `hash` was made from (argon2 for a current hash: slow).
fn opens(token: &str, hash: &str, memory: &mut Argon2Memory) -> bool {
    if is_legacy(hash) {
        auth::constant_time_eq(&auth::sha256_hex(token), hash)
    } else {
        auth::verify_secret(token, hash, memory)
    }
}

/// Words a chosen token is judged against besides zxcvbn's dictionaries: this product's, and
/// placeholders that documentation and examples (ours included, once) tell people to replace.
const PLACEHOLDERS: &[&str] = &[
    "central",
    "admin",
    "token",
    "poller",
    "changeme",
    "change-me",
    "change-me-to-a-long-random-string",
    "replace-me",
];

/// Refuses a chosen token that is easy to guess, saying why (`variable` names where it came
/// from).
pub fn check_strength(variable: &str, token: &str) -> anyhow::Result<()> {
    let guesses = zxcvbn::zxcvbn(token, PLACEHOLDERS).guesses_log10();
    if guesses < MIN_GUESSES_LOG10 {
        anyhow::bail!(
            "{variable} is too easy to guess (about 10^{guesses:.0} guesses; at least \
             10^{MIN_GUESSES_LOG10:.0} are needed): use a random one, e.g. `openssl rand -hex 24`, \
             or leave it unset and central generates one"
        );
    }
    Ok(())
}

async fn stored_hash(store: &Store) -> anyhow::Result<Option<String>> {
    Ok(match store.setting(SETTING).await? {
        Some(hash) => Some(hash),
        None => store.setting(LEGACY_SETTING).await?,
    })
}

/// argon2 off the runtime, for start-up (before `hashing` exists) and upgrades.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce(&mut Argon2Memory) -> T + Send + 'static,
) -> anyhow::Result<T> {
    Ok(tokio::task::spawn_blocking(move || work(&mut Argon2Memory::new())).await?)
}

impl AdminToken {
    /// Stores the configured token (or generates one when none is stored yet) and returns
    /// what checks it from then on.
    /// `now_ms`: when keys made with a replaced token are revoked.
    pub async fn open(
        store: &Store,
        configured: Option<&str>,
        now_ms: i64,
    ) -> anyhow::Result<AdminToken> {
        let previous = stored_hash(store).await?;
        let stored = match configured {
            Some(token) => {
                check_strength("CENTRAL_ADMIN_TOKEN", token)?;
                let (token, earlier) = (token.to_string(), previous.clone());
                let (unchanged, hash) = blocking(move |memory| {
                    let unchanged = earlier.is_some_and(|p| opens(&token, &p, memory));
                    (unchanged, auth::hash_secret(&token, memory))
                })
                .await?;
                match previous {
                    Some(previous) if unchanged && !is_legacy(&previous) => previous,
                    _ => {
                        let hash = hash?;
                        if !unchanged {
                            // Whoever logged in to the page with the old token is out, and
                            // the keys made with it stop: a leaked token is rotated for that.
                            store.end_admin_token_credentials(now_ms).await?;
                        }
                        store.put_setting(SETTING, &hash).await?;
                        hash
                    }
                }
            }
            None => match previous {
                Some(hash) => hash,
                None => {
                    let token = format!("{}_{}", auth::ADMIN_PREFIX, auth::new_secret());
                    let hash = {
                        let token = token.clone();
                        blocking(move |memory| auth::hash_secret(&token, memory)).await??
                    };
                    let stored = store.setting_or_insert(SETTING, &hash).await?;
                    if stored == hash {
                        println!(
                            "\nGenerated the admin token (shown once; only a salted hash is \
                             stored):\n\n    {token}\n\n\
                             Use it as `Authorization: Bearer <token>` on /api/v1/…\n"
                        );
                    }
                    stored
                }
            },
        };
        let admin = AdminToken {
            stored: RwLock::new(stored),
            verified: RecentlyValid::new(REMEMBERED_FOR),
        };
        // The token this process was given is the stored one (just checked, or just stored):
        // known from the first request on, so that its first use after a restart is served
        // from the operators' places even while strangers are locked out.
        if let Some(token) = configured {
            admin.verified.remember(token, Instant::now());
        }
        Ok(admin)
    }

    /// Whether `token` was checked lately against the current hash: memory only, for choosing
    /// a request's pool (`api::pools`).
    pub fn is_known(&self, token: &str) -> bool {
        self.verified.contains(token, Instant::now())
    }

    fn current(&self) -> String {
        self.stored
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Takes the stored hash as read now; a change forgets every token remembered.
    fn follow(&self, stored: String) {
        let mut current = self.stored.write().unwrap_or_else(|p| p.into_inner());
        if *current != stored {
            *current = stored;
            self.verified.clear();
        }
    }
}

impl App {
    /// Whether `token` is the admin token: from memory when it was checked lately, else with
    /// argon2 (bounded by `hashing`; `503` when it is saturated).
    pub async fn verify_admin_token(&self, token: &str) -> ServiceResult<bool> {
        if self.credentials.admin.is_known(token) {
            return Ok(true);
        }
        let hash = self.credentials.admin.current();
        let legacy = is_legacy(&hash);
        let opened = if legacy {
            auth::constant_time_eq(&auth::sha256_hex(token), &hash)
        } else {
            self.credentials
                .hashing
                .verify(Lane::Anyone, token.to_string(), hash.clone())
                .await?
        };
        if !opened {
            return Ok(false);
        }
        if legacy {
            // Replaced by a salted slow hash now that the token is at hand.
            let upgraded = self.credentials.hashing.hash(token.to_string()).await?;
            self.store.put_setting(SETTING, &upgraded).await?;
            self.credentials.admin.follow(upgraded);
        }
        self.credentials
            .admin
            .verified
            .remember(token, Instant::now());
        Ok(true)
    }

    /// Whether `token` is an admin token checked lately (memory only; see `AdminToken`).
    pub fn is_known_admin_token(&self, token: &str) -> bool {
        self.credentials.admin.is_known(token)
    }
}

/// Reads the stored hash, and learns the web sessions opened since (`sessions`), every
/// `FOLLOW_EVERY` on every replica: two indexed reads, the second of new sessions alone.
pub async fn follow(app: Arc<App>) {
    let mut ticker = tokio::time::interval(FOLLOW_EVERY);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        match stored_hash(&app.store).await {
            Ok(Some(stored)) => app.credentials.admin.follow(stored),
            Ok(None) => {}
            Err(e) => tracing::warn!("cannot read the admin token's hash: {e:#}"),
        }
        if let Err(e) = app.follow_sessions().await {
            tracing::warn!("cannot read the web sessions opened lately: {e:#}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chosen_tokens_must_be_hard_to_guess() {
        for weak in [
            "change-me-to-a-long-random-string",
            "e2e-admin-token-0123456789",
            "correcthorsebatterystaple",
            "mysecretadmintoken2024",
            "adminadminadminadmin",
            "qwertyuiopasdfghjkl",
            // 16 random hex digits are 64 bits; zxcvbn counts them as 10^16 guesses.
            "7c1f9a3e5b8d2f4a",
        ] {
            assert!(check_strength("T", weak).is_err(), "{weak} was accepted");
        }
        for strong in [
            "3f9c1e7a5b2d8046c1e9a7f35b2d8046",
            "e2e-admin-7c1f9a3e5b8d2f4a6c0e91d3",
            "Vq8#mZ2!pL6@wR4$kT9",
        ] {
            assert!(check_strength("T", strong).is_ok(), "{strong} was refused");
        }
    }

    #[test]
    fn legacy_and_current_hashes_open_with_the_token_only() {
        let memory = &mut Argon2Memory::new();
        let legacy = auth::sha256_hex("the-token");
        assert!(is_legacy(&legacy));
        assert!(opens("the-token", &legacy, memory));
        assert!(!opens("another", &legacy, memory));
        let current = auth::hash_secret("the-token", memory).unwrap();
        assert!(!is_legacy(&current));
        assert!(opens("the-token", &current, memory));
        assert!(!opens("another", &current, memory));
    }
}
