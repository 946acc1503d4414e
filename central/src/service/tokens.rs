//! Registration tokens: created by operators, spent by pollers registering.

use shared_proto::poller_api::default_capabilities;
use shared_proto::settings_api::{
    CreateRegistrationToken, Page, RegistrationTokenView, RotateRegistrationToken, MAX_TOKEN_USES,
};
use uuid::Uuid;

use std::sync::Arc;

use super::clock::Clock;
use super::hashing::{Hashing, Lane};
use super::{auth, stored_id, time_of, App};
use crate::domain::RegistrationToken;
use crate::service::error::{ServiceError, ServiceResult};
use crate::store::{Cursor, Paged, Store};

/// The id of the registration token that `CENTRAL_REGISTRATION_TOKEN` stands for.
pub const ENVIRONMENT_TOKEN_ID: Uuid = Uuid::from_u128(0x0000_0000_0000_4000_8000_0000_0000_e0e0);
const ENVIRONMENT_TOKEN_NAME: &str = "CENTRAL_REGISTRATION_TOKEN";

/// Makes the stored environment token agree with `CENTRAL_REGISTRATION_TOKEN` at start: a new
/// value replaces the stored one (uses counted afresh, the old value refused from now on); the
/// same value leaves it as it is (so an operator's revocation holds until the value changes);
/// no value revokes it. Every replica does this with the same value, and agrees.
pub(super) async fn sync_environment_token(
    store: &Store,
    secret: Option<&str>,
    now: i64,
) -> anyhow::Result<()> {
    let id = ENVIRONMENT_TOKEN_ID.to_string();
    let stored = store.registration_token(&id).await?;
    let Some(secret) = secret else {
        if stored.is_some_and(|row| row.revoked_at.is_none()) {
            store.revoke_registration_token(&id, now).await?;
            tracing::info!(
                "CENTRAL_REGISTRATION_TOKEN is unset: its registration token is revoked"
            );
        }
        return Ok(());
    };
    anyhow::ensure!(
        secret.chars().count() >= 16 && !secret.starts_with(auth::REGISTRATION_PREFIX),
        "CENTRAL_REGISTRATION_TOKEN must be at least 16 characters and must not start with `{}_` \
         (try `openssl rand -hex 32`)",
        auth::REGISTRATION_PREFIX
    );
    // Before the app (and its shared bound) exists: this start's own.
    let hashing = super::hashing::Hashing::new();
    if let Some(row) = &stored {
        if hashing
            .verify(Lane::Anyone, secret.to_string(), row.secret_hash.clone())
            .await?
        {
            return Ok(());
        }
    }
    store
        .replace_registration_token(&RegistrationToken {
            id,
            name: ENVIRONMENT_TOKEN_NAME.into(),
            secret_hash: hashing.hash(secret.to_string()).await?,
            region: None,
            capabilities: None,
            created_at: now,
            expires_at: None,
            max_uses: i64::from(MAX_TOKEN_USES),
            uses: 0,
            revoked_at: None,
            previous_secret_hash: None,
            previous_valid_until: None,
        })
        .await?;
    tracing::info!(
        replaced = stored.is_some(),
        "registration token from CENTRAL_REGISTRATION_TOKEN stored"
    );
    Ok(())
}

/// Registration tokens: the one-time secrets agents register with, their limits (region, capabilities), rotation and revocation.
#[derive(Clone)]
pub struct RegistrationTokens {
    store: Arc<Store>,
    clock: Clock,
    hashing: Hashing,
}

impl App {
    /// The registration_tokens service, on this central's parts.
    pub fn registration_tokens(&self) -> RegistrationTokens {
        RegistrationTokens {
            store: self.store.clone(),
            clock: self.clock.clone(),
            hashing: self.credentials.hashing.clone(),
        }
    }
}

impl axum::extract::FromRef<std::sync::Arc<App>> for RegistrationTokens {
    fn from_ref(app: &std::sync::Arc<App>) -> Self {
        app.registration_tokens()
    }
}

impl RegistrationTokens {
    fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }
    /// Creates a token; the answer carries the secret, which is never shown again.
    pub async fn create_registration_token(
        &self,
        request: CreateRegistrationToken,
    ) -> ServiceResult<RegistrationTokenView> {
        let expires_in = request.validate()?;
        let id = Uuid::new_v4();
        let secret = auth::new_secret();
        let now = self.now_ms();
        let row = RegistrationToken {
            id: id.to_string(),
            name: request.name.trim().to_string(),
            secret_hash: self.hashing.hash(secret.clone()).await?,
            region: request.region,
            capabilities: request.capabilities,
            created_at: now,
            expires_at: expires_in.map(|d| now.saturating_add(d.as_millis() as i64)),
            max_uses: i64::from(request.max_uses.unwrap_or(1)),
            uses: 0,
            revoked_at: None,
            previous_secret_hash: None,
            previous_valid_until: None,
        };
        self.store.insert_registration_token(&row).await?;
        let mut view = registration_view(&row, now)?;
        view.token = Some(auth::format_token(auth::REGISTRATION_PREFIX, id, &secret));
        Ok(view)
    }

    pub async fn list_registration_tokens(
        &self,
        after: &Cursor,
        limit: u32,
    ) -> ServiceResult<Page<RegistrationTokenView>> {
        let tokens = self.store.list_registration_tokens(after, limit).await?;
        let now = self.now_ms();
        Ok(page_of(tokens, |token| registration_view(token, now))?)
    }

    pub async fn revoke_registration_token(&self, id: Uuid) -> ServiceResult<()> {
        if !self
            .store
            .revoke_registration_token(&id.to_string(), self.now_ms())
            .await?
        {
            return Err(ServiceError::NotFound(format!(
                "no registration token with id {id}"
            )));
        }
        Ok(())
    }

    /// A new secret for the same token (same id, uses and limits). The current secret keeps
    /// working for the requested overlap (none: it stops at once); any older one stops now.
    /// The answer carries the new secret, which is never shown again.
    pub async fn rotate_registration_token(
        &self,
        id: Uuid,
        request: RotateRegistrationToken,
    ) -> ServiceResult<RegistrationTokenView> {
        let overlap = request.validate()?;
        let old_valid_until =
            (!overlap.is_zero()).then(|| self.now_ms().saturating_add(overlap.as_millis() as i64));
        let secret = auth::new_secret();
        let hash = self.hashing.hash(secret.clone()).await?;
        if !self
            .store
            .rotate_registration_token(&id.to_string(), &hash, old_valid_until)
            .await?
        {
            return Err(ServiceError::NotFound(format!(
                "no usable registration token with id {id} (revoked tokens cannot be rotated)"
            )));
        }
        let row = self
            .store
            .registration_token(&id.to_string())
            .await?
            .ok_or_else(|| ServiceError::NotFound(format!("no registration token with id {id}")))?;
        let mut view = registration_view(&row, self.now_ms())?;
        view.token = Some(auth::format_token(auth::REGISTRATION_PREFIX, id, &secret));
        Ok(view)
    }

    /// Checks a presented registration token and what the poller asks for against its limits,
    /// then counts one use of it: a poller refused by a limit has not spent a use.
    pub(super) async fn spend_registration_token(
        &self,
        token: &str,
        asked: &Enrolment,
    ) -> ServiceResult<(RegistrationToken, Enrolment)> {
        let invalid = || {
            ServiceError::Unauthorized(
                "registration token is not valid; create one with POST /api/v1/registration-tokens"
                    .into(),
            )
        };
        let (id, secret) = match auth::parse_token(auth::REGISTRATION_PREFIX, token) {
            Some(parsed) => parsed,
            // Not of the form central gives out: perhaps CENTRAL_REGISTRATION_TOKEN, which is
            // any string the operator chose (never one starting with the prefix).
            None if !token.starts_with(auth::REGISTRATION_PREFIX) => {
                (ENVIRONMENT_TOKEN_ID, token.to_string())
            }
            None => return Err(invalid()),
        };
        let row = self
            .store
            .registration_token(&id.to_string())
            .await?
            .ok_or_else(invalid)?;
        // Cheap checks first: a token that could not be spent anyway costs no argon2 run (an
        // unauthenticated loop would otherwise buy 19 MiB and two passes per request). Said as
        // "not valid", since the caller has not shown it knows the secret.
        let now = self.now_ms();
        let spendable = row.revoked_at.is_none()
            && row.uses < row.max_uses
            && row.expires_at.is_none_or(|at| at > now);
        if !spendable || !self.registration_secret_matches(&row, secret).await? {
            return Err(invalid());
        }
        let granted = asked.within(&row)?;
        if !self
            .store
            .use_registration_token(&row.id, self.now_ms())
            .await?
        {
            return Err(ServiceError::Unauthorized(
                "registration token is expired, revoked or used up; create a new one".into(),
            ));
        }
        Ok((row, granted))
    }
}

impl RegistrationTokens {
    /// The newest secret, or the one before it while its overlap lasts.
    async fn registration_secret_matches(
        &self,
        row: &RegistrationToken,
        secret: String,
    ) -> ServiceResult<bool> {
        if self
            .hashing
            .verify(Lane::Anyone, secret.clone(), row.secret_hash.clone())
            .await?
        {
            return Ok(true);
        }
        match (&row.previous_secret_hash, row.previous_valid_until) {
            (Some(previous), Some(until)) if self.now_ms() < until => {
                let matched = self
                    .hashing
                    .verify(Lane::Anyone, secret, previous.clone())
                    .await?;
                if matched {
                    tracing::info!(
                        token = %row.id,
                        "a poller registered with the previous secret of a rotated token"
                    );
                }
                Ok(matched)
            }
            _ => Ok(false),
        }
    }
}

/// Where a poller runs and what it may do: what it asks for at registration, and what its
/// registration token grants.
#[derive(Debug, Clone, PartialEq)]
pub struct Enrolment {
    pub region: Option<String>,
    /// Empty when asked: every built-in check kind (or the token's list, when it has one).
    pub capabilities: Vec<String>,
}

impl Enrolment {
    /// What `row` grants of this request: its region and capabilities are limits, not
    /// defaults, so that a token handed to one region's operators enrols nothing elsewhere.
    fn within(&self, row: &RegistrationToken) -> ServiceResult<Enrolment> {
        let region = match (&row.region, &self.region) {
            (Some(allowed), Some(asked)) if allowed != asked => {
                return Err(ServiceError::Refused {
                    code: "region_not_allowed",
                    message: format!(
                        "`region`: this registration token enrols pollers in region \
                         `{allowed}` only, not `{asked}`"
                    ),
                })
            }
            (allowed, asked) => asked.clone().or_else(|| allowed.clone()),
        };
        let limit = row.capabilities.clone();
        let capabilities = match (&limit, self.capabilities.is_empty()) {
            (None, true) => default_capabilities(),
            (Some(limit), true) => limit.clone(),
            (_, false) => self.capabilities.clone(),
        };
        if let Some(limit) = &limit {
            let outside: Vec<&str> = capabilities
                .iter()
                .filter(|c| !limit.contains(c))
                .map(String::as_str)
                .collect();
            if !outside.is_empty() {
                return Err(ServiceError::Refused {
                    code: "capability_not_allowed",
                    message: format!(
                        "`capabilities`: this registration token allows {} only, not {}",
                        limit.join(", "),
                        outside.join(", ")
                    ),
                });
            }
        }
        Ok(Enrolment {
            region,
            capabilities,
        })
    }
}

/// A token as the API shows it at `now` (never its secret).
fn registration_view(row: &RegistrationToken, now: i64) -> anyhow::Result<RegistrationTokenView> {
    Ok(RegistrationTokenView {
        id: stored_id(&row.id)?,
        name: row.name.clone(),
        token: None,
        region: row.region.clone(),
        capabilities: row.capabilities.clone(),
        created_at: time_of(row.created_at),
        expires_at: row.expires_at.map(time_of),
        max_uses: row.max_uses.try_into().unwrap_or(u32::MAX),
        uses: row.uses.try_into().unwrap_or(u32::MAX),
        revoked: row.revoked_at.is_some(),
        previous_secret_valid_until: row
            .previous_valid_until
            .filter(|until| *until > now)
            .map(time_of),
    })
}

/// The API's page of a page the store read: its next cursor is the store's, decided by the rows
/// read (`store::Paged`).
pub(super) fn page_of<T, V>(
    paged: Paged<T>,
    view: impl Fn(&T) -> anyhow::Result<V>,
) -> anyhow::Result<Page<V>> {
    Ok(Page {
        items: paged
            .items
            .iter()
            .map(view)
            .collect::<anyhow::Result<_>>()?,
        next_cursor: paged.next.map(|c| c.encode()),
    })
}

/// Builds a page from rows fetched with `limit`: a full page gets a cursor to the next one.
pub(super) fn page<R, T>(
    rows: Vec<R>,
    limit: u32,
    cursor_of: impl Fn(&R) -> Cursor,
    view: impl Fn(&R) -> anyhow::Result<T>,
) -> anyhow::Result<Page<T>> {
    let next_cursor = (rows.len() == limit as usize)
        .then(|| rows.last().map(|r| cursor_of(r).encode()))
        .flatten();
    Ok(Page {
        items: rows.iter().map(view).collect::<anyhow::Result<_>>()?,
        next_cursor,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(region: Option<&str>, capabilities: Option<&str>) -> RegistrationToken {
        RegistrationToken {
            id: Uuid::nil().to_string(),
            name: "t".into(),
            secret_hash: String::new(),
            region: region.map(str::to_string),
            capabilities: capabilities.map(crate::store::split_list),
            created_at: 0,
            expires_at: None,
            max_uses: 1,
            uses: 0,
            revoked_at: None,
            previous_secret_hash: None,
            previous_valid_until: None,
        }
    }

    fn asked(region: Option<&str>, capabilities: &[&str]) -> Enrolment {
        Enrolment {
            region: region.map(str::to_string),
            capabilities: capabilities.iter().map(|c| c.to_string()).collect(),
        }
    }

    fn code(result: ServiceResult<Enrolment>) -> &'static str {
        match result {
            Err(ServiceError::Refused { code, .. }) => code,
            other => panic!("refused expected, got {other:?}"),
        }
    }

    #[test]
    fn a_tokens_region_is_given_and_no_other_is_allowed() {
        let eu = token(Some("eu"), None);
        assert_eq!(
            asked(None, &[]).within(&eu).unwrap().region.as_deref(),
            Some("eu")
        );
        assert_eq!(
            asked(Some("eu"), &[])
                .within(&eu)
                .unwrap()
                .region
                .as_deref(),
            Some("eu")
        );
        assert_eq!(
            code(asked(Some("us"), &[]).within(&eu)),
            "region_not_allowed"
        );
        let anywhere = token(None, None);
        assert_eq!(
            asked(Some("us"), &[])
                .within(&anywhere)
                .unwrap()
                .region
                .as_deref(),
            Some("us")
        );
        assert_eq!(asked(None, &[]).within(&anywhere).unwrap().region, None);
    }

    #[test]
    fn a_tokens_capabilities_are_the_most_a_poller_may_ask_for() {
        let http_tcp = token(None, Some("http,tcp"));
        assert_eq!(
            asked(None, &[]).within(&http_tcp).unwrap().capabilities,
            ["http", "tcp"],
            "none asked: the token's list"
        );
        assert_eq!(
            asked(None, &["tcp"])
                .within(&http_tcp)
                .unwrap()
                .capabilities,
            ["tcp"]
        );
        assert_eq!(
            code(asked(None, &["http", "icmp"]).within(&http_tcp)),
            "capability_not_allowed"
        );
        let any = token(None, None);
        assert_eq!(
            asked(None, &[]).within(&any).unwrap().capabilities,
            default_capabilities()
        );
        assert_eq!(
            asked(None, &["internal-net"])
                .within(&any)
                .unwrap()
                .capabilities,
            ["internal-net"]
        );
    }

    /// Whether a rotated token's previous secret still works is read at the time the view is
    /// made for (the app's clock), not the wall clock.
    #[test]
    fn the_previous_secret_is_shown_valid_until_its_end_on_the_apps_clock() {
        let rotated = RegistrationToken {
            previous_secret_hash: Some("old".into()),
            previous_valid_until: Some(1_000),
            ..token(None, None)
        };
        let shown = |now| {
            registration_view(&rotated, now)
                .unwrap()
                .previous_secret_valid_until
        };
        assert_eq!(shown(999), Some(time_of(1_000)));
        assert_eq!(shown(1_000), None);
    }
}
