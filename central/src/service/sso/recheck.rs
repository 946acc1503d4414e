//! Checking linked users with the identity provider between their sign-ins, and ending what
//! a person held here when the provider no longer lets them in. Each sign-in keeps the refresh
//! token the provider gave (`store::sso_links`); every `CENTRAL_OIDC_RECHECK` a linked user is
//! due, and `duties::sso_recheck` presents it (`Provider::recheck`): `invalid_grant` ends their
//! access, an answer with an ID token goes through the same rules as a sign-in
//! (`sso_user`: a role mapped to none ends access, a lower one ends what they held). A provider
//! that cannot be reached is asked again at the next interval, and nothing ends for it.
//!
//! Cost: a round reads only the links due (indexed by `checked_at`), at most `PER_ROUND`, and
//! makes one request to the provider per link.

use super::provider::Recheck;
use super::{Sso, SsoRefusal};
use crate::domain;
use crate::service::access::{Actor, Principal};
use crate::service::audit::Subject;
use crate::service::error::{ServiceError, ServiceResult};
use crate::service::App;
use crate::store::Ends;

/// The most links one round checks; the rest wait for the next round.
pub const PER_ROUND: u32 = 100;

impl App {
    /// How often `duties::sso_recheck` looks for links due; `None` without single sign-on or
    /// with the check off.
    pub fn sso_recheck_every(&self) -> Option<std::time::Duration> {
        let sso = self.credentials.sso.as_ref()?;
        (!sso.recheck.is_zero()).then(|| {
            (sso.recheck / 4).clamp(
                std::time::Duration::from_secs(1),
                std::time::Duration::from_secs(60),
            )
        })
    }

    /// Keeps what a sign-in needs for later checks: the refresh token the provider gave, if
    /// any and if checks are on.
    pub(super) async fn keep_link(
        &self,
        sso: &Sso,
        user: &domain::User,
        refresh: Option<&str>,
    ) -> ServiceResult<()> {
        if sso.recheck.is_zero() {
            return Ok(());
        }
        match refresh {
            Some(refresh) => {
                self.store
                    .keep_sso_link(&user.id, refresh, self.now_ms())
                    .await?
            }
            None => tracing::warn!(
                user = %user.id,
                "the identity provider gave no refresh token: this user cannot be checked \
                 between sign-ins (ask for `offline_access` in CENTRAL_OIDC_SCOPES)"
            ),
        }
        Ok(())
    }

    /// One round: each linked user due is checked with the provider. Returns how many were.
    pub async fn recheck_sso_links(&self) -> anyhow::Result<usize> {
        let Some(sso) = self.credentials.sso.as_ref() else {
            return Ok(0);
        };
        let now = self.now_ms();
        let interval = i64::try_from(sso.recheck.as_millis()).unwrap_or(i64::MAX);
        let due = self
            .store
            .due_sso_links(now.saturating_sub(interval), PER_ROUND)
            .await?;
        let count = due.len();
        for (user_id, refresh) in due {
            // One link that cannot be checked is marked checked and logged: it must not stop
            // the round, nor come first in every round after.
            if let Err(e) = self.recheck_one(sso, &user_id, &refresh).await {
                tracing::warn!(user = %user_id, "checking a linked user failed: {e:#}");
                self.store.checked_sso_link(&user_id, now).await?;
            }
        }
        Ok(count)
    }

    async fn recheck_one(
        &self,
        sso: &Sso,
        user_id: &str,
        refresh_before: &str,
    ) -> anyhow::Result<()> {
        let now = self.now_ms();
        let Some(user) = self.store.user(user_id).await? else {
            return self.store.forget_sso_link(user_id).await;
        };
        let at = chrono::DateTime::from_timestamp_millis(now).unwrap_or_default();
        match sso.provider.recheck(refresh_before, at).await {
            Ok(Recheck::Gone(why)) => {
                tracing::info!(user = %user.id, "the identity provider no longer lets this user in ({why}): their access ends");
                self.end_access(&user, "sso_removed").await?;
                self.store.forget_sso_link(&user.id).await?;
            }
            Ok(Recheck::Still { identity, refresh }) => {
                if let Some(rotated) = &refresh {
                    // Compare and set: a sign-in during the check stored a token of its own,
                    // as good as this one, and it stays.
                    self.store
                        .rotate_sso_link(&user.id, refresh_before, rotated, now)
                        .await?;
                } else {
                    self.store.checked_sso_link(&user.id, now).await?;
                }
                let Some(identity) = identity else {
                    return Ok(());
                };
                let subject = format!("{}#{}", identity.issuer, identity.subject);
                if user.oidc_subject.as_deref() != Some(subject.as_str()) {
                    tracing::warn!(user = %user.id, "a check named another subject than the user's link; nothing changed");
                    return Ok(());
                }
                match self.sso_user(sso, &identity).await {
                    Ok(_) => {}
                    // `sso_user` ended their access already.
                    Err(ServiceError::Unauthorized(why))
                        if why == SsoRefusal::NoRole.to_string() => {}
                    Err(e) => tracing::warn!(user = %user.id, "checking a linked user: {e}"),
                }
            }
            Err(e) => {
                tracing::warn!(user = %user.id, "the identity provider could not be asked about a linked user ({e}); asked again next time");
                self.store.checked_sso_link(&user.id, now).await?;
            }
        }
        Ok(())
    }

    /// Ends everything `user` held here: sessions, API keys (and those they made for others)
    /// and their password, so that no way in is left; recorded in the audit log as `action`
    /// on the user, by the user (the provider's word, carried by their own sign-in).
    pub(crate) async fn end_access(&self, user: &domain::User, action: &str) -> ServiceResult<()> {
        const ATTEMPTS: usize = 5;
        for _ in 0..ATTEMPTS {
            let Some(before) = self.store.user(&user.id).await? else {
                return Ok(());
            };
            let mut after = before.clone();
            after.password_hash = None;
            after.updated_at = self.now_ms().max(before.updated_at + 1);
            let ends = Ends::Access {
                at: after.updated_at,
            };
            match self
                .store
                .update_user(&after, before.updated_at, ends)
                .await
            {
                Ok(true) => {
                    // Nothing left to check: the person comes back only by signing in.
                    self.store.forget_sso_link(&after.id).await?;
                    let view = |row: &domain::User| {
                        serde_json::to_value(crate::service::users::user_of(row)).ok()
                    };
                    let principal = Principal {
                        actor: Actor::User {
                            id: after.id.parse().unwrap_or_default(),
                            name: after.name.clone(),
                        },
                        role: after.role,
                    };
                    self.record_change(
                        &principal,
                        None,
                        Subject {
                            kind: "users",
                            id: Some(after.id.clone()),
                            action: action.into(),
                        },
                        view(&before),
                        view(&after),
                    )
                    .await;
                    return Ok(());
                }
                Ok(false) => continue,
                Err(e) => return Err(ServiceError::Internal(e.into())),
            }
        }
        Err(ServiceError::Conflict(format!(
            "user {} kept changing while their access was ended; try again",
            user.id
        )))
    }
}
