//! Delivery only: one sender per channel kind, and the outbox dispatcher (`dispatch`). It
//! knows nothing about monitors beyond the message it is handed, and decides nothing about
//! who is told what (that is `service::alerts`).

mod alertmanager;
pub mod dispatch;
mod email;
mod slack;
mod webhook;

use std::time::Duration;

use shared_proto::notifications::{ChannelKind, Notification};

use crate::store::ChannelRow;

/// How long one delivery may take before it counts as failed (and is retried).
pub(crate) const SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// Sends messages to channels.
#[derive(Clone)]
pub struct Notifier {
    http: reqwest::Client,
    /// Where messages may go (`CENTRAL_NOTIFY_ALLOWED_NETWORKS`); empty: anywhere.
    allowed: Vec<ipnet::IpNet>,
}

impl Notifier {
    pub fn new(allowed: Vec<ipnet::IpNet>) -> anyhow::Result<Notifier> {
        let http = reqwest::Client::builder()
            .timeout(SEND_TIMEOUT)
            .connect_timeout(Duration::from_secs(5))
            // A receiver answers for itself; a redirect is not followed to somewhere else.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("central/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Notifier { http, allowed })
    }

    /// Refuses a receiver whose host resolves outside the allowed networks. (The sender
    /// resolves the name again; a name that changes its answer in between could slip through,
    /// so allow by address where that matters.)
    async fn check_destination(&self, url: &str) -> Result<(), String> {
        if self.allowed.is_empty() {
            return Ok(());
        }
        let parsed = url::Url::parse(url).map_err(|e| format!("the url: {e}"))?;
        let host = parsed
            .host_str()
            .ok_or("the url has no host")?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = parsed.port_or_known_default().unwrap_or(25);
        let addresses: Vec<std::net::SocketAddr> = tokio::net::lookup_host((host.as_str(), port))
            .await
            .map_err(|e| format!("resolving {host}: {e}"))?
            .collect();
        match addresses
            .iter()
            .find(|a| !self.allowed.iter().any(|net| net.contains(&a.ip())))
        {
            None if !addresses.is_empty() => Ok(()),
            None => Err(format!("{host} resolves to no address")),
            Some(outside) => Err(format!(
                "{host} ({}) is outside CENTRAL_NOTIFY_ALLOWED_NETWORKS",
                outside.ip()
            )),
        }
    }

    /// Delivers `message` to `channel`; the error says what the receiver or the network did.
    pub async fn deliver(
        &self,
        channel: &ChannelRow,
        message: &Notification,
    ) -> Result<(), String> {
        let kind = ChannelKind::parse(&channel.kind)
            .ok_or_else(|| format!("the stored channel kind `{}` is unknown", channel.kind))?;
        let url = channel
            .url
            .as_deref()
            .ok_or_else(|| "the channel has no url".to_string())?;
        let headers: Vec<(String, String)> =
            serde_json::from_str::<std::collections::BTreeMap<String, String>>(&channel.headers)
                .unwrap_or_default()
                .into_iter()
                .collect();
        let sending = async {
            self.check_destination(url).await?;
            match kind {
                ChannelKind::Webhook => {
                    let body = serde_json::to_string(message).map_err(|e| e.to_string())?;
                    webhook::post(
                        &self.http,
                        url,
                        message,
                        body,
                        &headers,
                        channel.secret.as_deref(),
                    )
                    .await
                }
                ChannelKind::Slack => {
                    let body = slack::body(message);
                    webhook::post(&self.http, url, message, body, &headers, None).await
                }
                ChannelKind::Alertmanager => {
                    let body = alertmanager::body(message);
                    webhook::post(&self.http, url, message, body, &headers, None).await
                }
                ChannelKind::Email => {
                    let to: Vec<String> =
                        serde_json::from_str(&channel.email_to).unwrap_or_default();
                    email::send(
                        url,
                        channel.email_from.as_deref().unwrap_or_default(),
                        &to,
                        message,
                    )
                    .await
                }
            }
        };
        match tokio::time::timeout(SEND_TIMEOUT + Duration::from_secs(5), sending).await {
            Ok(outcome) => outcome,
            Err(_) => Err("the receiver did not answer in time".into()),
        }
    }
}

/// A one-line human summary of a message, for chat and mail subjects.
fn headline(message: &Notification) -> String {
    let mark = match message.event.as_str() {
        "monitor.up" | "poller.online" => "RESOLVED",
        "test" => "TEST",
        _ => "ALERT",
    };
    format!("[{mark}] {}", message.message)
}
