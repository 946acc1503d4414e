//! `tcp`: the target accepts a connection within the timeout.

use std::time::{Duration, Instant};

use serde_json::json;
use tokio::net::TcpStream;

use super::{timeout_message, CheckOutcome};

pub async fn check(target: &str, timeout: Duration) -> CheckOutcome {
    let started = Instant::now();
    match tokio::time::timeout(timeout, TcpStream::connect(target)).await {
        Ok(Ok(stream)) => {
            let peer = stream
                .peer_addr()
                .map(|a| a.to_string())
                .unwrap_or_default();
            CheckOutcome::up(started.elapsed(), json!({"peer": peer}))
        }
        Ok(Err(e)) if is_unresolvable(&e) => {
            CheckOutcome::permanent(None, "dns: name does not resolve", json!({}))
        }
        Ok(Err(e)) => CheckOutcome::down(Some(started.elapsed()), io_message(&e), json!({})),
        Err(_) => CheckOutcome::down(None, timeout_message(timeout), json!({})),
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
        let up = check(&addr, Duration::from_secs(2)).await;
        assert_eq!(up.status, shared_proto::poller_api::ResultStatus::Up);
        drop(listener);
        let down = check(&addr, Duration::from_secs(2)).await;
        assert_eq!(down.msg, "connection refused");
    }
}
