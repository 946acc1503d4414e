//! Webhook bodies from an operator's template, for receivers no other kind speaks. A
//! template is JSON whose strings may hold placeholders (`{{ monitor.name }}`), or any other
//! text (a form, a line for an SMS gateway). In JSON, a string that is one placeholder alone
//! becomes the field's value with its type (`"{{ locations }}"` a list, `"{{ reminder }}"` a
//! boolean), and a placeholder inside a longer string its text; the body is written by
//! serde_json, so it is valid JSON whatever a target answered. Other text gets each field's
//! text as it is (sent as `text/plain`).
//!
//! Written here, not with a template engine (minijinja, Handlebars): each of those lets a
//! template grow a string without bound (minijinja's `~` concatenates without a limit, and a
//! `set` per line doubles a string, so a 16 KiB template could ask for more memory than any
//! machine has), and none writes into JSON strings escaped. Here the body is at most the
//! template plus each placeholder's field once, and there are no loops, conditions or
//! operators: the fields carry what conditions would decide (`severity`, `is_problem`,
//! `headline`). Owns the syntax and the rendering; what a field holds is `super::Facts`'.

use serde_json::{Map, Value};
use shared_proto::notifications::Notification;

use super::facts::Facts;

/// The fields a placeholder may start with: the notification's own and the facts central adds.
const FIELDS: &[&str] = &[
    "id",
    "event",
    "monitor",
    "poller",
    "status",
    "previous_status",
    "at",
    "message",
    "reminder",
    "locations",
    "dependency",
    "headline",
    "severity",
    "is_problem",
    "link",
];

/// The longest body a template may render to (1 MiB): a receiver's limit is far below it.
const MAX_BODY: usize = 1 << 20;

/// A rendered body and its content type.
pub struct Body {
    pub text: String,
    pub content_type: &'static str,
}

/// Whether `template` can be rendered: every `{{` opens a placeholder of a known field,
/// closed by `}}`. The error names the first one that cannot.
pub fn check(template: &str) -> Result<(), String> {
    pieces(template).try_for_each(|piece| match piece {
        Piece::Text(_) => Ok(()),
        Piece::Field(path) => {
            let first = path.first().copied().unwrap_or_default();
            if FIELDS.contains(&first) {
                Ok(())
            } else {
                Err(format!(
                    "`{{{{ {} }}}}` names no field; a placeholder starts with one of: {}",
                    path.join("."),
                    FIELDS.join(", ")
                ))
            }
        }
        Piece::Broken(at) => Err(format!(
            "the placeholder at `{}` is not closed by `}}}}` or holds more than a field's \
             path (like `{{{{ monitor.name }}}}`)",
            at.chars().take(30).collect::<String>()
        )),
    })
}

/// The body `template` gives for `message`.
pub fn render(template: &str, message: &Notification, facts: &Facts) -> Result<Body, String> {
    check(template)?;
    let mut fields = match serde_json::to_value(message) {
        Ok(Value::Object(fields)) => fields,
        _ => return Err("the message could not be read as fields".into()),
    };
    fields.insert("headline".into(), Value::from(facts.headline.clone()));
    fields.insert("severity".into(), Value::from(facts.severity));
    fields.insert("is_problem".into(), Value::from(facts.is_problem));
    fields.insert(
        "link".into(),
        facts.link.clone().map_or(Value::Null, Value::from),
    );
    let mut budget = MAX_BODY;
    let body = match serde_json::from_str::<Value>(template) {
        Ok(json) => fill_json(json, &fields, &mut budget).map(|json| Body {
            text: json.to_string(),
            content_type: "application/json",
        }),
        Err(_) => fill_text(template, &fields, &mut budget).map(|text| Body {
            text,
            content_type: "text/plain; charset=utf-8",
        }),
    };
    body.map_err(|Exhausted| "the template's body would be over the 1 MiB limit".to_string())
}

/// The body grew past `MAX_BODY`: rendering stops there, not after building all of it.
struct Exhausted;

/// Takes `n` bytes of what the body may still hold.
fn spend(budget: &mut usize, n: usize) -> Result<(), Exhausted> {
    *budget = budget.checked_sub(n).ok_or(Exhausted)?;
    Ok(())
}

/// A JSON template with its strings filled in.
fn fill_json(
    value: Value,
    fields: &Map<String, Value>,
    budget: &mut usize,
) -> Result<Value, Exhausted> {
    Ok(match value {
        Value::String(text) => {
            let mut parts = pieces(&text);
            match (parts.next(), parts.next()) {
                (Some(Piece::Field(path)), None) => {
                    let field = lookup(fields, &path);
                    spend(budget, serde_json::to_string(field).map_or(0, |t| t.len()))?;
                    field.clone()
                }
                _ => Value::String(fill_text(&text, fields, budget)?),
            }
        }
        Value::Array(items) => Value::Array(
            items
                .into_iter()
                .map(|v| fill_json(v, fields, budget))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(entries) => Value::Object(
            entries
                .into_iter()
                .map(|(key, v)| Ok((key, fill_json(v, fields, budget)?)))
                .collect::<Result<_, _>>()?,
        ),
        other => other,
    })
}

/// Text with each placeholder replaced by its field's text.
fn fill_text(
    text: &str,
    fields: &Map<String, Value>,
    budget: &mut usize,
) -> Result<String, Exhausted> {
    let mut out = String::with_capacity(text.len());
    for piece in pieces(text) {
        let added = match piece {
            Piece::Text(text) | Piece::Broken(text) => std::borrow::Cow::Borrowed(text),
            Piece::Field(path) => match lookup(fields, &path) {
                Value::Null => std::borrow::Cow::Borrowed(""),
                Value::String(s) => std::borrow::Cow::Borrowed(s.as_str()),
                other => std::borrow::Cow::Owned(other.to_string()),
            },
        };
        spend(budget, added.len())?;
        out.push_str(&added);
    }
    Ok(out)
}

/// The value at `path` (`monitor.name`, `locations.0.region`), null where there is none.
fn lookup<'a>(fields: &'a Map<String, Value>, path: &[&str]) -> &'a Value {
    static NULL: Value = Value::Null;
    let Some((first, rest)) = path.split_first() else {
        return &NULL;
    };
    let mut value = fields.get(*first).unwrap_or(&NULL);
    for segment in rest {
        value = match value {
            Value::Object(map) => map.get(*segment).unwrap_or(&NULL),
            Value::Array(items) => segment
                .parse::<usize>()
                .ok()
                .and_then(|i| items.get(i))
                .unwrap_or(&NULL),
            _ => &NULL,
        };
    }
    value
}

enum Piece<'a> {
    Text(&'a str),
    /// A placeholder's path.
    Field(Vec<&'a str>),
    /// `{{` that opens no placeholder (the rest of the text from it).
    Broken(&'a str),
}

/// The text and placeholders of a template, in order.
fn pieces(mut text: &str) -> impl Iterator<Item = Piece<'_>> {
    std::iter::from_fn(move || {
        if text.is_empty() {
            return None;
        }
        let Some(start) = text.find("{{") else {
            return Some(Piece::Text(std::mem::take(&mut text)));
        };
        if start > 0 {
            let (before, rest) = text.split_at(start);
            text = rest;
            return Some(Piece::Text(before));
        }
        let Some(end) = text.find("}}") else {
            return Some(Piece::Broken(std::mem::take(&mut text)));
        };
        let inner = text[2..end].trim();
        let path: Vec<&str> = inner.split('.').collect();
        let valid = path.iter().all(|segment| {
            !segment.is_empty()
                && segment
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        });
        if !valid {
            return Some(Piece::Broken(std::mem::take(&mut text)));
        }
        text = &text[end + 2..];
        Some(Piece::Field(path))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared_proto::notifications::{NotificationEvent, Subject};

    fn message(text: &str) -> Notification {
        Notification {
            id: uuid::Uuid::nil(),
            event: NotificationEvent::MonitorDown,
            monitor: Some(Subject {
                id: uuid::Uuid::from_u128(7),
                name: "shop \"eu\"".into(),
            }),
            poller: None,
            status: "down".into(),
            previous_status: Some("up".into()),
            at: "2026-11-23T10:00:00Z".parse().unwrap(),
            message: text.into(),
            reminder: false,
            locations: None,
            dependency: None,
            dependents: None,
        }
    }

    fn facts(message: &Notification) -> Facts {
        Facts::of(message, Some("https://central.example"))
    }

    #[test]
    fn a_json_template_stays_json_whatever_the_target_answered() {
        let hostile = "\"}], \"admin\": true, \"x\": [{\"\n{{ message }}";
        let message = message(hostile);
        let template = r#"{"text": "{{ monitor.name }} is {{status}}: {{ message }}",
                           "repeat": "{{ reminder }}", "where": "{{ link }}",
                           "nested": [{"s": "{{ severity }}"}], "missing": "{{ poller.name }}"}"#;
        let body = render(template, &message, &facts(&message)).unwrap();
        assert_eq!(body.content_type, "application/json");
        let json: Value = serde_json::from_str(&body.text).unwrap();
        assert_eq!(
            json["text"],
            format!("shop \"eu\" is down: {hostile}"),
            "the answer stays inside its string"
        );
        assert_eq!(json.as_object().unwrap().len(), 5, "{json}");
        assert_eq!(
            json["repeat"],
            Value::Bool(false),
            "a field alone keeps its type"
        );
        assert_eq!(
            json["where"],
            "https://central.example/monitors/00000000-0000-0000-0000-000000000007"
        );
        assert_eq!(json["nested"][0]["s"], "critical");
        assert_eq!(json["missing"], Value::Null);
    }

    #[test]
    fn other_text_gets_each_field_as_it_is() {
        let message = message("timeout");
        let body = render(
            "to=ops&text={{ headline }} ({{ event }})",
            &message,
            &facts(&message),
        )
        .unwrap();
        assert_eq!(body.content_type, "text/plain; charset=utf-8");
        assert_eq!(body.text, "to=ops&text=[ALERT] timeout (monitor.down)");
    }

    #[test]
    fn unknown_fields_and_unclosed_or_complex_placeholders_are_refused() {
        check(r#"{"a": "{{ monitor.name }}", "b": "{{locations.0.region}}"}"#).unwrap();
        check("no placeholders at all").unwrap();
        for (template, named) in [
            ("{{ secret }}", "secret"),
            ("{{ monitor.name", "not closed"),
            ("{{ message ~ message }}", "not closed"),
            ("{{ range(10) }}", "not closed"),
            ("{{ }}", "not closed"),
        ] {
            let error = check(template).unwrap_err();
            assert!(error.contains(named), "{template}: {error}");
        }
    }

    /// The body is the template plus each placeholder's field once: 200 placeholders of a
    /// 4 KiB message stay under the limit, and more are refused when the limit is reached,
    /// not built whole first.
    #[test]
    fn a_body_is_bounded() {
        let message = message(&"x".repeat(4096));
        let template = "{{message}}".repeat(200);
        assert!(render(&template, &message, &facts(&message)).is_ok());
        for template in [
            "{{message}}".repeat(1_500),
            r#"["{{message}}"],"#.repeat(300),
        ] {
            let template = if template.starts_with('[') {
                format!("[{}0]", template)
            } else {
                template
            };
            let error = render(&template, &message, &facts(&message)).err().unwrap();
            assert!(error.contains("1 MiB"), "{error}");
        }
    }
}
