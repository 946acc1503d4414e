//! Central over HTTPS (`CENTRAL_TLS_CERT`/`CENTRAL_TLS_KEY`) with a private CA, and an agent
//! that trusts that CA (`POLLER_CA_CERT`) polling through it.

use std::time::Duration;

use e2e::{Agent, Central, Target};
use serde_json::json;

/// A CA, and a server certificate it signed for 127.0.0.1 and localhost: (ca, cert, key) PEM.
fn private_pki() -> anyhow::Result<(String, String, String)> {
    let ca_key = rcgen::KeyPair::generate()?;
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "e2e test CA");
    let ca = ca_params.self_signed(&ca_key)?;
    let issuer = rcgen::Issuer::new(ca_params, &ca_key);
    let key = rcgen::KeyPair::generate()?;
    let params =
        rcgen::CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])?;
    let cert = params.signed_by(&key, &issuer)?;
    Ok((ca.pem(), cert.pem(), key.serialize_pem()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_polls_through_a_central_serving_https() -> anyhow::Result<()> {
    let pki = tempfile::tempdir()?;
    let (ca, cert, key) = private_pki()?;
    let (ca_path, cert_path, key_path) = (
        pki.path().join("ca.pem"),
        pki.path().join("cert.pem"),
        pki.path().join("key.pem"),
    );
    std::fs::write(&ca_path, &ca)?;
    std::fs::write(&cert_path, &cert)?;
    std::fs::write(&key_path, &key)?;

    let central = Central::start_https(&cert_path, &key_path, ca.as_bytes()).await?;
    assert!(central.url.starts_with("https://"));
    let plain = reqwest::get(central.url.replace("https://", "http://") + "/healthz").await;
    assert!(
        plain.is_err() || !plain.unwrap().status().is_success(),
        "no plain HTTP on the HTTPS port"
    );

    let target = Target::start().await?;
    let token = central.registration_token().await?;
    let monitor = central
        .create_monitor(
            json!({"name": "m", "kind": "http", "target": target.url, "interval_ms": 5000}),
        )
        .await?;
    let mut agent = Agent::start(&central.url, None, &central.dir.path().join("agent")).await?;
    agent.kill().await;
    agent.set_env("POLLER_REGISTRATION_TOKEN", &token);
    agent.set_env("POLLER_CA_CERT", &ca_path.display().to_string());
    agent.restart().await?;
    central
        .wait_for_status(&monitor, "up", Duration::from_secs(40))
        .await?;
    Ok(())
}
