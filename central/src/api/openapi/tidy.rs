//! Rewrites of the generated document where utoipa's output says less (or other) than what
//! central accepts: rules on collection items and keys, optional headers, formats of optional
//! values. Owns no schema of its own; the per-kind unions are `kinds`'.

/// utoipa writes an optional header parameter (`Option<String>`) as `type: [string, null]`,
/// but a header is absent or a string, never JSON `null`: generators would send the text
/// `null`. Optional is `required: false`, which utoipa writes too.
pub(super) fn headers_are_never_null(document: &mut serde_json::Value) {
    use serde_json::Value;
    let Some(Value::Object(paths)) = document.get_mut("paths") else {
        return;
    };
    for operation in paths.values_mut().filter_map(Value::as_object_mut) {
        for method in operation.values_mut() {
            let Some(parameters) = method.get_mut("parameters").and_then(Value::as_array_mut)
            else {
                continue;
            };
            for parameter in parameters {
                if parameter.get("in").and_then(Value::as_str) != Some("header") {
                    continue;
                }
                if let Some(kind) = parameter.pointer_mut("/schema/type") {
                    if let Some(types) = kind.as_array() {
                        if let Some(one) = types.iter().find(|t| t.as_str() != Some("null")) {
                            *kind = one.clone();
                        }
                    }
                }
            }
        }
    }
}

/// Rules on the items and keys of collections, which the derives cannot spell: region labels
/// (distinct), HTTP header names and values, mail addresses, and URLs.
pub(super) fn state_item_rules(document: &mut serde_json::Value) {
    use serde_json::{json, Value};
    let label = json!({"type": "string", "pattern": shared_proto::monitor::LABEL_PATTERN});
    let tag = json!({"type": "string", "pattern": shared_proto::tags::TAG_PATTERN});
    let tags = json!({"items": tag, "uniqueItems": true});
    let email = json!({"type": "string", "format": "email", "maxLength": 254});
    let url = json!({"type": "string", "format": "uri", "maxLength": 2048});
    // `ChannelSpec` is replaced by one schema per kind (`kinds`), with its own rules; the
    // patch, which names no kind, keeps the rules every kind shares.
    let rules: [(&str, &str, Value); 16] = [
        (
            "MonitorSpec",
            "poller_regions",
            json!({"items": label, "uniqueItems": true}),
        ),
        (
            "MonitorPatch",
            "poller_regions",
            json!({"items": label, "uniqueItems": true}),
        ),
        (
            "ChannelPatch",
            "headers",
            super::kinds::channel_header_rules(),
        ),
        ("ChannelPatch", "to", json!({"items": email})),
        ("ChannelPatch", "url", json!({"format": "uri"})),
        ("ChannelPatch", "urls", json!({"items": url})),
        ("MaintenanceWindowSpec", "regions", json!({"items": label})),
        ("MaintenanceWindowPatch", "regions", json!({"items": label})),
        ("MonitorSpec", "tags", tags.clone()),
        ("MonitorPatch", "tags", tags.clone()),
        ("MaintenanceWindowSpec", "tags", tags.clone()),
        ("MaintenanceWindowPatch", "tags", tags.clone()),
        ("StatusPageSection", "tags", tags.clone()),
        ("ChannelPatch", "tags", tags),
        ("MonitorSpec", "parent_ids", json!({"uniqueItems": true})),
        ("MonitorPatch", "parent_ids", json!({"uniqueItems": true})),
    ];
    for (schema, property, extra) in rules {
        let Some(field) = document.pointer_mut(&format!(
            "/components/schemas/{schema}/properties/{property}"
        )) else {
            continue;
        };
        // An `Option` is `oneOf: [T, null]` or `type: [T, null]`: the rules go on T.
        let target = match field.get_mut("oneOf").and_then(Value::as_array_mut) {
            Some(branches) => branches
                .iter_mut()
                .find(|b| b.get("type") != Some(&json!("null"))),
            None => Some(field),
        };
        if let (Some(Value::Object(target)), Value::Object(extra)) = (target, extra) {
            target.extend(extra);
        }
    }
    for (schema, property) in [("ChannelPatch", "from")] {
        if let Some(Value::Object(field)) = document.pointer_mut(&format!(
            "/components/schemas/{schema}/properties/{property}"
        )) {
            field.insert("format".into(), json!("email"));
            field.insert("maxLength".into(), json!(254));
        }
    }
}

/// Rules between a maintenance window's fields that JSON Schema can state (the server checks
/// the same in `MaintenanceWindowSpec::validate`): `ends_at` or `recurrence`, not both; a
/// scope of at least one monitor, poller, region or tag; `stop_checks` only with monitors
/// named by id or tag. What no schema states (an end a minute to 366 days after the start, a
/// rule and time zone that read) stays a `422 invalid_combination`/`invalid_value`.
pub(super) fn state_window_rules(document: &mut serde_json::Value) {
    use serde_json::{json, Value};
    let Some(Value::Object(spec)) =
        document.pointer_mut("/components/schemas/MaintenanceWindowSpec")
    else {
        return;
    };
    let named = |field: &str| json!({"required": [field], "properties": {field: {"minItems": 1}}});
    spec.insert(
        "oneOf".into(),
        json!([
            {"required": ["ends_at"],
             "properties": {"ends_at": {"type": "string"}, "recurrence": {"type": "null"}}},
            {"required": ["recurrence"],
             "properties": {"recurrence": {"type": "object"}, "ends_at": {"type": "null"}}},
        ]),
    );
    spec.insert(
        "anyOf".into(),
        json!([
            named("monitor_ids"),
            named("poller_ids"),
            named("regions"),
            named("tags")
        ]),
    );
    spec.insert(
        "if".into(),
        json!({"required": ["stop_checks"], "properties": {"stop_checks": {"const": true}}}),
    );
    spec.insert(
        "then".into(),
        json!({"anyOf": [named("monitor_ids"), named("tags")]}),
    );
}

/// The keywords that constrain the string or number itself, as opposed to describing the field.
const VALUE_KEYWORDS: [&str; 7] = [
    "format",
    "pattern",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "enum",
];

/// Spells unsigned formats as the OpenAPI format registry does, and rewrites
/// `{type: [T, null], format: F, …}` (how utoipa writes an `Option` of a formatted
/// value) as `{oneOf: [{type: T, format: F, …}, {type: null}]}`. Both mean the same, but
/// generators (schemathesis) fill the first with strings of type T that ignore the format, e.g.
/// An operation routed for several methods (a ping is `GET` or `POST`) is written once with
/// one `operationId`; OpenAPI wants each unique, so every use after the first gets its method
/// appended (`ping_post`).
pub(super) fn unique_operation_ids(document: &mut serde_json::Value) {
    let mut seen = std::collections::HashSet::new();
    let Some(paths) = document.get_mut("paths").and_then(|p| p.as_object_mut()) else {
        return;
    };
    for item in paths.values_mut().filter_map(|i| i.as_object_mut()) {
        for (method, operation) in item.iter_mut() {
            let Some(id) = operation.get("operationId").and_then(|i| i.as_str()) else {
                continue;
            };
            if !seen.insert(id.to_string()) {
                operation["operationId"] = format!("{id}_{method}").into();
            }
        }
    }
}

/// `""` for an optional date-time, and then call the refusal a failure.
pub(super) fn tidy_formats(value: &mut serde_json::Value) {
    use serde_json::{json, Value};
    match value {
        Value::Object(fields) => {
            let nullable_with_format = fields.contains_key("format")
                && fields
                    .get("type")
                    .and_then(Value::as_array)
                    .is_some_and(|types| types.len() == 2 && types.contains(&json!("null")));
            if nullable_with_format {
                let types = fields.remove("type").expect("checked above");
                let inner_type = types
                    .as_array()
                    .and_then(|t| t.iter().find(|t| *t != "null"))
                    .cloned()
                    .unwrap_or(Value::Null);
                let mut inner = serde_json::Map::from_iter([("type".to_string(), inner_type)]);
                for keyword in VALUE_KEYWORDS {
                    if let Some(constraint) = fields.remove(keyword) {
                        inner.insert(keyword.to_string(), constraint);
                    }
                }
                fields.insert(
                    "oneOf".into(),
                    json!([Value::Object(inner), {"type": "null"}]),
                );
            }
            // utoipa spells the unsigned formats `u-int32`, `u-int64`: the registry's names are
            // `uint32`, `uint64`.
            // Validators ignore those formats, so the largest value serde takes is written out
            // as `maximum` (utoipa's own `maximum` is an f64, which cannot hold u64::MAX).
            let unsigned_bits = fields
                .get("format")
                .and_then(Value::as_str)
                .and_then(|format| format.strip_prefix("u-int"))
                .map(str::to_owned);
            if let Some(bits) = unsigned_bits {
                fields.insert("format".into(), json!(format!("uint{bits}")));
                let largest = match bits.as_str() {
                    "8" => u64::from(u8::MAX),
                    "16" => u64::from(u16::MAX),
                    "32" => u64::from(u32::MAX),
                    _ => u64::MAX,
                };
                fields.entry("maximum").or_insert(json!(largest));
            }
            fields.values_mut().for_each(tidy_formats);
        }
        Value::Array(items) => items.iter_mut().for_each(tidy_formats),
        _ => {}
    }
}

/// A subscription's JSON body is a mail address or a webhook, never both or neither, which
/// its type (two optional fields, checked by `SubscribeRequest::address`) cannot say.
pub(super) fn subscribe_body(document: &mut serde_json::Value) {
    use serde_json::json;
    use shared_proto::status_subscribers::{MAX_SECRET, MAX_WEBHOOK_URL};
    let schema = json!({
        "oneOf": [
            {
                "type": "object",
                "required": ["email"],
                "additionalProperties": false,
                "properties": {
                    "email": {"type": "string", "format": "email", "maxLength": 254,
                              "description": "A confirmation mail goes to it."}
                }
            },
            {
                "type": "object",
                "required": ["webhook_url"],
                "additionalProperties": false,
                "properties": {
                    "webhook_url": {"type": "string", "maxLength": MAX_WEBHOOK_URL,
                                    "pattern": shared_proto::target::HTTP_PATTERN,
                                    "description": "A `subscription.confirm` body is POSTed to it."},
                    "secret": {"type": "string", "maxLength": MAX_SECRET,
                               "pattern": "^[^\\u0000-\\u001f\\u007f-\\u009f]*$",
                               "description": "Signs each notice (`X-Signature-256: sha256=<hex of HMAC-SHA256>`)."}
                }
            }
        ]
    });
    if let Some(body) = document.pointer_mut(
        "/paths/~1status~1{slug}~1subscribe/post/requestBody/content/application~1json/schema",
    ) {
        *body = schema;
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    /// Every schema object in the document, depth first.
    fn schemas(value: &Value, found: &mut Vec<serde_json::Map<String, Value>>) {
        match value {
            Value::Object(fields) => {
                found.push(fields.clone());
                fields.values().for_each(|v| schemas(v, found));
            }
            Value::Array(items) => items.iter().for_each(|v| schemas(v, found)),
            _ => {}
        }
    }

    #[test]
    fn formats_are_never_beside_a_type_list_and_unsigned_ones_have_their_maximum() {
        let document: Value = serde_json::from_str(&super::super::DOCUMENT).unwrap();
        let mut all = Vec::new();
        schemas(&document, &mut all);
        let mut unsigned = 0;
        for schema in &all {
            // A schema's `format` is a string; an object's properties may hold one named so.
            if schema.get("format").is_some_and(Value::is_string) {
                assert!(
                    !schema.get("type").is_some_and(Value::is_array),
                    "{schema:?}"
                );
            }
            match schema.get("format").and_then(Value::as_str) {
                Some("uint64") => {
                    unsigned += 1;
                    // Its own limit where the field has one, else the type's.
                    assert!(schema["maximum"].is_u64(), "{schema:?}");
                }
                Some(format) => assert!(!format.starts_with("u-int"), "{format}"),
                None => {}
            }
        }
        assert!(unsigned > 5, "the heartbeat alone has several u64 counts");
    }
}
