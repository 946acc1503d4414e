//! Poller lifecycle: registration, token refresh, authentication, heartbeats, liveness.

use shared_proto::poller_api::{
    default_capabilities, EngineEvent, HeartbeatRequest, HeartbeatResponse, RegisterRequest,
    RegisterResponse, TokenRequest, TokenResponse,
};
use shared_proto::settings_api::{Page, PollerPatch, PollerStatus, PollerStatusChange, PollerView};
use uuid::Uuid;

use super::stored_id;
use super::tokens::page;
use super::{auth, now_ms, time_of, App};
use crate::error::{ApiError, ApiResult};
use crate::store::ChannelRow;
use crate::store::{Cursor, EventRow, HeartbeatUpdate, PollerRow, RefreshTokenRow};
use shared_proto::notifications::{Notification, NotificationEvent, Subject};

/// Refresh tokens outlive any outage an agent should ride out while still holding one.
const REFRESH_TTL_MS: i64 = 90 * 24 * 3600 * 1000;
/// A backlog above either figure marks a poller `degraded`.
const DEGRADED_QUEUE_DEPTH: i64 = 10_000;
/// How long a spent refresh token may be presented again as a retry (see `refresh_poller_token`).
const REFRESH_RETRY_GRACE_MS: i64 = 60_000;
/// `revoked_reason` of a successor revoked because its parent was presented again in the grace.
const SUPERSEDED: &str = "superseded";
const DEGRADED_QUEUE_AGE_MS: i64 = 15 * 60 * 1000;

/// `GET /api/v1/pollers` filters.
#[derive(Debug, Default, serde::Deserialize)]
pub struct PollerFilter {
    pub region: Option<String>,
    pub datacenter: Option<String>,
    pub status: Option<PollerStatus>,
}

impl App {
    pub async fn register_poller(&self, request: RegisterRequest) -> ApiResult<RegisterResponse> {
        request.validate()?;
        let token = self
            .spend_registration_token(&request.registration_token)
            .await?;
        let capabilities = if request.capabilities.is_empty() {
            default_capabilities()
        } else {
            request.capabilities
        };
        let id = Uuid::new_v4();
        let now = now_ms();
        let row = PollerRow {
            id: id.to_string(),
            name: request.name.trim().to_string(),
            alias: None,
            region: request.region.or(token.region),
            datacenter: request.datacenter,
            capabilities: capabilities.join(","),
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
        self.reconcile().await?;
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
    ) -> ApiResult<(String, String)> {
        let id = Uuid::new_v4();
        let secret = auth::new_secret();
        let now = now_ms();
        let row = RefreshTokenRow {
            id: id.to_string(),
            poller_id: poller_id.to_string(),
            family_id: family_id.to_string(),
            secret_hash: self.hashing.hash(secret.clone()).await?,
            expires_at: now + REFRESH_TTL_MS,
            spent_at: None,
            revoked_at: None,
            revoked_reason: None,
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
    pub async fn refresh_poller_token(&self, request: TokenRequest) -> ApiResult<TokenResponse> {
        let invalid =
            || ApiError::Unauthorized("refresh token is not valid; re-register the poller".into());
        let (id, secret) =
            auth::parse_token(auth::REFRESH_PREFIX, &request.refresh_token).ok_or_else(invalid)?;
        let row = self
            .store
            .refresh_token(&id.to_string())
            .await?
            .ok_or_else(invalid)?;
        if !self.hashing.verify(secret, row.secret_hash.clone()).await? {
            return Err(invalid());
        }
        let now = now_ms();
        // A deleted or disabled poller is told so first (its agent stops or pauses its checks
        // on that answer), and before its token is spent, so that a disabled one can refresh
        // normally once an operator enables it again.
        let poller = self.live_poller(&row.poller_id).await?;
        if row.revoked_reason.as_deref() == Some(SUPERSEDED) {
            tracing::warn!(
                poller_id = %row.poller_id,
                "a superseded refresh token was presented: one of two holders replayed a token \
                 (suspected theft); family revoked"
            );
            return Err(self.revoke_family(&row, now).await?);
        }
        if row.revoked_at.is_some() || row.expires_at <= now {
            return Err(ApiError::Unauthorized(
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
                .revoke_unused_refresh_token(&successor, now, "orphaned")
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
        row: RefreshTokenRow,
        poller: &PollerRow,
        now: i64,
    ) -> ApiResult<TokenResponse> {
        let within_grace = row
            .spent_at
            .is_some_and(|at| now - at <= REFRESH_RETRY_GRACE_MS);
        let superseded = match (&row.replaced_by, within_grace) {
            (Some(successor), true) => {
                self.store
                    .revoke_unused_refresh_token(successor, now, SUPERSEDED)
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
    async fn revoke_family(&self, row: &RefreshTokenRow, now: i64) -> ApiResult<ApiError> {
        self.store
            .revoke_refresh_family(&row.family_id, now)
            .await?;
        Ok(ApiError::Unauthorized(
            "refresh token was already used, so every token of this poller is revoked; \
             re-register the poller with a new registration token"
                .into(),
        ))
    }

    /// A new access token beside `refresh_token`.
    fn token_pair(
        &self,
        poller: &PollerRow,
        refresh_token: String,
        now: i64,
    ) -> ApiResult<TokenResponse> {
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
    pub async fn authenticate_poller(&self, access_token: &str) -> ApiResult<PollerRow> {
        let id = self
            .verify_access_token(access_token)
            .await
            .map_err(ApiError::Unauthorized)?;
        self.live_poller(&id.to_string()).await
    }

    async fn live_poller(&self, id: &str) -> ApiResult<PollerRow> {
        let poller = self.store.poller(id).await?.ok_or_else(|| {
            ApiError::PollerDeleted(
                "this poller was deleted, so it must stop checking; to bring it back, register it \
                 again with a new registration token"
                    .into(),
            )
        })?;
        if !poller.enabled {
            return Err(ApiError::PollerDisabled(
                "this poller is disabled, so it must pause its checks; an operator can enable it \
                 with PATCH /api/v1/pollers/{id}"
                    .into(),
            ));
        }
        Ok(poller)
    }

    pub async fn heartbeat(
        &self,
        poller: &PollerRow,
        mut beat: HeartbeatRequest,
    ) -> ApiResult<HeartbeatResponse> {
        beat.validate_and_trim()?;
        let now = now_ms();
        let capabilities = if beat.capabilities.is_empty() {
            poller.capabilities.clone()
        } else {
            beat.capabilities.join(",")
        };
        let was_online = self.poller_status(poller, now) != PollerStatus::Offline;
        let capabilities_changed = capabilities != poller.capabilities;
        let events: Vec<EventRow> = beat
            .events
            .iter()
            .map(|event| EventRow {
                id: event.id.unwrap_or_else(Uuid::new_v4).to_string(),
                poller_id: poller.id.clone(),
                monitor_id: event.monitor_id.to_string(),
                at: event.at.timestamp_millis(),
                event: event.kind.name().to_string(),
                detail: serde_json::to_string(event).unwrap_or_default(),
                next_due_at: event.next_due_at.map(|t| t.timestamp_millis()),
            })
            .collect();
        self.store.insert_engine_events(&events).await?;
        self.store
            .record_heartbeat(
                &poller.id,
                &HeartbeatUpdate {
                    at: now,
                    version: beat.version,
                    capabilities,
                    queue_depth: beat.queue_depth.min(i64::MAX as u64) as i64,
                    oldest_queued_at: beat.oldest_queued_at.map(|t| t.timestamp_millis()),
                    dropped_results: beat.dropped_results.min(i64::MAX as u64) as i64,
                    assignment_version: beat.assignment_version,
                    scheduler_health: beat
                        .scheduler
                        .as_ref()
                        .and_then(|s| serde_json::to_string(s).ok()),
                    came_online: !was_online,
                    error: beat.errors.last().map(|e| e.chars().take(500).collect()),
                },
            )
            .await?;
        if !was_online || capabilities_changed {
            self.reconcile().await?;
        }
        Ok(HeartbeatResponse {
            assignment_version: self.store.assignment_version().await?,
            server_time: time_of(now),
        })
    }

    /// Liveness as of `now`.
    pub fn poller_status(&self, poller: &PollerRow, now: i64) -> PollerStatus {
        let offline_after = self.offline_after.as_millis() as i64;
        // Silence while central itself was down is not the poller's: it counts from central's
        // return at the earliest, so a central outage never makes healthy pollers look offline.
        match poller.last_heartbeat_at {
            Some(at) if now - at.max(self.watching_since()) <= offline_after => {}
            _ => return PollerStatus::Offline,
        }
        // A problem reported within the offline window keeps the poller degraded that long.
        let recent_error = poller
            .last_error_at
            .is_some_and(|at| now - at <= offline_after);
        let backlog_old = poller
            .oldest_queued_at
            .is_some_and(|oldest| now - oldest > DEGRADED_QUEUE_AGE_MS);
        if poller.queue_depth > DEGRADED_QUEUE_DEPTH || backlog_old || recent_error {
            PollerStatus::Degraded
        } else {
            PollerStatus::Online
        }
    }

    /// Operator changes: alias, placement labels, enabled. Placement follows at once.
    pub async fn update_poller(&self, id: Uuid, patch: PollerPatch) -> ApiResult<PollerView> {
        patch.validate()?;
        let mut row = self
            .store
            .poller(&id.to_string())
            .await?
            .ok_or_else(|| ApiError::NotFound(format!("no poller with id {id}")))?;
        let PollerPatch {
            alias,
            region,
            datacenter,
            enabled,
        } = patch;
        if let Some(alias) = alias {
            row.alias = alias;
        }
        if let Some(region) = region {
            row.region = region;
        }
        if let Some(datacenter) = datacenter {
            row.datacenter = datacenter;
        }
        if let Some(enabled) = enabled {
            row.enabled = enabled;
        }
        self.store.update_poller(&row).await?;
        self.reconcile().await?;
        self.get_poller(id).await
    }

    /// Deletes a poller: its tokens stop working on its next call, its monitors fail over.
    pub async fn delete_poller(&self, id: Uuid) -> ApiResult<()> {
        let now = now_ms();
        if !self.store.delete_poller(&id.to_string(), now).await? {
            return Err(ApiError::NotFound(format!("no poller with id {id}")));
        }
        self.store
            .revoke_poller_refresh_tokens(&id.to_string(), now)
            .await?;
        tracing::info!(poller_id = %id, "poller deleted and its tokens revoked");
        self.reconcile().await
    }

    pub async fn list_pollers(
        &self,
        filter: &PollerFilter,
        after: &Cursor,
        limit: u32,
    ) -> ApiResult<Page<PollerView>> {
        let rows = self
            .store
            .list_pollers(
                filter.region.as_deref(),
                filter.datacenter.as_deref(),
                after,
                limit,
            )
            .await?;
        let counts: std::collections::HashMap<String, i64> =
            self.store.assigned_counts().await?.into_iter().collect();
        let now = now_ms();
        let mut listed = page(
            rows,
            limit,
            |r| Cursor {
                key: r.created_at,
                id: r.id.clone(),
            },
            |r| self.poller_view(r, counts.get(&r.id).copied().unwrap_or(0), now),
        )?;
        // Status is derived, so it filters after the page is read: a page may come back short,
        // and its cursor still leads on.
        if let Some(status) = filter.status {
            listed.items.retain(|p| p.status == status);
        }
        Ok(listed)
    }

    pub async fn get_poller(&self, id: Uuid) -> ApiResult<PollerView> {
        let row = self
            .store
            .poller(&id.to_string())
            .await?
            .ok_or_else(|| ApiError::NotFound(format!("no poller with id {id}")))?;
        let count = self
            .store
            .assigned_counts()
            .await?
            .into_iter()
            .find(|(poller, _)| *poller == row.id)
            .map_or(0, |(_, n)| n);
        Ok(self.poller_view(&row, count, now_ms())?)
    }

    fn poller_view(&self, row: &PollerRow, assigned: i64, now: i64) -> anyhow::Result<PollerView> {
        Ok(PollerView {
            id: stored_id(&row.id)?,
            name: row.name.clone(),
            alias: row.alias.clone(),
            region: row.region.clone(),
            datacenter: row.datacenter.clone(),
            capabilities: row.capability_list(),
            version: row.version.clone(),
            enabled: row.enabled,
            status: self.poller_status(row, now),
            status_since: row.status_since.map(time_of),
            last_error: row.last_error.clone(),
            last_error_at: row.last_error_at.map(time_of),
            created_at: time_of(row.created_at),
            last_heartbeat_at: row.last_heartbeat_at.map(time_of),
            last_upload_at: row.last_upload_at.map(time_of),
            queue_depth: row.queue_depth.max(0) as u64,
            oldest_queued_at: row.oldest_queued_at.map(time_of),
            dropped_results: row.dropped_results.max(0) as u64,
            assignment_version: row.assignment_version,
            assigned_monitors: assigned.max(0) as u64,
            scheduler: row
                .scheduler_health
                .as_deref()
                .and_then(|s| serde_json::from_str(s).ok()),
        })
    }

    /// The engine events a poller reported, oldest first.
    pub async fn poller_events(
        &self,
        id: Uuid,
        after: &Cursor,
        limit: u32,
    ) -> ApiResult<Page<EngineEvent>> {
        self.get_poller(id).await?;
        let rows = self
            .store
            .list_engine_events(&id.to_string(), after, limit)
            .await?;
        let events = rows
            .iter()
            .map(|r| serde_json::from_str::<EngineEvent>(&r.detail))
            .collect::<Result<Vec<_>, _>>()
            .map_err(anyhow::Error::from)?;
        let cursor = page(
            rows,
            limit,
            |r| Cursor {
                key: r.at,
                id: r.id.clone(),
            },
            |_| Ok(()),
        )?
        .next_cursor;
        Ok(Page {
            items: events,
            next_cursor: cursor,
        })
    }

    /// Records each poller whose liveness changed since last recorded (called by the liveness
    /// watcher); returns how many changed.
    pub async fn record_status_changes(&self) -> ApiResult<usize> {
        let now = now_ms();
        let mut changed = 0;
        let mut defaults: Option<Vec<ChannelRow>> = None;
        for poller in self.store.all_pollers().await? {
            let status = status_name(self.poller_status(&poller, now));
            if poller.status.as_deref() == Some(status) {
                continue;
            }
            let event = match (poller.status.as_deref(), status) {
                (Some("online" | "degraded"), "offline") => Some(NotificationEvent::PollerOffline),
                (Some("offline"), "online" | "degraded") => Some(NotificationEvent::PollerOnline),
                _ => None,
            };
            let notifications = match event {
                Some(event) => {
                    if defaults.is_none() {
                        defaults = Some(self.store.all_channels().await?);
                    }
                    let targets: Vec<&ChannelRow> =
                        defaults.iter().flatten().filter(|c| c.is_default).collect();
                    let name = poller.alias.clone().unwrap_or_else(|| poller.name.clone());
                    let message = Notification {
                        id: Uuid::nil(),
                        event,
                        monitor: None,
                        poller: Some(Subject {
                            id: stored_id(&poller.id)?,
                            name: name.clone(),
                        }),
                        status: status.to_string(),
                        previous_status: poller.status.clone(),
                        at: time_of(now),
                        message: match event {
                            NotificationEvent::PollerOffline => format!(
                                "poller {name} is offline: no heartbeat since {}",
                                poller
                                    .last_heartbeat_at
                                    .map_or("ever".into(), |t| time_of(t).to_rfc3339())
                            ),
                            _ => format!("poller {name} is back online"),
                        },
                        reminder: false,
                        locations: None,
                    };
                    super::alerts::outbox_rows(&targets, &message, None, Some(&poller.id))?
                }
                None => Vec::new(),
            };
            if self
                .store
                .record_poller_status(
                    &poller.id,
                    poller.status.as_deref(),
                    status,
                    now,
                    &notifications,
                )
                .await?
            {
                tracing::info!(poller_id = %poller.id, name = %poller.name, status, "poller status changed");
                changed += 1;
            }
        }
        Ok(changed)
    }

    /// A poller's recorded status changes, oldest first.
    pub async fn poller_status_changes(
        &self,
        id: Uuid,
        after: &Cursor,
        limit: u32,
    ) -> ApiResult<Page<PollerStatusChange>> {
        self.get_poller(id).await?;
        let rows = self
            .store
            .list_poller_status_changes(&id.to_string(), after, limit)
            .await?;
        Ok(page(
            rows,
            limit,
            |(row_id, _, at)| Cursor {
                key: *at,
                id: row_id.clone(),
            },
            |(_, status, at)| {
                Ok(PollerStatusChange {
                    status: match status.as_str() {
                        "online" => PollerStatus::Online,
                        "degraded" => PollerStatus::Degraded,
                        "offline" => PollerStatus::Offline,
                        other => anyhow::bail!("stored poller status `{other}`"),
                    },
                    at: time_of(*at),
                })
            },
        )?)
    }
}

fn status_name(status: PollerStatus) -> &'static str {
    match status {
        PollerStatus::Online => "online",
        PollerStatus::Offline => "offline",
        PollerStatus::Degraded => "degraded",
    }
}
