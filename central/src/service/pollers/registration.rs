//! Enrolment and credentials: registering with a registration token (within its limits),
//! trading refresh tokens, and authenticating each poller call. Owns no liveness or placement
//! rules; heartbeats are `heartbeat`'s.

use shared_proto::poller_api::{RegisterRequest, RegisterResponse, TokenRequest, TokenResponse};
use uuid::Uuid;

use super::super::hashing::Lane;
use super::super::tokens::Enrolment;
use super::super::{auth, time_of, App};
use crate::domain::Poller;
use crate::domain::{RefreshToken, UnusedRevocation};
use crate::service::error::{ServiceError, ServiceResult};
use crate::store::Reach;

/// Refresh tokens outlive any outage an agent should ride out while still holding one.
const REFRESH_TTL_MS: i64 = 90 * 24 * 3600 * 1000;
/// How long a spent refresh token may be presented again as a retry (see `refresh_poller_token`).
const REFRESH_RETRY_GRACE_MS: i64 = 60_000;

impl App {
    pub async fn register_poller(
        &self,
        request: RegisterRequest,
    ) -> ServiceResult<RegisterResponse> {
        request.validate()?;
        let asked = Enrolment {
            region: request.region,
            capabilities: request.capabilities,
        };
        let (token, granted) = self
            .registration_tokens()
            .spend_registration_token(&request.registration_token, &asked)
            .await?;
        let id = Uuid::new_v4();
        let now = self.now_ms();
        let row = Poller {
            id: id.to_string(),
            name: request.name.trim().to_string(),
            alias: None,
            region: granted.region,
            datacenter: request.datacenter,
            capabilities: granted.capabilities,
            capability_limit: token.capabilities.clone(),
            version: Some(request.version),
            enabled: true,
            registration_token_id: Some(token.id),
            created_at: now,
            // Registering counts as the first heartbeat, so the poller gets work at once.
            last_heartbeat_at: Some(now),
            last_upload_at: None,
            queue_depth: 0,
            oldest_queued_at: None,
            dropped_results: 0,
            held_results: 0,
            assignment_version: None,
            deleted_at: None,
            scheduler_health: None,
            online_since: Some(now),
            status: None,
            status_since: None,
            last_error: None,
            last_error_at: None,
        };
        self.store.insert_poller(&row).await?;
        self.metrics.registrations.inc();
        tracing::info!(poller_id = %id, name = %row.name, region = ?row.region, "poller registered");
        let (refresh_token, _) = self
            .issue_refresh_token(&row.id, &Uuid::new_v4().to_string())
            .await?;
        let (access_token, access_expires_at) = self.issue_access_token(id, time_of(now))?;
        self.queue_placement(std::slice::from_ref(&row.id), Reach::Could)
            .await?;
        Ok(RegisterResponse {
            poller_id: id,
            access_token,
            access_expires_at,
            refresh_token,
        })
    }

    async fn issue_refresh_token(
        &self,
        poller_id: &str,
        family_id: &str,
    ) -> ServiceResult<(String, String)> {
        let id = Uuid::new_v4();
        let secret = auth::new_secret();
        let now = self.now_ms();
        let row = RefreshToken {
            id: id.to_string(),
            poller_id: poller_id.to_string(),
            family_id: family_id.to_string(),
            secret_hash: auth::hash_made_secret(&secret),
            expires_at: now + REFRESH_TTL_MS,
            spent_at: None,
            revoked_at: None,
            superseded: false,
            replaced_by: None,
        };
        self.store.insert_refresh_token(&row, now).await?;
        Ok((
            auth::format_token(auth::REFRESH_PREFIX, id, &secret),
            row.id,
        ))
    }

    /// Trades a refresh token for a new pair. Each refresh token works once (RFC 9700
    /// §4.14.2): presenting a spent one revokes its whole family, because only a thief or a
    /// replay would do that; except within a short grace, where an agent whose answer was lost
    /// retries and gets a fresh successor, the unused one being revoked as `superseded`. Whoever
    /// later presents a superseded token held the lost answer, so one of the two presenters was
    /// a replayer: that too revokes the family, and the legitimate agent's next refresh tells it.
    pub async fn refresh_poller_token(
        &self,
        request: TokenRequest,
    ) -> ServiceResult<TokenResponse> {
        let invalid = || {
            ServiceError::Unauthorized("refresh token is not valid; re-register the poller".into())
        };
        let (id, secret) =
            auth::parse_token(auth::REFRESH_PREFIX, &request.refresh_token).ok_or_else(invalid)?;
        let row = self
            .store
            .refresh_token(&id.to_string())
            .await?
            .ok_or_else(invalid)?;
        let valid = match auth::verify_made_secret(&secret, &row.secret_hash) {
            Some(valid) => valid,
            // A row an older central hashed with argon2 (until its single use or 90 days).
            None => {
                self.credentials
                    .hashing
                    .verify(Lane::Enrolled, secret, row.secret_hash.clone())
                    .await?
            }
        };
        if !valid {
            return Err(invalid());
        }
        let now = self.now_ms();
        // A deleted or disabled poller is told so first (its agent stops or pauses its checks
        // on that answer), and before its token is spent, so that a disabled one can refresh
        // normally once an operator enables it again.
        let poller = self.live_poller(&row.poller_id).await?;
        if row.superseded {
            tracing::warn!(
                poller_id = %row.poller_id,
                "a superseded refresh token was presented: one of two holders replayed a token \
                 (suspected theft); family revoked"
            );
            return Err(self.revoke_family(&row, now).await?);
        }
        if row.revoked_at.is_some() || row.expires_at <= now {
            return Err(ServiceError::Unauthorized(
                "refresh token is revoked or expired; re-register the poller with a new registration token".into(),
            ));
        }
        let row = if row.spent_at.is_none() {
            let (refresh_token, successor) =
                self.issue_refresh_token(&poller.id, &row.family_id).await?;
            if self
                .store
                .spend_refresh_token(&row.id, now, &successor)
                .await?
            {
                return self.token_pair(&poller, refresh_token, now);
            }
            // Another request spent it at the same moment: nobody will ever see this
            // successor. Read the token again and treat this one as a retry after it.
            self.store
                .revoke_unused_refresh_token(&successor, now, UnusedRevocation::Orphaned)
                .await?;
            self.store
                .refresh_token(&row.id)
                .await?
                .ok_or_else(invalid)?
        } else {
            row
        };
        self.refresh_again(row, &poller, now).await
    }

    /// A spent token presented again: a retry after a lost answer within the grace (its
    /// successor unused: that one is superseded and a new one issued), else reuse.
    async fn refresh_again(
        &self,
        row: RefreshToken,
        poller: &Poller,
        now: i64,
    ) -> ServiceResult<TokenResponse> {
        let within_grace = row
            .spent_at
            .is_some_and(|at| now - at <= REFRESH_RETRY_GRACE_MS);
        let superseded = match (&row.replaced_by, within_grace) {
            (Some(successor), true) => {
                self.store
                    .revoke_unused_refresh_token(successor, now, UnusedRevocation::Superseded)
                    .await?
            }
            _ => false,
        };
        if !superseded {
            tracing::warn!(poller_id = %row.poller_id, "spent refresh token presented again; family revoked");
            return Err(self.revoke_family(&row, now).await?);
        }
        tracing::info!(poller_id = %row.poller_id, "refresh retried after a lost answer; successor superseded");
        let (refresh_token, successor) =
            self.issue_refresh_token(&poller.id, &row.family_id).await?;
        self.store
            .set_refresh_successor(&row.id, &successor)
            .await?;
        self.token_pair(poller, refresh_token, now)
    }

    /// Revokes every refresh token descended from the same registration; the error to answer.
    async fn revoke_family(&self, row: &RefreshToken, now: i64) -> ServiceResult<ServiceError> {
        self.store
            .revoke_refresh_family(&row.family_id, now)
            .await?;
        Ok(ServiceError::Unauthorized(
            "refresh token was already used, so every token of this poller is revoked; \
             re-register the poller with a new registration token"
                .into(),
        ))
    }

    /// A new access token beside `refresh_token`.
    fn token_pair(
        &self,
        poller: &Poller,
        refresh_token: String,
        now: i64,
    ) -> ServiceResult<TokenResponse> {
        let poller_id = Uuid::try_parse(&poller.id).map_err(anyhow::Error::from)?;
        let (access_token, access_expires_at) = self.issue_access_token(poller_id, time_of(now))?;
        Ok(TokenResponse {
            access_token,
            access_expires_at,
            refresh_token,
        })
    }

    /// The poller behind an access token; a deleted or disabled poller is refused at once,
    /// not when its token expires.
    pub async fn authenticate_poller(&self, access_token: &str) -> ServiceResult<Poller> {
        let id = self
            .verify_access_token(access_token)
            .await
            .map_err(ServiceError::Unauthorized)?;
        self.live_poller(&id.to_string()).await
    }

    async fn live_poller(&self, id: &str) -> ServiceResult<Poller> {
        let poller = self.store.poller(id).await?.ok_or_else(|| {
            ServiceError::PollerDeleted(
                "this poller was deleted, so it must stop checking; to bring it back, register it \
                 again with a new registration token"
                    .into(),
            )
        })?;
        if !poller.enabled {
            return Err(ServiceError::PollerDisabled(
                "this poller is disabled, so it must pause its checks; an operator can enable it \
                 with PATCH /api/v1/pollers/{id}"
                    .into(),
            ));
        }
        Ok(poller)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::clock::Clock;
    use serde_json::json;

    /// A refresh token is stored as its SHA-256 and traded without an argon2 run; one an
    /// older central stored as argon2 still trades (for a SHA-256 successor).
    #[tokio::test]
    async fn refresh_tokens_are_stored_as_sha256_and_older_argon2_rows_still_trade() {
        let dir = tempfile::tempdir().unwrap();
        let args = crate::config::ServeArgs::with_sqlite_in(dir.path());
        let (clock, _handle) = Clock::manual(1_000_000);
        let app = App::open_with_clock(&args, clock).await.unwrap();
        let token = app
            .registration_tokens()
            .create_registration_token(
                serde_json::from_value(json!({"name": "t", "max_uses": 2})).unwrap(),
            )
            .await
            .unwrap()
            .token
            .unwrap();
        let registered = app
            .register_poller(
                serde_json::from_value(json!({
                    "registration_token": token, "name": "p", "version": "1",
                }))
                .unwrap(),
            )
            .await
            .unwrap();
        let stored_hash = |refresh: &str| {
            let (id, secret) = auth::parse_token(auth::REFRESH_PREFIX, refresh).unwrap();
            let app = &app;
            async move {
                let row = app.store.refresh_token(&id.to_string()).await.unwrap();
                (row.unwrap().secret_hash, secret)
            }
        };
        let (hash, secret) = stored_hash(&registered.refresh_token).await;
        assert_eq!(hash, format!("sha256:{}", auth::sha256_hex(&secret)));
        let traded = app
            .refresh_poller_token(TokenRequest {
                refresh_token: registered.refresh_token.clone(),
            })
            .await
            .unwrap();
        assert!(stored_hash(&traded.refresh_token)
            .await
            .0
            .starts_with("sha256:"));

        // A wrong secret for a real id is refused.
        let (id, _) = auth::parse_token(auth::REFRESH_PREFIX, &traded.refresh_token).unwrap();
        let forged = auth::format_token(auth::REFRESH_PREFIX, id, &auth::new_secret());
        let refused = app
            .refresh_poller_token(TokenRequest {
                refresh_token: forged,
            })
            .await
            .unwrap_err();
        assert!(
            matches!(refused, ServiceError::Unauthorized(_)),
            "{refused}"
        );

        // A row written by a central that hashed refresh tokens with argon2.
        let secret = auth::new_secret();
        let old = RefreshToken {
            id: Uuid::new_v4().to_string(),
            poller_id: registered.poller_id.to_string(),
            family_id: Uuid::new_v4().to_string(),
            secret_hash: auth::hash_secret(&secret, &mut auth::Argon2Memory::new()).unwrap(),
            expires_at: app.now_ms() + REFRESH_TTL_MS,
            spent_at: None,
            revoked_at: None,
            superseded: false,
            replaced_by: None,
        };
        app.store
            .insert_refresh_token(&old, app.now_ms())
            .await
            .unwrap();
        let older = auth::format_token(
            auth::REFRESH_PREFIX,
            Uuid::parse_str(&old.id).unwrap(),
            &secret,
        );
        let traded = app
            .refresh_poller_token(TokenRequest {
                refresh_token: older,
            })
            .await
            .unwrap();
        assert!(stored_hash(&traded.refresh_token)
            .await
            .0
            .starts_with("sha256:"));
    }
}
