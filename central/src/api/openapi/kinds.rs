//! The per-kind unions: `MonitorSpec` and `ChannelSpec` become a `oneOf` discriminated by
//! `kind`, one schema per kind with the target, settings and fields that kind takes, so that
//! generated clients are typed per kind and a validator refuses what central refuses.
//!
//! The derives describe the flat wire types (one struct for every kind, as serde reads them);
//! this module copies the flat schema once per kind and narrows it. The patterns and ranges
//! come from shared-proto (`target`, `settings`), the code central validates with; a test
//! below checks each stated range against the validation. Responses stay flat. Owns no
//! validation: a rule added here and not in shared-proto would be a rule only on paper.

use serde_json::{json, Map, Value};
use shared_proto::channel_fields;
use shared_proto::notifications::{ChannelKind, RESERVED_HEADERS};
use shared_proto::settings::{
    CommonSettings, DnsSettings, HttpSettings, TlsSettings, DNS_RECORD_TYPES, HTTP_METHODS,
    MAX_HEADERS, MAX_HEADER_VALUE_LEN,
};
use shared_proto::target::{
    self, HTTP_PATTERN, MAX_DNS_TARGET_LEN, MAX_TARGET_LEN, NAMESERVER_PATTERN, SMTP_URL_PATTERN,
};
use shared_proto::CheckKind;
use utoipa::PartialSchema;

pub(super) fn one_of_per_kind(document: &mut Value) {
    let Some(Value::Object(schemas)) = document.pointer_mut("/components/schemas") else {
        return;
    };
    monitor_kinds(schemas);
    channel_kinds(schemas);
}

/// Extra HTTP headers, as `settings::check_header_map` accepts them.
pub(super) fn header_rules() -> Value {
    json!({
        "type": "object",
        "maxProperties": MAX_HEADERS,
        "propertyNames": {"pattern": "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$"},
        "additionalProperties": {
            "type": "string",
            "maxLength": MAX_HEADER_VALUE_LEN,
            "pattern": "^[^\\x00-\\x08\\x0a-\\x1f\\x7f]*$",
        },
    })
}

/// A channel's extra headers: [`header_rules`], and none of the names central sets itself
/// (`RESERVED_HEADERS`, `Proxy-*`), in any case.
pub(super) fn channel_header_rules() -> Value {
    let any_case = |name: &str| -> String {
        name.chars()
            .map(|c| match c {
                c if c.is_ascii_alphabetic() => {
                    format!("[{}{}]", c.to_ascii_uppercase(), c.to_ascii_lowercase())
                }
                // Digits and `-`, the rest of a reserved name, mean themselves.
                c => c.to_string(),
            })
            .collect()
    };
    let reserved: Vec<String> = RESERVED_HEADERS.iter().map(|name| any_case(name)).collect();
    let mut rules = header_rules();
    rules["propertyNames"]["not"] = json!({
        "pattern": format!("^(?:{})$|^{}", reserved.join("|"), any_case("proxy-")),
    });
    rules
}

fn schema_of<T: PartialSchema>() -> Value {
    serde_json::to_value(T::schema()).expect("a schema serialises")
}

/// The name of a kind's schema: `http` → `HttpMonitorSpec`.
fn variant_name(kind: &str, suffix: &str) -> String {
    let mut name: String = kind
        .split('-')
        .map(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .map(|first| first.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect();
    name.push_str(suffix);
    name
}

/// Replaces `schemas[name]` by a `oneOf` of `variants` (kind → schema), discriminated by `kind`.
fn discriminate(schemas: &mut Map<String, Value>, name: &str, variants: Vec<(String, Value)>) {
    let description = schemas
        .get(name)
        .and_then(|flat| flat.get("description"))
        .cloned();
    let mut one_of = Vec::new();
    let mut mapping = Map::new();
    for (kind, schema) in variants {
        let variant = variant_name(&kind, name);
        let reference = format!("#/components/schemas/{variant}");
        one_of.push(json!({"$ref": reference}));
        mapping.insert(kind, json!(reference));
        schemas.insert(variant, schema);
    }
    let mut union = json!({
        "oneOf": one_of,
        "discriminator": {"propertyName": "kind", "mapping": mapping},
    });
    if let Some(description) = description {
        union["description"] = description;
    }
    schemas.insert(name.into(), union);
}

fn monitor_kinds(schemas: &mut Map<String, Value>) {
    let Some(flat) = schemas.get("MonitorSpec").cloned() else {
        return;
    };
    let variants = CheckKind::ALL
        .into_iter()
        .map(|kind| {
            let mut variant = flat.clone();
            let max_length = match kind {
                CheckKind::Dns => MAX_DNS_TARGET_LEN,
                _ => MAX_TARGET_LEN,
            };
            variant["properties"]["kind"] = json!({"type": "string", "enum": [kind.as_str()]});
            variant["properties"]["target"] = json!({
                "type": "string",
                "minLength": 1,
                "maxLength": max_length,
                "pattern": target::pattern(kind),
            });
            variant["properties"]["settings"] = monitor_settings(kind);
            (kind.as_str().to_string(), variant)
        })
        .collect();
    discriminate(schemas, "MonitorSpec", variants);
}

fn channel_kinds(schemas: &mut Map<String, Value>) {
    let Some(flat) = schemas.get("ChannelSpec").cloned() else {
        return;
    };
    let variants = ChannelKind::ALL
        .into_iter()
        .map(|kind| {
            let mut properties = Map::new();
            for common in ["name", "default", "tags"] {
                properties.insert(common.into(), flat["properties"][common].clone());
            }
            properties["tags"]["items"] =
                json!({"type": "string", "pattern": shared_proto::tags::TAG_PATTERN});
            properties["tags"]["uniqueItems"] = json!(true);
            properties.insert(
                "kind".into(),
                json!({"type": "string", "enum": [kind.as_str()]}),
            );
            for (field, _) in channel_fields::KIND_FIELDS {
                if channel_fields::takes(kind, field) {
                    let mut schema = channel_field(kind, field, &flat);
                    // A field the kind needs is refused as `null` too.
                    if channel_fields::required(kind).contains(&field) {
                        if let Some(Value::Array(types)) = schema.get_mut("type") {
                            types.retain(|t| t != "null");
                        }
                    }
                    properties.insert(field.into(), schema);
                }
            }
            let mut required = vec!["name", "kind"];
            required.extend(channel_fields::required(kind));
            let variant = json!({
                "type": "object",
                "description": flat.get("description"),
                "properties": properties,
                "required": required,
                "additionalProperties": false,
            });
            (kind.as_str().to_string(), variant)
        })
        .collect();
    discriminate(schemas, "ChannelSpec", variants);
}

/// One field of a kind's channel schema: the flat one, narrowed to what the kind takes.
fn channel_field(kind: ChannelKind, field: &str, flat: &Value) -> Value {
    let http_url = json!({"type": "string", "maxLength": 2048, "pattern": HTTP_PATTERN});
    match field {
        "url" if kind == ChannelKind::Email => json!({
            "type": "string",
            "maxLength": 2048,
            "pattern": SMTP_URL_PATTERN,
            "description": "The SMTP server: `smtp://host:port` or `smtps://`, with \
                            `user:password@` if it wants a login (then `smtps://` or \
                            `?tls=required`).",
        }),
        "url" => {
            let mut url = http_url;
            url["description"] = match (kind, kind.default_url()) {
                (_, Some(default)) => json!(format!(
                    "The service's address; default {default} (set it for another region, \
                     a proxy or a test receiver)."
                )),
                (ChannelKind::Gotify, _) => {
                    json!("The Gotify server, like https://gotify.example.com.")
                }
                _ => json!("The receiver: an http(s) URL (credentials go in `headers`)."),
            };
            url
        }
        "secret" if kind == ChannelKind::Webhook => json!({
            "type": ["string", "null"],
            "minLength": 16,
            "maxLength": 256,
            "description": "Write-only: signs each body with HMAC-SHA256 (`X-Signature-256: sha256=<hex>`).",
        }),
        "secret" => {
            let role = kind.secret_role().map_or("", |(role, _)| role);
            json!({
                "type": ["string", "null"],
                "pattern": "^[A-Za-z0-9._:~-]{1,256}$",
                "description": format!("Write-only: {role}."),
            })
        }
        "urls" => json!({
            "type": "array",
            "maxItems": 4,
            "items": http_url,
            "description": flat["properties"]["urls"]["description"],
        }),
        "headers" => channel_header_rules(),
        "from" => json!({"type": "string", "format": "email", "maxLength": 254,
                         "description": "The sender address."}),
        "to" => json!({
            "type": "array",
            "minItems": 1,
            "maxItems": 20,
            "items": {"type": "string", "format": "email", "maxLength": 254},
            "description": "The recipients.",
        }),
        other => flat["properties"][other].clone(),
    }
}

/// The `settings` of a kind: the common keys and the kind's own, and nothing else.
pub(super) fn monitor_settings(kind: CheckKind) -> Value {
    let mut properties = common_settings();
    let own = match kind {
        CheckKind::Http => http_settings(),
        CheckKind::Dns => dns_settings(),
        CheckKind::Tls => properties_of(schema_of::<TlsSettings>()),
        CheckKind::Tcp => Map::new(),
        CheckKind::Icmp => properties_of(schema_of::<shared_proto::icmp::IcmpSettings>()),
        CheckKind::Heartbeat => {
            // No agent runs it: of the common keys, only those central applies.
            properties.retain(|key, _| CommonSettings::CENTRAL_KEYS.contains(&key.as_str()));
            properties_of(schema_of::<shared_proto::heartbeat::HeartbeatSettings>())
        }
    };
    properties.extend(own);
    json!({
        "type": "object",
        "description": "Keys every kind takes (re-checks, protection tuning) and this kind's \
                        own; docs/engine.md explains each. Unknown keys are refused.",
        "properties": properties,
        "additionalProperties": false,
    })
}

fn properties_of(schema: Value) -> Map<String, Value> {
    match schema.get("properties") {
        Some(Value::Object(properties)) => properties.clone(),
        _ => Map::new(),
    }
}

fn common_settings() -> Map<String, Value> {
    let mut properties = properties_of(schema_of::<CommonSettings>());
    // Zero turns these off; any other value has a range (a `0 or a..b` no single range states).
    for (key, min, max) in [
        ("repeat_interval_ms", 60_000u64, 7 * 86_400_000u64),
        // 0: the monitor's interval.
        (
            "backoff_max_ms",
            100,
            shared_proto::settings::MAX_DELIBERATE_DELAY_MS,
        ),
        (
            "adaptive_max_interval_ms",
            shared_proto::monitor::MIN_INTERVAL_MS,
            2 * shared_proto::monitor::MAX_INTERVAL_MS,
        ),
    ] {
        if let Some(Value::Object(field)) = properties.get_mut(key) {
            field.insert(
                "anyOf".into(),
                json!([{"const": 0}, {"minimum": min, "maximum": max}]),
            );
        }
    }
    properties
}

fn http_settings() -> Map<String, Value> {
    let mut properties = properties_of(schema_of::<HttpSettings>());
    properties.insert(
        "method".into(),
        json!({"type": "string", "enum": HTTP_METHODS, "default": "GET"}),
    );
    properties.insert(
        "expected_status".into(),
        json!({
            "type": "array",
            "description": "Accepted status codes; empty means any 2xx.",
            "items": {"type": "integer", "minimum": 100, "maximum": 599},
        }),
    );
    properties.insert("headers".into(), header_rules());
    properties.insert(
        "json_path".into(),
        json!({
            "description": "A JSON pointer (RFC 6901, e.g. `/status`) into the response body, \
                            whose value must equal `json_expected`.",
            "oneOf": [
                {"type": "string", "maxLength": 0},
                {"type": "string", "pattern": "^/"},
                {"type": "null"},
            ],
        }),
    );
    properties.insert(
        "format".into(),
        json!({"type": "string", "enum": ["plain", "health-json"], "default": "plain"}),
    );
    properties.insert("health_mapping".into(), health_mapping());
    properties
}

/// `settings.health_mapping`: JSON pointers (empty, or starting with `/`), `$key` for a name.
fn health_mapping() -> Value {
    use shared_proto::health::MAX_POINTER_LEN;
    let pointer = json!({"type": "string", "maxLength": MAX_POINTER_LEN, "pattern": "^(/|$)"});
    let optional = json!({"oneOf": [pointer, {"type": "null"}]});
    json!({
        "description": "Where a `health-json` document's dependencies are and which field of \
                        an item says what (JSON pointers inside an item; `$key` names an \
                        object's member). Only with `format: health-json`; docs/health-json.md.",
        "oneOf": [
            {"type": "null"},
            {
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "list": pointer,
                    "name": {"type": "string", "maxLength": MAX_POINTER_LEN,
                             "pattern": "^(/|$)|^\\$key$"},
                    "healthy": {"oneOf": [
                        pointer,
                        {
                            "type": "object",
                            "additionalProperties": false,
                            "required": ["pointer", "equals"],
                            "properties": {"pointer": pointer, "equals": {}},
                        },
                    ]},
                    "latency_ms": optional,
                    "error": optional,
                    "skipped": optional,
                    "contact": optional,
                    "details": optional,
                },
            },
        ],
    })
}

fn dns_settings() -> Map<String, Value> {
    let mut properties = properties_of(schema_of::<DnsSettings>());
    properties.insert(
        "record_type".into(),
        json!({"type": "string", "enum": DNS_RECORD_TYPES, "default": "A"}),
    );
    properties.insert(
        "nameserver".into(),
        json!({
            "description": "`ip:port` of the server to ask; the system resolver when unset.",
            "oneOf": [{"type": "string", "pattern": NAMESERVER_PATTERN}, {"type": "null"}],
        }),
    );
    properties
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};
    use shared_proto::settings::MonitorSettings;
    use shared_proto::{CheckKind, Rule};

    fn rule(kind: CheckKind, key: &str, value: Value) -> Option<Rule> {
        let settings = json!({ key: value });
        MonitorSettings::parse(kind, settings.as_object().unwrap())
            .err()
            .map(|e| e.rule)
    }

    /// Each stated range is the validation's: its ends pass the field rules, one step beyond
    /// each end is a field error (`400`), as a validator of the document would say.
    #[test]
    fn the_stated_ranges_are_the_validated_ones() {
        let mut checked = 0;
        for kind in CheckKind::ALL {
            let settings = super::monitor_settings(kind);
            for (key, field) in settings["properties"].as_object().unwrap() {
                let ranges: Vec<&Value> = match field.get("anyOf") {
                    Some(Value::Array(branches)) => branches
                        .iter()
                        .filter(|b| b.get("minimum").is_some())
                        .collect(),
                    _ => vec![field],
                };
                for range in ranges {
                    let (Some(min), Some(max)) = (range.get("minimum"), range.get("maximum"))
                    else {
                        continue;
                    };
                    let integer = field["type"] == "integer";
                    let step = if integer { json!(1) } else { json!(0.001) };
                    let (min, max, step) = (
                        min.as_f64().unwrap(),
                        max.as_f64().unwrap(),
                        step.as_f64().unwrap(),
                    );
                    let number = |v: f64| if integer { json!(v as u64) } else { json!(v) };
                    for inside in [min, max] {
                        assert_ne!(
                            rule(kind, key, number(inside)),
                            Some(Rule::Field),
                            "{key}={inside}"
                        );
                    }
                    if min - step >= 0.0 && !(min - step == 0.0 && field.get("anyOf").is_some()) {
                        assert_eq!(
                            rule(kind, key, number(min - step)),
                            Some(Rule::Field),
                            "{key} below"
                        );
                    }
                    if max < u32::MAX as f64 {
                        assert_eq!(
                            rule(kind, key, number(max + step)),
                            Some(Rule::Field),
                            "{key} above"
                        );
                    }
                    checked += 1;
                }
            }
        }
        assert!(
            checked > 40,
            "every kind states the common ranges: {checked}"
        );
    }

    #[test]
    fn the_reserved_header_pattern_is_the_validation() {
        let rules = super::channel_header_rules();
        let pattern = rules["propertyNames"]["not"]["pattern"].as_str().unwrap();
        let reserved = regex::Regex::new(pattern).unwrap();
        let refused = |name: &str| {
            let spec = json!({"name": "c", "kind": "webhook", "url": "https://h.example.com/",
                              "headers": {name: "x"}});
            serde_json::from_value::<shared_proto::notifications::ChannelSpec>(spec)
                .unwrap()
                .validate()
                .is_err()
        };
        for name in [
            "Host",
            "hOST",
            "Proxy-Authorization",
            "x-signature-256",
            "TE",
            "X-Team",
            "Hostname",
            "XHost",
            "Authorization",
            "Proxy",
        ] {
            assert_eq!(reserved.is_match(name), refused(name), "{name}");
        }
    }

    #[test]
    fn each_kind_states_its_own_keys_only() {
        let http = super::monitor_settings(CheckKind::Http);
        let tcp = super::monitor_settings(CheckKind::Tcp);
        assert!(http["properties"].get("keyword").is_some());
        assert!(tcp["properties"].get("keyword").is_none());
        assert_eq!(
            rule(CheckKind::Tcp, "keyword", json!("x")),
            Some(Rule::Field)
        );
        assert_eq!(tcp["additionalProperties"], json!(false));
        for method in ["GET", "OPTIONS"] {
            assert_eq!(rule(CheckKind::Http, "method", json!(method)), None);
        }
        assert_eq!(
            rule(CheckKind::Http, "method", json!("get")),
            Some(Rule::Field)
        );
    }
}
