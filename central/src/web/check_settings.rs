//! The settings of each check kind as form fields (an HTTP check's method, expected codes,
//! keyword, headers…; a DNS check's record type…), written into and read back from a monitor's
//! `settings` object. Keys common to every kind stay in the form's JSON box. Field names are
//! the service's own (`settings.method`), so its validation errors land beside them. Validation
//! itself is the service's: this only turns text into JSON values.

use maud::{html, Markup};
use serde_json::{Map, Value};
use shared_proto::settings::{DNS_RECORD_TYPES, HTTP_METHODS};
use shared_proto::CheckKind;

/// How one setting is typed in.
enum Input {
    Text,
    /// Several lines, kept as one string.
    Area,
    Choice(&'static [&'static str]),
    /// Comma-separated; numbers or strings.
    List {
        numbers: bool,
    },
    /// `Name: value`, one per line.
    Headers,
    /// A JSON value; text that is not JSON is a string.
    Json,
    Number,
    Check {
        default: bool,
    },
}

struct Setting {
    kind: CheckKind,
    key: &'static str,
    label: &'static str,
    hint: &'static str,
    input: Input,
}

const BODY_FORMATS: &[&str] = &["plain", "health-json"];

const SETTINGS: &[Setting] = &[
    Setting {
        kind: CheckKind::Http,
        key: "method",
        label: "Method",
        hint: "",
        input: Input::Choice(&HTTP_METHODS),
    },
    Setting {
        kind: CheckKind::Http,
        key: "expected_status",
        label: "Accepted status codes",
        hint: "comma-separated, like 200, 204; empty: any 2xx",
        input: Input::List { numbers: true },
    },
    Setting {
        kind: CheckKind::Http,
        key: "keyword",
        label: "Body must contain",
        hint: "",
        input: Input::Text,
    },
    Setting {
        kind: CheckKind::Http,
        key: "keyword_absent",
        label: "Body must not contain",
        hint: "",
        input: Input::Text,
    },
    Setting {
        kind: CheckKind::Http,
        key: "json_path",
        label: "JSON pointer",
        hint: "into the response body, like /status",
        input: Input::Text,
    },
    Setting {
        kind: CheckKind::Http,
        key: "json_expected",
        label: "…must equal",
        hint: "a JSON value (true, 3, \"ok\"); other text is taken as a string",
        input: Input::Json,
    },
    Setting {
        kind: CheckKind::Http,
        key: "headers",
        label: "Request headers",
        hint: "one per line, like Authorization: Bearer …",
        input: Input::Headers,
    },
    Setting {
        kind: CheckKind::Http,
        key: "body",
        label: "Request body",
        hint: "",
        input: Input::Area,
    },
    Setting {
        kind: CheckKind::Http,
        key: "format",
        label: "Response format",
        hint: "health-json reads a health document listing dependencies",
        input: Input::Choice(BODY_FORMATS),
    },
    Setting {
        kind: CheckKind::Http,
        key: "follow_redirects",
        label: "Follow redirects",
        hint: "",
        input: Input::Check { default: true },
    },
    Setting {
        kind: CheckKind::Http,
        key: "verify_tls",
        label: "Verify the TLS certificate",
        hint: "",
        input: Input::Check { default: true },
    },
    Setting {
        kind: CheckKind::Http,
        key: "conditional",
        label: "Conditional requests (304 counts as up)",
        hint: "",
        input: Input::Check { default: false },
    },
    Setting {
        kind: CheckKind::Dns,
        key: "record_type",
        label: "Record type",
        hint: "",
        input: Input::Choice(&DNS_RECORD_TYPES),
    },
    Setting {
        kind: CheckKind::Dns,
        key: "expected",
        label: "Expected answers",
        hint: "comma-separated, each must be among the answers; empty: any answer",
        input: Input::List { numbers: false },
    },
    Setting {
        kind: CheckKind::Dns,
        key: "nameserver",
        label: "Name server",
        hint: "ip:port, like 1.1.1.1:53; empty: the poller's resolver",
        input: Input::Text,
    },
    Setting {
        kind: CheckKind::Tls,
        key: "warn_days",
        label: "Down when the certificate expires within (days)",
        hint: "default 14",
        input: Input::Number,
    },
    Setting {
        kind: CheckKind::Tls,
        key: "verify",
        label: "Verify the certificate chain",
        hint: "",
        input: Input::Check { default: true },
    },
    Setting {
        kind: CheckKind::Tls,
        key: "server_name",
        label: "Server name (SNI)",
        hint: "when it differs from the target host",
        input: Input::Text,
    },
];

/// The form field of a setting: `settings.method`.
pub fn field_name(key: &str) -> String {
    format!("settings.{key}")
}

/// Whether `field` (a service error's field, like `settings.expected_status`) has its own input.
pub fn has_field(field: &str) -> bool {
    field
        .strip_prefix("settings.")
        .is_some_and(|key| SETTINGS.iter().any(|s| s.key == key))
}

fn of_kind(kind: CheckKind) -> impl Iterator<Item = &'static Setting> {
    SETTINGS.iter().filter(move |s| s.kind == kind)
}

/// The typed-in text of each kind's settings, keyed by field name; a checkbox that is on is `on`.
pub type FieldValues = std::collections::BTreeMap<String, String>;

/// What a new form shows: every checkbox at its default.
pub fn defaults() -> FieldValues {
    SETTINGS
        .iter()
        .filter(|s| matches!(s.input, Input::Check { default: true }))
        .map(|s| (field_name(s.key), "on".to_string()))
        .collect()
}

/// Splits stored settings into the text of `kind`'s fields and the rest (for the JSON box).
pub fn split(kind: CheckKind, settings: &Map<String, Value>) -> (FieldValues, Map<String, Value>) {
    let mut rest = settings.clone();
    let mut values = FieldValues::new();
    for setting in of_kind(kind) {
        let stored = rest.remove(setting.key);
        let text = match (&setting.input, stored) {
            (Input::Check { default }, None) => default.then(|| "on".to_string()),
            (Input::Check { .. }, Some(v)) => (v == Value::Bool(true)).then(|| "on".to_string()),
            (_, None) | (_, Some(Value::Null)) => None,
            (Input::List { .. }, Some(Value::Array(items))) => Some(
                items
                    .iter()
                    .map(|item| match item {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
            (Input::Headers, Some(Value::Object(headers))) => {
                Some(super::fields::headers_text(headers.iter().map(
                    |(name, value)| (name, value.as_str().unwrap_or_default()),
                )))
            }
            // A string that would read back as another JSON value keeps its quotes.
            (Input::Json, Some(Value::String(s))) if serde_json::from_str::<Value>(&s).is_ok() => {
                Some(Value::String(s).to_string())
            }
            (_, Some(Value::String(s))) => Some(s),
            (_, Some(other)) => Some(other.to_string()),
        };
        if let Some(text) = text {
            values.insert(field_name(setting.key), text);
        }
    }
    (values, rest)
}

/// Writes `kind`'s fields into `settings`: each field wins over the same key typed in the JSON
/// box; an empty field (or a checkbox at its default) leaves the key out, so the default holds.
/// Errors name the field that cannot be read.
pub fn merge(
    kind: CheckKind,
    values: &FieldValues,
    settings: &mut Map<String, Value>,
) -> Result<(), (String, String)> {
    for setting in of_kind(kind) {
        let field = field_name(setting.key);
        let text = values.get(&field).map(|t| t.trim()).unwrap_or_default();
        settings.remove(setting.key);
        let value = match &setting.input {
            Input::Check { default } => {
                let on = !text.is_empty();
                (on != *default).then_some(Value::Bool(on))
            }
            _ if text.is_empty() => None,
            // The first choice is the default.
            Input::Choice(options) if text == options[0] => None,
            Input::Text | Input::Area | Input::Choice(_) => Some(Value::String(text.into())),
            Input::Number => Some(Value::Number(
                text.parse::<u32>()
                    .map_err(|_| {
                        (
                            field.clone(),
                            format!("must be a whole number, not `{text}`"),
                        )
                    })?
                    .into(),
            )),
            Input::Json => {
                Some(serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.into())))
            }
            Input::List { numbers } => {
                let items = text.split(',').map(str::trim).filter(|i| !i.is_empty());
                let list: Result<Vec<Value>, _> = items
                    .map(|item| match numbers {
                        true => item.parse::<u16>().map(Value::from).map_err(|_| {
                            (
                                field.clone(),
                                format!("`{item}` is not a status code; write codes like 200, 204"),
                            )
                        }),
                        false => Ok(Value::String(item.into())),
                    })
                    .collect();
                Some(Value::Array(list?))
            }
            Input::Headers => Some(Value::Object(
                super::fields::parse_headers(&field, text)
                    .map_err(|e| (e.field, e.message))?
                    .into_iter()
                    .map(|(name, value)| (name, Value::String(value)))
                    .collect(),
            )),
        };
        if let Some(value) = value {
            settings.insert(setting.key.into(), value);
        }
    }
    Ok(())
}

/// The fields of each kind in `kinds`, a fieldset per kind. With script on, only the chosen
/// kind's fieldset shows (`app.js`); without, all do, and only the chosen kind's are read.
pub fn render(
    kinds: &[CheckKind],
    values: &FieldValues,
    error_for: &dyn Fn(&str) -> Option<String>,
) -> Markup {
    html! {
        @for kind in kinds {
            @let settings: Vec<&Setting> = of_kind(*kind).collect();
            @if !settings.is_empty() {
                fieldset data-kinds=(kind.as_str()) {
                    legend { (kind.as_str().to_uppercase()) " check" }
                    @for setting in settings {
                        (input(setting, values, error_for))
                    }
                }
            }
        }
    }
}

fn input(
    setting: &Setting,
    values: &FieldValues,
    error_for: &dyn Fn(&str) -> Option<String>,
) -> Markup {
    let name = field_name(setting.key);
    // One kind's fields are unique on the page; the key alone could repeat across kinds.
    let id = format!("{}-{}", setting.kind.as_str(), setting.key);
    let value = values.get(&name).map(String::as_str).unwrap_or_default();
    let error = error_for(&name);
    let described = error.as_ref().map(|_| format!("{id}-error"));
    let invalid = error.as_ref().map(|_| "true");
    let message = html! { @if let Some(message) = &error {
        p.field-error id={ (id) "-error" } role="alert" { (message) }
    } };
    if let Input::Check { .. } = setting.input {
        return html! {
            label.check { input #(id) type="checkbox" name=(name) checked[!value.is_empty()]; " " (setting.label) }
            (message)
        };
    }
    html! {
        div.field {
            label for=(id) { (setting.label) }
            @match &setting.input {
                Input::Choice(options) => select #(id) name=(name) aria-describedby=[&described] {
                    @for option in *options {
                        option value=(option) selected[value == *option || (value.is_empty() && option == &options[0])] { (option) }
                    }
                },
                Input::Area | Input::Headers => textarea #(id) name=(name) rows="3"
                    aria-invalid=[invalid] aria-describedby=[&described] { (value) },
                _ => input #(id) name=(name) type="text" value=(value)
                    aria-invalid=[invalid] aria-describedby=[&described];,
            }
            @if !setting.hint.is_empty() { p.hint { (setting.hint) } }
            (message)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn stored_settings_come_back_the_same_through_the_fields() {
        let stored = map(json!({
            "method": "POST", "expected_status": [200, 204], "headers": {"Accept": "text/html", "X-A": "b: c"},
            "json_path": "/ok", "json_expected": "true", "follow_redirects": false,
            "conditional": true, "confirm_down": 3
        }));
        let (values, rest) = split(CheckKind::Http, &stored);
        assert_eq!(rest, map(json!({"confirm_down": 3})));
        assert_eq!(values["settings.json_expected"], "\"true\"");
        assert_eq!(values["settings.expected_status"], "200, 204");
        assert!(!values.contains_key("settings.follow_redirects"));
        assert_eq!(values["settings.verify_tls"], "on");
        let mut merged = rest;
        merge(CheckKind::Http, &values, &mut merged).unwrap();
        assert_eq!(merged, stored);
    }

    #[test]
    fn defaults_stay_out_and_fields_win_over_the_json_box() {
        let mut settings = map(json!({"method": "PUT", "retries": 2}));
        merge(CheckKind::Http, &defaults(), &mut settings).unwrap();
        assert_eq!(settings, map(json!({"retries": 2})));
    }

    #[test]
    fn unreadable_text_names_its_field() {
        let mut values = defaults();
        values.insert("settings.expected_status".into(), "200, ok".into());
        let error = merge(CheckKind::Http, &values, &mut Map::new()).unwrap_err();
        assert_eq!(error.0, "settings.expected_status");
        let values = FieldValues::from([("settings.headers".into(), "no colon".into())]);
        let error = merge(CheckKind::Http, &values, &mut Map::new()).unwrap_err();
        assert_eq!(error.0, "settings.headers");
        let values = FieldValues::from([("settings.warn_days".into(), "soon".into())]);
        let error = merge(CheckKind::Tls, &values, &mut Map::new()).unwrap_err();
        assert_eq!(error.0, "settings.warn_days");
    }

    #[test]
    fn plain_text_is_a_string_and_json_is_json() {
        for (typed, expected) in [
            ("ok", json!("ok")),
            ("true", json!(true)),
            ("\"3\"", json!("3")),
        ] {
            let values = FieldValues::from([
                ("settings.json_path".into(), "/s".into()),
                ("settings.json_expected".into(), typed.into()),
            ]);
            let mut settings = Map::new();
            merge(CheckKind::Http, &values, &mut settings).unwrap();
            assert_eq!(settings["json_expected"], expected, "{typed}");
        }
    }
}
