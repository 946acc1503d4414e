//! Delivery only: one sender per channel kind (the outbox's dispatcher, `duties::delivery`,
//! hands them notices). It
//! knows nothing about monitors beyond the message it is handed, and decides nothing about
//! who is told what (that is `service::alerts`).

mod alertmanager;
mod chat;
pub mod destination;
mod email;
mod facts;
mod incidents;
pub mod notices;
mod push;
mod slack;
pub mod template;
mod webhook;

pub use destination::Destinations;
pub use facts::Facts;
use facts::{clip, headline, text, Outgoing};

use std::time::Duration;

use shared_proto::notifications::{ChannelKind, ChannelSpec, Notification, WebhookFormat};

/// How long one delivery may take before it counts as failed (and is retried).
pub(crate) const SEND_TIMEOUT: Duration = Duration::from_secs(10);
const FIRST_RETRY_MS: i64 = 1_000;
const MAX_RETRY_MS: i64 = 10 * 60 * 1000;

/// The wait before attempt `attempts + 1`: doubling from a second up to ten minutes, ±20 %.
pub fn retry_delay_ms(attempts: u32, jitter: f64) -> i64 {
    let base = FIRST_RETRY_MS
        .saturating_mul(1 << attempts.min(20))
        .min(MAX_RETRY_MS);
    (base as f64 * (1.0 + jitter.clamp(-0.2, 0.2))) as i64
}

/// Sends messages to channels.
#[derive(Clone)]
pub struct Notifier {
    http: reqwest::Client,
    /// Where messages may go (`destination`).
    destinations: destination::Destinations,
    /// Where operators reach central (`CENTRAL_PUBLIC_URL`), for links in messages.
    public_url: Option<String>,
    /// How often a firing Alertmanager alert is sent again (`CENTRAL_ALERTMANAGER_RESEND_INTERVAL`).
    resend_interval: Duration,
    /// Central's own mail server (`CENTRAL_MAIL_URL`), for status pages' subscribers.
    mail: Option<notices::MailServer>,
    /// The client for strangers' webhooks (status pages' subscribers), under a policy of
    /// their own (`CENTRAL_SUBSCRIBER_ALLOWED_NETWORKS`).
    strangers: reqwest::Client,
}

/// A client that connects only where `destinations` permits, follows no redirect and uses no
/// proxy.
fn client_for(destinations: &destination::Destinations) -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .timeout(SEND_TIMEOUT)
        .connect_timeout(Duration::from_secs(5))
        // A receiver answers for itself; a redirect is not followed to somewhere else.
        .redirect(reqwest::redirect::Policy::none())
        // Every name is resolved under the policy, and connected to as resolved.
        .dns_resolver(std::sync::Arc::new(destination::PinnedResolver(
            destinations.clone(),
        )))
        // A proxy would connect on its own terms, out of the policy's sight.
        .no_proxy()
        .user_agent(concat!("central/", env!("CARGO_PKG_VERSION")))
        .build()?)
}

impl Notifier {
    pub fn new(
        destinations: Destinations,
        public_url: Option<String>,
        resend_interval: Duration,
        mail: Option<notices::MailServer>,
        strangers: destination::Destinations,
    ) -> anyhow::Result<Notifier> {
        Ok(Notifier {
            http: client_for(&destinations)?,
            strangers: client_for(&strangers)?,
            destinations,
            public_url,
            // Each send is a request per instance; more often than a second is never needed.
            resend_interval: resend_interval.max(Duration::from_secs(1)),
            mail,
        })
    }

    pub fn resend_interval(&self) -> Duration {
        self.resend_interval
    }

    /// Sends alerts to every Alertmanager instance at once; delivered when one of them took
    /// them (as Prometheus counts it: an HA cluster shares what one instance got).
    /// `messages`: one message (its id in `X-Notification-Id`), or a re-send of several.
    async fn to_alertmanagers(
        &self,
        instances: &[&str],
        messages: &[&Notification],
        headers: &[(String, String)],
    ) -> Result<(), String> {
        let horizon = chrono::Duration::from_std(self.resend_interval * 4)
            .unwrap_or_else(|_| chrono::Duration::hours(1));
        let now = chrono::Utc::now();
        let alerts: Vec<serde_json::Value> = messages
            .iter()
            .flat_map(|message| {
                match alertmanager::alerts(message, now, horizon, self.public_url.as_deref()) {
                    serde_json::Value::Array(alerts) => alerts,
                    other => vec![other],
                }
            })
            .collect();
        let body = serde_json::Value::Array(alerts).to_string();
        let id = match messages {
            [one] => Some(one.id),
            _ => None,
        };
        let body = &body;
        let sends = instances
            .iter()
            .enumerate()
            .map(|(i, instance)| async move {
                // `deliver` checked the first instance already.
                if i > 0 {
                    self.check_destination(instance).await?;
                }
                let url = alertmanager::alerts_url(instance);
                webhook::post(&self.http, &url, id, body.clone(), headers, None).await
            });
        let outcomes = futures_util::future::join_all(sends).await;
        let errors: Vec<String> = instances
            .iter()
            .zip(&outcomes)
            .filter_map(|(instance, outcome)| {
                outcome.as_ref().err().map(|e| format!("{instance}: {e}"))
            })
            .collect();
        if errors.len() == instances.len() {
            return Err(errors.join("; "));
        }
        if !errors.is_empty() {
            tracing::warn!(errors = %errors.join("; "),
                "an Alertmanager instance did not take alerts another one took");
        }
        Ok(())
    }

    /// Sends an Alertmanager channel's open problems again (`dispatch` calls this every
    /// resend interval), in requests of at most 64 alerts' messages, as Prometheus batches.
    pub async fn resend_to_alertmanager(
        &self,
        channel: &ChannelSpec,
        messages: &[Notification],
    ) -> Result<(), String> {
        let url = channel.url.as_deref().ok_or("the channel has no url")?;
        let headers = headers_of(channel);
        self.check_destination(url).await?;
        let instances: Vec<&str> = std::iter::once(url)
            .chain(channel.urls.iter().map(String::as_str))
            .collect();
        for chunk in messages.chunks(64) {
            let chunk: Vec<&Notification> = chunk.iter().collect();
            let sending = self.to_alertmanagers(&instances, &chunk, &headers);
            tokio::time::timeout(SEND_TIMEOUT + Duration::from_secs(5), sending)
                .await
                .map_err(|_| "the receiver did not answer in time".to_string())??;
        }
        Ok(())
    }

    /// Refuses a receiver given by a refused address. A name is judged when the connection
    /// resolves it (`destination::PinnedResolver`, and `email` for mail).
    async fn check_destination(&self, url: &str) -> Result<(), String> {
        self.destinations.check_literal(url)
    }

    /// Delivers `message` to `channel`; the error says what the receiver or the network did.
    pub async fn deliver(
        &self,
        channel: &ChannelSpec,
        message: &Notification,
    ) -> Result<(), String> {
        let kind = channel.kind;
        let url = channel
            .url
            .as_deref()
            .or(kind.default_url())
            .ok_or_else(|| "the channel has no url".to_string())?;
        let headers = headers_of(channel);
        let sending = async {
            self.check_destination(url).await?;
            match kind {
                ChannelKind::Webhook => {
                    let json = "application/json";
                    let (body, content_type) = match (&channel.template, channel.format) {
                        (Some(template), _) => {
                            let facts = Facts::of(message, self.public_url.as_deref());
                            let body = template::render(template, message, &facts)?;
                            (body.text, body.content_type)
                        }
                        (None, Some(WebhookFormat::AlertmanagerV4)) => {
                            (alertmanager::v4_body(message), json)
                        }
                        (None, _) => {
                            let body = serde_json::to_string(message).map_err(|e| e.to_string())?;
                            (body, json)
                        }
                    };
                    webhook::post_as(
                        &self.http,
                        url,
                        content_type,
                        Some(message.id),
                        body,
                        &headers,
                        channel.secret.as_deref(),
                    )
                    .await
                }
                ChannelKind::Slack => {
                    let body = slack::body(message);
                    webhook::post(&self.http, url, Some(message.id), body, &headers, None).await
                }
                ChannelKind::Alertmanager => {
                    let instances: Vec<&str> = std::iter::once(url)
                        .chain(channel.urls.iter().map(String::as_str))
                        .collect();
                    self.to_alertmanagers(&instances, &[message], &headers)
                        .await
                }
                ChannelKind::Email => {
                    email::send(
                        &self.destinations,
                        url,
                        channel.from.as_deref().unwrap_or_default(),
                        &channel.to,
                        message,
                    )
                    .await
                }
                _ => {
                    let requests = self.requests(kind, url, channel, message)?;
                    self.send_all(requests, message, &headers).await
                }
            }
        };
        match tokio::time::timeout(SEND_TIMEOUT + Duration::from_secs(5), sending).await {
            Ok(outcome) => outcome,
            Err(_) => Err("the receiver did not answer in time".into()),
        }
    }

    /// The requests a channel of the kinds that speak a service's own API makes for `message`.
    fn requests(
        &self,
        kind: ChannelKind,
        url: &str,
        channel: &ChannelSpec,
        message: &Notification,
    ) -> Result<Vec<Outgoing>, String> {
        let facts = Facts::of(message, self.public_url.as_deref());
        let secret = || {
            channel
                .secret
                .as_deref()
                .ok_or_else(|| format!("the {} channel has no secret", kind.as_str()))
        };
        Ok(match kind {
            ChannelKind::Pagerduty => incidents::pagerduty(url, secret()?, message, &facts),
            ChannelKind::Opsgenie => incidents::opsgenie(url, secret()?, message, &facts),
            ChannelKind::Teams => vec![chat::teams(url, message, &facts)],
            ChannelKind::Discord => vec![chat::discord(url, message, &facts)],
            ChannelKind::Telegram => {
                let chat = channel
                    .chat_id
                    .as_deref()
                    .ok_or("the channel has no chat_id")?;
                vec![chat::telegram(url, secret()?, chat, message, &facts)]
            }
            ChannelKind::Ntfy => {
                let topic = channel.topic.as_deref().ok_or("the channel has no topic")?;
                let token = channel.secret.as_deref();
                vec![push::ntfy(url, topic, token, message, &facts)]
            }
            ChannelKind::Gotify => vec![push::gotify(url, secret()?, message, &facts)],
            ChannelKind::Pushover => {
                let user = channel
                    .user_key
                    .as_deref()
                    .ok_or("the channel has no user_key")?;
                vec![push::pushover(url, secret()?, user, message, &facts)]
            }
            ChannelKind::Webhook
            | ChannelKind::Slack
            | ChannelKind::Alertmanager
            | ChannelKind::Email => {
                return Err(format!("{} is not sent as requests", kind.as_str()))
            }
        })
    }

    /// Sends `requests` one after the other (an incident's trigger before its resolve), each
    /// with the channel's own headers after the service's; the first failure ends it.
    async fn send_all(
        &self,
        requests: Vec<Outgoing>,
        message: &Notification,
        channel_headers: &[(String, String)],
    ) -> Result<(), String> {
        for (i, request) in requests.into_iter().enumerate() {
            if i > 0 {
                self.check_destination(&request.url).await?;
            }
            let mut headers = request.headers;
            headers.extend(channel_headers.iter().cloned());
            webhook::post_as(
                &self.http,
                &request.url,
                request.content_type,
                Some(message.id),
                request.body,
                &headers,
                None,
            )
            .await?;
        }
        Ok(())
    }
}

/// A channel's extra HTTP headers.
fn headers_of(channel: &ChannelSpec) -> Vec<(String, String)> {
    channel
        .headers
        .iter()
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect()
}
