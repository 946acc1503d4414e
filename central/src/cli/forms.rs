//! Each object in the forms `apply` and `export` need: the comparable form of what the file
//! wants and of what the server has (secrets as a view shows them, since views never show
//! them; objects named by key, not id; empty fields left out), the body the settings API
//! takes, and the file's form of a server object (secrets as `${…}` references).

use std::collections::HashMap;

use serde_json::{Map, Value};
use shared_proto::maintenance::{MaintenanceWindowSpec, MaintenanceWindowView};
use shared_proto::notifications::{ChannelSpec, ChannelView, HIDDEN};
use shared_proto::settings_api::MonitorView;
use shared_proto::MonitorSpec;
use uuid::Uuid;

use shared_proto::status_pages::{DisplayName, StatusPageSection, StatusPageSpec, StatusPageView};

use super::file::{ChannelEntry, MonitorEntry, PageEntry, SectionEntry, WindowEntry};
use shared_proto::redaction::address_shown;

/// Keys by id, of the objects the server has that a file names (or that an export names).
#[derive(Debug, Default, Clone)]
pub struct Keys {
    pub channels: HashMap<Uuid, String>,
    pub monitors: HashMap<Uuid, String>,
}

impl Keys {
    fn names(map: &HashMap<Uuid, String>, ids: &[Uuid]) -> Value {
        let mut names: Vec<String> = ids
            .iter()
            .map(|id| map.get(id).cloned().unwrap_or_else(|| id.to_string()))
            .collect();
        names.sort();
        Value::from(names)
    }
}

/// Leaves out what says nothing (`null`, `[]`, `{}`), so that a field left out of the file and
/// the same field empty on the server compare equal.
pub fn tidy(mut map: Map<String, Value>) -> Map<String, Value> {
    // Central stores names trimmed.
    if let Some(Value::String(name)) = map.get_mut("name") {
        *name = name.trim().to_string();
    }
    map.retain(|_, v| match v {
        Value::Null => false,
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
        _ => true,
    });
    map
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn sorted(keys: &[String]) -> Value {
    let mut keys = keys.to_vec();
    keys.sort();
    Value::from(keys)
}

fn typed<T: serde::de::DeserializeOwned>(
    what: &str,
    key: &str,
    spec: &Map<String, Value>,
) -> anyhow::Result<T> {
    serde_json::from_value(Value::Object(spec.clone()))
        .map_err(|e| anyhow::anyhow!("{what} `{key}`: {e}"))
}

// ---- monitors ----

/// The file's monitor as the API takes it, with the ids of its channels and parents.
pub fn monitor_body(
    key: &str,
    entry: &MonitorEntry,
    channels: &[Uuid],
    parents: &[Uuid],
) -> anyhow::Result<Value> {
    let mut spec: MonitorSpec = typed("monitors", key, &entry.spec)?;
    spec.notification_channel_ids = channels.to_vec();
    spec.parent_ids = parents.to_vec();
    Ok(serde_json::to_value(spec)?)
}

pub fn monitor_wanted(key: &str, entry: &MonitorEntry) -> anyhow::Result<Map<String, Value>> {
    let mut spec: MonitorSpec = typed("monitors", key, &entry.spec)?;
    shared_proto::redaction::hide_monitor(&mut spec);
    let mut map = object(serde_json::to_value(spec)?);
    map.remove("notification_channel_ids");
    map.remove("parent_ids");
    map.insert(
        "notification_channels".into(),
        sorted(&entry.notification_channels),
    );
    map.insert("parents".into(), sorted(&entry.parents));
    Ok(tidy(map))
}

pub fn monitor_shown(view: &MonitorView, keys: &Keys) -> anyhow::Result<Map<String, Value>> {
    let mut map = object(serde_json::to_value(&view.spec)?);
    map.remove("notification_channel_ids");
    map.remove("parent_ids");
    map.insert(
        "notification_channels".into(),
        Keys::names(&keys.channels, &view.spec.notification_channel_ids),
    );
    map.insert(
        "parents".into(),
        Keys::names(&keys.monitors, &view.spec.parent_ids),
    );
    Ok(tidy(map))
}

/// An exported monitor: header values, the body and a target with credentials as references
/// to the environment.
pub fn monitor_entry(
    prefix: &str,
    key: &str,
    view: &MonitorView,
    keys: &Keys,
) -> anyhow::Result<MonitorEntry> {
    let mut spec = tidy(object(serde_json::to_value(&view.spec)?));
    spec.remove("notification_channel_ids");
    spec.remove("parent_ids");
    if let Some(Value::Object(settings)) = spec.get_mut("settings") {
        if let Some(Value::Object(headers)) = settings.get_mut("headers") {
            for (name, value) in headers.iter_mut() {
                *value = Value::from(reference(prefix, "MONITOR", key, &format!("HEADER_{name}")));
            }
        }
        if let Some(body @ Value::String(_)) = settings.get_mut("body") {
            *body = Value::from(reference(prefix, "MONITOR", key, "BODY"));
        }
    }
    if let Some(Value::String(target)) = spec.get_mut("target") {
        if target.contains(HIDDEN) {
            *target = reference(prefix, "MONITOR", key, "TARGET");
        }
    }
    let names = |map: &HashMap<Uuid, String>, ids: &[Uuid]| -> Vec<String> {
        serde_json::from_value(Keys::names(map, ids)).unwrap_or_default()
    };
    Ok(MonitorEntry {
        spec,
        notification_channels: names(&keys.channels, &view.spec.notification_channel_ids),
        parents: names(&keys.monitors, &view.spec.parent_ids),
    })
}

// ---- notification channels ----

/// The file's channel as the API takes it in a change: every field the kind has, empty ones
/// explicit (`[]`, `{}`, `false`), so that a field dropped from the file is emptied.
pub fn channel_body(key: &str, entry: &ChannelEntry) -> anyhow::Result<Value> {
    let spec: ChannelSpec = typed("notification_channels", key, &entry.spec)?;
    Ok(serde_json::to_value(spec)?)
}

pub fn channel_wanted(key: &str, entry: &ChannelEntry) -> anyhow::Result<Map<String, Value>> {
    let spec: ChannelSpec = typed("notification_channels", key, &entry.spec)?;
    let kind = spec.kind;
    let mut map = object(serde_json::to_value(&spec)?);
    let has_secret = map.remove("secret").is_some_and(|s| !s.is_null());
    map.insert("has_secret".into(), Value::from(has_secret));
    if let Some(url) = spec.url.as_deref() {
        map.insert("url".into(), Value::from(address_shown(kind, url)));
    }
    let urls: Vec<String> = spec.urls.iter().map(|u| address_shown(kind, u)).collect();
    map.insert("urls".into(), Value::from(urls));
    let headers: Map<String, Value> = spec
        .headers
        .keys()
        .map(|name| (name.clone(), Value::from(HIDDEN)))
        .collect();
    map.insert("headers".into(), Value::Object(headers));
    for field in ["user_key", "topic"] {
        if let Some(Value::String(value)) = map.get_mut(field) {
            *value = HIDDEN.into();
        }
    }
    Ok(tidy(map))
}

pub fn channel_shown(view: &ChannelView) -> anyhow::Result<Map<String, Value>> {
    let mut map = object(serde_json::to_value(view)?);
    for field in ["id", "created_at", "updated_at"] {
        map.remove(field);
    }
    Ok(tidy(map))
}

/// An exported channel: its secret, header values and secret-bearing address as references.
pub fn channel_entry(prefix: &str, key: &str, view: &ChannelView) -> anyhow::Result<ChannelEntry> {
    let mut spec = channel_shown(view)?;
    let has_secret = spec.remove("has_secret").and_then(|v| v.as_bool()) == Some(true);
    if has_secret {
        spec.insert(
            "secret".into(),
            Value::from(reference(prefix, "CHANNEL", key, "SECRET")),
        );
    }
    if let Some(Value::String(url)) = spec.get_mut("url") {
        if url.contains(HIDDEN) {
            *url = reference(prefix, "CHANNEL", key, "URL");
        }
    }
    if let Some(Value::Array(urls)) = spec.get_mut("urls") {
        for (n, url) in urls.iter_mut().enumerate() {
            if url.as_str().is_some_and(|u| u.contains(HIDDEN)) {
                *url = Value::from(reference(prefix, "CHANNEL", key, &format!("URL_{}", n + 1)));
            }
        }
    }
    if let Some(Value::Object(headers)) = spec.get_mut("headers") {
        for (name, value) in headers.iter_mut() {
            *value = Value::from(reference(prefix, "CHANNEL", key, &format!("HEADER_{name}")));
        }
    }
    for field in ["user_key", "topic"] {
        if let Some(value) = spec.get_mut(field) {
            *value = Value::from(reference(
                prefix,
                "CHANNEL",
                key,
                &field.to_ascii_uppercase(),
            ));
        }
    }
    Ok(ChannelEntry { spec })
}

// ---- maintenance windows ----

pub fn window_body(key: &str, entry: &WindowEntry, monitors: &[Uuid]) -> anyhow::Result<Value> {
    let mut spec: MaintenanceWindowSpec = typed("maintenance_windows", key, &entry.spec)?;
    spec.monitor_ids = monitors.to_vec();
    Ok(serde_json::to_value(spec)?)
}

pub fn window_wanted(key: &str, entry: &WindowEntry) -> anyhow::Result<Map<String, Value>> {
    let spec: MaintenanceWindowSpec = typed("maintenance_windows", key, &entry.spec)?;
    let mut map = object(serde_json::to_value(spec)?);
    map.remove("monitor_ids");
    map.insert("monitors".into(), sorted(&entry.monitors));
    Ok(tidy(map))
}

/// The spec fields of a window's view.
fn window_spec(view: &MaintenanceWindowView) -> anyhow::Result<MaintenanceWindowSpec> {
    Ok(MaintenanceWindowSpec {
        name: view.name.clone(),
        starts_at: view.starts_at,
        ends_at: view.ends_at,
        recurrence: view.recurrence.clone(),
        monitor_ids: view.monitor_ids.clone(),
        poller_ids: view.poller_ids.clone(),
        regions: view.regions.clone(),
        tags: view.tags.clone(),
        notify: view.notify,
        stop_checks: view.stop_checks,
    })
}

pub fn window_shown(
    view: &MaintenanceWindowView,
    keys: &Keys,
) -> anyhow::Result<Map<String, Value>> {
    let mut map = object(serde_json::to_value(window_spec(view)?)?);
    map.remove("monitor_ids");
    map.insert(
        "monitors".into(),
        Keys::names(&keys.monitors, &view.monitor_ids),
    );
    Ok(tidy(map))
}

pub fn window_entry(view: &MaintenanceWindowView, keys: &Keys) -> anyhow::Result<WindowEntry> {
    let mut spec = tidy(object(serde_json::to_value(window_spec(view)?)?));
    spec.remove("monitor_ids");
    Ok(WindowEntry {
        spec,
        monitors: serde_json::from_value(Keys::names(&keys.monitors, &view.monitor_ids))?,
    })
}

// ---- status pages ----

/// The file's page as the API takes it, its sections' monitors by id (`id_of` a monitor's key).
pub fn page_body(
    key: &str,
    entry: &PageEntry,
    id_of: &dyn Fn(&str) -> anyhow::Result<Uuid>,
) -> anyhow::Result<Value> {
    let mut spec: StatusPageSpec = typed("status_pages", key, &entry.spec)?;
    let mut sections = Vec::with_capacity(entry.sections.len());
    for section in &entry.sections {
        sections.push(StatusPageSection {
            name: section.name.clone(),
            monitor_ids: section
                .monitors
                .iter()
                .map(|k| id_of(k))
                .collect::<anyhow::Result<_>>()?,
            tags: section.tags.clone(),
            display_names: section
                .display_names
                .iter()
                .map(|(k, name)| {
                    Ok(DisplayName {
                        monitor_id: id_of(k)?,
                        name: name.clone(),
                    })
                })
                .collect::<anyhow::Result<_>>()?,
        });
    }
    spec.sections = sections;
    Ok(serde_json::to_value(spec)?)
}

/// A page's comparable form: its fields but the password (never shown, so never compared:
/// a password changed in the file alone is not seen; change it in the API or on the page),
/// and its sections as the file writes them.
fn page_form(
    spec: &StatusPageSpec,
    sections: Vec<SectionEntry>,
) -> anyhow::Result<Map<String, Value>> {
    let mut map = object(serde_json::to_value(spec)?);
    map.remove("password");
    map.insert("sections".into(), serde_json::to_value(sections)?);
    Ok(tidy(map))
}

pub fn page_wanted(key: &str, entry: &PageEntry) -> anyhow::Result<Map<String, Value>> {
    let mut spec: StatusPageSpec = typed("status_pages", key, &entry.spec)?;
    spec.sections.clear();
    page_form(&spec, entry.sections.clone())
}

/// A page's spec and its sections as the file writes them, monitors by key (an id the file
/// has no key for as itself).
fn page_parts(view: &StatusPageView, keys: &Keys) -> (StatusPageSpec, Vec<SectionEntry>) {
    let key = |id: &Uuid| {
        keys.monitors
            .get(id)
            .cloned()
            .unwrap_or_else(|| id.to_string())
    };
    let sections = view
        .sections
        .iter()
        .map(|s| SectionEntry {
            name: s.name.clone(),
            monitors: s.monitor_ids.iter().map(key).collect(),
            tags: s.tags.clone(),
            display_names: s
                .display_names
                .iter()
                .map(|d| (key(&d.monitor_id), d.name.clone()))
                .collect(),
        })
        .collect();
    let spec = StatusPageSpec {
        slug: view.slug.clone(),
        title: view.title.clone(),
        description: view.description.clone(),
        sections: Vec::new(),
        visibility: view.visibility,
        password: None,
        domain: view.domain.clone(),
        auto_incidents: view.auto_incidents,
        logo: view.logo.clone(),
    };
    (spec, sections)
}

pub fn page_shown(view: &StatusPageView, keys: &Keys) -> anyhow::Result<Map<String, Value>> {
    let (spec, sections) = page_parts(view, keys);
    page_form(&spec, sections)
}

/// An exported page: its password, which no view shows, as a reference.
pub fn page_entry(
    prefix: &str,
    key: &str,
    view: &StatusPageView,
    keys: &Keys,
) -> anyhow::Result<PageEntry> {
    let (spec, sections) = page_parts(view, keys);
    let mut spec = tidy(object(serde_json::to_value(spec)?));
    spec.remove("sections");
    if view.has_password {
        spec.insert(
            "password".into(),
            Value::from(reference(prefix, "STATUS_PAGE", key, "PASSWORD")),
        );
    }
    Ok(PageEntry { spec, sections })
}

/// `${CENTRAL_<KIND>_<KEY>_<WHAT>}`: where an export leaves a secret it cannot read.
/// The `${…}` an export writes for a secret: `prefix` (`--env-prefix`, which `apply` takes
/// variables from) and the object's kind, key and field.
pub fn reference(prefix: &str, kind: &str, key: &str, what: &str) -> String {
    let name: String = format!("{kind}_{key}_{what}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("${{{prefix}{name}}}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_variable_names() {
        assert_eq!(
            reference("CENTRAL_VAR_", "CHANNEL", "ops-hook.eu", "HEADER_X-Api-Key"),
            "${CENTRAL_VAR_CHANNEL_OPS_HOOK_EU_HEADER_X_API_KEY}"
        );
    }
}
