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
        key: "health_mapping",
        label: "Health document mapping",
        hint: "for health-json documents in another shape, like {\"list\": \"/components\", \
               \"name\": \"$key\", \"healthy\": {\"pointer\": \"/status\", \"equals\": \"UP\"}}; \
               docs/health-json.md",
        input: Input::Json,
    },
    Setting {
        kind: CheckKind::Http,
        key: "notify_dependencies",
        label: "Notify when a dependency fails or recovers",
        hint: "health-json: dependency.down and dependency.up to the monitor's channels",
        input: Input::Check { default: false },
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
    Setting {
        kind: CheckKind::Icmp,
        key: "count",
        label: "Echo requests per check",
        hint: "1 to 10; default 3",
        input: Input::Number,
    },
    Setting {
        kind: CheckKind::Icmp,
        key: "echo_interval_ms",
        label: "Between echo requests (ms)",
        hint: "200 to 10000; default 1000",
        input: Input::Number,
    },
    Setting {
        kind: CheckKind::Icmp,
        key: "max_loss_percent",
        label: "Down when more than this share is lost (%)",
        hint: "0 to 99; default 50",
        input: Input::Number,
    },
    Setting {
        kind: CheckKind::Heartbeat,
        key: "period_ms",
        label: "Period (ms)",
        hint: "a ping is expected this long after the previous; empty: the interval",
        input: Input::Number,
    },
    Setting {
        kind: CheckKind::Heartbeat,
        key: "cron",
        label: "Or on a cron schedule",
        hint: "five fields, like 30 3 * * * (every night at 03:30)",
        input: Input::Text,
    },
    Setting {
        kind: CheckKind::Heartbeat,
        key: "time_zone",
        label: "Time zone of the schedule",
        hint: "like Europe/Paris; empty: UTC",
        input: Input::Text,
    },
    Setting {
        kind: CheckKind::Heartbeat,
        key: "grace_ms",
        label: "Grace (ms)",
        hint: "how late a ping may be, and how long a started job has to finish; default 60000",
        input: Input::Number,
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
        .filter_map(|s| Some((field_name(s.key), default_text(s)?)))
        .collect()
}

/// Splits stored settings into the text of `kind`'s fields and the rest (for the JSON box). A
/// stored value its field would not give back exactly (a body with `\r\n`, an empty JSON pointer,
/// a DNS answer with a comma…) stays in the JSON box, and its field stays at the default, so
/// saving an unchanged form never changes a setting.
pub fn split(kind: CheckKind, settings: &Map<String, Value>) -> (FieldValues, Map<String, Value>) {
    let mut rest = settings.clone();
    let mut values = FieldValues::new();
    for setting in of_kind(kind) {
        let stored = settings.get(setting.key);
        let text = match stored.map(|value| text_of(setting, value)) {
            Some(text) if read(setting, &text).ok().flatten().as_ref() == stored => {
                rest.remove(setting.key);
                Some(text)
            }
            _ => default_text(setting),
        };
        if let Some(text) = text.filter(|t| !t.is_empty()) {
            values.insert(field_name(setting.key), text);
        }
    }
    (values, rest)
}

/// What a field shows when the setting is unset: a checkbox at its default, else nothing.
fn default_text(setting: &Setting) -> Option<String> {
    matches!(setting.input, Input::Check { default: true }).then(|| "on".to_string())
}

/// A stored value as the field's text (not always readable back: `split` checks).
fn text_of(setting: &Setting, value: &Value) -> String {
    match (&setting.input, value) {
        (Input::Check { .. }, v) => if *v == Value::Bool(true) { "on" } else { "" }.to_string(),
        (Input::List { .. }, Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect::<Vec<_>>()
            .join(", "),
        (Input::Headers, Value::Object(headers)) => super::fields::headers_text(
            headers
                .iter()
                .map(|(name, value)| (name, value.as_str().unwrap_or_default())),
        ),
        // A string that would read back as another JSON value, or as nothing, keeps its quotes.
        (Input::Json, Value::String(s))
            if s.trim().is_empty() || serde_json::from_str::<Value>(s).is_ok() =>
        {
            value.to_string()
        }
        (_, Value::String(s)) => s.clone(),
        (_, other) => other.to_string(),
    }
}

/// Writes `kind`'s fields into `settings`. A field that holds a value wins over the same key
/// typed in the JSON box; an empty field (or a checkbox at its default) leaves the box's key,
/// if any, as it is. Errors name the field that cannot be read.
pub fn merge(
    kind: CheckKind,
    values: &FieldValues,
    settings: &mut Map<String, Value>,
) -> Result<(), (String, String)> {
    for setting in of_kind(kind) {
        let text = values
            .get(&field_name(setting.key))
            .map(String::as_str)
            .unwrap_or_default();
        if let Some(value) = read(setting, text)? {
            settings.insert(setting.key.into(), value);
        }
    }
    Ok(())
}

/// The value a field's text stands for; `None` when it says "the default". Text is kept as
/// typed (a keyword may end in a space); numbers, lists and JSON are read without the blanks
/// around them. Browsers send a textarea's lines with `\r\n`: they come back as `\n`.
fn read(setting: &Setting, text: &str) -> Result<Option<Value>, (String, String)> {
    let field = field_name(setting.key);
    let trimmed = text.trim();
    Ok(match &setting.input {
        Input::Check { default } => {
            let on = !trimmed.is_empty();
            (on != *default).then_some(Value::Bool(on))
        }
        _ if trimmed.is_empty() => None,
        // The first choice is the default.
        Input::Choice(options) if text == options[0] => None,
        Input::Text | Input::Choice(_) => Some(Value::String(text.into())),
        Input::Area => Some(Value::String(text.replace("\r\n", "\n"))),
        Input::Number => Some(Value::Number(
            trimmed
                .parse::<u32>()
                .map_err(|_| (field, format!("must be a whole number, not `{trimmed}`")))?
                .into(),
        )),
        Input::Json => {
            Some(serde_json::from_str(trimmed).unwrap_or_else(|_| Value::String(text.into())))
        }
        Input::List { numbers } => {
            let items = trimmed.split(',').map(str::trim).filter(|i| !i.is_empty());
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
            super::fields::parse_headers(&field, trimmed)
                .map_err(|e| (e.field, e.message))?
                .into_iter()
                .map(|(name, value)| (name, Value::String(value)))
                .collect(),
        )),
    })
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
    fn a_field_with_a_value_wins_over_the_json_box_and_an_empty_one_leaves_it() {
        let mut settings = map(json!({"method": "PUT", "keyword": "a", "verify_tls": false}));
        let mut values = defaults();
        values.insert("settings.keyword".into(), "b".into());
        merge(CheckKind::Http, &values, &mut settings).unwrap();
        assert_eq!(
            settings,
            map(json!({"method": "PUT", "keyword": "b", "verify_tls": false}))
        );
        let mut settings = map(json!({"retries": 2}));
        merge(CheckKind::Http, &defaults(), &mut settings).unwrap();
        assert_eq!(settings, map(json!({"retries": 2})), "defaults stay out");
    }

    #[test]
    fn what_a_field_cannot_give_back_stays_in_the_json_box() {
        let stored = map(json!({
            "json_path": "", "json_expected": "", "keyword": " padded ", "body": "a\r\nb",
            "follow_redirects": true, "method": "GET"
        }));
        let (values, rest) = split(CheckKind::Http, &stored);
        assert_eq!(values["settings.keyword"], " padded ");
        assert_eq!(values["settings.json_expected"], "\"\"");
        assert_eq!(
            rest,
            map(
                json!({"json_path": "", "body": "a\r\nb", "follow_redirects": true, "method": "GET"})
            )
        );
        let mut merged = rest;
        merge(CheckKind::Http, &values, &mut merged).unwrap();
        assert_eq!(merged, stored, "an unchanged save changes nothing");
        let dns = map(json!({"expected": ["v=spf1 a, b"]}));
        let (values, rest) = split(CheckKind::Dns, &dns);
        assert!(!values.contains_key("settings.expected"));
        assert_eq!(rest, dns);
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

    fn leaf() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        prop_oneof![
            any::<bool>().prop_map(Value::from),
            any::<i32>().prop_map(Value::from),
            ".{0,12}".prop_map(Value::from),
            Just(Value::Null),
        ]
    }

    proptest::proptest! {
        /// Whatever is stored, opening the edit form and saving it unchanged stores it again.
        #[test]
        fn an_unchanged_form_saves_what_was_stored(
            keyword in proptest::option::of(".{0,12}"),
            body in proptest::option::of("[a-z\r\n ]{0,12}"),
            expected_status in proptest::option::of(proptest::collection::vec(proptest::prelude::any::<u16>(), 0..3)),
            json_path in proptest::option::of("(/[a-z]{0,4}){0,2}"),
            json_expected in proptest::option::of(leaf()),
            headers in proptest::option::of(proptest::collection::btree_map("[A-Za-z-]{1,6}", ".{0,8}", 0..3)),
            method in proptest::option::of(proptest::sample::select(HTTP_METHODS.to_vec())),
            follow_redirects in proptest::option::of(proptest::prelude::any::<bool>()),
            other in proptest::option::of(leaf()),
        ) {
            let mut stored = Map::new();
            let mut put = |key: &str, value: Option<Value>| {
                if let Some(value) = value {
                    stored.insert(key.to_string(), value);
                }
            };
            put("keyword", keyword.map(Value::from));
            put("body", body.map(Value::from));
            put("expected_status", expected_status.map(Value::from));
            put("json_path", json_path.map(Value::from));
            put("json_expected", json_expected);
            put("headers", headers.map(|h| Value::Object(h.into_iter().map(|(k, v)| (k, Value::from(v))).collect())));
            put("method", method.map(Value::from));
            put("follow_redirects", follow_redirects.map(Value::from));
            put("confirm_down", other);
            let (values, rest) = split(CheckKind::Http, &stored);
            let mut saved = rest;
            merge(CheckKind::Http, &values, &mut saved).unwrap();
            proptest::prop_assert_eq!(saved, stored);
        }
    }
}
