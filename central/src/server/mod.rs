//! Central's HTTP server at the socket level: accepts connections, admits them under the
//! connection caps (`places`, in all and per client), completes TLS handshakes within a deadline (`tls`) and
//! serves HTTP/1.1 on each with hyper, which closes a connection whose request headers have
//! not all arrived within `header_read_timeout`. hyper starts that clock whenever it waits for
//! a request, so it is also how long an idle keep-alive connection is kept. A connection
//! whose client takes no byte of an answer for `send_timeout` is closed too.
//!
//! Written out here rather than through `axum::serve`, which runs hyper without a timer (no
//! header timeout at all) and has no place for connection caps. Owns sockets only: request
//! pools, deadlines and routes belong to `api`. Cost: O(1) work per connection accepted.

pub mod client_addr;
pub mod places;
pub mod tls;

use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio_io_timeout::TimeoutStream;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use client_addr::{client_key, TrustedProxies};
use places::Places;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

/// The most a request's headers may take, in bytes.
const MAX_HEADER_BYTES: usize = 64 * 1024;

/// How long open requests get to finish once central is asked to stop.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// File descriptors kept for what is not a client connection: the database, notifications
/// and their DNS lookups, logs.
const DESCRIPTORS_KEPT: u64 = 512;

/// The connection cap the open-files limit leaves room for. The soft limit is raised to the
/// hard one first (as Go's runtime does at start), since the common default of 1,024 is far
/// below what a server facing the internet needs; past it, accept fails for everyone.
pub fn connection_cap(configured: u32) -> usize {
    let configured = u64::from(configured);
    let limit = match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => limit,
        Err(e) => {
            tracing::warn!("cannot read the open-files limit: {e}");
            return configured as usize;
        }
    };
    let room = limit.saturating_sub(DESCRIPTORS_KEPT).max(1);
    if configured > room {
        tracing::warn!(
            "CENTRAL_MAX_CONNECTIONS {configured} lowered to {room}: the open-files limit is              {limit} (raise it with `ulimit -n` or Docker's --ulimit nofile)"
        );
    }
    configured.min(room) as usize
}

/// The client's address as every request sees it (`ConnectInfo<PeerAddr>`), and whether it
/// showed a client certificate that `CENTRAL_TLS_CLIENT_CA` vouches for.
#[derive(Debug, Clone, Copy)]
pub struct PeerAddr {
    pub addr: SocketAddr,
    pub client_certified: bool,
}

/// What the socket level is told by the configuration.
#[derive(Clone)]
pub struct ServerLimits {
    pub header_read_timeout: Duration,
    /// How long a write may make no progress (the client stopped reading) before the
    /// connection is closed.
    pub send_timeout: Duration,
    pub handshake_timeout: Duration,
    pub connections: Places,
    /// Their connections count only in the total: everyone behind them shares their address.
    pub proxies: TrustedProxies,
    /// Connections closed at once, by the cap they were past (`Refused::as_str`).
    pub refused: Family<Vec<(&'static str, &'static str)>, Counter>,
}

/// Serves `router` on `listener` (over TLS with `tls`) until `shutdown` resolves; then stops
/// accepting and gives open requests `SHUTDOWN_GRACE` to finish.
pub async fn serve(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    router: Router,
    limits: ServerLimits,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        // What one connection may buffer while its headers arrive (hyper's default is about
        // 400 KiB: 4 GiB over CENTRAL_MAX_CONNECTIONS); larger headers are answered 431.
        .max_buf_size(MAX_HEADER_BYTES);
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors, most likely: let some connections end.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let client = (!limits.proxies.trusts(peer.ip())).then(|| client_key(peer.ip()));
        let admitted = match limits.connections.take(client) {
            Ok(admitted) => admitted,
            Err(refused) => {
                tracing::debug!(%peer, cap = refused.as_str(), "connection refused");
                limits
                    .refused
                    .get_or_create(&vec![("cap", refused.as_str())])
                    .inc();
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        // hyper has no write timeout: a client that stops reading would keep the connection,
        // its task and the unsent answer for as long as it likes. Only writes are timed, and
        // only while they wait: a long poll that has nothing to send yet is not cut short.
        let mut stream = TimeoutStream::new(stream);
        stream.set_write_timeout(Some(limits.send_timeout));
        let stream = Box::pin(stream);
        let (http, router, watcher, tls) = (
            http.clone(),
            router.clone(),
            graceful.watcher(),
            tls.clone(),
        );
        let handshake_timeout = limits.handshake_timeout;
        tokio::spawn(async move {
            let _admitted = admitted;
            let Some(acceptor) = tls else {
                let peer = PeerAddr {
                    addr: peer,
                    client_certified: false,
                };
                return serve_connection(http, stream, peer, router, watcher).await;
            };
            let stream =
                match tokio::time::timeout(handshake_timeout, acceptor.accept(stream)).await {
                    Ok(Ok(stream)) => stream,
                    Ok(Err(e)) => return tracing::debug!(%peer, "TLS handshake failed: {e}"),
                    Err(_) => return tracing::debug!(%peer, "TLS handshake timed out"),
                };
            // The verifier accepted the handshake, so a certificate presented is a vouched one.
            let client_certified = stream
                .get_ref()
                .1
                .peer_certificates()
                .is_some_and(|c| !c.is_empty());
            let peer = PeerAddr {
                addr: peer,
                client_certified,
            };
            serve_connection(http, stream, peer, router, watcher).await;
        });
    }
    drop(listener);
    if tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            "requests still open {} s after the stop signal were cut off",
            SHUTDOWN_GRACE.as_secs()
        );
    }
}

async fn serve_connection<I>(
    http: http1::Builder,
    io: I,
    peer: PeerAddr,
    router: Router,
    watcher: Watcher,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
        request.extensions_mut().insert(ConnectInfo(peer));
        router.clone().oneshot(request)
    });
    let connection = http.serve_connection(TokioIo::new(io), service);
    if let Err(e) = watcher.watch(connection).await {
        // Header timeouts, resets and half-sent requests: the client's business.
        tracing::debug!(peer = %peer.addr, "connection ended: {e}");
    }
}

#[cfg(test)]
mod tests;
