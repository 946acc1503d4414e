//! What `central apply` will do, field by field, and doing it. A plan compares each object of
//! the file with the object its key names on the server (`managed-objects`): created when the
//! server has none, changed when a field differs, left alone when none does (so applying the
//! same file twice changes nothing); objects a file managed that this file no longer has are
//! deleted with `--prune` only, and never anything a file did not make.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use anyhow::Context;
use reqwest::Method;
use serde_json::{Map, Value};
use shared_proto::as_code::{ManagedKind, ManagedObject};
use shared_proto::maintenance::MaintenanceWindowView;
use shared_proto::notifications::ChannelView;
use shared_proto::settings_api::MonitorView;
use shared_proto::status_pages::StatusPageView;
use uuid::Uuid;

use super::client::Client;
use super::file::ConfigFile;
use super::forms::{self, Keys};

/// What the server has now.
pub struct Current {
    pub channels: Vec<ChannelView>,
    pub monitors: Vec<MonitorView>,
    pub windows: Vec<MaintenanceWindowView>,
    pub pages: Vec<StatusPageView>,
    pub marks: Vec<ManagedObject>,
}

fn typed<T: serde::de::DeserializeOwned>(items: Vec<Value>, what: &str) -> anyhow::Result<Vec<T>> {
    items
        .into_iter()
        .map(|v| serde_json::from_value(v).with_context(|| format!("reading {what}")))
        .collect()
}

impl Current {
    pub async fn read(client: &Client) -> anyhow::Result<Current> {
        Ok(Current {
            channels: typed(client.all("/notification-channels").await?, "channels")?,
            monitors: typed(client.all("/monitors").await?, "monitors")?,
            windows: typed(client.all("/maintenance-windows").await?, "windows")?,
            pages: typed(client.all("/status-pages").await?, "status pages")?,
            marks: serde_json::from_value(
                client.change(Method::GET, "/managed-objects", None).await?,
            )?,
        })
    }

    fn exists(&self, kind: ManagedKind, id: Uuid) -> bool {
        match kind {
            ManagedKind::NotificationChannels => self.channels.iter().any(|c| c.id == id),
            ManagedKind::Monitors => self.monitors.iter().any(|m| m.id == id),
            ManagedKind::MaintenanceWindows => self.windows.iter().any(|w| w.id == id),
            ManagedKind::StatusPages => self.pages.iter().any(|p| p.id == id),
        }
    }

    /// Live objects by key, for each kind.
    pub fn ids(&self) -> BTreeMap<(ManagedKind, String), Uuid> {
        self.marks
            .iter()
            .filter(|m| self.exists(m.kind, m.object_id))
            .map(|m| ((m.kind, m.key.clone()), m.object_id))
            .collect()
    }

    pub fn keys(&self) -> Keys {
        let mut keys = Keys::default();
        for ((kind, key), id) in self.ids() {
            match kind {
                ManagedKind::NotificationChannels => keys.channels.insert(id, key),
                ManagedKind::Monitors => keys.monitors.insert(id, key),
                ManagedKind::MaintenanceWindows | ManagedKind::StatusPages => None,
            };
        }
        keys
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub field: String,
    pub before: Option<Value>,
    pub after: Option<Value>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Create,
    Update(Vec<Change>),
    /// An object no file managed, with the file's name: marked with the key, then changed.
    Adopt(Vec<Change>),
    Delete,
    /// Managed by a file before, not in this one, and `--prune` not given.
    Kept,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub kind: ManagedKind,
    pub key: String,
    pub id: Option<Uuid>,
    pub action: Action,
}

pub struct Plan {
    pub steps: Vec<Step>,
}

/// The fields that differ, `settings` one level down (`settings.keyword`).
fn diff(before: &Map<String, Value>, after: &Map<String, Value>) -> Vec<Change> {
    let names: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    let mut changes = Vec::new();
    for name in names {
        let (b, a) = (before.get(name), after.get(name));
        if b == a {
            continue;
        }
        match (b, a) {
            (Some(Value::Object(b)), Some(Value::Object(a))) if name == "settings" => {
                for mut change in diff(b, a) {
                    change.field = format!("{name}.{}", change.field);
                    changes.push(change);
                }
            }
            _ => changes.push(Change {
                field: name.clone(),
                before: b.cloned(),
                after: a.cloned(),
            }),
        }
    }
    changes
}

impl Plan {
    pub fn make(file: &ConfigFile, current: &Current, prune: bool) -> anyhow::Result<Plan> {
        use ManagedKind::*;
        super::apply::parents_first(file)?;
        let marked = current.ids();
        let marked_ids: BTreeSet<Uuid> = marked.values().copied().collect();
        // An object no file manages yet, with the name the file gives: the file's from now on
        // (`export` then `apply` to the same central takes what is there, not a copy).
        let unmarked_named = |kind: ManagedKind, spec: &Map<String, Value>| -> Option<Uuid> {
            // A page is named by its slug, which no other page has.
            let field = if kind == StatusPages { "slug" } else { "name" };
            let name = spec.get(field)?.as_str()?.trim();
            let named: Vec<Uuid> = match kind {
                NotificationChannels => current
                    .channels
                    .iter()
                    .filter(|c| c.name.trim() == name)
                    .map(|c| c.id)
                    .collect(),
                Monitors => current
                    .monitors
                    .iter()
                    .filter(|m| m.spec.name.trim() == name)
                    .map(|m| m.id)
                    .collect(),
                MaintenanceWindows => current
                    .windows
                    .iter()
                    .filter(|w| w.name.trim() == name)
                    .map(|w| w.id)
                    .collect(),
                StatusPages => current
                    .pages
                    .iter()
                    .filter(|p| p.slug == name)
                    .map(|p| p.id)
                    .collect(),
            };
            let unmarked: Vec<Uuid> = named
                .into_iter()
                .filter(|id| !marked_ids.contains(id))
                .collect();
            (unmarked.len() == 1).then(|| unmarked[0])
        };
        // Each key of the file: the object it names, and whether it is adopted now.
        let mut found: BTreeMap<(ManagedKind, String), (Uuid, bool)> = BTreeMap::new();
        let specs = file
            .notification_channels
            .iter()
            .map(|(k, e)| (NotificationChannels, k, &e.spec))
            .chain(file.monitors.iter().map(|(k, e)| (Monitors, k, &e.spec)))
            .chain(
                file.maintenance_windows
                    .iter()
                    .map(|(k, e)| (MaintenanceWindows, k, &e.spec)),
            )
            .chain(
                file.status_pages
                    .iter()
                    .map(|(k, e)| (StatusPages, k, &e.spec)),
            );
        for (kind, key, spec) in specs {
            let at = (kind, key.clone());
            if let Some(id) = marked.get(&at) {
                found.insert(at, (*id, false));
            } else if let Some(id) = unmarked_named(kind, spec) {
                found.insert(at, (id, true));
            }
        }
        let mut keys = current.keys();
        for ((kind, key), (id, _)) in &found {
            match kind {
                NotificationChannels => keys.channels.insert(*id, key.clone()),
                Monitors => keys.monitors.insert(*id, key.clone()),
                MaintenanceWindows | StatusPages => None,
            };
        }
        let mut steps = Vec::new();
        let mut step = |kind: ManagedKind,
                        key: &str,
                        shown: Option<Map<String, Value>>,
                        wanted: Map<String, Value>| {
            let (id, adopted) = match found.get(&(kind, key.to_string())) {
                Some((id, adopted)) => (Some(*id), *adopted),
                None => (None, false),
            };
            let action = match shown {
                None => Action::Create,
                Some(shown) if adopted => Action::Adopt(diff(&shown, &wanted)),
                Some(shown) => Action::Update(diff(&shown, &wanted)),
            };
            if action != Action::Update(Vec::new()) {
                steps.push(Step {
                    kind,
                    key: key.to_string(),
                    id,
                    action,
                });
            }
        };
        let id_of = |kind: ManagedKind, key: &String| found.get(&(kind, key.clone())).map(|f| f.0);
        for (key, entry) in &file.notification_channels {
            let shown = id_of(NotificationChannels, key)
                .and_then(|id| current.channels.iter().find(|c| c.id == id))
                .map(forms::channel_shown)
                .transpose()?;
            step(
                NotificationChannels,
                key,
                shown,
                forms::channel_wanted(key, entry)?,
            );
        }
        for (key, entry) in &file.monitors {
            let view =
                id_of(Monitors, key).and_then(|id| current.monitors.iter().find(|m| m.id == id));
            let wanted = forms::monitor_wanted(key, entry)?;
            if let Some(view) = view {
                let kind = serde_json::to_value(view.spec.kind)?;
                anyhow::ensure!(
                    wanted.get("kind") == Some(&kind),
                    "monitors `{key}`: a monitor's kind cannot change (it is {kind}); give the \
                     new one another key"
                );
            }
            let shown = view.map(|v| forms::monitor_shown(v, &keys)).transpose()?;
            step(Monitors, key, shown, wanted);
        }
        for (key, entry) in &file.maintenance_windows {
            let shown = id_of(MaintenanceWindows, key)
                .and_then(|id| current.windows.iter().find(|w| w.id == id))
                .map(|w| forms::window_shown(w, &keys))
                .transpose()?;
            step(
                MaintenanceWindows,
                key,
                shown,
                forms::window_wanted(key, entry)?,
            );
        }
        for (key, entry) in &file.status_pages {
            let shown = id_of(StatusPages, key)
                .and_then(|id| current.pages.iter().find(|p| p.id == id))
                .map(|p| forms::page_shown(p, &keys))
                .transpose()?;
            step(StatusPages, key, shown, forms::page_wanted(key, entry)?);
        }
        for ((kind, key), id) in &marked {
            let in_file = match kind {
                NotificationChannels => file.notification_channels.contains_key(key),
                Monitors => file.monitors.contains_key(key),
                MaintenanceWindows => file.maintenance_windows.contains_key(key),
                StatusPages => file.status_pages.contains_key(key),
            };
            if !in_file {
                steps.push(Step {
                    kind: *kind,
                    key: key.clone(),
                    id: Some(*id),
                    action: if prune { Action::Delete } else { Action::Kept },
                });
            }
        }
        Ok(Plan { steps })
    }

    /// Creations, changes and deletions (what `--dry-run` calls drift).
    pub fn changes(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| s.action != Action::Kept)
            .count()
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        let shown = |v: &Option<Value>| v.as_ref().map_or("(none)".to_string(), Value::to_string);
        let (mut created, mut changed, mut deleted) = (0, 0, 0);
        for step in &self.steps {
            let name = format!("{}/{}", step.kind.as_str(), step.key);
            let _ = match &step.action {
                Action::Create => {
                    created += 1;
                    writeln!(out, "+ {name}: create")
                }
                Action::Update(changes) | Action::Adopt(changes) => {
                    changed += 1;
                    if matches!(step.action, Action::Adopt(_)) {
                        let _ = writeln!(out, "= {name}: take the existing object of this name");
                    } else {
                        let _ = writeln!(out, "~ {name}: change");
                    }
                    for c in changes {
                        let _ = writeln!(
                            out,
                            "    {}: {} -> {}",
                            c.field,
                            shown(&c.before),
                            shown(&c.after)
                        );
                    }
                    Ok(())
                }
                Action::Delete => {
                    deleted += 1;
                    writeln!(out, "- {name}: delete")
                }
                Action::Kept => writeln!(
                    out,
                    "  {name}: not in the file; kept (`--prune` deletes it)"
                ),
            };
        }
        let _ = writeln!(
            out,
            "Plan: {created} to create, {changed} to change, {deleted} to delete."
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_what_differs_is_a_change_and_settings_are_named_one_level_down() {
        let before =
            json!({"name": "a", "settings": {"keyword": "ok", "method": "GET"}, "tags": ["x"]});
        let after = json!({"name": "a", "settings": {"keyword": "up", "method": "GET"}});
        let changes = diff(before.as_object().unwrap(), after.as_object().unwrap());
        assert_eq!(
            changes,
            [
                Change {
                    field: "settings.keyword".into(),
                    before: Some(json!("ok")),
                    after: Some(json!("up"))
                },
                Change {
                    field: "tags".into(),
                    before: Some(json!(["x"])),
                    after: None
                },
            ]
        );
    }
}
