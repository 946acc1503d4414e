//! The authenticated HTTP client to central: registration, token refresh, and the calls that
//! need a bearer token. Only one refresh runs at a time, and new credentials are stored before
//! they are used, because a spent refresh token presented again revokes the poller's tokens.

use chrono::Utc;
use reqwest::StatusCode;
use serde::de::DeserializeOwned;
use serde::Serialize;
use shared_proto::poller_api::{
    AssignmentsResponse, CommandAck, CommandAckResponse, HeartbeatRequest, HeartbeatResponse,
    RegisterRequest, RegisterResponse, ResultsAck, ResultsBatch, TokenRequest, TokenResponse,
    CENTRAL_VERSION_HEADER, MAX_VERSION_LEN, POLLER_VERSION_HEADER,
};
use shared_proto::ErrorBody;
use tokio::sync::Mutex;

use crate::config::UplinkTls;
use crate::store::{Credentials, LocalStore};

#[derive(Debug, thiserror::Error)]
pub enum UplinkError {
    #[error("central is unreachable: {0}")]
    Unreachable(String),
    #[error("central refused the request ({status}): {message}")]
    Refused {
        status: u16,
        code: String,
        message: String,
    },
    #[error("this agent's credentials were revoked: {0}")]
    CredentialsRevoked(String),
    #[error("central deleted this poller: {0}")]
    PollerDeleted(String),
    #[error("central disabled this poller: {0}")]
    PollerDisabled(String),
    #[error("the agent has no credentials yet")]
    NotRegistered,
    #[error(transparent)]
    Local(#[from] anyhow::Error),
}

impl UplinkError {
    /// Worth retrying later, as opposed to a request central will never accept.
    pub fn is_transient(&self) -> bool {
        match self {
            UplinkError::Unreachable(_) => true,
            UplinkError::Refused { status, .. } => *status >= 500 || *status == 429,
            _ => false,
        }
    }
}

/// Whether central lets this poller work, as its last authenticated answer said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    Active,
    /// Paused by an operator: checks stop until central accepts the poller again.
    Disabled(String),
    /// Gone for good: checks stop; the queue is kept for an operator to inspect.
    Deleted(String),
}

impl Standing {
    pub fn name(&self) -> &'static str {
        match self {
            Standing::Active => "active",
            Standing::Disabled(_) => "disabled",
            Standing::Deleted(_) => "deleted",
        }
    }

    /// `disabled: <central's message>`
    pub fn describe(&self) -> String {
        match self {
            Standing::Active => "active".into(),
            Standing::Disabled(message) | Standing::Deleted(message) => {
                format!("{}: {message}", self.name())
            }
        }
    }
}

pub struct CentralClient {
    http: reqwest::Client,
    base: url::Url,
    store: LocalStore,
    credentials: Mutex<Option<Credentials>>,
    standing: tokio::sync::watch::Sender<Standing>,
    /// The version central named in its newest answer (`X-Central-Version`).
    central_version: std::sync::Mutex<Option<String>>,
}

/// Refresh when the access token has less than this left.
const REFRESH_MARGIN: chrono::Duration = chrono::Duration::seconds(60);

impl CentralClient {
    pub fn new(base: url::Url, store: LocalStore, tls: &UplinkTls) -> anyhow::Result<Self> {
        let mut builder = reqwest::Client::builder();
        if let (Some(cert), Some(key)) = (&tls.tls_cert, &tls.tls_key) {
            let read = |path: &std::path::Path, name: &str| {
                std::fs::read(path)
                    .map_err(|e| anyhow::anyhow!("cannot read {name} {}: {e}", path.display()))
            };
            let mut pem = read(cert, "POLLER_TLS_CERT")?;
            pem.push(b'\n');
            pem.extend(read(key, "POLLER_TLS_KEY")?);
            let identity = reqwest::Identity::from_pem(&pem).map_err(|e| {
                anyhow::anyhow!(
                    "POLLER_TLS_CERT {} and POLLER_TLS_KEY {} are not a PEM certificate and \
                     private key: {e}",
                    cert.display(),
                    key.display()
                )
            })?;
            builder = builder.identity(identity);
        }
        if let Some(path) = &tls.ca_cert {
            let pem = std::fs::read(path).map_err(|e| {
                anyhow::anyhow!("cannot read POLLER_CA_CERT {}: {e}", path.display())
            })?;
            let ca = reqwest::Certificate::from_pem(&pem).map_err(|e| {
                anyhow::anyhow!(
                    "POLLER_CA_CERT {} is not a PEM certificate: {e}",
                    path.display()
                )
            })?;
            builder = builder.add_root_certificate(ca);
        }
        let http = builder
            .timeout(std::time::Duration::from_secs(30))
            .connect_timeout(std::time::Duration::from_secs(10))
            // Central closes connections idle for CENTRAL_HEADER_READ_TIMEOUT (20 s by
            // default); letting them go sooner means no request is sent on one it is closing.
            .pool_idle_timeout(std::time::Duration::from_secs(15))
            .user_agent(concat!("poller-agent/", env!("CARGO_PKG_VERSION")))
            .default_headers(reqwest::header::HeaderMap::from_iter([(
                reqwest::header::HeaderName::from_static(POLLER_VERSION_HEADER),
                reqwest::header::HeaderValue::from_static(env!("CARGO_PKG_VERSION")),
            )]))
            .build()?;
        Ok(Self {
            http,
            base,
            store,
            credentials: Mutex::new(None),
            standing: tokio::sync::watch::Sender::new(Standing::Active),
            central_version: std::sync::Mutex::new(None),
        })
    }

    /// Follows what central says of this poller: every task that probes or syncs stops or
    /// resumes on it.
    pub fn standing(&self) -> tokio::sync::watch::Receiver<Standing> {
        self.standing.subscribe()
    }

    /// Records what an authenticated call's answer says of the poller; logs changes once.
    fn observe<T>(&self, outcome: &Result<T, UplinkError>) {
        let standing = match outcome {
            Ok(_) => Standing::Active,
            Err(UplinkError::PollerDisabled(message)) => Standing::Disabled(message.clone()),
            Err(UplinkError::PollerDeleted(message)) => Standing::Deleted(message.clone()),
            Err(_) => return,
        };
        self.standing.send_if_modified(|current| {
            if current.name() == standing.name() {
                return false;
            }
            match &standing {
                Standing::Active => {
                    tracing::warn!("central accepts this poller again: checks resume")
                }
                Standing::Disabled(message) => tracing::error!(
                    "central disabled this poller: checks stopped, queued results kept; \
                     they resume when an operator enables it ({message})"
                ),
                Standing::Deleted(message) => tracing::error!(
                    "central deleted this poller: checks stopped, queued results kept in \
                     POLLER_DATA_DIR; give the agent a new POLLER_REGISTRATION_TOKEN and remove \
                     its credentials to register it again ({message})"
                ),
            }
            *current = standing;
            true
        });
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base.as_str().trim_end_matches('/'))
    }

    /// Uses credentials loaded from the store.
    pub async fn set_credentials(&self, credentials: Credentials) {
        *self.credentials.lock().await = Some(credentials);
    }

    pub async fn register(&self, request: &RegisterRequest) -> Result<Credentials, UplinkError> {
        let response = self
            .http
            .post(self.url("/api/poller/register"))
            .json(request)
            .send()
            .await;
        let answer: RegisterResponse = decode(response).await?;
        let credentials = Credentials {
            poller_id: answer.poller_id,
            access_token: answer.access_token,
            access_expires_at: answer.access_expires_at,
            refresh_token: answer.refresh_token,
        };
        self.store.save_credentials(&credentials).await?;
        *self.credentials.lock().await = Some(credentials.clone());
        Ok(credentials)
    }

    /// A usable access token, refreshed first if it is about to expire or is `stale`.
    async fn access_token(&self, stale: Option<&str>) -> Result<String, UplinkError> {
        let mut guard = self.credentials.lock().await;
        let credentials = guard.as_mut().ok_or(UplinkError::NotRegistered)?;
        let expiring = credentials.access_expires_at - Utc::now() < REFRESH_MARGIN;
        let rejected = stale == Some(credentials.access_token.as_str());
        if expiring || rejected {
            let request = TokenRequest {
                refresh_token: credentials.refresh_token.clone(),
            };
            let mut exchange = self.http.post(self.url("/api/poller/token")).json(&request);
            if !rejected && credentials.access_expires_at > Utc::now() {
                // Not needed to refresh, but it lets central serve the exchange from the
                // pollers' places rather than the unauthenticated ones, which strangers may
                // have filled.
                exchange = exchange.bearer_auth(&credentials.access_token);
            }
            let response = exchange.send().await;
            let answer: TokenResponse = match decode(response).await {
                Err(UplinkError::Refused {
                    status: 401,
                    message,
                    ..
                }) => return Err(UplinkError::CredentialsRevoked(message)),
                other => {
                    self.observe(&other);
                    other?
                }
            };
            let renewed = Credentials {
                poller_id: credentials.poller_id,
                access_token: answer.access_token,
                access_expires_at: answer.access_expires_at,
                refresh_token: answer.refresh_token,
            };
            self.store.save_credentials(&renewed).await?;
            *credentials = renewed;
            tracing::debug!("access token refreshed");
        }
        Ok(credentials.access_token.clone())
    }

    /// Sends an authenticated request; on a 401 refreshes once and tries again.
    async fn call<T: DeserializeOwned>(
        &self,
        build: impl Fn(&reqwest::Client, &str) -> reqwest::RequestBuilder,
    ) -> Result<T, UplinkError> {
        let token = self.access_token(None).await?;
        let outcome = match decode(self.send(build(&self.http, &token)).await).await {
            Err(UplinkError::Refused { status: 401, .. }) => {
                let token = self.access_token(Some(&token)).await?;
                decode(self.send(build(&self.http, &token)).await).await
            }
            other => other,
        };
        self.observe(&outcome);
        outcome
    }

    /// Sends a request and notes the version central names in its answer.
    async fn send(&self, request: reqwest::RequestBuilder) -> reqwest::Result<reqwest::Response> {
        let response = request.send().await?;
        let named = response
            .headers()
            .get(CENTRAL_VERSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .filter(|v| v.len() <= MAX_VERSION_LEN);
        if let Some(version) = named {
            let mut known = self
                .central_version
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if known.as_deref() != Some(version) {
                *known = Some(version.to_string());
            }
        }
        Ok(response)
    }

    /// The version central named in its newest answer; `None` from a central too old to say.
    pub fn central_version(&self) -> Option<String> {
        self.central_version
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn post<'a, B: Serialize>(
        &'a self,
        path: &'a str,
        body: &'a B,
    ) -> impl Fn(&reqwest::Client, &str) -> reqwest::RequestBuilder + 'a {
        move |http, token| http.post(self.url(path)).bearer_auth(token).json(body)
    }

    pub async fn heartbeat(
        &self,
        beat: &HeartbeatRequest,
    ) -> Result<HeartbeatResponse, UplinkError> {
        self.call(self.post("/api/poller/heartbeat", beat)).await
    }

    /// Assignments changed since `since_version`; with `wait`, central holds the request until
    /// something changes or the wait ends (long poll).
    pub async fn assignments(
        &self,
        since_version: i64,
        wait: std::time::Duration,
    ) -> Result<AssignmentsResponse, UplinkError> {
        let url = self.url(&format!(
            "/api/poller/assignments?since_version={since_version}&wait={}",
            wait.as_secs()
        ));
        let timeout = wait + std::time::Duration::from_secs(15);
        self.call(|http, token| http.get(&url).bearer_auth(token).timeout(timeout))
            .await
    }

    /// Tells central what came of a command.
    pub async fn acknowledge(
        &self,
        command: uuid::Uuid,
        ack: &CommandAck,
    ) -> Result<CommandAckResponse, UplinkError> {
        let path = format!("/api/poller/commands/{command}/ack");
        self.call(self.post(&path, ack)).await
    }

    /// Uploads a batch, gzip-compressed (results compress about tenfold).
    pub async fn upload(&self, batch: &ResultsBatch) -> Result<ResultsAck, UplinkError> {
        let json = serde_json::to_vec(batch).map_err(anyhow::Error::from)?;
        let mut encoder = flate2::write::GzEncoder::new(
            Vec::with_capacity(json.len() / 4),
            flate2::Compression::fast(),
        );
        std::io::Write::write_all(&mut encoder, &json).map_err(anyhow::Error::from)?;
        let body = encoder.finish().map_err(anyhow::Error::from)?;
        let url = self.url("/api/poller/results");
        self.call(|http, token| {
            http.post(&url)
                .bearer_auth(token)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .header(reqwest::header::CONTENT_ENCODING, "gzip")
                .body(body.clone())
        })
        .await
    }
}

async fn decode<T: DeserializeOwned>(
    response: reqwest::Result<reqwest::Response>,
) -> Result<T, UplinkError> {
    let response = response.map_err(|e| UplinkError::Unreachable(e.to_string()))?;
    let status = response.status();
    if status == StatusCode::OK || status == StatusCode::CREATED {
        return response
            .json::<T>()
            .await
            .map_err(|e| UplinkError::Unreachable(format!("unreadable answer: {e}")));
    }
    let body = response.text().await.unwrap_or_default();
    let (code, message) = match serde_json::from_str::<ErrorBody>(&body) {
        Ok(error) => (error.error, error.message),
        Err(_) => (String::new(), body.chars().take(300).collect()),
    };
    match code.as_str() {
        "poller_deleted" => return Err(UplinkError::PollerDeleted(message)),
        "poller_disabled" => return Err(UplinkError::PollerDisabled(message)),
        _ => {}
    }
    Err(UplinkError::Refused {
        status: status.as_u16(),
        code,
        message,
    })
}
