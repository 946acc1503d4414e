//! Central over HTTPS (`CENTRAL_TLS_CERT`/`CENTRAL_TLS_KEY`) with a private CA, and an agent
//! that trusts that CA (`POLLER_CA_CERT`) polling through it; with `CENTRAL_TLS_CLIENT_CA`,
//! only agents showing a client certificate from that CA (`POLLER_TLS_CERT`/`KEY`) get in.

use std::path::{Path, PathBuf};
use std::time::Duration;

use e2e::{Agent, Central, Target};
use serde_json::json;

/// A CA, and a server certificate it signed for 127.0.0.1 and localhost: (ca, cert, key) PEM.
fn private_pki() -> anyhow::Result<(String, String, String)> {
    issued_by_new_ca("e2e test CA", |params| {
        params.subject_alt_names = vec![
            rcgen::SanType::IpAddress([127, 0, 0, 1].into()),
            rcgen::SanType::DnsName("localhost".try_into().unwrap()),
        ];
    })
}

/// A new CA and one certificate it signed, shaped by `shape`: (ca, cert, key) PEM.
fn issued_by_new_ca(
    name: &str,
    shape: impl FnOnce(&mut rcgen::CertificateParams),
) -> anyhow::Result<(String, String, String)> {
    let ca_key = rcgen::KeyPair::generate()?;
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    let ca = ca_params.self_signed(&ca_key)?;
    let issuer = rcgen::Issuer::new(ca_params, &ca_key);
    let key = rcgen::KeyPair::generate()?;
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    shape(&mut params);
    let cert = params.signed_by(&key, &issuer)?;
    Ok((ca.pem(), cert.pem(), key.serialize_pem()))
}

/// A client certificate for mutual TLS, from a new CA: (ca, cert, key) PEM.
fn client_pki(name: &str) -> anyhow::Result<(String, String, String)> {
    issued_by_new_ca(name, |params| {
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "edge-poller");
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    })
}

/// Writes each (file name, PEM) into `dir`; returns their paths in order.
fn write_all(dir: &Path, files: &[(&str, &str)]) -> anyhow::Result<Vec<PathBuf>> {
    files
        .iter()
        .map(|(name, pem)| {
            let path = dir.join(name);
            std::fs::write(&path, pem)?;
            Ok(path)
        })
        .collect()
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_client_ca_only_pollers_showing_its_certificate_get_in() -> anyhow::Result<()> {
    let pki = tempfile::tempdir()?;
    let (server_ca, server_cert, server_key) = private_pki()?;
    let (client_ca, client_cert, client_key) = client_pki("poller CA")?;
    let (_, rogue_cert, rogue_key) = client_pki("somebody else's CA")?;
    let paths = write_all(
        pki.path(),
        &[
            ("server-ca.pem", &server_ca),
            ("server.pem", &server_cert),
            ("server-key.pem", &server_key),
            ("client-ca.pem", &client_ca),
            ("client.pem", &client_cert),
            ("client-key.pem", &client_key),
        ],
    )?;
    let client_ca_path = paths[3].display().to_string();
    let central = Central::start_https_with(
        &paths[1],
        &paths[2],
        server_ca.as_bytes(),
        &[("CENTRAL_TLS_CLIENT_CA", &client_ca_path)],
    )
    .await?;
    // Operators need no certificate: the settings API answers (this is the harness's client).
    let token = central.registration_token().await?;

    let client = |identity: Option<(&str, &str)>| -> anyhow::Result<reqwest::Client> {
        let mut builder = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(server_ca.as_bytes())?);
        if let Some((cert, key)) = identity {
            builder = builder.identity(reqwest::Identity::from_pem(
                format!("{cert}\n{key}").as_bytes(),
            )?);
        }
        Ok(builder.build()?)
    };
    let register = |http: reqwest::Client| {
        let url = format!("{}/api/poller/register", central.url);
        let token = token.clone();
        async move {
            http.post(url)
                .json(&json!({"registration_token": token, "name": "edge", "version": "1"}))
                .send()
                .await
        }
    };
    let without = register(client(None)?).await?;
    assert_eq!(without.status(), 401);
    let body: serde_json::Value = without.json().await?;
    assert_eq!(body["error"], "client_certificate_required", "{body}");
    assert!(
        register(client(Some((&rogue_cert, &rogue_key)))?)
            .await
            .is_err(),
        "a certificate from another CA fails the handshake"
    );

    let target = Target::start().await?;
    let monitor = central
        .create_monitor(
            json!({"name": "m", "kind": "http", "target": target.url, "interval_ms": 5000}),
        )
        .await?;
    let mut agent = Agent::start(&central.url, None, &central.dir.path().join("agent")).await?;
    agent.kill().await;
    agent.set_env("POLLER_REGISTRATION_TOKEN", &token);
    agent.set_env("POLLER_CA_CERT", &paths[0].display().to_string());
    agent.set_env("POLLER_TLS_CERT", &paths[4].display().to_string());
    agent.set_env("POLLER_TLS_KEY", &paths[5].display().to_string());
    agent.restart().await?;
    central
        .wait_for_status(&monitor, "up", Duration::from_secs(40))
        .await?;
    Ok(())
}
