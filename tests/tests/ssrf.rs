//! Notifications cannot be turned against central's own network: with no allow list, a
//! channel pointing at loopback, private or otherwise local addresses, by address, by name or
//! as IPv4 written in IPv6, sends nothing there, and the refusal says why without echoing
//! anything the address answered.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use e2e::Central;
use reqwest::Method;
use serde_json::json;

/// A listener on loopback that counts the connections it gets and answers each with a page
/// no notification should ever read back.
async fn internal_service() -> anyhow::Result<(u16, Arc<AtomicUsize>)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let reached = Arc::new(AtomicUsize::new(0));
    let counter = reached.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut buffer = [0u8; 4096];
                let _ = stream.read(&mut buffer).await;
                let page = "internal-admin-page-secret";
                let _ = stream
                    .write_all(
                        format!(
                            "HTTP/1.1 404 Not Found\r\ncontent-length: {}\r\n\r\n{page}",
                            page.len()
                        )
                        .as_bytes(),
                    )
                    .await;
            });
        }
    });
    Ok((port, reached))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_no_channel_reaches_a_local_address() -> anyhow::Result<()> {
    // No allow list: the default policy.
    let central = Central::start_with(&[("CENTRAL_NOTIFY_ALLOWED_NETWORKS", "")]).await?;
    let (port, reached) = internal_service().await?;
    for url in [
        format!("http://127.0.0.1:{port}/hook"),
        format!("http://localhost:{port}/hook"),
        format!("http://[::ffff:127.0.0.1]:{port}/hook"),
        format!("http://[::ffff:7f00:1]:{port}/hook"),
        format!("http://127.1:{port}/hook"),
    ] {
        let channel = central
            .create_channel(json!({"name": "inside", "kind": "webhook", "url": url}))
            .await?;
        let (status, answer) = central
            .admin(
                Method::POST,
                &format!("/api/v1/notification-channels/{channel}/test"),
                None,
            )
            .await?;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["delivered"], false, "{url}: {answer}");
        let error = answer["error"].as_str().unwrap_or_default();
        assert!(error.contains("local address"), "{url}: {error}");
        assert!(!error.contains("internal-admin-page"), "{error}");
    }
    let mail = central
        .create_channel(json!({"name": "mail", "kind": "email",
            "url": format!("smtp://localhost:{port}"), "from": "c@example.com",
            "to": ["ops@example.com"]}))
        .await?;
    let (_, answer) = central
        .admin(
            Method::POST,
            &format!("/api/v1/notification-channels/{mail}/test"),
            None,
        )
        .await?;
    assert_eq!(answer["delivered"], false, "{answer}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        reached.load(Ordering::SeqCst),
        0,
        "nothing connected to the internal service"
    );

    // An operator who means it allows the network, and then the page's status is all that
    // comes back, never its text.
    let mut central = central;
    central.set_env("CENTRAL_NOTIFY_ALLOWED_NETWORKS", Some("127.0.0.0/8"));
    central.restart().await?;
    let channel = central
        .create_channel(json!({"name": "allowed", "kind": "webhook",
                               "url": format!("http://127.0.0.1:{port}/hook")}))
        .await?;
    let (_, answer) = central
        .admin(
            Method::POST,
            &format!("/api/v1/notification-channels/{channel}/test"),
            None,
        )
        .await?;
    assert_eq!(
        answer["error"], "the receiver answered 404 Not Found",
        "{answer}"
    );
    assert_eq!(reached.load(Ordering::SeqCst), 1);
    Ok(())
}
