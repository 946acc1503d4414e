//! The configuration file of monitors as code: what it holds, reading it (YAML, with
//! `${NAME}` taken from the environment), writing it, and its JSON Schema. Each object sits
//! under a stable key; `spec` is the object as the settings API takes it, except that objects
//! of the file are named by key (`notification_channels`, `parents`, `monitors`) instead of
//! by id.

use std::collections::BTreeMap;

use anyhow::Context;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use shared_proto::as_code::{validate_key, KEY_PATTERN};

/// The format's version.
pub const VERSION: u32 = 1;
/// The largest file read.
const MAX_FILE: u64 = 16 * 1024 * 1024;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    pub version: u32,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub notification_channels: BTreeMap<String, ChannelEntry>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub monitors: BTreeMap<String, MonitorEntry>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub maintenance_windows: BTreeMap<String, WindowEntry>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub status_pages: BTreeMap<String, PageEntry>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelEntry {
    pub spec: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MonitorEntry {
    pub spec: Map<String, Value>,
    /// Keys of the file's channels this monitor notifies.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notification_channels: Vec<String>,
    /// Keys of the file's monitors this one depends on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parents: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WindowEntry {
    pub spec: Map<String, Value>,
    /// Keys of the file's monitors this window covers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub monitors: Vec<String>,
}

/// A status page: `spec` as the settings API takes it but its sections, which name the file's
/// monitors by key, in the order shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageEntry {
    pub spec: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sections: Vec<SectionEntry>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SectionEntry {
    pub name: String,
    /// Keys of the file's monitors, in the order the page shows them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub monitors: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// The name the page gives a monitor, by its key.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub display_names: BTreeMap<String, String>,
}

/// The prefix of the variables `${NAME}` may name, unless `--env-prefix` says another.
pub const DEFAULT_PREFIX: &str = crate::config::DEFAULT_ENV_PREFIX;

/// Variables no file may name, whatever the prefix: the credentials `apply` itself runs with.
const NEVER_TAKEN: [&str; 2] = ["CENTRAL_API_KEY", "CENTRAL_ADMIN_TOKEN"];

/// Whether a file may take `name` from the environment under `prefix`.
fn may_take(prefix: &str, name: &str) -> Result<(), String> {
    if NEVER_TAKEN.contains(&name) {
        return Err(format!(
            "`${{{name}}}` is a credential of central's own and is never taken"
        ));
    }
    if prefix.is_empty() || !name.starts_with(prefix) {
        return Err(format!(
            "`${{{name}}}` is not taken: a file may name only variables that start with \
             `{prefix}` (--env-prefix, CENTRAL_APPLY_ENV_PREFIX), so that it cannot read the \
             environment's other secrets"
        ));
    }
    Ok(())
}

/// Reads `path` (`-`: standard input), takes `${NAME}` from the environment (only names
/// starting with `prefix`), and checks keys and references.
pub fn load(path: &str, prefix: &str) -> anyhow::Result<(ConfigFile, Secrets)> {
    anyhow::ensure!(
        !prefix.is_empty(),
        "--env-prefix is empty: name the prefix of the variables a file may take"
    );
    let source: Box<dyn std::io::Read> = if path == "-" {
        Box::new(std::io::stdin())
    } else {
        Box::new(std::fs::File::open(path).with_context(|| format!("reading {path}"))?)
    };
    // One byte past the limit tells a file cut short from one that fits.
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::Read::take(source, MAX_FILE + 1), &mut text)
        .with_context(|| format!("reading {path}"))?;
    anyhow::ensure!(
        text.len() as u64 <= MAX_FILE,
        "{path} is over {MAX_FILE} bytes: split it, or trim it"
    );
    let secrets = Secrets::default();
    let refused = std::cell::RefCell::new(None);
    let env = |name: &str| {
        if let Err(why) = may_take(prefix, name) {
            *refused.borrow_mut() = Some(why);
            return None;
        }
        let value = std::env::var(name).ok()?;
        secrets
            .taken
            .borrow_mut()
            .push((name.to_string(), value.clone()));
        Some(value)
    };
    let file = parse(&text, &env).map_err(|e| match refused.borrow_mut().take() {
        Some(why) => anyhow::anyhow!("in {path}: {why}"),
        None => e.context(format!("in {path}")),
    })?;
    Ok((file, secrets))
}

/// The values `${NAME}` took from the environment: what the plan and errors print never shows
/// them, only `${NAME}`.
#[derive(Debug, Default)]
pub struct Secrets {
    taken: std::cell::RefCell<Vec<(String, String)>>,
}

impl Secrets {
    /// `text` with each value taken from the environment written back as `${NAME}`.
    pub fn hide(&self, text: &str) -> String {
        let mut taken = self.taken.borrow().clone();
        // Longest first, so that a value inside another is not half replaced.
        taken.sort_by_key(|(_, value)| std::cmp::Reverse(value.len()));
        let mut text = text.to_string();
        for (name, value) in taken {
            if !value.is_empty() {
                text = text.replace(&value, &format!("${{{name}}}"));
            }
        }
        text
    }
}

/// `load` of a text, with `env` for `${NAME}`.
pub fn parse(text: &str, env: &dyn Fn(&str) -> Option<String>) -> anyhow::Result<ConfigFile> {
    let mut file: ConfigFile = serde_saphyr::from_str(text)?;
    anyhow::ensure!(
        file.version == VERSION,
        "`version` is {}, this central reads version {VERSION}",
        file.version
    );
    for (kind, key, spec) in file.specs_mut() {
        validate_key("key", &key).map_err(|e| anyhow::anyhow!("{kind} `{key}`: {}", e.message))?;
        for id_field in [
            "notification_channel_ids",
            "parent_ids",
            "monitor_ids",
            "sections",
        ] {
            anyhow::ensure!(
                !spec.contains_key(id_field),
                "{kind} `{key}`: name objects of the file by key, not `spec.{id_field}` \
                 (`notification_channels`, `parents`, `monitors` or `sections` beside `spec`)"
            );
        }
        for value in spec.values_mut() {
            substitute(value, env).map_err(|e| anyhow::anyhow!("{kind} `{key}`: {e}"))?;
        }
    }
    for (key, monitor) in &file.monitors {
        for channel in &monitor.notification_channels {
            anyhow::ensure!(
                file.notification_channels.contains_key(channel),
                "monitors `{key}`: no notification channel `{channel}` in the file"
            );
        }
        for parent in &monitor.parents {
            anyhow::ensure!(
                file.monitors.contains_key(parent),
                "monitors `{key}`: no monitor `{parent}` in the file"
            );
        }
    }
    for (key, window) in &file.maintenance_windows {
        for monitor in &window.monitors {
            anyhow::ensure!(
                file.monitors.contains_key(monitor),
                "maintenance_windows `{key}`: no monitor `{monitor}` in the file"
            );
        }
    }
    for (key, page) in &file.status_pages {
        for section in &page.sections {
            let named = section.monitors.iter().chain(section.display_names.keys());
            for monitor in named {
                anyhow::ensure!(
                    file.monitors.contains_key(monitor),
                    "status_pages `{key}`: no monitor `{monitor}` in the file"
                );
            }
        }
    }
    Ok(file)
}

impl ConfigFile {
    fn specs_mut(&mut self) -> Vec<(&'static str, String, &mut Map<String, Value>)> {
        let mut all = Vec::new();
        for (key, e) in &mut self.notification_channels {
            all.push(("notification_channels", key.clone(), &mut e.spec));
        }
        for (key, e) in &mut self.monitors {
            all.push(("monitors", key.clone(), &mut e.spec));
        }
        for (key, e) in &mut self.maintenance_windows {
            all.push(("maintenance_windows", key.clone(), &mut e.spec));
        }
        for (key, e) in &mut self.status_pages {
            all.push(("status_pages", key.clone(), &mut e.spec));
        }
        all
    }

    /// The file as YAML, with a line that points editors at the schema.
    pub fn to_yaml(&self) -> anyhow::Result<String> {
        Ok(format!(
            "# central configuration (monitors as code): `central apply -f FILE`.\n\
             # Schema: `central config-schema` (docs/central-config.schema.json).\n{}",
            serde_saphyr::to_string(self)?
        ))
    }
}

/// Replaces every `${NAME}` in the strings of `value` with the environment's `NAME`.
fn substitute(value: &mut Value, env: &dyn Fn(&str) -> Option<String>) -> anyhow::Result<()> {
    match value {
        Value::String(text) if text.contains("${") => {
            let mut out = String::new();
            let mut rest = text.as_str();
            while let Some(start) = rest.find("${") {
                // `$${` is a literal `${`.
                if rest[..start].ends_with('$') {
                    out.push_str(&rest[..start]);
                    out.push('{');
                    rest = &rest[start + 2..];
                    continue;
                }
                out.push_str(&rest[..start]);
                let after = &rest[start + 2..];
                let end = after
                    .find('}')
                    .ok_or_else(|| anyhow::anyhow!("`${{` without `}}` in `{text}`"))?;
                let name = &after[..end];
                anyhow::ensure!(
                    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                    "`${{{name}}}` is not a variable name"
                );
                let found =
                    env(name).ok_or_else(|| anyhow::anyhow!("the environment has no `{name}`"))?;
                out.push_str(&found);
                rest = &after[end + 1..];
            }
            out.push_str(rest);
            *text = out;
        }
        Value::Array(items) => {
            for item in items {
                substitute(item, env)?;
            }
        }
        Value::Object(fields) => {
            for field in fields.values_mut() {
                substitute(field, env)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// The file's JSON Schema (draft 2020-12), built from the settings API's own schemas so that
/// the two cannot disagree.
pub fn schema(openapi: &Value) -> Value {
    let mut defs = openapi["components"]["schemas"].clone();
    rewrite_refs(&mut defs);
    let keys = |what: &str| json!({"type": "array", "description": what, "items": {"type": "string", "pattern": KEY_PATTERN}});
    let section = |entry: Value| json!({"type": "object", "propertyNames": {"pattern": KEY_PATTERN}, "additionalProperties": entry});
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "central configuration (monitors as code)",
        "type": "object",
        "additionalProperties": false,
        "required": ["version"],
        "properties": {
            "version": {"const": VERSION},
            "notification_channels": section(json!({
                "type": "object", "additionalProperties": false, "required": ["spec"],
                "properties": {"spec": {"$ref": "#/$defs/ChannelSpec"}}
            })),
            "monitors": section(json!({
                "type": "object", "additionalProperties": false, "required": ["spec"],
                "properties": {
                    "spec": {"$ref": "#/$defs/MonitorSpec"},
                    "notification_channels": keys("Keys of the file's channels it notifies."),
                    "parents": keys("Keys of the file's monitors it depends on."),
                }
            })),
            "maintenance_windows": section(json!({
                "type": "object", "additionalProperties": false, "required": ["spec"],
                "properties": {
                    "spec": {"$ref": "#/$defs/MaintenanceWindowSpec"},
                    "monitors": keys("Keys of the file's monitors it covers."),
                }
            })),
            "status_pages": section(json!({
                "type": "object", "additionalProperties": false, "required": ["spec"],
                "properties": {
                    "spec": {
                        "description": "StatusPageSpec without `sections`, which sit beside it.",
                        "$ref": "#/$defs/StatusPageSpec"
                    },
                    "sections": {"type": "array", "items": {
                        "type": "object", "additionalProperties": false, "required": ["name"],
                        "properties": {
                            "name": {"type": "string"},
                            "monitors": keys("Keys of the file's monitors, in the order shown."),
                            "tags": {"type": "array", "items": {"type": "string"}},
                            "display_names": {
                                "type": "object",
                                "description": "The name the page gives a monitor, by its key.",
                                "propertyNames": {"pattern": KEY_PATTERN},
                                "additionalProperties": {"type": "string"}
                            }
                        }
                    }}
                }
            })),
        },
        "$defs": defs,
    })
}

fn rewrite_refs(value: &mut Value) {
    match value {
        Value::Object(fields) => {
            for (name, field) in fields.iter_mut() {
                match (name.as_str(), &mut *field) {
                    ("$ref", Value::String(target)) => {
                        *target = target.replace("#/components/schemas/", "#/$defs/");
                    }
                    _ => rewrite_refs(field),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(rewrite_refs),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        (name == "HOOK_SECRET").then(|| "s3cret".to_string())
    }

    #[test]
    fn variables_references_and_keys_are_checked() {
        let file = parse(
            "version: 1\n\
             notification_channels:\n  ops:\n    spec: {name: ops, kind: webhook, url: 'http://h/x', secret: 'pre-${HOOK_SECRET}'}\n\
             monitors:\n  api:\n    spec: {name: api, kind: http, target: 'http://h/'}\n    notification_channels: [ops]\n",
            &env,
        )
        .unwrap();
        assert_eq!(
            file.notification_channels["ops"].spec["secret"],
            "pre-s3cret"
        );
        let literal = parse(
            "version: 1\nmonitors:\n  api:\n    spec: {name: 'a $${NOT_A_VAR}'}\n",
            &env,
        )
        .unwrap();
        assert_eq!(literal.monitors["api"].spec["name"], "a ${NOT_A_VAR}");
        let missing = parse(
            "version: 1\nnotification_channels:\n  ops:\n    spec: {secret: '${NOPE}'}\n",
            &env,
        );
        assert!(missing.unwrap_err().to_string().contains("NOPE"));
        let dangling = parse(
            "version: 1\nmonitors:\n  api:\n    spec: {}\n    parents: [db]\n",
            &env,
        );
        assert!(dangling.unwrap_err().to_string().contains("`db`"));
        let by_id = parse(
            "version: 1\nmonitors:\n  api:\n    spec: {parent_ids: []}\n",
            &env,
        );
        assert!(by_id.unwrap_err().to_string().contains("parents"));
        assert!(parse("version: 1\nmonitors:\n  Bad Key:\n    spec: {}\n", &env).is_err());
        assert!(parse("version: 2\n", &env).is_err());
        assert!(parse("version: 1\nsurprise: 1\n", &env).is_err());
    }

    #[test]
    fn only_variables_under_the_prefix_are_taken_and_never_central_s_own_credentials() {
        assert!(may_take(DEFAULT_PREFIX, "CENTRAL_VAR_HOOK").is_ok());
        let refused = may_take(DEFAULT_PREFIX, "GITHUB_TOKEN").unwrap_err();
        assert!(refused.contains("CENTRAL_VAR_"), "{refused}");
        for name in ["CENTRAL_API_KEY", "CENTRAL_ADMIN_TOKEN"] {
            assert!(may_take("CENTRAL_", name).is_err(), "{name}");
        }
        assert!(may_take("", "ANYTHING").is_err());
    }

    #[test]
    fn a_file_written_reads_back_the_same() {
        let file = parse(
            "version: 1\nmonitors:\n  api:\n    spec: {name: api, kind: http, target: 'http://h/', interval_ms: 60000}\n",
            &env,
        )
        .unwrap();
        assert_eq!(parse(&file.to_yaml().unwrap(), &env).unwrap(), file);
    }
}
