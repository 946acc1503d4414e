//! Single sign-on with one OpenID provider (`CENTRAL_OIDC_*`): the authorization code flow with
//! PKCE, state and nonce, for the page's login. Owns what a sign-in carries between its two
//! legs and what a verified identity becomes: a user (made on first sign-in, or an existing
//! user with the same verified email, linked), with the role its claims map to, read again
//! at every sign-in. The protocol with the provider is `provider`'s; the routes are
//! `web::sso`'s; passwords and the admin token are not touched here.
//!
//! Nothing is stored between the legs: the state, nonce and PKCE verifier travel in a cookie
//! sealed with a key central keeps (`SEAL_KEY_SETTING`, shared by replicas), valid for
//! `PENDING_FOR`. A callback without that cookie, or whose `state` differs, is refused before
//! the provider is asked; a code is single-use at the provider, so a replayed callback fails
//! there. Cost: O(1) per sign-in, and nothing a stranger can make central keep.

pub mod provider;
mod recheck;

use std::time::Duration;

use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;
use uuid::Uuid;

use self::provider::{Identity, Provider, ProviderError};
use super::access::{Actor, Principal, Role};
use super::audit::Subject;
use super::App;
use crate::config::SsoArgs;
use crate::domain;
use crate::service::error::{ServiceError, ServiceResult};
use crate::store::{Ends, Store, UserConflict};

/// The setting holding the key pending sign-ins are sealed with.
const SEAL_KEY_SETTING: &str = "sso_seal_key";
/// How long a sign-in may take at the provider.
pub const PENDING_FOR: Duration = Duration::from_secs(600);
/// The route the provider sends the browser back to, below `CENTRAL_PUBLIC_URL`.
pub const CALLBACK_PATH: &str = "/login/sso/callback";
/// The longest name taken from a provider (the users API's limit).
const MAX_NAME: usize = 200;

/// Single sign-on as configured.
pub struct Sso {
    provider: Provider,
    role_claim: String,
    roles: Vec<(String, Role)>,
    default_role: Option<Role>,
    seal_key: Vec<u8>,
    /// `CENTRAL_OIDC_RECHECK`; zero: linked users are not checked between sign-ins.
    recheck: Duration,
}

/// What the page needs to send the browser to the provider.
pub struct SignIn {
    /// The provider's authorization URL.
    pub url: String,
    /// The sealed pending sign-in, for the cookie.
    pub pending: String,
}

/// Why a sign-in was refused, as the person signing in is told.
#[derive(Debug, thiserror::Error)]
pub enum SsoRefusal {
    #[error("this sign-in has expired or was started in another browser; start again")]
    NoPending,
    #[error("this sign-in does not match the one started here (state); start again")]
    WrongState,
    #[error("the provider did not let you in: {0}")]
    Provider(String),
    #[error("single sign-on failed; start again, or ask an admin to look at central's log")]
    Failed,
    #[error("your account has no role here: ask an admin")]
    NoRole,
    #[error("another single sign-on account has this email here: ask an admin")]
    EmailTaken,
    #[error("a user with this email exists already and the provider does not say the email is verified: ask an admin")]
    Unverified,
    #[error("the provider gave no usable email address")]
    NoEmail,
    #[error("a user with this email exists here with a password or as an admin, and single sign-on does not take such an account over: ask an admin to remove its password (or lower its role) first")]
    LinkNeedsProof,
}

impl Sso {
    /// Single sign-on from the configuration, or `None` when no issuer is set.
    pub async fn open(
        args: &SsoArgs,
        public_url: Option<&str>,
        store: &Store,
    ) -> anyhow::Result<Option<Sso>> {
        let Some(issuer) = &args.issuer else {
            return Ok(None);
        };
        let (Some(client_id), Some(client_secret)) = (&args.client_id, &args.client_secret) else {
            anyhow::bail!(
                "CENTRAL_OIDC_ISSUER is set: set CENTRAL_OIDC_CLIENT_ID and \
                 CENTRAL_OIDC_CLIENT_SECRET too"
            );
        };
        let redirect = match (&args.redirect_url, public_url) {
            (Some(url), _) => url.clone(),
            (None, Some(base)) => format!("{base}{CALLBACK_PATH}"),
            (None, None) => anyhow::bail!(
                "CENTRAL_OIDC_ISSUER is set: set CENTRAL_PUBLIC_URL (the provider sends browsers \
                 back to <CENTRAL_PUBLIC_URL>{CALLBACK_PATH}) or CENTRAL_OIDC_REDIRECT_URL"
            ),
        };
        let mut scopes: Vec<String> = args
            .scopes
            .split_whitespace()
            .filter(|s| *s != "openid")
            .map(str::to_string)
            .collect();
        scopes.dedup();
        let seal_key = store
            .setting_or_insert(SEAL_KEY_SETTING, &super::auth::new_secret())
            .await?;
        Ok(Some(Sso {
            provider: Provider::new(issuer, client_id, client_secret, &redirect, scopes)?,
            role_claim: args.role_claim.clone(),
            roles: parse_roles(&args.roles)?,
            default_role: parse_default_role(&args.default_role)?,
            seal_key: seal_key.into_bytes(),
            recheck: args.recheck,
        }))
    }

    /// The role `claim` (the ID token's role claim) maps to: the highest matched, else the
    /// default (`None`: refused).
    fn role_of(&self, claim: Option<&Value>) -> Option<Role> {
        role_of(claim, &self.roles).or(self.default_role)
    }
}

/// `value=role,…` (`CENTRAL_OIDC_ROLES`).
fn parse_roles(text: &str) -> anyhow::Result<Vec<(String, Role)>> {
    text.split(',')
        .map(str::trim)
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (value, role) = pair.rsplit_once('=').ok_or_else(|| {
                anyhow::anyhow!("CENTRAL_OIDC_ROLES: `{pair}` is not `value=role`")
            })?;
            let role = Role::parse(role.trim()).ok_or_else(|| {
                anyhow::anyhow!(
                    "CENTRAL_OIDC_ROLES: `{role}` is not a role (viewer, editor or admin)"
                )
            })?;
            Ok((value.trim().to_string(), role))
        })
        .collect()
}

fn parse_default_role(text: &str) -> anyhow::Result<Option<Role>> {
    match text.trim() {
        "none" => Ok(None),
        other => Role::parse(other).map(Some).ok_or_else(|| {
            anyhow::anyhow!(
                "CENTRAL_OIDC_DEFAULT_ROLE: `{other}` is not viewer, editor, admin or none"
            )
        }),
    }
}

/// The highest role among the claim's values (a string or a list of strings) that `roles` maps.
pub fn role_of(claim: Option<&Value>, roles: &[(String, Role)]) -> Option<Role> {
    let values: Vec<&str> = match claim {
        Some(Value::String(one)) => vec![one.as_str()],
        Some(Value::Array(many)) => many.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    roles
        .iter()
        .filter(|(value, _)| values.contains(&value.as_str()))
        .map(|(_, role)| *role)
        .max()
}

/// A pending sign-in, as sealed in its cookie.
#[derive(Debug, Clone, PartialEq)]
struct Pending {
    state: String,
    nonce: String,
    verifier: String,
    expires_at: i64,
}

fn mac(key: &[u8], text: &str) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(b"central-sso-1|");
    mac.update(text.as_bytes());
    mac.finalize().into_bytes().to_vec()
}

/// `state.nonce.verifier.expires_at.mac`: the three are base64url (no `.`), the MAC hex.
fn seal(key: &[u8], pending: &Pending) -> String {
    let text = format!(
        "{}.{}.{}.{}",
        pending.state, pending.nonce, pending.verifier, pending.expires_at
    );
    let mac = hex::encode(mac(key, &text));
    format!("{text}.{mac}")
}

/// The pending sign-in sealed in `text`, if central sealed it and it has not expired by `now`.
fn unseal(key: &[u8], text: &str, now: i64) -> Option<Pending> {
    let (sealed, tag) = text.rsplit_once('.')?;
    let tag = hex::decode(tag).ok()?;
    let mut check = Hmac::<Sha256>::new_from_slice(key).ok()?;
    check.update(b"central-sso-1|");
    check.update(sealed.as_bytes());
    // Constant-time comparison.
    check.verify_slice(&tag).ok()?;
    let mut parts = sealed.split('.');
    let pending = Pending {
        state: parts.next()?.to_string(),
        nonce: parts.next()?.to_string(),
        verifier: parts.next()?.to_string(),
        expires_at: parts.next()?.parse().ok()?,
    };
    (parts.next().is_none() && pending.expires_at > now).then_some(pending)
}

/// A name as a provider gave it, made fit for the users table: no control characters, at most
/// `MAX_NAME` characters, never empty.
fn clean_name(name: Option<&str>, email: &str) -> String {
    let cleaned: String = name
        .unwrap_or_default()
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_NAME)
        .collect();
    match cleaned.trim() {
        "" => email.chars().take(MAX_NAME).collect(),
        trimmed => trimmed.to_string(),
    }
}

impl App {
    /// Whether single sign-on is configured (the login page offers it).
    pub fn sso_enabled(&self) -> bool {
        self.credentials.sso.is_some()
    }

    /// The first leg: where to send the browser, and the pending sign-in for its cookie.
    pub async fn sso_start(&self) -> ServiceResult<SignIn> {
        let sso = self.credentials.sso.as_ref().ok_or_else(not_configured)?;
        let started = sso.provider.start().await.map_err(|e| {
            tracing::warn!("single sign-on cannot start: {e}");
            ServiceError::Unauthorized(SsoRefusal::Failed.to_string())
        })?;
        let expires_at = self
            .now_ms()
            .saturating_add(i64::try_from(PENDING_FOR.as_millis()).unwrap_or(i64::MAX));
        let pending = Pending {
            state: started.state,
            nonce: started.nonce,
            verifier: started.verifier,
            expires_at,
        };
        Ok(SignIn {
            url: started.url,
            pending: seal(&sso.seal_key, &pending),
        })
    }

    /// The second leg: checks the callback against the pending sign-in, trades the code, and
    /// opens a session for the user the ID token names. Returns the session cookie's secret.
    /// Every refusal is `401` (a failed authentication, counted against the client).
    pub async fn sso_finish(
        &self,
        pending: Option<&str>,
        state: &str,
        code: &str,
    ) -> ServiceResult<String> {
        let sso = self.credentials.sso.as_ref().ok_or_else(not_configured)?;
        let refused = |why: SsoRefusal| ServiceError::Unauthorized(why.to_string());
        let now = self.now_ms();
        let pending = pending
            .and_then(|text| unseal(&sso.seal_key, text, now))
            .ok_or_else(|| refused(SsoRefusal::NoPending))?;
        if !super::auth::constant_time_eq(&pending.state, state) {
            return Err(refused(SsoRefusal::WrongState));
        }
        let at = chrono::DateTime::from_timestamp_millis(now).unwrap_or_default();
        let identity = sso
            .provider
            .finish(code, &pending.verifier, &pending.nonce, at)
            .await
            .map_err(|e: ProviderError| {
                // The details (a wrong audience, a replayed code) are for the operator.
                tracing::warn!("single sign-on refused: {e}");
                refused(SsoRefusal::Failed)
            })?;
        let (identity, refresh) = identity;
        let user = self.sso_user(sso, &identity).await?;
        self.keep_link(sso, &user, refresh.as_deref()).await?;
        self.open_session(Some(&user.id)).await
    }

    /// The user `identity` is: found by subject, else an existing user with the same verified
    /// email (linked), else a new one; with the role the claims map to now. Each change is in
    /// the audit log, made by the user signing in.
    pub(super) async fn sso_user(
        &self,
        sso: &Sso,
        identity: &Identity,
    ) -> ServiceResult<domain::User> {
        const ATTEMPTS: usize = 5;
        let refused = |why: SsoRefusal| ServiceError::Unauthorized(why.to_string());
        let role = sso.role_of(identity.other.get(&sso.role_claim));
        let subject = format!("{}#{}", identity.issuer, identity.subject);
        let email = identity
            .email
            .as_deref()
            .and_then(|e| shared_proto::users::normalized_email(e).ok());
        for _ in 0..ATTEMPTS {
            let existing = match self.store.user_by_oidc_subject(&subject).await? {
                Some(user) => Some(user),
                None => match &email {
                    Some(email) => match self.store.user_by_email(email).await? {
                        Some(user) if user.oidc_subject.is_some() => {
                            return Err(refused(SsoRefusal::EmailTaken))
                        }
                        Some(_) if !identity.email_verified => {
                            return Err(refused(SsoRefusal::Unverified))
                        }
                        // Taking over an account that has its own proof (a password) or the
                        // most rights needs more than an email the provider vouches for.
                        Some(user) if user.password_hash.is_some() || user.role == Role::Admin => {
                            return Err(refused(SsoRefusal::LinkNeedsProof))
                        }
                        Some(user) => Some(user),
                        None => None,
                    },
                    None => None,
                },
            };
            let Some(role) = role else {
                // Mapped to no role (any more): refused, and everything the user held here
                // ends: sessions, keys (and those they made for others), and a password.
                if let Some(user) = &existing {
                    if user.oidc_subject.as_deref() == Some(subject.as_str()) {
                        self.end_access(user, "sso_removed").await?;
                    }
                }
                return Err(refused(SsoRefusal::NoRole));
            };
            let now = self.now_ms();
            let written = match existing {
                Some(before) => {
                    let mut user = before.clone();
                    user.oidc_subject = Some(subject.clone());
                    user.role = role;
                    if user.role == before.role && user.oidc_subject == before.oidc_subject {
                        return Ok(user);
                    }
                    user.updated_at = now.max(before.updated_at + 1);
                    // Mapped to less than they held: what they held ends (the session this
                    // sign-in opens carries the new role).
                    let demoted = user.role < before.role;
                    let ends = if demoted {
                        Ends::Access {
                            at: user.updated_at,
                        }
                    } else {
                        Ends::Nothing
                    };
                    match self.store.update_user(&user, before.updated_at, ends).await {
                        Ok(true) => Some((Some(before), user)),
                        Ok(false) => None,
                        // The provider took the last admin's admin group away: the role stays
                        // (someone must be able to manage users), the sign-in goes on.
                        Err(UserConflict::LastAdmin) => {
                            tracing::warn!(user = %before.id, "single sign-on maps the last admin to {role}; the admin role is kept");
                            if before.oidc_subject.as_deref() == Some(subject.as_str()) {
                                return Ok(before);
                            }
                            user.role = before.role;
                            match self
                                .store
                                .update_user(&user, before.updated_at, Ends::Nothing)
                                .await
                            {
                                Ok(true) => Some((Some(before), user)),
                                Ok(false) => None,
                                Err(e) => return Err(ServiceError::Internal(e.into())),
                            }
                        }
                        Err(e) => return Err(ServiceError::Internal(e.into())),
                    }
                }
                None => {
                    let email = email.clone().ok_or_else(|| refused(SsoRefusal::NoEmail))?;
                    let user = domain::User {
                        id: Uuid::new_v4().to_string(),
                        name: clean_name(identity.name.as_deref(), &email),
                        email,
                        role,
                        password_hash: None,
                        oidc_subject: Some(subject.clone()),
                        created_at: now,
                        updated_at: now,
                    };
                    match self.store.insert_user(&user).await {
                        Ok(()) => Some((None, user)),
                        // Made meanwhile (a second tab finishing the same first sign-in).
                        Err(UserConflict::Email) => None,
                        Err(e) => return Err(ServiceError::Internal(e.into())),
                    }
                }
            };
            // Read again and retry when someone changed the user meanwhile.
            let Some((before, user)) = written else {
                continue;
            };
            let principal = Principal {
                actor: Actor::User {
                    id: user.id.parse().unwrap_or_default(),
                    name: user.name.clone(),
                },
                role,
            };
            let view = |row: &domain::User| serde_json::to_value(super::users::user_of(row)).ok();
            let action = if before.is_none() { "create" } else { "update" };
            self.record_change(
                &principal,
                None,
                Subject {
                    kind: "users",
                    id: Some(user.id.clone()),
                    action: format!("sso_{action}"),
                },
                before.as_ref().and_then(view),
                view(&user),
            )
            .await;
            return Ok(user);
        }
        Err(ServiceError::Conflict(
            "your user kept changing while you signed in; try again".into(),
        ))
    }
}

fn not_configured() -> ServiceError {
    ServiceError::NotFound("single sign-on is not configured (CENTRAL_OIDC_ISSUER)".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_highest_mapped_role_wins_and_unmapped_values_give_none() {
        let roles = parse_roles("ops-admins=admin, ops=editor,readers=viewer").unwrap();
        assert_eq!(
            role_of(Some(&json!(["ops", "ops-admins"])), &roles),
            Some(Role::Admin)
        );
        assert_eq!(role_of(Some(&json!("ops")), &roles), Some(Role::Editor));
        assert_eq!(role_of(Some(&json!(["other"])), &roles), None);
        assert_eq!(role_of(Some(&json!(7)), &roles), None);
        assert_eq!(role_of(None, &roles), None);
        assert!(parse_roles("ops=owner").is_err());
        assert!(parse_roles("ops").is_err());
        assert_eq!(parse_default_role("none").unwrap(), None);
    }

    #[test]
    fn a_pending_sign_in_opens_only_sealed_by_central_and_in_time() {
        let key = b"k".to_vec();
        let pending = Pending {
            state: "s-1".into(),
            nonce: "n_2".into(),
            verifier: "v3".into(),
            expires_at: 1_000,
        };
        let sealed = seal(&key, &pending);
        assert_eq!(unseal(&key, &sealed, 999), Some(pending));
        assert_eq!(unseal(&key, &sealed, 1_000), None, "expired");
        assert_eq!(unseal(b"other", &sealed, 0), None, "another key");
        let tampered = sealed.replacen("s-1", "s-9", 1);
        assert_eq!(unseal(&key, &tampered, 0), None, "a changed state");
        assert_eq!(unseal(&key, "garbage", 0), None);
    }

    #[test]
    fn names_from_a_provider_are_made_fit() {
        assert_eq!(clean_name(Some("Ana\u{7}\n"), "a@x.io"), "Ana");
        assert_eq!(clean_name(Some("  "), "a@x.io"), "a@x.io");
        assert_eq!(clean_name(None, "a@x.io"), "a@x.io");
        assert_eq!(clean_name(Some(&"x".repeat(500)), "a@x.io").len(), MAX_NAME);
    }
}
