//! Carrying a plan out through the settings API: channels, then monitors parents first, then
//! maintenance windows and status pages (each object made or changed is marked with its key),
//! and deletions last, what depends on others first. Stops at the first refusal, naming it; what was done
//! before it stays done, and the next `apply` plans the rest.

use std::collections::{BTreeSet, HashMap};

use anyhow::Context;
use reqwest::Method;
use serde_json::{Map, Value};
use shared_proto::as_code::ManagedKind;
use uuid::Uuid;

use super::client::Client;
use super::file::ConfigFile;
use super::forms;
use super::plan::{Action, Change, Current, Plan, Step};

/// The settings API's field for a field of the comparable form.
fn api_field(kind: ManagedKind, field: &str) -> String {
    let top = field.split('.').next().unwrap_or(field);
    match (kind, top) {
        (ManagedKind::Monitors, "notification_channels") => "notification_channel_ids".into(),
        (ManagedKind::Monitors, "parents") => "parent_ids".into(),
        (ManagedKind::MaintenanceWindows, "monitors") => "monitor_ids".into(),
        (ManagedKind::NotificationChannels, "has_secret") => "secret".into(),
        _ => top.into(),
    }
}

/// Monitors in an order that creates each parent before its children.
pub(super) fn parents_first(file: &ConfigFile) -> anyhow::Result<Vec<String>> {
    let mut order = Vec::new();
    let mut placed = BTreeSet::new();
    while placed.len() < file.monitors.len() {
        let ready: Vec<&String> = file
            .monitors
            .iter()
            .filter(|(k, e)| !placed.contains(*k) && e.parents.iter().all(|p| placed.contains(p)))
            .map(|(k, _)| k)
            .collect();
        anyhow::ensure!(!ready.is_empty(), "the monitors' `parents` make a cycle");
        for key in ready {
            placed.insert(key.clone());
            order.push(key.clone());
        }
    }
    Ok(order)
}

/// What has been made so far, by kind and key.
type Made = HashMap<(ManagedKind, String), Uuid>;

fn resolve(made: &Made, kind: ManagedKind, keys: &[String]) -> anyhow::Result<Vec<Uuid>> {
    keys.iter()
        .map(|k| {
            made.get(&(kind, k.clone()))
                .copied()
                .with_context(|| format!("{} `{k}` was not made", kind.as_str()))
        })
        .collect()
}

/// Creates or changes one object (`body` is the whole object as the API takes it; a change
/// sends only the fields that differ) and marks it with its key.
async fn put(
    client: &Client,
    step: &Step,
    path: &str,
    create: &Value,
    change: &Value,
    made: &mut Made,
) -> anyhow::Result<()> {
    let id = match (&step.action, step.id) {
        (Action::Create, _) => {
            let answer = client.change(Method::POST, path, Some(create)).await?;
            answer["id"]
                .as_str()
                .and_then(|s| s.parse().ok())
                .context("a created object's id")?
        }
        (Action::Update(changes) | Action::Adopt(changes), Some(id)) => {
            if !changes.is_empty() {
                let patch = patch_of(step.kind, changes, change);
                client
                    .change(Method::PATCH, &format!("{path}/{id}"), Some(&patch))
                    .await?;
            }
            id
        }
        _ => return Ok(()),
    };
    made.insert((step.kind, step.key.clone()), id);
    let mark_path = format!("/managed-objects/{}/{}", step.kind.as_str(), step.key);
    let mark = serde_json::json!({"object_id": id});
    if client
        .change(Method::PUT, &mark_path, Some(&mark))
        .await
        .is_err()
    {
        // Once more; then say how to finish by hand (the next apply would take the object
        // back by its name, but not if another of that name appears meanwhile).
        client
            .change(Method::PUT, &mark_path, Some(&mark))
            .await
            .with_context(|| {
                format!(
                    "{path}/{id} was written but not marked as `{}`: PUT /api/v1{mark_path} {mark}",
                    step.key
                )
            })?;
    }
    Ok(())
}

fn patch_of(kind: ManagedKind, changes: &[Change], body: &Value) -> Value {
    let mut patch = Map::new();
    let mut fields: Vec<String> = changes.iter().map(|c| api_field(kind, &c.field)).collect();
    // A monitor's target or placement moves only with its settings, and a channel's address
    // only with its credentials: they are the new place's, not the old one's (central
    // refuses the move otherwise, `service::{monitor_secrets, channel_secrets}`).
    let moves = |moving: &[&str], along: &[&str], fields: &mut Vec<String>| {
        if fields.iter().any(|f| moving.contains(&f.as_str())) {
            for field in along {
                if !fields.iter().any(|f| f == field) {
                    fields.push((*field).into());
                }
            }
        }
    };
    match kind {
        ManagedKind::Monitors => moves(
            &[
                "target",
                "poller_mode",
                "poller_id",
                "poller_region",
                "poller_datacenter",
                "poller_capability",
                "poller_regions",
            ],
            &["settings", "target"],
            &mut fields,
        ),
        ManagedKind::NotificationChannels => moves(
            &["url", "urls"],
            &["secret", "headers", "user_key", "topic"],
            &mut fields,
        ),
        // A page that becomes a password page needs its password.
        ManagedKind::StatusPages => moves(&["visibility"], &["password"], &mut fields),
        _ => {}
    }
    for field in fields {
        let value = body.get(&field).cloned().unwrap_or(Value::Null);
        patch.insert(field, value);
    }
    Value::Object(patch)
}

pub async fn execute(
    plan: &Plan,
    file: &ConfigFile,
    current: &Current,
    client: &Client,
) -> anyhow::Result<()> {
    use ManagedKind::*;
    let mut made: Made = current.ids().into_iter().collect();
    let step_of =
        |kind: ManagedKind, key: &str| plan.steps.iter().find(|s| s.kind == kind && s.key == key);
    for (key, entry) in &file.notification_channels {
        if let Some(step) = step_of(NotificationChannels, key) {
            // Created as written (a kind refuses fields it does not take, even empty); changed
            // with every field explicit, so that one dropped from the file is emptied.
            let create = Value::Object(entry.spec.clone());
            let change = forms::channel_body(key, entry)?;
            put(
                client,
                step,
                "/notification-channels",
                &create,
                &change,
                &mut made,
            )
            .await?;
        }
    }
    for key in parents_first(file)? {
        let entry = &file.monitors[&key];
        if let Some(step) = step_of(Monitors, &key) {
            let channels = resolve(&made, NotificationChannels, &entry.notification_channels)?;
            let parents = resolve(&made, Monitors, &entry.parents)?;
            let body = forms::monitor_body(&key, entry, &channels, &parents)?;
            put(client, step, "/monitors", &body, &body, &mut made).await?;
        }
    }
    for (key, entry) in &file.maintenance_windows {
        if let Some(step) = step_of(MaintenanceWindows, key) {
            let monitors = resolve(&made, Monitors, &entry.monitors)?;
            let body = forms::window_body(key, entry, &monitors)?;
            put(
                client,
                step,
                "/maintenance-windows",
                &body,
                &body,
                &mut made,
            )
            .await?;
        }
    }
    for (key, entry) in &file.status_pages {
        if let Some(step) = step_of(StatusPages, key) {
            let id_of = |monitor: &str| {
                made.get(&(Monitors, monitor.to_string()))
                    .copied()
                    .with_context(|| format!("monitors `{monitor}` was not made"))
            };
            let body = forms::page_body(key, entry, &id_of)?;
            put(client, step, "/status-pages", &body, &body, &mut made).await?;
        }
    }
    delete(plan, current, client).await
}

/// `--prune`'s deletions: windows, monitors (children before parents), channels.
async fn delete(plan: &Plan, current: &Current, client: &Client) -> anyhow::Result<()> {
    use ManagedKind::*;
    let deleted = |kind: ManagedKind| -> Vec<(String, Uuid)> {
        plan.steps
            .iter()
            .filter(|s| s.kind == kind && s.action == Action::Delete)
            .filter_map(|s| s.id.map(|id| (s.key.clone(), id)))
            .collect()
    };
    let mut monitors = deleted(Monitors);
    let mut ordered = Vec::new();
    while !monitors.is_empty() {
        let parents: BTreeSet<Uuid> = monitors
            .iter()
            .filter_map(|(_, id)| current.monitors.iter().find(|m| m.id == *id))
            .flat_map(|m| m.spec.parent_ids.iter().copied())
            .collect();
        let (leaves, rest): (Vec<_>, Vec<_>) = monitors
            .into_iter()
            .partition(|(_, id)| !parents.contains(id));
        anyhow::ensure!(
            !leaves.is_empty(),
            "the monitors to delete depend on each other in a cycle"
        );
        ordered.extend(leaves);
        monitors = rest;
    }
    for (kind, path, list) in [
        (StatusPages, "status-pages", deleted(StatusPages)),
        (
            MaintenanceWindows,
            "maintenance-windows",
            deleted(MaintenanceWindows),
        ),
        (Monitors, "monitors", ordered),
        (
            NotificationChannels,
            "notification-channels",
            deleted(NotificationChannels),
        ),
    ] {
        for (key, id) in list {
            client
                .call(Method::DELETE, &format!("/{path}/{id}"), None)
                .await?;
            client
                .call(
                    Method::DELETE,
                    &format!("/managed-objects/{}/{key}", kind.as_str()),
                    None,
                )
                .await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparable_fields_map_to_the_apis() {
        assert_eq!(
            api_field(ManagedKind::Monitors, "settings.keyword"),
            "settings"
        );
        assert_eq!(api_field(ManagedKind::Monitors, "parents"), "parent_ids");
        assert_eq!(
            api_field(ManagedKind::NotificationChannels, "has_secret"),
            "secret"
        );
    }
}
