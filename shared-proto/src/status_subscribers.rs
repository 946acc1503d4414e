//! Subscribers of status pages, on the wire: what a visitor sends to subscribe
//! (`POST /status/{slug}/subscribe`: an email address or a webhook URL), what operators read
//! of a page's subscribers (`/api/v1/status-pages/{id}/subscribers`), and the notices a
//! subscriber receives (a webhook's body; a mail says the same in words). Checks here are the
//! ones that need no database or network.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::ValidationError;

/// The longest webhook URL a visitor may subscribe.
pub const MAX_WEBHOOK_URL: usize = 2048;
/// The longest signing secret a webhook subscriber may give.
pub const MAX_SECRET: usize = 200;
/// A webhook subscriber is turned off after this many failed deliveries in a row (with
/// backoff from a second to ten minutes: about an hour of a receiver that is down).
pub const FAILURES_TO_TURN_OFF: u32 = 12;

/// `POST /status/{slug}/subscribe` (JSON, or a form from the page): one of `email` or
/// `webhook_url`. Always answered `202` once it is well formed, whether or not the address was
/// subscribed already: the answer says nothing of who is subscribed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubscribeRequest {
    /// A mail address: a confirmation mail goes to it; nothing else does until it is confirmed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// An http(s) URL: a `subscription.confirm` notice is POSTed to it, holding the
    /// `confirm_url` to POST to; nothing else is sent until then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_url: Option<String>,
    /// Signs each webhook body (`X-Signature-256: sha256=<hex of HMAC-SHA256>`), as channels do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

/// Where a subscriber's notices go, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Address {
    /// Lowercased.
    Email(String),
    Webhook {
        url: String,
        secret: Option<String>,
    },
}

impl Address {
    pub fn kind(&self) -> SubscriberKind {
        match self {
            Address::Email(_) => SubscriberKind::Email,
            Address::Webhook { .. } => SubscriberKind::Webhook,
        }
    }

    /// The address as stored and compared (one subscription per page and address).
    pub fn text(&self) -> &str {
        match self {
            Address::Email(address) => address,
            Address::Webhook { url, .. } => url,
        }
    }
}

impl SubscribeRequest {
    /// The address, checked; `422`-worthy errors name the field.
    pub fn address(&self) -> Result<Address, ValidationError> {
        let blank = |v: &Option<String>| v.as_deref().is_none_or(|v| v.trim().is_empty());
        match (blank(&self.email), blank(&self.webhook_url)) {
            (false, false) => Err(ValidationError::combination(
                "webhook_url",
                "send `email` or `webhook_url`, not both",
            )),
            (true, true) => Err(ValidationError::new(
                "email",
                "send an `email` address or a `webhook_url` to subscribe",
            )),
            (false, true) => {
                if self.secret.is_some() {
                    return Err(ValidationError::combination(
                        "secret",
                        "a secret signs webhooks; mail has none",
                    ));
                }
                let email = self.email.as_deref().unwrap_or_default().trim();
                crate::notifications::check_address("email", email)?;
                Ok(Address::Email(email.to_ascii_lowercase()))
            }
            (true, false) => {
                let url = self.webhook_url.as_deref().unwrap_or_default().trim();
                if url.chars().count() > MAX_WEBHOOK_URL
                    || !crate::target::is_match(crate::target::HTTP_PATTERN, url)
                {
                    return Err(ValidationError::new(
                        "webhook_url",
                        format!(
                            "must be an http:// or https:// URL without user:password@, at \
                             most {MAX_WEBHOOK_URL} characters"
                        ),
                    ));
                }
                crate::target::usable_url("webhook_url", url)?;
                let secret = match self.secret.as_deref() {
                    None | Some("") => None,
                    Some(secret) => {
                        let length = secret.chars().count();
                        if length > MAX_SECRET || secret.chars().any(char::is_control) {
                            return Err(ValidationError::new(
                                "secret",
                                format!("must be at most {MAX_SECRET} characters, none of them control characters"),
                            ));
                        }
                        Some(secret.to_string())
                    }
                };
                Ok(Address::Webhook {
                    url: url.to_string(),
                    secret,
                })
            }
        }
    }
}

/// How a subscriber is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum SubscriberKind {
    Email,
    Webhook,
}

impl SubscriberKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SubscriberKind::Email => "email",
            SubscriberKind::Webhook => "webhook",
        }
    }

    pub fn parse(text: &str) -> Option<SubscriberKind> {
        [SubscriberKind::Email, SubscriberKind::Webhook]
            .into_iter()
            .find(|k| k.as_str() == text)
    }
}

/// Where a subscription stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum SubscriberStatus {
    /// Asked for and not confirmed: only the confirmation is sent.
    Pending,
    /// Told of every notice.
    Confirmed,
    /// A webhook that failed `FAILURES_TO_TURN_OFF` deliveries in a row: told nothing more
    /// (the page's owner was told through the default channels).
    TurnedOff,
}

impl SubscriberStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            SubscriberStatus::Pending => "pending",
            SubscriberStatus::Confirmed => "confirmed",
            SubscriberStatus::TurnedOff => "turned_off",
        }
    }

    pub fn parse(text: &str) -> Option<SubscriberStatus> {
        [
            SubscriberStatus::Pending,
            SubscriberStatus::Confirmed,
            SubscriberStatus::TurnedOff,
        ]
        .into_iter()
        .find(|s| s.as_str() == text)
    }
}

/// A page's subscriber as operators read it (`GET /api/v1/status-pages/{id}/subscribers`).
/// A webhook's URL is shown by its scheme and host only: its path often is its credential.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SubscriberView {
    pub id: Uuid,
    pub kind: SubscriberKind,
    /// The mail address, or the webhook's `scheme://host[:port]/…`.
    pub address: String,
    pub status: SubscriberStatus,
    /// Failed deliveries in a row (webhooks are turned off at `FAILURES_TO_TURN_OFF`).
    pub failures: u32,
    pub last_error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub confirmed_at: Option<DateTime<Utc>>,
}

/// A webhook's URL as operators see it: its scheme, host and port, the rest hidden.
pub fn webhook_shown(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(parsed) => {
            let port = parsed.port().map(|p| format!(":{p}")).unwrap_or_default();
            format!(
                "{}://{}{port}/…",
                parsed.scheme(),
                parsed.host_str().unwrap_or_default()
            )
        }
        Err(_) => "…".into(),
    }
}

/// What a notice is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum NoticeEvent {
    /// To a new subscriber only: confirm with a `POST` to `confirm_url`.
    #[serde(rename = "subscription.confirm")]
    SubscriptionConfirm,
    /// An incident was published on the page.
    #[serde(rename = "incident.created")]
    IncidentCreated,
    /// A published incident has a new update.
    #[serde(rename = "incident.updated")]
    IncidentUpdated,
    /// A published incident was resolved.
    #[serde(rename = "incident.resolved")]
    IncidentResolved,
    /// Maintenance of monitors the page shows began.
    #[serde(rename = "maintenance.started")]
    MaintenanceStarted,
    /// …and ended.
    #[serde(rename = "maintenance.ended")]
    MaintenanceEnded,
}

impl NoticeEvent {
    pub const ALL: [NoticeEvent; 6] = [
        NoticeEvent::SubscriptionConfirm,
        NoticeEvent::IncidentCreated,
        NoticeEvent::IncidentUpdated,
        NoticeEvent::IncidentResolved,
        NoticeEvent::MaintenanceStarted,
        NoticeEvent::MaintenanceEnded,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            NoticeEvent::SubscriptionConfirm => "subscription.confirm",
            NoticeEvent::IncidentCreated => "incident.created",
            NoticeEvent::IncidentUpdated => "incident.updated",
            NoticeEvent::IncidentResolved => "incident.resolved",
            NoticeEvent::MaintenanceStarted => "maintenance.started",
            NoticeEvent::MaintenanceEnded => "maintenance.ended",
        }
    }

    pub fn parse(text: &str) -> Option<NoticeEvent> {
        Self::ALL.into_iter().find(|e| e.as_str() == text)
    }
}

/// The page a notice is from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NoticePage {
    pub slug: String,
    pub title: String,
    pub url: String,
}

/// The incident a notice is about, as the page shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NoticeIncident {
    pub id: Uuid,
    pub title: String,
    pub status: crate::status_incidents::IncidentStatus,
    /// The update's message (Markdown, as the operator wrote it).
    pub message: String,
}

/// The maintenance a notice is about: when, and the monitors by their names on the page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NoticeMaintenance {
    pub starts_at: DateTime<Utc>,
    pub ends_at: DateTime<Utc>,
    pub monitors: Vec<String>,
}

/// What a notice says, whoever it goes to (the links of each subscriber are added when it is
/// sent: `Notice`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoticeContent {
    pub event: NoticeEvent,
    pub at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incident: Option<NoticeIncident>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintenance: Option<NoticeMaintenance>,
}

/// A notice as a webhook subscriber receives it (the body; `X-Notification-Id` is `id`, the
/// same on every retry).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Notice {
    pub id: String,
    pub event: NoticeEvent,
    pub at: DateTime<Utc>,
    pub page: NoticePage,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incident: Option<NoticeIncident>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintenance: Option<NoticeMaintenance>,
    /// `subscription.confirm` only: `POST` here to confirm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirm_url: Option<String>,
    /// `POST` here to unsubscribe (a `GET` shows a page with the button).
    pub unsubscribe_url: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(email: Option<&str>, webhook: Option<&str>) -> SubscribeRequest {
        SubscribeRequest {
            email: email.map(str::to_string),
            webhook_url: webhook.map(str::to_string),
            secret: None,
        }
    }

    #[test]
    fn one_address_each_checked_and_named() {
        assert_eq!(
            request(Some(" Ana@Example.COM "), None).address().unwrap(),
            Address::Email("ana@example.com".into())
        );
        let webhook = request(None, Some("https://hooks.example.com/x?y=1"));
        assert_eq!(webhook.address().unwrap().kind(), SubscriberKind::Webhook);
        for (bad, field) in [
            (request(None, None), "email"),
            (request(Some(""), Some(" ")), "email"),
            (
                request(Some("a@b.c"), Some("https://x.example")),
                "webhook_url",
            ),
            (request(Some("not an address"), None), "email"),
            (request(Some("a@b.c\r\nBcc: x@y.z"), None), "email"),
            (request(None, Some("javascript:alert(1)")), "webhook_url"),
            (request(None, Some("https://u:p@x.example/")), "webhook_url"),
            (request(None, Some("ftp://x.example/")), "webhook_url"),
        ] {
            assert_eq!(bad.address().unwrap_err().field, field, "{bad:?}");
        }
        let mut signed = request(Some("a@b.c"), None);
        signed.secret = Some("s".into());
        assert_eq!(signed.address().unwrap_err().field, "secret");
        let mut long = request(None, Some("https://x.example/"));
        long.secret = Some("s".repeat(MAX_SECRET + 1));
        assert_eq!(long.address().unwrap_err().field, "secret");
    }

    #[test]
    fn a_webhook_is_shown_by_its_host_only() {
        assert_eq!(
            webhook_shown("https://hooks.slack.com/services/T0/B0/secret"),
            "https://hooks.slack.com/…"
        );
        assert_eq!(
            webhook_shown("http://127.0.0.1:8080/x"),
            "http://127.0.0.1:8080/…"
        );
    }

    #[test]
    fn events_and_states_read_back_what_they_write() {
        for event in NoticeEvent::ALL {
            assert_eq!(NoticeEvent::parse(event.as_str()), Some(event));
            let json = serde_json::to_value(event).unwrap();
            assert_eq!(json, event.as_str());
        }
        for status in [
            SubscriberStatus::Pending,
            SubscriberStatus::Confirmed,
            SubscriberStatus::TurnedOff,
        ] {
            assert_eq!(SubscriberStatus::parse(status.as_str()), Some(status));
        }
    }
}
