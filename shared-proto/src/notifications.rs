//! Notification channels as the operator writes them, the delivery log, and the message a
//! receiver gets. Validation only; sending is central's `notify`.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::tags::validate_tags;
use crate::ValidationError;

const MAX_URL_LEN: usize = 2048;
/// Headers a channel may not set: they frame or route the request, belong to one hop, or
/// carry what central vouches for (the notification's id, the body's signature).
pub const RESERVED_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "content-type",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "te",
    "trailer",
    "upgrade",
    "expect",
    "x-notification-id",
    "x-signature-256",
];
const MAX_RECIPIENTS: usize = 20;
const MAX_EXTRA_URLS: usize = 4;

/// What a webhook channel's body is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum WebhookFormat {
    /// The notification itself (see `Notification`).
    #[default]
    Notification,
    /// The body Alertmanager sends to its own webhook receivers (version 4), for receivers
    /// written for Alertmanager.
    AlertmanagerV4,
}

/// How a channel delivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum ChannelKind {
    /// The message as JSON (or a body from the channel's `template`), optionally signed
    /// (`X-Signature-256`).
    Webhook,
    /// `{"text": …}` for Slack (and compatible) incoming webhooks.
    Slack,
    /// Alertmanager's own API (`POST {url}/api/v2/alerts`), as Prometheus sends alerts to it;
    /// firing alerts are sent again while they last.
    Alertmanager,
    /// A plain-text mail through SMTP.
    Email,
    /// PagerDuty's Events API v2: a problem triggers an alert, its end resolves it, both under
    /// one `dedup_key` per monitor (or poller, or dependency). `secret`: the integration's
    /// routing key.
    Pagerduty,
    /// Opsgenie's Alert API: a problem creates an alert, its end closes it, both by one
    /// `alias` per monitor (or poller, or dependency). `secret`: the API key.
    Opsgenie,
    /// A Microsoft Teams workflow ("Post to a channel when a webhook request is received"):
    /// an Adaptive Card.
    Teams,
    /// A Discord webhook; nobody can be mentioned.
    Discord,
    /// A Telegram bot's `sendMessage` to `chat_id`. `secret`: the bot's token.
    Telegram,
    /// An ntfy server's JSON publishing to `topic` (`url` default `https://ntfy.sh`).
    /// `secret`: an access token, if the topic needs one.
    Ntfy,
    /// A Gotify server's `POST /message`. `secret`: an application's token.
    Gotify,
    /// Pushover's `messages.json` to `user_key`. `secret`: the application's API token.
    Pushover,
}

impl ChannelKind {
    pub const ALL: [ChannelKind; 12] = [
        Self::Webhook,
        Self::Slack,
        Self::Alertmanager,
        Self::Email,
        Self::Pagerduty,
        Self::Opsgenie,
        Self::Teams,
        Self::Discord,
        Self::Telegram,
        Self::Ntfy,
        Self::Gotify,
        Self::Pushover,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ChannelKind::Webhook => "webhook",
            ChannelKind::Slack => "slack",
            ChannelKind::Alertmanager => "alertmanager",
            ChannelKind::Email => "email",
            ChannelKind::Pagerduty => "pagerduty",
            ChannelKind::Opsgenie => "opsgenie",
            ChannelKind::Teams => "teams",
            ChannelKind::Discord => "discord",
            ChannelKind::Telegram => "telegram",
            ChannelKind::Ntfy => "ntfy",
            ChannelKind::Gotify => "gotify",
            ChannelKind::Pushover => "pushover",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == text)
    }

    /// The service's own address, for kinds that have one: their `url` may be left out
    /// (and is given for a region of the service, a proxy, or a test receiver).
    pub fn default_url(self) -> Option<&'static str> {
        match self {
            ChannelKind::Pagerduty => Some("https://events.pagerduty.com/v2/enqueue"),
            ChannelKind::Opsgenie => Some("https://api.opsgenie.com"),
            ChannelKind::Telegram => Some("https://api.telegram.org"),
            ChannelKind::Pushover => Some("https://api.pushover.net/1/messages.json"),
            ChannelKind::Ntfy => Some("https://ntfy.sh"),
            _ => None,
        }
    }

    /// What `secret` is to the kind, `None` for a kind without one; the `bool` says whether
    /// the kind needs it.
    pub fn secret_role(self) -> Option<(&'static str, bool)> {
        match self {
            ChannelKind::Webhook => Some(("the key that signs each body", false)),
            ChannelKind::Pagerduty => Some(("the integration's routing key", true)),
            ChannelKind::Opsgenie => Some(("the API key", true)),
            ChannelKind::Telegram => Some(("the bot's token", true)),
            ChannelKind::Ntfy => Some(("an access token for the topic", false)),
            ChannelKind::Gotify => Some(("an application's token", true)),
            ChannelKind::Pushover => Some(("the application's API token", true)),
            _ => None,
        }
    }
}

/// `POST /api/v1/notification-channels`. A field the kind does not take is refused, even empty
/// (`"secret": null` on a slack channel).
// Read through `crate::channel_fields`, which keeps each field's presence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(try_from = "crate::channel_fields::ChannelSpecFields")]
pub struct ChannelSpec {
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 1,
            max_length = 200,
            pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
        )
    )]
    pub name: String,
    pub kind: ChannelKind,
    /// `http(s)://…` for the HTTP kinds; `smtp://host:port` (or `smtps://`, with
    /// `user:password@` if the server wants a login) for email. PagerDuty, Opsgenie,
    /// Telegram, ntfy and Pushover default to the service's own address
    /// (`ChannelKind::default_url`).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_length = 2048))]
    pub url: Option<String>,
    /// Write-only. Webhook: signs each body with HMAC-SHA256 (`X-Signature-256:
    /// sha256=<hex>`), 16 to 256 characters. PagerDuty: the routing key; Opsgenie: the API
    /// key; Telegram: the bot's token; ntfy: an access token; Gotify and Pushover: the
    /// application's token (`ChannelKind::secret_role`).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 256))]
    pub secret: Option<String>,
    /// Extra HTTP headers (webhook, slack, alertmanager, teams, discord, ntfy, gotify).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Every monitor notifies this channel, beside the ones it lists.
    #[serde(default)]
    pub default: bool,
    /// Monitors carrying any of these tags notify this channel too (as if they listed it).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_items = 50))]
    pub tags: Vec<String>,
    /// Email only: the sender address.
    #[serde(default)]
    pub from: Option<String>,
    /// Email only: the recipients.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_items = 20))]
    pub to: Vec<String>,
    /// Alertmanager only: the other instances of a high-availability cluster; every message
    /// goes to `url` and to each of these (as Prometheus sends to each), and counts as
    /// delivered when one of them took it.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_items = 4))]
    pub urls: Vec<String>,
    /// Webhook only: the body's format (default `notification`).
    #[serde(default)]
    pub format: Option<WebhookFormat>,
    /// Webhook only, instead of `format`: the body as a template over the notification's
    /// fields (`event`, `status`, `previous_status`, `message`, `at`, `monitor.name`,
    /// `locations`… and `headline`, `severity`, `is_problem`, `link`). A JSON template's
    /// strings hold placeholders: `{"text": "{{ headline }}"}`; a string that is one
    /// placeholder alone takes the field's type (`"{{ locations }}"` a list), and the body is
    /// written as JSON, so it stays valid whatever a target answered. Any other text is sent
    /// as `text/plain` with each field's text in place. No loops or conditions.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 16384))]
    pub template: Option<String>,
    /// Telegram only: the chat to post to, a number (`-1001234567890`) or `@channelname`.
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = r"^(-?[0-9]{1,20}|@[A-Za-z0-9_]{5,32})$")
    )]
    pub chat_id: Option<String>,
    /// Pushover only: the user's or group's key.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[A-Za-z0-9]{1,64}$"))]
    pub user_key: Option<String>,
    /// ntfy only: the topic (ntfy's topics are letters, digits, `_` and `-`).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[A-Za-z0-9_-]{1,64}$"))]
    pub topic: Option<String>,
}

/// `PATCH /api/v1/notification-channels/{id}`: fields to change; `null` clears `secret`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ChannelPatch {
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 1,
            max_length = 200,
            pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
        )
    )]
    pub name: Option<String>,
    #[cfg_attr(feature = "openapi", schema(max_length = 2048))]
    pub url: Option<String>,
    #[serde(default, with = "crate::monitor::double_option")]
    #[cfg_attr(feature = "openapi", schema(min_length = 16, max_length = 256))]
    pub secret: Option<Option<String>>,
    pub headers: Option<BTreeMap<String, String>>,
    pub default: Option<bool>,
    /// Replaces the channel's tags (`[]` removes them all).
    #[cfg_attr(feature = "openapi", schema(max_items = 50))]
    pub tags: Option<Vec<String>>,
    pub from: Option<String>,
    #[cfg_attr(feature = "openapi", schema(max_items = 20))]
    pub to: Option<Vec<String>>,
    #[cfg_attr(feature = "openapi", schema(max_items = 4))]
    pub urls: Option<Vec<String>>,
    pub format: Option<WebhookFormat>,
    /// `null` goes back to `format`.
    #[serde(default, with = "crate::monitor::double_option")]
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 16384))]
    pub template: Option<Option<String>>,
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = r"^(-?[0-9]{1,20}|@[A-Za-z0-9_]{5,32})$")
    )]
    pub chat_id: Option<String>,
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[A-Za-z0-9]{1,64}$"))]
    pub user_key: Option<String>,
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[A-Za-z0-9_-]{1,64}$"))]
    pub topic: Option<String>,
}

impl ChannelSpec {
    pub fn apply(&mut self, patch: ChannelPatch) {
        let ChannelPatch {
            name,
            url,
            secret,
            headers,
            default,
            tags,
            from,
            to,
            urls,
            format,
            template,
            chat_id,
            user_key,
            topic,
        } = patch;
        if let Some(v) = name {
            self.name = v;
        }
        if let Some(v) = url {
            self.url = Some(v);
        }
        if let Some(v) = secret {
            self.secret = v;
        }
        if let Some(v) = headers {
            self.headers = v;
        }
        if let Some(v) = default {
            self.default = v;
        }
        if let Some(v) = tags {
            self.tags = v;
        }
        if let Some(v) = from {
            self.from = Some(v);
        }
        if let Some(v) = to {
            self.to = v;
        }
        if let Some(v) = urls {
            self.urls = v;
        }
        if let Some(v) = format {
            self.format = Some(v);
        }
        if let Some(v) = template {
            self.template = v;
        }
        if let Some(v) = chat_id {
            self.chat_id = Some(v);
        }
        if let Some(v) = user_key {
            self.user_key = Some(v);
        }
        if let Some(v) = topic {
            self.topic = Some(v);
        }
    }

    /// A receiver's address: an http(s) URL for the HTTP kinds, smtp(s) for email, in the form
    /// the document's per-kind schemas state (`target::HTTP_PATTERN`, `SMTP_URL_PATTERN`).
    fn check_url(&self, field: &str, url: &str) -> Result<(), ValidationError> {
        let (pattern, form) = match self.kind {
            ChannelKind::Email => (
                crate::target::SMTP_URL_PATTERN,
                "an smtp:// or smtps:// URL, like smtps://user:password@mail.example.com",
            ),
            _ => (
                crate::target::HTTP_PATTERN,
                "an http:// or https:// URL without user:password@ (send credentials in \
                 headers), like https://hooks.example.com/notify",
            ),
        };
        if url.chars().count() > MAX_URL_LEN || !crate::target::is_match(pattern, url) {
            return Err(ValidationError::new(
                field,
                format!(
                    "a {} channel needs {form}, at most {MAX_URL_LEN} characters; got `{url}`",
                    self.kind.as_str()
                ),
            ));
        }
        let parsed = crate::target::usable_url(field, url)?;
        if self.kind == ChannelKind::Email && parsed.password().is_some() {
            let tls_required = parsed.scheme() == "smtps"
                || parsed
                    .query_pairs()
                    .any(|(key, value)| key == "tls" && value == "required");
            if !tls_required {
                return Err(ValidationError::combination(
                    field,
                    "a password over plain SMTP would travel in clear (or to whoever strips \
                     STARTTLS): use smtps://… or add ?tls=required",
                ));
            }
        }
        Ok(())
    }

    /// Checks every field for the kind; the first failure names the field and the fix.
    pub fn validate(&self) -> Result<(), ValidationError> {
        check_name(&self.name)?;
        validate_tags("tags", &self.tags, MAX_CHANNEL_TAGS)?;
        let kind = self.kind;
        // A field of another kind, left by an edit (a create refuses it at the wire).
        for (field, present) in [
            ("secret", self.secret.is_some()),
            ("headers", !self.headers.is_empty()),
            ("format", self.format.is_some()),
            ("template", self.template.is_some()),
            ("urls", !self.urls.is_empty()),
            ("from", self.from.is_some()),
            ("to", !self.to.is_empty()),
            ("chat_id", self.chat_id.is_some()),
            ("user_key", self.user_key.is_some()),
            ("topic", self.topic.is_some()),
        ] {
            if present && !crate::channel_fields::takes(kind, field) {
                return Err(ValidationError::combination(
                    field,
                    format!("a {} channel has no `{field}`; drop it", kind.as_str()),
                ));
            }
        }
        match (self.url.as_deref(), kind.default_url()) {
            (Some(url), _) => self.check_url("url", url)?,
            (None, Some(_)) => {}
            (None, None) => {
                return Err(ValidationError::combination(
                    "url",
                    match kind {
                        ChannelKind::Email => {
                            "is required: the SMTP server, like smtp://mail.example.com:587"
                        }
                        ChannelKind::Gotify => {
                            "is required: the Gotify server's URL, like https://gotify.example.com"
                        }
                        _ => "is required: the receiver's http(s) URL",
                    },
                ))
            }
        }
        if self.urls.len() > MAX_EXTRA_URLS {
            return Err(ValidationError::new(
                "urls",
                "at most 4 further Alertmanager instances",
            ));
        }
        for extra in &self.urls {
            self.check_url("urls", extra)?;
        }
        if self.format.is_some() && self.template.is_some() {
            return Err(ValidationError::combination(
                "template",
                "a webhook's body is its `format` or its `template`, not both; drop one",
            ));
        }
        if let Some(template) = &self.template {
            check_template(template)?;
        }
        if kind == ChannelKind::Ntfy {
            let topic = self.topic.as_deref().ok_or_else(|| {
                ValidationError::combination(
                    "topic",
                    "is required for ntfy: the topic to publish to",
                )
            })?;
            check_topic(topic)?;
        }
        match (&self.secret, kind.secret_role()) {
            (Some(secret), _) if kind == ChannelKind::Webhook => check_secret(secret)?,
            (Some(secret), Some((role, _))) => check_token(secret, role)?,
            (None, Some((role, true))) => {
                return Err(ValidationError::combination(
                    "secret",
                    format!("is required for {}: {role}", kind.as_str()),
                ))
            }
            _ => {}
        }
        check_headers(&self.headers)?;
        // The header central sets from `secret` is the secret's, not a second one.
        let credential_header = match kind {
            ChannelKind::Ntfy => Some("authorization"),
            ChannelKind::Gotify => Some("x-gotify-key"),
            _ => None,
        };
        if let Some(header) = credential_header {
            if self.headers.keys().any(|h| h.eq_ignore_ascii_case(header)) {
                return Err(ValidationError::combination(
                    "headers",
                    format!(
                        "`{header}` is set from `secret` on a {} channel",
                        kind.as_str()
                    ),
                ));
            }
        }
        if kind == ChannelKind::Email {
            let from = self.from.as_deref().ok_or_else(|| {
                ValidationError::combination("from", "is required for email: the sender address")
            })?;
            check_address("from", from)?;
            if self.to.is_empty() || self.to.len() > MAX_RECIPIENTS {
                return Err(ValidationError::combination(
                    "to",
                    "email needs 1 to 20 recipient addresses",
                ));
            }
            for address in &self.to {
                check_address("to", address)?;
            }
        }
        if kind == ChannelKind::Telegram {
            let chat = self.chat_id.as_deref().ok_or_else(|| {
                ValidationError::combination(
                    "chat_id",
                    "is required for telegram: the chat to post to, like -1001234567890 or \
                     @channelname",
                )
            })?;
            check_chat_id(chat)?;
        }
        if kind == ChannelKind::Pushover {
            let key = self.user_key.as_deref().ok_or_else(|| {
                ValidationError::combination(
                    "user_key",
                    "is required for pushover: the user's or group's key",
                )
            })?;
            check_user_key(key)?;
        }
        Ok(())
    }
}

/// The longest `template`, in characters.
pub const MAX_TEMPLATE_LEN: usize = 16 * 1024;

/// A template's length; whether its placeholders name fields is central's check
/// (`notify::template`), which renders it.
fn check_template(template: &str) -> Result<(), ValidationError> {
    if !(1..=MAX_TEMPLATE_LEN).contains(&template.chars().count()) {
        return Err(ValidationError::new(
            "template",
            "must be 1 to 16384 characters of template text",
        ));
    }
    Ok(())
}

fn check_topic(topic: &str) -> Result<(), ValidationError> {
    let ok = (1..=64).contains(&topic.len())
        && topic
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(ValidationError::new(
            "topic",
            format!("`{topic}` is not an ntfy topic: 1 to 64 letters, digits, `_` and `-`"),
        ))
    }
}

/// A service's credential: it travels in a header or a URL's path, so only the characters
/// the services' tokens are made of.
fn check_token(token: &str, role: &str) -> Result<(), ValidationError> {
    let ok = (1..=256).contains(&token.len())
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._:~-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(ValidationError::new(
            "secret",
            format!(
                "must be {role}: 1 to 256 letters, digits and `. _ : ~ -`, as the service \
                 gave it"
            ),
        ))
    }
}

fn check_chat_id(chat: &str) -> Result<(), ValidationError> {
    let number = chat.strip_prefix('-').unwrap_or(chat);
    let numeric = (1..=20).contains(&number.len()) && number.bytes().all(|b| b.is_ascii_digit());
    let named = chat.strip_prefix('@').is_some_and(|name| {
        (5..=32).contains(&name.len())
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    });
    if numeric || named {
        Ok(())
    } else {
        Err(ValidationError::new(
            "chat_id",
            format!("`{chat}` is not a chat: a number like -1001234567890, or @channelname"),
        ))
    }
}

fn check_user_key(key: &str) -> Result<(), ValidationError> {
    if (1..=64).contains(&key.len()) && key.bytes().all(|b| b.is_ascii_alphanumeric()) {
        Ok(())
    } else {
        Err(ValidationError::new(
            "user_key",
            "must be a Pushover user or group key: letters and digits, as Pushover shows it",
        ))
    }
}

/// A channel's extra HTTP headers on their own: at most 20, token names that are not
/// central's to set, printable values.
fn check_headers(headers: &BTreeMap<String, String>) -> Result<(), ValidationError> {
    crate::settings::check_header_map("headers", headers)?;
    for name in headers.keys() {
        if RESERVED_HEADERS
            .iter()
            .any(|reserved| name.eq_ignore_ascii_case(reserved))
            || name.to_ascii_lowercase().starts_with("proxy-")
        {
            return Err(ValidationError::new(
                "headers",
                format!(
                    "`{name}` is central's to set (framing, routing, hop-by-hop or the \
                         notification's id and signature)"
                ),
            ));
        }
    }
    Ok(())
}

impl ChannelPatch {
    /// The rules of each field on its own, as the document's `ChannelPatch` schema states
    /// them. Whether the patched channel holds together (a URL of its kind's scheme, fields
    /// its kind takes) is `ChannelSpec::validate`'s, on the result.
    pub fn validate_fields(&self) -> Result<(), ValidationError> {
        if let Some(name) = &self.name {
            check_name(name)?;
        }
        if let Some(tags) = &self.tags {
            validate_tags("tags", tags, MAX_CHANNEL_TAGS)?;
        }
        if let Some(url) = &self.url {
            check_url_syntax("url", url)?;
        }
        if let Some(Some(secret)) = &self.secret {
            // Its kind's rule (a webhook's signing key is longer) is the patched channel's.
            if !(1..=256).contains(&secret.chars().count()) {
                return Err(ValidationError::new(
                    "secret",
                    "must be 1 to 256 characters",
                ));
            }
        }
        if let Some(Some(template)) = &self.template {
            check_template(template)?;
        }
        if let Some(chat) = &self.chat_id {
            check_chat_id(chat)?;
        }
        if let Some(key) = &self.user_key {
            check_user_key(key)?;
        }
        if let Some(topic) = &self.topic {
            check_topic(topic)?;
        }
        if let Some(headers) = &self.headers {
            check_headers(headers)?;
        }
        if let Some(from) = &self.from {
            check_address("from", from)?;
        }
        if let Some(to) = &self.to {
            if to.len() > MAX_RECIPIENTS {
                return Err(ValidationError::new("to", "at most 20 recipient addresses"));
            }
            for address in to {
                check_address("to", address)?;
            }
        }
        if let Some(urls) = &self.urls {
            if urls.len() > MAX_EXTRA_URLS {
                return Err(ValidationError::new(
                    "urls",
                    "at most 4 further Alertmanager instances",
                ));
            }
            for url in urls {
                check_url_syntax("urls", url)?;
            }
        }
        Ok(())
    }
}

/// A channel's name follows a monitor's rules (at most 200 characters, no control characters).
fn check_name(name: &str) -> Result<(), ValidationError> {
    crate::monitor::validate_name(name)
}

fn check_secret(secret: &str) -> Result<(), ValidationError> {
    if !(16..=256).contains(&secret.chars().count()) {
        return Err(ValidationError::new(
            "secret",
            "must be 16 to 256 characters (a random string, e.g. from `openssl rand -hex 32`)",
        ));
    }
    Ok(())
}

/// A URL of any scheme, at most 2048 characters.
fn check_url_syntax(field: &str, url: &str) -> Result<url::Url, ValidationError> {
    if url.chars().count() > MAX_URL_LEN {
        return Err(ValidationError::new(
            field,
            "must be at most 2048 characters",
        ));
    }
    url::Url::parse(url)
        .map_err(|e| ValidationError::new(field, format!("`{url}` is not a URL ({e})")))
}

/// A mail address `local@domain` (RFC 5321 without quoted local parts or address literals):
/// what a mail server accepts as a recipient, and what JSON Schema calls `email`.
pub(crate) fn check_address(field: &str, address: &str) -> Result<(), ValidationError> {
    const ATEXT: &[u8] = b"!#$%&'*+-/=?^_`{|}~";
    let atom = |part: &str| {
        !part.is_empty()
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || ATEXT.contains(&b))
    };
    let label = |part: &str| {
        !part.is_empty()
            && part.len() <= 63
            && !part.starts_with('-')
            && !part.ends_with('-')
            && part.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    };
    let ok = address.len() <= 254
        && address.split_once('@').is_some_and(|(local, domain)| {
            local.len() <= 64 && local.split('.').all(atom) && domain.split('.').all(label)
        });
    if ok {
        Ok(())
    } else {
        Err(ValidationError::new(
            field,
            format!("`{address}` is not a mail address like ops@example.com"),
        ))
    }
}

/// What a view shows in place of a secret: a URL's password, everything after the host of a
/// The most tags one channel is told of.
pub const MAX_CHANNEL_TAGS: usize = 50;

/// Slack, Discord or Teams webhook address (the address is the credential), and every header
/// value. Sent back unchanged in an edit (as the page's form does), it keeps what is stored.
pub const HIDDEN: &str = "REDACTED";

/// A stored channel. Secrets are never shown again: the signing secret only as `has_secret`,
/// a URL's password, a Slack, Discord or Teams address's path and every header value as
/// `REDACTED` (`HIDDEN`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChannelView {
    pub id: Uuid,
    pub name: String,
    pub kind: ChannelKind,
    pub url: Option<String>,
    pub has_secret: bool,
    pub headers: BTreeMap<String, String>,
    pub default: bool,
    pub tags: Vec<String>,
    pub from: Option<String>,
    pub to: Vec<String>,
    pub urls: Vec<String>,
    pub format: Option<WebhookFormat>,
    pub template: Option<String>,
    pub chat_id: Option<String>,
    pub user_key: Option<String>,
    pub topic: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// What happened, as the `event` of a notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum NotificationEvent {
    #[serde(rename = "monitor.down")]
    MonitorDown,
    #[serde(rename = "monitor.degraded")]
    MonitorDegraded,
    #[serde(rename = "monitor.up")]
    MonitorUp,
    #[serde(rename = "monitor.stale")]
    MonitorStale,
    #[serde(rename = "poller.offline")]
    PollerOffline,
    #[serde(rename = "poller.online")]
    PollerOnline,
    /// A dependency of a monitor's health document failed (`settings.notify_dependencies`).
    #[serde(rename = "dependency.down")]
    DependencyDown,
    /// …and recovered.
    #[serde(rename = "dependency.up")]
    DependencyUp,
    /// A status page's webhook subscriber failed too often and was turned off (told to the
    /// default channels, as the page's owner).
    #[serde(rename = "status_page.subscriber_turned_off")]
    SubscriberTurnedOff,
    /// `POST …/{id}/test`.
    #[serde(rename = "test")]
    Test,
}

impl NotificationEvent {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MonitorDown => "monitor.down",
            Self::MonitorDegraded => "monitor.degraded",
            Self::MonitorUp => "monitor.up",
            Self::MonitorStale => "monitor.stale",
            Self::PollerOffline => "poller.offline",
            Self::PollerOnline => "poller.online",
            Self::DependencyDown => "dependency.down",
            Self::DependencyUp => "dependency.up",
            Self::SubscriberTurnedOff => "status_page.subscriber_turned_off",
            Self::Test => "test",
        }
    }

    /// Whether it stands alone, neither opening nor resolving a problem (a test send, a
    /// subscriber turned off): receivers that track problems get it opened and closed at once.
    pub fn stands_alone(self) -> bool {
        matches!(self, Self::Test | Self::SubscriberTurnedOff)
    }

    /// Whether it opens (or keeps open) a problem, rather than resolving one.
    pub fn is_problem(self) -> bool {
        matches!(
            self,
            Self::MonitorDown
                | Self::MonitorDegraded
                | Self::MonitorStale
                | Self::PollerOffline
                | Self::DependencyDown
        )
    }
}

/// The object a notification is about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Subject {
    pub id: Uuid,
    pub name: String,
}

/// What a receiver gets (the webhook body; the other kinds are rendered from it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Notification {
    /// Also sent as `X-Notification-Id`; the same on every retry, so duplicates can be dropped.
    pub id: Uuid,
    pub event: NotificationEvent,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitor: Option<Subject>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poller: Option<Subject>,
    /// The status now (`down`, `degraded`, `up`, `stale`, `offline`, `online`).
    pub status: String,
    pub previous_status: Option<String>,
    /// When central decided the status.
    pub at: DateTime<Utc>,
    pub message: String,
    /// A reminder of a problem already notified (`repeat_interval_ms`).
    #[serde(default)]
    pub reminder: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locations: Option<Vec<crate::settings_api::LocationView>>,
    /// For `dependency.*`: the dependency, as the monitor's health document names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependency: Option<DependencySubject>,
    /// For a monitor others depend on (`parent_ids`), the problem of which holds theirs: the
    /// monitors behind it (at most 20 named; the message says how many there are).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependents: Option<Vec<Subject>>,
}

/// The dependency a `dependency.*` notification is about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DependencySubject {
    pub name: String,
    /// The location that read it, for a multi-location monitor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// Why it is unhealthy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Delivery state of one notification to one channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum DeliveryStatus {
    /// Not delivered yet; retried with backoff.
    Pending,
    Delivered,
    /// Given up (after 24 hours of attempts, or the channel was deleted).
    Failed,
}

impl DeliveryStatus {
    pub const ALL: [DeliveryStatus; 3] = [
        DeliveryStatus::Pending,
        DeliveryStatus::Delivered,
        DeliveryStatus::Failed,
    ];

    /// The status `as_str` names; `None` for any other text.
    pub fn parse(text: &str) -> Option<DeliveryStatus> {
        DeliveryStatus::ALL.into_iter().find(|s| s.as_str() == text)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "pending",
            DeliveryStatus::Delivered => "delivered",
            DeliveryStatus::Failed => "failed",
        }
    }
}

/// `GET /api/v1/notifications`: one row of the delivery log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NotificationView {
    pub id: Uuid,
    pub channel_id: Uuid,
    pub event: NotificationEvent,
    pub monitor_id: Option<Uuid>,
    pub poller_id: Option<Uuid>,
    pub status: DeliveryStatus,
    pub attempts: u32,
    pub last_error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub delivered_at: Option<DateTime<Utc>>,
}

/// Answer to `POST /api/v1/notification-channels/{id}/test`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChannelTestResult {
    pub delivered: bool,
    /// What the receiver or the network said, when it was not delivered.
    pub error: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn field_of(value: serde_json::Value) -> String {
        serde_json::from_value::<ChannelSpec>(value)
            .unwrap()
            .validate()
            .unwrap_err()
            .field
    }

    #[test]
    fn channels_are_checked_per_kind() {
        let ok = json!({"name": "ops", "kind": "webhook", "url": "https://hooks.example.com/x", "secret": "0123456789abcdef"});
        serde_json::from_value::<ChannelSpec>(ok)
            .unwrap()
            .validate()
            .unwrap();
        // Which fields a kind takes is decided as the body is read (`channel_fields`).
        let read_error = |value: serde_json::Value| {
            serde_json::from_value::<ChannelSpec>(value)
                .unwrap_err()
                .to_string()
        };
        assert!(read_error(json!({"name": "ops", "kind": "webhook"})).contains("`url`"));
        assert_eq!(
            field_of(json!({"name": "ops", "kind": "slack", "url": "smtp://x.example.com"})),
            "url"
        );
        assert!(read_error(
            json!({"name": "ops", "kind": "slack", "url": "https://x.example.com", "secret": "0123456789abcdef"})
        )
        .contains("`secret`"));
        assert_eq!(
            field_of(
                json!({"name": "ops", "kind": "webhook", "url": "https://x.example.com", "secret": "short"})
            ),
            "secret"
        );
        assert_eq!(
            field_of(
                json!({"name": "ops", "kind": "webhook", "url": "https://x.example.com", "headers": {"a b": "c"}})
            ),
            "headers"
        );
        for reserved in [
            "Host",
            "content-length",
            "Transfer-Encoding",
            "X-Signature-256",
            "Proxy-Authorization",
        ] {
            assert_eq!(
                field_of(
                    json!({"name": "ops", "kind": "webhook", "url": "https://x.example.com",
                                "headers": {reserved: "x"}})
                ),
                "headers",
                "{reserved}"
            );
        }
        for clear in [
            "smtp://u:p@mail.example.com",
            "smtp://u:p@mail.example.com?tls=opportunistic",
        ] {
            assert_eq!(
                field_of(json!({"name": "ops", "kind": "email", "url": clear,
                                "from": "c@example.com", "to": ["ops@example.com"]})),
                "url",
                "{clear}"
            );
        }
        for protected in [
            "smtps://u:p@mail.example.com",
            "smtp://u:p@mail.example.com?tls=required",
        ] {
            serde_json::from_value::<ChannelSpec>(json!({"name": "ops", "kind": "email",
                "url": protected, "from": "c@example.com", "to": ["ops@example.com"]}))
            .unwrap()
            .validate()
            .unwrap();
        }
        let mail = json!({"name": "ops", "kind": "email", "url": "smtp://127.0.0.1:2525", "from": "central@example.com", "to": ["ops@example.com"]});
        serde_json::from_value::<ChannelSpec>(mail)
            .unwrap()
            .validate()
            .unwrap();
        assert!(read_error(
            json!({"name": "ops", "kind": "email", "url": "smtp://127.0.0.1:2525", "to": ["ops@example.com"]})
        )
        .contains("`from`"));
        assert_eq!(
            field_of(
                json!({"name": "ops", "kind": "email", "url": "smtp://127.0.0.1:2525", "from": "c@example.com", "to": ["not an address"]})
            ),
            "to"
        );
        assert!(read_error(
            json!({"name": "ops", "kind": "webhook", "url": "https://x.example.com", "to": ["ops@example.com"]})
        )
        .contains("`to`"));
    }

    #[test]
    fn events_have_their_contract_names() {
        assert_eq!(
            serde_json::to_value(NotificationEvent::MonitorDegraded).unwrap(),
            "monitor.degraded"
        );
        assert_eq!(
            serde_json::to_value(NotificationEvent::PollerOffline).unwrap(),
            "poller.offline"
        );
    }
}
