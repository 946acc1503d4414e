//! What views keep from their readers, shared by central (its API and page) and `central
//! export` (which writes files people commit): the parts of a URL that carry a credential
//! (a password, the whole query: `?token=…` is how many services take a key, and a
//! parameter's name may be the key too; each path segment that looks like a token,
//! `is_token_like`), a channel's credentials and an `http` monitor's. Owns only how a view
//! shows them; what is stored or sent, and how an edit that sends a view back keeps the
//! stored values, are central's (`service::channel_secrets`, `service::monitor_secrets`).

use serde_json::Value;

use crate::notifications::{ChannelKind, ChannelView, HIDDEN};
use crate::{CheckKind, MonitorSpec};

/// What of `url` a view hides besides its password.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hide {
    /// The whole query and token-like path segments.
    QueryAndTokens,
    /// Everything after the host (an address that is itself the credential).
    Path,
    /// The password only (an address whose query holds how to connect, as email's).
    PasswordOnly,
}

/// `url` as a view shows it: as given when nothing in it is hidden (or it does not parse as a
/// URL), so that a view of a plain address is the address itself, byte for byte.
pub fn shown(url: &str, hide: Hide) -> String {
    let Ok(mut parsed) = url::Url::parse(url) else {
        return url.to_string();
    };
    let before = parsed.to_string();
    match hide {
        Hide::Path => {
            parsed.set_path(&format!("/{HIDDEN}"));
            parsed.set_query(None);
            parsed.set_fragment(None);
        }
        Hide::QueryAndTokens => {
            if parsed.query().is_some() {
                parsed.set_query(Some(HIDDEN));
            }
            if let Some(segments) = parsed.path_segments() {
                let shown: Vec<&str> = segments
                    .map(|s| if is_token_like(s) { HIDDEN } else { s })
                    .collect();
                parsed.set_path(&shown.join("/"));
            }
        }
        Hide::PasswordOnly => {}
    }
    if parsed.password().is_some() {
        let _ = parsed.set_password(Some(HIDDEN));
    }
    let after = parsed.to_string();
    if after == before && !after.contains(HIDDEN) {
        url.to_string()
    } else {
        after
    }
}

/// A path segment that may be a credential: 16 characters or more with a digit among them
/// (a UUID, `T0123ABC/B0456DEF/…`, a hex or base64 key), or 24 or more of any kind. Words such
/// as `api`, `v2`, `alerts` or `incoming` stay shown; hiding a long word by mistake costs only
/// its display.
fn is_token_like(segment: &str) -> bool {
    let len = segment.chars().count();
    len >= 24 || (len >= 16 && segment.chars().any(|c| c.is_ascii_digit()))
}

/// `url` as a view shows it (`shown`): for the kinds whose address is itself the
/// credential (a Slack, Discord or Teams webhook: whoever has it can post) everything after
/// the host; for email the password only (its query holds how to connect, `?tls=required`);
/// for the others the password, the whole query and token-like path segments.
pub fn address_shown(kind: ChannelKind, url: &str) -> String {
    let hide = match kind {
        ChannelKind::Slack | ChannelKind::Discord | ChannelKind::Teams => Hide::Path,
        ChannelKind::Email => Hide::PasswordOnly,
        _ => Hide::QueryAndTokens,
    };
    shown(url, hide)
}

/// `view` with its credentials as `HIDDEN`: addresses as `address_shown`, header values, the
/// user key and the topic (`secret` is never in a view; `has_secret` says whether one is set).
pub fn hide_channel(view: &mut ChannelView) {
    let kind = view.kind;
    if let Some(url) = view.url.as_mut() {
        *url = address_shown(kind, url);
    }
    for url in &mut view.urls {
        *url = address_shown(kind, url);
    }
    for value in view.headers.values_mut() {
        *value = HIDDEN.to_string();
    }
    for field in [&mut view.user_key, &mut view.topic] {
        if let Some(value) = field.as_mut() {
            *value = HIDDEN.to_string();
        }
    }
}

/// The settings key whose object's values are secret.
pub const HEADERS: &str = "headers";
/// The settings key whose text is secret.
pub const BODY: &str = "body";

/// An `http` monitor's target as a view shows it.
pub fn target_shown(spec: &MonitorSpec) -> String {
    if spec.kind == CheckKind::Http {
        shown(&spec.target, Hide::QueryAndTokens)
    } else {
        spec.target.clone()
    }
}

/// `spec` as a view shows it: every header value, the body and the target's credentials
/// replaced by `HIDDEN`.
pub fn hide_monitor(spec: &mut MonitorSpec) {
    spec.target = target_shown(spec);
    if let Some(Value::Object(headers)) = spec.settings.get_mut(HEADERS) {
        for value in headers.values_mut() {
            *value = Value::from(HIDDEN);
        }
    }
    if let Some(body @ Value::String(_)) = spec.settings.get_mut(BODY) {
        *body = Value::from(HIDDEN);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_mode_hides_what_it_says_and_a_password_always() {
        let url = "https://u:pw@hooks.example/x/4f0c2a1e-8a7b-4c61-9d3e-2b1f0a9c8d7e?token=abc";
        assert_eq!(
            shown(url, Hide::QueryAndTokens),
            "https://u:REDACTED@hooks.example/x/REDACTED?REDACTED"
        );
        assert_eq!(
            shown(url, Hide::Path),
            "https://u:REDACTED@hooks.example/REDACTED"
        );
        assert_eq!(
            shown(
                "smtp://u:pw@mail.example:587?tls=required",
                Hide::PasswordOnly
            ),
            "smtp://u:REDACTED@mail.example:587?tls=required"
        );
        assert_eq!(
            shown("db.internal:5432", Hide::QueryAndTokens),
            "db.internal:5432"
        );
        assert_eq!(
            shown("https://api.example.com/v2/health", Hide::QueryAndTokens),
            "https://api.example.com/v2/health"
        );
        // Nothing hidden: the address as given, not as the parser would write it.
        for plain in ["https://Example.com", "https://example.com:443/x#top"] {
            assert_eq!(shown(plain, Hide::QueryAndTokens), plain);
        }
    }
}
