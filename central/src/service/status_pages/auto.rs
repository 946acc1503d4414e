//! Incidents a page opens itself (`auto_incidents`): when alerting tells that a monitor the
//! page shows is down, the page opens an incident for it (a draft, or published at once, as
//! the page says), named by the monitor's name on the page and saying nothing else of it (no
//! target, no message); when alerting tells it is up again, that incident is resolved. A
//! monitor has at most one such incident open per page.
//!
//! Driven by alerting after it recorded what it tells (`alerts::look`), so it follows exactly
//! what channels were told: nothing for a change held by maintenance, flapping or a parent.
//! Best effort: a failure here is logged and never undoes or delays what alerting recorded,
//! and a change told while central stops between the two opens nothing. Cost: per look that
//! told a monitor down or up, one read of the pages, and for each page that opens incidents
//! the monitors it names (`named_monitors`). Must not: tell anyone, or write SQL.

use std::collections::HashMap;

use shared_proto::status_incidents::{IncidentSpec, IncidentStatus, IncidentUpdateSpec};
use shared_proto::status_pages::AutoIncidents;
use uuid::Uuid;

use super::incidents::CHANGE_TRIES;
use super::{StatusPage, StatusPages};
use crate::service::error::ServiceResult;
use crate::service::{stored_id, time_of};

/// What alerting told of a monitor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Told {
    Down,
    Up,
}

impl StatusPages {
    /// Opens or resolves the incidents of pages that open them themselves, for what alerting
    /// told of `monitors` at `at`.
    pub async fn monitors_told(&self, told: &[(String, Told)], at: i64) -> ServiceResult<()> {
        if told.is_empty() {
            return Ok(());
        }
        let pages: Vec<StatusPage> = self
            .all_pages()
            .await?
            .into_iter()
            .filter(|p| p.auto_incidents != AutoIncidents::Off)
            .collect();
        for page in &pages {
            let named = self.named_monitors(page).await?;
            for (monitor, what) in told {
                let id = stored_id(monitor)?;
                if named.contains(&id) {
                    self.follow(page, id, *what, at).await?;
                }
            }
        }
        Ok(())
    }

    async fn follow(
        &self,
        page: &StatusPage,
        monitor: Uuid,
        told: Told,
        at: i64,
    ) -> ServiceResult<()> {
        let name = self.shown_name(page, monitor).await?;
        let when = time_of(at).format("%Y-%m-%d %H:%M UTC");
        // Decided again from a fresh reading when an operator changed the incident between
        // this reading and the write (`change`).
        for _ in 0..CHANGE_TRIES {
            let open = self
                .store
                .open_incident_for(&page.id.to_string(), &monitor.to_string())
                .await?;
            match (told, open) {
                (Told::Down, None) => {
                    let spec = IncidentSpec {
                        title: format!("{name} is down"),
                        status: IncidentStatus::Investigating,
                        message: format!(
                            "{name} has not been working since {when}. We are looking into it."
                        ),
                        monitor_ids: vec![monitor],
                    };
                    let published = page.auto_incidents == AutoIncidents::Publish;
                    self.open(page.id, spec, published, Some(monitor)).await?;
                    return Ok(());
                }
                (Told::Up, Some(row)) => {
                    let update = IncidentUpdateSpec {
                        status: IncidentStatus::Resolved,
                        message: format!("{name} has been working again since {when}."),
                    };
                    let id = stored_id(&row.id)?;
                    let changed = self
                        .change(page.id, id, &row.clone(), row, Some(update))
                        .await?;
                    if changed.is_some() {
                        return Ok(());
                    }
                }
                // Down with one open already (told again), or up with none open (closed by
                // hand).
                _ => return Ok(()),
            }
        }
        tracing::warn!(page = %page.slug, %monitor, "an incident kept changing while it was being resolved automatically; left open");
        Ok(())
    }

    /// A monitor's name on `page`: a section's display name, else its own.
    async fn shown_name(&self, page: &StatusPage, monitor: Uuid) -> ServiceResult<String> {
        let display = page
            .sections
            .iter()
            .flat_map(|s| s.display_names.iter())
            .find(|d| d.monitor_id == monitor)
            .map(|d| d.name.clone());
        if let Some(name) = display {
            return Ok(name);
        }
        let rows = self.store.monitors_by_ids(&[monitor.to_string()]).await?;
        let names: HashMap<String, String> = rows.into_iter().map(|m| (m.id, m.name)).collect();
        Ok(names
            .get(&monitor.to_string())
            .cloned()
            .unwrap_or_else(|| "A service".to_string()))
    }
}
