//! How an edit of a monitor keeps the secrets its views hid: the values of an `http` monitor's
//! request headers, its request body and the parts of its target URL that carry a credential,
//! where its credentials to the target live (an `Authorization`, an API key, a login form,
//! `?key=`). Views show them as `REDACTED` (`shared_proto::redaction::hide_monitor`); an edit
//! that sends a view back keeps what is stored, but only while the monitor still goes to the
//! same server from the same pollers. Owns only that rule: storage and the poller's copy
//! (which needs the real values) never pass through here.

use serde_json::{Map, Value};
use shared_proto::notifications::HIDDEN;
use shared_proto::{MonitorSpec, ValidationError};

use shared_proto::redaction::{target_shown, BODY, HEADERS};

/// An edit of `stored` that sends a header or the body back as `HIDDEN` keeps the stored value
/// (header names compared as HTTP does, ignoring case). Refused (`422`, naming the field): a
/// `HIDDEN` value with no stored value behind it (it would be sent as the literal word), and
/// keeping a stored value while the target's origin (scheme, host, port) or the monitor's
/// placement changes, since that would hand the credential to another server or to other
/// pollers; such an edit types the values again.
pub fn keep(spec: &mut MonitorSpec, stored: &MonitorSpec) -> Result<(), ValidationError> {
    let mut kept = Vec::new();
    let stored_shown = target_shown(stored);
    if spec.target == stored_shown && stored_shown != stored.target {
        spec.target.clone_from(&stored.target);
        kept.push("target");
    } else if spec.target.contains(HIDDEN) {
        return Err(ValidationError::combination(
            "target",
            format!(
                "shows `{HIDDEN}` where the stored target had a secret, but is no longer that \
                 target: type the whole target"
            ),
        ));
    }
    let before = match stored.settings.get(HEADERS) {
        Some(Value::Object(before)) => before.clone(),
        _ => Map::new(),
    };
    if let Some(Value::Object(headers)) = spec.settings.get_mut(HEADERS) {
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
                    kept.push("settings.headers");
                }
                None => {
                    return Err(ValidationError::combination(
                        "settings.headers",
                        format!(
                            "header `{name}` is `{HIDDEN}` but has no stored value to keep: \
                             type its value"
                        ),
                    ))
                }
            }
        }
    }
    if let Some(body) = spec.settings.get_mut(BODY) {
        if body.as_str() == Some(HIDDEN) {
            match stored.settings.get(BODY) {
                Some(original @ Value::String(_)) => {
                    *body = original.clone();
                    kept.push("settings.body");
                }
                _ => {
                    return Err(ValidationError::combination(
                        "settings.body",
                        format!("is `{HIDDEN}` but has no stored body to keep: type the body"),
                    ))
                }
            }
        }
    }
    kept.dedup();
    if let Some(moved) = moved(spec, stored).filter(|_| !kept.is_empty()) {
        return Err(ValidationError::combination(
            kept.join(", "),
            format!(
                "{moved}, and the stored values are kept only for where they were given: \
                 type {} again",
                kept.join(" and ")
            ),
        ));
    }
    Ok(())
}

/// An edit that moves the target to another origin, or the monitor to other pollers, without
/// restating `settings` would carry the stored header values and body along: refused (`422`,
/// naming them), so that credentials follow only an edit that states them.
pub fn not_carried_elsewhere(
    spec: &MonitorSpec,
    stored: &MonitorSpec,
    settings_restated: bool,
    target_restated: bool,
) -> Result<(), ValidationError> {
    let mut carried = Vec::new();
    if !target_restated && target_shown(stored) != stored.target {
        carried.push("target");
    }
    if matches!(stored.settings.get(HEADERS), Some(Value::Object(h)) if !h.is_empty()) {
        carried.push("settings.headers");
    }
    if matches!(stored.settings.get(BODY), Some(Value::String(_))) {
        carried.push("settings.body");
    }
    if settings_restated {
        carried.retain(|field| *field == "target");
    }
    if carried.is_empty() {
        return Ok(());
    }
    match moved(spec, stored) {
        Some(moved) => Err(ValidationError::combination(
            carried.join(", "),
            format!(
                "{moved}, and the stored {} would go with it: send them typed for the new \
                 place (or without them)",
                carried.join(" and ")
            ),
        )),
        None => Ok(()),
    }
}

/// How the edit moves the monitor, if it does: to another server (scheme, host, port of the
/// target) or to other pollers (any placement field).
fn moved(spec: &MonitorSpec, stored: &MonitorSpec) -> Option<&'static str> {
    if origin(&spec.target) != origin(&stored.target) {
        Some("the target moves to another server")
    } else if placement(spec) != placement(stored) {
        Some("the monitor moves to other pollers")
    } else {
        None
    }
}

/// Which pollers may run a monitor: its placement fields, compared as a whole.
#[allow(clippy::type_complexity)]
fn placement(
    spec: &MonitorSpec,
) -> (
    shared_proto::monitor::PollerMode,
    Option<uuid::Uuid>,
    Option<&str>,
    Option<&str>,
    Option<&str>,
    Option<&[String]>,
) {
    (
        spec.poller_mode,
        spec.poller_id,
        spec.poller_region.as_deref(),
        spec.poller_datacenter.as_deref(),
        spec.poller_capability.as_deref(),
        spec.poller_regions.as_deref(),
    )
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
    use shared_proto::redaction::hide_monitor;

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
        hide_monitor(&mut shown);
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
    fn a_targets_credentials_are_hidden_kept_and_never_moved_to_other_pollers() {
        let mut stored = spec(json!({}));
        stored.target = "https://probe:pw@api.example.com/health?key=s3cret".into();
        let mut shown = stored.clone();
        hide_monitor(&mut shown);
        assert_eq!(
            shown.target,
            "https://probe:REDACTED@api.example.com/health?REDACTED"
        );
        let mut sent_back = shown.clone();
        keep(&mut sent_back, &stored).unwrap();
        assert_eq!(sent_back.target, stored.target);
        // Moved to other pollers with the view's target, or without restating it: refused.
        let mut moved = shown.clone();
        moved.poller_region = Some("elsewhere".into());
        assert_eq!(keep(&mut moved, &stored).unwrap_err().field, "target");
        let mut unstated = stored.clone();
        unstated.poller_region = Some("elsewhere".into());
        let refused = not_carried_elsewhere(&unstated, &stored, true, false).unwrap_err();
        assert_eq!(refused.field, "target");
        assert!(not_carried_elsewhere(&unstated, &stored, false, true).is_ok());
        // A view's target on another host is no target.
        let mut other = shown.clone();
        other.target = "https://probe:REDACTED@evil.example/health?REDACTED".into();
        assert_eq!(keep(&mut other, &stored).unwrap_err().field, "target");
    }

    #[test]
    fn a_plain_target_moves_to_other_pollers_without_retyping() {
        let mut stored = spec(json!({}));
        stored.target = "https://Example.com".into();
        let mut moved = stored.clone();
        moved.poller_region = Some("elsewhere".into());
        assert!(not_carried_elsewhere(&moved, &stored, false, false).is_ok());
        let mut shown = moved.clone();
        hide_monitor(&mut shown);
        assert_eq!(shown.target, "https://Example.com");
        keep(&mut shown, &stored).unwrap();
    }

    #[test]
    fn a_body_is_hidden_and_kept_like_a_header() {
        let stored = spec(json!({"method": "POST", "body": "user=a&password=s3cret"}));
        let mut shown = stored.clone();
        hide_monitor(&mut shown);
        assert_eq!(shown.settings["body"], HIDDEN);
        let mut edit = shown.clone();
        keep(&mut edit, &stored).unwrap();
        assert_eq!(edit.settings["body"], "user=a&password=s3cret");
        let mut none = spec(json!({"method": "POST", "body": HIDDEN}));
        let refused = keep(&mut none, &spec(json!({}))).unwrap_err();
        assert_eq!(refused.field, "settings.body");
    }

    #[test]
    fn a_monitor_moved_to_other_pollers_does_not_take_its_secrets_along() {
        let stored = spec(json!({"headers": {"Authorization": "Bearer s3cret"}, "body": "b"}));
        let mut moved = stored.clone();
        moved.poller_region = Some("elsewhere".into());
        let refused = not_carried_elsewhere(&moved, &stored, false, false).unwrap_err();
        assert_eq!(refused.field, "settings.headers, settings.body");
        let mut sent_back = moved.clone();
        hide_monitor(&mut sent_back);
        let refused = keep(&mut sent_back, &stored).unwrap_err();
        assert_eq!(refused.field, "settings.headers, settings.body");
        let mut renamed = stored.clone();
        renamed.name = "other".into();
        hide_monitor(&mut renamed);
        keep(&mut renamed, &stored).unwrap();
        assert!(not_carried_elsewhere(&renamed, &stored, false, false).is_ok());
    }

    #[test]
    fn a_target_moved_without_its_settings_does_not_take_the_headers_along() {
        let stored = spec(json!({"headers": {"Authorization": "Bearer s3cret"}}));
        let mut moved = stored.clone();
        moved.target = "https://attacker.example/".into();
        assert!(not_carried_elsewhere(&moved, &stored, false, false).is_err());
        assert!(
            not_carried_elsewhere(&moved, &stored, true, false).is_ok(),
            "restated"
        );
        let mut same = stored.clone();
        same.target = "https://api.example.com/other".into();
        assert!(not_carried_elsewhere(&same, &stored, false, false).is_ok());
    }
}
