//! What a monitor's views keep from their readers: the values of an `http` monitor's request
//! headers, where its credentials to the target live (an `Authorization`, an API key). Views
//! show them as `REDACTED` (`HIDDEN`, as a channel's); an edit that sends a view back keeps
//! what is stored. Owns only that mapping: storage and the poller's copy (which needs the real
//! values) never pass through here.

use serde_json::{Map, Value};
use shared_proto::notifications::HIDDEN;
use shared_proto::{MonitorSpec, ValidationError};

/// The settings key whose object's values are secret.
const HEADERS: &str = "headers";

/// `spec` as a view shows it: every header value replaced by `HIDDEN`.
pub fn hide(spec: &mut MonitorSpec) {
    if let Some(Value::Object(headers)) = spec.settings.get_mut(HEADERS) {
        for value in headers.values_mut() {
            *value = Value::from(HIDDEN);
        }
    }
}

/// An edit of `stored` that sends a header back as `HIDDEN` keeps that header's stored value
/// (names compared as HTTP does, ignoring case). Refused (`422`, naming `settings.headers`):
/// a `HIDDEN` value with no stored value behind it (it would be sent as the literal word), and
/// keeping a stored value while the target's origin (scheme, host, port) changes, since that
/// would hand the credential to another server; such an edit types the values again.
pub fn keep(spec: &mut MonitorSpec, stored: &MonitorSpec) -> Result<(), ValidationError> {
    let before = match stored.settings.get(HEADERS) {
        Some(Value::Object(before)) => before.clone(),
        _ => Map::new(),
    };
    let Some(Value::Object(headers)) = spec.settings.get_mut(HEADERS) else {
        return Ok(());
    };
    let mut kept = false;
    for (name, value) in headers.iter_mut() {
        if value.as_str() != Some(HIDDEN) {
            continue;
        }
        let original = before
            .iter()
            .find(|(stored_name, _)| stored_name.eq_ignore_ascii_case(name))
            .map(|(_, original)| original.clone());
        match original {
            Some(original) => {
                *value = original;
                kept = true;
            }
            None => {
                return Err(ValidationError::combination(
                    "settings.headers",
                    format!(
                        "header `{name}` is `{HIDDEN}` but has no stored value to keep: type \
                         its value"
                    ),
                ))
            }
        }
    }
    if kept && origin(&spec.target) != origin(&stored.target) {
        return Err(ValidationError::combination(
            "settings.headers",
            "the target's scheme, host or port changed, and stored header values are kept \
             only for the server they were given for: type the header values again",
        ));
    }
    Ok(())
}

/// An edit that moves the target to another origin without restating `settings` would carry
/// the stored header values along to the new server: refused (`422`, naming
/// `settings.headers`), so that credentials follow only an edit that states them.
pub fn not_carried_elsewhere(
    spec: &MonitorSpec,
    stored: &MonitorSpec,
    settings_restated: bool,
) -> Result<(), ValidationError> {
    let has_headers =
        matches!(stored.settings.get(HEADERS), Some(Value::Object(h)) if !h.is_empty());
    if has_headers && !settings_restated && origin(&spec.target) != origin(&stored.target) {
        return Err(ValidationError::combination(
            "settings.headers",
            "the target moves to another server and the stored header values would go with \
             it: send `settings` with the headers for the new server (or without them)",
        ));
    }
    Ok(())
}

/// Scheme, host and port of a URL target; the target itself for other kinds.
fn origin(target: &str) -> String {
    match url::Url::parse(target) {
        Ok(url) => format!(
            "{}://{}:{}",
            url.scheme(),
            url.host_str().unwrap_or_default(),
            url.port_or_known_default().unwrap_or_default()
        ),
        Err(_) => target.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(settings: Value) -> MonitorSpec {
        serde_json::from_value(json!({
            "name": "api", "kind": "http", "target": "https://api.example.com/health",
            "settings": settings,
        }))
        .unwrap()
    }

    #[test]
    fn views_hide_every_header_value_and_nothing_else() {
        let mut shown = spec(
            json!({"headers": {"Authorization": "Bearer s3cret", "X-A": "b"}, "keyword": "ok"}),
        );
        hide(&mut shown);
        assert_eq!(
            Value::Object(shown.settings),
            json!({"headers": {"Authorization": HIDDEN, "X-A": HIDDEN}, "keyword": "ok"})
        );
    }

    #[test]
    fn sending_a_view_back_keeps_the_stored_values() {
        let stored = spec(json!({"headers": {"Authorization": "Bearer s3cret", "X-A": "b"}}));
        let mut edit = spec(json!({"headers": {"authorization": HIDDEN, "X-A": "new"}}));
        keep(&mut edit, &stored).unwrap();
        assert_eq!(
            Value::Object(edit.settings),
            json!({"headers": {"authorization": "Bearer s3cret", "X-A": "new"}}),
            "names are compared ignoring case"
        );
        let mut unknown = spec(json!({"headers": {"X-B": HIDDEN}}));
        let refused = keep(&mut unknown, &stored).unwrap_err();
        assert_eq!(
            refused.field, "settings.headers",
            "never sent as the literal word"
        );
    }

    #[test]
    fn a_stored_credential_never_follows_the_target_to_another_server() {
        let stored = spec(json!({"headers": {"Authorization": "Bearer s3cret"}}));
        let mut moved = spec(json!({"headers": {"Authorization": HIDDEN}}));
        moved.target = "https://attacker.example/health".into();
        assert!(keep(&mut moved, &stored).is_err());
        let mut other_port = spec(json!({"headers": {"Authorization": HIDDEN}}));
        other_port.target = "https://api.example.com:8443/health".into();
        assert!(keep(&mut other_port, &stored).is_err());
        // Another path on the same server keeps it; so does a retyped value anywhere.
        let mut path = spec(json!({"headers": {"Authorization": HIDDEN}}));
        path.target = "https://api.example.com/other".into();
        keep(&mut path, &stored).unwrap();
        let mut retyped = spec(json!({"headers": {"Authorization": "Bearer new"}}));
        retyped.target = "https://elsewhere.example/".into();
        keep(&mut retyped, &stored).unwrap();
    }

    #[test]
    fn a_target_moved_without_its_settings_does_not_take_the_headers_along() {
        let stored = spec(json!({"headers": {"Authorization": "Bearer s3cret"}}));
        let mut moved = stored.clone();
        moved.target = "https://attacker.example/".into();
        assert!(not_carried_elsewhere(&moved, &stored, false).is_err());
        assert!(
            not_carried_elsewhere(&moved, &stored, true).is_ok(),
            "restated"
        );
        let mut same = stored.clone();
        same.target = "https://api.example.com/other".into();
        assert!(not_carried_elsewhere(&same, &stored, false).is_ok());
    }
}
