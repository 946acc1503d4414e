use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::routing::get;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use super::client_addr::TrustedProxies;
use super::*;

fn limits(per_client: usize, header_read_timeout: Duration) -> ServerLimits {
    ServerLimits {
        header_read_timeout,
        send_timeout: Duration::from_millis(600),
        handshake_timeout: Duration::from_millis(500),
        connections: Places::new(100, per_client),
        proxies: TrustedProxies::default(),
        refused: Family::default(),
    }
}

async fn start(limits: ServerLimits, tls: Option<TlsAcceptor>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router =
        Router::new()
            .route(
                "/peer",
                get(|ConnectInfo(peer): ConnectInfo<PeerAddr>| async move {
                    peer.addr.ip().to_string()
                }),
            )
            .route("/large", get(|| async { vec![b'x'; LARGE] }));
    tokio::spawn(serve(listener, tls, router, limits, std::future::pending()));
    addr
}

/// A connection from `from` (any 127/8 address is this machine's).
async fn connect_from(from: &str, to: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
    socket.connect(to).await.unwrap()
}

/// Sends one request and reads the whole answer (the server closes after it).
async fn get_peer<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S) -> String {
    stream
        .write_all(b"GET /peer HTTP/1.1\r\nHost: central\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_string(&mut answer))
        .await
        .expect("answered")
        .unwrap();
    answer
}

/// Waits for the server to close `stream`; how long that took.
async fn closed_after(mut stream: TcpStream) -> Duration {
    let started = Instant::now();
    let mut buffer = [0u8; 64];
    loop {
        match tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buffer)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return started.elapsed(),
            Ok(Ok(_)) => continue,
            Err(_) => panic!("the connection was still open after 10 s"),
        }
    }
}

#[tokio::test]
async fn a_request_whose_headers_never_finish_is_closed_and_others_are_served_meanwhile() {
    let addr = start(limits(100, Duration::from_millis(600)), None).await;
    let mut slow = connect_from("127.0.0.1", addr).await;
    slow.write_all(b"POST /login HTTP/1.1\r\nHost: central\r\nX-Slow: ")
        .await
        .unwrap();
    let idle = connect_from("127.0.0.1", addr).await;
    let answer = get_peer(connect_from("127.0.0.1", addr).await).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let waited = closed_after(slow).await;
    assert!(
        waited < Duration::from_secs(3),
        "closed by the header timeout, not by chance ({waited:?})"
    );
    // A connection that never sends a byte is closed by the same clock.
    closed_after(idle).await;
}

/// An answer larger than what the kernel buffers between server and client.
const LARGE: usize = 32 << 20;

#[tokio::test]
async fn a_client_that_stops_reading_an_answer_is_disconnected() {
    let addr = start(limits(100, Duration::from_secs(30)), None).await;
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stalled = socket.connect(addr).await.unwrap();
    stalled
        .write_all(b"GET /large HTTP/1.1\r\nHost: central\r\n\r\n")
        .await
        .unwrap();
    // Reads nothing for longer than the send timeout (600 ms), then all there is.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut received = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), stalled.read_to_end(&mut received))
        .await
        .expect("the connection ended");
    assert!(
        received.len() < LARGE,
        "closed before the answer was sent ({} bytes, {read:?})",
        received.len()
    );
    // Whoever reads gets the whole answer.
    let mut reader = connect_from("127.0.0.1", addr).await;
    reader
        .write_all(b"GET /large HTTP/1.1\r\nHost: central\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut whole = Vec::new();
    reader.read_to_end(&mut whole).await.unwrap();
    assert!(whole.len() > LARGE, "{}", whole.len());
}

#[tokio::test]
async fn a_client_past_its_connection_cap_is_closed_at_once_and_others_get_in() {
    let addr = start(limits(2, Duration::from_secs(30)), None).await;
    let _held = [
        connect_from("127.0.0.1", addr).await,
        connect_from("127.0.0.1", addr).await,
    ];
    let waited = closed_after(connect_from("127.0.0.1", addr).await).await;
    assert!(waited < Duration::from_secs(2), "{waited:?}");
    let answer = get_peer(connect_from("127.0.0.2", addr).await).await;
    assert!(answer.ends_with("127.0.0.2"), "{answer}");
}

/// Writes a self-signed certificate for 127.0.0.1; returns its DER and the acceptor.
fn self_signed(dir: &Path) -> (CertificateDer<'static>, TlsAcceptor) {
    let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).unwrap();
    let (cert_path, key_path) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert_path, cert.cert.pem()).unwrap();
    std::fs::write(&key_path, cert.signing_key.serialize_pem()).unwrap();
    let acceptor = tls::acceptor(&cert_path, &key_path, None).unwrap();
    (cert.cert.der().clone(), acceptor)
}

async fn tls_client(
    addr: SocketAddr,
    cert: CertificateDer<'static>,
) -> tokio_rustls::client::TlsStream<TcpStream> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = connect_from("127.0.0.1", addr).await;
    let name = ServerName::try_from("127.0.0.1").unwrap();
    connector.connect(name, tcp).await.unwrap()
}

#[tokio::test]
async fn silent_tls_handshakes_hold_up_nobody_and_are_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, acceptor) = self_signed(dir.path());
    let addr = start(limits(100, Duration::from_secs(30)), Some(acceptor)).await;
    let mut silent = Vec::new();
    for _ in 0..20 {
        silent.push(connect_from("127.0.0.1", addr).await);
    }
    let answer = get_peer(tls_client(addr, cert).await).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    for stream in silent {
        let waited = closed_after(stream).await;
        assert!(waited < Duration::from_secs(3), "{waited:?}");
    }
}
