//! POSTing a body to an HTTP receiver: the webhook sender, also used by every other HTTP kind
//! (`super::Outgoing`). Signs the body when a webhook channel has a secret.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// POSTs a JSON body.
pub async fn post(
    http: &reqwest::Client,
    url: &str,
    notification_id: Option<uuid::Uuid>,
    body: String,
    headers: &[(String, String)],
    secret: Option<&str>,
) -> Result<(), String> {
    let content_type = "application/json";
    post_as(
        http,
        url,
        content_type,
        notification_id,
        body,
        headers,
        secret,
    )
    .await
}

/// POSTs a JSON body with `X-Notification-Id: id` (a status page's notice: its id is a
/// delivery's, not a UUID).
pub async fn post_with_id(
    http: &reqwest::Client,
    url: &str,
    id: &str,
    body: String,
    secret: Option<&str>,
) -> Result<(), String> {
    let request = http
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header("X-Notification-Id", id);
    send(request, body, secret).await
}

/// POSTs a body of `content_type`; the error says what the receiver or the network did.
pub async fn post_as(
    http: &reqwest::Client,
    url: &str,
    content_type: &str,
    notification_id: Option<uuid::Uuid>,
    body: String,
    headers: &[(String, String)],
    secret: Option<&str>,
) -> Result<(), String> {
    let mut request = http
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, content_type);
    if let Some(id) = notification_id {
        request = request.header("X-Notification-Id", id.to_string());
    }
    for (name, value) in headers {
        // Refused when the channel is saved; a row from before that rule is held to it here.
        let reserved = shared_proto::notifications::RESERVED_HEADERS
            .iter()
            .any(|r| name.eq_ignore_ascii_case(r))
            || name.to_ascii_lowercase().starts_with("proxy-");
        if !reserved {
            request = request.header(name.as_str(), value.as_str());
        }
    }
    send(request, body, secret).await
}

/// Sends `request` with `body`, signed when there is a secret.
async fn send(
    mut request: reqwest::RequestBuilder,
    body: String,
    secret: Option<&str>,
) -> Result<(), String> {
    if let Some(secret) = secret {
        request = request.header("X-Signature-256", signature(secret, body.as_bytes()));
    }
    let response = request
        .body(body)
        .send()
        .await
        // The URL stays out of the error: it may hold a secret (Slack's and most chat
        // webhooks' do), and the error reaches the log and the delivery log.
        .map_err(|e| format!("sending failed: {}", describe(&e.without_url())))?;
    let status = response.status();
    if status.is_success() {
        return Ok(());
    }
    // The status only: echoing what a receiver says would let a channel's test read pages of
    // whatever it points at.
    Err(format!("the receiver answered {status}"))
}

/// `sha256=<hex of HMAC-SHA256(secret, body)>`, as GitHub-style receivers check it.
pub fn signature(secret: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// The error with its causes, which reqwest keeps apart (`connection refused` is a cause).
fn describe(error: &reqwest::Error) -> String {
    crate::telemetry::error_chain(error)
}

#[cfg(test)]
mod tests {
    #[test]
    fn signature_matches_a_known_vector() {
        // RFC 4231 test case 2.
        assert_eq!(
            super::signature("Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
