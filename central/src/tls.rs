//! HTTPS for central (`CENTRAL_TLS_CERT`, `CENTRAL_TLS_KEY`, optionally `CENTRAL_TLS_CLIENT_CA`
//! for mutual TLS): a listener whose connections arrive already through their TLS handshake.
//! Handshakes run in their own tasks, so a slow or hostile client never holds up the accept
//! loop, and at most `MAX_CONCURRENT_HANDSHAKES` run at once: past that, new connections wait
//! in the kernel's backlog instead of costing memory and CPU here.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// A handshake that takes longer than this is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Handshakes in progress at once.
pub const MAX_CONCURRENT_HANDSHAKES: usize = 256;

/// Reads a PEM certificate chain and private key, and with `client_ca` asks every client for a
/// certificate signed by that CA. Clients without one may still connect (the settings API and
/// probes do not need one); `PeerAddr::client_certified` tells the poller API who showed one.
pub fn acceptor(cert: &Path, key: &Path, client_ca: Option<&Path>) -> anyhow::Result<TlsAcceptor> {
    let chain = CertificateDer::pem_file_iter(cert)
        .with_context(|| format!("cannot read CENTRAL_TLS_CERT {}", cert.display()))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| {
            format!(
                "CENTRAL_TLS_CERT {} is not a PEM certificate chain",
                cert.display()
            )
        })?;
    anyhow::ensure!(
        !chain.is_empty(),
        "CENTRAL_TLS_CERT {} holds no certificate",
        cert.display()
    );
    let key = PrivateKeyDer::from_pem_file(key)
        .with_context(|| format!("CENTRAL_TLS_KEY {} is not a PEM private key", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => builder.with_client_cert_verifier(client_verifier(path, provider)?),
    };
    let config = builder
        .with_single_cert(chain, key)
        .context("the TLS certificate and key do not fit together")?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

fn client_verifier(
    path: &Path,
    provider: Arc<rustls::crypto::CryptoProvider>,
) -> anyhow::Result<Arc<dyn rustls::server::danger::ClientCertVerifier>> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(path)
        .with_context(|| format!("cannot read CENTRAL_TLS_CLIENT_CA {}", path.display()))?
    {
        let cert = cert.with_context(|| {
            format!(
                "CENTRAL_TLS_CLIENT_CA {} is not a PEM certificate",
                path.display()
            )
        })?;
        roots.add(cert).with_context(|| {
            format!(
                "CENTRAL_TLS_CLIENT_CA {} holds an unusable CA certificate",
                path.display()
            )
        })?;
    }
    anyhow::ensure!(
        !roots.is_empty(),
        "CENTRAL_TLS_CLIENT_CA {} holds no certificate",
        path.display()
    );
    rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .allow_unauthenticated()
        .build()
        .context("cannot build the client certificate verifier")
}

pub struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl TlsListener {
    pub fn new(tcp: TcpListener, acceptor: TlsAcceptor) -> std::io::Result<TlsListener> {
        Self::with_limits(tcp, acceptor, MAX_CONCURRENT_HANDSHAKES, HANDSHAKE_TIMEOUT)
    }

    fn with_limits(
        tcp: TcpListener,
        acceptor: TlsAcceptor,
        max_handshakes: usize,
        handshake_timeout: Duration,
    ) -> std::io::Result<TlsListener> {
        let local = tcp.local_addr()?;
        let (sender, ready) = mpsc::channel(64);
        let handshakes = Arc::new(Semaphore::new(max_handshakes));
        tokio::spawn(async move {
            loop {
                let Ok(slot) = handshakes.clone().acquire_owned().await else {
                    return;
                };
                let (stream, peer) = match tcp.accept().await {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        tracing::debug!("accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let (acceptor, sender) = (acceptor.clone(), sender.clone());
                tokio::spawn(async move {
                    let handshake =
                        tokio::time::timeout(handshake_timeout, acceptor.accept(stream)).await;
                    drop(slot);
                    match handshake {
                        Ok(Ok(tls)) => {
                            let _ = sender.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => tracing::debug!(%peer, "TLS handshake failed: {e}"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(TlsListener { ready, local })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(connection) => connection,
            // The accept loop never ends while the listener lives.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}

/// The client's address, for `ConnectInfo`, over plain or TLS connections alike, and whether
/// it showed a client certificate that `CENTRAL_TLS_CLIENT_CA` vouches for.
#[derive(Debug, Clone, Copy)]
pub struct PeerAddr {
    pub addr: SocketAddr,
    pub client_certified: bool,
}

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, TcpListener>>
    for PeerAddr
{
    fn connect_info(stream: axum::serve::IncomingStream<'_, TcpListener>) -> Self {
        PeerAddr {
            addr: *stream.remote_addr(),
            client_certified: false,
        }
    }
}

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, TlsListener>>
    for PeerAddr
{
    fn connect_info(stream: axum::serve::IncomingStream<'_, TlsListener>) -> Self {
        // The verifier accepted the handshake, so a certificate presented is a vouched one.
        let (_, session) = stream.io().get_ref();
        PeerAddr {
            addr: *stream.remote_addr(),
            client_certified: session.peer_certificates().is_some_and(|c| !c.is_empty()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use axum::serve::Listener;
    use rustls::pki_types::ServerName;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// Writes a self-signed certificate for 127.0.0.1; returns its DER and the acceptor.
    fn self_signed(dir: &Path) -> (CertificateDer<'static>, TlsAcceptor) {
        let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).unwrap();
        let (cert_path, key_path) = (dir.join("cert.pem"), dir.join("key.pem"));
        std::fs::write(&cert_path, cert.cert.pem()).unwrap();
        std::fs::write(&key_path, cert.signing_key.serialize_pem()).unwrap();
        let acceptor = acceptor(&cert_path, &key_path, None).unwrap();
        (cert.cert.der().clone(), acceptor)
    }

    /// A TLS client that trusts `cert`; completes the handshake and one byte of echo.
    async fn handshake(addr: SocketAddr, cert: CertificateDer<'static>) {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(cert).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let tcp = TcpStream::connect(addr).await.unwrap();
        let name = ServerName::try_from("127.0.0.1").unwrap();
        let mut tls = connector.connect(name, tcp).await.unwrap();
        tls.write_all(b"x").await.unwrap();
        let mut byte = [0u8; 1];
        tls.read_exact(&mut byte).await.unwrap();
        assert_eq!(&byte, b"x");
    }

    #[tokio::test]
    async fn idle_handshakes_past_the_cap_wait_and_a_real_client_gets_through_after_them() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, acceptor) = self_signed(dir.path());
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let timeout = Duration::from_millis(800);
        let mut listener = TlsListener::with_limits(tcp, acceptor, 2, timeout).unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let (mut tls, _) = listener.accept().await;
                tokio::spawn(async move {
                    let mut byte = [0u8; 1];
                    if tls.read_exact(&mut byte).await.is_ok() {
                        let _ = tls.write_all(&byte).await;
                    }
                });
            }
        });

        // Two connections that never say hello take both handshake slots.
        let idle = [
            TcpStream::connect(addr).await.unwrap(),
            TcpStream::connect(addr).await.unwrap(),
        ];
        tokio::time::sleep(Duration::from_millis(100)).await;
        let started = Instant::now();
        let real = tokio::spawn(handshake(addr, cert.clone()));
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            !real.is_finished(),
            "with both slots held, a third handshake must wait"
        );
        tokio::time::timeout(Duration::from_secs(10), real)
            .await
            .expect("the slots free when the idle handshakes time out")
            .unwrap();
        assert!(
            started.elapsed() >= Duration::from_millis(500),
            "it got through only after the idle ones were dropped ({:?})",
            started.elapsed()
        );
        drop(idle);

        // With the slots free again, the next client is served as usual.
        handshake(addr, cert).await;
    }
}
