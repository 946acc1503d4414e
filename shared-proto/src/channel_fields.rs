//! Which fields each notification channel kind takes, read at the wire: the form serde reads
//! a `ChannelSpec` from. A field of another kind is refused even when it is empty or `null`,
//! and the fields a kind needs must be there, so that the API agrees with the OpenAPI
//! document's per-kind schemas (each with `additionalProperties: false` and its `required`).
//! Owns presence only; the values' rules are `ChannelSpec::validate`'s.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::notifications::{ChannelKind, ChannelSpec, WebhookFormat};

/// A `ChannelSpec` as sent, each field's presence kept: absent is `None`, `null` is
/// `Some(None)`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelSpecFields {
    name: String,
    kind: ChannelKind,
    #[serde(default)]
    default: bool,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default, with = "crate::monitor::double_option")]
    url: Option<Option<String>>,
    #[serde(default, with = "crate::monitor::double_option")]
    secret: Option<Option<String>>,
    #[serde(default, with = "crate::monitor::double_option")]
    headers: Option<Option<BTreeMap<String, String>>>,
    #[serde(default, with = "crate::monitor::double_option")]
    from: Option<Option<String>>,
    #[serde(default, with = "crate::monitor::double_option")]
    to: Option<Option<Vec<String>>>,
    #[serde(default, with = "crate::monitor::double_option")]
    urls: Option<Option<Vec<String>>>,
    #[serde(default, with = "crate::monitor::double_option")]
    format: Option<Option<WebhookFormat>>,
    #[serde(default, with = "crate::monitor::double_option")]
    template: Option<Option<String>>,
    #[serde(default, with = "crate::monitor::double_option")]
    chat_id: Option<Option<String>>,
    #[serde(default, with = "crate::monitor::double_option")]
    user_key: Option<Option<String>>,
    #[serde(default, with = "crate::monitor::double_option")]
    topic: Option<Option<String>>,
}

/// Fields whose `null` means "none" (the signing secret, the default format, no template).
const NULLABLE: [&str; 3] = ["secret", "format", "template"];

/// The fields of a channel body beside `name`, `kind`, `default` and `tags`, and the kinds that take
/// each (the document's per-kind schemas list the same).
pub const KIND_FIELDS: [(&str, &[ChannelKind]); 11] = {
    use ChannelKind::*;
    [
        ("url", &ChannelKind::ALL),
        (
            "secret",
            &[
                Webhook, Pagerduty, Opsgenie, Telegram, Ntfy, Gotify, Pushover,
            ],
        ),
        (
            "headers",
            &[Webhook, Slack, Alertmanager, Teams, Discord, Ntfy, Gotify],
        ),
        ("format", &[Webhook]),
        ("template", &[Webhook]),
        ("urls", &[Alertmanager]),
        ("from", &[Email]),
        ("to", &[Email]),
        ("chat_id", &[Telegram]),
        ("user_key", &[Pushover]),
        ("topic", &[Ntfy]),
    ]
};

/// The fields a kind cannot do without.
pub fn required(kind: ChannelKind) -> &'static [&'static str] {
    match kind {
        ChannelKind::Email => &["url", "from", "to"],
        ChannelKind::Pagerduty | ChannelKind::Opsgenie => &["secret"],
        ChannelKind::Gotify => &["url", "secret"],
        ChannelKind::Telegram => &["secret", "chat_id"],
        ChannelKind::Pushover => &["secret", "user_key"],
        ChannelKind::Ntfy => &["topic"],
        _ => &["url"],
    }
}

/// Whether `kind` takes `field`.
pub fn takes(kind: ChannelKind, field: &str) -> bool {
    KIND_FIELDS
        .iter()
        .any(|(name, kinds)| *name == field && kinds.contains(&kind))
}

/// Whether a field was sent at all, and whether with a value (not `null`).
fn sent<T>(field: &Option<Option<T>>) -> (bool, bool) {
    (field.is_some(), matches!(field, Some(Some(_))))
}

impl TryFrom<ChannelSpecFields> for ChannelSpec {
    type Error = String;

    fn try_from(fields: ChannelSpecFields) -> Result<Self, Self::Error> {
        let kind = fields.kind;
        // (field, sent at all, sent with a value)
        let present = [
            ("url", sent(&fields.url)),
            ("secret", sent(&fields.secret)),
            ("headers", sent(&fields.headers)),
            ("format", sent(&fields.format)),
            ("urls", sent(&fields.urls)),
            ("from", sent(&fields.from)),
            ("to", sent(&fields.to)),
            ("template", sent(&fields.template)),
            ("chat_id", sent(&fields.chat_id)),
            ("user_key", sent(&fields.user_key)),
            ("topic", sent(&fields.topic)),
        ];
        for (field, (is_present, has_value)) in present {
            if is_present && !takes(kind, field) {
                return Err(format!(
                    "`{field}`: a {} channel has no `{field}`; drop it",
                    kind.as_str()
                ));
            }
            if !has_value && required(kind).contains(&field) {
                return Err(format!(
                    "`{field}`: missing field `{field}`, which a {} channel needs",
                    kind.as_str()
                ));
            }
            if is_present && !has_value && !NULLABLE.contains(&field) {
                return Err(format!("`{field}`: must not be null; leave it out instead"));
            }
        }
        let to = fields.to.flatten().unwrap_or_default();
        if kind == ChannelKind::Email && to.is_empty() {
            return Err("`to`: list at least one recipient".into());
        }
        Ok(ChannelSpec {
            name: fields.name,
            kind,
            url: fields.url.flatten(),
            secret: fields.secret.flatten(),
            headers: fields.headers.flatten().unwrap_or_default(),
            default: fields.default,
            tags: fields.tags,
            from: fields.from.flatten(),
            to,
            urls: fields.urls.flatten().unwrap_or_default(),
            format: fields.format.flatten(),
            template: fields.template.flatten(),
            chat_id: fields.chat_id.flatten(),
            user_key: fields.user_key.flatten(),
            topic: fields.topic.flatten(),
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use crate::notifications::ChannelSpec;

    fn read(body: Value) -> Result<ChannelSpec, String> {
        serde_json::from_value(body).map_err(|e| e.to_string())
    }

    #[test]
    fn a_field_of_another_kind_is_refused_even_empty() {
        let slack = json!({"name": "s", "kind": "slack", "url": "https://chat.example/hook"});
        read(slack.clone()).unwrap();
        for (field, value) in [
            ("secret", Value::Null),
            ("to", json!([])),
            ("from", Value::Null),
            ("urls", json!([])),
            ("format", Value::Null),
        ] {
            let mut body = slack.clone();
            body[field] = value;
            let error = read(body).unwrap_err();
            assert!(error.contains(&format!("`{field}`")), "{error}");
        }
        let mut email = json!({"name": "e", "kind": "email", "url": "smtp://mail.example:25",
                               "from": "a@example.com", "to": ["b@example.com"]});
        read(email.clone()).unwrap();
        email["headers"] = json!({});
        assert!(read(email.clone()).unwrap_err().contains("`headers`"));
        email.as_object_mut().unwrap().remove("headers");
        email["to"] = json!([]);
        assert!(read(email.clone()).unwrap_err().contains("`to`"));
        email["to"] = json!(["b@example.com"]);
        email["from"] = Value::Null;
        assert!(read(email.clone()).unwrap_err().contains("`from`"));
        email.as_object_mut().unwrap().remove("from");
        assert!(read(email).unwrap_err().contains("`from`"));
        for (field, null) in [
            ("default", Value::Null),
            ("headers", Value::Null),
            ("url", Value::Null),
        ] {
            let mut body = json!({"name": "w", "kind": "webhook", "url": "https://h.example/"});
            body[field] = null;
            // serde's own message for `default` names no field; the API's reader adds it.
            let error = read(body).unwrap_err();
            assert!(
                field == "default" || error.contains(field),
                "{field}: {error}"
            );
        }
        let no_url = json!({"name": "w", "kind": "webhook"});
        assert!(read(no_url).unwrap_err().contains("`url`"));
        let webhook = json!({"name": "w", "kind": "webhook", "url": "https://h.example/",
                             "secret": null, "format": null, "headers": {}});
        assert_eq!(read(webhook).unwrap().secret, None);
    }
}
