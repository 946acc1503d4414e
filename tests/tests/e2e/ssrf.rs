//! Notifications cannot be turned against central's own network: with no allow list, a
//! channel pointing at loopback, private or otherwise local addresses, by address, by name or
//! as IPv4 written in IPv6, sends nothing there, and the refusal says why without echoing
//! anything the address answered.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use std::net::Ipv4Addr;

use e2e::dns::RotatingDns;
use e2e::Central;
use serde_json::json;

/// A listener on loopback that counts the connections it gets and answers each with a page
/// no notification should ever read back.
async fn internal_service() -> anyhow::Result<(u16, Arc<AtomicUsize>)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    Ok((port, serve_counting(listener, "404 Not Found")))
}

/// Answers every request on `listener` with `status` and a page, closing the connection (so
/// that each request needs a connection, and a name is resolved, of its own); counts them.
fn serve_counting(listener: tokio::net::TcpListener, status: &'static str) -> Arc<AtomicUsize> {
    let reached = Arc::new(AtomicUsize::new(0));
    let counter = reached.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                // The whole request first (headers, then the body they announce), so that
                // the answer is not taken for an interrupted exchange.
                let mut request = Vec::new();
                let mut buffer = [0u8; 4096];
                let read = async {
                    loop {
                        let n = stream.read(&mut buffer).await.unwrap_or(0);
                        if n == 0 {
                            return;
                        }
                        request.extend_from_slice(&buffer[..n]);
                        let text = String::from_utf8_lossy(&request).to_ascii_lowercase();
                        if let Some(end) = text.find("\r\n\r\n") {
                            let length = text
                                .lines()
                                .find_map(|l| l.strip_prefix("content-length:"))
                                .and_then(|v| v.trim().parse::<usize>().ok())
                                .unwrap_or(0);
                            if request.len() >= end + 4 + length {
                                return;
                            }
                        }
                    }
                };
                let _ = tokio::time::timeout(Duration::from_secs(5), read).await;
                let page = "internal-admin-page-secret";
                let _ = stream
                    .write_all(
                        format!(
                            "HTTP/1.1 {status}\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{page}",
                            page.len()
                        )
                        .as_bytes(),
                    )
                    .await;
            });
        }
    });
    reached
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
    ] {
        let channel = central
            .create_channel(json!({"name": "inside", "kind": "webhook", "url": url}))
            .await?;
        let (status, answer) = central.test_channel(&channel).await?;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["delivered"], false, "{url}: {answer}");
        let error = answer["error"].as_str().unwrap_or_default();
        assert!(error.contains("local address"), "{url}: {error}");
        assert!(!error.contains("internal-admin-page"), "{error}");
    }
    // IPv4 shorthands (`127.1`, which URL parsers read as 127.0.0.1) are not a host form
    // central takes: refused as the channel is written.
    let (status, body) = central
        .admin(
            reqwest::Method::POST,
            "/api/v1/notification-channels",
            Some(json!({"name": "short", "kind": "webhook",
                        "url": format!("http://127.1:{port}/hook")})),
        )
        .await?;
    assert_eq!(status, 400, "{body}");
    let mail = central
        .create_channel(json!({"name": "mail", "kind": "email",
            "url": format!("smtp://localhost:{port}"), "from": "c@example.com",
            "to": ["ops@example.com"]}))
        .await?;
    let (_, answer) = central.test_channel(&mail).await?;
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
    let (_, answer) = central.test_channel(&channel).await?;
    assert_eq!(
        answer["error"], "the receiver answered 404 Not Found",
        "{answer}"
    );
    assert_eq!(reached.load(Ordering::SeqCst), 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_that_answers_differently_each_time_is_connected_to_as_judged() -> anyhow::Result<()>
{
    // The receiver at 127.0.0.2 (allowed) and an internal service at 127.0.0.1 on the same
    // port (not allowed); the name answers one, then the other, then the first again.
    let (receiver, port) = loop {
        let receiver = tokio::net::TcpListener::bind("127.0.0.2:0").await?;
        let port = receiver.local_addr()?.port();
        if let Ok(internal) = tokio::net::TcpListener::bind(("127.0.0.1", port)).await {
            break ((receiver, internal), port);
        }
    };
    let delivered = serve_counting(receiver.0, "200 OK");
    let reached = serve_counting(receiver.1, "404 Not Found");
    let dns = RotatingDns::start(vec![
        Ipv4Addr::new(127, 0, 0, 2),
        Ipv4Addr::new(127, 0, 0, 1),
    ])
    .await?;
    let central = Central::start_with(&[
        ("CENTRAL_NOTIFY_ALLOWED_NETWORKS", "127.0.0.2/32"),
        ("CENTRAL_NOTIFY_DNS_SERVER", &dns.addr.to_string()),
    ])
    .await?;
    let channel = central
        .create_channel(json!({"name": "rebinding", "kind": "webhook",
                               "url": format!("http://rebind.test:{port}/hook")}))
        .await?;
    let mut refusals = Vec::new();
    for _ in 0..6 {
        let (status, answer) = central.test_channel(&channel).await?;
        assert_eq!(status, 200, "{answer}");
        if answer["delivered"] == false {
            refusals.push(answer["error"].as_str().unwrap_or_default().to_string());
        }
    }
    assert!(
        dns.queries() >= 6,
        "each send asked anew: {}",
        dns.queries()
    );
    assert_eq!(
        reached.load(Ordering::SeqCst),
        0,
        "never connected to 127.0.0.1"
    );
    assert!(
        delivered.load(Ordering::SeqCst) >= 3,
        "sends answered 127.0.0.2 arrived"
    );
    assert!(
        !refusals.is_empty(),
        "the sends answered 127.0.0.1 were refused"
    );
    for refusal in &refusals {
        assert!(
            refusal.contains("127.0.0.1") && refusal.contains("CENTRAL_NOTIFY_ALLOWED_NETWORKS"),
            "{refusal}"
        );
    }
    Ok(())
}
