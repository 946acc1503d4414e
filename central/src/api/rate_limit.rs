//! The per-client rate limit (`client_addr::client_key`: an address, or an IPv6 /64) of the
//! unauthenticated poller calls (`register`, `token`), which verify argon2 hashes and would
//! otherwise let anyone burn central's CPU or guess at leisure. The buckets are
//! `service::buckets`'.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::server::client_addr::{client_key, TrustedProxies};
use crate::server::PeerAddr;
use crate::service::buckets::Buckets;
use crate::service::error::ServiceError;

/// The rate limit of `register` and `token`.
pub struct RateLimiter {
    buckets: Buckets<IpAddr>,
    proxies: TrustedProxies,
}

impl RateLimiter {
    pub fn new(per_second: f64, burst: f64, proxies: TrustedProxies) -> Self {
        Self {
            buckets: Buckets::new(per_second, burst),
            proxies,
        }
    }
}

pub async fn limit(
    State(limiter): State<Arc<RateLimiter>>,
    request: Request,
    next: Next,
) -> Response {
    let peer = request
        .extensions()
        .get::<ConnectInfo<PeerAddr>>()
        .map(|ConnectInfo(peer)| peer.addr.ip());
    if let Some(peer) = peer {
        let ip = client_key(limiter.proxies.client_ip(peer, request.headers()));
        if let Err(wait) = limiter.buckets.take(ip, Instant::now()) {
            return ApiError::Service(ServiceError::RateLimited {
                message: format!(
                    "too many registration or token requests from {ip}; retry in {} s",
                    wait.as_secs().max(1)
                ),
                retry_after: wait.as_secs().max(1),
            })
            .into_response();
        }
    }
    next.run(request).await
}
