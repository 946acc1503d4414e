//! The mapping of a health document (`settings.health_mapping` of a `health-json` monitor,
//! docs/health-json.md): where its list of dependencies is and which field of an item says
//! what, as JSON pointers (RFC 6901), for documents not in the default shape. Owns the
//! mapping's shape, its defaults and its validation. Must not read documents: that is the
//! agent's (`checks::http::health`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ValidationError;

/// Names an item's own key, for a list that is an object (`{"db": {...}, "cache": {...}}`).
pub const KEY: &str = "$key";
/// The longest pointer a mapping holds, in characters.
pub const MAX_POINTER_LEN: usize = 256;

/// Where a health document's dependencies are and how to read one. Every field but `list` is
/// a pointer inside one item (`""` is the item itself); `name` may also be `$key`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct HealthMapping {
    /// A pointer into the document to the list: an array of items, or an object whose members
    /// are the items.
    #[serde(default = "default_list")]
    pub list: String,
    /// The dependency's name: a pointer to a string, or `$key` for an object's member.
    #[serde(default = "default_name")]
    pub name: String,
    /// Whether it works: a pointer to `true`/`false`, or a pointer and the value that means
    /// healthy (`{"pointer": "/status", "equals": "UP"}`).
    #[serde(default = "default_healthy")]
    pub healthy: HealthyField,
    /// A pointer to its latency in milliseconds (a number).
    #[serde(default)]
    pub latency_ms: Option<String>,
    /// A pointer to why it is unhealthy (a string; anything else is kept as its JSON).
    #[serde(default)]
    pub error: Option<String>,
    /// A pointer to whether it was not checked this time (`true`/`false`).
    #[serde(default)]
    pub skipped: Option<String>,
    /// A pointer to whom to call about it (any JSON, kept as is).
    #[serde(default)]
    pub contact: Option<String>,
    /// A pointer to how it was checked (any JSON, kept as is).
    #[serde(default)]
    pub details: Option<String>,
}

/// How an item says whether it is healthy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(untagged)]
pub enum HealthyField {
    /// A pointer to `true` or `false`.
    Pointer(String),
    /// A pointer to a value that means healthy when it equals `equals`.
    Equals(HealthyEquals),
}

/// A pointer to a value, healthy when it equals `equals` (`"UP"`, `"ok"`, `1`…).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct HealthyEquals {
    pub pointer: String,
    pub equals: Value,
}

fn default_list() -> String {
    "/dependencies".into()
}

fn default_name() -> String {
    "/name".into()
}

fn default_healthy() -> HealthyField {
    HealthyField::Pointer("/healthy".into())
}

impl Default for HealthMapping {
    /// The default shape (docs/health-json.md): every field at its documented name.
    fn default() -> Self {
        Self {
            list: default_list(),
            name: default_name(),
            healthy: default_healthy(),
            latency_ms: Some("/latency_ms".into()),
            error: Some("/error".into()),
            skipped: Some("/skipped".into()),
            contact: Some("/contact".into()),
            details: Some("/check_details".into()),
        }
    }
}

impl HealthMapping {
    /// Every pointer is one (empty or starting with `/`) and short; `$key` names only.
    pub fn validate(&self) -> Result<(), ValidationError> {
        const FIELD: &str = "settings.health_mapping";
        pointer(&format!("{FIELD}.list"), &self.list)?;
        if self.name != KEY {
            pointer(&format!("{FIELD}.name"), &self.name)?;
        }
        match &self.healthy {
            HealthyField::Pointer(p) => pointer(&format!("{FIELD}.healthy"), p)?,
            HealthyField::Equals(e) => pointer(&format!("{FIELD}.healthy.pointer"), &e.pointer)?,
        }
        for (name, field) in [
            ("latency_ms", &self.latency_ms),
            ("error", &self.error),
            ("skipped", &self.skipped),
            ("contact", &self.contact),
            ("details", &self.details),
        ] {
            if let Some(p) = field {
                pointer(&format!("{FIELD}.{name}"), p)?;
            }
        }
        Ok(())
    }
}

fn pointer(field: &str, value: &str) -> Result<(), ValidationError> {
    if value.chars().count() > MAX_POINTER_LEN {
        return Err(ValidationError::new(
            field,
            format!("at most {MAX_POINTER_LEN} characters"),
        ));
    }
    if !(value.is_empty() || value.starts_with('/')) {
        let key = if field.ends_with(".name") {
            ", or $key for an object's member"
        } else {
            ""
        };
        return Err(ValidationError::new(
            field,
            format!("`{value}` is not a JSON pointer; write it like /status or /checks/0/ok{key}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_mapping_takes_pointers_key_names_and_an_equals_test() {
        let mapping: HealthMapping = serde_json::from_value(json!({
            "list": "/checks", "name": "$key",
            "healthy": {"pointer": "/status", "equals": "UP"}, "latency_ms": "/ms"
        }))
        .unwrap();
        mapping.validate().unwrap();
        assert_eq!(
            mapping.healthy,
            HealthyField::Equals(HealthyEquals {
                pointer: "/status".into(),
                equals: json!("UP")
            })
        );
        assert_eq!(mapping.error, None, "an unmapped field is not read");
        let plain: HealthMapping = serde_json::from_value(json!({"healthy": "/ok"})).unwrap();
        assert_eq!(plain.list, "/dependencies");
        assert_eq!(plain.healthy, HealthyField::Pointer("/ok".into()));
    }

    #[test]
    fn what_is_not_a_pointer_is_refused_by_its_field() {
        for (mapping, field) in [
            (json!({"list": "checks"}), "settings.health_mapping.list"),
            (json!({"list": "$key"}), "settings.health_mapping.list"),
            (
                json!({"latency_ms": "$key"}),
                "settings.health_mapping.latency_ms",
            ),
            (
                json!({"healthy": {"pointer": "ok", "equals": true}}),
                "settings.health_mapping.healthy.pointer",
            ),
            (
                json!({"name": "/".repeat(MAX_POINTER_LEN + 1)}),
                "settings.health_mapping.name",
            ),
        ] {
            let mapping: HealthMapping = serde_json::from_value(mapping).unwrap();
            let error = mapping.validate().unwrap_err();
            assert_eq!(error.field, field);
        }
        assert!(serde_json::from_value::<HealthMapping>(json!({"lst": "/x"})).is_err());
    }
}
