//! Which places a request is served from, and for how long. Pools, so that one kind of
//! traffic can never take another's places:
//! - `poller`: requests carrying an access token whose signature checks out;
//! - `refresh`: agents trading a refresh token for a new access token (`/api/poller/token`)
//!   without a still-valid access token along (which puts the trade in `poller`): apart from
//!   strangers so that a flood of them never keeps an agent from its token, with at most an
//!   eighth of the pool per client, and never refused for failures (checking a refresh token
//!   is one SHA-256 and an indexed read, so a neighbour's failures must not lock it out);
//! - `operator`: requests carrying the admin token, an API key or a session cookie, each seen
//!   valid lately, or `CENTRAL_METRICS_TOKEN` (Prometheus is an operator's tool), with at most
//!   a quarter of the pool per holder (a user, whatever session or keys of theirs they use; a
//!   key made with the admin token; the admin token; the metrics token), so that one viewer
//!   sending slow bodies, through as many keys as they make, cannot take the admins' places;
//! - `ping`: heartbeat monitors' pings (`/ping/...`), whose only credential is their URL, with
//!   at most an eighth of the pool per client: a flood of pings takes no login's place;
//! - `public`: status pages' visitors (`/status/...`, badges, `/badge/...`, and `GET /` without a
//!   session, where a page is served at its own domain), whose pages are one shared rendering
//!   each (`web::status_pages`), with no cap per client (a rush is many people, often behind
//!   one proxy), so that a rush on a status page takes no place of an agent, an operator, a
//!   ping or a login;
//! - `unauthenticated`: everything else (logging in, whatever credentials come with it;
//!   registering an agent, bad or missing credentials, the login page and its assets), with
//!   at most an eighth of the pool per client (an address or IPv6 /64, through
//!   `CENTRAL_TRUSTED_PROXIES`).
//!
//! The pool follows the credential the request's handler will actually check: the bearer
//! token on the APIs and `/metrics`, the session cookie on the page. A valid cookie riding
//! along with a guessed bearer token does not lift an API request out of the pool where
//! failures are limited.
//!
//! Failed authentications (`401`) count against their client in every pool
//! (`auth_failures`); a locked-out client's requests in the unauthenticated pool are answered
//! `429` before they take a place. Registering an agent is always in the unauthenticated pool,
//! whatever bearer token rides along: the registration secret in its body is what it checks. Ping URLs that name nothing (`404`) are
//! counted apart, per client only and ten times as leniently (a job left with a replaced URL
//! must not lock its host's other jobs out, and wrong pings must never lock out logins or
//! every ping).
//!
//! Choosing takes microseconds and no database read or slow hash; it grants nothing, since
//! every handler still authenticates its request. A full pool answers `503` with
//! `Retry-After` at once, never queues. Every request's body must arrive within
//! `CENTRAL_REQUEST_TIMEOUT` of its headers (`deadline`; `408` past it), so a body that
//! trickles in cannot hold a place for longer. Assignment long polls (with a signed access
//! token) are exempt from both: they have their own cap (`LongPolls`) and end on their own. Probes (`/healthz`,
//! `/readyz`) sit outside this layer.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, Request, State};
use axum::http::header::AUTHORIZATION;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::auth_failures::AuthFailures;
use crate::error::ApiError;
use crate::server::client_addr::{client_key, TrustedProxies};
use crate::server::places::{Place, Places};
use crate::server::PeerAddr;
use crate::service::access::Holder;
use crate::service::App;

/// The path whose requests are exempt from the pools and the deadline (they use `LongPolls`).
pub const LONG_POLL_PATH: &str = "/api/poller/assignments";
/// Heartbeat monitors' pings start with this.
pub const PING_PREFIX: &str = "/ping/";
/// Where agents trade a refresh token for an access token.
pub const REFRESH_PATH: &str = "/api/poller/token";
/// Where agents register with a registration token.
pub const REGISTER_PATH: &str = "/api/poller/register";

/// Seconds a shed client is told to wait; agents add their own jitter.
const RETRY_AFTER_SECONDS: u64 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pool {
    Poller,
    Refresh,
    Operator,
    Ping,
    Public,
    Unauthenticated,
}

impl Pool {
    fn as_str(self) -> &'static str {
        match self {
            Pool::Poller => "poller",
            Pool::Refresh => "refresh",
            Pool::Operator => "operator",
            Pool::Ping => "ping",
            Pool::Public => "public",
            Pool::Unauthenticated => "unauthenticated",
        }
    }
}

pub struct Pools {
    app: Arc<App>,
    poller: Arc<Semaphore>,
    /// Keyed by who holds the credential (`Principal::holder`).
    operator: Places<Holder>,
    refresh: Places,
    unauthenticated: Places,
    ping: Places,
    /// Status pages' visitors: a count only, no cap per client.
    public: Arc<Semaphore>,
    proxies: TrustedProxies,
    deadline: Duration,
    failures: AuthFailures,
    ping_failures: AuthFailures,
}

/// A place held while a request is served.
enum Held {
    Slot(#[allow(dead_code)] OwnedSemaphorePermit),
    Place(#[allow(dead_code)] Place),
    Principal(#[allow(dead_code)] Place<Holder>),
}

/// The pool a request goes to, and for an operator, who holds the credential it carries.
struct Chosen {
    pool: Pool,
    principal: Option<Holder>,
}

impl Pools {
    pub fn new(
        app: Arc<App>,
        authenticated: u32,
        unauthenticated: u32,
        proxies: TrustedProxies,
        deadline: Duration,
        failures: AuthFailures,
        ping_failures: AuthFailures,
    ) -> Self {
        let unauthenticated = unauthenticated as usize;
        let authenticated = authenticated as usize;
        Self {
            app,
            poller: Arc::new(Semaphore::new(authenticated)),
            operator: Places::new(authenticated, (authenticated / 4).max(1)),
            refresh: Places::new(unauthenticated, (unauthenticated / 8).max(1)),
            unauthenticated: Places::new(unauthenticated, (unauthenticated / 8).max(1)),
            ping: Places::new(unauthenticated, (unauthenticated / 8).max(1)),
            public: Arc::new(Semaphore::new(unauthenticated)),
            proxies,
            deadline,
            failures,
            ping_failures,
        }
    }

    /// The pool a request's credentials earn it, judged in memory: by the bearer token on
    /// the APIs and `/metrics`, by the session cookie on the page (what each checks).
    fn choose(&self, request: &Request) -> Chosen {
        let pool = |pool| Chosen {
            pool,
            principal: None,
        };
        let path = request.uri().path();
        if path.starts_with(PING_PREFIX) {
            return pool(Pool::Ping);
        }
        if path.starts_with(crate::web::status_pages::PREFIX)
            || path.starts_with(crate::web::badges::PREFIX)
        {
            // Giving a page's password is a sign-in: served with the strangers, where each
            // failure counts against its client, as a login's does.
            if request.method() == axum::http::Method::POST {
                return pool(Pool::Unauthenticated);
            }
            return pool(Pool::Public);
        }
        // Logging in, by password or single sign-on, and registering an agent, whatever
        // credentials come along: what they check is in the body or the provider's answer.
        if (request.method() == axum::http::Method::POST && path == crate::web::session::LOGIN_PATH)
            || path.starts_with(crate::web::SSO_PREFIX)
            || path == REGISTER_PATH
        {
            return pool(Pool::Unauthenticated);
        }
        let headers = request.headers();
        let checks_bearer = path.starts_with("/api/") || path == "/metrics";
        let holder = if checks_bearer {
            let bearer = headers
                .get(AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(str::trim);
            match bearer {
                Some(token) if self.app.is_signed_access_token(token) => return pool(Pool::Poller),
                _ if path == REFRESH_PATH => return pool(Pool::Refresh),
                Some(token) if self.app.is_known_admin_token(token) => Some(Holder::AdminToken),
                Some(token) if self.app.is_metrics_token(token) => Some(Holder::MetricsToken),
                Some(token) => self.app.recent_api_key(token),
                None => None,
            }
        } else {
            axum_extra::extract::CookieJar::from_headers(headers)
                .get(crate::web::session::COOKIE)
                .and_then(|cookie| self.app.recent_session(cookie.value()))
        };
        match holder {
            Some(holder) => Chosen {
                pool: Pool::Operator,
                principal: Some(holder),
            },
            // `/` without a session is a status page at its own domain, or the way to the
            // login: a rush on a page there is served as one at `/status/` is.
            None if path == "/" && request.method() == axum::http::Method::GET => {
                pool(Pool::Public)
            }
            None => pool(Pool::Unauthenticated),
        }
    }

    /// Who is calling, as the per-client limits count them (`None` without a peer address).
    fn client(&self, request: &Request) -> Option<std::net::IpAddr> {
        let ConnectInfo(peer) = request.extensions().get::<ConnectInfo<PeerAddr>>()?;
        Some(client_key(
            self.proxies.client_ip(peer.addr.ip(), request.headers()),
        ))
    }

    fn take(&self, chosen: &Chosen, client: Option<std::net::IpAddr>) -> Option<Held> {
        match chosen.pool {
            Pool::Poller => self.poller.clone().try_acquire_owned().ok().map(Held::Slot),
            Pool::Operator => self
                .operator
                .take(chosen.principal)
                .ok()
                .map(Held::Principal),
            Pool::Refresh => self.refresh.take(client).ok().map(Held::Place),
            Pool::Unauthenticated => self.unauthenticated.take(client).ok().map(Held::Place),
            Pool::Ping => self.ping.take(client).ok().map(Held::Place),
            Pool::Public => self.public.clone().try_acquire_owned().ok().map(Held::Slot),
        }
    }
}

pub async fn admit(State(pools): State<Arc<Pools>>, request: Request, next: Next) -> Response {
    let chosen = pools.choose(&request);
    let pool = chosen.pool;
    if pool == Pool::Poller && request.uri().path() == LONG_POLL_PATH {
        return next.run(request).await;
    }
    let client = pools.client(&request);
    let failures = match pool {
        Pool::Ping => &pools.ping_failures,
        _ => &pools.failures,
    };
    // Only strangers are held back: a credential that checks out in memory (or, for a
    // refresh, cheaply) is served even from an address that failed (its failures still count,
    // below).
    if matches!(pool, Pool::Unauthenticated | Pool::Ping) {
        if let Err(refused) = failures.check(client, Instant::now()) {
            return refused.into_response();
        }
    }
    let place_for = match pool {
        Pool::Unauthenticated | Pool::Ping | Pool::Refresh => client,
        Pool::Poller | Pool::Operator | Pool::Public => None,
    };
    let Some(_held) = pools.take(&chosen, place_for) else {
        pools
            .app
            .metrics
            .requests_shed
            .get_or_create(&vec![("pool", pool.as_str())])
            .inc();
        return ApiError::Overloaded {
            message: format!(
                "central is serving as many {} requests as it is allowed to{}; retry in \
                 {RETRY_AFTER_SECONDS} s",
                pool.as_str(),
                if pool == Pool::Operator {
                    " (or as many for this credential as one may hold)"
                } else {
                    ""
                }
            ),
            retry_after: RETRY_AFTER_SECONDS,
        }
        .into_response();
    };
    let (request, missed) = {
        let (parts, body) = request.into_parts();
        let (body, missed) = super::deadline::limit(body, pools.deadline);
        (Request::from_parts(parts, body), missed)
    };
    let mut response = next.run(request).await;
    if missed.happened() {
        pools.app.metrics.requests_timed_out.inc();
        response = ApiError::RequestTimeout(format!(
            "the request's body did not arrive within {} s of its headers \
             (CENTRAL_REQUEST_TIMEOUT); send it at once",
            pools.deadline.as_secs()
        ))
        .into_response();
    }
    let failed = match pool {
        Pool::Ping => response.status() == StatusCode::NOT_FOUND,
        // A private status page's `401` asks for a password; only giving a wrong one (its
        // `POST`, in the unauthenticated pool) is a failure.
        Pool::Public => false,
        _ => response.status() == StatusCode::UNAUTHORIZED,
    };
    if failed {
        failures.record(client, Instant::now());
    }
    response
}

/// Long polls held open at once, in all and per poller; past either cap a long poll is
/// answered without waiting (the agent simply asks again). Memory: one entry per poller that
/// holds a long poll now.
pub struct LongPolls {
    all: Arc<Semaphore>,
    per_poller: u32,
    held: Arc<Mutex<HashMap<String, u32>>>,
    /// Set when central stops: every waiting poll is answered at once, so that none outlasts
    /// the shutdown grace (a long poll waits up to 60 s, the grace is 30 s) and is cut off.
    closing: tokio::sync::watch::Sender<bool>,
}

/// A place to wait in; given back when dropped.
pub struct LongPoll {
    _place: OwnedSemaphorePermit,
    poller: String,
    held: Arc<Mutex<HashMap<String, u32>>>,
}

impl LongPolls {
    pub fn new(capacity: u32, per_poller: u32) -> Self {
        Self {
            all: Arc::new(Semaphore::new(capacity as usize)),
            per_poller,
            held: Arc::default(),
            closing: tokio::sync::watch::Sender::new(false),
        }
    }

    /// Central is stopping: waiting polls are answered now, and new ones do not wait.
    pub fn close(&self) {
        self.closing.send_replace(true);
    }

    /// Resolves once [`close`](Self::close) was called (at once if it already was).
    pub async fn closed(&self) {
        let mut closing = self.closing.subscribe();
        // Only an error when the sender is gone, which `self` holds.
        let _ = closing.wait_for(|closing| *closing).await;
    }

    /// A place for `poller` to wait in, if one is free for it.
    pub fn try_wait(&self, poller: &str) -> Option<LongPoll> {
        if *self.closing.borrow() {
            return None;
        }
        let place = self.all.clone().try_acquire_owned().ok()?;
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let count = held.entry(poller.to_string()).or_default();
        if *count >= self.per_poller {
            return None;
        }
        *count += 1;
        Some(LongPoll {
            _place: place,
            poller: poller.to_string(),
            held: self.held.clone(),
        })
    }
}

impl Drop for LongPoll {
    fn drop(&mut self) {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(count) = held.get_mut(&self.poller) {
            *count -= 1;
            if *count == 0 {
                held.remove(&self.poller);
            }
        }
    }
}

#[cfg(test)]
mod long_poll_tests {
    use super::*;

    #[test]
    fn one_poller_holds_at_most_its_share_and_gets_it_back() {
        let polls = LongPolls::new(10, 2);
        let first = polls.try_wait("a").unwrap();
        let _second = polls.try_wait("a").unwrap();
        assert!(polls.try_wait("a").is_none(), "a third for the same poller");
        let _other = polls.try_wait("b").unwrap();
        drop(first);
        assert!(polls.try_wait("a").is_some(), "given back when answered");
    }

    #[test]
    fn the_total_still_caps_every_poller() {
        let polls = LongPolls::new(2, 2);
        let _a = polls.try_wait("a").unwrap();
        let _b = polls.try_wait("b").unwrap();
        assert!(polls.try_wait("c").is_none());
        assert!(polls.held.lock().unwrap().get("c").is_none());
    }
}
