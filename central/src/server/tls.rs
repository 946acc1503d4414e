//! HTTPS for central (`CENTRAL_TLS_CERT`, `CENTRAL_TLS_KEY`, optionally `CENTRAL_TLS_CLIENT_CA`
//! for mutual TLS): the acceptor the serve loop hands each admitted connection to. Each
//! handshake runs in its connection's own task, so a slow or hostile client never holds up
//! the accept loop or another handshake, and one that has not finished within
//! `HANDSHAKE_TIMEOUT` is dropped; how many may be under way is bounded by the connection caps.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

/// A handshake that takes longer than this is dropped.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

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
