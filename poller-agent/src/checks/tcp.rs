//! `tcp`: the target accepts a connection within the timeout.

use std::time::{Duration, Instant};

use serde_json::json;
use tokio::net::TcpStream;

use super::networks::Networks;
use super::{timeout_message, CheckOutcome};

/// Connects to `target` (`host:port`) where `networks` permits.
pub async fn check(target: &str, timeout: Duration, networks: &Networks) -> CheckOutcome {
    let started = Instant::now();
    let connect = async {
        let Some((host, Some(port))) = shared_proto::monitor::split_host_port(target) else {
            // Central validates `host:port`; anything else is left to the OS to refuse.
            return TcpStream::connect(target).await.map_err(Err);
        };
        match networks.addresses(host, port).await {
            Ok(Ok(addresses)) => TcpStream::connect(addresses.as_slice()).await.map_err(Err),
            Ok(Err(refusal)) => Err(Ok(refusal)),
            Err(e) => Err(Err(e)),
        }
    };
    match tokio::time::timeout(timeout, connect).await {
        Ok(Err(Ok(refusal))) => CheckOutcome::permanent(None, refusal, json!({})),
        Ok(Err(Err(e))) if is_unresolvable(&e) => {
            CheckOutcome::permanent(None, "dns: name does not resolve", json!({}))
        }
        Ok(Err(Err(e))) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            CheckOutcome::unreachable(Some(started.elapsed()), io_message(&e))
        }
        Ok(Err(Err(e))) => CheckOutcome::down(Some(started.elapsed()), io_message(&e), json!({})),
        Ok(Ok(stream)) => {
            let peer = stream
                .peer_addr()
                .map(|a| a.to_string())
                .unwrap_or_default();
            CheckOutcome::up(started.elapsed(), json!({"peer": peer}))
        }
        // Connecting is all this check does: no answer to it is an address that took none.
        Err(_) => CheckOutcome::unreachable(None, timeout_message(timeout)),
    }
}

/// The resolver said the name does not exist (as opposed to "try again").
fn is_unresolvable(error: &std::io::Error) -> bool {
    let text = error.to_string().to_ascii_lowercase();
    text.contains("name or service not known")
        || text.contains("no such host")
        || text.contains("nodename nor servname")
}

fn io_message(error: &std::io::Error) -> String {
    match error.kind() {
        std::io::ErrorKind::ConnectionRefused => "connection refused".into(),
        _ => error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn open_port_is_up_and_closed_port_is_refused() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let up = check(&addr, Duration::from_secs(2), &Networks::default()).await;
        assert_eq!(up.status, shared_proto::poller_api::ResultStatus::Up);
        drop(listener);
        let down = check(&addr, Duration::from_secs(2), &Networks::default()).await;
        assert_eq!(down.msg, "connection refused");
    }
}
