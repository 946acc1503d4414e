//! Secrets: token formats, hashing, and poller access tokens (JWT).
//!
//! Registration and refresh tokens look like `<prefix>_<id>_<secret>`: the id finds the one
//! row whose hash is then verified, so a lookup never scans hashes.
//!
//! - What an operator may choose (the admin token, `CENTRAL_REGISTRATION_TOKEN`, and so every
//!   registration token) and users' passwords are stored as argon2id: slow on purpose, since a
//!   chosen secret may be guessable from its hash.
//! - Refresh tokens are only ever made here, 256 random bits each, so they are stored as
//!   SHA-256 (`sha256:<hex>`): a slow hash buys nothing against 256 random bits, and every
//!   agent trades one every few minutes (two argon2 runs a trade were 3 % of a core at 200
//!   pollers). Rows an older central wrote with argon2 still verify (`verify_made_secret`).

use anyhow::Context;
use argon2::password_hash::{rand_core::OsRng, Output, ParamsString, PasswordHash, SaltString};
use argon2::{Algorithm as Argon2Algorithm, Argon2, Params, Version};
use chrono::{DateTime, Utc};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use rand::RngCore;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use uuid::Uuid;

pub const REGISTRATION_PREFIX: &str = "preg";
pub const REFRESH_PREFIX: &str = "pref";
pub const ADMIN_PREFIX: &str = "padm";
const AUDIENCE: &str = "poller-api";
/// `verify`'s answer for a `kid` it does not know (perhaps one another replica just added).
pub const UNKNOWN_KEY: &str = "access token was signed with an unknown key; refresh it";

/// Lets an expensive action happen at most once per `gap`, whoever asks: the first caller
/// after the gap gets `true`, everyone else meanwhile `false`.
#[derive(Debug)]
pub struct ReloadGate {
    gap: std::time::Duration,
    last: std::sync::Mutex<Option<std::time::Instant>>,
}

impl ReloadGate {
    pub fn new(gap: std::time::Duration) -> Self {
        Self {
            gap,
            last: std::sync::Mutex::new(None),
        }
    }

    pub fn try_begin(&self, now: std::time::Instant) -> bool {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if last.is_some_and(|at| now.saturating_duration_since(at) < self.gap) {
            return false;
        }
        *last = Some(now);
        true
    }
}

/// 256 random bits, hex.
pub fn new_secret() -> String {
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}

pub fn format_token(prefix: &str, id: Uuid, secret: &str) -> String {
    format!("{prefix}_{}_{secret}", id.simple())
}

/// Splits a token of the given prefix into its id and secret.
pub fn parse_token(prefix: &str, token: &str) -> Option<(Uuid, String)> {
    let rest = token.strip_prefix(prefix)?.strip_prefix('_')?;
    let (id, secret) = rest.split_once('_')?;
    if secret.is_empty() {
        return None;
    }
    Some((Uuid::try_parse(id).ok()?, secret.to_string()))
}

/// The argon2 working memory of one run: 1 KiB blocks, as many as the parameters ask. A
/// hashing thread keeps one and lends it to every run (`hashing`), since 19 MiB allocated and
/// freed per run is memory the allocator does not give back (measured: a flood grew central
/// by hundreds of MiB).
pub struct Argon2Memory(Vec<argon2::Block>);

impl Argon2Memory {
    /// Enough for the hashes central writes (the crate's defaults).
    pub fn new() -> Self {
        Self(vec![
            argon2::Block::default();
            Params::default().block_count()
        ])
    }
}

impl Default for Argon2Memory {
    fn default() -> Self {
        Self::new()
    }
}

/// argon2id with the crate's defaults (OWASP's minimum: 19 MiB, 2 passes), as a PHC string.
/// Slow on purpose: call it off the async runtime.
pub fn hash_secret(secret: &str, memory: &mut Argon2Memory) -> anyhow::Result<String> {
    let salt = SaltString::generate(&mut OsRng);
    let params = Params::default();
    let mut output = [0u8; Params::DEFAULT_OUTPUT_LEN];
    let mut salt_bytes = [0u8; 64];
    let raw_salt = salt
        .decode_b64(&mut salt_bytes)
        .map_err(|e| anyhow::anyhow!("argon2 salt: {e}"))?;
    Argon2::default()
        .hash_password_into_with_memory(secret.as_bytes(), raw_salt, &mut output, &mut memory.0)
        .map_err(|e| anyhow::anyhow!("argon2 hashing failed: {e}"))?;
    let hash = PasswordHash {
        algorithm: Argon2Algorithm::Argon2id.ident(),
        version: Some(Version::V0x13.into()),
        params: ParamsString::try_from(&params)
            .map_err(|e| anyhow::anyhow!("argon2 parameters: {e}"))?,
        salt: Some(salt.as_salt()),
        hash: Some(Output::new(&output).map_err(|e| anyhow::anyhow!("argon2 output: {e}"))?),
    };
    Ok(hash.to_string())
}

/// Whether `secret` is what `stored_hash` (a PHC string) was made from. A hash asking for more
/// memory than `memory` holds is not one central wrote, and is refused.
pub fn verify_secret(secret: &str, stored_hash: &str, memory: &mut Argon2Memory) -> bool {
    let mut verify = || -> Option<bool> {
        let hash = PasswordHash::new(stored_hash).ok()?;
        let algorithm = Argon2Algorithm::try_from(hash.algorithm).ok()?;
        let version = hash
            .version
            .map(Version::try_from)
            .transpose()
            .ok()?
            .unwrap_or_default();
        let params = Params::try_from(&hash).ok()?;
        let blocks = memory.0.get_mut(..params.block_count())?;
        let expected = hash.hash?;
        let mut salt_bytes = [0u8; 64];
        let salt = hash.salt?.decode_b64(&mut salt_bytes).ok()?;
        let mut output = vec![0u8; expected.len()];
        Argon2::new(algorithm, version, params)
            .hash_password_into_with_memory(secret.as_bytes(), salt, &mut output, blocks)
            .ok()?;
        // `Output`'s equality is constant-time.
        Some(Output::new(&output).ok()? == expected)
    };
    verify().unwrap_or(false)
}

/// How `hash_made_secret` marks its hashes, apart from argon2's PHC strings (`$argon2id$…`).
const MADE_SECRET_SCHEME: &str = "sha256:";

/// The stored form of a secret central made itself (256 random bits, `new_secret`): its
/// SHA-256. Fast on purpose; never for a secret a person chose.
pub fn hash_made_secret(secret: &str) -> String {
    format!("{MADE_SECRET_SCHEME}{}", sha256_hex(secret))
}

/// Whether `secret` is what `stored_hash` was made from, when `hash_made_secret` made it;
/// `None` when the hash is another scheme (argon2, written by an older central), which the
/// caller checks with `verify_secret` off the runtime.
pub fn verify_made_secret(secret: &str, stored_hash: &str) -> Option<bool> {
    let digest = stored_hash.strip_prefix(MADE_SECRET_SCHEME)?;
    Some(constant_time_eq(&sha256_hex(secret), digest))
}

pub fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// Compares two equal-length strings without an early exit.
pub fn constant_time_eq(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

#[derive(Debug, Serialize, Deserialize)]
struct Claims {
    sub: String,
    aud: String,
    exp: i64,
    iat: i64,
}

/// The HMAC keys of poller access tokens, stored in the database as `<kid>:<hex>[,…]`, newest
/// last, so that every central replica shares them. Tokens are signed with the newest key and
/// verified with whichever key their `kid` names, so rotating the key (`central
/// rotate-signing-key`) logs no poller out: the previous keys stay until their tokens expired.
pub struct JwtKeys {
    keys: Vec<(String, EncodingKey, DecodingKey)>,
}

/// Keys kept after a rotation: tokens live 15 minutes, so rotating more often than every
/// 15 minutes would drop a key whose tokens are still valid.
const KEPT_KEYS: usize = 3;

impl JwtKeys {
    pub fn generate_stored_form() -> String {
        format!("k{}:{}", &new_secret()[..8], new_secret())
    }

    /// The stored form with a new key appended (and the oldest dropped beyond a few).
    pub fn rotated_stored_form(stored: &str) -> String {
        let mut keys: Vec<&str> = stored.split(',').filter(|k| !k.is_empty()).collect();
        let fresh = Self::generate_stored_form();
        keys.push(&fresh);
        let skip = keys.len().saturating_sub(KEPT_KEYS);
        keys[skip..].join(",")
    }

    pub fn from_stored_form(stored: &str) -> anyhow::Result<JwtKeys> {
        let keys = stored
            .split(',')
            .filter(|k| !k.is_empty())
            .map(|entry| {
                let (kid, secret) = entry
                    .split_once(':')
                    .context("malformed jwt signing key setting")?;
                let secret = hex::decode(secret).context("malformed jwt signing key setting")?;
                Ok((
                    kid.to_string(),
                    EncodingKey::from_secret(&secret),
                    DecodingKey::from_secret(&secret),
                ))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        anyhow::ensure!(!keys.is_empty(), "no jwt signing key stored");
        Ok(JwtKeys { keys })
    }

    /// The key id new tokens are signed with.
    pub fn current_kid(&self) -> &str {
        &self.keys[self.keys.len() - 1].0
    }

    pub fn issue(
        &self,
        poller_id: Uuid,
        now: DateTime<Utc>,
        ttl: chrono::Duration,
    ) -> anyhow::Result<(String, DateTime<Utc>)> {
        let expires_at = now + ttl;
        let claims = Claims {
            sub: poller_id.to_string(),
            aud: AUDIENCE.into(),
            exp: expires_at.timestamp(),
            iat: now.timestamp(),
        };
        let (kid, encoding, _) = &self.keys[self.keys.len() - 1];
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some(kid.clone());
        let token = jsonwebtoken::encode(&header, &claims, encoding)?;
        Ok((token, expires_at))
    }

    /// The poller id of a valid token. The algorithm is pinned: a token claiming any other
    /// (including `none`) is refused.
    pub fn verify(&self, token: &str) -> Result<Uuid, String> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| format!("malformed access token: {e}"))?;
        let Some((_, _, decoding)) = self
            .keys
            .iter()
            .find(|(kid, _, _)| header.kid.as_deref() == Some(kid))
        else {
            return Err(UNKNOWN_KEY.into());
        };
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_audience(&[AUDIENCE]);
        validation.leeway = 5;
        let data = jsonwebtoken::decode::<Claims>(token, decoding, &validation).map_err(|e| {
            format!("access token rejected ({e}); refresh it with POST /api/poller/token")
        })?;
        Uuid::try_parse(&data.claims.sub).map_err(|_| "access token has a malformed subject".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_reject_other_prefixes() {
        let id = Uuid::new_v4();
        let secret = new_secret();
        let token = format_token(REGISTRATION_PREFIX, id, &secret);
        assert_eq!(parse_token(REGISTRATION_PREFIX, &token), Some((id, secret)));
        assert_eq!(parse_token(REFRESH_PREFIX, &token), None);
        assert_eq!(parse_token(REGISTRATION_PREFIX, "preg_nothex_x"), None);
        assert_eq!(
            parse_token(REGISTRATION_PREFIX, &format!("preg_{}_", id.simple())),
            None
        );
    }

    #[test]
    fn made_secrets_hash_fast_and_leave_argon2_hashes_to_argon2() {
        let secret = new_secret();
        let hash = hash_made_secret(&secret);
        assert_eq!(hash, format!("sha256:{}", sha256_hex(&secret)));
        assert_eq!(verify_made_secret(&secret, &hash), Some(true));
        assert_eq!(verify_made_secret(&new_secret(), &hash), Some(false));
        assert_eq!(verify_made_secret(&secret, "sha256:"), Some(false));
        assert_eq!(verify_made_secret(&secret, &sha256_hex(&secret)), None);
        let argon2 = hash_secret(&secret, &mut Argon2Memory::new()).unwrap();
        assert_eq!(verify_made_secret(&secret, &argon2), None);
    }

    #[test]
    fn argon2_hashes_verify_only_the_right_secret_and_agree_with_the_crate() {
        use argon2::password_hash::{PasswordHasher, PasswordVerifier};
        let memory = &mut Argon2Memory::new();
        let hash = hash_secret("right", memory).unwrap();
        assert!(
            hash.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"),
            "{hash}"
        );
        assert!(verify_secret("right", &hash, memory));
        assert!(!verify_secret("wrong", &hash, memory));
        assert!(!verify_secret("right", "not a hash", memory));
        // What the crate's own API writes and reads: hashes stored before keep working.
        let parsed = PasswordHash::new(&hash).unwrap();
        assert!(Argon2::default().verify_password(b"right", &parsed).is_ok());
        let salt = SaltString::generate(&mut OsRng);
        let theirs = Argon2::default()
            .hash_password(b"old", &salt)
            .unwrap()
            .to_string();
        assert!(verify_secret("old", &theirs, memory));
        assert!(!verify_secret("new", &theirs, memory));
        // A hash asking for more memory than central's is refused, not allocated.
        let greedy = theirs.replace("m=19456", "m=4000000");
        assert!(!verify_secret("old", &greedy, memory));
    }

    #[test]
    fn jwt_round_trips_and_rejects_tampering_and_expiry() {
        let keys = JwtKeys::from_stored_form(&JwtKeys::generate_stored_form()).unwrap();
        let poller = Uuid::new_v4();
        let now = Utc::now();
        let (token, expires) = keys
            .issue(poller, now, chrono::Duration::minutes(15))
            .unwrap();
        assert_eq!(expires, now + chrono::Duration::minutes(15));
        assert_eq!(keys.verify(&token), Ok(poller));

        let other = JwtKeys::from_stored_form(&JwtKeys::generate_stored_form()).unwrap();
        assert!(
            other.verify(&token).is_err(),
            "another key's token is refused"
        );

        let (old, _) = keys
            .issue(
                poller,
                now - chrono::Duration::hours(1),
                chrono::Duration::minutes(15),
            )
            .unwrap();
        assert!(keys.verify(&old).unwrap_err().contains("refresh"));

        let mut tampered = token.clone();
        tampered.pop();
        assert!(keys.verify(&tampered).is_err());
    }

    #[test]
    fn rotation_keeps_old_tokens_valid_and_signs_with_the_new_key() {
        let stored = JwtKeys::generate_stored_form();
        let old = JwtKeys::from_stored_form(&stored).unwrap();
        let poller = Uuid::new_v4();
        let (old_token, _) = old
            .issue(poller, Utc::now(), chrono::Duration::minutes(15))
            .unwrap();
        let rotated = JwtKeys::rotated_stored_form(&stored);
        let new = JwtKeys::from_stored_form(&rotated).unwrap();
        assert_ne!(new.current_kid(), old.current_kid());
        assert_eq!(
            new.verify(&old_token),
            Ok(poller),
            "tokens of the previous key still work"
        );
        let (new_token, _) = new
            .issue(poller, Utc::now(), chrono::Duration::minutes(15))
            .unwrap();
        assert_eq!(old.verify(&new_token), Err(UNKNOWN_KEY.to_string()));
        let mut many = rotated.clone();
        for _ in 0..5 {
            many = JwtKeys::rotated_stored_form(&many);
        }
        assert_eq!(many.split(',').count(), KEPT_KEYS);
        assert!(JwtKeys::from_stored_form("").is_err());
    }

    #[test]
    fn constant_time_comparison() {
        assert!(constant_time_eq("abc", "abc"));
        assert!(!constant_time_eq("abc", "abd"));
        assert!(!constant_time_eq("abc", "ab"));
    }

    #[test]
    fn unknown_kids_reload_keys_at_most_once_per_gap() {
        let gate = ReloadGate::new(std::time::Duration::from_secs(5));
        let t0 = std::time::Instant::now();
        assert!(gate.try_begin(t0), "the first unknown kid looks");
        let flood = (0..1000)
            .filter(|i| gate.try_begin(t0 + std::time::Duration::from_millis(*i)))
            .count();
        assert_eq!(flood, 0, "a flood within the gap costs nothing");
        assert!(gate.try_begin(t0 + std::time::Duration::from_secs(5)));
        assert!(!gate.try_begin(t0 + std::time::Duration::from_secs(6)));
    }
}
