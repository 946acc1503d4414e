//! Domain services: the rules of registration, placement, ingestion and derived status.
//!
//! Handlers call these; these call the store. Nothing here knows about HTTP (failures are
//! `ServiceError`s, which the HTTP boundary maps), and nothing here writes SQL.

pub mod access;
pub mod admin_token;
pub mod alerts;
pub mod api_keys;
pub mod assignments;
pub mod audit;
pub mod audit_intents;
pub mod auth;
pub mod buckets;
pub mod channel_secrets;
pub mod channels;
pub mod clock;
pub mod commands;
pub mod credentials;
pub mod dependencies;
pub mod engine_health;
pub mod error;
pub mod folding;
pub mod hashing;
pub mod history;
pub mod ingest;
pub mod limits;
pub mod maintenance;
pub mod managed;
pub mod monitor_secrets;
pub mod monitors;
pub mod overview;
pub mod parents;
pub mod placement;
pub mod pollers;
pub mod push;
pub mod quorum;
pub mod recent;
pub mod retention;
pub mod scrape;
pub mod sessions;
pub mod sso;
pub mod status;
pub mod status_pages;
pub mod statuses;
pub mod tagged;
pub mod tokens;
pub mod uptime;
pub mod users;

use std::time::Duration;

use anyhow::Context;
use chrono::{DateTime, TimeZone, Utc};
use tokio::sync::Mutex;

use crate::config::ServeArgs;
use crate::metrics::Metrics;
use crate::service::error::ServiceError;
use crate::store::{LeaseState, Store};
use auth::JwtKeys;

const JWT_KEY_SETTING: &str = "jwt_signing_key";
const MAX_ACCESS_TTL: Duration = Duration::from_secs(15 * 60);

/// Shared state of a running central.
pub struct App {
    /// What the rules read as now (`clock`).
    clock: clock::Clock,
    pub store: std::sync::Arc<Store>,
    pub metrics: Metrics,
    /// Versions, wake-ups, and the instants the lease holder's duties keep (`cluster`).
    pub cluster: crate::cluster::Cluster,
    /// Sends to notification channels (test sends; the outbox dispatcher has its own handle).
    pub notifier: crate::notify::Notifier,
    /// Who a caller is: admin token, signing keys, sessions, API keys, single sign-on.
    credentials: credentials::Credentials,
    /// What the configuration bounds: waits, retention, rates.
    pub limits: limits::Limits,
    /// One placement pass at a time, so that two passes never undo each other's moves.
    reconcile_lock: Mutex<()>,
    /// The clock at alerting's last look on this replica: a later look that reads an earlier
    /// time saw the clock step back (`alerts::look`).
    last_look_at: std::sync::atomic::AtomicI64,
    /// Who may read `/metrics` on the public listener, and its text of the last few seconds.
    scrape: scrape::Scrape,
    /// The last database ping and when it answered, shared by `/readyz` callers.
    last_ping: Mutex<Option<(std::time::Instant, bool)>>,
    /// `CENTRAL_PUBLIC_URL`: heartbeat monitors' ping URLs start with it.
    public_url: Option<String>,
}

/// `NotFound` unless the monitor `id` exists.
pub(crate) async fn monitor_exists(store: &Store, id: uuid::Uuid) -> error::ServiceResult<()> {
    match store.monitor(&id.to_string()).await? {
        Some(_) => Ok(()),
        None => Err(error::ServiceError::NotFound(format!(
            "no monitor with id {id}"
        ))),
    }
}

/// An id read back from the database. A malformed one is a fault of the store, reported as
/// such, never quietly turned into the nil UUID.
pub(crate) fn stored_id(text: &str) -> anyhow::Result<uuid::Uuid> {
    uuid::Uuid::try_parse(text)
        .map_err(|_| anyhow::anyhow!("the database holds a malformed id `{text}`"))
}

impl App {
    pub async fn open(args: &ServeArgs) -> anyhow::Result<std::sync::Arc<App>> {
        Self::open_with_clock(args, clock::Clock::system()).await
    }

    /// `open` with the clock the rules read (`Clock::manual` in tests).
    pub async fn open_with_clock(
        args: &ServeArgs,
        clock: clock::Clock,
    ) -> anyhow::Result<std::sync::Arc<App>> {
        let store = Store::connect(&args.database_url).await?;
        let admin =
            admin_token::AdminToken::open(&store, args.admin_token.as_deref(), clock.now_ms())
                .await?;
        tokens::sync_environment_token(&store, args.registration_token.as_deref(), clock.now_ms())
            .await?;
        let jwt_key = store
            .setting_or_insert(JWT_KEY_SETTING, &JwtKeys::generate_stored_form())
            .await?;
        let jwt = JwtKeys::from_stored_form(&jwt_key)?;
        let sso = sso::Sso::open(&args.sso, args.public_url.as_deref(), &store).await?;
        // Versions from the start's time on: a restored copy never reissues its original's.
        let (version, never_issued) = store
            .begin_assignment_versions(clock.now_ms().saturating_mul(1000), clock.now_ms())
            .await?;
        let access_ttl = args.access_token_ttl.min(MAX_ACCESS_TTL);
        let started_at = clock.now_ms();
        Ok(std::sync::Arc::new(App {
            clock,
            store: std::sync::Arc::new(store),
            metrics: Metrics::new(),
            cluster: crate::cluster::Cluster::new(version, never_issued, started_at),
            notifier: crate::notify::Notifier::new(
                crate::notify::Destinations::new(
                    args.notify_allowed_networks.clone(),
                    args.notify_dns_server,
                )?,
                args.public_url.clone(),
                args.alertmanager_resend_interval,
                args.mail_url
                    .clone()
                    .zip(args.mail_from.clone())
                    .map(|(url, from)| crate::notify::notices::MailServer { url, from }),
                crate::notify::Destinations::new(
                    args.subscriber_allowed_networks.clone(),
                    args.notify_dns_server,
                )?,
            )?,
            credentials: credentials::Credentials::new(
                admin,
                jwt,
                chrono::Duration::from_std(access_ttl).context("access token ttl")?,
                sso,
            ),
            limits: limits::Limits::from_args(args),
            reconcile_lock: Mutex::new(()),
            last_look_at: std::sync::atomic::AtomicI64::new(0),
            scrape: scrape::Scrape::new(args.metrics_token.as_deref())?,
            last_ping: Mutex::new(None),
            public_url: args.public_url.clone(),
        }))
    }

    /// Whether the database answers, as a ping of at most `PING_EVERY` ago says: probes that
    /// arrive together wait for one ping instead of each taking a connection (`/readyz` is in
    /// no request pool, so its cost must not grow with its callers).
    pub async fn database_answers(&self) -> bool {
        const PING_EVERY: Duration = Duration::from_secs(1);
        let mut last = self.last_ping.lock().await;
        if let Some((at, answered)) = *last {
            if at.elapsed() < PING_EVERY {
                return answered;
            }
        }
        let answered = match self.store.ping().await {
            Ok(()) => true,
            Err(e) => {
                // The driver's words may name hosts, users or paths: they go to the log only.
                tracing::warn!("not ready: the database does not answer: {e:#}");
                false
            }
        };
        *last = Some((std::time::Instant::now(), answered));
        answered
    }

    /// Takes or renews a lease for `ttl`; a lease that nobody looked at for longer than
    /// `lapse`, or that this replica was the last to look at before it was `returning` from a
    /// restart, starts a new holding.
    pub async fn take_lease(
        &self,
        name: &str,
        holder: &str,
        ttl: Duration,
        lapse: Duration,
        returning: bool,
    ) -> anyhow::Result<LeaseState> {
        let now = self.now_ms();
        let millis = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        let until = now.saturating_add(millis(ttl));
        self.store
            .acquire_lease(name, holder, now, until, millis(lapse), returning)
            .await
    }

    /// Whether `token` is an access token signed by a key this replica holds and not expired,
    /// without reloading keys or reading the poller (for choosing a request's pool only).
    pub fn is_signed_access_token(&self, token: &str) -> bool {
        self.credentials
            .jwt
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .verify(token)
            .is_ok()
    }

    /// Signs a poller access token with the newest key.
    pub(crate) fn issue_access_token(
        &self,
        poller_id: uuid::Uuid,
        now: DateTime<Utc>,
    ) -> anyhow::Result<(String, DateTime<Utc>)> {
        self.credentials
            .jwt
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .issue(poller_id, now, self.credentials.access_ttl)
    }

    /// The poller id of a valid access token; a key rotated in by another replica is loaded
    /// from the database on first sight.
    pub(crate) async fn verify_access_token(&self, token: &str) -> Result<uuid::Uuid, String> {
        let first = self
            .credentials
            .jwt
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .verify(token);
        if !matches!(&first, Err(e) if e == auth::UNKNOWN_KEY) {
            return first;
        }
        // Another replica may have rotated the key: look, but not more often than the gate
        // allows; meanwhile unknown kids are refused cheaply (a real agent just refreshes).
        if !self
            .credentials
            .key_reloads
            .try_begin(std::time::Instant::now())
        {
            return first;
        }
        let stored = match self.store.setting(JWT_KEY_SETTING).await {
            Ok(Some(stored)) => stored,
            _ => return first,
        };
        let Ok(keys) = JwtKeys::from_stored_form(&stored) else {
            return first;
        };
        let answer = keys.verify(token);
        *self
            .credentials
            .jwt
            .write()
            .unwrap_or_else(|p| p.into_inner()) = keys;
        answer
    }

    /// Loads the signing keys from the database (another replica or the CLI may have added
    /// one); upkeep (`duties::upkeep`) calls it every minute.
    pub async fn reload_signing_keys(&self) -> anyhow::Result<()> {
        if let Some(stored) = self.store.setting(JWT_KEY_SETTING).await? {
            let keys = JwtKeys::from_stored_form(&stored)?;
            *self
                .credentials
                .jwt
                .write()
                .unwrap_or_else(|p| p.into_inner()) = keys;
        }
        Ok(())
    }

    /// Now, as the rules see it (milliseconds since the Unix epoch).
    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Now, as the rules see it: what pages measure "ago" and "late" from, so that what they
    /// say agrees with the statuses beside it.
    pub fn now(&self) -> DateTime<Utc> {
        Utc.timestamp_millis_opt(self.now_ms())
            .single()
            .unwrap_or_else(Utc::now)
    }

    /// Reads the current assignment version after announcements may have been lost: what
    /// the missed versions changed is unknown, so every long poll looks.
    pub(crate) async fn refresh_assignment_version(&self) -> anyhow::Result<()> {
        self.cluster
            .versions
            .publish_to_everyone(self.store.assignment_version().await?);
        Ok(())
    }

    /// A version another replica committed, heard of by number: one read of the pollers
    /// the versions since the newest known one concerned, then their long polls wake.
    pub(crate) async fn learn_version(&self, version: i64) -> anyhow::Result<()> {
        let known = self.cluster.versions.newest();
        if version <= known {
            return Ok(());
        }
        match self.store.pollers_changed_between(known, version).await {
            Ok(pollers) => self
                .cluster
                .versions
                .publish(version, pollers.iter().map(String::as_str)),
            Err(e) => {
                self.cluster.versions.publish_to_everyone(version);
                return Err(e);
            }
        }
        Ok(())
    }

    /// A version this replica committed, which changed what these pollers run.
    pub(crate) fn publish_version(&self, versioned: &crate::store::Versioned) {
        self.cluster.versions.publish(
            versioned.version,
            versioned.pollers.iter().map(String::as_str),
        );
    }
}

/// Adds a signing key in the database, for `central rotate-signing-key`: it touches nothing
/// else (no admin token, no migrations beyond the store's own). Returns the new key's id.
pub async fn rotate_signing_key(store: &Store) -> anyhow::Result<String> {
    let stored = store.setting(JWT_KEY_SETTING).await?.unwrap_or_default();
    let rotated = JwtKeys::rotated_stored_form(&stored);
    store.put_setting(JWT_KEY_SETTING, &rotated).await?;
    Ok(JwtKeys::from_stored_form(&rotated)?
        .current_kid()
        .to_string())
}

pub(crate) fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

pub fn time_of(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms).single().unwrap_or_default()
}

/// A patch whose fields are each valid, but which breaks a rule once applied to the object
/// as it is (a monitor's target not of its kind, a timeout beyond its interval): `422`, never
/// `400`, which is kept for what the patch's own schema states. RFC 5789 §2.2 calls this a
/// conflicting state; 422 is also what a rule between fields of a create gets.
pub(crate) fn patch_does_not_fit(error: ServiceError) -> ServiceError {
    match error {
        ServiceError::Validation(e) if e.rule == shared_proto::Rule::Field => {
            e.in_combination().into()
        }
        other => other,
    }
}

// Test builds only; last, so that nothing after it is taken for shipped code.
#[cfg(test)]
pub(crate) mod testing;
