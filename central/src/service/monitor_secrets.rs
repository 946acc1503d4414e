//! What a monitor's views keep from their readers: the values of an `http` monitor's request
//! headers, where its credentials to the target live (an `Authorization`, an API key). Views
//! show them as `REDACTED` (`HIDDEN`, as a channel's); an edit that sends a view back keeps
//! what is stored. Owns only that mapping: storage and the poller's copy (which needs the real
//! values) never pass through here.

use serde_json::Value;
use shared_proto::notifications::HIDDEN;
use shared_proto::MonitorSpec;

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
/// (a header the edit renames or adds with the literal value is taken as typed).
pub fn keep(spec: &mut MonitorSpec, stored: &MonitorSpec) {
    let Some(Value::Object(before)) = stored.settings.get(HEADERS) else {
        return;
    };
    if let Some(Value::Object(headers)) = spec.settings.get_mut(HEADERS) {
        for (name, value) in headers.iter_mut() {
            if value.as_str() == Some(HIDDEN) {
                if let Some(original) = before.get(name) {
                    value.clone_from(original);
                }
            }
        }
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
        let mut edit =
            spec(json!({"headers": {"Authorization": HIDDEN, "X-A": "new", "X-B": HIDDEN}}));
        keep(&mut edit, &stored);
        assert_eq!(
            Value::Object(edit.settings),
            json!({"headers": {"Authorization": "Bearer s3cret", "X-A": "new", "X-B": HIDDEN}})
        );
    }
}
