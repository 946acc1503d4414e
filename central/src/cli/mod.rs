//! Monitors as code, the client side: `central apply` (a configuration file onto a running
//! central, through its settings API, with a plan shown first), `central export` (the running
//! configuration as such a file) and `central config-schema` (the file's JSON Schema). A
//! client only: it never opens central's database, so it works against any replica, with any
//! API key whose role allows the changes (or the admin token).

mod apply;
mod client;
pub mod file;
mod forms;
mod plan;

use std::collections::{BTreeSet, HashMap};

use shared_proto::as_code::ManagedKind;

pub use crate::config::{ApplyArgs, ExportArgs, ServerArgs, VariableArgs};

use self::client::Client;
use self::file::ConfigFile;
use self::forms::Keys;
use self::plan::{Current, Plan};

/// What `apply` found: the process exits with 2 on `Drift` (a dry run that would change
/// something).
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    InSync,
    Applied,
    Drift,
}

pub async fn apply(args: &ApplyArgs) -> anyhow::Result<Outcome> {
    let (file, secrets) = file::load(&args.file, &args.variables.env_prefix)?;
    let client = Client::new(&args.server.server, &args.server.api_key)?;
    // Whatever is printed, the environment's values are not (`Secrets`).
    apply_file(args, &file, &client, &secrets)
        .await
        .map_err(|e| anyhow::anyhow!(secrets.hide(&format!("{e:#}"))))
}

async fn apply_file(
    args: &ApplyArgs,
    file: &ConfigFile,
    client: &Client,
    secrets: &file::Secrets,
) -> anyhow::Result<Outcome> {
    let current = Current::read(client).await?;
    let plan = Plan::make(file, &current, args.prune)?;
    print!("{}", secrets.hide(&plan.render()));
    if plan.changes() == 0 {
        return Ok(Outcome::InSync);
    }
    if args.dry_run {
        return Ok(Outcome::Drift);
    }
    apply::execute(&plan, file, &current, client).await?;
    // The server must now be what the file says: a change the API did not make (a field it
    // cannot unset, a value it normalises) is an error, never "Applied".
    let after = Current::read(client).await?;
    let left = Plan::make(file, &after, args.prune)?;
    anyhow::ensure!(
        left.changes() == 0,
        "applied, but the server still differs from the file:\n{}",
        secrets.hide(&left.render())
    );
    println!("Applied.");
    Ok(Outcome::Applied)
}

pub async fn export(args: &ExportArgs) -> anyhow::Result<()> {
    let client = Client::new(&args.server.server, &args.server.api_key)?;
    let current = Current::read(&client).await?;
    let text = exported(&current, &args.variables.env_prefix)?.to_yaml()?;
    match &args.output {
        Some(path) => std::fs::write(path, text)?,
        None => print!("{text}"),
    }
    Ok(())
}

/// A key for each object: the one a file manages it by, else one made of its name.
fn keys_for<'a>(
    kind: ManagedKind,
    objects: impl Iterator<Item = (uuid::Uuid, &'a str)>,
    current: &Current,
) -> HashMap<uuid::Uuid, String> {
    let marked: HashMap<uuid::Uuid, String> = current
        .marks
        .iter()
        .filter(|m| m.kind == kind)
        .map(|m| (m.object_id, m.key.clone()))
        .collect();
    let mut taken: BTreeSet<String> = marked.values().cloned().collect();
    let mut keys = HashMap::new();
    for (id, name) in objects {
        let key = match marked.get(&id) {
            Some(key) => key.clone(),
            None => {
                let base = slug(name);
                let mut key = base.clone();
                let mut n = 2;
                while taken.contains(&key) {
                    key = format!("{base}-{n}");
                    n += 1;
                }
                taken.insert(key.clone());
                key
            }
        };
        keys.insert(id, key);
    }
    keys
}

/// A key made of a name: lowercase letters and digits, other runs as `-`.
fn slug(name: &str) -> String {
    let mut key = String::new();
    for c in name.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            key.push(c);
        } else if !key.ends_with('-') && !key.is_empty() {
            key.push('-');
        }
    }
    let key: String = key.trim_end_matches('-').chars().take(56).collect();
    if key.is_empty() {
        "object".into()
    } else {
        key
    }
}

/// The running configuration as a file.
fn exported(current: &Current, prefix: &str) -> anyhow::Result<ConfigFile> {
    let keys = Keys {
        channels: keys_for(
            ManagedKind::NotificationChannels,
            current.channels.iter().map(|c| (c.id, c.name.as_str())),
            current,
        ),
        monitors: keys_for(
            ManagedKind::Monitors,
            current
                .monitors
                .iter()
                .map(|m| (m.id, m.spec.name.as_str())),
            current,
        ),
    };
    let window_keys = keys_for(
        ManagedKind::MaintenanceWindows,
        current.windows.iter().map(|w| (w.id, w.name.as_str())),
        current,
    );
    let mut file = ConfigFile {
        version: file::VERSION,
        ..ConfigFile::default()
    };
    for channel in &current.channels {
        let key = keys.channels[&channel.id].clone();
        file.notification_channels
            .insert(key.clone(), forms::channel_entry(prefix, &key, channel)?);
    }
    for monitor in &current.monitors {
        let key = keys.monitors[&monitor.id].clone();
        file.monitors.insert(
            key.clone(),
            forms::monitor_entry(prefix, &key, monitor, &keys)?,
        );
    }
    for window in &current.windows {
        file.maintenance_windows.insert(
            window_keys[&window.id].clone(),
            forms::window_entry(window, &keys)?,
        );
    }
    let page_keys = keys_for(
        ManagedKind::StatusPages,
        current.pages.iter().map(|p| (p.id, p.slug.as_str())),
        current,
    );
    for page in &current.pages {
        let key = page_keys[&page.id].clone();
        file.status_pages
            .insert(key.clone(), forms::page_entry(prefix, &key, page, &keys)?);
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::slug;

    #[test]
    fn names_become_keys() {
        assert_eq!(slug("API health (EU)"), "api-health-eu");
        assert_eq!(slug("  "), "object");
        assert_eq!(slug("Ünïcode"), "n-code", "what is not a-z or 0-9 goes");
    }
}
