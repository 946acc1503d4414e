//! The OpenID provider as central's relying party sees it: its discovery document and signing
//! keys (cached; read again when an ID token is signed with a key central does not hold, which
//! is how a provider's key rotation is followed), the authorization URL, and the code exchange
//! with the ID token's verification (signature, issuer, audience, expiry, nonce). Owns the
//! protocol only: what an identity becomes (a user, a role) is `sso`'s.
//!
//! Everything the provider sends is read through central's own HTTP client: no redirect is
//! followed, an answer is read to at most `MAX_ANSWER` bytes and within `TIMEOUT`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use openidconnect::core::{
    CoreAuthDisplay, CoreAuthPrompt, CoreAuthenticationFlow, CoreErrorResponseType,
    CoreGenderClaim, CoreJsonWebKey, CoreJweContentEncryptionAlgorithm, CoreJwsSigningAlgorithm,
    CoreProviderMetadata, CoreRevocableToken, CoreRevocationErrorResponse,
    CoreTokenIntrospectionResponse, CoreTokenType,
};
use openidconnect::{
    AdditionalClaims, AsyncHttpClient, AuthorizationCode, ClaimsVerificationError, ClientId,
    ClientSecret, CsrfToken, EmptyExtraTokenFields, EndpointMaybeSet, EndpointNotSet, EndpointSet,
    HttpRequest, HttpResponse, IdTokenFields, IssuerUrl, Nonce, OAuth2TokenResponse,
    PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, RefreshToken, RequestTokenError, Scope,
    SignatureVerificationError, StandardErrorResponse, StandardTokenResponse, TokenResponse,
};
use serde::{Deserialize, Serialize};

use crate::telemetry::error_chain;
use tokio::sync::Mutex;

/// The largest answer read from the provider (a discovery document or key set is a few KiB).
const MAX_ANSWER: usize = 1024 * 1024;
/// How long one request to the provider may take.
const TIMEOUT: Duration = Duration::from_secs(10);
/// How long the discovery document and keys are used before they are read again.
const FRESH_FOR: Duration = Duration::from_secs(600);
/// The least time between two readings forced by an unknown key. ID tokens come only from
/// the provider's own token endpoint, in exchange for a code it issued, so nobody else can
/// make central read again; this bounds a provider that keeps naming a key it does not
/// publish to one reading a second.
pub const REREAD_GAP: Duration = Duration::from_secs(1);

/// Every claim of the ID token besides the standard ones, for the role claim (`groups`, …).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct OtherClaims(pub HashMap<String, serde_json::Value>);
impl AdditionalClaims for OtherClaims {}

type IdTokenResponse = StandardTokenResponse<
    IdTokenFields<
        OtherClaims,
        EmptyExtraTokenFields,
        CoreGenderClaim,
        CoreJweContentEncryptionAlgorithm,
        CoreJwsSigningAlgorithm,
    >,
    CoreTokenType,
>;

type CoreIdToken = openidconnect::IdToken<
    OtherClaims,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJwsSigningAlgorithm,
>;

/// `openidconnect`'s client with `OtherClaims`, as discovery makes it.
type Client = openidconnect::Client<
    OtherClaims,
    CoreAuthDisplay,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJsonWebKey,
    CoreAuthPrompt,
    StandardErrorResponse<CoreErrorResponseType>,
    IdTokenResponse,
    CoreTokenIntrospectionResponse,
    CoreRevocableToken,
    CoreRevocationErrorResponse,
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointMaybeSet,
    EndpointMaybeSet,
>;

/// Why a sign-in failed at the provider's end. Its words go to the log; the person signing in
/// is told only that it failed and to try again.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    #[error("the provider cannot be reached or answered badly: {0}")]
    Unreachable(String),
    #[error("the provider refused the code: {0}")]
    CodeRefused(String),
    #[error("the provider's answer holds no ID token")]
    NoIdToken,
    #[error("the ID token does not check out: {0}")]
    Unverified(String),
}

/// Who the provider says signed in, from a verified ID token.
#[derive(Debug, Clone)]
pub struct Identity {
    pub issuer: String,
    pub subject: String,
    pub email: Option<String>,
    pub email_verified: bool,
    pub name: Option<String>,
    pub other: HashMap<String, serde_json::Value>,
}

/// The provider's answer about a linked person (`Provider::recheck`).
#[derive(Debug)]
pub enum Recheck {
    /// The grant is gone: the person was removed, or their access revoked. Why, as it says.
    Gone(String),
    /// Still there: who they are now (when the answer carried an ID token), and the refresh
    /// token to use next (when it rotated).
    Still {
        identity: Option<Identity>,
        refresh: Option<String>,
    },
}

/// What the first leg of a sign-in must keep for the second.
pub struct Started {
    pub url: String,
    pub state: String,
    pub nonce: String,
    pub verifier: String,
}

/// Central's client for the provider: follows no redirect, reads at most `MAX_ANSWER` bytes of
/// an answer, gives up after `TIMEOUT`.
struct Bounded(reqwest::Client);

impl<'c> AsyncHttpClient<'c> for Bounded {
    type Error = HttpError;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<HttpResponse, HttpError>> + Send + 'c>,
    >;

    fn call(&'c self, request: HttpRequest) -> Self::Future {
        Box::pin(send(&self.0, request))
    }
}

pub struct Provider {
    http: Bounded,
    issuer: IssuerUrl,
    client_id: ClientId,
    client_secret: ClientSecret,
    redirect: RedirectUrl,
    scopes: Vec<String>,
    /// The discovery document with its keys, and when it was read.
    metadata: Mutex<Option<(Instant, Arc<CoreProviderMetadata>)>>,
}

impl Provider {
    pub fn new(
        issuer: &str,
        client_id: &str,
        client_secret: &str,
        redirect: &str,
        scopes: Vec<String>,
    ) -> anyhow::Result<Provider> {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(TIMEOUT)
            .build()?;
        Ok(Provider {
            http: Bounded(http),
            issuer: IssuerUrl::new(issuer.to_string())?,
            client_id: ClientId::new(client_id.to_string()),
            client_secret: ClientSecret::new(client_secret.to_string()),
            redirect: RedirectUrl::new(redirect.to_string())?,
            scopes,
            metadata: Mutex::new(None),
        })
    }

    /// The discovery document and keys: cached, or read now when older than `FRESH_FOR`, or
    /// when `reread` (an ID token named a key not held) and the last reading is older than
    /// `REREAD_GAP`.
    async fn metadata(&self, reread: bool) -> Result<Arc<CoreProviderMetadata>, ProviderError> {
        let mut cached = self.metadata.lock().await;
        if let Some((at, metadata)) = cached.as_ref() {
            let age = at.elapsed();
            if age < FRESH_FOR && !(reread && age >= REREAD_GAP) {
                return Ok(metadata.clone());
            }
        }
        let metadata = CoreProviderMetadata::discover_async(self.issuer.clone(), &self.http)
            .await
            .map_err(|e| ProviderError::Unreachable(error_chain(&e)))?;
        let metadata = Arc::new(metadata);
        *cached = Some((Instant::now(), metadata.clone()));
        Ok(metadata)
    }

    fn client(&self, metadata: &CoreProviderMetadata) -> Client {
        Client::from_provider_metadata(
            metadata.clone(),
            self.client_id.clone(),
            Some(self.client_secret.clone()),
        )
        .set_redirect_uri(self.redirect.clone())
    }

    /// The provider's authorization URL for a new sign-in, with a fresh state, nonce and PKCE
    /// (S256) challenge.
    pub async fn start(&self) -> Result<Started, ProviderError> {
        let metadata = self.metadata(false).await?;
        let client = self.client(&metadata);
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let mut request = client.authorize_url(
            CoreAuthenticationFlow::AuthorizationCode,
            CsrfToken::new_random,
            Nonce::new_random,
        );
        for scope in &self.scopes {
            request = request.add_scope(Scope::new(scope.clone()));
        }
        let (url, state, nonce) = request.set_pkce_challenge(challenge).url();
        Ok(Started {
            url: url.to_string(),
            state: state.secret().clone(),
            nonce: nonce.secret().clone(),
            verifier: verifier.secret().clone(),
        })
    }

    /// Trades the code for tokens and verifies the ID token against `nonce`, at `now` (the
    /// clock central's rules read). A token signed with a key central does not hold makes it
    /// read the provider's keys again, once, and verify again. Also the refresh token, when
    /// the provider gave one (for `recheck`).
    pub async fn finish(
        &self,
        code: &str,
        verifier: &str,
        nonce: &str,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<(Identity, Option<String>), ProviderError> {
        let metadata = self.metadata(false).await?;
        let client = self.client(&metadata);
        let answer = client
            .exchange_code(AuthorizationCode::new(code.to_string()))
            .map_err(|e| ProviderError::Unreachable(e.to_string()))?
            .set_pkce_verifier(PkceCodeVerifier::new(verifier.to_string()))
            .request_async(&self.http)
            .await
            .map_err(|e| ProviderError::CodeRefused(error_chain(&e)))?;
        let id_token = answer.id_token().ok_or(ProviderError::NoIdToken)?;
        let nonce = Nonce::new(nonce.to_string());
        let identity = self.verified(&client, id_token, Some(&nonce), now).await?;
        let refresh = answer.refresh_token().map(|t| t.secret().clone());
        Ok((identity, refresh))
    }

    /// Asks the provider whether the person behind `refresh_token` may still come in: a
    /// refresh-token grant (RFC 6749 §6). `invalid_grant` is the provider's no (the person or
    /// their grant is gone); an answer is a yes, with who they are now when it carries an ID
    /// token (verified as at sign-in, but without a nonce: none was asked), and the refresh
    /// token to use next time when the provider rotates them.
    pub async fn recheck(
        &self,
        refresh_token: &str,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<Recheck, ProviderError> {
        let metadata = self.metadata(false).await?;
        let client = self.client(&metadata);
        let refresh = RefreshToken::new(refresh_token.to_string());
        let answer = match client
            .exchange_refresh_token(&refresh)
            .map_err(|e| ProviderError::Unreachable(e.to_string()))?
            .request_async(&self.http)
            .await
        {
            Ok(answer) => answer,
            Err(RequestTokenError::ServerResponse(refusal))
                if *refusal.error() == CoreErrorResponseType::InvalidGrant =>
            {
                return Ok(Recheck::Gone(
                    refusal
                        .error_description()
                        .cloned()
                        .unwrap_or_else(|| "invalid_grant".into()),
                ))
            }
            Err(e) => return Err(ProviderError::Unreachable(error_chain(&e))),
        };
        let identity = match answer.id_token() {
            Some(id_token) => Some(self.verified(&client, id_token, None, now).await?),
            None => None,
        };
        Ok(Recheck::Still {
            identity,
            refresh: answer.refresh_token().map(|t| t.secret().clone()),
        })
    }
}

impl Provider {
    /// `id_token` verified at `now`, against `nonce` (at a sign-in; `None` for the ID token of
    /// a refresh, which answers no request that carried one). A token signed with a key
    /// central does not hold makes it read the provider's keys again, once, and verify again.
    async fn verified(
        &self,
        client: &Client,
        id_token: &CoreIdToken,
        nonce: Option<&Nonce>,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<Identity, ProviderError> {
        let verify = |client: &Client| {
            let verifier = client.id_token_verifier().set_time_fn(move || now);
            match nonce {
                Some(nonce) => id_token.claims(&verifier, nonce),
                None => id_token.claims(&verifier, |_: Option<&Nonce>| Ok(())),
            }
            .map(identity)
        };
        match verify(client) {
            Err(ClaimsVerificationError::SignatureVerification(
                SignatureVerificationError::NoMatchingKey,
            )) => {
                let metadata = self.metadata(true).await?;
                verify(&self.client(&metadata))
            }
            other => other,
        }
        .map_err(|e| ProviderError::Unverified(e.to_string()))
    }
}

/// One request to the provider, as `openidconnect` asks for it.
async fn send(http: &reqwest::Client, request: HttpRequest) -> Result<HttpResponse, HttpError> {
    let request = reqwest::Request::try_from(request).map_err(HttpError::from)?;
    let answer = http.execute(request).await.map_err(HttpError::from)?;
    let mut response = axum::http::Response::builder().status(answer.status());
    for (name, value) in answer.headers() {
        response = response.header(name, value);
    }
    let mut body = Vec::new();
    let mut answer = answer;
    while let Some(chunk) = answer.chunk().await.map_err(HttpError::from)? {
        if body.len() + chunk.len() > MAX_ANSWER {
            return Err(HttpError(format!("an answer over {MAX_ANSWER} bytes")));
        }
        body.extend_from_slice(&chunk);
    }
    response.body(body).map_err(|e| HttpError(e.to_string()))
}

fn identity(claims: &openidconnect::IdTokenClaims<OtherClaims, CoreGenderClaim>) -> Identity {
    Identity {
        issuer: claims.issuer().to_string(),
        subject: claims.subject().to_string(),
        email: claims.email().map(|e| e.to_string()),
        email_verified: claims.email_verified().unwrap_or(false),
        name: claims
            .name()
            .and_then(|n| n.get(None))
            .map(|n| n.to_string()),
        other: claims.additional_claims().0.clone(),
    }
}

/// A failed request to the provider.
#[derive(Debug)]
pub struct HttpError(String);

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HttpError {}

impl From<reqwest::Error> for HttpError {
    fn from(error: reqwest::Error) -> Self {
        HttpError(error_chain(&error))
    }
}
