//! What a notification channel's views keep from their readers, and where its secrets may go.
//!
//! Owns how an edit that sends a view back keeps the stored values, and the rule that a kept
//! value never follows the channel to a new destination. Which fields hold a credential and
//! how a view shows them (`HIDDEN`) is `shared_proto::redaction`'s (`central export` needs it
//! too): `secret`, every header value, Pushover's `user_key`, ntfy's `topic` (whoever knows it
//! may read it), and the parts of an address that carry one (`address_shown`). Storage and
//! delivery never pass through here: the senders need the real values.

use std::collections::BTreeSet;

use shared_proto::notifications::{ChannelKind, ChannelPatch, ChannelSpec, HIDDEN};
use shared_proto::ValidationError;

use shared_proto::redaction::address_shown;

/// An edit (`patch`, already applied to `spec`) of the channel `stored`.
///
/// What a view showed, sent back, keeps the stored value: an address equal to a stored one as
/// a view shows it is that stored address, a header, user key or topic sent as `HIDDEN` keeps
/// its stored value. `HIDDEN` with nothing stored behind it is refused (`422`, naming the
/// field): it would be sent as the literal word.
///
/// A stored credential that the edit does not type again (left out of the patch, or sent as
/// `HIDDEN`) stays only while the channel sends to no new address (`url` and `urls`, or the
/// kind's own service, whole: a path on the same host is another place too, since receivers
/// such as Zapier or webhook.site serve every customer from one host): an edit that points the
/// channel elsewhere must type each of them again, or the channel would hand them to whoever
/// the editor chose. Refused with `422` naming every such field.
pub fn keep(
    spec: &mut ChannelSpec,
    stored: &ChannelSpec,
    patch: &ChannelPatch,
) -> Result<(), ValidationError> {
    let kind = stored.kind;
    let mut kept: Vec<String> = Vec::new();
    if let Some(url) = spec.url.as_mut() {
        restore_address(kind, "url", url, stored.url.as_slice())?;
    }
    for url in &mut spec.urls {
        restore_address(kind, "urls", url, &stored.urls)?;
    }
    if stored.secret.is_some() && patch.secret.is_none() {
        kept.push("secret".into());
    }
    for (name, value) in &mut spec.headers {
        let typed = patch
            .headers
            .as_ref()
            .is_some_and(|sent| sent.get(name).is_some_and(|v| v != HIDDEN));
        if typed {
            continue;
        }
        match stored.headers.get(name) {
            Some(original) => {
                value.clone_from(original);
                kept.push(format!("headers.{name}"));
            }
            None if value == HIDDEN => {
                return Err(ValidationError::combination(
                    format!("headers.{name}"),
                    format!(
                        "is `{HIDDEN}` but the channel has no stored value for it: type its value"
                    ),
                ))
            }
            None => {}
        }
    }
    for (field, value, original, sent) in [
        (
            "user_key",
            &mut spec.user_key,
            &stored.user_key,
            &patch.user_key,
        ),
        ("topic", &mut spec.topic, &stored.topic, &patch.topic),
    ] {
        let typed = sent.as_deref().is_some_and(|v| v != HIDDEN);
        if typed {
            continue;
        }
        match (original, value.as_deref()) {
            (Some(original), _) => {
                *value = Some(original.clone());
                kept.push(field.into());
            }
            (None, Some(HIDDEN)) => {
                return Err(ValidationError::combination(
                    field,
                    format!("is `{HIDDEN}` but the channel has no stored value for it: type it"),
                ))
            }
            (None, _) => {}
        }
    }
    let before = destinations(stored);
    let new: Vec<String> = destinations(spec).difference(&before).cloned().collect();
    if !new.is_empty() && !kept.is_empty() {
        return Err(ValidationError::combination(
            kept.join(", "),
            format!(
                "the channel would now send to {}, and its stored credentials go only where \
                 they were entered for: type {} again in this edit (or leave them empty)",
                new.join(", "),
                kept.join(", ")
            ),
        ));
    }
    Ok(())
}

/// An address sent back as a view showed it is the stored address; one that still shows
/// `HIDDEN` otherwise (a view's address with its host or path changed) is refused, so that
/// a stored secret is never sent as the literal word nor carried to another address.
fn restore_address(
    kind: ChannelKind,
    field: &str,
    url: &mut String,
    stored: &[String],
) -> Result<(), ValidationError> {
    if let Some(original) = stored.iter().find(|s| address_shown(kind, s) == *url) {
        *url = original.clone();
        return Ok(());
    }
    if url.contains(HIDDEN) {
        return Err(ValidationError::combination(
            field,
            format!(
                "shows `{HIDDEN}` where a stored address had a secret, but is no longer that \
                 address: type the whole address"
            ),
        ));
    }
    Ok(())
}

/// Where a channel sends: each address it posts to, as the URL parser writes it (so that
/// `HTTPS://Host:443/x` and `https://host/x` are one place).
fn destinations(spec: &ChannelSpec) -> BTreeSet<String> {
    spec.url
        .as_deref()
        .or(spec.kind.default_url())
        .into_iter()
        .chain(spec.urls.iter().map(String::as_str))
        .map(|address| {
            url::Url::parse(address).map_or_else(|_| address.to_string(), |url| url.to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use shared_proto::notifications::ChannelView;
    use shared_proto::redaction::hide_channel;

    fn spec(kind: ChannelKind, url: &str) -> ChannelSpec {
        ChannelSpec {
            name: "c".into(),
            kind,
            url: Some(url.into()),
            secret: None,
            headers: BTreeMap::new(),
            default: false,
            tags: Vec::new(),
            from: None,
            to: Vec::new(),
            urls: Vec::new(),
            format: None,
            template: None,
            chat_id: None,
            user_key: None,
            topic: None,
        }
    }

    /// Applies `patch` as the service does and keeps what it may.
    fn edit(stored: &ChannelSpec, patch: ChannelPatch) -> Result<ChannelSpec, ValidationError> {
        let mut spec = stored.clone();
        spec.apply(patch.clone());
        keep(&mut spec, stored, &patch)?;
        Ok(spec)
    }

    /// A Slack, Discord or Teams address is the credential: a view shows its host only, and
    /// an edit that sends back what the view showed keeps the stored address.
    #[test]
    fn a_webhook_address_that_is_a_credential_is_shown_without_its_path() {
        let stored = "https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXX";
        let shown = address_shown(ChannelKind::Slack, stored);
        assert_eq!(shown, "https://hooks.slack.com/REDACTED");
        let discord = "https://discord.com/api/webhooks/1/token-part?wait=true";
        assert_eq!(
            address_shown(ChannelKind::Discord, discord),
            "https://discord.com/REDACTED"
        );
        let kept = edit(
            &spec(ChannelKind::Slack, stored),
            ChannelPatch {
                url: Some(shown.clone()),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(kept.url.as_deref(), Some(stored));
        let changed = edit(
            &spec(ChannelKind::Slack, stored),
            ChannelPatch {
                url: Some("https://hooks.slack.com/services/T1/B1/Y".into()),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(
            changed.url.as_deref(),
            Some("https://hooks.slack.com/services/T1/B1/Y")
        );
        // The view's address on another host is not the stored one, and is no address.
        let moved = edit(
            &spec(ChannelKind::Slack, stored),
            ChannelPatch {
                url: Some("https://evil.example/REDACTED".into()),
                ..Default::default()
            },
        )
        .unwrap_err();
        assert_eq!(moved.field, "url");
    }

    #[test]
    fn a_query_a_password_and_token_like_segments_are_hidden_and_words_are_not() {
        assert_eq!(
            address_shown(
                ChannelKind::Webhook,
                "https://u:pw@hooks.example/x/incoming?token=abc&y=1"
            ),
            "https://u:REDACTED@hooks.example/x/incoming?REDACTED"
        );
        assert_eq!(
            address_shown(
                ChannelKind::Webhook,
                "https://n8n.example/webhook/4f0c2a1e-8a7b-4c61-9d3e-2b1f0a9c8d7e"
            ),
            "https://n8n.example/webhook/REDACTED"
        );
        assert_eq!(
            address_shown(ChannelKind::Alertmanager, "http://am.example:9093/"),
            "http://am.example:9093/"
        );
        assert_eq!(
            address_shown(
                ChannelKind::Email,
                "smtp://u:pw@mail.example:587?tls=required"
            ),
            "smtp://u:REDACTED@mail.example:587?tls=required"
        );
    }

    #[test]
    fn a_channel_pointed_elsewhere_keeps_no_credential_it_was_not_given_again() {
        let mut stored = spec(ChannelKind::Webhook, "https://hooks.example.com/x");
        stored.headers.insert("X-Api-Key".into(), "k3y".into());
        stored.secret = Some("signing-key-0123456789".into());
        let refused = edit(
            &stored,
            ChannelPatch {
                url: Some("https://evil.example/collect".into()),
                ..Default::default()
            },
        )
        .unwrap_err();
        assert_eq!(refused.field, "secret, headers.X-Api-Key");
        assert!(
            refused.message.contains("https://evil.example/collect"),
            "{refused}"
        );
        // Sending the view's `REDACTED` back is not typing it.
        let hidden = edit(
            &stored,
            ChannelPatch {
                url: Some("https://evil.example/collect".into()),
                secret: Some(Some("new-signing-key-0123".into())),
                headers: Some([("X-Api-Key".to_string(), HIDDEN.to_string())].into()),
                ..Default::default()
            },
        )
        .unwrap_err();
        assert_eq!(hidden.field, "headers.X-Api-Key");
        // Typed again, or dropped, they may go anywhere.
        let retyped = edit(
            &stored,
            ChannelPatch {
                url: Some("https://evil.example/collect".into()),
                secret: Some(None),
                headers: Some([("X-Api-Key".to_string(), "other".to_string())].into()),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(retyped.headers["X-Api-Key"], "other");
        // Another path on the same host is another place (one host serves many customers);
        // a rename, or the same address written otherwise, keeps them.
        let path = edit(
            &stored,
            ChannelPatch {
                url: Some("https://hooks.example.com/y".into()),
                ..Default::default()
            },
        )
        .unwrap_err();
        assert_eq!(path.field, "secret, headers.X-Api-Key");
        let same = edit(
            &stored,
            ChannelPatch {
                name: Some("renamed".into()),
                url: Some("HTTPS://hooks.example.com:443/x".into()),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(same.headers["X-Api-Key"], "k3y");
        assert_eq!(same.secret, stored.secret);
    }

    #[test]
    fn a_kind_with_its_own_service_moved_to_another_server_types_its_key_again() {
        let mut stored = spec(
            ChannelKind::Pushover,
            "https://api.pushover.net/1/messages.json",
        );
        stored.url = None;
        stored.secret = Some("app-token".into());
        stored.user_key = Some("userkey123".into());
        let refused = edit(
            &stored,
            ChannelPatch {
                url: Some("https://pushover.evil.example/".into()),
                user_key: Some(HIDDEN.into()),
                ..Default::default()
            },
        )
        .unwrap_err();
        assert_eq!(refused.field, "secret, user_key");
        let kept = edit(
            &stored,
            ChannelPatch {
                user_key: Some(HIDDEN.into()),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(kept.user_key.as_deref(), Some("userkey123"));
    }

    #[test]
    fn views_show_no_credential() {
        let view = ChannelView {
            id: uuid::Uuid::nil(),
            name: "n".into(),
            kind: ChannelKind::Ntfy,
            url: Some("https://ntfy.example/?auth=abc".into()),
            has_secret: false,
            headers: [("Authorization".to_string(), "Bearer x".to_string())].into(),
            default: false,
            tags: Vec::new(),
            from: None,
            to: Vec::new(),
            urls: Vec::new(),
            format: None,
            template: None,
            chat_id: None,
            user_key: None,
            topic: Some("private-topic".into()),
            created_at: chrono::DateTime::UNIX_EPOCH,
            updated_at: chrono::DateTime::UNIX_EPOCH,
        };
        let mut shown = view.clone();
        hide_channel(&mut shown);
        let text = serde_json::to_string(&shown).unwrap();
        for secret in ["abc", "Bearer x", "private-topic"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
    }
}
