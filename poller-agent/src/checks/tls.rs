//! `tls`: the certificate chain is valid for the host, and does not expire within
//! `warn_days`. An invalid or expired certificate is a permanent failure.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use serde_json::json;
use shared_proto::monitor::split_host_port;

use super::networks::Networks;
use shared_proto::settings::TlsSettings;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::{timeout_message, CheckOutcome};

/// Client configurations built once: one verifying against the web PKI roots, one that reads
/// any certificate (for `verify: false`, to watch expiry of private certificates).
#[derive(Clone)]
pub struct TlsChecker {
    verifying: Arc<ClientConfig>,
    reading: Arc<ClientConfig>,
    networks: Arc<Networks>,
}

impl TlsChecker {
    pub fn new(networks: Arc<Networks>) -> anyhow::Result<Self> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let roots = RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        let verifying = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let reading = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAny(provider)))
            .with_no_client_auth();
        Ok(Self {
            verifying: Arc::new(verifying),
            reading: Arc::new(reading),
            networks,
        })
    }

    pub async fn check(
        &self,
        target: &str,
        settings: &TlsSettings,
        timeout: Duration,
    ) -> CheckOutcome {
        let started = Instant::now();
        match tokio::time::timeout(timeout, self.handshake(target, settings, started)).await {
            Ok(outcome) => outcome,
            Err(_) => CheckOutcome::down(None, timeout_message(timeout), json!({})),
        }
    }

    async fn handshake(
        &self,
        target: &str,
        settings: &TlsSettings,
        started: Instant,
    ) -> CheckOutcome {
        let Some((host, port)) = split_host_port(target) else {
            return CheckOutcome::permanent(
                None,
                format!("bad config: target `{target}`"),
                json!({}),
            );
        };
        let sni = settings
            .server_name
            .clone()
            .unwrap_or_else(|| host.to_string());
        let Ok(server_name) = ServerName::try_from(sni.clone()) else {
            return CheckOutcome::permanent(
                None,
                format!("bad config: `{sni}` is not a server name"),
                json!({}),
            );
        };
        let addresses = match self.networks.addresses(host, port.unwrap_or(443)).await {
            Ok(Ok(addresses)) => addresses,
            Ok(Err(refusal)) => return CheckOutcome::permanent(None, refusal, json!({})),
            Err(e) => {
                return CheckOutcome::down(
                    Some(started.elapsed()),
                    format!("connect failed: {e}"),
                    json!({}),
                )
            }
        };
        let tcp = match TcpStream::connect(addresses.as_slice()).await {
            Ok(tcp) => tcp,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                return CheckOutcome::unreachable(Some(started.elapsed()), "connection refused")
            }
            Err(e) => {
                return CheckOutcome::unreachable(
                    Some(started.elapsed()),
                    format!("connect failed: {e}"),
                )
            }
        };
        let config = if settings.verify {
            &self.verifying
        } else {
            &self.reading
        };
        let stream = match TlsConnector::from(config.clone())
            .connect(server_name, tcp)
            .await
        {
            Ok(stream) => stream,
            Err(e) => return handshake_failure(&e, started.elapsed()),
        };
        let latency = started.elapsed();
        let Some(leaf) = stream
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|c| c.first())
        else {
            return CheckOutcome::down(Some(latency), "no certificate presented", json!({}));
        };
        let (_, certificate) = match x509_parser::parse_x509_certificate(leaf.as_ref()) {
            Ok(parsed) => parsed,
            Err(e) => {
                return CheckOutcome::permanent(
                    Some(latency),
                    format!("certificate unreadable: {e}"),
                    json!({}),
                )
            }
        };
        let not_after = certificate.validity().not_after.timestamp();
        let seconds_left = not_after - chrono::Utc::now().timestamp();
        let days_left = seconds_left.div_euclid(86_400);
        let meta = json!({
            "days_left": days_left,
            "not_after": chrono::DateTime::from_timestamp(not_after, 0),
            "subject": certificate.subject().to_string(),
            "issuer": certificate.issuer().to_string(),
        });
        if seconds_left < 0 {
            let ago = (-seconds_left) / 86_400;
            CheckOutcome::permanent(
                Some(latency),
                format!("certificate expired {ago} days ago"),
                meta,
            )
        } else if days_left < i64::from(settings.warn_days) {
            CheckOutcome::down(
                Some(latency),
                format!("certificate expires in {days_left} days"),
                meta,
            )
        } else {
            CheckOutcome::up(latency, meta)
        }
    }
}

fn handshake_failure(error: &std::io::Error, elapsed: Duration) -> CheckOutcome {
    let invalid = error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .is_some_and(|e| matches!(e, rustls::Error::InvalidCertificate(_)));
    if invalid {
        CheckOutcome::permanent(
            Some(elapsed),
            format!("certificate invalid: {error}"),
            json!({}),
        )
    } else {
        CheckOutcome::down(
            Some(elapsed),
            format!("tls handshake failed: {error}"),
            json!({}),
        )
    }
}

/// Accepts any certificate but still checks handshake signatures, so the peer really holds
/// the key of the certificate we then read.
#[derive(Debug)]
struct AcceptAny(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::PrivateKeyDer;
    use shared_proto::poller_api::ResultStatus;

    /// A TLS server on loopback whose self-signed certificate expires in `days` days (+1 h).
    async fn tls_server(days: i64) -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        params.not_before = time::OffsetDateTime::now_utc() - time::Duration::days(1);
        params.not_after =
            time::OffsetDateTime::now_utc() + time::Duration::days(days) + time::Duration::hours(1);
        let cert = params.self_signed(&key).unwrap();
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let _ = acceptor.accept(tcp).await;
                });
            }
        });
        format!("localhost:{port}")
    }

    fn settings(verify: bool, warn_days: u32) -> TlsSettings {
        TlsSettings {
            verify,
            warn_days,
            server_name: None,
        }
    }

    #[tokio::test]
    async fn expiry_and_chain_validity() {
        let target = tls_server(3).await;
        let checker = TlsChecker::new(Arc::default()).unwrap();
        let timeout = Duration::from_secs(3);

        let untrusted = checker.check(&target, &settings(true, 7), timeout).await;
        assert!(untrusted.permanent, "{untrusted:?}");
        assert!(
            untrusted.msg.starts_with("certificate invalid"),
            "{}",
            untrusted.msg
        );

        let soon = checker.check(&target, &settings(false, 7), timeout).await;
        assert_eq!(soon.msg, "certificate expires in 3 days");
        assert_eq!(soon.status, ResultStatus::Down);

        let fine = checker.check(&target, &settings(false, 1), timeout).await;
        assert_eq!(fine.status, ResultStatus::Up, "{fine:?}");
        assert_eq!(fine.meta["days_left"], 3);
    }

    #[tokio::test]
    async fn an_expired_certificate_is_permanent() {
        let target = tls_server(-3).await;
        let outcome = TlsChecker::new(Arc::default())
            .unwrap()
            .check(&target, &settings(false, 7), Duration::from_secs(3))
            .await;
        assert!(outcome.permanent);
        assert_eq!(outcome.msg, "certificate expired 2 days ago");
    }
}
