//! Reading a health document (see docs/health-json.md): each dependency's name, health,
//! latency, skipped flag, error, contact and check details, where the monitor's mapping says
//! they are (the default shape without one). Skipped dependencies are reported but never fail
//! the check. What cannot be read is said in warnings, never guessed silently.
//! Owns: the document's interpretation. Must not: fetch anything.

use std::collections::HashSet;

use serde_json::{json, Map, Value};
use shared_proto::health::{HealthMapping, HealthyField, KEY};

/// The most dependencies read from one document; the rest are counted in a warning.
pub const MAX_DEPENDENCIES: usize = 100;
/// The most warnings kept from one document.
pub const MAX_WARNINGS: usize = 20;
/// The longest name kept, in characters.
pub const MAX_NAME_CHARS: usize = 200;
/// The longest error kept, in characters.
pub const MAX_ERROR_CHARS: usize = 500;
/// The largest `contact` or `check_details` kept, as JSON text.
pub const MAX_EXTRA_BYTES: usize = 2_048;
/// The most the dependencies may take as JSON text: a result's `meta` is kept whole at central
/// only up to 64 KiB (`MAX_RESULT_META_BYTES`), and the warnings (at most 20 × 200 characters,
/// 16 KiB) and the engine's notes share it.
pub const MAX_DEPENDENCIES_BYTES: usize = 40 * 1024;
/// The longest warning kept, in characters; an object key quoted in one is cut to 60.
pub const MAX_WARNING_CHARS: usize = 200;
const MAX_KEY_SHOWN: usize = 60;
/// The largest latency believed, in milliseconds (a day): beyond it, a number is a mistake.
const MAX_LATENCY_MS: f64 = 86_400_000.0;

pub struct HealthReport {
    /// Whether the document had a list where the mapping says: without one, nothing is said
    /// about any dependency (a document that could not be read does not mean they are gone).
    pub found: bool,
    pub dependencies: Value,
    /// What could not be read, once each (for `meta.dependency_warnings`).
    pub warnings: Vec<String>,
    pub failure: Option<String>,
}

impl HealthReport {
    /// Puts the dependencies, and the warnings when there are any, into a result's `meta`.
    pub fn fill(&self, meta: &mut Value) {
        if self.found {
            meta["dependencies"] = self.dependencies.clone();
        }
        if !self.warnings.is_empty() {
            meta["dependency_warnings"] = json!(self.warnings);
        }
    }
}

/// Whether `document` holds a list where `mapping` says (a body that is some other JSON is
/// not a health document).
pub fn has_list(document: &Value, mapping: &HealthMapping) -> bool {
    matches!(
        document.pointer(&mapping.list),
        Some(Value::Array(_) | Value::Object(_))
    )
}

/// Warnings, each kept once and at most `MAX_WARNINGS`.
#[derive(Default)]
struct Warnings {
    seen: HashSet<String>,
    list: Vec<String>,
}

impl Warnings {
    fn add(&mut self, warning: String) {
        let warning = printable(&warning, MAX_WARNING_CHARS);
        if self.list.len() < MAX_WARNINGS && self.seen.insert(warning.clone()) {
            self.list.push(warning);
        }
    }
}

/// `text` cut to `chars` characters, its control characters (a NUL, a line break) shown as
/// U+FFFD: a target's text goes into messages and pages, and central's PostgreSQL cannot store
/// a NUL.
fn printable(text: &str, chars: usize) -> String {
    text.chars()
        .take(chars)
        .map(|c| if c.is_control() { '\u{FFFD}' } else { c })
        .collect()
}

pub fn health_json(document: &Value, mapping: &HealthMapping) -> HealthReport {
    let items: Vec<(String, Option<&str>, &Value)> = match document.pointer(&mapping.list) {
        Some(Value::Array(list)) => list
            .iter()
            .enumerate()
            .map(|(i, item)| (format!("item {i}"), None, item))
            .collect(),
        Some(Value::Object(members)) => members
            .iter()
            .map(|(key, item)| {
                let shown = printable(key, MAX_KEY_SHOWN);
                (format!("member \"{shown}\""), Some(key.as_str()), item)
            })
            .collect(),
        _ => {
            let list = if mapping.list == "/dependencies" {
                "has no `dependencies` list".to_string()
            } else {
                format!("has no list at {}", mapping.list)
            };
            return HealthReport {
                found: false,
                dependencies: json!([]),
                warnings: Vec::new(),
                failure: Some(format!("health document {list}")),
            };
        }
    };
    let mut warnings = Warnings::default();
    if items.len() > MAX_DEPENDENCIES {
        warnings.add(format!(
            "{} items past the first {MAX_DEPENDENCIES} not read",
            items.len() - MAX_DEPENDENCIES
        ));
    }
    let mut names = HashSet::new();
    let mut failures = Vec::new();
    let mut dependencies = Vec::new();
    for (label, key, item) in items.into_iter().take(MAX_DEPENDENCIES) {
        let Some(dependency) = read_item(&label, key, item, mapping, &mut warnings) else {
            continue;
        };
        if !names.insert(dependency.name.clone()) {
            warnings.add(format!(
                "{label}: \"{}\" is named again; only the first is read",
                dependency.name
            ));
            continue;
        }
        if !dependency.skipped && !dependency.healthy {
            failures.push(match &dependency.error {
                Some(error) => format!("{} ({error})", dependency.name),
                None => dependency.name.clone(),
            });
        }
        dependencies.push(dependency.to_json());
    }
    let failure =
        (!failures.is_empty()).then(|| format!("unhealthy dependencies: {}", failures.join(", ")));
    fit(&mut dependencies, &mut warnings);
    HealthReport {
        found: true,
        dependencies: Value::Array(dependencies),
        warnings: warnings.list,
        failure,
    }
}

/// Keeps the dependencies within `MAX_DEPENDENCIES_BYTES`: without their contacts and check
/// details first, then only as many as fit (the verdict was made from all of them).
fn fit(dependencies: &mut Vec<Value>, warnings: &mut Warnings) {
    let size = |list: &[Value]| list.iter().map(|d| d.to_string().len() + 1).sum::<usize>();
    if size(dependencies) <= MAX_DEPENDENCIES_BYTES {
        return;
    }
    for dependency in dependencies.iter_mut() {
        if let Value::Object(fields) = dependency {
            fields.remove("contact");
            fields.remove("check_details");
        }
    }
    warnings.add(format!(
        "contacts and check details not reported: the dependencies take over \
         {MAX_DEPENDENCIES_BYTES} bytes with them"
    ));
    let mut total = 0;
    let fitting = dependencies
        .iter()
        .take_while(|d| {
            total += d.to_string().len() + 1;
            total <= MAX_DEPENDENCIES_BYTES
        })
        .count();
    if fitting < dependencies.len() {
        warnings.add(format!(
            "{} dependencies past {MAX_DEPENDENCIES_BYTES} bytes not reported",
            dependencies.len() - fitting
        ));
        dependencies.truncate(fitting);
    }
}

/// One dependency as read.
struct Dependency {
    name: String,
    healthy: bool,
    skipped: bool,
    latency_ms: Option<serde_json::Number>,
    error: Option<String>,
    contact: Option<Value>,
    details: Option<Value>,
}

impl Dependency {
    fn to_json(&self) -> Value {
        let mut object = Map::new();
        object.insert("name".into(), json!(self.name));
        object.insert("healthy".into(), json!(self.healthy));
        object.insert("skipped".into(), json!(self.skipped));
        object.insert("latency_ms".into(), json!(self.latency_ms));
        object.insert("error".into(), json!(self.error));
        if let Some(contact) = &self.contact {
            object.insert("contact".into(), contact.clone());
        }
        if let Some(details) = &self.details {
            object.insert("check_details".into(), details.clone());
        }
        Value::Object(object)
    }
}

/// Reads one item; `None` (with a warning) when it has no name, since a dependency without
/// one cannot be told from the others at central.
fn read_item(
    label: &str,
    key: Option<&str>,
    item: &Value,
    mapping: &HealthMapping,
    warnings: &mut Warnings,
) -> Option<Dependency> {
    let name = if mapping.name == KEY {
        match key {
            Some(key) => Some(key.to_string()),
            None => {
                warnings.add(format!(
                    "{label}: `$key` names only the members of an object, and the list at {} \
                     is an array",
                    mapping.list
                ));
                None
            }
        }
    } else {
        match item.pointer(&mapping.name) {
            Some(Value::String(name)) if !name.trim().is_empty() => Some(name.clone()),
            Some(Value::String(_)) => {
                warnings.add(format!(
                    "{label}: name at {} is empty; not read",
                    shown(&mapping.name)
                ));
                None
            }
            Some(other) => {
                warnings.add(format!(
                    "{label}: name at {} is {}, not a text; not read",
                    shown(&mapping.name),
                    kind_of(other)
                ));
                None
            }
            None => {
                warnings.add(format!(
                    "{label}: no name at {}; not read",
                    shown(&mapping.name)
                ));
                None
            }
        }
    };
    let mut name = name?;
    // Central tells dependencies apart by name and shows it on pages and in notices.
    if name.chars().any(char::is_control) {
        warnings.add(format!("{label}: name holds control characters; not read"));
        return None;
    }
    if name.chars().count() > MAX_NAME_CHARS {
        name = name.chars().take(MAX_NAME_CHARS).collect();
        warnings.add(format!(
            "{label}: name cut to its first {MAX_NAME_CHARS} characters"
        ));
    }
    let healthy = match &mapping.healthy {
        HealthyField::Pointer(pointer) => match item.pointer(pointer) {
            Some(Value::Bool(healthy)) => *healthy,
            found => {
                warnings.add(format!(
                    "\"{name}\": healthy at {} is {}, not true or false; counted unhealthy",
                    shown(pointer),
                    found.map_or("missing", kind_of)
                ));
                false
            }
        },
        HealthyField::Equals(test) => match item.pointer(&test.pointer) {
            Some(value) => same_value(value, &test.equals),
            None => {
                warnings.add(format!(
                    "\"{name}\": no value at {}; counted unhealthy",
                    shown(&test.pointer)
                ));
                false
            }
        },
    };
    // A mapped field's pointer and value, when the item has a value there that is not null.
    fn at<'a>(item: &'a Value, pointer: &'a Option<String>) -> Option<(&'a str, &'a Value)> {
        let pointer = pointer.as_deref()?;
        item.pointer(pointer)
            .filter(|v| !v.is_null())
            .map(|v| (pointer, v))
    }
    let skipped = match at(item, &mapping.skipped) {
        None => false,
        Some((_, Value::Bool(skipped))) => *skipped,
        Some((pointer, other)) => {
            warnings.add(format!(
                "\"{name}\": skipped at {} is {}, not true or false; counted checked",
                shown(pointer),
                kind_of(other)
            ));
            false
        }
    };
    let latency_ms = match at(item, &mapping.latency_ms) {
        None => None,
        Some((_, Value::Number(n)))
            if n.as_f64()
                .is_some_and(|l| (0.0..=MAX_LATENCY_MS).contains(&l)) =>
        {
            Some(n.clone())
        }
        Some((pointer, other)) => {
            warnings.add(format!(
                "\"{name}\": latency at {} is {}, not a number of milliseconds up to a day",
                shown(pointer),
                kind_of(other)
            ));
            None
        }
    };
    let error = at(item, &mapping.error).map(|(_, error)| {
        let text = match error {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        printable(&text, MAX_ERROR_CHARS)
    });
    let mut extra = |pointer: &Option<String>, what: &str| {
        let (_, value) = at(item, pointer)?;
        if value.to_string().len() > MAX_EXTRA_BYTES {
            warnings.add(format!(
                "\"{name}\": {what} over {MAX_EXTRA_BYTES} bytes not kept"
            ));
            return None;
        }
        Some(value.clone())
    };
    let contact = extra(&mapping.contact, "contact");
    let details = extra(&mapping.details, "check details");
    Some(Dependency {
        name,
        healthy,
        skipped,
        latency_ms,
        error,
        contact,
        details,
    })
}

/// A pointer as a warning shows it (`""` is the item itself).
fn shown(pointer: &str) -> &str {
    if pointer.is_empty() {
        "the item itself"
    } else {
        pointer
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a text",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Whether a document's value equals a mapping's `equals`: numbers by value (a service's
/// `1.0` is the `1` an operator wrote, which `serde_json` keeps apart), anything else exactly.
fn same_value(found: &Value, wanted: &Value) -> bool {
    match (found, wanted) {
        (Value::Number(found), Value::Number(wanted)) => match (found.as_f64(), wanted.as_f64()) {
            (Some(a), Some(b)) if found.is_f64() || wanted.is_f64() => a == b,
            // Both integers: exactly, as i128 (f64 would call 2^53 + 1 and 2^53 equal).
            _ => as_i128(found) == as_i128(wanted),
        },
        _ => found == wanted,
    }
}

fn as_i128(number: &serde_json::Number) -> Option<i128> {
    number
        .as_i64()
        .map(i128::from)
        .or_else(|| number.as_u64().map(i128::from))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapping(value: Value) -> HealthMapping {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn the_default_shape_reads_every_field_and_says_what_it_could_not() {
        let document = json!({"dependencies": [
            {"name": "db", "healthy": true, "latency_ms": 3, "contact": {"team": "dba"},
             "check_details": {"query": "SELECT 1"}},
            {"name": "cache", "healthy": false, "error": {"code": 111}},
            {"name": "mail", "healthy": "yes", "skipped": true},
            {"healthy": true},
            {"name": "db", "healthy": false},
            "text",
        ]});
        let report = health_json(&document, &HealthMapping::default());
        let deps = report.dependencies.as_array().unwrap();
        assert_eq!(deps.len(), 3, "{deps:?}");
        assert_eq!(deps[0]["contact"], json!({"team": "dba"}));
        assert_eq!(deps[0]["check_details"], json!({"query": "SELECT 1"}));
        assert_eq!(deps[0]["latency_ms"], 3);
        assert_eq!(deps[1]["error"], "{\"code\":111}");
        assert_eq!(deps[2]["healthy"], false);
        assert_eq!(deps[2]["skipped"], true);
        assert_eq!(
            report.failure.as_deref(),
            Some("unhealthy dependencies: cache ({\"code\":111})"),
            "the skipped one fails nothing, the second db is not read"
        );
        assert_eq!(
            report.warnings,
            [
                "\"mail\": healthy at /healthy is a text, not true or false; counted unhealthy",
                "item 3: no name at /name; not read",
                "item 4: \"db\" is named again; only the first is read",
                "item 5: no name at /name; not read",
            ]
        );
    }

    #[test]
    fn equals_compares_numbers_by_value_and_the_rest_exactly() {
        assert!(same_value(&json!(1), &json!(1.0)));
        assert!(same_value(&json!(-0.0), &json!(0)));
        assert!(!same_value(&json!(1), &json!("1")));
        assert!(!same_value(&json!("UP"), &json!("up")));
        assert!(same_value(&json!({"a": [1]}), &json!({"a": [1]})));
        assert!(!same_value(&json!(u64::MAX), &json!(-1)));
    }

    #[test]
    fn a_mapping_reads_an_object_list_by_key_and_an_equals_test() {
        let document = json!({"details": {
            "postgres": {"status": "UP", "ms": 4},
            "redis": {"status": "DOWN", "why": "timeout"},
            "s3": {"ms": "slow"},
        }});
        let mapping = mapping(json!({
            "list": "/details", "name": "$key",
            "healthy": {"pointer": "/status", "equals": "UP"},
            "latency_ms": "/ms", "error": "/why"
        }));
        let report = health_json(&document, &mapping);
        let deps = report.dependencies.as_array().unwrap();
        let names: Vec<&str> = deps.iter().map(|d| d["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["postgres", "redis", "s3"]);
        assert_eq!(deps[0]["healthy"], true);
        assert_eq!(deps[1]["error"], "timeout");
        assert_eq!(
            report.failure.as_deref(),
            Some("unhealthy dependencies: redis (timeout), s3")
        );
        assert_eq!(
            report.warnings,
            [
                "\"s3\": no value at /status; counted unhealthy",
                "\"s3\": latency at /ms is a text, not a number of milliseconds up to a day",
            ]
        );
        assert!(has_list(&document, &mapping));
        assert!(!has_list(&json!({"details": 1}), &mapping));
    }

    #[test]
    fn a_missing_list_fails_the_check_and_long_documents_are_bounded() {
        let report = health_json(&json!({"status": "ok"}), &HealthMapping::default());
        assert_eq!(
            report.failure.as_deref(),
            Some("health document has no `dependencies` list")
        );
        let elsewhere = mapping(json!({"list": "/checks"}));
        let report = health_json(&json!({}), &elsewhere);
        assert_eq!(
            report.failure.as_deref(),
            Some("health document has no list at /checks")
        );

        let many: Vec<Value> = (0..MAX_DEPENDENCIES + 5)
            .map(|i| json!({"name": format!("d{i}"), "healthy": true, "skipped": 1}))
            .collect();
        let report = health_json(&json!({ "dependencies": many }), &HealthMapping::default());
        assert_eq!(
            report.dependencies.as_array().unwrap().len(),
            MAX_DEPENDENCIES
        );
        assert_eq!(report.warnings.len(), MAX_WARNINGS);
        assert_eq!(report.warnings[0], "5 items past the first 100 not read");
        let long = "n".repeat(MAX_NAME_CHARS + 1);
        let report = health_json(
            &json!({"dependencies": [{"name": long, "healthy": true,
                                      "contact": "x".repeat(MAX_EXTRA_BYTES)}]}),
            &HealthMapping::default(),
        );
        let dep = &report.dependencies[0];
        assert_eq!(dep["name"].as_str().unwrap().len(), MAX_NAME_CHARS);
        assert!(dep.get("contact").is_none());
        assert_eq!(report.warnings.len(), 2);
    }

    #[test]
    fn control_characters_are_never_passed_on() {
        let key = format!("k{}", "y".repeat(100));
        let document = json!({"deps": {
            "db": {"ok": false, "why": "a\u{0}b\nc"},
            "bad\u{0}name": {"ok": true},
            key.clone(): {"ok": "yes"},
        }});
        let mapping = mapping(json!({
            "list": "/deps", "name": "$key", "healthy": "/ok", "error": "/why"
        }));
        let report = health_json(&document, &mapping);
        let deps = report.dependencies.as_array().unwrap();
        assert_eq!(deps.len(), 2, "{deps:?}");
        assert_eq!(deps[0]["error"], "a\u{FFFD}b\u{FFFD}c");
        assert!(report
            .warnings
            .iter()
            .all(|w| !w.chars().any(char::is_control)));
        assert!(report.warnings.contains(
            &"member \"bad\u{FFFD}name\": name holds control characters; not read".to_string()
        ));
        assert!(report
            .warnings
            .iter()
            .all(|w| w.chars().count() <= MAX_WARNING_CHARS));
        assert!(
            report
                .warnings
                .iter()
                .any(|w| w.starts_with(&format!("\"{key}\""))),
            "the name itself is kept whole: {:?}",
            report.warnings
        );
    }

    #[test]
    fn what_is_reported_fits_in_a_results_meta() {
        let big: Vec<Value> = (0..MAX_DEPENDENCIES)
            .map(|i| {
                json!({"name": format!("{i}{}", "n".repeat(190)), "healthy": false,
                       "error": "e".repeat(MAX_ERROR_CHARS), "contact": "c".repeat(2_000)})
            })
            .collect();
        let report = health_json(&json!({ "dependencies": big }), &HealthMapping::default());
        let deps = report.dependencies.as_array().unwrap();
        assert!(report.dependencies.to_string().len() <= MAX_DEPENDENCIES_BYTES);
        assert!(
            deps.len() < MAX_DEPENDENCIES && deps.len() > 50,
            "{}",
            deps.len()
        );
        assert!(deps.iter().all(|d| d.get("contact").is_none()));
        assert_eq!(report.warnings.len(), 2, "{:?}", report.warnings);
        let failure = report.failure.clone().unwrap();
        assert!(failure.contains(&format!("{}{}", MAX_DEPENDENCIES - 1, "n")));
        let mut meta = json!({});
        report.fill(&mut meta);
        assert!(meta.to_string().len() < shared_proto::poller_api::MAX_RESULT_META_BYTES);
        let mut meta = json!({});
        health_json(&json!({}), &HealthMapping::default()).fill(&mut meta);
        assert_eq!(meta, json!({}), "no list: nothing said of any dependency");
    }
}
